// --shard-params (parameter sharding, ZeRO-3 / FSDP) in simulate, graph, run and export: memory
// and the parameter all-gathers follow it, plans carry it, a replicated run of a sharded plan
// matches the reference, and it is refused without the distributed optimizer (exit 2, one line,
// nothing written).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

const char* const kShardParamsSim =
    "simulate --model gpt3-1.3b --cluster a100-80g --gpus 16 --pp 2 --dp 8 --global-batch 64 "
    "--schedule 1f1b --zero1 --overlap-grad-reduce";

TEST(ShardParamsCli, ShrinksMemoryAndGathersTheWeightsBeforeEveryPass) {
  const nlohmann::json zero2 = run_json(std::string(kShardParamsSim) + " --shard-grads");
  const nlohmann::json zero3 = run_json(std::string(kShardParamsSim) + " --shard-params");
  // m = 8 microbatches: 2 · 8 gathers per stage of its 16-bit weights = 8 times the fp32
  // gradient bytes that the 8 reduce-scatters move: the collective bytes double.
  EXPECT_EQ(zero3.at("collective_bytes").get<int64_t>(),
            2 * zero2.at("collective_bytes").get<int64_t>());
  EXPECT_LT(json_sum(zero3.at("peak_memory_bytes")), json_sum(zero2.at("peak_memory_bytes")));
  // The gathers hide behind the computes but the first one's lead block, and the final
  // reduce-scatter exposes its last block only, where gradient sharding alone reduce-scatters the
  // whole stage after the last backward (costmodel/analytic_cost.h): the steps differ by a few
  // percent.
  EXPECT_NE(zero3.at("step_time_s").get<double>(), zero2.at("step_time_s").get<double>());
  EXPECT_NEAR(zero3.at("step_time_s").get<double>(), zero2.at("step_time_s").get<double>(),
              0.03 * zero2.at("step_time_s").get<double>());
}

TEST(ShardParamsCli, ThePlanCarriesItValidateAcceptsItAndRunMatchesTheReference) {
  const std::string dir = make_temp_dir();
  const CliResult r =
      run_cli(std::string(kShardParamsSim) + " --shard-params --json --plan " + dir + "/plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  EXPECT_EQ(plan.at("config").at("shard_parameters"), true);
  EXPECT_EQ(plan.at("config").at("shard_gradients"), true);
  EXPECT_EQ(plan.at("predicted").at("step_time_s"), nlohmann::json::parse(r.out).at("step_time_s"));
  const CliResult v = run_cli("validate " + dir + "/plan.json");
  EXPECT_EQ(v.exit_code, 0) << v.err;
  // 8 replicas: every all-gather rebuilds the stage's weights from the replicas' shards (a gather
  // that summed whole copies would multiply the weights by 8 and fail the check).
  const CliResult run =
      run_cli("run " + dir + "/plan.json --check --steps 2 --trace " + dir + "/trace.json");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("check vs independent reference"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("FAIL"), std::string::npos) << run.out;
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir + "/trace.json"));
  int gathers = 0;
  for (const nlohmann::json& e : trace.at("events")) gathers += e.at("op") == "allgather";
  // Per step of the trace: 2 stages × 8 microbatches × (F, B).
  EXPECT_EQ(gathers, 2 * 8 * 2 * trace.at("num_steps").get<int>());
  // A numerical fault is still caught with the gathers in place.
  const CliResult stale =
      run_cli("run " + dir + "/plan.json --check --steps 2 --inject stale-weight");
  EXPECT_NE(stale.exit_code, 0);
}

TEST(ShardParamsCli, RunningThePlanUnderMpirunMatchesTheReference) {
  // 2 actors × 2 replicas, one MPI rank each: the gathers are MPI all-reduces of the shards, run
  // as soon as their deps are done, between the computes.
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_cli("simulate --model gpt3-1.3b --cluster a100-80g --gpus 4 --pp 2 --dp 2 "
                    "--global-batch 16 --schedule 1f1b --zero1 --shard-params --plan " +
                    dir + "/plan.json")
                .exit_code,
            0);
  const CliResult r =
      run_cli_under_mpirun(4, "run " + dir + "/plan.json --backend mpi --check --steps 2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("-> PASS"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(ShardParamsCli, WithoutZeroOneSimulateRefusesWithOneLine) {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(
      "simulate --model gpt3-1.3b --cluster a100-80g --gpus 16 --pp 2 --dp 8 --global-batch 64 "
      "--schedule 1f1b --shard-params --plan " +
      dir + "/plan.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "jaxpp-sim simulate: error: --shard-params: parameter sharding (ZeRO-3 / FSDP) needs "
            "the distributed optimizer (--zero1)\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/plan.json"));
}

TEST(ShardParamsCli, APlanFileWithoutZeroOneIsRefused) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_cli(std::string(kShardParamsSim) + " --shard-params --plan " + dir + "/plan.json")
                .exit_code,
            0);
  nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  plan["config"]["zero1"] = false;
  const std::string bad = write_temp_file("bad_shard_params_plan.json", plan.dump());
  const CliResult v = run_cli("validate " + bad);
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_NE(v.err.find("field 'shard_parameters': parameter sharding (ZeRO-3 / FSDP) needs the "
                       "distributed optimizer"),
            std::string::npos)
      << v.err;
  // A gather of the wrong size is not the plan's lowering.
  plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  ASSERT_EQ(plan["program"]["actors"][0][0].at("op"), "allgather");
  plan["program"]["actors"][0][0]["bytes"] = 1;
  const CliResult resized =
      run_cli("validate " + write_temp_file("resized_gather.json", plan.dump()));
  EXPECT_EQ(resized.exit_code, 2);
  EXPECT_NE(resized.err.find("instruction 0 (all-gather F0@s0): 1 bytes, but the model and "
                             "configuration give"),
            std::string::npos)
      << resized.err;
  EXPECT_NE(resized.err.find("(the weights of stage 0)"), std::string::npos) << resized.err;
  // A program whose gathers were dropped is not a program.
  plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  nlohmann::json& list = plan["program"]["actors"][0];
  nlohmann::json kept = nlohmann::json::array();
  for (const nlohmann::json& ins : list)
    if (ins.at("op") != "allgather") kept.push_back(ins);
  list = kept;
  const CliResult dropped =
      run_cli("validate " + write_temp_file("dropped_gathers.json", plan.dump()));
  EXPECT_EQ(dropped.exit_code, 1);
  EXPECT_NE(dropped.out.find("INVALID"), std::string::npos) << dropped.out;
}

TEST(ShardParamsCli, MeasuredModeAndGraphRefuseItAndMegatronGetsMegatronFsdp) {
  const CliResult measured =
      run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 2 --shard-params");
  EXPECT_EQ(measured.exit_code, 2);
  EXPECT_NE(measured.err.find("--shard-params"), std::string::npos) << measured.err;
  const CliResult graph = run_cli("graph --model gpt3-1.3b --pp 2 --shard-params");
  EXPECT_EQ(graph.exit_code, 2);
  EXPECT_NE(graph.err.find("--shard-params"), std::string::npos) << graph.err;
  const nlohmann::json g = run_json(
      "graph --model gpt3-1.3b --pp 2 --partition balanced-time --schedule 1f1b --dp 8 --zero1 "
      "--shard-params");
  EXPECT_EQ(g.at("num_stages"), 2);
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_cli(std::string(kShardParamsSim) + " --shard-params --plan " + dir + "/plan.json")
                .exit_code,
            0);
  // Megatron-LM runs it as Megatron-FSDP's optim_grads_params (docs/export.md).
  const CliResult exported =
      run_cli("export --plan " + dir + "/plan.json --format megatron -o " + dir + "/megatron.sh");
  EXPECT_EQ(exported.exit_code, 0) << exported.err;
  const std::string args = read_file(dir + "/megatron.sh");
  EXPECT_NE(args.find("--use-megatron-fsdp \\\n--data-parallel-sharding-strategy "
                      "optim_grads_params \\\n--ckpt-format fsdp_dtensor \\\n"),
            std::string::npos)
      << args;
}

TEST(ShardParamsCli, BreakdownShowsTheExposedGathersAsDpTime) {
  // dp 64 over eight nodes, one microbatch of one sequence: the lead block of the first gather of
  // the 8B's weights over the network cannot hide, and the last block's reduce-scatter after the
  // last backward runs alone; gradient sharding (overlapped, priced per block as well) exposes
  // only that last block: parameter sharding adds the first gather's lead.
  const std::string base =
      "simulate --model llama3-8b --cluster h100-sxm --gpus 64 --pp 1 --dp 64 --global-batch 64 "
      "--schedule 1f1b --zero1 --overlap-grad-reduce --breakdown";
  const nlohmann::json zero2 = run_json(base + " --shard-grads");
  const nlohmann::json zero3 = run_json(base + " --shard-params");
  const double dp2 = zero2.at("breakdown")[0].at("dp_exposed_s").get<double>();
  const double dp3 = zero3.at("breakdown")[0].at("dp_exposed_s").get<double>();
  EXPECT_GT(dp2, 0);
  EXPECT_GT(dp3, dp2);
  // What the step differs by from ZeRO-2 is the exposed DP time.
  EXPECT_NEAR(zero3.at("step_time_s").get<double>() - zero2.at("step_time_s").get<double>(),
              dp3 - dp2, 1e-9);
  EXPECT_NEAR(zero3.at("breakdown")[0].at("bubble_s").get<double>(),
              zero2.at("breakdown")[0].at("bubble_s").get<double>(), 1e-9);
}

TEST(ShardParamsCli, ExploreSearchesItAsADimension) {
  const std::string dir = make_temp_dir();
  const std::string base =
      "explore --model gpt3-1.3b --cluster a100-80g --gpus 16 --global-batch 64 --pp 2 --tp 1 "
      "--microbatch-sizes 1 --recompute none --schedules 1f1b";
  // ZeRO-1, ZeRO-2 and ZeRO-3 of the one ZeRO-1 configuration.
  const nlohmann::json all = run_json(base + " --zero1 on --shard-grads both --shard-params both");
  ASSERT_EQ(all.at("configs").size(), 3u);
  int plain = 0, grads = 0, params = 0;
  for (const nlohmann::json& c : all.at("configs")) {
    const nlohmann::json& config = c.at("config");
    if (config.value("shard_parameters", false)) {
      ++params;
      EXPECT_TRUE(config.value("shard_gradients", false));
      // The configuration explore simulated is the one simulate gives.
      const nlohmann::json sim = run_json(
          "simulate --model gpt3-1.3b --cluster a100-80g --gpus "
          "16 --pp 2 --dp 8 --global-batch 64 --schedule 1f1b "
          "--zero1 --shard-params");
      EXPECT_EQ(c.at("step_time_s"), sim.at("step_time_s"));
    } else {
      (config.value("shard_gradients", false) ? grads : plain) += 1;
    }
  }
  EXPECT_EQ(plain, 1);
  EXPECT_EQ(grads, 1);
  EXPECT_EQ(params, 1);
  // ZeRO-1 off has no unsharded ZeRO-1 twin with --shard-params on: not dominated.
  const nlohmann::json on = run_json(base + " --zero1 both --shard-params on");
  EXPECT_EQ(on.at("pruned").at("dominated").get<int>(), 0);
  EXPECT_EQ(on.at("configs").size(), 2u);
  // The CSV and the table carry it; the plan of the best sharded configuration too.
  const CliResult csv = run_cli(base + " --zero1 on --shard-params on --csv " + dir + "/e.csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_NE(csv.out.find("on+sp"), std::string::npos) << csv.out;
  const std::string text = read_file(dir + "/e.csv");
  EXPECT_EQ(text.rfind("rank,id,pp,tp,cp,dp,virtual_stages,microbatch_size,num_microbatches,"
                       "schedule,recompute,recompute_layers,zero1,shard_gradients,"
                       "shard_parameters,ep,",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find(",Std1F1B,none,-1,1,1,1,"), std::string::npos) << text;
  run_json(base + " --zero1 on --shard-params on --plan " + dir + "/best.json");
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/best.json"));
  EXPECT_EQ(plan.at("config").at("shard_parameters"), true);
  // Refused with ZeRO-1 off, and a bad value.
  const CliResult off = run_cli(base + " --zero1 off --shard-params on");
  EXPECT_EQ(off.exit_code, 2);
  EXPECT_NE(off.err.find("--shard-params: parameter sharding (ZeRO-3 / FSDP) needs the "
                         "distributed optimizer"),
            std::string::npos)
      << off.err;
  const CliResult bad = run_cli(base + " --shard-params yes");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--shard-params"), std::string::npos) << bad.err;
}

TEST(ShardParamsCli, RunsOnAHeterogeneousCluster) {
  // Each actor's gathers are priced on its own kind and tp: 16-bit weights gathered twice per
  // microbatch move as many bytes as the fp32 gradients' reduce-scatters.
  const std::string mixed =
      write_temp_file("shard_params_mixed.json",
                      R"({"name": "mixed", "kinds": [{"preset": "h100-sxm", "gpus": 8},
                                     {"preset": "a100-80g", "gpus": 8}]})");
  const std::string base = "simulate --model gpt3-1.3b --cluster " + mixed +
                           " --gpus 16 --pp 4 --tp 2 --dp 2 --global-batch 32 --schedule 1f1b "
                           "--partition even --zero1";
  const nlohmann::json zero2 = run_json(base + " --shard-grads");
  const nlohmann::json zero3 = run_json(base + " --shard-params");
  EXPECT_EQ(zero3.at("collective_bytes").get<int64_t>(),
            2 * zero2.at("collective_bytes").get<int64_t>());
  EXPECT_NE(zero3.at("step_time_s"), zero2.at("step_time_s"));
}

}  // namespace
}  // namespace jaxpp::testing
