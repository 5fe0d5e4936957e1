// The MoE workload of `jaxpp-sim run` (issue 13, item 7; runtime/moe_workload.h): MoE plans pass
// `run --check` against the independent MoE reference on threads and under mpirun (dp 2, ep 2)
// for Std1F1B, ZB-H1 and DualPipeV; every injected fault (expert-swap included) makes the check
// fail; bad combinations are one-line errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

// Small sizes: 8 experts of width 64, top-2, hidden 32, 4 tokens per microbatch.
const std::string kMoeTiny =
    " --hidden 32 --ffn 64 --seq 4 --layers-per-stage 1 --steps 2 --warmup 1";

// A mixtral-8x7b plan (8 experts, top-2, softmax router) on 4 GPUs: pp 2, dp 2, ep 2.
std::string moe_plan(const std::string& schedule, const std::string& extra = "") {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(
      "simulate --model mixtral-8x7b --cluster h100-sxm --gpus 4 --pp 2 --dp 2 --ep 2 "
      "--global-batch 8 --no-memory-check --schedule " +
      schedule + " " + extra + " --plan " + dir + "/p.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir + "/p.json";
}

void expect_moe_check_passes(const nlohmann::json& j, int ep) {
  EXPECT_TRUE(j.at("check_passed").get<bool>()) << j.dump(1);
  EXPECT_EQ(j.at("moe").at("ep").get<int>(), ep);
  EXPECT_EQ(j.at("moe").at("top_k").get<int>(), 2);
  EXPECT_LT(j.at("check").at("reference").at("max_rel_diff_weights").get<double>(), 1e-12);
  EXPECT_LT(j.at("check").at("reference").at("max_rel_diff_loss").get<double>(), 1e-12);
  EXPECT_FALSE(j.at("check").at("orchestration").at("ran").get<bool>());
  // It trained: the loss of the second measured step is below the first.
  const auto losses = j.at("losses").get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_LT(losses[1], losses[0]);
}

// Gradient bytes a run reduces per step over `workers` workers (one stage each) of kMoeTiny's MoE
// blocks (hidden 32, 8 experts of width 64, one layer per stage): the router over every replica,
// the E/ep held experts over their expert data-parallel group.
int64_t expert_reduce_bytes_per_step(int workers, int ep) {
  const int64_t router = 32 * 8, held_experts = (8 / ep) * 2 * 32 * 64;
  return workers * (router + held_experts) * 8;
}

TEST(MoeRunCli, Std1F1BPlanWithEp2PassesTheCheckOnThreads) {
  const nlohmann::json j = run_json("run " + moe_plan("1f1b") + " --check" + kMoeTiny);
  expect_moe_check_passes(j, 2);
  EXPECT_EQ(j.at("moe").at("router"), "softmax");
  EXPECT_EQ(j.at("dp").get<int>(), 2);
}

// The trace of an MoE run records its experts (workload.moe), and calibrate --from-trace, which
// fits the dense MLP workload's kernels, refuses it instead of fitting the experts as an MLP.
TEST(MoeRunCli, TraceRecordsTheExpertsAndCalibrateFromTraceRefusesIt) {
  const std::string plan = moe_plan("1f1b");
  const std::string trace = make_temp_dir() + "/t.json";
  const CliResult r = run_cli("run " + plan + kMoeTiny + " --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json t = nlohmann::json::parse(read_file(trace));
  const nlohmann::json& moe = t.at("workload").at("moe");
  EXPECT_EQ(moe.at("experts").get<int>(), 8);
  EXPECT_EQ(moe.at("top_k").get<int>(), 2);
  EXPECT_EQ(moe.at("ep").get<int>(), 2);
  EXPECT_EQ(moe.at("router"), "softmax");
  const CliResult c = run_cli("calibrate --from-trace " + trace);
  EXPECT_EQ(c.exit_code, 2) << c.err;
  EXPECT_NE(c.err.find(trace + ": field 'workload': the trace is of a mixture-of-experts run "
                               "(8 experts, top-2, ep 2); calibrate --from-trace fits the dense "
                               "MLP workload only"),
            std::string::npos)
      << c.err;
}

TEST(MoeRunCli, ZeroBubblePlanWithSplitBackwardPassesTheCheckOnThreads) {
  expect_moe_check_passes(
      run_json("run " + moe_plan("zb-h1") + " --check --optimizer adam" + kMoeTiny), 2);
}

TEST(MoeRunCli, DualPipeVPlanWithOverlappedPairsPassesTheCheckOnThreads) {
  expect_moe_check_passes(run_json("run " + moe_plan("dualpipev") + " --check" + kMoeTiny), 2);
}

TEST(MoeRunCli, Std1F1BPlanPassesTheCheckUnderMpirunWithDp2Ep2) {
  const CliResult r = run_cli_under_mpirun(
      4, "run " + moe_plan("1f1b") + " --backend mpi --check --json" + kMoeTiny);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("backend"), "mpi");
  expect_moe_check_passes(j, 2);
  EXPECT_EQ(j.at("moe").at("grad_reduce_bytes_per_step").get<int64_t>(),
            expert_reduce_bytes_per_step(4, 2));
}

TEST(MoeRunCli, ZeroBubblePlanPassesTheCheckUnderMpirunWithDp2Ep2) {
  const CliResult r = run_cli_under_mpirun(
      4, "run " + moe_plan("zb-h1") + " --backend mpi --check --json" + kMoeTiny);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_moe_check_passes(nlohmann::json::parse(r.out), 2);
}

TEST(MoeRunCli, SigmoidRouterOfTheModelIsUsedAndPassesTheCheck) {
  const std::string model = write_temp_file(
      "sigmoid_moe.json",
      R"({"name": "tiny-moe", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128,
          "vocab": 1000, "mlp": "swiglu", "experts": 4, "top_k": 2, "expert_ffn_hidden": 512,
          "router": "sigmoid"})");
  const std::string dir = make_temp_dir();
  const CliResult plan = run_cli("simulate --model " + model +
                                 " --cluster h100-sxm --gpus 4 --pp 2 --dp 2 --ep 2 "
                                 "--global-batch 8 --no-memory-check --schedule 1f1b --plan " +
                                 dir + "/p.json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const nlohmann::json j = run_json("run " + dir + "/p.json --check" + kMoeTiny);
  EXPECT_EQ(j.at("moe").at("router"), "sigmoid");
  EXPECT_EQ(j.at("moe").at("experts").get<int>(), 4);
  EXPECT_TRUE(j.at("check_passed").get<bool>()) << j.dump(1);
}

TEST(MoeRunCli, EveryInjectedFaultMakesTheMoeCheckFail) {
  const std::string plan = moe_plan("1f1b");
  for (const char* fault : {"corrupt-grad", "skip-accumulate", "stale-weight", "expert-swap"}) {
    const CliResult r = run_cli("run " + plan + " --check --inject " + fault + kMoeTiny);
    EXPECT_EQ(r.exit_code, 1) << fault << ": " << r.err;
    EXPECT_NE(r.err.find("check failed (independent reference)"), std::string::npos)
        << fault << ": " << r.err;
  }
}

TEST(MoeRunCli, ExpertSwapUnderMpirunMakesTheCheckFail) {
  const CliResult r = run_cli_under_mpirun(
      4, "run " + moe_plan("1f1b") + " --backend mpi --check --inject expert-swap" + kMoeTiny);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("check failed (independent reference)"), std::string::npos) << r.err;
}

TEST(MoeRunCli, ExpertSwapOnADensePlanIsABadInput) {
  const CliResult r = run_cli(
      "run --schedule 1f1b --pp 2 --microbatches 2 --check --inject expert-swap" + kMoeTiny);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--inject expert-swap: needs an MoE plan"), std::string::npos) << r.err;
}

TEST(MoeRunCli, KilledEpPeerUnderMpirunEndsTheRun) {
  // Actor 0 of replica 0 exits before its first forward; replica 1 waits in that forward's
  // dispatch all-to-all until mpirun or the timeout ends the job.
  const CliResult r = run_cli_under_mpirun(
      4, "run " + moe_plan("1f1b") + " --backend mpi --timeout-s 2 --inject-kill 0:0" + kMoeTiny);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("injected fault: actor 0 (replica 0), step 0, instruction 0"),
            std::string::npos)
      << r.err;
}

TEST(MoeRunCli, ExpertGradientsAreReducedOverTheirGroupOnThreadsAndUnderMpirun) {
  // dp 4, ep 2: replicas {0, 2} hold experts 0-3, {1, 3} experts 4-7; each expert is reduced
  // over its two holders (a group of the wrong replicas would fail the check).
  const std::string dir = make_temp_dir();
  const CliResult plan = run_cli(
      "simulate --model mixtral-8x7b --cluster h100-sxm --gpus 8 --pp 2 --dp 4 --ep 2 "
      "--global-batch 16 --no-memory-check --schedule 1f1b --plan " +
      dir + "/p.json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const nlohmann::json j = run_json("run " + dir + "/p.json --check" + kMoeTiny);
  expect_moe_check_passes(j, 2);
  const int64_t bytes = j.at("moe").at("grad_reduce_bytes_per_step").get<int64_t>();
  EXPECT_EQ(bytes, expert_reduce_bytes_per_step(8, 2));
  // Half the experts' bytes of a dp-wide all-reduce of the whole buffer (router + 8 experts).
  EXPECT_LT(bytes, expert_reduce_bytes_per_step(8, 1));
  const CliResult mpi = run_cli_under_mpirun(
      8, "run " + dir + "/p.json --backend mpi --check --json" + kMoeTiny);
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  const nlohmann::json m = nlohmann::json::parse(mpi.out);
  expect_moe_check_passes(m, 2);
  EXPECT_EQ(m.at("moe").at("grad_reduce_bytes_per_step").get<int64_t>(), bytes);
}

// ---- run --compare of an MoE plan ------------------------------------------------------------

// The plan's cost model, all-to-all payload types included (read back from plan.json), scaled.
TEST(MoeRunCli, EmulatedCompareOfAnMoePlanPredictsWhatSimulatePrints) {
  const std::string dir = make_temp_dir();
  const nlohmann::json sim = run_json(
      "simulate --model mixtral-8x7b --cluster h100-sxm --gpus 4 --pp 2 --dp 2 --ep 2 "
      "--global-batch 8 --no-memory-check --schedule dualpipev --a2a-dtype fp8,bf16 --plan " +
      dir + "/p.json");
  ASSERT_GT(sim.at("alltoall_s").get<double>(), 0);
  ASSERT_LT(sim.at("alltoall_exposed_s").get<double>(), sim.at("alltoall_s").get<double>())
      << "DualPipeV's pairs hide part of it";
  const double scale = 1e-3;
  const nlohmann::json run = run_json("run " + dir +
                                      "/p.json --compute emulated --time-scale 0.001 --steps 2 "
                                      "--warmup 0 --compare");
  EXPECT_EQ(run.at("predicted_from"), "plan cost model");
  EXPECT_NEAR(run.at("predicted_step_time_s").get<double>(),
              scale * sim.at("step_time_s").get<double>(), 1e-12);
  EXPECT_NEAR(run.at("predicted_alltoall_s").get<double>(),
              scale * sim.at("alltoall_s").get<double>(), 1e-12);
  EXPECT_NEAR(run.at("predicted_alltoall_exposed_s").get<double>(),
              scale * sim.at("alltoall_exposed_s").get<double>(), 1e-12);
  // With a backend's cluster the all-to-all is still the plan's, scaled.
  const nlohmann::json backend = run_json("run " + dir +
                                          "/p.json --compute emulated --time-scale 0.001 "
                                          "--steps 2 --warmup 0 --compare --cluster h100-sxm");
  EXPECT_NEAR(backend.at("predicted_alltoall_s").get<double>(),
              scale * sim.at("alltoall_s").get<double>(), 1e-12);
}

TEST(MoeRunCli, RealCompareWithAClusterPricesTheExpertsAndTheAllToAllNotADenseMlp) {
  const std::string dir = make_temp_dir();
  const CliResult dense_plan = run_cli(
      "simulate --model gpt3-1.3b --cluster h100-sxm --gpus 4 --pp 2 --dp 2 --global-batch 8 "
      "--no-memory-check --schedule 1f1b --plan " +
      dir + "/dense.json");
  ASSERT_EQ(dense_plan.exit_code, 0) << dense_plan.err;
  const std::string flags = " --compare --cluster h100-sxm" + kMoeTiny;
  const nlohmann::json moe = run_json("run " + moe_plan("1f1b") + flags);
  const nlohmann::json dense = run_json("run " + dir + "/dense.json" + flags);
  EXPECT_EQ(moe.at("predicted_from"), "calibrated cluster 'h100-sxm'");
  // Every F and B holds two dispatch/combine pairs through the backend, serialised with compute.
  ASSERT_TRUE(moe.contains("predicted_alltoall_s"));
  EXPECT_GT(moe.at("predicted_alltoall_s").get<double>(), 0);
  EXPECT_DOUBLE_EQ(moe.at("predicted_alltoall_exposed_s").get<double>(),
                   moe.at("predicted_alltoall_s").get<double>());
  EXPECT_FALSE(dense.contains("predicted_alltoall_s"));
  // Top-2 of 8 experts of the same width, a router and the all-to-all: more than the dense MLP.
  for (const char* kind : {"F", "B"}) {
    EXPECT_GT(moe.at("kinds").at(kind).at("predicted_s").get<double>(),
              dense.at("kinds").at(kind).at("predicted_s").get<double>())
        << kind;
  }
  EXPECT_GT(moe.at("predicted_step_time_s").get<double>(),
            dense.at("predicted_step_time_s").get<double>());
}

}  // namespace
}  // namespace jaxpp::testing
