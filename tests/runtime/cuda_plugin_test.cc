// The CUDA plugin loader (runtime/cuda_plugin.h) against stand-in modules
// (tests/plugin_fixtures/fake_plugin.cc) and, when this build has it, the real plugin: what it
// accepts, the one-line message of every refusal (never the dynamic loader's own text), and where
// it searches.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/cuda_plugin.h"

namespace jaxpp {
namespace {

std::string plugin_fixture(const std::string& name) {
  return std::string(JAXPP_PLUGIN_FIXTURE_DIR) + "/lib" + name + ".so";
}

// The message load_cuda_plugin(path) throws; fails the test when it loads.
std::string plugin_refusal(const std::string& path) {
  try {
    load_cuda_plugin(path);
  } catch (const RuntimeFailure& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was accepted";
  return "";
}

void expect_one_line_without_loader_text(const std::string& message) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.find("cannot open shared object file"), std::string::npos) << message;
  EXPECT_EQ(message.find("undefined symbol"), std::string::npos) << message;
  EXPECT_EQ(message.find("ELF"), std::string::npos) << message;
  EXPECT_EQ(message.rfind("--backend cuda: ", 0), 0u) << message;
}

std::string plugin_temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "jaxpp-plugin-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

// Sets JAXPP_PLUGIN_PATH for the life of the object.
class PluginPathEnv {
 public:
  explicit PluginPathEnv(const std::string& value) {
    setenv("JAXPP_PLUGIN_PATH", value.c_str(), 1);
  }
  ~PluginPathEnv() { unsetenv("JAXPP_PLUGIN_PATH"); }
};

TEST(CudaPluginLoader, AcceptsAModuleOfThisAbiAndBuild) {
  CudaPlugin& plugin = load_cuda_plugin(plugin_fixture("jaxpp_fake_plugin"));
  EXPECT_EQ(plugin.library_versions(), "fake CUDA plugin");
  EXPECT_THROW(plugin.prepare_process(), RuntimeFailure);
}

TEST(CudaPluginLoader, RefusesAnotherAbiVersion) {
  const std::string path = plugin_fixture("jaxpp_fake_plugin_next_abi");
  const std::string m = plugin_refusal(path);
  expect_one_line_without_loader_text(m);
  EXPECT_NE(m.find(path + " has plugin ABI version " + std::to_string(kCudaPluginAbiVersion + 1) +
                   ", this jaxpp-sim needs version " + std::to_string(kCudaPluginAbiVersion)),
            std::string::npos)
      << m;
}

TEST(CudaPluginLoader, RefusesTheBuildOfAnotherJaxppSim) {
  const std::string m = plugin_refusal(plugin_fixture("jaxpp_fake_plugin_other_build"));
  expect_one_line_without_loader_text(m);
  EXPECT_NE(m.find("was built as '0.0.1 other-compiler', this jaxpp-sim is '" +
                   cuda_plugin_build_id() + "'"),
            std::string::npos)
      << m;
}

TEST(CudaPluginLoader, NamesTheLibraryTheModuleNeedsAndDoesNotFind) {
  const std::string m = plugin_refusal(plugin_fixture("jaxpp_fake_plugin_missing_lib"));
  expect_one_line_without_loader_text(m);
  EXPECT_NE(m.find("needs libjaxpp_absent_for_tests.so, which is not installed"), std::string::npos)
      << m;
  EXPECT_NE(m.find("install CUDA 13"), std::string::npos) << m;
}

TEST(CudaPluginLoader, RefusesAModuleWithoutTheEntryPoints) {
  const std::string m = plugin_refusal(plugin_fixture("jaxpp_fake_plugin_no_entry"));
  expect_one_line_without_loader_text(m);
  EXPECT_NE(m.find("is not a jaxpp-sim CUDA plugin (it has no jaxpp_cuda_plugin_abi_version)"),
            std::string::npos)
      << m;
}

TEST(CudaPluginLoader, RefusesAFileThatIsNoSharedLibrary) {
  const std::string dir = plugin_temp_dir();
  const std::string path = dir + "/" + kCudaPluginFileName;
  std::ofstream(path) << "not a shared library\n";
  const std::string m = plugin_refusal(path);
  expect_one_line_without_loader_text(m);
  EXPECT_NE(m.find(path + " is not a usable jaxpp-sim CUDA plugin (not a shared library"),
            std::string::npos)
      << m;
  std::filesystem::remove_all(dir);
}

TEST(CudaPluginLoader, NamesAPluginFileThatDoesNotExist) {
  const std::string m = plugin_refusal("/nonexistent/libjaxpp_cuda.so");
  expect_one_line_without_loader_text(m);
  EXPECT_NE(m.find("the CUDA plugin /nonexistent/libjaxpp_cuda.so does not exist"),
            std::string::npos)
      << m;
}

TEST(CudaPluginLoader, SearchesOnlyThePluginPathWhenItIsSet) {
  const std::string empty = plugin_temp_dir(), full = plugin_temp_dir();
  std::filesystem::copy_file(plugin_fixture("jaxpp_fake_plugin"), full + "/" + kCudaPluginFileName);
  {
    PluginPathEnv env(empty + "::" + full);
    const CudaPluginStatus status = find_cuda_plugin();
    ASSERT_EQ(status.searched.size(), 2u);
    EXPECT_EQ(status.searched[0], empty);
    EXPECT_EQ(status.searched[1], full);
    EXPECT_EQ(status.path, std::filesystem::canonical(full + "/" + kCudaPluginFileName).string());
  }
  {
    PluginPathEnv env(empty);
    EXPECT_EQ(find_cuda_plugin().path, "");
  }
  std::filesystem::remove_all(empty);
  std::filesystem::remove_all(full);
}

TEST(CudaPluginLoader, LooksNextToTheExecutableByDefault) {
  unsetenv("JAXPP_PLUGIN_PATH");
  const CudaPluginStatus status = find_cuda_plugin();
  ASSERT_FALSE(status.searched.empty());
  const std::string exe_dir = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  EXPECT_EQ(status.searched[0].rfind(exe_dir + "/", 0), 0u) << status.searched[0];
  // The test binaries sit beside jaxpp-sim (build/bin), so they find the plugin it would.
  const std::string real = JAXPP_CUDA_PLUGIN_FILE;
  EXPECT_EQ(status.built, !real.empty());
  if (!real.empty()) {
    EXPECT_EQ(status.path, std::filesystem::canonical(real).string());
  }
}

TEST(CudaPluginLoader, LoadsTheRealPluginOfThisBuild) {
  const std::string real = JAXPP_CUDA_PLUGIN_FILE;
  if (real.empty()) GTEST_SKIP() << "this build has no CUDA plugin (JAXPP_WITH_CUDA found no CUDA)";
  CudaPlugin& plugin = load_cuda_plugin(real);
  const std::string versions = plugin.library_versions();  // needs no GPU
  EXPECT_NE(versions.find("CUDA runtime 13."), std::string::npos) << versions;
  EXPECT_NE(versions.find("NCCL 2."), std::string::npos) << versions;
}

}  // namespace
}  // namespace jaxpp
