// The CUDA plugin module (libjaxpp_cuda.so): the CudaPlugin interface of runtime/cuda_plugin.h
// implemented with the code of this folder, and the three extern "C" entry points the loader
// looks up. Everything else in the module has hidden visibility.
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_run.h"
#include "runtime/cuda/device_query.h"
#include "runtime/cuda_plugin.h"

namespace jaxpp::cuda {
namespace {

class WorkerAdapter final : public CudaWorker {
 public:
  WorkerAdapter(Backend& control, int device_index, int worker_id, const CommPlan& plan,
                const std::vector<NcclId>& ids, double timeout_s, const MlpConfig* warm_up)
      : worker_(control, device_index, worker_id, plan, ids, timeout_s, warm_up) {}
  Device& device() override { return worker_.device(); }
  Backend& backend() override { return worker_.backend(); }

 private:
  Worker worker_;
};

class Plugin final : public CudaPlugin {
 public:
  int prepare_process() override { return cuda::prepare_process(); }
  std::vector<NcclId> make_nccl_ids(size_t count) override { return cuda::make_nccl_ids(count); }
  std::unique_ptr<Device> make_device(int device_index) override {
    return cuda::make_cuda_device(device_index);
  }
  void warm_up_compute(Device& device, const MlpConfig& mlp) override {
    cuda::warm_up_compute(device, mlp);
  }
  std::unique_ptr<CudaWorker> make_worker(Backend& control, int device_index, int worker_id,
                                          const CommPlan& plan, const std::vector<NcclId>& ids,
                                          double timeout_s, const MlpConfig* warm_up) override {
    return std::make_unique<WorkerAdapter>(control, device_index, worker_id, plan, ids, timeout_s,
                                           warm_up);
  }
  std::string library_versions() override { return cuda::library_versions(); }
};

}  // namespace
}  // namespace jaxpp::cuda

#define JAXPP_PLUGIN_EXPORT __attribute__((visibility("default")))

extern "C" {

JAXPP_PLUGIN_EXPORT int jaxpp_cuda_plugin_abi_version() { return jaxpp::kCudaPluginAbiVersion; }

JAXPP_PLUGIN_EXPORT const char* jaxpp_cuda_plugin_build() { return JAXPP_CUDA_PLUGIN_BUILD_ID; }

JAXPP_PLUGIN_EXPORT jaxpp::CudaPlugin* jaxpp_cuda_plugin_create() {
  static jaxpp::cuda::Plugin plugin;
  return &plugin;
}

}  // extern "C"
