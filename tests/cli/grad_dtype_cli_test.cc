// --grad-dtype in simulate and explore (graph/plan.h GradDtype): the gradient bytes of the
// data-parallel reduction and of the memory model follow it, plans carry it, bad values and
// measured mode are refused.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

const char* const kGradSim =
    "simulate --model gpt3-1.3b --cluster a100-80g --gpus 8 --pp 2 --dp 4 --global-batch 32 "
    "--schedule 1f1b";

TEST(GradDtypeCli, Bf16HalvesTheGradientReductionAndShrinksMemory) {
  const nlohmann::json fp32 = run_json(std::string(kGradSim));
  const nlohmann::json bf16 = run_json(std::string(kGradSim) + " --grad-dtype bf16");
  const nlohmann::json named = run_json(std::string(kGradSim) + " --grad-dtype fp32");
  // tp 1: the only collective is the gradient all-reduce.
  const double c32 = fp32.at("collective_bytes").get<double>();
  ASSERT_GT(c32, 0);
  EXPECT_NEAR(bf16.at("collective_bytes").get<double>(), c32 / 2, c32 * 1e-6);
  EXPECT_LT(json_sum(bf16.at("peak_memory_bytes")), json_sum(fp32.at("peak_memory_bytes")));
  EXPECT_LE(bf16.at("step_time_s").get<double>(), fp32.at("step_time_s").get<double>());
  // The presets count fp32 gradients: "fp32" equals the default.
  EXPECT_EQ(named.at("step_time_s"), fp32.at("step_time_s"));
  EXPECT_EQ(named.at("peak_memory_bytes"), fp32.at("peak_memory_bytes"));
}

TEST(GradDtypeCli, ThePlanCarriesIt) {
  const std::string dir = make_temp_dir();
  const CliResult r =
      run_cli(std::string(kGradSim) + " --json --grad-dtype bf16 --plan " + dir + "/plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  EXPECT_EQ(plan.at("config").at("grad_dtype"), "bf16");
  const nlohmann::json direct = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan.at("predicted").at("step_time_s"), direct.at("step_time_s"));
}

TEST(GradDtypeCli, ExploreAppliesItToEveryConfiguration) {
  const std::string dir = make_temp_dir();
  const nlohmann::json j = run_json(
      "explore --model gpt3-1.3b --cluster a100-80g --gpus 8 --global-batch 32 --pp 2 --tp 1 "
      "--schedules 1f1b --grad-dtype bf16 --plan " +
      dir + "/best.json");
  EXPECT_EQ(j.at("options").at("grad_dtype"), "bf16");
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/best.json"));
  EXPECT_EQ(plan.at("config").at("grad_dtype"), "bf16");
}

TEST(GradDtypeCli, BadValuesAndMeasuredModeAreRefused) {
  const CliResult bad = run_cli(std::string(kGradSim) + " --grad-dtype int8");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--grad-dtype: expected cluster, fp32, bf16 or fp16, got \"int8\""),
            std::string::npos)
      << bad.err;
  const CliResult measured =
      run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 2 --grad-dtype bf16");
  EXPECT_EQ(measured.exit_code, 2);
  EXPECT_NE(measured.err.find("--grad-dtype"), std::string::npos) << measured.err;
  const CliResult explore = run_cli(
      "explore --model gpt3-1.3b --cluster a100-80g --gpus 8 --global-batch 32 --grad-dtype x");
  EXPECT_EQ(explore.exit_code, 2);
  EXPECT_NE(explore.err.find("--grad-dtype"), std::string::npos) << explore.err;
}

}  // namespace
}  // namespace jaxpp::testing
