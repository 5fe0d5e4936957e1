// Bounded prediction of real compute (issue 15): `calibrate --backend threads`, then real-compute
// runs on threads with `run --compare --cluster`, and the median prediction error of the runs is
// held to a band. This is the one test of the project that asserts on timings, because the claim
// it guards is a timing claim: a calibrated cluster predicts the step time of a real run.
//
// The band, 35%: the calibration is made right before the runs, so it sees the share of the
// machine they will get (docs/calibrate.md, "Real compute"), but the test must pass on a shared
// 2-core CI machine, where another job may take one of the two cores for part of the runs and not
// of the calibration, and the two vCPUs need not run alike: single runs moved by 20-30% here from
// one minute to the next. The median of five runs within 35% leaves that room, and a round that
// still misses (a core shared for the whole round) is measured again, up to three rounds. It is
// still a bound that fails: a cluster whose compute rates are three times what was measured lands
// at a median |error| of 1.8-3.2 (measured), and AnOptimisticClusterFallsOutsideTheBand asserts
// that the same check fails then. A machine whose cores are both taken by other jobs for the whole test fails it,
// as it should: the prediction is not for such a machine.
//
// The test runs alone (RUN_SERIAL in tests/CMakeLists.txt): the suite's other tests would
// otherwise load the machine it measures. About 9 s each.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

constexpr double kBand = 0.35;
constexpr int kRuns = 5;
// Tasks of 1-2 ms (GEMMs of 2 MFLOP and GeLU on 16 Ki elements), 8 microbatches, 2 stages:
// about 25 ms a step, 0.2 s a run.
const char* kWorkload =
    " --schedule 1f1b --pp 2 --microbatches 8 --hidden 64 --seq 64 --layers-per-stage 2"
    " --steps 5 --warmup 1";

// A fresh quick calibration on threads (about 4 s): the path of the cluster file. Its
// repetitions last 20 ms, several scheduler time slices, as the runs' steps do: a repetition of
// 2 ms on a core that another process shares is mostly either not preempted at all or preempted
// throughout, so the median of such repetitions is the speed of a core held alone, while a step of
// the runs gets the core's share. With 2 ms repetitions and another process on about one of the
// two cores, the median error of the runs here was +45% to +49% twice in a row (and +10% once).
std::string calibrate_now() {
  const std::string path = make_temp_dir() + "/threads.json";
  CliResult r = run_cli("calibrate --backend threads --quick --repetition-ms 20 --repeats 3 "
                        "--warmup 1 -o " +
                        path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

struct Errors {
  std::vector<double> errors;  // (measured − predicted) / predicted of each run
  double median_abs = 0;
  std::string describe() const {
    std::string s;
    for (double e : errors) s += std::to_string(e) + " ";
    return "errors of the runs: " + s + "median |error| " + std::to_string(median_abs);
  }
};

Errors prediction_errors(const std::string& cluster) {
  Errors out;
  std::vector<double> abs_errors;
  for (int i = 0; i < kRuns; ++i) {
    CliResult r =
        run_cli(std::string("run") + kWorkload + " --compare --json --cluster " + cluster);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) break;
    const double e = nlohmann::json::parse(r.out).at("prediction_error").get<double>();
    out.errors.push_back(e);
    abs_errors.push_back(std::abs(e));
  }
  std::sort(abs_errors.begin(), abs_errors.end());
  if (!abs_errors.empty()) out.median_abs = abs_errors[abs_errors.size() / 2];
  return out;
}

// The cluster with every compute rate three times what was measured.
std::string optimistic_copy(const std::string& cluster) {
  nlohmann::json c = nlohmann::json::parse(read_file(cluster));
  for (auto& [dtype, tflops] : c.at("peak_tflops").items()) tflops = 3 * tflops.get<double>();
  for (auto& [kernel, ns] : c.at("elementwise").items()) ns = ns.get<double>() / 3;
  c["hbm_bandwidth_gb_per_s"] = 3 * c.at("hbm_bandwidth_gb_per_s").get<double>();
  return write_temp_file("optimistic.json", c.dump(2));
}

// Up to kAttempts rounds of calibrate-then-run: the claim holds when one round's median is in the
// band. A round whose calibration or runs shared a core with another job for part of the time (the
// CI machine runs the suite two tests at a time, and other jobs may share it) is measured again
// rather than failing the suite; a cluster that is wrong fails every round (the optimistic cluster
// below lands at 1.8-3.2, far outside the band, in every round measured).
constexpr int kAttempts = 3;

TEST(RealComputePrediction, MedianErrorOfRunsOnThreadsIsWithinTheBand) {
  std::string all;
  bool within = false;
  for (int attempt = 1; attempt <= kAttempts && !within; ++attempt) {
    const Errors e = prediction_errors(calibrate_now());
    ASSERT_EQ(e.errors.size(), static_cast<size_t>(kRuns));
    all += "round " + std::to_string(attempt) + ": " + e.describe() + "\n";
    within = e.median_abs <= kBand;
  }
  std::printf("%s", all.c_str());
  EXPECT_TRUE(within) << "no round within the band of " << kBand << ":\n" << all;
}

TEST(RealComputePrediction, AnOptimisticClusterFallsOutsideTheBand) {
  const Errors e = prediction_errors(optimistic_copy(calibrate_now()));
  ASSERT_EQ(e.errors.size(), static_cast<size_t>(kRuns));
  std::printf("%s\n", e.describe().c_str());
  EXPECT_GT(e.median_abs, kBand) << "the check could not fail: " << e.describe();
}

}  // namespace
}  // namespace jaxpp::testing
