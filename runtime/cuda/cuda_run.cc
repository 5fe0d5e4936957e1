#include "runtime/cuda/cuda_run.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "runtime/cuda/check.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/nccl_backend.h"

namespace jaxpp::cuda {

static_assert(sizeof(NcclId) == NCCL_UNIQUE_ID_BYTES, "NcclId must hold an ncclUniqueId");

int prepare_process() {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
  return require_device();
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
               const std::vector<NcclId>& ids, double timeout_s) {
  set_error_rank(worker_id);
  device_ = std::make_unique<CudaDevice>(device_index);
  backend_ = std::make_unique<NcclBackend>(control, *device_, plan, ids, timeout_s);
}

Worker::~Worker() {
  backend_.reset();
  device_.reset();
}

Device& Worker::device() { return *device_; }
Backend& Worker::backend() { return *backend_; }

}  // namespace jaxpp::cuda
