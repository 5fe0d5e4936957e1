# What `cmake --install` puts where (GNUInstallDirs; docs/install.md), and the CMake package
# jaxpp_sim (find_package(jaxpp_sim CONFIG) -> jaxpp::graph, jaxpp::schedules, ...).
#   component runtime      bin/jaxpp-sim, the CUDA plugin (libdir/jaxpp-sim/libjaxpp_cuda.so, when
#                          built), the bash completion, the documentation
#   component development  the libraries (static, libdir), their headers
#                          (includedir/jaxpp-sim/<folder>/*.h), the CMake package
#                          (libdir/cmake/jaxpp_sim)
# The Debian package (scripts/build.sh package, CPack below) holds the runtime component.
include(CMakePackageConfigHelpers)

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
        COMPONENT runtime FILES_MATCHING PATTERN "*.md")

set(JAXPP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/jaxpp_sim)
install(EXPORT jaxpp_simTargets NAMESPACE jaxpp:: DESTINATION ${JAXPP_CMAKE_DIR}
        COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/jaxpp_simConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/jaxpp_simConfig.cmake
                              INSTALL_DESTINATION ${JAXPP_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/jaxpp_simConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/jaxpp_simConfig.cmake
              ${CMAKE_BINARY_DIR}/jaxpp_simConfigVersion.cmake
        DESTINATION ${JAXPP_CMAKE_DIR} COMPONENT development)
