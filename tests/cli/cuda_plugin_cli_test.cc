// The CUDA backend as a plugin, from the command line: jaxpp-sim links no CUDA library, runs every
// other command without the plugin, and when `--backend cuda` cannot load it says so in one line
// and exits 1 (never the dynamic loader's text). `--version` reports the build options.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

constexpr const char* kPluginCliTiny =
    " --schedule 1f1b --pp 2 --microbatches 2 --hidden 8 --seq 4 --steps 1 --warmup 0";

// A fresh directory holding `fixture` (tests/plugin_fixtures) as libjaxpp_cuda.so; "" = empty.
std::string plugin_dir_with(const std::string& fixture) {
  const std::string dir = make_temp_dir();
  if (!fixture.empty())
    std::filesystem::copy_file(std::string(JAXPP_PLUGIN_FIXTURE_DIR) + "/lib" + fixture + ".so",
                               dir + "/libjaxpp_cuda.so");
  return dir;
}

CliResult run_with_plugin_path(const std::string& dir, const std::string& args) {
  return run_cli_with_launcher("JAXPP_PLUGIN_PATH=" + dir + " ", args);
}

void expect_one_line_failure(const CliResult& r) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // exactly one line
  EXPECT_EQ(r.err.find("cannot open shared object file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("error while loading shared libraries"), std::string::npos) << r.err;
}

// The DT_NEEDED entries of a file, one per line ("libc.so.6\n...").
std::string needed_libraries(const std::string& path) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(("readelf -d " + path).c_str(), "r"), pclose);
  if (!pipe) return out;
  char line[512];
  while (fgets(line, sizeof line, pipe.get()) != nullptr) {
    const std::string l = line;
    const size_t open = l.find("Shared library: [");
    if (open == std::string::npos) continue;
    const size_t begin = open + 17;
    out += l.substr(begin, l.find(']', begin) - begin) + "\n";
  }
  return out;
}

TEST(CudaPluginCli, TheBinaryLinksNoCudaCublasOrNccl) {
  const std::string needed = needed_libraries(JAXPP_SIM_BINARY);
  ASSERT_NE(needed.find("libc.so.6"), std::string::npos) << "readelf found nothing:\n" << needed;
  for (const char* lib : {"libcuda", "libcudart", "libcublas", "libcublasLt", "libnccl"})
    EXPECT_EQ(needed.find(lib), std::string::npos) << lib << " in\n" << needed;
}

TEST(CudaPluginCli, TheRealPluginIsWhereTheCudaLibrariesAre) {
  const std::string real = JAXPP_CUDA_PLUGIN_FILE;
  if (real.empty()) GTEST_SKIP() << "this build has no CUDA plugin";
  const std::string needed = needed_libraries(real);
  for (const char* lib : {"libcudart.so", "libcublas.so", "libnccl.so"})
    EXPECT_NE(needed.find(lib), std::string::npos) << lib << " not in\n" << needed;
}

TEST(CudaPluginCli, RunWithNoPluginInThePathSaysWhereItLooked) {
  const std::string dir = plugin_dir_with("");
  const CliResult r = run_with_plugin_path(dir, "run --backend cuda" + std::string(kPluginCliTiny));
  expect_one_line_failure(r);
  EXPECT_NE(r.err.find("jaxpp-sim run: error: --backend cuda: the CUDA plugin libjaxpp_cuda.so "
                       "is not in " +
                       dir + " (reinstall jaxpp-sim"),
            std::string::npos)
      << r.err;
  std::filesystem::remove_all(dir);
}

TEST(CudaPluginCli, RunWithAPluginOfAnotherAbiVersionRefusesIt) {
  const std::string dir = plugin_dir_with("jaxpp_fake_plugin_next_abi");
  const CliResult r = run_with_plugin_path(dir, "run --backend cuda" + std::string(kPluginCliTiny));
  expect_one_line_failure(r);
  EXPECT_NE(r.err.find("has plugin ABI version"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(CudaPluginCli, RunWithoutTheCudaLibrariesNamesTheMissingOne) {
  const std::string dir = plugin_dir_with("jaxpp_fake_plugin_missing_lib");
  const CliResult r = run_with_plugin_path(dir, "run --backend cuda" + std::string(kPluginCliTiny));
  expect_one_line_failure(r);
  EXPECT_NE(r.err.find("needs libjaxpp_absent_for_tests.so, which is not installed"),
            std::string::npos)
      << r.err;
  std::filesystem::remove_all(dir);
}

TEST(CudaPluginCli, RunWithALoadablePluginReachesTheDevice) {
  // The fake plugin loads and answers like the real one on a machine without a GPU.
  const std::string dir = plugin_dir_with("jaxpp_fake_plugin");
  const CliResult r = run_with_plugin_path(dir, "run --backend cuda" + std::string(kPluginCliTiny));
  expect_one_line_failure(r);
  EXPECT_NE(r.err.find("no CUDA device visible (fake CUDA plugin)"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(CudaPluginCli, CalibrateCudaWithoutThePluginFailsInOneLine) {
  const std::string dir = plugin_dir_with("");
  const std::string out = make_temp_dir() + "/cluster.json";
  const CliResult r = run_with_plugin_path(dir, "calibrate --backend cuda --quick -o " + out);
  expect_one_line_failure(r);
  EXPECT_NE(r.err.find("the CUDA plugin libjaxpp_cuda.so is not in " + dir), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove_all(dir);
}

TEST(CudaPluginCli, OtherBackendsAndCommandsNeverOpenThePlugin) {
  // A broken module in the path would fail any command that opened it.
  const std::string dir = plugin_dir_with("jaxpp_fake_plugin_missing_lib");
  const CliResult run = run_with_plugin_path(dir, "run" + std::string(kPluginCliTiny));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const CliResult schedules = run_with_plugin_path(dir, "schedules");
  EXPECT_EQ(schedules.exit_code, 0) << schedules.err;
  EXPECT_NE(schedules.out.find("ZeroBubble"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(CudaPluginCli, VersionPrintsTheVersionAndTheBuildOptions) {
  const CliResult r = run_cli("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("jaxpp-sim 0.1.0\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\nmpi backend: Open MPI "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ncuda plugin abi: 2\n"), std::string::npos) << r.out;
  const std::string real = JAXPP_CUDA_PLUGIN_FILE;
  if (real.empty()) {
    EXPECT_NE(r.out.find("\ncuda plugin: not available: not built"), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("\ncuda plugin: available, " + std::filesystem::canonical(real).string() +
                         " (built with CUDA 13."),
              std::string::npos)
        << r.out;
  }
}

TEST(CudaPluginCli, VersionSaysWhenThePluginIsNotFound) {
  const std::string dir = plugin_dir_with("");
  const CliResult r = run_with_plugin_path(dir, "--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\ncuda plugin: not available: "), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace jaxpp::testing
