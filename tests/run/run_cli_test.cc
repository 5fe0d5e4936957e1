// jaxpp-sim run: JSON output, the numerics check of every built-in schedule on threads and under
// mpirun, injected faults that the check catches, dp taken from a plan, communication faults,
// the CUDA backend's error without a GPU, and bad input.
#include <sys/wait.h>

#include <algorithm>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

const char* kTiny = " --hidden 8 --seq 4 --layers-per-stage 1 --steps 2 --warmup 1 ";


void expect_check_passed(const CliResult& r) {
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("check_passed").get<bool>());
  const nlohmann::json& ref = j.at("check").at("reference");
  EXPECT_TRUE(ref.at("passed").get<bool>());
  EXPECT_EQ(ref.at("rel_tolerance").get<double>(), 1e-9);
  EXPECT_LE(ref.at("max_rel_diff_loss").get<double>(), 1e-9);
  EXPECT_LE(ref.at("max_rel_diff_weights").get<double>(), 1e-9);
  EXPECT_EQ(ref.at("first_difference"), "");
  const nlohmann::json& orch = j.at("check").at("orchestration");
  EXPECT_TRUE(orch.at("bit_exact").get<bool>());
  EXPECT_EQ(orch.at("max_abs_diff_loss").get<double>(), 0);
  EXPECT_EQ(orch.at("max_abs_diff_weights").get<double>(), 0);
  ASSERT_EQ(j.at("losses").size(), 2u);
  ASSERT_EQ(j.at("reference_losses").size(), 2u);
  EXPECT_GT(j.at("step_time_s").get<double>(), 0);
  EXPECT_GT(j.at("predicted_step_time_s").get<double>(), 0);
}

TEST(RunCli, ThreadsJsonReportsLossesStepTimeAndCheck) {
  expect_check_passed(
      run_cli(std::string("run --schedule zb-h1 --pp 2 --microbatches 4 --dp 2 --check --json "
                          "--compare") +
              kTiny));
}

TEST(RunCli, CompareTablePrintsPredictedAndMeasured) {
  CliResult r = run_cli(
      "run --schedule gpipe --pp 2 --microbatches 2 --compute emulated --steps 2 --compare "
      "--time-scale 0.1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("predicted step time (stage times)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("F "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("err%"), std::string::npos) << r.out;
}

TEST(RunCli, TraceFileIsWritten) {
  std::string path = make_temp_dir() + "/trace.json";
  CliResult r = run_cli("run --schedule 1f1b --pp 2 --microbatches 2 --trace " + path + kTiny);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json t = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(t.at("source"), "measured:threads");
  EXPECT_EQ(t.at("num_steps"), 3);
  EXPECT_FALSE(t.at("events").empty());
}

struct ScheduleCase {
  std::string name;
  std::string args;  // selects the schedule; two actors, so dp = 2 makes four workers
};

// ctest lists parameterised tests with their printed parameter: the case name suffices.
void PrintTo(const ScheduleCase& c, std::ostream* os) { *os << c.name; }

// All nineteen built-in schedules with two actors, the fused and virtual variants, a custom
// PyTorch CSV schedule and a rule-based one (Shardy's ZeroBubbleH1 rules).
const ScheduleCase kScheduleCases[] = {
    {"GPipe", "--schedule GPipe --pp 2 --microbatches 2"},
    {"Std1F1B", "--schedule Std1F1B --pp 2 --microbatches 3"},
    {"Eager1F1B", "--schedule Eager1F1B --pp 2 --microbatches 3"},
    {"ZeroBubble", "--schedule ZeroBubble --pp 2 --microbatches 2"},
    {"Interleaved1F1B", "--schedule Interleaved1F1B --pp 2 --virtual 2 --microbatches 2"},
    {"Interleaved1F1BFused",
     "--schedule Interleaved1F1B --pp 2 --virtual 2 --microbatches 4 --fuse-steady-state"},
    {"KimiK2", "--schedule KimiK2 --pp 2 --virtual 2 --microbatches 2"},
    {"KimiK2Fused", "--schedule KimiK2 --pp 2 --virtual 2 --microbatches 4 --fuse-steady-state"},
    {"InterleavedGPipe", "--schedule InterleavedGPipe --pp 2 --virtual 2 --microbatches 2"},
    {"DualPipeV", "--schedule DualPipeV --pp 2 --microbatches 4"},
    {"ZBH2", "--schedule ZB-H2 --pp 2 --microbatches 3"},
    {"ZBV", "--schedule ZB-V --pp 2 --microbatches 2"},
    {"LoopedBFS", "--schedule LoopedBFS --pp 2 --virtual 2 --microbatches 2"},
    {"MegatronInterleaved",
     "--schedule MegatronInterleaved --pp 2 --virtual 2 --microbatches 4 --group-size 2"},
    {"Circular", "--schedule Circular --pp 2 --virtual 2 --microbatches 3"},
    {"CircularWithReversedBackward",
     "--schedule CircularWithReversedBackward --pp 2 --virtual 2 --microbatches 3"},
    {"GPipeBut1F1BForLastMesh", "--schedule GPipeBut1F1BForLastMesh --pp 2 --microbatches 3"},
    {"ZeroBubbleH1", "--schedule ZeroBubbleH1 --pp 2 --microbatches 3"},
    {"ZeroBubbleH2ZeroTxLatency", "--schedule ZeroBubbleH2ZeroTxLatency --pp 2 --microbatches 3"},
    {"ZeroBubbleH2HalfTxLatency", "--schedule ZeroBubbleH2HalfTxLatency --pp 2 --microbatches 3"},
    {"ZeroBubbleH2FullTxLatency", "--schedule ZeroBubbleH2FullTxLatency --pp 2 --microbatches 3"},
    {"CustomCsv", "--schedule-file " + data("schedules/1f1b_p2_m4.csv")},
    {"CustomRules", "--schedule-file " + data("schedules/rules_zero_bubble_h1_p2_m3.json")},
};

TEST(RunCli, ScheduleCasesCoverEveryBuiltInSchedule) {
  const CliResult r = run_cli("schedules --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json all = nlohmann::json::parse(r.out);
  ASSERT_GE(all.size(), 12u);
  for (const nlohmann::json& info : all) {
    const std::string name = info.at("name").get<std::string>();
    const bool covered = std::any_of(
        std::begin(kScheduleCases), std::end(kScheduleCases),
        [&](const ScheduleCase& c) { return c.args.find("--schedule " + name + " ") == 0; });
    EXPECT_TRUE(covered) << name << " is not run with --check on threads and under mpirun";
  }
}

class RunScheduleTest : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(RunScheduleTest, PassesTheCheckOnThreadsWithDp2) {
  expect_check_passed(run_cli("run --check --json --dp 2 " + GetParam().args + kTiny));
}

INSTANTIATE_TEST_SUITE_P(Schedules, RunScheduleTest, ::testing::ValuesIn(kScheduleCases),
                         [](const auto& info) { return info.param.name; });

class RunMpiTest : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(RunMpiTest, PassesTheCheckUnderMpirunWithDp2) {
  expect_check_passed(run_cli_under_mpirun(
      4, "run --backend mpi --check --json --dp 2 " + GetParam().args + kTiny));
}

INSTANTIATE_TEST_SUITE_P(Schedules, RunMpiTest, ::testing::ValuesIn(kScheduleCases),
                         [](const auto& info) { return info.param.name; });

struct FaultCase {
  std::string name;
  std::string fault;
  std::string first_difference;  // where the first differing value must be
};

void PrintTo(const FaultCase& c, std::ostream* os) { *os << c.name; }

// One step, so the first differing value is where the fault struck (replica 0).
const char* kOneStep = " --hidden 8 --seq 4 --layers-per-stage 1 --steps 1 --warmup 0 ";

class RunFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(RunFaultTest, InjectedFaultFailsTheCheckNamingTheFirstDifference) {
  const FaultCase& c = GetParam();
  CliResult r = run_cli("run --schedule zb-h1 --pp 2 --microbatches 2 --dp 2 --check --inject " +
                        c.fault + kOneStep);
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.out.find("check vs independent reference"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> FAIL"), std::string::npos) << r.out;
  const std::string expected =
      "jaxpp-sim run: check failed (independent reference): " + c.first_difference + ": run ";
  EXPECT_EQ(r.err.rfind(expected, 0), 0u) << r.err;
  EXPECT_NE(r.err.find(", reference "), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

INSTANTIATE_TEST_SUITE_P(Faults, RunFaultTest,
                         ::testing::Values(FaultCase{"CorruptGrad", "corrupt-grad",
                                                     "stage 1 (replica 0) layer 0 W1[0,0]"},
                                           FaultCase{"SkipAccumulate", "skip-accumulate",
                                                     "stage 0 (replica 0) layer 0 W1[0,0]"},
                                           FaultCase{"StaleWeight", "stale-weight",
                                                     "stage 0 (replica 0) layer 0 W1[0,0]"}),
                         [](const auto& info) { return info.param.name; });

TEST(RunCli, MpiInjectedFaultFailsTheCheck) {
  CliResult r = run_cli_under_mpirun(
      4,
      "run --backend mpi --schedule 1f1b --pp 2 --microbatches 2 --dp 2 --check --json "
      "--inject stale-weight" +
          std::string(kOneStep));
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("check failed (independent reference): stage 0 (replica 0) layer 0 W1[0,0]"),
            std::string::npos)
      << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.at("check_passed").get<bool>());
  EXPECT_EQ(j.at("inject"), "stale-weight");
}

TEST(RunCli, UnknownFaultIsABadInput) {
  CliResult r =
      run_cli("run --schedule 1f1b --pp 2 --check --inject bit-flip" + std::string(kTiny));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--inject: expected none, corrupt-grad, skip-accumulate, stale-weight or "
                       "expert-swap, got 'bit-flip'"),
            std::string::npos)
      << r.err;
}

// A plan for 2 actors with dp = 2 (simulate --plan).
std::string plan_with_dp2() {
  const std::string path = make_temp_dir() + "/plan.json";
  CliResult r = run_cli(
      "simulate --model gpt3-1.3b --schedule 1f1b --gpus 4 --pp 2 --dp 2 "
      "--global-batch 8 --plan " +
      path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

TEST(RunCli, PlanRunTakesDpFromThePlan) {
  CliResult r = run_cli("run " + plan_with_dp2() + " --check --json" + std::string(kTiny));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("dp"), 2);
  EXPECT_EQ(j.at("num_actors"), 2);
  EXPECT_TRUE(j.at("check_passed").get<bool>());
}

TEST(RunCli, PlanRunRejectsADifferentDp) {
  const std::string plan = plan_with_dp2();
  EXPECT_EQ(run_cli("run " + plan + " --dp 2" + std::string(kTiny)).exit_code, 0);
  CliResult r = run_cli("run " + plan + " --dp 3" + std::string(kTiny));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "jaxpp-sim run: error: " + plan + ": config.dp is 2, but --dp is 3\n");
}

TEST(RunCli, MpiPlanRunTakesDpFromTheWorldSize) {
  CliResult r = run_cli_under_mpirun(
      4, "run " + plan_with_dp2() + " --backend mpi --check --json" + std::string(kTiny));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("dp"), 2);
  EXPECT_TRUE(j.at("check_passed").get<bool>());
}

TEST(RunCli, MpiPlanRunRejectsAWorldSizeThatContradictsThePlan) {
  const std::string plan = plan_with_dp2();
  CliResult r = run_cli_under_mpirun(2, "run " + plan + " --backend mpi" + std::string(kTiny));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::string line = "jaxpp-sim run: error: " + plan +
                           ": config.dp is 2 (2 actors x 2 replicas = 4 processes), but mpirun "
                           "started 2 processes\n";
  const size_t at = r.err.find(line);
  EXPECT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(line, at + 1), std::string::npos) << "reported once: " << r.err;
}

TEST(RunCli, MpiKilledPeerEndsTheRun) {
  CliResult r = run_cli_under_mpirun(
      3,
      "run --backend mpi --schedule 1f1b --pp 3 --microbatches 3 --timeout-s 2 "
      "--inject-kill 1:2" +
          std::string(kTiny));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("injected fault: actor 1 (replica 0), step 0, instruction 2"),
            std::string::npos)
      << r.err;
}

TEST(RunCli, MpiWrongProcessCountIsABadInput) {
  CliResult r = run_cli_under_mpirun(
      2, "run --backend mpi --schedule 1f1b --pp 3 --microbatches 3" + std::string(kTiny));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("needs 3 actors x 1 replicas = 3 processes, but mpirun started 2"),
            std::string::npos)
      << r.err;
}

TEST(RunCli, DroppedMessageOnThreadsFailsWithinTheTimeout) {
  CliResult r = run_cli(
      "run --schedule 1f1b --pp 3 --microbatches 3 --timeout-s 1 "
      "--inject-drop 4" +
      std::string(kTiny));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("jaxpp-sim run: error: actor"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("timed out after 1 s waiting for tag"), std::string::npos) << r.err;
}

TEST(RunCli, CudaBackendWithoutAGpuFailsCleanly) {
  CliResult r =
      run_cli("run --backend cuda --schedule 1f1b --pp 2 --microbatches 2" + std::string(kTiny));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  bool no_device = r.err.find("no CUDA device visible") != std::string::npos;
  bool not_built = r.err.find("built without the CUDA plugin") != std::string::npos;
  EXPECT_TRUE(no_device || not_built) << r.err;
}

TEST(RunCli, BadFlagsAreRejected) {
  EXPECT_EQ(run_cli("run --schedule 1f1b --pp 2 --backend gpu").exit_code, 2);
  EXPECT_EQ(run_cli("run --schedule 1f1b --pp 2 --compute fake").exit_code, 2);
  EXPECT_EQ(run_cli("run").exit_code, 2);
  CliResult r = run_cli("run --schedule 1f1b --pp 2 --compute emulated --check");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--check needs --compute real"), std::string::npos) << r.err;
}

TEST(RunCli, ADeepStackTrainsAtTheDefaultLearningRate) {
  // 100 blocks (2 stages of 50) overflowed to inf/NaN losses at the default rate and exited 0.
  CliResult r = run_cli("run --schedule 1f1b --pp 2 --layers-per-stage 50 --microbatches 4 "
                        "--steps 3 --check --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto losses = nlohmann::json::parse(r.out).at("losses");
  ASSERT_EQ(losses.size(), 3u) << r.out;
  for (const auto& l : losses) ASSERT_TRUE(l.is_number()) << r.out;  // JSON writes NaN as null
  EXPECT_LT(losses.back().get<double>(), losses.front().get<double>()) << r.out;
}

TEST(RunCli, ADivergedRunFailsAndSaysSo) {
  CliResult r = run_cli("run --schedule 1f1b --pp 2 --microbatches 4 --steps 4 --lr 100 --check");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the training loss is not finite at iteration "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("learning rate 100 is too large for it; give a smaller --lr"),
            std::string::npos)
      << r.err;
}

TEST(RunCli, MissingPlanFileIsABadInput) {
  CliResult r = run_cli("run /nonexistent/plan.json");
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace jaxpp::testing
