// Checked CUDA / cuBLAS / NCCL calls. Every call in runtime/cuda goes through one of these
// macros, so a failure reports the rank, file:line, the call and the library's error string:
//   JAXPP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream));
//   -> CudaError "rank 3: runtime/cuda/cuda_device.cc:120: cudaMemcpyAsync(...) failed: an
//      illegal memory access was encountered"
// CudaError is a RuntimeFailure (a run that started and failed). The rank is a thread-local set
// once per worker thread or process (set_error_rank); -1 before that.
// JAXPP_CUDA_CHECK_NOTHROW is for destructors and release paths, which must not throw: it prints
// the same message on stderr and carries on.
// JAXPP_NCCL_CHECK accepts ncclSuccess only. JAXPP_NCCL_CHECK_NONBLOCKING also accepts
// ncclInProgress, the answer of a call on a non-blocking communicator that is still working; the
// caller must then poll ncclCommGetAsyncError until the communicator is ready
// (nccl_backend.cc). JAXPP_CUDA_CHECK_LAUNCH checks a kernel launch (cudaGetLastError); a stale
// cudaErrorNotReady left by an earlier cudaEventQuery is not a launch failure.
#pragma once

#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "runtime/backend.h"

namespace jaxpp::cuda {

class CudaError : public RuntimeFailure {
 public:
  explicit CudaError(const std::string& m) : RuntimeFailure(m) {}
};

void set_error_rank(int rank);
int error_rank();
const char* cublas_status_string(cublasStatus_t status);
// "rank R: file:line: expr failed: what"
std::string failure_message(const char* file, int line, const char* expr, const std::string& what);
[[noreturn]] void fail(const char* file, int line, const char* expr, const std::string& what);
void warn(const char* file, int line, const char* expr, const std::string& what);

}  // namespace jaxpp::cuda

#define JAXPP_CUDA_CHECK(expr)                                                        \
  do {                                                                                \
    cudaError_t jaxpp_err_ = (expr);                                                  \
    if (jaxpp_err_ != cudaSuccess)                                                    \
      ::jaxpp::cuda::fail(__FILE__, __LINE__, #expr, cudaGetErrorString(jaxpp_err_)); \
  } while (0)

#define JAXPP_CUDA_CHECK_NOTHROW(expr)                                                \
  do {                                                                                \
    cudaError_t jaxpp_err_ = (expr);                                                  \
    if (jaxpp_err_ != cudaSuccess)                                                    \
      ::jaxpp::cuda::warn(__FILE__, __LINE__, #expr, cudaGetErrorString(jaxpp_err_)); \
  } while (0)

#define JAXPP_CUDA_CHECK_LAUNCH()                                                               \
  do {                                                                                          \
    cudaError_t jaxpp_err_ = cudaGetLastError();                                                \
    if (jaxpp_err_ != cudaSuccess && jaxpp_err_ != cudaErrorNotReady)                           \
      ::jaxpp::cuda::fail(__FILE__, __LINE__, "kernel launch", cudaGetErrorString(jaxpp_err_)); \
  } while (0)

#define JAXPP_CUBLAS_CHECK(expr)                                           \
  do {                                                                     \
    cublasStatus_t jaxpp_st_ = (expr);                                     \
    if (jaxpp_st_ != CUBLAS_STATUS_SUCCESS)                                \
      ::jaxpp::cuda::fail(__FILE__, __LINE__, #expr,                       \
                          ::jaxpp::cuda::cublas_status_string(jaxpp_st_)); \
  } while (0)

#define JAXPP_CUBLAS_CHECK_NOTHROW(expr)                                   \
  do {                                                                     \
    cublasStatus_t jaxpp_st_ = (expr);                                     \
    if (jaxpp_st_ != CUBLAS_STATUS_SUCCESS)                                \
      ::jaxpp::cuda::warn(__FILE__, __LINE__, #expr,                       \
                          ::jaxpp::cuda::cublas_status_string(jaxpp_st_)); \
  } while (0)

#define JAXPP_NCCL_CHECK(expr)                                                       \
  do {                                                                               \
    ncclResult_t jaxpp_nr_ = (expr);                                                 \
    if (jaxpp_nr_ != ncclSuccess)                                                    \
      ::jaxpp::cuda::fail(__FILE__, __LINE__, #expr, ncclGetErrorString(jaxpp_nr_)); \
  } while (0)

#define JAXPP_NCCL_CHECK_NOTHROW(expr)                                               \
  do {                                                                               \
    ncclResult_t jaxpp_nr_ = (expr);                                                 \
    if (jaxpp_nr_ != ncclSuccess)                                                    \
      ::jaxpp::cuda::warn(__FILE__, __LINE__, #expr, ncclGetErrorString(jaxpp_nr_)); \
  } while (0)

#define JAXPP_NCCL_CHECK_NONBLOCKING(expr)                                           \
  do {                                                                               \
    ncclResult_t jaxpp_nr_ = (expr);                                                 \
    if (jaxpp_nr_ != ncclSuccess && jaxpp_nr_ != ncclInProgress)                     \
      ::jaxpp::cuda::fail(__FILE__, __LINE__, #expr, ncclGetErrorString(jaxpp_nr_)); \
  } while (0)
