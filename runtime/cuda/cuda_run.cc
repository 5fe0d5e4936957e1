#include "runtime/cuda/cuda_run.h"

#include <cuda_runtime.h>

#include <string>

#include "runtime/backend.h"

namespace jaxpp::cuda {

void require_device() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    throw RuntimeFailure(std::string("--backend cuda: no CUDA device visible (") +
                         (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") + ")");
}

}  // namespace jaxpp::cuda
