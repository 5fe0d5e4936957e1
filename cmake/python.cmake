# JAXPP_WITH_PYTHON (AUTO|ON|OFF): the Python module jaxpp_sim (python/, docs/python.md), built with
# Debian's pybind11 against Debian's Python 3. AUTO builds it when both are found, ON requires them,
# OFF skips it. The module is a shared object that links the static libraries, so they are compiled
# as position-independent code when it is built.
set(JAXPP_PYTHON_ENABLED OFF)
if(JAXPP_WITH_PYTHON STREQUAL "OFF")
  message(STATUS "jaxpp-sim: Python module disabled (JAXPP_WITH_PYTHON=OFF)")
else()
  if(JAXPP_WITH_PYTHON STREQUAL "ON")
    set(_jaxpp_py_required REQUIRED)
  else()
    set(_jaxpp_py_required QUIET)
  endif()
  # Debian's Python (/usr/bin/python3) is the one Debian's pybind11, pytest, numpy, pandas and
  # matplotlib belong to: prefer it to another python3 earlier in PATH (pyenv, conda).
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 COMPONENTS Interpreter Development.Module ${_jaxpp_py_required})
  if(Python3_FOUND)
    find_package(pybind11 CONFIG ${_jaxpp_py_required})
  endif()
  if(Python3_FOUND AND pybind11_FOUND)
    set(JAXPP_PYTHON_ENABLED ON)
    set(CMAKE_POSITION_INDEPENDENT_CODE ON)
    message(STATUS "jaxpp-sim: Python module enabled (Python ${Python3_VERSION}, pybind11 ${pybind11_VERSION})")
  else()
    message(STATUS "jaxpp-sim: Python module disabled (Python 3 development files or pybind11 not found)")
  endif()
endif()
