// Checked CUDA / cuBLAS / NCCL calls. Every call in runtime/cuda goes through one of these
// macros, so a failure reports file:line, the library's error string and the rank:
//   CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream));
//   rank 3: runtime/cuda/backend.cc:120: cudaMemcpyAsync(...) failed: an illegal memory access
// The rank is a thread-local set once by the executor (set_error_rank).
#pragma once

#include <stdexcept>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace jaxpp::cuda {

class CudaError : public std::runtime_error {
 public:
  explicit CudaError(const std::string& m) : std::runtime_error(m) {}
};

void set_error_rank(int rank);
int error_rank();
const char* cublas_status_string(cublasStatus_t status);
[[noreturn]] void fail(const char* file, int line, const char* expr, const std::string& what);

}  // namespace jaxpp::cuda

#define JAXPP_CUDA_CHECK(expr)                                                     \
  do {                                                                             \
    cudaError_t jaxpp_err_ = (expr);                                               \
    if (jaxpp_err_ != cudaSuccess)                                                 \
      ::jaxpp::cuda::fail(__FILE__, __LINE__, #expr, cudaGetErrorString(jaxpp_err_)); \
  } while (0)

#define JAXPP_CUBLAS_CHECK(expr)                                                          \
  do {                                                                                    \
    cublasStatus_t jaxpp_st_ = (expr);                                                    \
    if (jaxpp_st_ != CUBLAS_STATUS_SUCCESS)                                               \
      ::jaxpp::cuda::fail(__FILE__, __LINE__, #expr,                                      \
                          ::jaxpp::cuda::cublas_status_string(jaxpp_st_));                \
  } while (0)

#define JAXPP_NCCL_CHECK(expr)                                                     \
  do {                                                                             \
    ncclResult_t jaxpp_nr_ = (expr);                                               \
    if (jaxpp_nr_ != ncclSuccess)                                                  \
      ::jaxpp::cuda::fail(__FILE__, __LINE__, #expr, ncclGetErrorString(jaxpp_nr_)); \
  } while (0)
