// Full recompute of the first N transformer layers of each stage chunk (ParallelConfig::
// recompute_layers; Megatron-LM --recompute-method block --recompute-num-layers N): the layers
// past the first N are priced exactly as under none, the first N exactly as under full, so a
// chunk costs (its time under none) + N x (one layer's forward), and N = 0 / N = all give none /
// full bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "costmodel/analytic_cost.h"
#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/plan.h"
#include "graph/task_graph.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;

constexpr int kFirstBlock = 1;  // gpt3-1.3b: layer 0 the embedding, 1..24 transformer, 25 the logits

struct LayersFixture {
  ModelSpec model = load_model("gpt3-1.3b");  // h 2048, s 2048, 24 layers
  ParallelConfig config;
  ClusterSpec cluster = cluster_preset("a100-80g");
  OperatorCost op() const { return OperatorCost(model, config, cluster); }
  OperatorCost with(Recompute r, int layers = -1) const {
    ParallelConfig c = config;
    c.recompute = r;
    c.recompute_layers = layers;
    return OperatorCost(model, c, cluster);
  }
};

void expect_same_cost(const PassBreakdown& a, const PassBreakdown& b, const char* what) {
  EXPECT_EQ(a.gemm_s, b.gemm_s) << what;
  EXPECT_EQ(a.attention_s, b.attention_s) << what;
  EXPECT_EQ(a.elementwise_s, b.elementwise_s) << what;
  EXPECT_EQ(a.tp_comm_s, b.tp_comm_s) << what;
  EXPECT_EQ(a.cp_comm_s, b.cp_comm_s) << what;
  EXPECT_EQ(a.other_s, b.other_s) << what;
  EXPECT_EQ(a.ep_comm_s, b.ep_comm_s) << what;
}

void expect_same_cost(const StageBreakdown& a, const StageBreakdown& b) {
  expect_same_cost(a.at(Pass::kForward), b.at(Pass::kForward), "forward");
  expect_same_cost(a.at(Pass::kBackwardInput), b.at(Pass::kBackwardInput), "input gradient");
  expect_same_cost(a.at(Pass::kBackwardWeight), b.at(Pass::kBackwardWeight), "weight gradient");
  expect_same_cost(a.at(Pass::kRecompute), b.at(Pass::kRecompute), "recompute");
  EXPECT_EQ(a.fused_backward_hidden_s, b.fused_backward_hidden_s);
  EXPECT_EQ(a.optimizer_s, b.optimizer_s);
}

TEST(RecomputeLayers, AChunkCostsItsNoneTimePlusNLayerForwards) {
  LayersFixture s;
  s.config.tp = 2;  // with its tensor-parallel all-reduces, recomputed with the forward
  const OperatorCost none = s.with(Recompute::kNone);
  const OperatorCost two = s.with(Recompute::kFull, 2);
  const StageBreakdown n = none.stage(kFirstBlock, 6, 0), t = two.stage(kFirstBlock, 6, 0);
  // Forward, input and weight gradients: as under none.
  expect_same_cost(t.at(Pass::kForward), n.at(Pass::kForward), "forward");
  expect_same_cost(t.at(Pass::kBackwardInput), n.at(Pass::kBackwardInput), "input gradient");
  expect_same_cost(t.at(Pass::kBackwardWeight), n.at(Pass::kBackwardWeight), "weight gradient");
  EXPECT_EQ(n.at(Pass::kRecompute).total_s(), 0);
  // Recompute: two layers' forwards, communication included.
  const PassBreakdown layer = none.stage(kFirstBlock, 1, 0).at(Pass::kForward);
  EXPECT_GT(layer.tp_comm_s, 0);
  EXPECT_DOUBLE_EQ(t.at(Pass::kRecompute).total_s(), 2 * layer.total_s());
  EXPECT_DOUBLE_EQ(t.at(Pass::kRecompute).tp_comm_s, 2 * layer.tp_comm_s);
}

TEST(RecomputeLayers, AllLayersIsFullAndNoneIsNoneBitForBit) {
  LayersFixture s;
  const int all = s.model.num_layers();
  const OperatorCost full = s.with(Recompute::kFull), none = s.with(Recompute::kNone);
  for (int n : {24, 25, 1000}) {  // every transformer layer of the chunk, or more
    const OperatorCost op = s.with(Recompute::kFull, n);
    expect_same_cost(op.stage(0, all, 1e9), full.stage(0, all, 1e9));
    EXPECT_EQ(op.stage_stash_bytes(0, all), full.stage_stash_bytes(0, all)) << n;
  }
  const OperatorCost zero = s.with(Recompute::kFull, 0);
  expect_same_cost(zero.stage(0, all, 1e9), none.stage(0, all, 1e9));
  EXPECT_EQ(zero.stage_stash_bytes(0, all), none.stage_stash_bytes(0, all));
}

TEST(RecomputeLayers, TheStashKeepsTheInputOfRecomputedLayersAndEverythingOfTheOthers) {
  LayersFixture s;  // tp 1, flash: none keeps 34·s·h per layer, full its input 2·s·h
  const double sh = 2048.0 * 2048;
  EXPECT_NEAR(s.with(Recompute::kFull, 2).stage_stash_bytes(kFirstBlock, 6), (2 * 2 + 4 * 34) * sh,
              1e-3);
  EXPECT_NEAR(s.with(Recompute::kFull, 5).stage_stash_bytes(kFirstBlock, 6), (5 * 2 + 1 * 34) * sh,
              1e-3);
}

TEST(RecomputeLayers, TheCountRestartsInEachChunk) {
  LayersFixture s;
  s.config.recompute = Recompute::kFull;
  s.config.recompute_layers = 2;
  // The chunk [7, 13): layers 7 and 8 recomputed, 9..12 kept; the embedding keeps the policy.
  EXPECT_EQ(layer_recompute(s.model, s.config, 7, 7), Recompute::kFull);
  EXPECT_EQ(layer_recompute(s.model, s.config, 7, 8), Recompute::kFull);
  EXPECT_EQ(layer_recompute(s.model, s.config, 7, 9), Recompute::kNone);
  EXPECT_EQ(layer_recompute(s.model, s.config, 7, 12), Recompute::kNone);
  // The first chunk starts with the embedding, which does not count.
  EXPECT_EQ(layer_recompute(s.model, s.config, 0, 2), Recompute::kFull);
  EXPECT_EQ(layer_recompute(s.model, s.config, 0, 3), Recompute::kNone);
  const OperatorCost op = s.op();
  expect_same_cost(op.stage(7, 6, 0), op.stage(kFirstBlock, 6, 0));
}

TEST(RecomputeLayers, TheMemoryModelGivesEachStageItsOwnFirstLayers) {
  LayersFixture s;
  const Partition p = partition_from_starts({0, 13}, 26);  // 12 transformer layers each
  ASSERT_EQ(p.num_stages(), 2);
  const Placement pl = make_placement(PlacementKind::kLinear, 2, 2);
  s.config.pp = 2;
  s.config.gpus = 2;
  const MemoryModel none = build_memory_model(s.model, p, pl, s.config, s.cluster);
  s.config.recompute = Recompute::kFull;
  s.config.recompute_layers = 3;
  const MemoryModel three = build_memory_model(s.model, p, pl, s.config, s.cluster);
  const double sh = 2048.0 * 2048;
  for (int st = 0; st < 2; ++st)  // 3 layers keep 2·s·h instead of 34·s·h
    EXPECT_NEAR(static_cast<double>(none.stash_bytes_per_stage[st] -
                                    three.stash_bytes_per_stage[st]),
                3 * 32 * sh, 1.0)
        << st;
}

TEST(RecomputeLayers, StageWorkAndHardwareFlopsCountNLayersPerStage) {
  LayersFixture s;
  const Partition p = partition_from_starts({0, 13}, 26);
  const double layer_fwd = s.model.layers[kFirstBlock].fwd_flops;
  const auto work = compute_stage_work(s.model, p, 2, Recompute::kFull, 3);
  for (const StageWork& w : work) EXPECT_DOUBLE_EQ(w.recompute_flops, 3 * layer_fwd * 2);
  EXPECT_DOUBLE_EQ(hardware_flops_per_sequence(s.model, p, Recompute::kFull, 3),
                   s.model.model_flops_per_sequence() + 6 * layer_fwd);
  EXPECT_DOUBLE_EQ(hardware_flops_per_sequence(s.model, p, Recompute::kFull, -1),
                   s.model.hardware_flops_per_sequence(Recompute::kFull));
}

TEST(RecomputeLayers, TheAnalyticBackwardGrowsByNForwardsPerStage) {
  LayersFixture s;
  const Partition p = partition_from_starts({0, 13}, 26);
  const Placement pl = make_placement(PlacementKind::kLinear, 2, 2);
  s.config.pp = 2;
  s.config.gpus = 2;
  const AnalyticCost none(s.model, p, pl, s.config, s.cluster);
  s.config.recompute = Recompute::kFull;
  s.config.recompute_layers = 4;
  const AnalyticCost four(s.model, p, pl, s.config, s.cluster);
  const double layer = s.with(Recompute::kNone).stage(kFirstBlock, 1, 0).at(Pass::kForward).total_s();
  for (int st = 0; st < 2; ++st) {
    EXPECT_EQ(four.task_s(TaskKind::kF, st), none.task_s(TaskKind::kF, st));
    EXPECT_NEAR(four.task_s(TaskKind::kB, st) - none.task_s(TaskKind::kB, st), 4 * layer, 1e-12);
  }
}

TEST(RecomputeLayers, BadSettingsAreOneLineErrors) {
  LayersFixture s;
  s.config.recompute = Recompute::kSelective;
  s.config.recompute_layers = 2;
  EXPECT_THAT([&] { s.op(); }, ::testing::ThrowsMessage<InputError>(
                                   HasSubstr("needs recompute full (recompute is selective)")));
  s.config.recompute = Recompute::kFull;
  s.config.recompute_layers = -2;
  EXPECT_THAT([&] { s.op(); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("expected a number of layers >= 0")));
}

TEST(RecomputeLayers, PlanJsonRoundTripAndFieldErrors) {
  ParallelConfig c;
  c.recompute = Recompute::kFull;
  c.recompute_layers = 5;
  const nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j.at("recompute_layers"), 5);
  EXPECT_EQ(config_from_json(j, "plan.json"), c);
  c.recompute_layers = -1;  // the default is not written
  EXPECT_FALSE(config_to_json(c).contains("recompute_layers"));
  EXPECT_EQ(config_from_json(config_to_json(c), "plan.json"), c);
  nlohmann::json bad = j;
  bad["recompute"] = "none";
  EXPECT_THAT([&] { config_from_json(bad, "plan.json"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("plan.json: field 'recompute_layers'")));
  bad = j;
  bad["recompute_layers"] = -3;
  EXPECT_THAT([&] { config_from_json(bad, "plan.json"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("recompute_layers")));
}

}  // namespace
}  // namespace jaxpp
