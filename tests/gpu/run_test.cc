// `jaxpp-sim run --backend cuda` end to end: checked runs on one GPU, on a 2-stage pipeline (once
// and 20 times in a row), with Adam and two replicas, under mpirun on 8 GPUs (interleaved and
// zero bubble, pp 4 x dp 2), one GPU per rank through CUDA_VISIBLE_DEVICES, and the fault paths
// (an injected numerical fault, a dropped message, a killed rank, too few GPUs). Each test skips
// when the machine has fewer GPUs than it needs, saying how many it has.
#include <cstdlib>
#include <string>

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
