#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "costmodel/analytic_cost.h"
#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "costmodel/stage_times_cost.h"
#include "graph/error.h"

namespace jaxpp {
namespace {

Instruction compute(std::vector<TaskRef> tasks) {
  Instruction i;
  i.op = OpKind::kCompute;
  i.tasks = std::move(tasks);
  i.stage = i.tasks[0].stage;
  return i;
}

TEST(StageTimesCost, FullBackwardIsInputPlusWeightGradient) {
  StageTimesCost c(uniform_stage_times(2, 1.0, 2.0, 0.5, 0.1));
  EXPECT_DOUBLE_EQ(c.task_s(TaskKind::kF, 0), 1.0);
  EXPECT_DOUBLE_EQ(c.task_s(TaskKind::kI, 0), 2.0);
  EXPECT_DOUBLE_EQ(c.task_s(TaskKind::kW, 0), 0.5);
  EXPECT_DOUBLE_EQ(c.task_s(TaskKind::kB, 0), 2.5);
  // A fused group is the sum of its tasks.
  EXPECT_DOUBLE_EQ(c.compute_s(0, compute({{TaskKind::kF, 1, 0}, {TaskKind::kB, 1, 0}})), 3.5);
  Instruction send;
  send.op = OpKind::kSend;
  send.tasks = {{TaskKind::kF, 0, 0}};
  send.stage = 0;
  send.bytes = 1 << 30;
  EXPECT_DOUBLE_EQ(c.transfer_latency_s(0, 1, send), 0.1);
  EXPECT_TRUE(std::isinf(c.p2p_bandwidth_bytes_per_s(0, 1)));
}

TEST(StageTimesCost, PerStageFileIsReadInMilliseconds) {
  const nlohmann::json doc = {
      {"stages",
       {{{"t_f_ms", 1}, {"t_b_ms", 2}, {"t_w_ms", 1}, {"t_comm_ms", 0.5}},
        {{"t_f_ms", 3}, {"t_b_ms", 4}}}}};
  const StageTimes t = stage_times_from_json(doc, "times.json", 2);
  EXPECT_DOUBLE_EQ(t.t_f_s[1], 3e-3);
  EXPECT_DOUBLE_EQ(t.t_b_s[0], 2e-3);
  EXPECT_DOUBLE_EQ(t.t_w_s[1], 0.0);
  EXPECT_DOUBLE_EQ(t.t_comm_s[0], 0.5e-3);
  EXPECT_THROW(stage_times_from_json(doc, "times.json", 3), InputError);
  const nlohmann::json uniform = {{"t_f_ms", 1}, {"t_b_ms", 1}, {"t_w_ms", 1}};
  EXPECT_EQ(stage_times_from_json(uniform, "u.json", 4).num_stages(), 4);
  EXPECT_THROW(stage_times_from_json({{"t_f_ms", 1}, {"t_b_ms", 1}, {"tw", 1}}, "u.json", 2),
               InputError);
}

struct CostSetup {
  ModelSpec model = load_model("gpt3-1.3b");
  Partition partition;
  Placement placement;
  ParallelConfig config;
  ClusterSpec cluster = cluster_preset("a100-80g");
  CostSetup(int pp, int tp, int dp) {
    partition = auto_partition(model, {.num_stages = pp});
    placement = make_placement(PlacementKind::kLinear, pp, pp);
    config.pp = pp;
    config.tp = tp;
    config.dp = dp;
    config.gpus = pp * tp * dp;
  }
  AnalyticCost cost() const { return AnalyticCost(model, partition, placement, config, cluster); }
};

TEST(AnalyticCost, TasksAreTheOperatorModelsPassesOfTheStage) {
  CostSetup s(2, 1, 1);
  const AnalyticCost c = s.cost();
  const StageBreakdown& b = c.breakdown(0);
  EXPECT_NEAR(c.task_s(TaskKind::kF, 0), b.at(Pass::kForward).total_s(), 1e-15);
  EXPECT_NEAR(c.task_s(TaskKind::kW, 0), b.at(Pass::kBackwardWeight).total_s(), 1e-15);
  EXPECT_NEAR(c.task_s(TaskKind::kI, 0),
              b.at(Pass::kBackwardInput).total_s() + b.at(Pass::kRecompute).total_s(), 1e-15);
  // Without tensor parallelism a fused backward hides nothing: B = I + W.
  EXPECT_NEAR(c.task_s(TaskKind::kB, 0),
              c.task_s(TaskKind::kI, 0) + c.task_s(TaskKind::kW, 0), 1e-15);
  // One launch overhead per fused group.
  EXPECT_NEAR(c.compute_s(0, compute({{TaskKind::kF, 0, 0}, {TaskKind::kB, 0, 0}})),
              c.task_s(TaskKind::kF, 0) + c.task_s(TaskKind::kB, 0) + s.cluster.launch_overhead_s,
              1e-15);
}

TEST(AnalyticCost, FusedBackwardHidesInputGradientCollectivesUnderWeightGemms) {
  CostSetup s(2, 8, 1);
  const AnalyticCost c = s.cost();
  EXPECT_GT(c.breakdown(0).fused_backward_hidden_s, 0);
  EXPECT_NEAR(c.task_s(TaskKind::kB, 0),
              c.task_s(TaskKind::kI, 0) + c.task_s(TaskKind::kW, 0) -
                  c.breakdown(0).fused_backward_hidden_s,
              1e-15);
}

TEST(AnalyticCost, TensorParallelismSplitsComputeAndAddsAllReduces) {
  CostSetup one(2, 1, 1), eight(2, 8, 1);
  const AnalyticCost c1 = one.cost(), c8 = eight.cost();
  EXPECT_DOUBLE_EQ(c1.tp_comm_s(0), 0.0);
  EXPECT_GT(c8.tp_comm_s(0), 0.0);
  EXPECT_LT(c8.task_s(TaskKind::kF, 0), c1.task_s(TaskKind::kF, 0));
  EXPECT_GT(c8.task_s(TaskKind::kF, 0), c1.task_s(TaskKind::kF, 0) / 8);  // less efficient + comm
}

TEST(AnalyticCost, FullRecomputeAddsTheTransformerLayersForwardToTheInputBackward) {
  CostSetup none(2, 1, 1), full(2, 1, 1);
  full.config.recompute = Recompute::kFull;
  const AnalyticCost none_cost = none.cost(), full_cost = full.cost();
  const double extra = full_cost.task_s(TaskKind::kI, 1) - none_cost.task_s(TaskKind::kI, 1);
  // Stage 1 holds transformer layers and the logits; the logits are not recomputed.
  const OperatorCost op(none.model, none.config, none.cluster);
  const StageWork& w = none_cost.stage_work()[1];
  const double layers_fwd =
      op.stage(w.first_layer, w.num_layers - 1, 0).at(Pass::kForward).total_s();
  EXPECT_NEAR(extra, layers_fwd, 1e-12);
  EXPECT_LT(extra, none_cost.task_s(TaskKind::kF, 1));
}

TEST(AnalyticCost, LinksFollowTheRankLayout) {
  // tp innermost, then dp, then pp; 8 devices per node.
  CostSetup a(4, 2, 2);  // 4 devices per actor: actors 0,1 share node 0, actors 2,3 node 1
  const AnalyticCost c = a.cost();
  EXPECT_TRUE(c.same_node(0, 1));
  EXPECT_FALSE(c.same_node(1, 2));
  EXPECT_DOUBLE_EQ(c.p2p_bandwidth_bytes_per_s(0, 1),
                   a.cluster.intra_node.effective_bandwidth_bytes_per_s());
  EXPECT_DOUBLE_EQ(c.p2p_bandwidth_bytes_per_s(1, 2),
                   a.cluster.inter_node.effective_bandwidth_bytes_per_s());
  EXPECT_NE(c.link_id(0, 1), c.link_id(1, 0));
  // Scatter/gather: each device sends its 1/tp slice.
  EXPECT_EQ(c.activation_bytes(0), c.stage_work()[0].output_bytes / 2);
}

TEST(AnalyticCost, DataParallelAllReduceIsHierarchical) {
  CostSetup d1(1, 1, 1), d8(1, 1, 8), d16(1, 1, 16);
  const int64_t bytes = 1'000'000'000;
  EXPECT_DOUBLE_EQ(d1.cost().dp_allreduce_s(bytes), 0.0);
  const double t8 = d8.cost().dp_allreduce_s(bytes);
  const double t16 = d16.cost().dp_allreduce_s(bytes);
  const ClusterSpec& cl = d8.cluster;
  // 8 replicas fit one node: a plain NVLink ring with the collective step latency.
  EXPECT_NEAR(t8,
              2.0 * 7 / 8 * bytes / (cl.intra_node.bandwidth_bytes_per_s * cl.allreduce_bus_efficiency) +
                  14 * cl.intra_collective_latency_s(),
              1e-9);
  // 16 replicas on 2 nodes: an extra inter-node stage over 1/8 of the data, at the network's
  // achieved bandwidth.
  EXPECT_NEAR(t16 - t8,
              2.0 * 1 / 2 * (bytes / 8.0) / cl.inter_node.effective_bandwidth_bytes_per_s() +
                  2 * cl.inter_node.latency_s,
              1e-9);
}

TEST(AnalyticCost, ContextParallelReplicasJoinTheGradientReduction) {
  CostSetup dp16(1, 1, 16), dp8cp2(1, 1, 8);
  dp8cp2.config.cp = 2;
  dp8cp2.config.gpus = 16;
  const int64_t bytes = 1'000'000'000;
  EXPECT_NEAR(dp8cp2.cost().dp_allreduce_s(bytes), dp16.cost().dp_allreduce_s(bytes), 1e-12);
  // Each cp rank sends its part of the sequence.
  EXPECT_EQ(dp8cp2.cost().activation_bytes(0), (dp16.cost().activation_bytes(0) + 1) / 2);
}

TEST(AnalyticCost, DistributedOptimizerReducesScattersAndGathersParametersOnlyWhenNotOverlapped) {
  CostSetup plain(1, 1, 16), zero(1, 1, 16), overlapped(1, 1, 16);
  zero.config.zero1 = true;
  overlapped.config.zero1 = true;
  overlapped.config.overlap_grad_reduce = true;
  const int64_t bytes = 1'000'000'000;  // fp32 gradients: 4 bytes per parameter
  const double all_reduce = plain.cost().dp_allreduce_s(bytes);
  // Reduce-scatter (half an all-reduce) + all-gather of bf16 parameters (half the volume).
  EXPECT_NEAR(zero.cost().dp_allreduce_s(bytes),
              all_reduce / 2 + plain.cost().dp_allreduce_s(bytes / 2) / 2, 1e-9);
  EXPECT_NEAR(overlapped.cost().dp_allreduce_s(bytes), all_reduce / 2, 1e-12);
}

TEST(AnalyticCost, CollectiveStepLatencyReplacesTheLinkLatencyInsideANode) {
  CostSetup d8(1, 1, 8), d16(1, 1, 16);
  d8.cluster.collective_step_latency_s = 0;  // the link's latency
  d16.cluster.collective_step_latency_s = 0;
  const int64_t bytes = 1'000'000;
  const double link_t8 = d8.cost().dp_allreduce_s(bytes);
  const double link_t16 = d16.cost().dp_allreduce_s(bytes);
  d8.cluster.collective_step_latency_s = 1e-3;  // far above the NVLink latency: visible
  d16.cluster.collective_step_latency_s = 1e-3;
  EXPECT_NEAR(d8.cost().dp_allreduce_s(bytes) - link_t8,
              14 * (1e-3 - d8.cluster.intra_node.latency_s), 1e-12);
  // The inter-node stage keeps the network's latency.
  EXPECT_NEAR(d16.cost().dp_allreduce_s(bytes) - link_t16,
              14 * (1e-3 - d16.cluster.intra_node.latency_s), 1e-12);
}

TEST(AnalyticCost, ZeroOneShrinksTheOptimizerStep) {
  CostSetup plain(1, 1, 4), zero(1, 1, 4);
  zero.config.zero1 = true;
  EXPECT_NEAR(zero.cost().optimizer_s(0) * 4, plain.cost().optimizer_s(0), 1e-12);
}

TEST(MemoryModel, StaticBytesFollowMixedPrecisionAdam) {
  CostSetup s(2, 2, 4);
  const MemoryModel m = build_memory_model(s.model, s.partition, s.placement, s.config, s.cluster);
  const int64_t params = m.actors[0].params;
  EXPECT_NEAR(static_cast<double>(params),
              static_cast<double>(compute_stage_work(s.model, s.partition, 1, Recompute::kNone)[0]
                                      .params) / 2,
              1.0);
  EXPECT_NEAR(static_cast<double>(m.actors[0].static_bytes()), params * 18.0, 4.0);
  s.config.zero1 = true;
  const MemoryModel z = build_memory_model(s.model, s.partition, s.placement, s.config, s.cluster);
  EXPECT_NEAR(static_cast<double>(z.actors[0].optimizer_bytes), params * 12.0 / 4, 4.0);
}

TEST(MemoryModel, RecomputeAndSequenceParallelismShrinkTheStash) {
  CostSetup none(2, 4, 1), full(2, 4, 1), sp(2, 4, 1);
  full.config.recompute = Recompute::kFull;
  sp.config.sequence_parallel = true;
  auto stash = [](const CostSetup& s) {
    return build_memory_model(s.model, s.partition, s.placement, s.config, s.cluster)
        .stash_bytes_per_stage[0];
  };
  EXPECT_LT(stash(full), stash(none));
  EXPECT_LT(stash(sp), stash(none));
}

TEST(MemoryModel, CapacityCheckNamesTheActor) {
  const ClusterSpec c = cluster_preset("a100-80g");
  EXPECT_NO_THROW(check_memory_fits({c.hbm_bytes, 1}, c));
  try {
    check_memory_fits({1, int64_t{100} << 30}, c);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit: actor 1 needs 100.0 GiB, has 80.0 GiB"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace jaxpp
