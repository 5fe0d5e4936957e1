// Pricing and memory of mixture-of-experts models: compute from the active experts, memory from
// all of them (costmodel/operator_cost.h, costmodel/memory.h).
#include <gtest/gtest.h>

#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/partition.h"
#include "graph/placement.h"

namespace jaxpp {
namespace {

constexpr int kMoeLayer = 1;  // the first transformer layer

// Mixtral 8x7B with `top_k` of its 8 experts per token.
ModelSpec mixtral_with_top_k(int top_k) {
  nlohmann::json j = model_shape_to_json(load_model("mixtral-8x7b"));
  j["top_k"] = top_k;
  return model_from_json(j, "mixtral.json");
}

struct MoeFixture {
  ParallelConfig config;
  ClusterSpec cluster = cluster_preset("h100-sxm");
  MoeFixture() { cluster.kernel_overhead_s = 0; }
};

TEST(MoeCost, GroupedGemmOfOneGroupIsTheGemm) {
  MoeFixture f;
  const ModelSpec m = load_model("mixtral-8x7b");
  const OperatorCost op(m, f.config, f.cluster);
  EXPECT_EQ(op.grouped_gemm_s(1, 512, 4096, 1024), op.gemm_s(512, 4096, 1024));
}

TEST(MoeCost, GroupedGemmReadsEveryGroupsWeights) {
  MoeFixture f;
  const ModelSpec m = load_model("mixtral-8x7b");
  const OperatorCost op(m, f.config, f.cluster);
  // 256 groups of 1 token: bound by reading 256 weight matrices of 4096 × 4096.
  const double bytes = 256 * (4096 + 4096.0 * 4096 + 4096) * 2;
  EXPECT_NEAR(op.grouped_gemm_s(256, 1, 4096, 4096),
              bytes / (f.cluster.hbm_bandwidth_bytes_per_s * f.cluster.hbm_efficiency), 1e-12);
}

TEST(MoeCost, ExpertGemmsArePricedFromTheTopKExpertsAToken) {
  MoeFixture f;
  const ModelSpec two = mixtral_with_top_k(2), eight = mixtral_with_top_k(8);
  const OperatorCost op2(two, f.config, f.cluster), op8(eight, f.config, f.cluster);
  const double m = 4096, h = 4096, fe = 14336;
  // Forward: qkv, proj, router, then the 8 experts' up and down GEMMs as grouped GEMMs over
  // m·top_k/8 tokens each.
  const double attention = op2.gemm_s(m, h + 2 * 1024, h) + op2.gemm_s(m, h, h);
  EXPECT_NEAR(op2.stage(kMoeLayer, 1, 0).at(Pass::kForward).gemm_s,
              attention + op2.gemm_s(m, 8, h) + op2.grouped_gemm_s(8, m * 2 / 8, 2 * fe, h) +
                  op2.grouped_gemm_s(8, m * 2 / 8, h, fe),
              1e-12);
  // Four times the routed tokens: close to four times the expert GEMM time, compute bound.
  const double t2 = op2.stage(kMoeLayer, 1, 0).at(Pass::kForward).gemm_s - attention;
  const double t8 = op8.stage(kMoeLayer, 1, 0).at(Pass::kForward).gemm_s - attention;
  EXPECT_GT(t8 / t2, 3.5);
  EXPECT_LT(t8 / t2, 4.5);
}

TEST(MoeCost, DenseAndMoeLayersOfOneModelArePricedApart) {
  MoeFixture f;
  const ModelSpec m = load_model("deepseek-v3");  // layers 1-3 dense, 4.. MoE
  const OperatorCost op(m, f.config, f.cluster);
  const double dense = op.stage(1, 1, 0).at(Pass::kForward).gemm_s;
  const double dense2 = op.stage(3, 1, 0).at(Pass::kForward).gemm_s;
  const double moe = op.stage(4, 1, 0).at(Pass::kForward).gemm_s;
  EXPECT_EQ(dense, dense2);
  EXPECT_NE(dense, moe);
  EXPECT_EQ(moe, op.stage(40, 1, 0).at(Pass::kForward).gemm_s);
}

TEST(MoeCost, TensorParallelCollectivesPairWithTheBlocksNotWithEveryGemm) {
  MoeFixture f;
  f.config.tp = 8;
  const ModelSpec m = load_model("mixtral-8x7b");
  const OperatorCost op(m, f.config, f.cluster);
  const double bytes = 4096.0 * 4096 * 2;
  // Two all-reduces per layer (after attention and after the experts), as in a dense layer.
  EXPECT_NEAR(op.stage(kMoeLayer, 1, 0).at(Pass::kForward).tp_comm_s, 2 * op.tp_allreduce_s(bytes),
              1e-15);
}

TEST(MoeCost, MemoryHoldsEveryExpertWithItsGradientsAndOptimizerState) {
  MoeFixture f;
  f.config.tp = 8;
  f.config.pp = 2;
  const ModelSpec m = load_model("mixtral-8x7b");
  const Partition p = auto_partition(m, {2, 0, 0});
  const Placement place = make_placement(PlacementKind::kLinear, 2, 2);
  const MemoryModel mem = build_memory_model(m, p, place, f.config, f.cluster);
  int64_t params = 0;
  for (const ActorMemory& a : mem.actors) params += a.params;
  // All 46.7B parameters (not the 12.9B active ones) divided over tp, like dense weights.
  EXPECT_NEAR(static_cast<double>(params), static_cast<double>(m.total_params()) / 8, 2);
  for (const ActorMemory& a : mem.actors) {
    EXPECT_EQ(a.weight_bytes, a.params * 2);
    EXPECT_EQ(a.grad_bytes, a.params * 4);
    EXPECT_EQ(a.optimizer_bytes, a.params * 12);
  }
}

}  // namespace
}  // namespace jaxpp
