// simulate --perturb and explore --robust through the CLI.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

TEST(WhatIfCli, SimulatePerturbReportsTheSlowdownAndEachActorsDelay) {
  const nlohmann::json j = run_json(
      "simulate --schedule zb-h1 --pp 4 --microbatches 8 --t-f 1 --t-b 1 --t-w 1 --t-comm 0.1 "
      "--perturb slow-actor=2:1.5");
  const nlohmann::json& p = j.at("perturbation");
  EXPECT_GT(p.at("slowdown").get<double>(), 1.1);
  EXPECT_EQ(p.at("actors").size(), 4u);
  EXPECT_EQ(j.at("step_time_s"), p.at("step_time_s"));
  EXPECT_GT(p.at("actors")[3].at("end_delay_s").get<double>(), 0);
}

TEST(WhatIfCli, SimulatePerturbInModelModeAndTheTable) {
  const CliResult r = run_cli(
      "simulate --model gpt3-1.3b --gpus 8 --pp 4 --dp 2 --global-batch 64 --schedule 1f1b "
      "--perturb slow-link=1-2:4,jitter=0.05,seed=3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("perturbation slow-link=1-2:4,jitter=0.05,seed=3: step"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("end delay ms"), std::string::npos) << r.out;
}

TEST(WhatIfCli, BadPerturbationAndConflictingFlagsExitTwo) {
  const std::string base = "simulate --schedule 1f1b --pp 4 --microbatches 8 --t-f 1 --t-b 1 ";
  const CliResult bad = run_cli(base + "--perturb slow-actor=7:2");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--perturb: actor 7 out of range"), std::string::npos) << bad.err;
  const CliResult item = run_cli(base + "--perturb jitter=2");
  EXPECT_EQ(item.exit_code, 2);
  EXPECT_NE(item.err.find("'jitter=2'"), std::string::npos) << item.err;
  const CliResult plan = run_cli(
      "simulate --model gpt3-1.3b --gpus 8 --pp 4 --dp 2 --global-batch 64 --schedule 1f1b "
      "--perturb jitter=0.1 --plan /tmp/never.json");
  EXPECT_EQ(plan.exit_code, 2);
}

TEST(WhatIfCli, ExploreRobustRanksByP90) {
  const nlohmann::json j = run_json(
      "explore --model gpt3-1.3b --gpus 8 --global-batch 64 --pp 4 --tp 1 --recompute none "
      "--zero1 on --schedules 1f1b,zb-h1,gpipe --quiet --top 4 --robust 6 --robust-jitter 0.2");
  const nlohmann::json& r = j.at("robust");
  EXPECT_EQ(r.at("runs"), 6);
  ASSERT_EQ(r.at("ranking").size(), 4u);
  for (size_t i = 1; i < 4; ++i)
    EXPECT_LE(r.at("ranking")[i - 1].at("p90_step_time_s").get<double>(),
              r.at("ranking")[i].at("p90_step_time_s").get<double>());
}

TEST(WhatIfCli, ExploreRobustTakesSynthesizedConfigurationsToo) {
  const nlohmann::json j = run_json(
      "explore --model gpt3-1.3b --gpus 8 --global-batch 64 --pp 4 --tp 1 --recompute none "
      "--zero1 on --schedules 1f1b,zb-h1,zb-h2 --quiet --top 3 --synthesize --robust 4");
  ASSERT_EQ(j.at("best").at("config").at("schedule"), "synthesized");
  bool found = false;
  for (const auto& e : j.at("robust").at("ranking"))
    found = found || e.at("config").get<std::string>().find("synthesized") != std::string::npos;
  EXPECT_TRUE(found) << j.at("robust");
}

}  // namespace
}  // namespace jaxpp::testing
