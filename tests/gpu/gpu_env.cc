#include "tests/gpu/gpu_env.h"

#include <string>

#include "runtime/backend.h"
#include "runtime/cuda_plugin.h"

namespace jaxpp::testing {
namespace {

struct GpuEnv {
  int gpus = 0;
  std::string plugin_error;  // non-empty when the CUDA plugin did not load
};

const GpuEnv& env() {
  static const GpuEnv e = [] {
    GpuEnv out;
    CudaPlugin* plugin = nullptr;
    try {
      plugin = &cuda_plugin();
    } catch (const RuntimeFailure& error) {  // the suite is built only with the plugin
      out.plugin_error = error.what();
      return out;
    }
    try {
      out.gpus = plugin->prepare_process();
    } catch (const RuntimeFailure&) {  // "no CUDA device visible (...)"
      out.gpus = 0;
    }
    return out;
  }();
  return e;
}

}  // namespace

int visible_gpus() { return env().gpus; }

std::string cuda_plugin_error() { return env().plugin_error; }

}  // namespace jaxpp::testing
