// Determinism: the simulator's outputs (metrics JSON, trace JSON, plan.json) are byte-identical
// across runs of the same command, in model mode and in measured (stage-times) mode.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

struct Outputs {
  std::string stdout_text;
  std::vector<std::string> files;  // contents, in the order of `names`
};

// Runs `args` in a fresh directory ("{dir}" in `args`) and collects stdout and the named files.
Outputs run_and_collect(const std::string& args, const std::vector<std::string>& names) {
  const std::string dir = make_temp_dir();
  std::string expanded = args;
  for (size_t pos = expanded.find("{dir}"); pos != std::string::npos;
       pos = expanded.find("{dir}", pos))
    expanded.replace(pos, 5, dir);
  const CliResult r = run_cli(expanded);
  EXPECT_EQ(r.exit_code, 0) << expanded << "\n" << r.err;
  Outputs o{r.out, {}};
  for (const std::string& n : names) o.files.push_back(read_file(dir + "/" + n));
  std::filesystem::remove_all(dir);
  return o;
}

void expect_identical_runs(const std::string& args, const std::vector<std::string>& names) {
  const Outputs first = run_and_collect(args, names);
  ASSERT_FALSE(first.stdout_text.empty());
  for (int run = 1; run < 3; ++run) {
    const Outputs again = run_and_collect(args, names);
    EXPECT_EQ(again.stdout_text, first.stdout_text) << "stdout differs in run " << run;
    for (size_t i = 0; i < names.size(); ++i) {
      ASSERT_FALSE(first.files[i].empty()) << names[i];
      EXPECT_EQ(again.files[i], first.files[i]) << names[i] << " differs in run " << run;
    }
  }
}

TEST(Determinism, SimulateModelModeIsByteIdenticalAcrossRuns) {
  expect_identical_runs(
      "simulate --model gpt3-1.3b --gpus 8 --pp 4 --dp 2 --global-batch 32 --schedule zb-h1 "
      "--overlap-grad-reduce --json --trace {dir}/trace.json --plan {dir}/plan.json",
      {"trace.json", "plan.json"});
}

TEST(Determinism, SimulateInterleavedModelModeIsByteIdenticalAcrossRuns) {
  expect_identical_runs(
      "simulate --model llama3-8b --gpus 8 --pp 4 --tp 2 --virtual 2 --global-batch 16 "
      "--schedule interleaved --recompute selective --json --trace {dir}/trace.json",
      {"trace.json"});
}

TEST(Determinism, SimulateMeasuredModeIsByteIdenticalAcrossRuns) {
  expect_identical_runs(
      "simulate --schedule dualpipev --pp 4 --microbatches 16 --t-f 1 --t-b 1.3 --t-w 0.7 "
      "--t-comm 0.05 --json --trace {dir}/trace.json",
      {"trace.json"});
}

TEST(Determinism, SimulateTableOutputIsByteIdenticalAcrossRuns) {
  expect_identical_runs(
      "simulate --model gpt3-6.7b --gpus 16 --pp 8 --dp 2 --global-batch 64 --schedule 1f1b", {});
}

TEST(Determinism, ExploreIsByteIdenticalAcrossRunsAndThreadCounts) {
  const std::string args =
      "explore --model gpt3-1.3b --gpus 8 --global-batch 16 --schedules 1f1b,zb-h1,interleaved "
      "--json --quiet --top 20 --csv {dir}/all.csv --plan {dir}/best.json --threads ";
  const Outputs one = run_and_collect(args + "1", {"all.csv", "best.json"});
  ASSERT_FALSE(one.stdout_text.empty());
  for (const char* threads : {"1", "2", "3"}) {
    const Outputs again = run_and_collect(args + threads, {"all.csv", "best.json"});
    EXPECT_EQ(again.stdout_text, one.stdout_text) << "--threads " << threads;
    EXPECT_EQ(again.files, one.files) << "--threads " << threads;
  }
}

}  // namespace
}  // namespace jaxpp::testing
