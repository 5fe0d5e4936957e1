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
      "explore --model gpt3-1.3b --gpus 8 --global-batch 128 --pp 4 --tp 1 --recompute none "
      "--zero1 on --schedules 1f1b,zb-h1,zb-h2 --quiet --top 3 --synthesize --robust 4");
  ASSERT_EQ(j.at("best").at("config").at("schedule"), "synthesized");
  bool found = false;
  for (const auto& e : j.at("robust").at("ranking"))
    found = found || e.at("config").get<std::string>().find("synthesized") != std::string::npos;
  EXPECT_TRUE(found) << j.at("robust");
}

// Per-microbatch sequence lengths in measured mode: times linear in the tokens relative to the
// nominal length. GPipe, p = 4, m = 8, F = 1 ms, B = T_B + T_W = 2 ms: the step is
// (m + p − 1)(F + B) = 33 ms. Microbatch 7 (the last) at twice the nominal length makes its F 2 ms
// and its B 4 ms: its forward leaves the last stage 4·1 ms later (each stage's F7 waits for the
// previous one's), and the backward, which starts with B7 on the last stage, then runs 4·2 ms
// longer along the 4 stages: 33 + 4·(1 + 2) = 45 ms.
TEST(WhatIfCli, OneLongMicrobatchDelaysGPipeByTheHandComputedAmount) {
  const std::string base =
      "simulate --schedule gpipe --pp 4 --microbatches 8 --t-f 1 --t-b 1 --t-w 1 ";
  const nlohmann::json j =
      run_json(base + "--perturb seq-lens=1000*7:2000,nominal-seq-len=1000");
  const nlohmann::json& p = j.at("perturbation");
  EXPECT_NEAR(p.at("baseline_step_time_s").get<double>(), 33e-3, 1e-12);
  EXPECT_NEAR(p.at("step_time_s").get<double>(), 45e-3, 1e-12);
  EXPECT_EQ(p.at("spec"), "seq-lens=1000*7:2000,nominal-seq-len=1000");
  // Every actor ends later; the first one by the whole 12 ms.
  EXPECT_NEAR(p.at("actors")[0].at("end_delay_s").get<double>(), 12e-3, 1e-12);
  // Uniform lengths: the nominal one changes nothing, twice it doubles the step exactly.
  const nlohmann::json same =
      run_json(base + "--perturb seq-lens=1000*8,nominal-seq-len=1000").at("perturbation");
  EXPECT_EQ(same.at("step_time_s"), same.at("baseline_step_time_s"));
  const nlohmann::json twice =
      run_json(base + "--t-comm 0.5 --perturb seq-lens=4096*8,nominal-seq-len=2048")
          .at("perturbation");
  EXPECT_NEAR(twice.at("step_time_s").get<double>(),
              2 * twice.at("baseline_step_time_s").get<double>(), 1e-12);
}

TEST(WhatIfCli, SeqLensInModelModeAndTheReport) {
  const std::string cmd =
      "simulate --model gpt3-1.3b --gpus 4 --pp 4 --global-batch 8 --schedule 1f1b --perturb ";
  const CliResult r = run_cli(cmd + "seq-lens=2048*7:8192");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("perturbation seq-lens=2048*7:8192: step"), std::string::npos) << r.out;
  const nlohmann::json same = run_json(cmd + "seq-lens=2048*8").at("perturbation");
  EXPECT_EQ(same.at("step_time_s"), same.at("baseline_step_time_s"));
  const std::string file = write_temp_file("lens.txt", "2048 2048 2048 2048\n2048 2048 2048 8192\n");
  EXPECT_EQ(run_json(cmd + "seq-lens=@" + file).at("step_time_s"),
            run_json(cmd + "seq-lens=2048*7:8192").at("step_time_s"));
}

TEST(WhatIfCli, BadSeqLensExitTwoWithOneLine) {
  const std::string measured =
      "simulate --schedule 1f1b --pp 4 --microbatches 8 --t-f 1 --t-b 1 --perturb ";
  const std::string model =
      "simulate --model gpt3-1.3b --gpus 4 --pp 4 --global-batch 8 --schedule 1f1b --perturb ";
  const struct {
    std::string args, message;
  } cases[] = {
      {measured + "seq-lens=1000*7,nominal-seq-len=1000",
       "--perturb: seq-lens gives 7 lengths but there are 8 microbatches (one length per "
       "microbatch)"},
      {measured + "seq-lens=1000*8",
       "--perturb: seq-lens in measured mode needs nominal-seq-len=N (the sequence length the "
       "stage times were measured at)"},
      {measured + "seq-lens=1000*7:0,nominal-seq-len=1000",
       "--perturb: 'seq-lens=1000*7:0': the length of microbatch 7 must be in [1, 4194304] "
       "tokens, got 0"},
      {model + "seq-lens=2048*7:99999999",
       "--perturb: 'seq-lens=2048*7:99999999': the length of microbatch 7 must be in [1, "
       "4194304] tokens, got 99999999"},
      {model + "seq-lens=2048*9",
       "--perturb: seq-lens gives 9 lengths but there are 8 microbatches (one length per "
       "microbatch)"},
      {model + "seq-lens=2048*8,nominal-seq-len=2048",
       "--perturb: nominal-seq-len is for measured mode; model mode prices seq-lens against the "
       "model's seq_len (2048)"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_EQ(r.out, "") << c.args;
    EXPECT_EQ(r.err, "jaxpp-sim simulate: error: " + c.message + "\n") << c.args;
  }
}

}  // namespace
}  // namespace jaxpp::testing
