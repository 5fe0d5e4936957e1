# Read by cpack (CPACK_PROJECT_CONFIG_FILE, see cmake/package.cmake) when it makes the Debian
# package: the Depends field from dpkg-shlibdeps on the built jaxpp-sim (JAXPP_PACKAGE_BINARY),
# and the file name jaxpp-sim_<version>_<arch>.deb.
if(NOT CPACK_GENERATOR STREQUAL "DEB")
  return()
endif()
find_program(JAXPP_DPKG_SHLIBDEPS dpkg-shlibdeps)
find_program(JAXPP_DPKG dpkg)
if(NOT JAXPP_DPKG_SHLIBDEPS OR NOT JAXPP_DPKG)
  message(FATAL_ERROR "the Debian package needs dpkg-shlibdeps (apt-get install dpkg-dev)")
endif()
execute_process(COMMAND ${JAXPP_DPKG} --print-architecture OUTPUT_VARIABLE _jaxpp_arch
                OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
# dpkg-shlibdeps reads debian/control from the current directory: give it a minimal one.
set(_jaxpp_work ${CPACK_PACKAGE_DIRECTORY}/_CPack_Packages/jaxpp-shlibdeps)
file(MAKE_DIRECTORY ${_jaxpp_work}/debian)
file(WRITE ${_jaxpp_work}/debian/control
     "Source: jaxpp-sim\n\nPackage: jaxpp-sim\nArchitecture: any\n")
execute_process(COMMAND ${JAXPP_DPKG_SHLIBDEPS} -O -e ${JAXPP_PACKAGE_BINARY}
                WORKING_DIRECTORY ${_jaxpp_work} OUTPUT_VARIABLE _jaxpp_shlibs
                ERROR_VARIABLE _jaxpp_shlibs_err RESULT_VARIABLE _jaxpp_rc)
if(NOT _jaxpp_rc EQUAL 0 OR NOT _jaxpp_shlibs MATCHES "shlibs:Depends=([^\n]*)")
  message(FATAL_ERROR "dpkg-shlibdeps failed on ${JAXPP_PACKAGE_BINARY}: ${_jaxpp_shlibs_err}")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${CMAKE_MATCH_1}")
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${_jaxpp_arch})
set(CPACK_DEBIAN_FILE_NAME "jaxpp-sim_${CPACK_PACKAGE_VERSION}_${_jaxpp_arch}.deb")
message(STATUS "jaxpp-sim package: Depends: ${CPACK_DEBIAN_PACKAGE_DEPENDS}")
