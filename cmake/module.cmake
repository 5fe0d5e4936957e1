# jaxpp_module(<name> <link args...>): one folder = one library, sources = <folder>/*.cc.
# A folder without sources yet becomes an INTERFACE library so the tree always configures.
# Each library is also jaxpp::<name without the jaxpp_ prefix> (jaxpp_graph -> jaxpp::graph), in
# the build tree (an ALIAS) and in the installed CMake package (the export set jaxpp_simTargets):
# the library goes to libdir and the folder's headers to includedir/jaxpp-sim/<folder>/, so that
# `#include "graph/model.h"` reads the same inside and outside the project.
function(jaxpp_module name)
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  set(_include_dirs $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/jaxpp-sim>)
  if(_srcs)
    add_library(${name} STATIC ${_srcs})
    target_include_directories(${name} PUBLIC ${_include_dirs})
    target_link_libraries(${name} ${ARGN})
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${_include_dirs})
    string(REPLACE "PUBLIC" "INTERFACE" _args "${ARGN}")
    list(FILTER _args EXCLUDE REGEX "^PRIVATE$")
    target_link_libraries(${name} ${_args})
  endif()
  string(REGEX REPLACE "^jaxpp_" "" _short ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${_short})
  add_library(jaxpp::${_short} ALIAS ${name})
  install(TARGETS ${name} EXPORT jaxpp_simTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
  file(RELATIVE_PATH _folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/jaxpp-sim/${_folder} COMPONENT development
          FILES_MATCHING PATTERN "*.h" PATTERN "cuda" EXCLUDE)
endfunction()
