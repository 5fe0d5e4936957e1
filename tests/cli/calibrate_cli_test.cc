// jaxpp-sim calibrate (microbenchmarks on threads and under mpirun, fits from a run trace), the
// calibrated cluster in simulate and run --compare, run's --report and --timeline, and bad input:
// one-line errors, exit codes, no partial output file.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

bool exists(const std::string& path) { return std::filesystem::exists(path); }

std::vector<std::string> top_level_keys(const nlohmann::json& j) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.push_back(key);
  return keys;
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// The fastest complete suite: every benchmark, few points, no warm-up, short repetitions.
const char* kFastCalibration = " --quick --repeats 1 --warmup 0 --repetition-ms 0.05 ";
const char* kTinyRun = " --hidden 8 --seq 4 --layers-per-stage 1 --steps 2 --warmup 1 ";

// A cluster file `calibrate --backend threads` wrote, for the tests of what reads one (simulate,
// run --compare, run --report). A checked-in file, not a fresh calibration: the microbenchmarks
// time a loaded host, and under ctest -j2 on two cores a point-to-point sweep sometimes cannot
// resolve a bandwidth ("point-to-point benchmark: times do not grow with size", exit 2), which
// left these tests with no file to read. ThreadsWritesAClusterWithFittedParametersAndResiduals
// checks that a fresh calibration still writes the keys this file has.
std::string calibrated_cluster() { return data("calibrate/threads_cluster.json"); }

TEST(CalibrateCli, ThreadsWritesAClusterWithFittedParametersAndResiduals) {
  const std::string path = make_temp_dir() + "/c.json";
  CliResult r = run_cli("calibrate -o " + path + " --json" + kFastCalibration);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("backend"), "threads");
  EXPECT_GT(j.at("parameters").at("gemm_rate_flops_per_s").get<double>(), 0);
  EXPECT_GT(j.at("parameters").at("p2p_bandwidth_bytes_per_s").get<double>(), 0);
  EXPECT_FALSE(j.at("fits").at("gemm").at("fit").at("residuals").empty());
  EXPECT_TRUE(j.at("fits").contains("allreduce"));
  nlohmann::json file = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(file, j.at("cluster")) << "the file is the printed cluster";
  EXPECT_EQ(file.at("name"), "calibrated-threads");
  EXPECT_TRUE(file.contains("elementwise"));
  // The file the other tests read (calibrated_cluster) has the keys calibrate writes today.
  const nlohmann::json kept = nlohmann::json::parse(read_file(calibrated_cluster()));
  EXPECT_EQ(top_level_keys(file), top_level_keys(kept))
      << "regenerate " << calibrated_cluster() << " with calibrate --backend threads --quick -o";
}

TEST(CalibrateCli, TablePrintsEveryFitAndItsResiduals) {
  CliResult r = run_cli(std::string("calibrate --name mine") + kFastCalibration);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"GEMM curve", "GeLU", "copy", "point-to-point", "all-reduce", "launch",
                        "residuals per point", "GEMM 8x32x8 NN", "GEMM 32x8x8 TN +=", "p2p 8 B"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(CalibrateCli, CalibratedFileLoadsInSimulate) {
  CliResult r = run_cli("simulate --model " + std::string(JAXPP_TEST_DATA_DIR) +
                        "/graph/tiny_transformer.json --cluster " + calibrated_cluster() +
                        " --gpus 2 --pp 2 --global-batch 4 --schedule 1f1b --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out).at("step_time_s").get<double>(), 0);
}

TEST(CalibrateCli, RunCompareWithTheClusterPredictsFromItAndReportsTheError) {
  CliResult r = run_cli("run --schedule gpipe --pp 2 --microbatches 2 --compare --json --cluster " +
                        calibrated_cluster() + kTinyRun);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("predicted_from"), "calibrated cluster 'calibrated-threads'");
  const double predicted = j.at("predicted_step_time_s").get<double>();
  const double measured = j.at("step_time_s").get<double>();
  ASSERT_GT(predicted, 0);
  EXPECT_NEAR(j.at("prediction_error").get<double>(), (measured - predicted) / predicted, 1e-12);
  EXPECT_GT(j.at("kinds").at("F").at("predicted_s").get<double>(), 0);
}

TEST(CalibrateCli, EmulatedRunWithTheClusterAddsTheBackendCosts) {
  CliResult r = run_cli(
      "run --schedule 1f1b --pp 2 --microbatches 2 --compute emulated --steps 2 --compare "
      "--time-scale 0.01 --json --cluster " +
      calibrated_cluster());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("predicted_from"), "stage times + calibrated backend 'calibrated-threads'");
  EXPECT_TRUE(j.contains("prediction_error"));
}

TEST(CalibrateCli, RunReportIsOneSelfContainedPageWithBothTimelines) {
  const std::string dir = make_temp_dir();
  CliResult r = run_cli("run --schedule 1f1b --pp 2 --microbatches 2 --compare --cluster " +
                        calibrated_cluster() + " --report " + dir + "/report.html --timeline " +
                        dir + "/measured.svg" + kTinyRun);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = read_file(dir + "/report.html");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  size_t first = html.find("<svg"), second = html.find("<svg", first + 1);
  EXPECT_NE(first, std::string::npos);
  EXPECT_NE(second, std::string::npos) << "predicted and measured timelines";
  EXPECT_LT(html.find("Predicted timeline"), html.find("Measured timeline"));
  EXPECT_NE(html.find("<td>F</td>"), std::string::npos) << "per-kind table";
  EXPECT_EQ(html.find("src=\""), std::string::npos) << "no external resources";
  EXPECT_NE(read_file(dir + "/measured.svg").find("<svg"), std::string::npos);
}

TEST(CalibrateCli, RunTimelineFormatFollowsTheExtension) {
  const std::string dir = make_temp_dir();
  CliResult r = run_cli("run --schedule 1f1b --pp 2 --microbatches 2 --timeline " + dir + "/t.txt" +
                        kTinyRun);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(read_file(dir + "/t.txt").find("actor 1"), std::string::npos);
}

TEST(CalibrateCli, RunWithAnUnknownTimelineExtensionFailsBeforeRunning) {
  const std::string dir = make_temp_dir();
  CliResult r = run_cli("run --schedule 1f1b --pp 2 --microbatches 2 --timeline " + dir + "/t.xyz" +
                        kTinyRun);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("t.xyz"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << "nothing ran";
}

TEST(CalibrateCli, RunReportIntoAMissingDirectoryFailsBeforeRunning) {
  CliResult r = run_cli(
      "run --schedule 1f1b --pp 2 --microbatches 2 --compare --report "
      "/nonexistent-dir/r.html" +
      std::string(kTinyRun));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--report /nonexistent-dir/r.html"), std::string::npos) << r.err;
}

TEST(CalibrateCli, FromTraceFitsTheRunAndWritesALoadableCluster) {
  const std::string dir = make_temp_dir();
  CliResult run = run_cli("run --schedule 1f1b --pp 2 --microbatches 4 --trace " + dir +
                          "/run.json --hidden 16 --seq 8 --layers-per-stage 1 --steps 2");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  CliResult r = run_cli("calibrate --from-trace " + dir + "/run.json --hidden 16 --seq 8 " +
                        "--layers-per-stage 1 -o " + dir + "/fitted.json --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j.at("compute_slowdown").get<double>(), 0);
  for (const char* kind : {"F", "B", "transfer"}) EXPECT_TRUE(j.at("kinds").contains(kind)) << kind;
  CliResult sim = run_cli("simulate --model " + std::string(JAXPP_TEST_DATA_DIR) +
                          "/graph/tiny_transformer.json --cluster " + dir +
                          "/fitted.json --gpus 2 --pp 2 --global-batch 4 --schedule 1f1b --json");
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
}

TEST(CalibrateCli, FromTraceTablePrintsPerKindErrors) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_cli("run --schedule zb-h1 --pp 2 --microbatches 4 --trace " + dir + "/run.json" +
                    kTinyRun)
                .exit_code,
            0);
  CliResult r = run_cli("calibrate --from-trace " + dir +
                        "/run.json --hidden 8 --seq 4 --layers-per-stage 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"kind", "measured", "fitted", "I ", "W "})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(CalibrateCli, FromTraceRejectsFlagsThatAreNotTheRuns) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_cli("run --schedule 1f1b --pp 2 --microbatches 2 --dp 2 --trace " + dir +
                    "/run.json" + kTinyRun)
                .exit_code,
            0);
  const std::string trace = "calibrate --from-trace " + dir + "/run.json ";
  // The run's flags are accepted.
  EXPECT_EQ(run_cli(trace + "--hidden 8 --seq 4 --layers-per-stage 1 --dp 2").exit_code, 0);
  // Another size: the transfers say so.
  CliResult size =
      run_cli(trace + "--hidden 16 --seq 4 --layers-per-stage 1 --dp 2 -o " + dir + "/c.json");
  EXPECT_EQ(size.exit_code, 2);
  EXPECT_EQ(count_lines(size.err), 1) << size.err;
  EXPECT_NE(size.err.find("--hidden"), std::string::npos) << size.err;
  EXPECT_FALSE(exists(dir + "/c.json"));
}

TEST(CalibrateCli, FromTraceOfAPlanRunAcceptsTheRunsFlagsAndRefusesOthers) {
  // A plan's program carries its model's bytes; the run moves the MLP's (sweep 5: the trace
  // recorded the plan's, so calibrate refused the run's own flags and took wrong ones).
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_cli("simulate --model " + std::string(JAXPP_TEST_DATA_DIR) +
                    "/graph/tiny_transformer.json --gpus 2 --pp 2 --global-batch 4 --schedule "
                    "1f1b --plan " +
                    dir + "/p.json")
                .exit_code,
            0);
  CliResult run = run_cli("run " + dir + "/p.json --trace " + dir + "/run.json" + kTinyRun);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json t = nlohmann::json::parse(read_file(dir + "/run.json"));
  for (const auto& e : t.at("events")) {
    if (e.at("op") != "send" && e.at("op") != "recv") continue;
    EXPECT_EQ(e.at("bytes"), 4 * 8 * 8) << "seq 4 x hidden 8 doubles: " << e.dump();
  }
  const std::string cal = "calibrate --from-trace " + dir + "/run.json ";
  CliResult own = run_cli(cal + "--hidden 8 --seq 4 --layers-per-stage 1");
  EXPECT_EQ(own.exit_code, 0) << own.err;
  CliResult recorded = run_cli(cal);  // the flags the trace records
  EXPECT_EQ(recorded.exit_code, 0) << recorded.err;
  CliResult wrong = run_cli(cal + "--hidden 64 -o " + dir + "/c.json");
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_EQ(count_lines(wrong.err), 1) << wrong.err;
  EXPECT_NE(wrong.err.find("--hidden 64: " + dir +
                           "/run.json was recorded by a run with "
                           "--hidden 8"),
            std::string::npos)
      << wrong.err;
  EXPECT_FALSE(exists(dir + "/c.json"));
}

TEST(CalibrateCli, RunCompareShowsNoErrorForKindsWithNoPrediction) {
  // Predicted from the measured task times: transfers and optimizer steps are predicted 0, so
  // there is no error to show (sweep 5: "+0.0%", and 0 in JSON).
  const std::string dir = make_temp_dir();
  CliResult text = run_cli("run --schedule 1f1b --pp 2 --microbatches 2 --compare --report " + dir +
                           "/r.html" + kTinyRun);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::istringstream lines(text.out);
  bool saw_recv = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("recv ", 0) != 0) continue;
    saw_recv = true;
    EXPECT_EQ(line.substr(line.size() - 3), "n/a") << line;
  }
  EXPECT_TRUE(saw_recv) << text.out;
  EXPECT_NE(read_file(dir + "/r.html").find("<td>n/a</td>"), std::string::npos);
  CliResult json = run_cli("run --schedule 1f1b --pp 2 --microbatches 2 --compare --json" +
                           std::string(kTinyRun));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json kinds = nlohmann::json::parse(json.out).at("kinds");
  EXPECT_TRUE(kinds.at("recv").at("error_pct").is_null()) << kinds.dump();
  EXPECT_TRUE(kinds.at("F").at("error_pct").is_number()) << kinds.dump();
}

TEST(CalibrateCli, FromAMalformedTraceFailsWithOneLineAndNoFile) {
  const std::string trace = write_temp_file("bad.json", "{\"format\": \"jaxpp-sim-trace\", ");
  const std::string out = make_temp_dir() + "/c.json";
  CliResult r = run_cli("calibrate --from-trace " + trace + " -o " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("bad.json"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(out));
}

TEST(CalibrateCli, FromASimulatedTraceIsRejected) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_cli("simulate --schedule 1f1b --pp 2 --microbatches 2 --t-f 1 --t-b 1 --trace " +
                    dir + "/sim.json")
                .exit_code,
            0);
  CliResult r = run_cli("calibrate --from-trace " + dir + "/sim.json -o " + dir + "/c.json");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("source"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(dir + "/c.json"));
}

TEST(CalibrateCli, UnwritableOutputFailsBeforeMeasuring) {
  CliResult r = run_cli("calibrate -o /nonexistent-dir/c.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("/nonexistent-dir"), std::string::npos) << r.err;
  const std::string dir = make_temp_dir();
  CliResult d = run_cli("calibrate -o " + dir);
  EXPECT_EQ(d.exit_code, 2);
  EXPECT_NE(d.err.find("is a directory"), std::string::npos) << d.err;
}

TEST(CalibrateCli, UnknownBackendIsBadInputAndWritesNothing) {
  const std::string out = make_temp_dir() + "/c.json";
  CliResult r = run_cli("calibrate --backend gpu -o " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--backend"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(out));
}

TEST(CalibrateCli, CudaWithoutADeviceFailsWithOneLine) {
  const std::string out = make_temp_dir() + "/c.json";
  CliResult r = run_cli("calibrate --backend cuda -o " + out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("cuda"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(out));
}

TEST(CalibrateCli, BadRepeatsIsBadInput) {
  CliResult r = run_cli("calibrate --repeats 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--repeats"), std::string::npos) << r.err;
}

TEST(CalibrateCli, MpiRankZeroWritesTheClusterOfAllRanks) {
  const std::string dir = make_temp_dir();
  const CliResult r =
      run_cli_under_mpirun(2, "calibrate --backend mpi -o " + dir + "/mpi.json" + kFastCalibration);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json c = nlohmann::json::parse(read_file(dir + "/mpi.json"));
  EXPECT_EQ(c.at("name"), "calibrated-mpi");
  EXPECT_GT(c.at("intra_node").at("latency_us").get<double>(), 0);
  const std::string& out = r.out;
  EXPECT_EQ(out.find("calibrate: backend mpi"), out.rfind("calibrate: backend mpi"))
      << "only rank 0 prints";
}

}  // namespace
}  // namespace jaxpp::testing
