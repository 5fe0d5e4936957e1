// The CUDA backend as a plugin: the interface between the runtime (threads, mpi, the executor,
// run_program, the microbenchmarks) and the shared module that holds the CUDA/cuBLAS/NCCL code
// (runtime/cuda/, built as libjaxpp_cuda.so when JAXPP_WITH_CUDA finds CUDA and NCCL).
//
// Nothing in jaxpp-sim links CUDA, cuBLAS or NCCL: the module is opened with dlopen the first time
// cuda_plugin() is called (`run --backend cuda`, `calibrate --backend cuda`, the GPU tests), so
// every other command starts without those libraries and on machines that lack them.
//
// ABI. The module exports three extern "C" functions (names below):
//   int         jaxpp_cuda_plugin_abi_version()  must equal kCudaPluginAbiVersion
//   const char* jaxpp_cuda_plugin_build()        must equal cuda_plugin_build_id() of the loader
//                                                 (project version + compiler + C++ library),
//                                                 since C++ objects (std::vector, std::unique_ptr,
//                                                 exceptions, the Backend/Device vtables) cross
//                                                 the boundary
//   jaxpp::CudaPlugin* jaxpp_cuda_plugin_create() the interface (owned by the module, never freed)
// Bump kCudaPluginAbiVersion whenever CudaPlugin, CudaWorker, Backend, Device, DeviceArray,
// CommPlan or MlpConfig change shape. The module is never unloaded.
//
// Search. The module file is libjaxpp_cuda.so. When JAXPP_PLUGIN_PATH is set (a ':'-separated
// list of directories) only those directories are searched; otherwise <dir of the running
// executable>/<relative path from bindir to libdir>/jaxpp-sim (the layout of both the build tree
// and an installed tree), then the configured install directory.
//
// Failures. cuda_plugin() throws RuntimeFailure with one line naming what is missing and how to
// get it: no module found (with the directories searched), a CUDA library the module needs that
// the dynamic loader cannot find (named, e.g. libcublas.so.13), a module of another ABI version or
// build, or a file that is not a plugin. The dynamic loader's own text is never shown.
//
// Usage:
//   CudaPlugin& cuda = cuda_plugin();           // loads once per process; throws RuntimeFailure
//   int gpus = cuda.prepare_process();          // before any other CUDA call
//   std::unique_ptr<Device> gpu0 = cuda.make_device(0);
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/comm_plan.h"
#include "runtime/device.h"
#include "runtime/workload.h"

// The build id, for the two translation units that define JAXPP_VERSION (the loader and the
// module); both are compiled by the same compiler against the same C++ library or they differ.
#define JAXPP_PLUGIN_STR2(x) #x
#define JAXPP_PLUGIN_STR(x) JAXPP_PLUGIN_STR2(x)
#define JAXPP_CUDA_PLUGIN_BUILD_ID \
  JAXPP_VERSION " " __VERSION__ " libstdc++ " JAXPP_PLUGIN_STR(__GLIBCXX__)

namespace jaxpp {

// 2: Device::memory_bytes (the device's total memory, for calibrate's hbm_gib).
inline constexpr int kCudaPluginAbiVersion = 2;
inline constexpr const char* kCudaPluginFileName = "libjaxpp_cuda.so";
inline constexpr const char* kCudaPluginAbiSymbol = "jaxpp_cuda_plugin_abi_version";
inline constexpr const char* kCudaPluginBuildSymbol = "jaxpp_cuda_plugin_build";
inline constexpr const char* kCudaPluginCreateSymbol = "jaxpp_cuda_plugin_create";

// Bytes of one ncclUniqueId (NCCL_UNIQUE_ID_BYTES, checked inside the module).
using NcclId = std::array<char, 128>;

// One (actor, replica) worker on one GPU: its CUDA device (compute stream, cuBLAS, the project's
// kernels) and its NCCL backend over a host `control` backend (runtime/cuda/cuda_run.h).
class CudaWorker {
 public:
  virtual ~CudaWorker() = default;
  virtual Device& device() = 0;
  virtual Backend& backend() = 0;
};

class CudaPlugin {
 public:
  virtual ~CudaPlugin() = default;
  // Sets the CUDA/NCCL environment of the process (docs/cuda.md) and returns the number of visible
  // GPUs; RuntimeFailure "--backend cuda: no CUDA device visible (...)" when there is none.
  virtual int prepare_process() = 0;
  // `count` fresh NCCL ids; this process hosts their bootstrap roots.
  virtual std::vector<NcclId> make_nccl_ids(size_t count) = 0;
  // A Device on GPU `device_index` (the calling thread's current device becomes that GPU).
  virtual std::unique_ptr<Device> make_device(int device_index) = 0;
  // Runs every kernel and GEMM layout of the MLP workload once at the shapes of `mlp`.
  virtual void warm_up_compute(Device& device, const MlpConfig& mlp) = 0;
  // A worker on GPU `device_index`; `warm_up`: the MLP sizes to warm up at, nullptr for none.
  virtual std::unique_ptr<CudaWorker> make_worker(Backend& control, int device_index, int worker_id,
                                                  const CommPlan& plan,
                                                  const std::vector<NcclId>& ids, double timeout_s,
                                                  const MlpConfig* warm_up) = 0;
  // "CUDA runtime 13.0, cuBLAS 13.0.0, NCCL 2.27.3": the versions the module was built against.
  virtual std::string library_versions() = 0;
};

// What the loader would do, without loading anything (for `jaxpp-sim --version`).
struct CudaPluginStatus {
  bool built = false;                 // this build of jaxpp-sim produced the module
  std::string path;                   // the module file found, empty when none
  std::vector<std::string> searched;  // the directories looked in, in order
};
CudaPluginStatus find_cuda_plugin();

// The loaded plugin (loaded on the first call, thread-safe). Throws RuntimeFailure (see above);
// later calls after a failure throw the same message again.
CudaPlugin& cuda_plugin();

// Loads the module at `path` and checks it, for tests: the same checks and messages as
// cuda_plugin(), without caching. The module stays loaded.
CudaPlugin& load_cuda_plugin(const std::string& path);

// "0.1.0 12.2.0 libstdc++ 20230528" (project version, compiler, C++ library): what a module must
// report to be accepted.
std::string cuda_plugin_build_id();

}  // namespace jaxpp

// Entry points a plugin defines (see the ABI above).
extern "C" {
int jaxpp_cuda_plugin_abi_version();
const char* jaxpp_cuda_plugin_build();
jaxpp::CudaPlugin* jaxpp_cuda_plugin_create();
}
