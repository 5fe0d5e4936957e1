// --shard-grads (gradient sharding, ZeRO-2) in simulate, graph and explore: memory and the
// gradient reduce-scatters follow it, plans carry it, and it is refused without the distributed
// optimizer (exit 2, one line, nothing written).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

const char* const kShardSim =
    "simulate --model gpt3-1.3b --cluster a100-80g --gpus 16 --pp 2 --dp 8 --global-batch 64 "
    "--schedule 1f1b --zero1 --overlap-grad-reduce";

TEST(ShardGradsCli, ShrinksMemoryAndReduceScattersEveryMicrobatch) {
  const nlohmann::json zero1 = run_json(kShardSim);
  const nlohmann::json zero2 = run_json(std::string(kShardSim) + " --shard-grads");
  // m = 64 / 8 = 8 reductions per stage instead of one, each of the stage's gradient bytes.
  EXPECT_EQ(zero2.at("collective_bytes").get<int64_t>(),
            8 * zero1.at("collective_bytes").get<int64_t>());
  EXPECT_LT(json_sum(zero2.at("peak_memory_bytes")),
            json_sum(zero1.at("peak_memory_bytes")));
  // Not overlapped, m reduce-scatters take longer than one (overlapped, gradient sharding's are
  // priced per block and the distributed optimizer's whole: docs/simulate.md, "Data-parallel
  // overlap").
  std::string serial = kShardSim;
  serial.erase(serial.find(" --overlap-grad-reduce"));
  EXPECT_GE(run_json(serial + " --shard-grads").at("step_time_s").get<double>(),
            run_json(serial).at("step_time_s").get<double>());
}

TEST(ShardGradsCli, ThePlanCarriesItAndValidateAcceptsIt) {
  const std::string dir = make_temp_dir();
  const CliResult r =
      run_cli(std::string(kShardSim) + " --shard-grads --json --plan " + dir + "/plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  EXPECT_EQ(plan.at("config").at("shard_gradients"), true);
  EXPECT_EQ(plan.at("predicted").at("step_time_s"), nlohmann::json::parse(r.out).at("step_time_s"));
  const CliResult v = run_cli("validate " + dir + "/plan.json");
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

TEST(ShardGradsCli, RunningThePlanOnReplicasMatchesTheReference) {
  // 8 replicas: every per-microbatch reduction sums what the buffer gathered since the previous
  // one and takes it out of the buffer; the final one adds the parts back (reducing the whole
  // accumulated buffer each time would multiply the gradients and fail the check).
  const std::string dir = make_temp_dir();
  ASSERT_EQ(
      run_cli(std::string(kShardSim) + " --shard-grads --plan " + dir + "/plan.json").exit_code, 0);
  const CliResult r = run_cli("run " + dir + "/plan.json --check --steps 2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("check vs independent reference"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> PASS"), std::string::npos) << r.out;
}

TEST(ShardGradsCli, WithoutZeroOneSimulateRefusesWithOneLine) {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(
      "simulate --model gpt3-1.3b --cluster a100-80g --gpus 16 --pp 2 --dp 8 --global-batch 64 "
      "--schedule 1f1b --shard-grads --plan " +
      dir + "/plan.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "jaxpp-sim simulate: error: --shard-grads: gradient sharding (ZeRO-2) needs the "
            "distributed optimizer (--zero1)\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/plan.json"));
}

TEST(ShardGradsCli, APlanFileWithoutZeroOneIsRefused) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(
      run_cli(std::string(kShardSim) + " --shard-grads --plan " + dir + "/plan.json").exit_code, 0);
  nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  plan["config"]["zero1"] = false;
  const std::string bad = write_temp_file("bad_plan.json", plan.dump());
  const CliResult v = run_cli("validate " + bad);
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_NE(v.err.find("field 'shard_gradients': gradient sharding (ZeRO-2) needs the "
                       "distributed optimizer"),
            std::string::npos)
      << v.err;
}

TEST(ShardGradsCli, MeasuredModeRefusesIt) {
  const CliResult r =
      run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 2 --shard-grads");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--shard-grads"), std::string::npos) << r.err;
}

TEST(ShardGradsCli, ExploreSearchesItAsADimensionAndRefusesItWithZeroOneOff) {
  const std::string dir = make_temp_dir();
  const std::string base =
      "explore --model gpt3-1.3b --cluster a100-80g --gpus 16 --global-batch 64 --pp 2 --tp 1 "
      "--microbatch-sizes 1 --recompute none --schedules 1f1b";
  // ZeRO-1 off runs the same program as ZeRO-1 on, only slower: dominated.
  const nlohmann::json plain = run_json(base + " --zero1 both");
  EXPECT_GT(plain.at("pruned").at("dominated").get<int>(), 0);
  // Only sharded ZeRO-1 configurations: ZeRO-1 off has no dominating twin.
  const nlohmann::json on = run_json(base + " --zero1 both --shard-grads on");
  EXPECT_EQ(on.at("pruned").at("dominated").get<int>(), 0);
  EXPECT_EQ(on.at("enumerated"), plain.at("enumerated"));
  // The plan of a sharded configuration carries it.
  run_json(base + " --zero1 on --shard-grads on --plan " + dir + "/best.json");
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/best.json"));
  EXPECT_EQ(plan.at("config").at("shard_gradients"), true);
  // both: ZeRO-1 with and without sharding, so one more configuration per ZeRO-1 one.
  const nlohmann::json both = run_json(base + " --zero1 on --shard-grads both");
  int sharded = 0, unsharded = 0;
  for (const nlohmann::json& c : both.at("configs")) {
    EXPECT_TRUE(c.at("config").at("zero1").get<bool>());
    (c.at("config").value("shard_gradients", false) ? sharded : unsharded) += 1;
  }
  EXPECT_GT(sharded, 0);
  EXPECT_EQ(sharded, unsharded);
  // Refused without ZeRO-1, and a bad value.
  const CliResult off = run_cli(base + " --zero1 off --shard-grads on");
  EXPECT_EQ(off.exit_code, 2);
  EXPECT_NE(off.err.find("--shard-grads: gradient sharding (ZeRO-2) needs the distributed "
                         "optimizer"),
            std::string::npos)
      << off.err;
  const CliResult bad = run_cli(base + " --shard-grads yes");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--shard-grads: expected off, on or both, got 'yes'"), std::string::npos)
      << bad.err;
}

TEST(ShardGradsCli, GraphBalancedTimeTakesItAndRefusesItWithoutZeroOne) {
  const std::string base =
      "graph --model gpt3-1.3b --pp 2 --partition balanced-time --schedule 1f1b --dp 8 "
      "--microbatches 8 --cluster a100-80g";
  const CliResult ok = run_cli(base + " --zero1 --shard-grads --json");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  const CliResult bad = run_cli(base + " --shard-grads");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--shard-grads"), std::string::npos) << bad.err;
  const CliResult unused = run_cli("graph --model gpt3-1.3b --pp 2 --shard-grads");
  EXPECT_EQ(unused.exit_code, 2);
  EXPECT_NE(unused.err.find("--shard-grads"), std::string::npos) << unused.err;
}

}  // namespace
}  // namespace jaxpp::testing
