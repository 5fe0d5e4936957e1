// Collective contention (ClusterSpec "collective_contention", costmodel/analytic_cost.h): a hidden
// per-block FSDP collective takes a share s of the GPU from the compute beside it (the larger of
// its SM share and its HBM share), so that compute runs at 1 − s while the collective runs. Hand-
// computed on one stage of 4 equal blocks: a compute longer than the collective gains s · t_block
// per hidden block; a collective longer than the slowed compute slows all of it (c · s / (1 − s))
// and stays exposed by the rest; the simulated step grows by exactly the stretches; s = 0 gives
// today's numbers bit for bit; the cluster file carries the two constants.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "costmodel/analytic_cost.h"
#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/plan.h"
#include "simulator/plan_builder.h"
#include "tests/testing/dp_fixtures.h"

namespace jaxpp {
namespace {

constexpr int kBlocks = 4;
constexpr double kParams = 50e6;
// known_link_cluster: a block's all-gather (100 MB per device) takes 7/8 · 1e8 / 1e11 s, its
// reduce-scatter (200 MB of fp32 gradients) twice that.
constexpr double kBlockGatherS = 7.0 / 8 * (2 * kParams) / 100e9;  // 0.875 ms
constexpr double kBlockReduceS = 7.0 / 8 * (4 * kParams) / 100e9;  // 1.75 ms

PlanRequest contention_request(double flops, const ClusterSpec& cluster) {
  PlanRequest r;
  r.model = equal_blocks_model(kBlocks, kParams, flops);
  r.cluster = cluster;
  ParallelConfig& c = r.config;
  c.dp = 8;
  c.gpus = 8;
  c.global_batch = 8;
  c.schedule = "1f1b";
  c.zero1 = true;
  c.shard_gradients = true;
  c.shard_parameters = true;
  c.overlap_grad_reduce = true;
  return r;
}

Instruction collective(OpKind op, int64_t bytes, TaskKind kind, bool with_task = true) {
  Instruction ins;
  ins.op = op;
  ins.stage = 0;
  ins.bytes = bytes;
  if (with_task) ins.tasks = {{kind, 0, 0}};
  return ins;
}

Instruction compute(TaskKind kind) {
  Instruction ins;
  ins.op = OpKind::kCompute;
  ins.tasks = {{kind, 0, 0}};
  return ins;
}

// A100's 108 SMs; 27 of them held by the collective: an SM share of exactly 1/4.
ClusterSpec sm_contention_cluster() {
  ClusterSpec c = known_link_cluster();
  c.collective_sms = 27;
  c.collective_hbm_bytes_per_byte = 0;
  return c;
}

TEST(CollectiveContention, TheShareIsTheLargerOfTheSmAndTheHbmShares) {
  ClusterSpec c = known_link_cluster();
  EXPECT_FALSE(c.contention_modelled());
  EXPECT_EQ(c.collective_compute_share(1e11), 0.0);
  c.collective_sms = 27;
  ASSERT_EQ(c.num_sms, 108);
  EXPECT_DOUBLE_EQ(c.collective_compute_share(1e11), 0.25);
  // 6 HBM bytes per received byte at 100 GB/s over 1.6 TB/s: 0.375, larger than the SMs' 0.25.
  c.hbm_bandwidth_bytes_per_s = 1.6e12;
  c.collective_hbm_bytes_per_byte = 6;
  EXPECT_DOUBLE_EQ(c.collective_compute_share(1e11), 0.375);
  EXPECT_DOUBLE_EQ(c.collective_compute_share(1e10), 0.25);  // the SMs' share is larger
  EXPECT_DOUBLE_EQ(c.collective_compute_share(1e13), 1.0);   // capped
}

TEST(CollectiveContention, ALongComputeGainsTheShareOfEachHiddenBlocksCollective) {
  const ClusterSpec cluster = sm_contention_cluster();
  const Plan plan = build_plan(contention_request(1e14, cluster));
  const AnalyticCost cost(plan.model, plan.partition, plan.placement, plan.config, cluster);
  const double f = cost.task_s(TaskKind::kF, 0);
  const double b = cost.task_s(TaskKind::kB, 0);
  ASSERT_GT(f / kBlocks, kBlockGatherS / (1 - 0.25));  // each block's compute outlasts its gather
  ASSERT_GT(b / kBlocks, kBlockReduceS / (1 - 0.25));
  // Three hidden blocks, each stretching the compute by s · t_block.
  const double f_stretch = 3 * 0.25 * kBlockGatherS;                             // 0.65625 ms
  const double b_stretch = 3 * 0.25 * kBlockGatherS + 3 * 0.25 * kBlockReduceS;  // 1.96875 ms
  EXPECT_NEAR(cost.contention_s({TaskKind::kF, 0, 0}), f_stretch, 1e-15);
  EXPECT_NEAR(cost.contention_s({TaskKind::kB, 0, 0}), b_stretch, 1e-15);
  EXPECT_NEAR(cost.compute_s(0, compute(TaskKind::kF)), cluster.launch_overhead_s + f + f_stretch,
              1e-12);
  // The collectives keep their own time: only the lead block is exposed, as without contention.
  const Instruction gather = collective(OpKind::kAllGather, cost.param_bytes(0), TaskKind::kF);
  const Instruction reduce =
      collective(OpKind::kAllReduce, cost.grad_bytes(0), TaskKind::kB, /*with_task=*/false);
  EXPECT_NEAR(cost.allreduce_s(0, gather), kBlockGatherS, 1e-15);
  EXPECT_NEAR(cost.allreduce_s(0, reduce), kBlockReduceS, 1e-15);
  EXPECT_NEAR(cost.collective_busy_s(0, gather), kBlocks * kBlockGatherS, 1e-15);

  // The simulated step (one microbatch: F, B, the final reduce-scatter, the optimizer) grows by
  // exactly the F's and the B's stretches: the B's gather still hides under the (longer) F.
  PlanRequest plain_request = contention_request(1e14, known_link_cluster());
  const Plan plain = build_plan(plain_request);
  PlanSimOptions o;
  o.check_memory = false;
  const double with = simulate_plan(plan, o).result.step_time_s;
  const double without = simulate_plan(plain, o).result.step_time_s;
  EXPECT_NEAR(with - without, f_stretch + b_stretch, 1e-12);
}

TEST(CollectiveContention, ACollectiveLongerThanTheSlowedComputeSlowsAllOfItAndShowsTheRest) {
  const ClusterSpec cluster = sm_contention_cluster();
  const Plan plan = build_plan(contention_request(1e9, cluster));
  const AnalyticCost cost(plan.model, plan.partition, plan.placement, plan.config, cluster);
  const double f = cost.task_s(TaskKind::kF, 0);
  const double c = f / kBlocks;
  ASSERT_LT(c, kBlockGatherS * (1 - 0.25));
  // The block's compute runs at 3/4 throughout: it takes c / (1 − s) = 4c/3, a stretch of c/3;
  // the gather is exposed by t_block − 4c/3, so each pair lasts t_block.
  EXPECT_NEAR(cost.contention_s({TaskKind::kF, 0, 0}), 3 * c / 3, 1e-15);
  const Instruction gather = collective(OpKind::kAllGather, cost.param_bytes(0), TaskKind::kF);
  EXPECT_NEAR(cost.allreduce_s(0, gather), kBlockGatherS + 3 * (kBlockGatherS - 4 * c / 3), 1e-15);
  // Gather and F together: the lead block, three collective-bound pairs, the last block's compute.
  EXPECT_NEAR(cost.allreduce_s(0, gather) + f + cost.contention_s({TaskKind::kF, 0, 0}),
              kBlockGatherS + 3 * kBlockGatherS + c, 1e-15);
}

TEST(CollectiveContention, AZeroShareReproducesTheModelWithoutContentionBitForBit) {
  // Contention on, but a share of 0 (no SM count, no HBM traffic): every duration and the
  // simulated step are exactly those of the cluster without it.
  ClusterSpec zero = known_link_cluster();
  zero.num_sms = 0;
  zero.collective_sms = 16;
  ClusterSpec off = known_link_cluster();
  off.num_sms = 0;
  ASSERT_TRUE(zero.contention_modelled());
  for (const double flops : {1e14, 1e9}) {
    const Plan a = build_plan(contention_request(flops, zero));
    const Plan b = build_plan(contention_request(flops, off));
    const AnalyticCost ca(a.model, a.partition, a.placement, a.config, zero);
    const AnalyticCost cb(b.model, b.partition, b.placement, b.config, off);
    for (const TaskKind kind : {TaskKind::kF, TaskKind::kB}) {
      EXPECT_EQ(ca.compute_s(0, compute(kind)), cb.compute_s(0, compute(kind)));
      const Instruction gather = collective(OpKind::kAllGather, ca.param_bytes(0), kind);
      EXPECT_EQ(ca.allreduce_s(0, gather), cb.allreduce_s(0, gather));
    }
    const Instruction reduce = collective(OpKind::kAllReduce, ca.grad_bytes(0), TaskKind::kB);
    EXPECT_EQ(ca.allreduce_s(0, reduce), cb.allreduce_s(0, reduce));
    PlanSimOptions o;
    o.check_memory = false;
    EXPECT_EQ(simulate_plan(a, o).result.step_time_s, simulate_plan(b, o).result.step_time_s);
  }
}

TEST(CollectiveContention, TheClusterFileCarriesTheConstants) {
  const ClusterSpec h100 = cluster_preset("h100-sxm");
  nlohmann::json j = {{"base", "h100-sxm"},
                      {"collective_contention", {{"sms", 16}, {"hbm_bytes_per_byte", 3}}}};
  const ClusterSpec c = cluster_from_json(j, "test");
  EXPECT_EQ(c.collective_sms, 16);
  EXPECT_EQ(c.collective_hbm_bytes_per_byte, 3);
  EXPECT_EQ(cluster_from_json(cluster_to_json(c), "test"), c);
  EXPECT_EQ(cluster_to_json(c).at("collective_contention").at("sms"), 16);
  // Without contention the key is not written.
  EXPECT_FALSE(cluster_to_json(h100).contains("collective_contention"));
  j["collective_contention"]["channels"] = 16;
  EXPECT_THROW(cluster_from_json(j, "test"), InputError);
  j["collective_contention"] = {{"sms", -1}};
  EXPECT_THROW(cluster_from_json(j, "test"), InputError);
}

}  // namespace
}  // namespace jaxpp
