// CudaDevice: the Device (runtime/device.h) of one GPU. Tensors are stream-ordered allocations
// (cudaMallocAsync / cudaFreeAsync) on the device's compute stream; GEMMs are cuBLAS cublasDgemm
// on that stream (row-major operands passed as their column-major transposes), the element-wise
// work is the kernels of runtime/cuda/kernels.cu.
//
// Streams and ordering: every operation of this class is queued on the one compute stream, so
// they run in issue order. A communication stream that reads or writes a tensor first waits for
// the compute stream (record_compute + cudaStreamWaitEvent); the compute stream never waits for a
// communication stream, so a blocked NCCL transfer can never stall a compute. A tensor used by a
// communication stream is released only after the host has seen that use complete.
// download, upload and mse_loss synchronize the compute stream before returning (host buffers
// are pageable and short-lived); synchronize() waits for the compute stream.
//
// No device-wide synchronizing call (cudaMalloc, cudaFree, cudaDeviceSynchronize) is made between
// construction and destruction, so NCCL kernels waiting on other streams cannot deadlock the host.
// cuBLAS gets a workspace at construction for the same reason, and the project's kernels are
// loaded then (load_kernels, kernels.h), not at their first launch.
//
// Threading: construct, use and destroy a CudaDevice on one thread; the constructor makes its
// GPU the thread's current device. Every DeviceArray it allocated must be released before it is
// destroyed.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "runtime/device.h"

namespace jaxpp::cuda {

class CudaDevice : public Device {
 public:
  explicit CudaDevice(int device_index);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  MemorySpace space() const override { return MemorySpace::kCuda; }
  // The GPU's total memory (cudaMemGetInfo on this device).
  int64_t memory_bytes() const override;
  DeviceArray alloc(size_t n) override;
  void fill_zero(DeviceArray& a) override;
  DeviceArray upload(std::span<const double> host) override;
  std::vector<double> download(const DeviceArray& a) override;
  DeviceArray copy(const DeviceArray& a) override;
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, const double* a, int lda,
            const double* b, int ldb, double beta, double* c, int ldc) override;
  void gelu(const DeviceArray& u, DeviceArray& a) override;
  void gelu_backward(const DeviceArray& da, const DeviceArray& u, DeviceArray& du) override;
  double mse_loss(const DeviceArray& y, const DeviceArray& t, double scale,
                  DeviceArray& dy) override;
  void sgd_step(DeviceArray& p, const DeviceArray& g, double lr) override;
  void adam_step(DeviceArray& p, const DeviceArray& g, DeviceArray& m, DeviceArray& v,
                 const AdamStep& step) override;
  void synchronize() override;

  int index() const { return index_; }
  cudaStream_t stream() const { return stream_; }
  // Makes `other` wait for everything issued on the compute stream so far.
  void order_before(cudaStream_t other);

 protected:
  void release(double* data, size_t n) override;

 private:
  int index_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // recorded by order_before
  cublasHandle_t blas_ = nullptr;
  void* blas_workspace_ = nullptr;
  double* loss_device_ = nullptr;  // one double: mse_loss result
  double* loss_host_ = nullptr;    // pinned copy of it
};

}  // namespace jaxpp::cuda
