// Stand-ins for the CUDA plugin (runtime/cuda_plugin.h) that the loader must accept or refuse,
// built by tests/CMakeLists.txt as shared modules from this one file:
//   jaxpp_fake_plugin               the right ABI version and build id; it behaves like the real
//                                   plugin on a machine without a GPU (prepare_process fails)
//   jaxpp_fake_plugin_next_abi      FAKE_ABI_OFFSET=1: ABI version kCudaPluginAbiVersion + 1
//   jaxpp_fake_plugin_other_build   FAKE_BUILD="0.0.1 ...": the build id of another jaxpp-sim
//   jaxpp_fake_plugin_missing_lib   linked against libjaxpp_absent_for_tests.so, which is not on
//                                   the library path when the module is opened (as a plugin
//                                   whose CUDA libraries are not installed)
//   jaxpp_fake_plugin_no_entry      FAKE_NO_ENTRY_POINTS: a shared module that is no plugin
// No CUDA anywhere: these build and the loader tests run on every machine.
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda_plugin.h"

#ifndef FAKE_ABI_OFFSET
#define FAKE_ABI_OFFSET 0
#endif
#ifndef FAKE_BUILD
#define FAKE_BUILD JAXPP_CUDA_PLUGIN_BUILD_ID
#endif

#ifdef FAKE_NEEDS_ABSENT_LIBRARY
int jaxpp_absent_for_tests_value();  // defined in absent_library.cc
#endif

namespace {

class FakePlugin final : public jaxpp::CudaPlugin {
 public:
  int prepare_process() override {
    throw jaxpp::RuntimeFailure("--backend cuda: no CUDA device visible (fake CUDA plugin)");
  }
  std::vector<jaxpp::NcclId> make_nccl_ids(size_t count) override {
    return std::vector<jaxpp::NcclId>(count);
  }
  std::unique_ptr<jaxpp::Device> make_device(int) override { return nullptr; }
  void warm_up_compute(jaxpp::Device&, const jaxpp::MlpConfig&) override {}
  std::unique_ptr<jaxpp::CudaWorker> make_worker(jaxpp::Backend&, int, int, const jaxpp::CommPlan&,
                                                 const std::vector<jaxpp::NcclId>&, double,
                                                 const jaxpp::MlpConfig*) override {
    return nullptr;
  }
  std::string library_versions() override {
#ifdef FAKE_NEEDS_ABSENT_LIBRARY
    return "fake " + std::to_string(jaxpp_absent_for_tests_value());
#else
    return "fake CUDA plugin";
#endif
  }
};

}  // namespace

#ifndef FAKE_NO_ENTRY_POINTS
extern "C" {
__attribute__((visibility("default"))) int jaxpp_cuda_plugin_abi_version() {
  return jaxpp::kCudaPluginAbiVersion + FAKE_ABI_OFFSET;
}
__attribute__((visibility("default"))) const char* jaxpp_cuda_plugin_build() { return FAKE_BUILD; }
__attribute__((visibility("default"))) jaxpp::CudaPlugin* jaxpp_cuda_plugin_create() {
  static FakePlugin plugin;
  return &plugin;
}
}
#else
extern "C" __attribute__((visibility("default"))) int jaxpp_something_else() { return 1; }
#endif
