// Regression tests for cluster-parser findings of the bad-input catalogue (docs/hardening.md).
#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/stage_times_cost.h"
#include "graph/error.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

nlohmann::json based_on_a100(double hbm_gib) {
  return {{"name", "c"}, {"base", "a100-80g"}, {"hbm_gib", hbm_gib}};
}

TEST(ClusterParserRegression, HbmTooLargeForInt64BytesIsAnInputError) {
  // Was: 1e300 GiB was cast to int64 (undefined behaviour) and came back as a negative size.
  EXPECT_NE(error_of([] {
              cluster_from_json(based_on_a100(1e300), "c.json");
            }).find("c.json: field 'hbm_gib': out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { cluster_from_json(based_on_a100(5e9), "c.json"); }).find("out of range"),
            std::string::npos);
}

TEST(ClusterParserRegression, HbmBelowOneByteIsAnInputError) {
  // Was: accepted as 0 bytes, then rejected with a confusing message when a plan re-read it.
  EXPECT_NE(error_of([] {
              cluster_from_json(based_on_a100(1e-12), "c.json");
            }).find("field 'hbm_gib': out of range"),
            std::string::npos);
}

TEST(ClusterParserRegression, LargeButRepresentableHbmRoundTrips) {
  const ClusterSpec c = cluster_from_json(based_on_a100(1e6), "c.json");
  EXPECT_EQ(c.hbm_bytes, int64_t{1'000'000} * 1024 * 1024 * 1024);
  EXPECT_EQ(cluster_from_json(cluster_to_json(c), "again"), c);
}

// --- Numbers at their edges (issue 16, class 3): checked on the SI value after the conversion. --

nlohmann::json based_on_a100_with(const std::string& key, nlohmann::json value) {
  nlohmann::json j = {{"name", "c"}, {"base", "a100-80g"}};
  j[key] = std::move(value);
  return j;
}

std::string cluster_error(const nlohmann::json& j) {
  return error_of([&] { cluster_from_json(j, "c.json"); });
}

TEST(ClusterParserRegression, DenormalThatBecomesZeroOrDenormalAfterTheScaleIsRefused) {
  // Was: 1e-320 GB/s passed "> 0" and became 1e-311 bytes/s: every transfer took inf seconds.
  EXPECT_NE(cluster_error(based_on_a100_with("inter_node", {{"bandwidth_gb_per_s", 1e-320}}))
                .find("field 'bandwidth_gb_per_s': out of range: expected 1 kB/s to 100 TB/s"),
            std::string::npos);
  // Was: 1e-320 us became 0 s, silently.
  EXPECT_NE(cluster_error(based_on_a100_with("intra_node", {{"latency_us", 1e-320}}))
                .find("field 'latency_us': out of range"),
            std::string::npos);
  EXPECT_NE(cluster_error(based_on_a100_with("allreduce_bus_efficiency", 1e-320))
                .find("expected a fraction in [0.0001, 1]"),
            std::string::npos);
}

TEST(ClusterParserRegression, ValuesBeyondWhatHardwareDoesAreRefused) {
  EXPECT_NE(cluster_error(based_on_a100_with("weight_bytes_per_param", 1e300))
                .find("field 'weight_bytes_per_param': out of range"),
            std::string::npos);
  EXPECT_NE(cluster_error(based_on_a100_with("peak_tflops", {{"bf16", 1e10}}))
                .find("field 'bf16': out of range"),
            std::string::npos);
  EXPECT_NE(cluster_error(based_on_a100_with("kernels", {{"sms", 4294967297LL}}))
                .find("field 'sms': too large"),
            std::string::npos);
}

TEST(ClusterParserRegression, ZeroStillMeansNotModelledWhereItDid) {
  const ClusterSpec c =
      cluster_from_json(based_on_a100_with("peak_tflops", {{"fp8", 0}, {"bf16", 312}}), "c.json");
  EXPECT_EQ(c.peak_flops_per_s[static_cast<int>(Dtype::kFp8)], 0);
  EXPECT_EQ(cluster_from_json(based_on_a100_with("p2p_overhead_us", 0), "c.json").p2p_overhead_s,
            0);
}

TEST(ClusterParserRegression, EveryPresetSurvivesItsOwnRanges) {
  for (const std::string& name : cluster_preset_names()) {
    const ClusterSpec c = cluster_preset(name);
    EXPECT_EQ(cluster_from_json(cluster_to_json(c), name), c) << name;
  }
}

TEST(StageTimesParserRegression, TimesAreCheckedInSecondsAfterTheConversion) {
  EXPECT_NE(error_of([] {
              stage_time_s_from_ms(1e-320, false, "--t-f");
            }).find("--t-f: expected a time in milliseconds from 1e-06 (1 ns) to 3.6e+06 (1 h)"),
            std::string::npos);
  EXPECT_NE(error_of([] { stage_time_s_from_ms(1e300, true, "--t-w"); }).find("of 0 or from"),
            std::string::npos);
  EXPECT_EQ(stage_time_s_from_ms(0, true, "--t-w"), 0);
  EXPECT_DOUBLE_EQ(stage_time_s_from_ms(2.5, false, "--t-f"), 2.5e-3);
  EXPECT_NE(error_of([] {
              stage_times_from_json(nlohmann::json{{"t_f_ms", 1e-320}, {"t_b_ms", 1}}, "t.json", 2);
            }).find("t.json: field 't_f_ms': expected a time in milliseconds"),
            std::string::npos);
}

}  // namespace
}  // namespace jaxpp
