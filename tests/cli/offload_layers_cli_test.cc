// simulate --offload-layers N (activation offloading, Megatron Core --cpu-offloading-num-layers):
// the peak memory drops by the offloaded layers' stash but two, the step does not move while the
// host link keeps up, the plan carries it, and Megatron's rules are refused (exit 2, one line,
// nothing written).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

// Llama 3 70B on 64 GB200s with parameter sharding, pp 1: the recipe the corpus row runs, in
// 16-bit.
const char* const kOffloadSim =
    "simulate --model llama3-70b --cluster gb200-nvl72 --gpus 64 --pp 1 --dp 64 "
    "--global-batch 256 --microbatch-size 2 --schedule 1f1b --zero1 --shard-params "
    "--overlap-grad-reduce --no-memory-check";

TEST(OffloadLayersCli, MemoryDropsByTheOffloadedLayersButTwoAndTheStepStays) {
  const nlohmann::json none = run_json(kOffloadSim);
  const nlohmann::json two = run_json(std::string(kOffloadSim) + " --offload-layers 2");
  const nlohmann::json forty = run_json(std::string(kOffloadSim) + " --offload-layers 40");
  const nlohmann::json twenty_one = run_json(std::string(kOffloadSim) + " --offload-layers 21");
  const auto peak = [](const nlohmann::json& j) { return json_sum(j.at("peak_memory_bytes")); };
  const auto step = [](const nlohmann::json& j) { return j.at("step_time_s").get<double>(); };
  // Two offloaded layers are both in flight: nothing leaves the device.
  EXPECT_EQ(peak(two), peak(none));
  // Forty: 38 layers' stash leaves, twice the 19 that leave with twenty-one (the 80 transformer
  // layers are alike), and the static bytes stay.
  const double one_layer = (peak(none) - peak(twenty_one)) / 19;
  EXPECT_GT(one_layer, 1e9);
  EXPECT_NEAR(peak(none) - peak(forty), 38 * one_layer, 1e-9 * peak(none));
  EXPECT_EQ(forty.at("actors").at(0).at("static_bytes"), none.at("actors").at(0).at("static_bytes"));
  // NVLink-C2C keeps up with this model's passes: the step does not move.
  EXPECT_EQ(step(forty), step(none));
}

TEST(OffloadLayersCli, ThePlanCarriesIt) {
  const std::string dir = make_temp_dir();
  const CliResult r =
      run_cli(std::string(kOffloadSim) + " --offload-layers 40 --plan " + dir + "/plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  EXPECT_EQ(plan.at("config").at("offload_layers"), 40);
  const CliResult v = run_cli("validate " + dir + "/plan.json");
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

TEST(OffloadLayersCli, MegatronsRulesAreRefusedWithTheirReasons) {
  const std::string dir = make_temp_dir();
  CliResult r = run_cli(
      "simulate --model llama3-70b --cluster gb200-nvl72 --gpus 64 --pp 2 --dp 32 "
      "--global-batch 256 --schedule 1f1b --offload-layers 4 --plan " + dir + "/plan.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "jaxpp-sim simulate: error: --offload-layers: activation offloading needs pp 1 "
            "(Megatron Core has no support for pipeline parallelism with CPU offloading), got "
            "pp 2\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/plan.json"));
  r = run_cli(std::string(kOffloadSim) + " --offload-layers 80");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "jaxpp-sim simulate: error: --offload-layers: offloads 80 layers but model "
            "'llama3-70b' has 80 transformer layers (Megatron offloads fewer than all of them)\n");
  r = run_cli(std::string(kOffloadSim) + " --offload-layers 4 --recompute full");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs recompute none"), std::string::npos) << r.err;
  r = run_cli(
      "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 2 --offload-layers 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--offload-layers"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace jaxpp::testing
