// Runs the jaxpp-sim binary for CLI tests and captures exit code, stdout and stderr.
//   CliResult r = run_cli("graph --model gpt3-13b --pp 4 --json");
//   EXPECT_EQ(r.exit_code, 0) << r.err;
//   CliResult m = run_cli_under_mpirun(4, "explore ...");
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace jaxpp::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `args` is passed through /bin/sh after the binary path; quote as in a shell.
CliResult run_cli(const std::string& args);
// The same under `mpirun --oversubscribe --allow-run-as-root -n <processes>` on localhost.
CliResult run_cli_under_mpirun(int processes, const std::string& args);
// `launcher` (a command prefix ending in a space, e.g. an mpirun line with a shell wrapper), then
// the binary and `args`; the other two are this with an empty or an mpirun launcher.
CliResult run_cli_with_launcher(const std::string& launcher, const std::string& args);
// The whole content of a file ("" when it cannot be read).
std::string read_file(const std::string& path);
// Writes `text` to a fresh file under the test's temporary directory and returns its path.
std::string write_temp_file(const std::string& name, const std::string& text);
// A fresh, empty temporary directory for one test.
std::string make_temp_dir();
// A file under tests/data: data("graph/tiny_transformer.json").
std::string data(const std::string& relative);
// run_cli(args + " --json"), expecting exit 0; the parsed stdout.
nlohmann::json run_json(const std::string& args);
// The sum of a JSON array of numbers (e.g. simulate --json's per-actor peak_memory_bytes).
double json_sum(const nlohmann::json& array);

}  // namespace jaxpp::testing
