// `jaxpp-sim run --backend cuda` end to end: checked runs on one GPU, on a 2-stage pipeline (once
// and 20 times in a row), with Adam and two replicas, under mpirun on 8 GPUs (interleaved and
// zero bubble, pp 4 x dp 2), one GPU per rank through CUDA_VISIBLE_DEVICES, and the fault paths
// (an injected numerical fault, a dropped message, a killed rank, too few GPUs). The MoE workload
// (runtime/moe_workload.h) on GPUs: 4 experts, top-2, checked against the independent MoE
// reference on one GPU (SGD; Adam with DualPipeV's split backward), on a 2-stage pipeline, and
// with ep 2 over dp 2 (the all-to-all through NCCL) in one process and under mpirun; an injected
// routing fault fails the check. Each test skips when the machine has fewer GPUs than it needs,
// saying how many it has.
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"
#include "tests/gpu/gpu_env.h"

namespace jaxpp::testing {
namespace {

// Small sizes: these tests are about the backend, not the GPU's speed.
constexpr const char* kSmall = " --hidden 48 --ffn 80 --seq 24 --layers-per-stage 2 --steps 2";

void expect_check_passed(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << what << "\n" << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << what << "\n" << r.out;
}

// Sets an environment variable of this process (inherited by the runs it starts) for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(CudaRun, OneStageOnOneGpuPassesTheCheck) {
  JAXPP_REQUIRE_GPUS(1);
  expect_check_passed(run_cli("run --backend cuda --check --schedule 1F1B --pp 1 --microbatches 4" +
                              std::string(kSmall)),
                      "pp 1");
}

TEST(CudaRun, OneStageWithAdamOnOneGpuPassesTheCheck) {
  JAXPP_REQUIRE_GPUS(1);
  expect_check_passed(run_cli("run --backend cuda --check --schedule 1F1B --pp 1 --microbatches "
                              "4 --optimizer adam" +
                              std::string(kSmall)),
                      "pp 1, adam");
}

TEST(CudaRun, TwoStagePipelinePassesTheCheck) {
  JAXPP_REQUIRE_GPUS(2);
  expect_check_passed(run_cli("run --backend cuda --check --schedule 1F1B --pp 2 --microbatches 4" +
                              std::string(kSmall)),
                      "pp 2");
}

TEST(CudaRun, TwoStagePipelinePassesTheCheckTwentyTimesInARow) {
  JAXPP_REQUIRE_GPUS(2);
  for (int i = 0; i < 20; ++i) {
    CliResult r = run_cli("run --backend cuda --check --schedule 1F1B --pp 2 --microbatches 4" +
                          std::string(kSmall));
    expect_check_passed(r, "repetition " + std::to_string(i + 1) + " of 20");
    if (r.exit_code != 0) return;  // the first failure says it all
  }
}

TEST(CudaRun, ZeroBubbleWithAdamAndTwoReplicasPassesTheCheck) {
  JAXPP_REQUIRE_GPUS(4);
  expect_check_passed(run_cli("run --backend cuda --check --schedule ZeroBubble --pp 2 "
                              "--microbatches 4 --dp 2 --optimizer adam" +
                              std::string(kSmall)),
                      "ZeroBubble pp 2 dp 2 adam (threads)");
}

TEST(CudaRun, InjectedGradientCorruptionFailsTheCheck) {
  JAXPP_REQUIRE_GPUS(2);
  CliResult r = run_cli(
      "run --backend cuda --check --inject corrupt-grad --schedule 1F1B --pp 2 --microbatches 4" +
      std::string(kSmall));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("check failed"), std::string::npos) << r.err;
}

TEST(CudaRun, DroppedMessageIsRejectedAndNamesTheInstruction) {
  JAXPP_REQUIRE_GPUS(2);
  CliResult r = run_cli(
      "run --backend cuda --schedule 1F1B --pp 2 --microbatches 4 --timeout-s 5 --inject-drop 1" +
      std::string(kSmall));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("instruction"), std::string::npos) << r.err;
}

TEST(CudaRun, APipelineWiderThanTheVisibleGpusFailsWithOneLine) {
  JAXPP_REQUIRE_GPUS(1);
  ScopedEnv one_gpu("CUDA_VISIBLE_DEVICES", "0");
  CliResult r =
      run_cli("run --backend cuda --schedule 1F1B --pp 2 --microbatches 4" + std::string(kSmall));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("2 workers on this host need 2 GPUs, found 1"), std::string::npos) << r.err;
}

// ---- the MoE workload ---------------------------------------------------------------------

// Small sizes for the MoE plans: 4 experts of width 80, top-2, hidden 48, 24 tokens.
constexpr const char* kMoeSmall =
    " --hidden 48 --ffn 80 --seq 24 --layers-per-stage 2 --steps 2 --warmup 0";

// A plan of a 4-expert, top-2 model (softmax router) on pp x dp GPUs with `ep` expert ranks.
std::string moe_gpu_plan(int pp, int dp, int ep, const std::string& schedule) {
  const std::string model =
      write_temp_file("gpu_moe_model.json",
                      R"({"name": "gpu-moe", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128,
          "vocab": 1000, "mlp": "swiglu", "experts": 4, "top_k": 2, "expert_ffn_hidden": 512})");
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(
      "simulate --model " + model + " --cluster h100-sxm --gpus " + std::to_string(pp * dp) +
      " --pp " + std::to_string(pp) + " --dp " + std::to_string(dp) + " --ep " +
      std::to_string(ep) + " --global-batch " + std::to_string(4 * dp) +
      " --no-memory-check --schedule " + schedule + " --plan " + dir + "/p.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir + "/p.json";
}

// A checked MoE run on cuda passed against the independent reference, and trained.
void expect_moe_check_passed(const CliResult& r, int ep, const std::string& what) {
  ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("backend"), "cuda") << what;
  EXPECT_TRUE(j.at("check_passed").get<bool>()) << what << "\n" << j.dump(1);
  EXPECT_EQ(j.at("moe").at("experts").get<int>(), 4) << what;
  EXPECT_EQ(j.at("moe").at("top_k").get<int>(), 2) << what;
  EXPECT_EQ(j.at("moe").at("ep").get<int>(), ep) << what;
  EXPECT_TRUE(j.at("check").at("reference").at("ran").get<bool>()) << what;
  EXPECT_LT(j.at("check").at("reference").at("max_rel_diff_weights").get<double>(), 1e-9) << what;
  const auto losses = j.at("losses").get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 2u) << what;
  EXPECT_LT(losses[1], losses[0]) << what << ": it trained";
}

TEST(CudaMoeRun, OneStageOnOneGpuPassesTheCheck) {
  JAXPP_REQUIRE_GPUS(1);
  expect_moe_check_passed(run_cli("run " + moe_gpu_plan(1, 1, 1, "1f1b") +
                                  " --backend cuda --check --json" + kMoeSmall),
                          1, "MoE pp 1");
}

TEST(CudaMoeRun, SplitBackwardWithAdamOnOneGpuPassesTheCheck) {
  JAXPP_REQUIRE_GPUS(1);
  // DualPipeV on one actor: two stages on the GPU, F, I and W tasks (W after I), Adam.
  expect_moe_check_passed(run_cli("run " + moe_gpu_plan(1, 1, 1, "dualpipev") +
                                  " --backend cuda --check --optimizer adam --json" + kMoeSmall),
                          1, "MoE DualPipeV pp 1, adam");
}

TEST(CudaMoeRun, InjectedRoutingFaultFailsTheCheckOnOneGpu) {
  JAXPP_REQUIRE_GPUS(1);
  const CliResult r = run_cli("run " + moe_gpu_plan(1, 1, 1, "1f1b") +
                              " --backend cuda --check --inject expert-swap" + kMoeSmall);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("check failed (independent reference)"), std::string::npos) << r.err;
}

TEST(CudaMoeRun, TwoStagePipelinePassesTheCheck) {
  JAXPP_REQUIRE_GPUS(2);
  expect_moe_check_passed(run_cli("run " + moe_gpu_plan(2, 1, 1, "1f1b") +
                                  " --backend cuda --check --json" + kMoeSmall),
                          1, "MoE pp 2");
}

TEST(CudaMoeRun, ExpertParallelAllToAllOverTwoGpusPassesTheCheck) {
  JAXPP_REQUIRE_GPUS(2);
  // dp 2, ep 2: each GPU holds 2 of the 4 experts; dispatch and combine are NCCL all-to-alls.
  expect_moe_check_passed(run_cli("run " + moe_gpu_plan(1, 2, 2, "1f1b") +
                                  " --backend cuda --check --optimizer adam --json" + kMoeSmall),
                          2, "MoE dp 2 ep 2");
}

TEST(CudaMoeRun, ExpertParallelUnderMpirunPassesTheCheckAndRoutingFaultFailsIt) {
  JAXPP_REQUIRE_GPUS(2);
  const std::string plan = moe_gpu_plan(1, 2, 2, "1f1b");
  expect_moe_check_passed(
      run_cli_under_mpirun(2, "run " + plan + " --backend cuda --check --json" + kMoeSmall), 2,
      "MoE dp 2 ep 2 under mpirun");
  const CliResult r = run_cli_under_mpirun(
      2, "run " + plan + " --backend cuda --check --inject expert-swap" + kMoeSmall);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("check failed (independent reference)"), std::string::npos) << r.err;
}

class CudaMpirun : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaMpirun, FourStagesTwoReplicasWithAdamPassTheCheckOnEightGpus) {
  JAXPP_REQUIRE_GPUS(8);
  expect_check_passed(run_cli_under_mpirun(8, std::string("run --backend cuda --check --pp 4 "
                                                          "--dp 2 --microbatches 8 "
                                                          "--optimizer adam ") +
                                                  GetParam() + kSmall),
                      GetParam());
}

INSTANTIATE_TEST_SUITE_P(Schedules, CudaMpirun,
                         ::testing::Values("--schedule Interleaved1F1B --virtual 2",
                                           "--schedule ZeroBubble", "--schedule 1F1B"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.index == 0   ? "Interleaved1F1B"
                                              : info.index == 1 ? "ZeroBubble"
                                                                : "OneFOneB");
                         });

TEST(CudaMpirunRanks, EachRankSeeingOneGpuUsesItsDeviceZero) {
  JAXPP_REQUIRE_GPUS(2);
  // Every rank sees exactly one GPU, a different one per rank (as Slurm --gpus-per-task=1 does).
  const CliResult r = run_cli_with_launcher(
      std::string(JAXPP_MPIEXEC) +
          " --oversubscribe --allow-run-as-root -n 2 sh -c 'CUDA_VISIBLE_DEVICES="
          "$OMPI_COMM_WORLD_LOCAL_RANK exec \"$0\" \"$@\"' ",
      "run --backend cuda --check --schedule 1F1B --pp 2 --microbatches 4" + std::string(kSmall));
  expect_check_passed(r, "one GPU per rank");
}

TEST(CudaMpirunRanks, AKilledRankEndsTheRunWithAnError) {
  JAXPP_REQUIRE_GPUS(2);
  CliResult r = run_cli_under_mpirun(2,
                                     "run --backend cuda --schedule 1F1B --pp 2 --microbatches 4 "
                                     "--timeout-s 5 --inject-kill 1:2" +
                                         std::string(kSmall));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("injected fault: actor 1 (replica 0), step 0, instruction 2"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace jaxpp::testing
