#include "runtime/cuda/cuda_device.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "runtime/cuda/check.h"
#include "runtime/cuda/kernels.h"

namespace jaxpp::cuda {
namespace {

constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;  // cuBLAS' own recommendation for Hopper

void require_same_size(const DeviceArray& a, const DeviceArray& b, const char* op) {
  if (a.size() != b.size())
    throw std::logic_error(std::string("CudaDevice::") + op + ": sizes differ (" +
                           std::to_string(a.size()) + " vs " + std::to_string(b.size()) + ")");
}

}  // namespace

CudaDevice::CudaDevice(int device_index) : index_(device_index) {
  JAXPP_CUDA_CHECK(cudaSetDevice(index_));
  JAXPP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  JAXPP_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  // Keep freed blocks in the pool instead of returning them to the driver at synchronizations.
  cudaMemPool_t pool = nullptr;
  JAXPP_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index_));
  uint64_t keep_all = UINT64_MAX;
  JAXPP_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  load_kernels();  // before any NCCL kernel can be in flight (kernels.h)
  JAXPP_CUBLAS_CHECK(cublasCreate(&blas_));
  JAXPP_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
  JAXPP_CUDA_CHECK(cudaMalloc(&blas_workspace_, kBlasWorkspaceBytes));
  JAXPP_CUBLAS_CHECK(cublasSetWorkspace(blas_, blas_workspace_, kBlasWorkspaceBytes));
  JAXPP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&loss_device_), sizeof(double)));
  JAXPP_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&loss_host_), sizeof(double)));
}

CudaDevice::~CudaDevice() {
  JAXPP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(stream_));
  JAXPP_CUBLAS_CHECK_NOTHROW(cublasDestroy(blas_));
  JAXPP_CUDA_CHECK_NOTHROW(cudaFree(blas_workspace_));
  JAXPP_CUDA_CHECK_NOTHROW(cudaFree(loss_device_));
  JAXPP_CUDA_CHECK_NOTHROW(cudaFreeHost(loss_host_));
  JAXPP_CUDA_CHECK_NOTHROW(cudaEventDestroy(ready_));
  JAXPP_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_));
}

int64_t CudaDevice::memory_bytes() const {
  JAXPP_CUDA_CHECK(cudaSetDevice(index_));  // cudaMemGetInfo answers for the current device
  size_t free_bytes = 0, total_bytes = 0;
  JAXPP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<int64_t>(total_bytes);
}

DeviceArray CudaDevice::alloc(size_t n) {
  if (n == 0) return {};
  void* p = nullptr;
  JAXPP_CUDA_CHECK(cudaMallocAsync(&p, n * sizeof(double), stream_));
  return DeviceArray(this, static_cast<double*>(p), n);
}

void CudaDevice::release(double* data, size_t) {
  JAXPP_CUDA_CHECK_NOTHROW(cudaFreeAsync(data, stream_));
}

void CudaDevice::fill_zero(DeviceArray& a) {
  if (a.empty()) return;
  JAXPP_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, a.size() * sizeof(double), stream_));
}

DeviceArray CudaDevice::upload(std::span<const double> host) {
  DeviceArray a = alloc(host.size());
  if (host.empty()) return a;
  JAXPP_CUDA_CHECK(
      cudaMemcpyAsync(a.data(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream_));
  JAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `host` may die when we return
  return a;
}

std::vector<double> CudaDevice::download(const DeviceArray& a) {
  std::vector<double> out(a.size());
  if (a.empty()) return out;
  JAXPP_CUDA_CHECK(cudaMemcpyAsync(out.data(), a.data(), a.size() * sizeof(double),
                                   cudaMemcpyDeviceToHost, stream_));
  JAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return out;
}

DeviceArray CudaDevice::copy(const DeviceArray& a) {
  DeviceArray b = alloc(a.size());
  if (a.empty()) return b;
  JAXPP_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), a.size() * sizeof(double),
                                   cudaMemcpyDeviceToDevice, stream_));
  return b;
}

void CudaDevice::gemm(bool trans_a, bool trans_b, int m, int n, int k, const double* a, int lda,
                      const double* b, int ldb, double beta, double* c, int ldc) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  const double alpha = 1.0;
  JAXPP_CUBLAS_CHECK(cublasDgemm(blas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a,
                                 lda, &beta, c, ldc));
}

void CudaDevice::gelu(const DeviceArray& u, DeviceArray& a) {
  require_same_size(u, a, "gelu");
  if (!u.empty()) launch_gelu(u.data(), a.data(), u.size(), stream_);
}

void CudaDevice::gelu_backward(const DeviceArray& da, const DeviceArray& u, DeviceArray& du) {
  require_same_size(da, u, "gelu_backward");
  require_same_size(da, du, "gelu_backward");
  if (!da.empty()) launch_gelu_backward(da.data(), u.data(), du.data(), da.size(), stream_);
}

double CudaDevice::mse_loss(const DeviceArray& y, const DeviceArray& t, double scale,
                            DeviceArray& dy) {
  require_same_size(y, t, "mse_loss");
  require_same_size(y, dy, "mse_loss");
  if (y.empty()) throw std::logic_error("CudaDevice::mse_loss: empty tensor");
  launch_mse_loss(y.data(), t.data(), scale, dy.data(), loss_device_, y.size(), stream_);
  JAXPP_CUDA_CHECK(
      cudaMemcpyAsync(loss_host_, loss_device_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  JAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *loss_host_;
}

void CudaDevice::sgd_step(DeviceArray& p, const DeviceArray& g, double lr) {
  require_same_size(p, g, "sgd_step");
  if (!p.empty()) launch_sgd(p.data(), g.data(), lr, p.size(), stream_);
}

void CudaDevice::adam_step(DeviceArray& p, const DeviceArray& g, DeviceArray& m, DeviceArray& v,
                           const AdamStep& step) {
  require_same_size(p, g, "adam_step");
  require_same_size(p, m, "adam_step");
  require_same_size(p, v, "adam_step");
  if (!p.empty()) launch_adam(p.data(), g.data(), m.data(), v.data(), step, p.size(), stream_);
}

void CudaDevice::synchronize() { JAXPP_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaDevice::order_before(cudaStream_t other) {
  JAXPP_CUDA_CHECK(cudaEventRecord(ready_, stream_));
  JAXPP_CUDA_CHECK(cudaStreamWaitEvent(other, ready_, 0));
}

}  // namespace jaxpp::cuda
