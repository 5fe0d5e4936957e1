#include "runtime/cuda_plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

// Set by runtime/CMakeLists.txt.
#ifndef JAXPP_VERSION
#error "JAXPP_VERSION must be defined"
#endif
#ifndef JAXPP_PLUGIN_RELDIR
#define JAXPP_PLUGIN_RELDIR "../lib/jaxpp-sim"
#endif
#ifndef JAXPP_PLUGIN_INSTALL_DIR
#define JAXPP_PLUGIN_INSTALL_DIR ""
#endif
#ifndef JAXPP_CUDA_PLUGIN_BUILT
#define JAXPP_CUDA_PLUGIN_BUILT 0
#endif

namespace jaxpp {
namespace {

constexpr const char* kHowToGetCuda =
    "install CUDA 13 with cuBLAS and NCCL 2 (NVIDIA's packages put them under /usr/local/cuda), "
    "or add the directory that holds it to LD_LIBRARY_PATH; docs/cuda.md";

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string executable_dir() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "";
  std::string exe(buf.data(), static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

std::vector<std::string> search_dirs() {
  std::vector<std::string> dirs;
  const char* env = std::getenv("JAXPP_PLUGIN_PATH");
  if (env != nullptr && *env != '\0') {
    std::string_view rest(env);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) dirs.emplace_back(dir);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
    return dirs;
  }
  const std::string exe_dir = executable_dir();
  if (!exe_dir.empty()) dirs.push_back(exe_dir + "/" + JAXPP_PLUGIN_RELDIR);
  const std::string install_dir = JAXPP_PLUGIN_INSTALL_DIR;
  if (!install_dir.empty() && (dirs.empty() || dirs.back() != install_dir))
    dirs.push_back(install_dir);
  return dirs;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// The dynamic loader's reason for not opening `path`, in our own words (one line).
std::string explain_dlopen_failure(const std::string& path, const std::string& loader_text) {
  // "libcublas.so.13: cannot open shared object file: No such file or directory"
  const std::string missing_marker = ": cannot open shared object file";
  const size_t at = loader_text.find(missing_marker);
  if (at != std::string::npos) {
    size_t begin = loader_text.rfind(' ', at);
    begin = begin == std::string::npos ? 0 : begin + 1;
    std::string library = loader_text.substr(begin, at - begin);
    if (library.find('/') != std::string::npos) library = library.substr(library.rfind('/') + 1);
    if (!library.empty() && library != kCudaPluginFileName && path.size() >= library.size() &&
        path.compare(path.size() - library.size(), library.size(), library) != 0)
      return "--backend cuda: the CUDA plugin " + path + " needs " + library +
             ", which is not installed or not on the library path (" + kHowToGetCuda + ")";
  }
  std::string reason = "not a shared library for this machine";
  if (loader_text.find("undefined symbol") != std::string::npos)
    reason = "it was built against other CUDA, NCCL or jaxpp-sim libraries";
  return "--backend cuda: " + path + " is not a usable jaxpp-sim CUDA plugin (" + reason +
         "); reinstall jaxpp-sim or rebuild it with -DJAXPP_WITH_CUDA=ON";
}

}  // namespace

std::string cuda_plugin_build_id() { return JAXPP_CUDA_PLUGIN_BUILD_ID; }

CudaPluginStatus find_cuda_plugin() {
  CudaPluginStatus status;
  status.built = JAXPP_CUDA_PLUGIN_BUILT != 0;
  status.searched = search_dirs();
  for (const std::string& dir : status.searched) {
    const std::string candidate = dir + "/" + kCudaPluginFileName;
    if (is_file(candidate)) {
      char resolved[PATH_MAX];
      status.path = ::realpath(candidate.c_str(), resolved) != nullptr ? resolved : candidate;
      break;
    }
  }
  return status;
}

CudaPlugin& load_cuda_plugin(const std::string& path) {
  if (!is_file(path))
    throw RuntimeFailure("--backend cuda: the CUDA plugin " + path + " does not exist");
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* text = ::dlerror();
    throw RuntimeFailure(explain_dlopen_failure(path, text != nullptr ? text : ""));
  }
  auto symbol = [&](const char* name) {
    void* s = ::dlsym(handle, name);
    if (s == nullptr)
      throw RuntimeFailure("--backend cuda: " + path +
                           " is not a jaxpp-sim CUDA plugin (it has no " + name +
                           "); reinstall jaxpp-sim or rebuild it with -DJAXPP_WITH_CUDA=ON");
    return s;
  };
  const auto abi_version = reinterpret_cast<int (*)()>(symbol(kCudaPluginAbiSymbol));
  const auto build = reinterpret_cast<const char* (*)()>(symbol(kCudaPluginBuildSymbol));
  const auto create = reinterpret_cast<CudaPlugin* (*)()>(symbol(kCudaPluginCreateSymbol));
  const int abi = abi_version();
  if (abi != kCudaPluginAbiVersion)
    throw RuntimeFailure("--backend cuda: " + path + " has plugin ABI version " +
                         std::to_string(abi) + ", this jaxpp-sim needs version " +
                         std::to_string(kCudaPluginAbiVersion) +
                         " (install the plugin built with this jaxpp-sim; jaxpp-sim --version)");
  const std::string theirs = build() != nullptr ? build() : "";
  if (theirs != cuda_plugin_build_id())
    throw RuntimeFailure("--backend cuda: " + path + " was built as '" + theirs +
                         "', this jaxpp-sim is '" + cuda_plugin_build_id() +
                         "' (install the plugin built with this jaxpp-sim; jaxpp-sim --version)");
  CudaPlugin* plugin = create();
  if (plugin == nullptr)
    throw RuntimeFailure("--backend cuda: " + path + " did not create its plugin object");
  return *plugin;
}

CudaPlugin& cuda_plugin() {
  static std::once_flag once;
  static CudaPlugin* plugin = nullptr;
  static std::string error;
  std::call_once(once, [] {
    try {
      const CudaPluginStatus status = find_cuda_plugin();
      if (status.path.empty()) {
        if (!status.built && std::getenv("JAXPP_PLUGIN_PATH") == nullptr)
          throw RuntimeFailure(
              "--backend cuda: this jaxpp-sim was built without the CUDA plugin (configure with "
              "-DJAXPP_WITH_CUDA=ON on a machine with CUDA 13 and NCCL; docs/cuda.md)");
        throw RuntimeFailure(std::string("--backend cuda: the CUDA plugin ") + kCudaPluginFileName +
                             " is not in " +
                             (status.searched.empty() ? "any directory" : join(status.searched)) +
                             " (reinstall jaxpp-sim with its CUDA plugin, or set "
                             "JAXPP_PLUGIN_PATH to the directory that holds it)");
      }
      plugin = &load_cuda_plugin(status.path);
    } catch (const RuntimeFailure& e) {
      error = e.what();
    }
  });
  if (plugin == nullptr) throw RuntimeFailure(error);
  return *plugin;
}

}  // namespace jaxpp
