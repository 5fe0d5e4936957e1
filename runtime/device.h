// Device: where one worker's tensors live and the handful of fp64 kernels the MLP workload
// (runtime/workload.h) runs on them. The workload's control logic (which tensor is stashed,
// consumed or freed when) is written once against this interface; only the kernels differ:
//   HostDevice           host memory, OpenBLAS cblas_dgemm and plain loops (threads, mpi)
//   cuda::CudaDevice     GPU memory, cuBLAS cublasDgemm and CUDA kernels on one compute stream
//                        (runtime/cuda/cuda_device.h)
//
// DeviceArray is a move-only owning handle of `size()` doubles allocated by a Device; its memory
// is released through the same Device when the handle dies. `data()` is a pointer in the
// device's memory space: callers pass it (plus offsets) back to the device's operations and never
// dereference it themselves unless space() == MemorySpace::kHost. Matrices are row-major.
//
// Ordering: operations of one Device run in the order they are issued (a CUDA device queues them
// on its compute stream). Results read by the host (download, mse_loss) are complete when those
// calls return. synchronize() waits for everything issued so far; the workload calls it at the
// end of every instruction so that host timestamps bracket the device work.
//
// Usage:
//   HostDevice& dev = host_device();
//   DeviceArray x = dev.upload(host_values);
//   DeviceArray y = dev.alloc(n);
//   dev.gemm(false, false, m, n, k, x.data(), k, w.data(), n, 0.0, y.data(), n);
//   std::vector<double> back = dev.download(y);
//   int64_t bytes = dev.memory_bytes();  // what calibration reports as the rank's hbm_gib
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace jaxpp {

enum class MemorySpace { kHost, kCuda };
std::string_view to_string(MemorySpace s);  // "host", "cuda"

class Device;

class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Device* owner, double* data, size_t size) : owner_(owner), data_(data), size_(size) {}
  DeviceArray(DeviceArray&& other) noexcept { swap(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { reset(); }

  double* data() { return data_; }
  const double* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t bytes() const { return static_cast<int64_t>(size_ * sizeof(double)); }
  Device* device() const { return owner_; }
  // Host memory (or nothing at all): data() may be dereferenced by the caller.
  bool on_host() const;
  // Releases the memory now (the handle becomes empty).
  void reset();

 private:
  void swap(DeviceArray& other) noexcept;
  Device* owner_ = nullptr;
  double* data_ = nullptr;
  size_t size_ = 0;
};

// Adam hyper-parameters of one optimizer step; bias corrections are 1 - beta^(step + 1).
struct AdamStep {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double bias_correction1 = 1;
  double bias_correction2 = 1;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual MemorySpace space() const = 0;
  // Bytes of memory the device has in all, in use or not: a GPU's total memory as its driver
  // reports it (cuda::CudaDevice: cudaMemGetInfo), the host's physical memory for HostDevice
  // (shared by every worker of the host; 0 when the system does not say). `calibrate` writes it
  // per rank as the cluster's hbm_gib.
  virtual int64_t memory_bytes() const = 0;

  // Memory. alloc leaves the contents undefined; zeros fills with 0.
  virtual DeviceArray alloc(size_t n) = 0;
  DeviceArray zeros(size_t n);
  virtual void fill_zero(DeviceArray& a) = 0;
  virtual DeviceArray upload(std::span<const double> host) = 0;
  virtual std::vector<double> download(const DeviceArray& a) = 0;
  virtual DeviceArray copy(const DeviceArray& a) = 0;

  // C (m x n) = op(A) op(B) + beta * C, row-major, fp64; pointers in this device's memory.
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, const double* a, int lda,
                    const double* b, int ldb, double beta, double* c, int ldc) = 0;
  // a[i] = gelu(u[i]) (tanh approximation, runtime/mlp_math.h).
  virtual void gelu(const DeviceArray& u, DeviceArray& a) = 0;
  // du[i] = da[i] * gelu'(u[i]).
  virtual void gelu_backward(const DeviceArray& da, const DeviceArray& u, DeviceArray& du) = 0;
  // Returns sum((y - t)^2) / n and sets dy[i] = scale * (y[i] - t[i]); dy has y's size.
  virtual double mse_loss(const DeviceArray& y, const DeviceArray& t, double scale,
                          DeviceArray& dy) = 0;
  // p -= lr * g.
  virtual void sgd_step(DeviceArray& p, const DeviceArray& g, double lr) = 0;
  // Adam moments m, v (same size as p) updated in place, then p updated.
  virtual void adam_step(DeviceArray& p, const DeviceArray& g, DeviceArray& m, DeviceArray& v,
                         const AdamStep& step) = 0;
  // Waits until every operation issued so far has finished.
  virtual void synchronize() = 0;

 protected:
  friend class DeviceArray;
  virtual void release(double* data, size_t n) = 0;
};

// Host memory, OpenBLAS and loops; stateless, so one instance serves every thread.
class HostDevice : public Device {
 public:
  MemorySpace space() const override { return MemorySpace::kHost; }
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
  void synchronize() override {}

 protected:
  void release(double* data, size_t n) override;
};

// The process-wide HostDevice.
HostDevice& host_device();

}  // namespace jaxpp
