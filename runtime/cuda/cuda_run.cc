#include "runtime/cuda/cuda_run.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "runtime/cuda/check.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/nccl_backend.h"

namespace jaxpp::cuda {

static_assert(sizeof(NcclId) == NCCL_UNIQUE_ID_BYTES, "NcclId must hold an ncclUniqueId");

int prepare_process() {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
  setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  return require_device();
}

std::unique_ptr<Device> make_cuda_device(int device_index) {
  return std::make_unique<CudaDevice>(device_index);
}

// The calls of StageMath (runtime/workload.cc) with its shapes: t tokens, h hidden, f ffn;
// row-major activations t x h and t x f, weights h x f and f x h.
void warm_up_compute(Device& device, const MlpConfig& mlp) {
  const int t = mlp.seq, h = mlp.hidden, f = mlp.ffn_size();
  const size_t th = static_cast<size_t>(t) * h, tf = static_cast<size_t>(t) * f;
  const size_t hf = static_cast<size_t>(h) * f;
  DeviceArray x = device.zeros(th), y = device.zeros(th), dy = device.zeros(th);
  DeviceArray target = device.zeros(th), dx = device.zeros(th);
  DeviceArray u = device.zeros(tf), a = device.zeros(tf), da = device.zeros(tf);
  DeviceArray du = device.zeros(tf);
  DeviceArray params = device.zeros(2 * hf), grads = device.zeros(2 * hf);
  const double* w1 = params.data();
  const double* w2 = params.data() + hf;
  // Forward: u = x W1, a = gelu(u), y += a W2.
  device.gemm(false, false, t, f, h, x.data(), h, w1, f, 0.0, u.data(), f);
  device.gelu(u, a);
  device.gemm(false, false, t, h, f, a.data(), f, w2, h, 1.0, y.data(), h);
  (void)device.mse_loss(y, target, 1.0, dy);
  // Backward for the input: da = dy W2^T, du = da gelu'(u), dx += du W1^T.
  device.gemm(false, true, t, f, h, dy.data(), h, w2, h, 0.0, da.data(), f);
  device.gelu_backward(da, u, du);
  device.gemm(false, true, t, h, f, du.data(), f, w1, f, 1.0, dx.data(), h);
  // Backward for the weights, overwriting and accumulating: dW2 = a^T dy, dW1 = x^T du.
  for (double beta : {0.0, 1.0}) {
    device.gemm(true, false, f, h, t, a.data(), f, dy.data(), h, beta, grads.data() + hf, h);
    device.gemm(true, false, h, f, t, x.data(), h, du.data(), f, beta, grads.data(), f);
  }
  if (mlp.optimizer == OptimizerKind::kAdam) {
    DeviceArray m = device.zeros(params.size()), v = device.zeros(params.size());
    device.adam_step(params, grads, m, v, AdamStep{});
  } else {
    device.sgd_step(params, grads, 0.0);
  }
  DeviceArray copied = device.copy(x);
  device.synchronize();
}

int require_device() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // "no device" is an answer here, not a sticky failure
    throw RuntimeFailure(std::string("--backend cuda: no CUDA device visible (") +
                         (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") + ")");
  }
  return count;
}

Worker::Worker(Backend& control, int device_index, int worker_id, const CommPlan& plan,
               const std::vector<NcclId>& ids, double timeout_s, const MlpConfig* warm_up) {
  set_error_rank(worker_id);
  device_ = std::make_unique<CudaDevice>(device_index);
  if (warm_up != nullptr) warm_up_compute(*device_, *warm_up);
  backend_ = std::make_unique<NcclBackend>(control, *device_, plan, ids, timeout_s);
}

Worker::~Worker() {
  backend_.reset();
  device_.reset();
}

Device& Worker::device() { return *device_; }
Backend& Worker::backend() { return *backend_; }

}  // namespace jaxpp::cuda
