#include "tests/cli/cli_runner.h"

#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace jaxpp::testing {
namespace {

// Runs `launcher` + the binary + `args` with stdout and stderr captured.
CliResult launch(const std::string& launcher, const std::string& args) {
  const std::string dir = make_temp_dir();
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const std::string cmd =
      launcher + JAXPP_SIM_BINARY + " " + args + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace

std::string data(const std::string& relative) {
  return std::string(JAXPP_TEST_DATA_DIR) + "/" + relative;
}

nlohmann::json run_json(const std::string& args) {
  const CliResult r = run_cli(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

double json_sum(const nlohmann::json& array) {
  double t = 0;
  for (const auto& v : array) t += v.get<double>();
  return t;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string make_temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "jaxpp-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

std::string write_temp_file(const std::string& name, const std::string& text) {
  const std::string path = make_temp_dir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

CliResult run_cli_with_launcher(const std::string& launcher, const std::string& args) {
  return launch(launcher, args);
}

CliResult run_cli(const std::string& args) { return launch("", args); }

CliResult run_cli_under_mpirun(int processes, const std::string& args) {
  return launch(std::string(JAXPP_MPIEXEC) + " --oversubscribe --allow-run-as-root -n " +
                        std::to_string(processes) + " ",
                    args);
}

}  // namespace jaxpp::testing
