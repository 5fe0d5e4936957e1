# The Debian package (scripts/build.sh package; docs/install.md): CPack's DEB generator over the
# `runtime` install component (cmake/install.cmake): /usr/bin/jaxpp-sim, the CUDA plugin when
# built (/usr/<libdir>/jaxpp-sim/libjaxpp_cuda.so), the bash completion and the documentation.
# Written as jaxpp-sim_<version>_<arch>.deb in the build directory. Its Depends are computed when
# the package is made (cmake/cpack_project.cmake runs dpkg-shlibdeps on the built jaxpp-sim), so
# they name the Debian packages that hold the libraries the binary really links. The CUDA
# libraries of the plugin are not Debian packages (NVIDIA's installer puts them under
# /usr/local/cuda) and are not dependencies: without them `--backend cuda` says what is missing.
set(CPACK_PACKAGE_NAME jaxpp-sim)
set(CPACK_PACKAGE_VENDOR "jaxpp-sim")
set(CPACK_PACKAGE_CONTACT "jaxpp-sim maintainers <jaxpp-sim@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "plan, simulate and run MPMD pipeline-parallel training")
set(CPACK_PACKAGE_DESCRIPTION
    "jaxpp-sim builds task graphs of partitioned pipeline stages, evaluates pipeline schedules in
a discrete-event simulator driven by a calibrated cost model, searches the plan space, exports
timelines and runs the chosen plan on CPU threads, MPI processes or (with the CUDA plugin, which
needs CUDA 13 with cuBLAS and NCCL 2 from NVIDIA) CUDA GPUs.")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
set(CPACK_COMPONENTS_ALL runtime)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_PACKAGE_NAME jaxpp-sim)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openmpi-bin")  # mpirun, for --backend mpi
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)  # it would fail on the plugin's CUDA libraries
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_BINARY_DIR}/cpack_project.cmake)
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/cpack_project.cmake CONTENT
     "set(JAXPP_PACKAGE_BINARY \"$<TARGET_FILE:jaxpp-sim>\")\ninclude(\"${PROJECT_SOURCE_DIR}/cmake/cpack_project.cmake\")\n")
include(CPack)
