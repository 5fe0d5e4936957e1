# Decides whether the CUDA backend (runtime/cuda) is built.
#   JAXPP_WITH_CUDA=AUTO  build it when a CUDA toolkit with cuBLAS, nccl.h and libnccl is found
#   JAXPP_WITH_CUDA=ON    require it (configure fails with the missing piece named)
#   JAXPP_WITH_CUDA=OFF   never build it
# Sets JAXPP_CUDA_ENABLED and, when enabled, the imported target jaxpp::nccl.
set(JAXPP_CUDA_ENABLED OFF)
if(NOT JAXPP_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  set(_jaxpp_cuda_missing "")
  if(NOT CUDAToolkit_FOUND)
    set(_jaxpp_cuda_missing "CUDA toolkit")
  elseif(NOT TARGET CUDA::cublas)
    set(_jaxpp_cuda_missing "cuBLAS")
  else()
    find_path(JAXPP_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_ROOT}/include)
    find_library(JAXPP_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_ROOT}/lib64)
    if(NOT JAXPP_NCCL_INCLUDE_DIR OR NOT JAXPP_NCCL_LIBRARY)
      set(_jaxpp_cuda_missing "NCCL (nccl.h and libnccl)")
    endif()
  endif()
  if(NOT _jaxpp_cuda_missing STREQUAL "")
    if(JAXPP_WITH_CUDA STREQUAL "ON")
      message(FATAL_ERROR "JAXPP_WITH_CUDA=ON but ${_jaxpp_cuda_missing} was not found")
    endif()
    message(STATUS "CUDA backend: off (${_jaxpp_cuda_missing} not found)")
  else()
    include(CheckLanguage)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE} CACHE FILEPATH "nvcc")
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      # Before enable_language, which would otherwise pick nvcc's default. Machine code for Turing
      # (the oldest GPU CUDA 13 supports), Ampere, Hopper, Blackwell data centre (B200/GB200;
      # B300 runs it too) and Blackwell workstation (RTX 50xx / RTX PRO), plus Hopper PTX, which
      # the driver compiles for any newer GPU without machine code here (Thor, future ones).
      # Each architecture adds about 1 s of CPU to kernels.cu (docs/cuda.md).
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
        set(CMAKE_CUDA_ARCHITECTURES 75-real 80-real 90 100-real 120-real)
      endif()
      # One CUDA runtime in the process: the shared libcudart that CUDA::cudart, cuBLAS and NCCL
      # use, not a second, static copy in the objects nvcc links (CMake's default for nvcc).
      if(NOT DEFINED CMAKE_CUDA_RUNTIME_LIBRARY)
        set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
      endif()
      enable_language(CUDA)
      # CMake before 3.26 does not know nvcc's C++20 flag (nvcc has it since CUDA 12.0).
      if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
        set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
        set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      endif()
      set(CMAKE_CUDA_STANDARD 20)
      set(CMAKE_CUDA_STANDARD_REQUIRED ON)
      add_library(jaxpp_nccl UNKNOWN IMPORTED)
      set_target_properties(jaxpp_nccl PROPERTIES IMPORTED_LOCATION ${JAXPP_NCCL_LIBRARY}
                                                  INTERFACE_INCLUDE_DIRECTORIES ${JAXPP_NCCL_INCLUDE_DIR})
      add_library(jaxpp::nccl ALIAS jaxpp_nccl)
      set(JAXPP_CUDA_ENABLED ON)
      message(STATUS "CUDA backend: on (CUDA ${CUDAToolkit_VERSION}, NCCL ${JAXPP_NCCL_LIBRARY})")
    elseif(JAXPP_WITH_CUDA STREQUAL "ON")
      message(FATAL_ERROR "JAXPP_WITH_CUDA=ON but no working CUDA compiler (nvcc) was found")
    else()
      message(STATUS "CUDA backend: off (nvcc not usable)")
    endif()
  endif()
endif()
