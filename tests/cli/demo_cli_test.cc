// CLI tests of `jaxpp-sim demo`: every step runs, the files it writes are usable, the real run
// matches its sequential reference, bad flags are one-line errors.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp {
namespace {

using testing::make_temp_dir;
using testing::run_cli;

using testing::read_file;

TEST(DemoCliTest, DefaultDemoRunsEveryStepAndPasses) {
  const std::string dir = make_temp_dir();
  const auto r = run_cli("demo --out " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* step : {"== 1. model", "== 2. explore gpt3-13b on 64 x h100-sxm",
                           "Top 5 by step time", "Pareto front", "== 3. best plan",
                           "== 4. run the best plan", "== 5. run the same program", "PASS"}) {
    EXPECT_NE(r.out.find(step), std::string::npos) << step << "\n" << r.out;
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/timeline.svg"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/trace.json"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/plan.json"));
}

TEST(DemoCliTest, JsonReportsEachStepAndTheFilesAreUsable) {
  const std::string dir = make_temp_dir();
  const auto r = run_cli(
      "demo --model gpt3-1.3b --gpus 8 --global-batch 16 --emulated-step-s 0.1 "
      "--out " +
      dir + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("explore"));
  EXPECT_GT(j["explore"]["feasible"].get<int>(), 0);
  EXPECT_FALSE(j["explore"].contains("configs"));
  // The plan written is the explorer's best, with its predicted step time.
  const double best_s = j["explore"]["best"]["step_time_s"].get<double>();
  EXPECT_DOUBLE_EQ(j["best_plan"]["predicted"]["step_time_s"].get<double>(), best_s);
  const auto validated = run_cli("validate " + j["best_plan"]["plan"].get<std::string>());
  EXPECT_EQ(validated.exit_code, 0) << validated.out << validated.err;
  // Timeline and Perfetto trace.
  EXPECT_NE(read_file(dir + "/timeline.svg").find("<svg"), std::string::npos);
  const auto trace = nlohmann::json::parse(read_file(dir + "/trace.json"));
  EXPECT_FALSE(trace["traceEvents"].empty());
  // Emulated run: prediction and measurement are both there (their agreement is a benchmark).
  EXPECT_NEAR(j["emulated_run"]["predicted_step_time_s"].get<double>(), 0.1, 1e-9);
  EXPECT_GT(j["emulated_run"]["step_time_s"].get<double>(), 0.0);
  // Real run equals the sequential reference.
  EXPECT_EQ(j["real_run"]["check"], "pass");
  EXPECT_LE(j["real_run"]["max_abs_diff_loss"].get<double>(), 1e-12);
  EXPECT_LE(j["real_run"]["max_abs_diff_weights"].get<double>(), 1e-12);
  EXPECT_EQ(j["real_run"]["losses"].size(), 2u);
}

TEST(DemoCliTest, BadFlagsAreOneLineErrors) {
  for (const std::string args : {"demo --emulated-step-s 0", "demo --model no-such-model",
                                 "demo --gpus 0", "demo --out /proc/version/x", "demo --bogus"}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace jaxpp
