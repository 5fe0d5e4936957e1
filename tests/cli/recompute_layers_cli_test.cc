// simulate --recompute-layers N (full recompute of the first N transformer layers of each stage
// chunk): the step lies between none and full, N = all layers is full exactly, the plan carries
// it, and bad settings are refused (exit 2, one line, nothing written).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

const char* const kSim =
    "simulate --model gpt3-1.3b --cluster a100-80g --gpus 4 --pp 2 --dp 2 --global-batch 16 "
    "--schedule 1f1b --partition even";

TEST(RecomputeLayersCli, StepLiesBetweenNoneAndFullAndAllLayersIsFull) {
  const nlohmann::json none = run_json(std::string(kSim) + " --recompute none");
  const nlohmann::json full = run_json(std::string(kSim) + " --recompute full");
  const nlohmann::json some = run_json(std::string(kSim) + " --recompute full --recompute-layers 4");
  const nlohmann::json all = run_json(std::string(kSim) + " --recompute full --recompute-layers 12");
  const nlohmann::json zero = run_json(std::string(kSim) + " --recompute full --recompute-layers 0");
  const auto step = [](const nlohmann::json& j) { return j.at("step_time_s").get<double>(); };
  EXPECT_GT(step(some), step(none));
  EXPECT_LT(step(some), step(full));
  EXPECT_EQ(step(all), step(full));
  EXPECT_EQ(step(zero), step(none));
  EXPECT_EQ(all.at("peak_memory_bytes"), full.at("peak_memory_bytes"));
  EXPECT_EQ(zero.at("peak_memory_bytes"), none.at("peak_memory_bytes"));
  EXPECT_LT(json_sum(some.at("peak_memory_bytes")), json_sum(none.at("peak_memory_bytes")));
  EXPECT_GT(json_sum(some.at("peak_memory_bytes")), json_sum(full.at("peak_memory_bytes")));
}

// --breakdown: the GEMM time of each actor grows by the recomputed layers' forward GEMMs, so
// with 4 of 12 layers per stage it lies a third of the way from none to full (each actor runs
// the same microbatches under every policy).
TEST(RecomputeLayersCli, TheBreakdownCountsTheRecomputedLayersGemms) {
  const auto gemm = [](const std::string& flags) {
    const nlohmann::json j = run_json(std::string(kSim) + " --breakdown " + flags);
    std::vector<double> out;
    for (const nlohmann::json& a : j.at("breakdown")) out.push_back(a.at("gemm_s").get<double>());
    return out;
  };
  const std::vector<double> none = gemm("--recompute none"), full = gemm("--recompute full"),
                            some = gemm("--recompute full --recompute-layers 4");
  ASSERT_EQ(none.size(), 2u);
  for (size_t r = 0; r < none.size(); ++r)
    EXPECT_NEAR(some[r] - none[r], (full[r] - none[r]) / 3, 1e-9 * full[r]) << "actor " << r;
}

TEST(RecomputeLayersCli, ThePlanCarriesIt) {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(std::string(kSim) + " --recompute full --recompute-layers 4 --plan " +
                              dir + "/plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  EXPECT_EQ(plan.at("config").at("recompute_layers"), 4);
  const CliResult v = run_cli("validate " + dir + "/plan.json");
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

TEST(RecomputeLayersCli, RefusedWithoutFullRecomputeAndNegative) {
  const std::string dir = make_temp_dir();
  CliResult r = run_cli(std::string(kSim) + " --recompute selective --recompute-layers 4 --plan " +
                        dir + "/plan.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "jaxpp-sim simulate: error: --recompute-layers: counts fully recomputed layers and "
            "needs recompute full (recompute is selective)\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/plan.json"));
  r = run_cli(std::string(kSim) + " --recompute full --recompute-layers -1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "jaxpp-sim simulate: error: --recompute-layers: expected a number of layers >= 0, "
            "got -1\n");
  r = run_cli(
      "simulate --model gpt3-1.3b --cluster a100-80g --gpus 4 --pp 2 --dp 2 --global-batch 16 "
      "--schedule 1f1b --partition balanced-time --recompute full --recompute-layers 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--partition balanced-time: balanced-time prices each layer on its own"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace jaxpp::testing
