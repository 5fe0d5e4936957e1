#include "costmodel/cluster.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/error.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// The analytic curve, written out independently of ClusterSpec::gemm_efficiency.
double curve(const ClusterSpec& c, double x) {
  return c.gemm_efficiency_max * x / (x + c.gemm_half_saturation_flops);
}

// a100-80g with the curve max 0.63, half saturation 40 GFLOP, and a measured table.
ClusterSpec a100_with_table(std::vector<GemmEfficiencyPoint> table) {
  ClusterSpec c = cluster_preset("a100-80g");
  c.gemm_efficiency_max = 0.63;
  c.gemm_half_saturation_flops = 4e10;
  c.gemm_efficiency_measured = std::move(table);
  return c;
}

// The error message of reading a100-80g with "gemm_efficiency": {"measured": measured}.
std::string measured_error(const nlohmann::json& measured) {
  const nlohmann::json j = {{"base", "a100-80g"}, {"gemm_efficiency", {{"measured", measured}}}};
  return error_of([&] { cluster_from_json(j, "c.json"); });
}

TEST(Cluster, PresetsCarryVendorNumbers) {
  const ClusterSpec a = load_cluster("a100-80g");
  EXPECT_DOUBLE_EQ(a.peak_flops(Dtype::kBf16), 312e12);
  EXPECT_EQ(a.devices_per_node, 8);
  EXPECT_DOUBLE_EQ(a.intra_node.bandwidth_bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(a.inter_node.bandwidth_bytes_per_s, 24e9);
  EXPECT_EQ(a.hbm_bytes, int64_t{80} << 30);
  const ClusterSpec h = load_cluster("H100-SXM");  // case-insensitive
  EXPECT_DOUBLE_EQ(h.peak_flops(Dtype::kFp8), 1979e12);
  EXPECT_DOUBLE_EQ(h.intra_node.bandwidth_bytes_per_s, 450e9);
  EXPECT_DOUBLE_EQ(h.inter_node.bandwidth_bytes_per_s, 47e9);
  const ClusterSpec h2 = load_cluster("h200");
  EXPECT_EQ(h2.hbm_bytes, int64_t{141} << 30);
  EXPECT_DOUBLE_EQ(h2.hbm_bandwidth_bytes_per_s, 4800e9);
}

// H800 = the H100 SXM die with NVLink cut to 400 GB/s both directions: every field is H100's
// (compute, memory, fitted GEMM/FP8/attention constants, network) but the NVLink bandwidth, 200
// GB/s per direction, 160 GB/s point to point (the DeepSeek-V3 report's NVLink figure).
TEST(Cluster, H800IsTheH100WithItsNvlinkCut) {
  const ClusterSpec h800 = load_cluster("H800");  // case-insensitive, listed among the presets
  const ClusterSpec h100 = load_cluster("h100-sxm");
  EXPECT_EQ(h800.name, "h800");
  EXPECT_DOUBLE_EQ(h800.intra_node.bandwidth_bytes_per_s, 200e9);
  EXPECT_DOUBLE_EQ(h800.intra_node.effective_bandwidth_bytes_per_s(), 160e9);
  EXPECT_DOUBLE_EQ(h800.inter_node.bandwidth_bytes_per_s, 47e9);
  EXPECT_DOUBLE_EQ(h800.peak_flops(Dtype::kBf16), 989e12);
  EXPECT_DOUBLE_EQ(h800.peak_flops(Dtype::kFp8), 1979e12);
  EXPECT_EQ(h800.hbm_bytes, int64_t{80} << 30);
  EXPECT_DOUBLE_EQ(h800.hbm_bandwidth_bytes_per_s, 3350e9);
  EXPECT_EQ(h800.devices_per_node, 8);
  ClusterSpec same = h800;  // nothing else differs from H100
  same.name = h100.name;
  same.intra_node = h100.intra_node;
  EXPECT_EQ(same, h100);
  EXPECT_FALSE(h800.fp8_block_scaling) << "Hopper: no block-scaled FP8 tensor cores";
  const std::vector<std::string> names = cluster_preset_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "h800"), names.end());
}

TEST(Cluster, CollectiveStepLatencyIsOptionalAndDefaultsToTheLinkLatency) {
  ClusterSpec c = cluster_preset("a100-80g");
  EXPECT_EQ(c.collective_step_latency_s, 2e-6) << "the presets' nccl-tests step latency";
  c.collective_step_latency_s = 0;
  EXPECT_EQ(c.intra_collective_latency_s(), c.intra_node.latency_s);
  EXPECT_FALSE(cluster_to_json(c).contains("collective_step_latency_us"))
      << "written only when set, so existing files round-trip unchanged";
  nlohmann::json j = cluster_to_json(c);
  j["collective_step_latency_us"] = 12.5;
  const ClusterSpec back = cluster_from_json(j, "c.json");
  EXPECT_DOUBLE_EQ(back.collective_step_latency_s, 12.5e-6);
  EXPECT_DOUBLE_EQ(back.intra_collective_latency_s(), 12.5e-6);
  EXPECT_EQ(cluster_to_json(back).at("collective_step_latency_us"), 12.5);
  j["collective_step_latency_us"] = -1;
  EXPECT_THAT([&] { cluster_from_json(j, "c.json"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("collective_step_latency_us")));
  j["collective_step_latency_us"] = "fast";
  EXPECT_THROW(cluster_from_json(j, "c.json"), InputError);
}

TEST(Cluster, A100HasNoFp8Peak) {
  EXPECT_THROW(load_cluster("a100-80g").peak_flops(Dtype::kFp8), InputError);
}

TEST(Cluster, GemmEfficiencySaturates) {
  const ClusterSpec a = cluster_preset("a100-80g");
  const double x = a.gemm_half_saturation_flops;
  EXPECT_DOUBLE_EQ(a.gemm_efficiency(x), a.gemm_efficiency_max / 2);
  EXPECT_LT(a.gemm_efficiency(1e9), a.gemm_efficiency(1e12));
  EXPECT_LT(a.gemm_efficiency(1e15), a.gemm_efficiency_max);
  EXPECT_GT(a.gemm_efficiency(1e15), 0.99 * a.gemm_efficiency_max);
}

TEST(Cluster, EmptyGemmTableLeavesTheAnalyticCurveUnchanged) {
  const ClusterSpec a = cluster_preset("a100-80g");
  ASSERT_TRUE(a.gemm_efficiency_measured.empty());
  for (double x : {1e3, 4.1e6, 1e9, 4e10, 3e11, 1e15}) EXPECT_EQ(a.gemm_efficiency(x), curve(a, x));
  EXPECT_EQ(a.gemm_efficiency(0), a.gemm_efficiency_max);
}

TEST(Cluster, GemmTableGivesEachPointsEfficiencyExactlyAtIt) {
  const ClusterSpec c = a100_with_table({{4.1e6, 0.12}, {2.5e8, 0.3}, {1.6e10, 0.55}});
  EXPECT_EQ(c.gemm_efficiency(4.1e6), 0.12);
  EXPECT_EQ(c.gemm_efficiency(2.5e8), 0.3);
  EXPECT_EQ(c.gemm_efficiency(1.6e10), 0.55);
}

TEST(Cluster, GemmTableInterpolatesLogEfficiencyInLogFlops) {
  const ClusterSpec c = a100_with_table({{1e6, 0.1}, {1e8, 0.5}, {1e9, 0.6}});
  // 1e7 is half way between 1e6 and 1e8 in log(flops): the geometric mean of 0.1 and 0.5 (the
  // time x / (peak · eff) interpolated log-log); a linear interpolation of the efficiency would
  // give 0.3.
  EXPECT_NEAR(c.gemm_efficiency(1e7), std::sqrt(0.1 * 0.5), 1e-12);
  EXPECT_NEAR(c.gemm_efficiency(1e6 * std::pow(10.0, 0.5)), 0.1 * std::pow(5.0, 0.25),
              1e-12);  // a quarter of the way
  EXPECT_NEAR(c.gemm_efficiency(std::sqrt(1e8 * 1e9)), std::sqrt(0.5 * 0.6), 1e-12);
}

// What the log-log interpolation is for: a GPU's GEMMs between a launch-bound and a rate-bound
// point of its calibration (one H200, fp64 through cuBLAS: 2.1 MFLOP in 11.41 us, 134 MFLOP in
// 11.81 us). A 16.8-MFLOP GEMM (8 tokens x 2048 x 512) is launch-bound too; interpolating the
// efficiency linearly priced it at about 3 us, and `run --compare` at hidden 512 was 4.6 times
// over the prediction.
TEST(Cluster, GemmTableKeepsALaunchBoundTimeBetweenLaunchBoundPoints) {
  const double peak = 56.9e12;
  ClusterSpec c = a100_with_table({{2.097152e6, 2.097152e6 / 11.41e-6 / peak},
                                   {1.34217728e8, 1.34217728e8 / 11.81e-6 / peak}});
  c.peak_flops_per_s = {peak, peak, peak, 0};
  const double x = 2.0 * 8 * 2048 * 512;
  const double t = x / (peak * c.gemm_efficiency(x));
  EXPECT_GT(t, 11.41e-6);
  EXPECT_LT(t, 11.81e-6);
  // Log-log: 16.8 MFLOP is 0.5 of the way in log(flops), so the time is nearly their geometric
  // mean (the efficiency line in log-log is the time's): 11.6 us.
  EXPECT_NEAR(t, 11.6e-6, 0.05e-6);
}

TEST(Cluster, GemmTableExtrapolatesBelowWithTheCurveScaledToTheFirstPoint) {
  const ClusterSpec c = a100_with_table({{1e9, 0.2}, {1e10, 0.4}});
  // curve(x) / curve(1e9) = (x / (x + 4e10)) / (1e9 / 4.1e10) with max 0.63 cancelling.
  EXPECT_NEAR(c.gemm_efficiency(1e8), 0.2 * (1e8 / 4.01e10) / (1e9 / 4.1e10), 1e-12);
  EXPECT_NEAR(c.gemm_efficiency(1e3), 0.2 * (1e3 / (1e3 + 4e10)) / (1e9 / 4.1e10), 1e-15);
  EXPECT_NEAR(c.gemm_efficiency(1e9 * (1 - 1e-9)), 0.2, 1e-9);  // continuous at the first point
  EXPECT_EQ(c.gemm_efficiency(0), c.gemm_efficiency_max);       // x <= 0 as without a table
  EXPECT_EQ(c.gemm_efficiency(-5), c.gemm_efficiency_max);
}

TEST(Cluster, GemmTableExtrapolatesAboveWithTheCurveScaledToTheLastPointCappedAtOne) {
  const ClusterSpec c = a100_with_table({{1e9, 0.2}, {1e10, 0.5}});
  // 0.5 · (2e10 / 6e10) / (1e10 / 5e10) = 5/6.
  EXPECT_NEAR(c.gemm_efficiency(2e10), 5.0 / 6.0, 1e-12);
  EXPECT_NEAR(c.gemm_efficiency(1e10 * (1 + 1e-9)), 0.5, 1e-9);  // continuous at the last point
  // 0.5 · (1e12 / 1.04e12) / 0.2 = 2.4 before the cap.
  EXPECT_EQ(c.gemm_efficiency(1e12), 1.0);
}

TEST(Cluster, SinglePointGemmTableScalesTheCurveOnBothSides) {
  const ClusterSpec c = a100_with_table({{1e10, 0.3}});
  const double ratio = 0.3 / curve(c, 1e10);
  EXPECT_EQ(c.gemm_efficiency(1e10), 0.3);
  EXPECT_NEAR(c.gemm_efficiency(1e9), curve(c, 1e9) * ratio, 1e-12);
  EXPECT_NEAR(c.gemm_efficiency(2e10), curve(c, 2e10) * ratio, 1e-12);  // 0.3 · 5/3
  EXPECT_NEAR(c.gemm_efficiency(2e10), 0.5, 1e-12);
  EXPECT_LT(c.gemm_efficiency(1e9), 0.3);
}

TEST(Cluster, JsonRoundTripKeepsTheCallCostsAndRefusesNegativeOnes) {
  ClusterSpec c = cluster_preset("a100-80g");
  c.gelu_call_s = 4e-6;
  c.gelu_backward_call_s = 4.5e-6;
  c.copy_call_s = 5e-6;
  c.upload_call_s = 27e-6;
  c.input_generation_call_s = 1e-7;
  const nlohmann::json j = cluster_to_json(c);
  EXPECT_NEAR(j["elementwise"]["upload_call_us"].get<double>(), 27, 1e-9);
  const ClusterSpec back = cluster_from_json(j, "c.json");
  EXPECT_NEAR(back.gelu_call_s, 4e-6, 1e-18);
  EXPECT_NEAR(back.gelu_backward_call_s, 4.5e-6, 1e-18);
  EXPECT_NEAR(back.copy_call_s, 5e-6, 1e-18);
  EXPECT_NEAR(back.upload_call_s, 27e-6, 1e-18);
  EXPECT_NEAR(back.input_generation_call_s, 1e-7, 1e-20);
  // Unset costs are not written.
  EXPECT_FALSE(cluster_to_json(cluster_preset("a100-80g")).contains("elementwise"));
  const nlohmann::json bad = {{"base", "a100-80g"}, {"elementwise", {{"copy_call_us", -1}}}};
  EXPECT_THAT(error_of([&] { cluster_from_json(bad, "c.json"); }),
              AllOf(HasSubstr("c.json"), HasSubstr("copy_call_us")));
}

TEST(Cluster, JsonRoundTripKeepsTheGemmTable) {
  const ClusterSpec c = a100_with_table({{4.1e6, 0.12}, {2.5e8, 0.3}, {1.6e10, 0.55}});
  const nlohmann::json j = cluster_to_json(c);
  const nlohmann::json expected = {{{"gflops", 0.0041}, {"efficiency", 0.12}},
                                   {{"gflops", 0.25}, {"efficiency", 0.3}},
                                   {{"gflops", 16.0}, {"efficiency", 0.55}}};
  EXPECT_EQ(j.at("gemm_efficiency").at("measured"), expected);
  const ClusterSpec back = cluster_from_json(j, "roundtrip.json");
  EXPECT_EQ(back.gemm_efficiency_measured, c.gemm_efficiency_measured);
  EXPECT_EQ(back, c);
  EXPECT_EQ(cluster_to_json(back), j);
}

TEST(Cluster, GemmTableFlopsRoundTripExactlyThroughGflops) {
  // FLOPs of real GEMMs (2·m·n·k): x / 1e9 * 1e9 misses about one in twenty of these by an ulp.
  ClusterSpec c = cluster_preset("a100-80g");
  for (int m = 1; m <= 4096; m += 3)
    c.gemm_efficiency_measured.push_back({2.0 * m * m * 1000, 0.5});
  const ClusterSpec back = cluster_from_json(cluster_to_json(c), "roundtrip.json");
  EXPECT_EQ(back.gemm_efficiency_measured, c.gemm_efficiency_measured);
  // A decimal in the file is the double nearest its value in FLOPs.
  const nlohmann::json j = {
      {"base", "a100-80g"},
      {"gemm_efficiency", {{"measured", {{{"gflops", 0.0041}, {"efficiency", 0.12}}}}}}};
  EXPECT_EQ(cluster_from_json(j, "c.json").gemm_efficiency_measured.at(0).flops, 4.1e6);
}

TEST(Cluster, GemmTableIsWrittenOnlyWhenNonEmpty) {
  const nlohmann::json j = cluster_to_json(cluster_preset("a100-80g"));
  EXPECT_FALSE(j.at("gemm_efficiency").contains("measured")) << j.dump();
}

TEST(Cluster, GemmTableIsOptionalAndOverridesNothingElse) {
  nlohmann::json full = cluster_to_json(cluster_preset("h100-sxm"));  // no base, no "measured"
  EXPECT_TRUE(cluster_from_json(full, "c.json").gemm_efficiency_measured.empty());
  const nlohmann::json based = {
      {"base", "a100-80g"},
      {"gemm_efficiency", {{"measured", {{{"gflops", 1}, {"efficiency", 0.4}}}}}}};
  const ClusterSpec c = cluster_from_json(based, "c.json");
  const std::vector<GemmEfficiencyPoint> table = {{1e9, 0.4}};
  EXPECT_EQ(c.gemm_efficiency_measured, table);
  EXPECT_EQ(c.gemm_efficiency_max, cluster_preset("a100-80g").gemm_efficiency_max);
  EXPECT_EQ(c.gemm_efficiency(1e9), 0.4);
}

TEST(Cluster, GemmTablePointsMustIncrease) {
  const nlohmann::json equal = {{{"gflops", 1}, {"efficiency", 0.2}},
                                {{"gflops", 1}, {"efficiency", 0.3}}};
  EXPECT_THAT(measured_error(equal),
              HasSubstr("c.json: field 'gemm_efficiency': field 'measured'[1]: field 'gflops': "
                        "must be greater than the previous point's (1), got 1"));
  const nlohmann::json decreasing = {{{"gflops", 1}, {"efficiency", 0.2}},
                                     {{"gflops", 2}, {"efficiency", 0.3}},
                                     {{"gflops", 0.5}, {"efficiency", 0.4}}};
  EXPECT_THAT(measured_error(decreasing), HasSubstr("field 'measured'[2]: field 'gflops': must be "
                                                    "greater than the previous point's (2)"));
}

TEST(Cluster, GemmTableEfficienciesMustBeFractions) {
  EXPECT_THAT(measured_error({{{"gflops", 1}, {"efficiency", 0}}}),
              HasSubstr("field 'measured'[0]: field 'efficiency': expected a number > 0"));
  EXPECT_THAT(measured_error({{{"gflops", 1}, {"efficiency", 1.5}}}),
              HasSubstr("field 'measured'[0]: field 'efficiency': expected a fraction in (0, 1]"));
  EXPECT_THAT(measured_error({{{"gflops", 1}}}),
              HasSubstr("field 'measured'[0]: field 'efficiency': missing (required)"));
}

TEST(Cluster, GemmTableFlopsMustBePositiveFiniteNumbers) {
  EXPECT_THAT(measured_error({{{"gflops", -1}, {"efficiency", 0.5}}}),
              HasSubstr("field 'measured'[0]: field 'gflops': expected a number > 0"));
  EXPECT_THAT(measured_error({{{"gflops", "big"}, {"efficiency", 0.5}}}),
              HasSubstr("field 'measured'[0]: field 'gflops': expected a number"));
  EXPECT_THAT(
      measured_error({{{"gflops", std::numeric_limits<double>::quiet_NaN()}, {"efficiency", 0.5}}}),
      HasSubstr("field 'measured'[0]: field 'gflops': expected a finite number"));
  EXPECT_THAT(measured_error({{{"gflops", 1e300}, {"efficiency", 0.5}}}),
              HasSubstr("field 'measured'[0]: field 'gflops': out of range"));
}

TEST(Cluster, GemmTableMustBeAnArrayOfPointObjects) {
  EXPECT_THAT(measured_error({{"gflops", 1}, {"efficiency", 0.5}}),
              HasSubstr("field 'gemm_efficiency': field 'measured': expected an array"));
  EXPECT_THAT(measured_error({{{"gflops", 1}, {"efficiency", 0.5}, {"gflop", 2}}}),
              HasSubstr("field 'measured'[0]: field 'gflop': unknown field"));
  EXPECT_THAT(measured_error({0.5}), HasSubstr("field 'measured'[0]: expected a JSON object"));
  nlohmann::json too_many = nlohmann::json::array();
  for (int i = 1; i <= kMaxGemmEfficiencyPoints + 1; ++i)
    too_many.push_back({{"gflops", i}, {"efficiency", 0.5}});
  EXPECT_THAT(measured_error(too_many), HasSubstr("field 'measured': too many points: 4097"));
  too_many.erase(too_many.size() - 1);
  EXPECT_EQ(measured_error(too_many), "<no error>");
}

TEST(Cluster, JsonRoundTripKeepsEveryField) {
  for (const std::string& name : cluster_preset_names()) {
    const ClusterSpec c = cluster_preset(name);
    const nlohmann::json j = cluster_to_json(c);
    const ClusterSpec back = cluster_from_json(j, "roundtrip.json");
    EXPECT_EQ(cluster_to_json(back), j) << name;
    EXPECT_EQ(back.hbm_bytes, c.hbm_bytes);
    EXPECT_NEAR(back.intra_node.latency_s, c.intra_node.latency_s, 1e-18);
    EXPECT_NEAR(back.peak_flops_per_s[0], c.peak_flops_per_s[0], 1.0);
  }
}

TEST(Cluster, JsonOverridesABasePreset) {
  const nlohmann::json j = {{"base", "h100-sxm"},
                            {"name", "my-h100"},
                            {"inter_node", {{"bandwidth_gb_per_s", 25}}},
                            {"iteration_overhead_ms", 12.5}};
  const ClusterSpec c = cluster_from_json(j, "my.json");
  EXPECT_EQ(c.name, "my-h100");
  EXPECT_DOUBLE_EQ(c.inter_node.bandwidth_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(c.inter_node.latency_s, cluster_preset("h100-sxm").inter_node.latency_s);
  EXPECT_DOUBLE_EQ(c.iteration_overhead_s, 0.0125);
  EXPECT_DOUBLE_EQ(c.peak_flops(Dtype::kBf16), 989e12);
}

TEST(Cluster, UnknownFieldIsAnErrorNamingIt) {
  const nlohmann::json j = {{"base", "a100-80g"}, {"nvlink_gbps", 600}};
  try {
    cluster_from_json(j, "bad.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: field 'nvlink_gbps'"), std::string::npos)
        << e.what();
  }
  const nlohmann::json nested = {{"base", "a100-80g"}, {"intra_node", {{"bw", 1}}}};
  EXPECT_THROW(cluster_from_json(nested, "bad.json"), InputError);
}

TEST(Cluster, WithoutBaseEveryFieldIsRequired) {
  nlohmann::json j = cluster_to_json(cluster_preset("a100-80g"));
  j.erase("devices_per_node");
  try {
    cluster_from_json(j, "c.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("devices_per_node"), std::string::npos) << e.what();
  }
}

TEST(Cluster, BadValuesAreRejected) {
  EXPECT_THROW(cluster_from_json({{"base", "a100-80g"}, {"hbm_gib", -1}}, "c.json"), InputError);
  EXPECT_THROW(
      cluster_from_json({{"base", "a100-80g"}, {"allreduce_bus_efficiency", 1.5}}, "c.json"),
      InputError);
  EXPECT_THROW(cluster_from_json({{"base", "tpu-v9"}}, "c.json"), InputError);
  EXPECT_THROW(load_cluster("no-such-cluster"), InputError);
}


TEST(ClusterKernels, EveryPresetLoadsWithAKernelModel) {
  for (const std::string& name : cluster_preset_names()) {
    const ClusterSpec c = load_cluster(name);
    EXPECT_EQ(c.name, name);
    EXPECT_GT(c.num_sms, 0) << name;
    EXPECT_GT(c.attention_efficiency_forward, 0) << name;
    EXPECT_GT(c.attention_efficiency_backward, 0) << name;
    EXPECT_EQ(cluster_to_json(cluster_from_json(cluster_to_json(c), name)), cluster_to_json(c))
        << name;
  }
  EXPECT_EQ(load_cluster("gb200-nvl72").devices_per_node, 72);
  EXPECT_EQ(load_cluster("a100-40g").hbm_bytes, int64_t{40} << 30);
  EXPECT_DOUBLE_EQ(load_cluster("mi300x").peak_flops(Dtype::kBf16), 1307.4e12);
}

TEST(ClusterKernels, JsonOverridesEachKernelField) {
  const nlohmann::json j = {
      {"base", "h100-sxm"},
      {"kernels",
       {{"sms", 100},
        {"gemm_tile", {64, 128}},
        {"hbm_efficiency", 0.5},
        {"kernel_overhead_us", 3},
        {"attention_efficiency",
         {{"forward", 0.4}, {"backward", 0.3}, {"flash2_forward", 0.2}, {"flash2_backward", 0.1}}},
        {"fp8_gemm_efficiency", 1.2},
        {"fp8_transpose_copy", false},
        {"fp8_block_scaling", true},
        {"mxfp8_gemm_efficiency", 0.7}}}};
  const ClusterSpec c = cluster_from_json(j, "k.json");
  EXPECT_EQ(c.num_sms, 100);
  EXPECT_EQ(c.gemm_tile_m, 64);
  EXPECT_EQ(c.gemm_tile_n, 128);
  EXPECT_DOUBLE_EQ(c.hbm_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(c.kernel_overhead_s, 3e-6);
  EXPECT_DOUBLE_EQ(c.attention_efficiency_forward, 0.4);
  EXPECT_DOUBLE_EQ(c.attention_efficiency_backward, 0.3);
  EXPECT_DOUBLE_EQ(c.flash2_attention_efficiency_forward, 0.2);
  EXPECT_DOUBLE_EQ(c.flash2_attention_efficiency_backward, 0.1);
  EXPECT_DOUBLE_EQ(c.fp8_gemm_efficiency, 1.2);
  EXPECT_FALSE(c.fp8_transpose_copy);
  EXPECT_TRUE(c.fp8_block_scaling);
  EXPECT_DOUBLE_EQ(c.mxfp8_gemm_efficiency, 0.7);
  EXPECT_EQ(cluster_from_json(cluster_to_json(c), "k.json"), c);
  EXPECT_EQ(cluster_to_json(cluster_from_json(cluster_to_json(c), "k.json")), cluster_to_json(c));
}

// FlashAttention-2's efficiencies: measured on Hopper (H100 and H200 share the SMs), unset (0 = the
// fused kernels' own) on A100, whose fused kernels are FlashAttention-2's; a bad value names its
// field; an unset one is not written, so the file reads back.
TEST(ClusterKernels, FlashAttention2EfficienciesPerPreset) {
  for (const char* hopper : {"h100-sxm", "h200"}) {
    const ClusterSpec c = load_cluster(hopper);
    EXPECT_DOUBLE_EQ(c.flash2_attention_efficiency_forward, 0.34) << hopper;
    EXPECT_DOUBLE_EQ(c.flash2_attention_efficiency_backward, 0.31) << hopper;
    EXPECT_LT(c.flash2_attention_efficiency_backward, c.attention_efficiency_backward) << hopper;
  }
  EXPECT_DOUBLE_EQ(load_cluster("a100-80g").flash2_attention_efficiency_forward, 0);
  EXPECT_FALSE(cluster_to_json(load_cluster("a100-80g"))["kernels"]["attention_efficiency"]
                   .contains("flash2_forward"));
  try {
    cluster_from_json({{"base", "h100-sxm"},
                       {"kernels", {{"attention_efficiency", {{"flash2_backward", 1.5}}}}}},
                      "k.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("flash2_backward"));
  }
}

// GB300 NVL72 (docs/hardware.md): GB200's dense peaks and rack, Blackwell Ultra's memory, SM count
// and NIC, and its own fitted tensor-core rate, which scales the attention core with the GEMMs
// (the ratio of the attention fractions to the GEMM constant is GB200's).
TEST(ClusterKernels, Gb300IsGb200sRackWithBlackwellUltrasMemoryNicAndFittedRate) {
  const ClusterSpec gb300 = load_cluster("gb300-nvl72"), gb200 = load_cluster("gb200-nvl72");
  EXPECT_EQ(gb300.peak_flops_per_s, gb200.peak_flops_per_s);
  EXPECT_EQ(gb300.hbm_bytes, int64_t{278} << 30);
  EXPECT_EQ(gb300.hbm_bandwidth_bytes_per_s, gb200.hbm_bandwidth_bytes_per_s);
  EXPECT_EQ(gb300.num_sms, 160);
  EXPECT_EQ(gb300.devices_per_node, 72);
  EXPECT_DOUBLE_EQ(gb300.inter_node.bandwidth_bytes_per_s, 2 * 47e9);
  EXPECT_EQ(gb300.intra_node.bandwidth_bytes_per_s, gb200.intra_node.bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(gb300.gemm_efficiency_max, 0.5466);
  EXPECT_NEAR(gb300.attention_efficiency_forward / gb300.gemm_efficiency_max,
              gb200.attention_efficiency_forward / gb200.gemm_efficiency_max, 1e-12);
  EXPECT_NEAR(gb300.attention_efficiency_backward / gb300.gemm_efficiency_max,
              gb200.attention_efficiency_backward / gb200.gemm_efficiency_max, 1e-12);
  EXPECT_EQ(gb300.fp8_gemm_efficiency, gb200.fp8_gemm_efficiency);
  EXPECT_EQ(gb300.mxfp8_gemm_efficiency, gb200.mxfp8_gemm_efficiency);
  EXPECT_TRUE(gb300.fp8_block_scaling);
  EXPECT_FALSE(gb300.fp8_transpose_copy);
  EXPECT_EQ(gb300.host_link_bandwidth_bytes_per_s, gb200.host_link_bandwidth_bytes_per_s);
  const std::vector<std::string> names = cluster_preset_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "gb300-nvl72"), names.end());
}

// B200's attention efficiency is its own (fitted on the long-sequence B200 fit rows, the backward
// tied to the forward by FlashAttention-3's H100 ratio); GB200, the same die at a higher power
// limit, runs the attention core at the same fraction of its own peak (since 2026-11-29; it kept
// H100's fractions before, which priced its attention core 1.54x faster than B200's).
TEST(ClusterKernels, B200AttentionIsFittedAndGb200SharesItAsTheSameDie) {
  const ClusterSpec b200 = load_cluster("b200"), gb200 = load_cluster("gb200-nvl72"),
                    h100 = load_cluster("h100-sxm");
  EXPECT_DOUBLE_EQ(b200.attention_efficiency_forward, 0.4731);
  EXPECT_NEAR(b200.attention_efficiency_backward / b200.attention_efficiency_forward,
              h100.attention_efficiency_backward / h100.attention_efficiency_forward, 1e-4);
  EXPECT_DOUBLE_EQ(gb200.attention_efficiency_forward, b200.attention_efficiency_forward);
  EXPECT_DOUBLE_EQ(gb200.attention_efficiency_backward, b200.attention_efficiency_backward);
  EXPECT_DOUBLE_EQ(gb200.gemm_efficiency_max, b200.gemm_efficiency_max);
}

TEST(ClusterKernels, ClusterWithoutKernelModelWritesNoKernelsObject) {
  ClusterSpec c = cluster_preset("a100-80g");
  nlohmann::json j = cluster_to_json(c);
  j.erase("kernels");
  const ClusterSpec plain = cluster_from_json(j, "plain.json");
  EXPECT_EQ(plain.num_sms, 0) << "no base: absent means not modelled";
  EXPECT_DOUBLE_EQ(plain.attention_efficiency_forward, 0);
  const ClusterSpec bare;
  EXPECT_FALSE(cluster_to_json(bare).contains("kernels"))
      << "a CPU calibration without a kernel model round-trips without the object";
}

TEST(ClusterKernels, BadKernelFieldsAreErrorsNamingThem) {
  const auto error_of = [](nlohmann::json kernels) -> std::string {
    try {
      cluster_from_json({{"base", "a100-80g"}, {"kernels", std::move(kernels)}}, "k.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(error_of({{"gemm_tile", {128}}}), HasSubstr("gemm_tile"));
  EXPECT_THAT(error_of({{"gemm_tile", {0, 128}}}), HasSubstr("two integers in [1, 4096]"));
  EXPECT_THAT(error_of({{"sms", 1000000}}), HasSubstr("sms"));
  EXPECT_THAT(error_of({{"hbm_efficiency", 1.5}}), HasSubstr("hbm_efficiency"));
  EXPECT_THAT(error_of({{"attention_efficiency", {{"forward", 2}}}}), HasSubstr("forward"));
  EXPECT_THAT(error_of({{"warp_size", 32}}), HasSubstr("warp_size"));
  EXPECT_THAT(error_of({{"fp8_gemm_efficiency", 2.5}}),
              AllOf(HasSubstr("fp8_gemm_efficiency"), HasSubstr("[0.0001, 2]")));
  EXPECT_THAT(error_of({{"fp8_gemm_efficiency", 0}}), HasSubstr("fp8_gemm_efficiency"));
  EXPECT_THAT(error_of({{"fp8_transpose_copy", 1}}), HasSubstr("fp8_transpose_copy"));
  EXPECT_THAT(error_of({{"fp8_block_scaling", "yes"}}), HasSubstr("fp8_block_scaling"));
  EXPECT_THAT(error_of({{"mxfp8_gemm_efficiency", 0}}), HasSubstr("mxfp8_gemm_efficiency"));
  EXPECT_THAT(error_of({{"mxfp8_gemm_efficiency", 3}}),
              AllOf(HasSubstr("mxfp8_gemm_efficiency"), HasSubstr("[0.0001, 2]")));
}

TEST(ClusterKernels, Fp8GemmFactorOfThePresetsIsFittedOrDerivedAndOneElsewhere) {
  EXPECT_DOUBLE_EQ(cluster_preset("h100-sxm").fp8_gemm_efficiency, 0.9);
  EXPECT_DOUBLE_EQ(cluster_preset("h200").fp8_gemm_efficiency, 0.9);
  EXPECT_DOUBLE_EQ(cluster_preset("h800").fp8_gemm_efficiency, 0.9) << "the H100 die";
  EXPECT_GT(cluster_preset("b200").fp8_gemm_efficiency, 1.0);
  EXPECT_EQ(cluster_preset("gb200-nvl72").fp8_gemm_efficiency,
            cluster_preset("b200").fp8_gemm_efficiency);
  EXPECT_EQ(cluster_preset("b200").gemm_efficiency_max,
            cluster_preset("gb200-nvl72").gemm_efficiency_max)
      << "B200 takes GB200's BF16 constant (the same die)";
  EXPECT_EQ(cluster_preset("mi300x").fp8_gemm_efficiency, 1.0);
  EXPECT_TRUE(cluster_preset("h100-sxm").fp8_transpose_copy) << "Hopper: TN-only FP8 GEMMs";
  EXPECT_FALSE(cluster_preset("b200").fp8_transpose_copy);
  EXPECT_FALSE(cluster_preset("gb200-nvl72").fp8_transpose_copy);
  // Block-scaled FP8 (MXFP8) on Blackwell only, its GEMM factor fitted there and 1 elsewhere.
  for (const char* gpu : {"a100-40g", "a100-80g", "h100-sxm", "h200", "h800", "mi300x"}) {
    EXPECT_FALSE(cluster_preset(gpu).fp8_block_scaling) << gpu;
    EXPECT_EQ(cluster_preset(gpu).mxfp8_gemm_efficiency, 1.0) << gpu;
  }
  EXPECT_TRUE(cluster_preset("b200").fp8_block_scaling);
  EXPECT_TRUE(cluster_preset("gb200-nvl72").fp8_block_scaling);
  EXPECT_DOUBLE_EQ(cluster_preset("b200").mxfp8_gemm_efficiency, 0.875);
  EXPECT_EQ(cluster_preset("gb200-nvl72").mxfp8_gemm_efficiency,
            cluster_preset("b200").mxfp8_gemm_efficiency);
}

}  // namespace
}  // namespace jaxpp
