// simulate --recompute-layers N (full recompute of the first N transformer layers of each stage
// chunk): the step lies between none and full, N = all layers is full exactly, the plan carries
// it, and bad settings are refused (exit 2, one line, nothing written).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
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

// explore --recompute full:N: partial recompute is a policy of the search. gpt3-1.3b on 4 GPUs
// (pp 2, dp 2, 1F1B, b 1): recompute none needs more memory than the limit, full fits but
// recomputes all 12 layers of each stage, full:4 and full:8 fit (the limit lies between the
// peaks of full:4 and none, which simulate gives) and full:4 recomputes least: the best plan
// is full with recompute_layers 4, and the plan, the JSON and the CSV carry it.
const char* const kExplore =
    "explore --model gpt3-1.3b --cluster a100-80g --gpus 4 --global-batch 16 --pp 2 --tp 1 "
    "--microbatch-sizes 1 --schedules 1f1b --zero1 off --quiet";

double peak_of(const std::string& recompute) {
  const nlohmann::json j = run_json(
      "simulate --model gpt3-1.3b --cluster a100-80g --gpus 4 --pp 2 --dp 2 --global-batch 16 "
      "--schedule 1f1b --partition auto " + recompute);
  double most = 0;
  for (const nlohmann::json& a : j.at("peak_memory_bytes")) most = std::max(most, a.get<double>());
  return most;
}

TEST(RecomputeLayersCli, ExplorePicksPartialRecomputeWhenNoneDoesNotFitAndFullIsSlower) {
  const double none = peak_of("--recompute none");
  const double some = peak_of("--recompute full --recompute-layers 4");
  const double full = peak_of("--recompute full");
  ASSERT_LT(full, some);
  ASSERT_LT(some, none);
  const double limit_gib = (some + none) / 2 / (1024.0 * 1024 * 1024);
  char limit[64];
  std::snprintf(limit, sizeof limit, " --max-memory-gib %.6f", limit_gib);
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(std::string(kExplore) + limit +
                              " --recompute none,full,full:4,full:8 --explain --json --plan " +
                              dir + "/plan.json --csv " + dir + "/all.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& best = j.at("best").at("config");
  EXPECT_EQ(best.at("recompute"), "full");
  EXPECT_EQ(best.at("recompute_layers"), 4);
  // none is pruned for memory; full and full:8 fit and are slower than full:4.
  int none_pruned = 0;
  for (const nlohmann::json& p : j.at("pruned_configs"))
    if (p.at("config").at("recompute") == "none" && p.at("status") == "memory") ++none_pruned;
  EXPECT_EQ(none_pruned, 1) << j.at("pruned_configs").dump();
  double step_4 = 0, step_8 = 0, step_full = 0;
  for (const nlohmann::json& c : j.at("configs")) {
    const nlohmann::json& cfg = c.at("config");
    const double step = c.at("step_time_s").get<double>();
    if (!cfg.contains("recompute_layers"))
      step_full = step;
    else if (cfg.at("recompute_layers") == 4)
      step_4 = step;
    else if (cfg.at("recompute_layers") == 8)
      step_8 = step;
  }
  EXPECT_GT(step_4, 0);
  EXPECT_LT(step_4, step_8);
  EXPECT_LT(step_8, step_full);
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  EXPECT_EQ(plan.at("config").at("recompute"), "full");
  EXPECT_EQ(plan.at("config").at("recompute_layers"), 4);
  // The explorer's metrics are the plan's: TFLOP/s counts the recomputed forward of 4 layers of
  // each stage, not of all (as simulate_plan does).
  EXPECT_NEAR(j.at("best").at("tflops_per_gpu").get<double>(),
              plan.at("predicted").at("tflops_per_gpu").get<double>(),
              1e-9 * plan.at("predicted").at("tflops_per_gpu").get<double>());
  EXPECT_EQ(j.at("best").at("step_time_s"), plan.at("predicted").at("step_time_s"));
  // CSV: the recompute_layers column (-1 = every layer) of the ranked rows.
  const std::string csv = read_file(dir + "/all.csv");
  EXPECT_NE(csv.find(",schedule,recompute,recompute_layers,zero1,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n1,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",Std1F1B,full,4,0,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",Std1F1B,full,-1,0,"), std::string::npos) << csv;
  std::filesystem::remove_all(dir);
}

// Without the memory limit none fits and is fastest; explore's default space has no full:N.
TEST(RecomputeLayersCli, ExploresDefaultSpaceHasNoPartialRecompute) {
  const nlohmann::json j = run_json(kExplore);
  for (const nlohmann::json& c : j.at("configs"))
    EXPECT_FALSE(c.at("config").contains("recompute_layers")) << c.dump();
  EXPECT_EQ(j.at("best").at("config").at("recompute"), "none");
}

TEST(RecomputeLayersCli, ExploreRefusesBadPartialRecompute) {
  CliResult r = run_cli(std::string(kExplore) + " --recompute full:x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "jaxpp-sim explore: error: --recompute: 'full:x': expected full:N with a "
                   "number of layers N >= 0\n");
  r = run_cli(std::string(kExplore) + " --recompute selective:2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--recompute: 'selective:2': only full takes a layer count"),
            std::string::npos)
      << r.err;
  r = run_cli(std::string(kExplore) + " --recompute full:-1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("expected full:N with a number of layers N >= 0"), std::string::npos)
      << r.err;
  r = run_cli(std::string(kExplore) + " --recompute full:4 --partition balanced-time");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--recompute: full:4 with --partition balanced-time"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace jaxpp::testing
