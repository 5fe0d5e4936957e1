#include "tests/gpu/gpu_env.h"

#include "runtime/backend.h"
#include "runtime/cuda/cuda_run.h"

namespace jaxpp::testing {

int visible_gpus() {
  static const int count = [] {
    try {
      return cuda::prepare_process();
    } catch (const RuntimeFailure&) {  // "no CUDA device visible (...)"
      return 0;
    }
  }();
  return count;
}

}  // namespace jaxpp::testing
