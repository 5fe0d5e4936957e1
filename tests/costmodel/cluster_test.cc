#include "costmodel/cluster.h"

#include <gtest/gtest.h>

#include "graph/error.h"

namespace jaxpp {
namespace {

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
  EXPECT_DOUBLE_EQ(h.inter_node.bandwidth_bytes_per_s, 48e9);
  const ClusterSpec h2 = load_cluster("h200");
  EXPECT_EQ(h2.hbm_bytes, int64_t{141'000'000'000});
  EXPECT_DOUBLE_EQ(h2.hbm_bandwidth_bytes_per_s, 4800e9);
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
  EXPECT_THROW(cluster_from_json({{"base", "a100-80g"}, {"allreduce_bus_efficiency", 1.5}},
                                 "c.json"),
               InputError);
  EXPECT_THROW(cluster_from_json({{"base", "tpu-v9"}}, "c.json"), InputError);
  EXPECT_THROW(load_cluster("no-such-cluster"), InputError);
}

}  // namespace
}  // namespace jaxpp
