// jaxpp-sim run: JSON output, the numerics check on threads and under mpirun, faults, the CUDA
// backend's error without a GPU, and bad input.
#include <sys/wait.h>

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
  EXPECT_LE(j.at("max_abs_diff_loss").get<double>(), 1e-12);
  EXPECT_LE(j.at("max_abs_diff_weights").get<double>(), 1e-12);
  ASSERT_EQ(j.at("losses").size(), 2u);
  EXPECT_EQ(j.at("losses"), j.at("reference_losses"));
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

struct MpiCase {
  std::string name;
  std::string args;
  int processes;
};

// ctest lists parameterised tests with their printed parameter: the schedule name suffices.
void PrintTo(const MpiCase& c, std::ostream* os) { *os << c.name; }

class RunMpiTest : public ::testing::TestWithParam<MpiCase> {};

TEST_P(RunMpiTest, MatchesSequentialReferenceUnderMpirunWithDp2) {
  const MpiCase& c = GetParam();
  expect_check_passed(run_cli_under_mpirun(
      c.processes, "run --backend mpi --check --json --dp 2 " + c.args + kTiny));
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, RunMpiTest,
    ::testing::Values(MpiCase{"GPipe", "--schedule GPipe --pp 2 --microbatches 2", 4},
                      MpiCase{"Std1F1B", "--schedule Std1F1B --pp 2 --microbatches 3", 4},
                      MpiCase{"ZeroBubble", "--schedule ZeroBubble --pp 2 --microbatches 2", 4},
                      MpiCase{"Interleaved1F1B",
                              "--schedule Interleaved1F1B --pp 2 --virtual 2 --microbatches 2", 4},
                      MpiCase{"DualPipeV", "--schedule DualPipeV --pp 2 --microbatches 4", 4}),
    [](const auto& info) { return info.param.name; });

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
  bool not_built = r.err.find("built without the CUDA backend") != std::string::npos;
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

TEST(RunCli, MissingPlanFileIsABadInput) {
  CliResult r = run_cli("run /nonexistent/plan.json");
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace jaxpp::testing
