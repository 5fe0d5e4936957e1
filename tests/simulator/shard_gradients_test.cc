// Gradient sharding (ZeRO-2, ParallelConfig::shard_gradients): the memory model keeps a 1/(dp·cp)
// shard of the gradients plus the largest layer's full gradient, the lowering emits one
// reduction per microbatch and stage (the first m − 1 carry their backward task and cost a
// reduce-scatter), overlapped reductions are priced one block at a time and keep the collective
// stream busy for all their blocks (hand-computed below), more data-parallel communication never makes a step faster (ordering
// property), the simulator moves m times the gradient bytes, and plan.json carries the option
// (refused without the distributed optimizer).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "costmodel/analytic_cost.h"
#include "costmodel/memory.h"
#include "graph/error.h"
#include "graph/plan.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "simulator/plan_builder.h"
#include "tests/testing/dp_fixtures.h"

namespace jaxpp {
namespace {

// Six custom layers of known parameter counts: 1000, 4 × 40000, 2000 (no kernels: a device holds
// params / tp of each).
ModelSpec shard_grads_model() {
  nlohmann::json layers = nlohmann::json::array();
  const int params[] = {1000, 40000, 40000, 40000, 40000, 2000};
  for (int i = 0; i < 6; ++i)
    layers.push_back({{"name", "l" + std::to_string(i)},
                      {"fwd_flops", 1e9},
                      {"bwd_input_flops", 1e9},
                      {"bwd_weight_flops", 1e9},
                      {"params", params[i]},
                      {"output_bytes", 4096},
                      {"stash_bytes", 1024}});
  return model_from_json({{"name", "six"}, {"layers_list", layers}}, "test");
}

ParallelConfig shard_grads_config(bool zero1, bool shard) {
  ParallelConfig c;
  c.pp = 2;
  c.dp = 8;
  c.gpus = 16;
  c.zero1 = zero1;
  c.shard_gradients = shard;
  return c;
}

TEST(ShardGradients, MemoryKeepsTheShardPlusTheLargestLayerOfEachActor) {
  const ModelSpec model = shard_grads_model();
  const Partition partition = partition_from_starts({0, 3}, model.num_layers());
  const Placement placement = make_placement(PlacementKind::kLinear, 2, 2);
  const ClusterSpec cluster = cluster_preset("a100-80g");
  ASSERT_EQ(cluster.grad_bytes_per_param, 4);
  const MemoryModel zero1 =
      build_memory_model(model, partition, placement, shard_grads_config(true, false), cluster);
  const MemoryModel zero2 =
      build_memory_model(model, partition, placement, shard_grads_config(true, true), cluster);
  // By hand: actor 0 holds 1000 + 40000 + 40000 = 81000 parameters, actor 1 40000 + 40000 + 2000
  // = 82000; fp32 gradients (4 bytes), dp 8.
  EXPECT_EQ(zero1.actors[0].grad_bytes, 81000 * 4);
  EXPECT_EQ(zero1.actors[1].grad_bytes, 82000 * 4);
  // The shard (÷ 8) plus one full 40000-parameter layer.
  EXPECT_EQ(zero2.actors[0].grad_bytes, 81000 * 4 / 8 + 40000 * 4);  // 200500
  EXPECT_EQ(zero2.actors[1].grad_bytes, 82000 * 4 / 8 + 40000 * 4);  // 201000
  // Weights and optimizer state are unchanged; the static bytes drop by exactly the difference.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(zero2.actors[r].weight_bytes, zero1.actors[r].weight_bytes);
    EXPECT_EQ(zero2.actors[r].optimizer_bytes, zero1.actors[r].optimizer_bytes);
  }
  EXPECT_EQ(zero1.actors[0].static_bytes() - zero2.actors[0].static_bytes(), 123500);
  EXPECT_EQ(zero1.actors[1].static_bytes() - zero2.actors[1].static_bytes(), 127000);
}

// Per stage: the reductions, in program order.
std::map<int, std::vector<Instruction>> reductions_by_stage(const Program& p) {
  std::map<int, std::vector<Instruction>> out;
  for (const auto& list : p.actors)
    for (const Instruction& ins : list)
      if (ins.op == OpKind::kAllReduce) out[ins.stage].push_back(ins);
  return out;
}

TEST(ShardGradients, LoweringAddsAReductionAfterEveryMicrobatchsWeightGradient) {
  for (const auto& [name, v] :
       {std::pair<std::string, int>{"1f1b", 1}, {"zb-h1", 1}, {"interleaved-1f1b", 2}}) {
    ScheduleParams params;
    params.num_actors = 2;
    params.num_stages = 2 * v;
    params.num_microbatches = 4;
    const Schedule schedule = generate_schedule(name, params);
    LoweringOptions lo;
    lo.reduce_each_microbatch = true;
    const Program program = lower(schedule, lo);
    EXPECT_NO_THROW(check_program(program)) << name;
    const auto by_stage = reductions_by_stage(program);
    ASSERT_EQ(static_cast<int>(by_stage.size()), schedule.num_stages) << name;
    for (const auto& [stage, reductions] : by_stage) {
      ASSERT_EQ(reductions.size(), 4u) << name << " stage " << stage;
      std::vector<int> microbatches;
      for (size_t k = 0; k + 1 < reductions.size(); ++k) {
        ASSERT_EQ(reductions[k].tasks.size(), 1u) << name;
        const TaskRef& t = reductions[k].tasks[0];
        EXPECT_TRUE(t.kind == TaskKind::kB || t.kind == TaskKind::kW) << name;
        EXPECT_EQ(t.stage, stage);
        microbatches.push_back(t.microbatch);
      }
      EXPECT_TRUE(reductions.back().tasks.empty()) << name << ": the final reduction";
      std::sort(microbatches.begin(), microbatches.end());
      EXPECT_EQ(std::unique(microbatches.begin(), microbatches.end()), microbatches.end());
    }
    // Each per-microbatch reduction waits for the compute that holds its task.
    for (const auto& list : program.actors)
      for (const Instruction& ins : list) {
        if (ins.op != OpKind::kAllReduce || ins.tasks.empty()) continue;
        ASSERT_EQ(ins.deps.size(), 1u);
        const Instruction& c = list[ins.deps[0]];
        EXPECT_EQ(c.op, OpKind::kCompute);
        EXPECT_NE(std::find(c.tasks.begin(), c.tasks.end(), ins.tasks[0]), c.tasks.end());
        EXPECT_EQ(to_string(ins).rfind("reduce-scatter ", 0), 0u) << to_string(ins);
      }
    // Without the option: one reduction per stage, as before.
    for (const auto& [stage, reductions] : reductions_by_stage(lower(schedule, {})))
      EXPECT_EQ(reductions.size(), 1u) << name;
  }
}

PlanRequest shard_grads_request(int global_batch, bool shard) {
  PlanRequest r;
  r.model = load_model("gpt3-1.3b");
  r.cluster = cluster_preset("a100-80g");
  ParallelConfig& c = r.config;
  c.gpus = 16;
  c.pp = 2;
  c.dp = 8;
  c.global_batch = global_batch;
  c.schedule = "1f1b";
  c.zero1 = true;
  c.shard_gradients = shard;
  c.overlap_grad_reduce = true;
  return r;
}

TEST(ShardGradients, ReductionsAndTheirBytesGrowWithTheMicrobatches) {
  for (int m : {4, 8}) {
    const Plan zero1 = build_plan(shard_grads_request(8 * m, false));
    const Plan zero2 = build_plan(shard_grads_request(8 * m, true));
    ASSERT_EQ(zero2.config.num_microbatches, m);
    PlanSimOptions o;
    o.record_trace = false;
    const SimResult a = simulate_plan(zero1, o).result;
    const SimResult b = simulate_plan(zero2, o).result;
    const AnalyticCost cost(zero2.model, zero2.partition, zero2.placement, zero2.config,
                            cluster_preset("a100-80g"));
    int64_t grad = 0;
    for (int s = 0; s < zero2.partition.num_stages(); ++s) grad += cost.grad_bytes(s);
    ASSERT_GT(grad, 0);
    EXPECT_EQ(a.collective_bytes, grad);
    EXPECT_EQ(b.collective_bytes, m * grad) << "m " << m;
    int reductions = 0;
    for (const auto& list : zero2.program.actors)
      for (const Instruction& ins : list) reductions += ins.op == OpKind::kAllReduce;
    EXPECT_EQ(reductions, m * zero2.partition.num_stages());
    // m reduce-scatters cannot take less time than one where both are priced whole (not
    // overlapped; overlapped, gradient sharding's are priced per block and the distributed
    // optimizer's whole, docs/simulate.md "Data-parallel overlap").
    PlanRequest serial1 = shard_grads_request(8 * m, false), serial2 = shard_grads_request(8 * m, true);
    serial1.config.overlap_grad_reduce = serial2.config.overlap_grad_reduce = false;
    EXPECT_GE(simulate_plan(build_plan(serial2), o).result.step_time_s,
              simulate_plan(build_plan(serial1), o).result.step_time_s);
  }
}

TEST(ShardGradients, APerMicrobatchReductionCostsAReduceScatterTheFinalOneAsZeroOne) {
  const Plan plan = build_plan(shard_grads_request(64, true));
  ParallelConfig no_overlap = plan.config;
  no_overlap.overlap_grad_reduce = false;
  ParallelConfig plain = no_overlap;
  plain.zero1 = false;
  plain.shard_gradients = false;
  ParallelConfig zero1 = no_overlap;
  zero1.shard_gradients = false;
  const ClusterSpec cluster = cluster_preset("a100-80g");
  const AnalyticCost sharded(plan.model, plan.partition, plan.placement, no_overlap, cluster);
  const AnalyticCost all_reduce(plan.model, plan.partition, plan.placement, plain, cluster);
  const AnalyticCost zero_one(plan.model, plan.partition, plan.placement, zero1, cluster);
  Instruction per_microbatch;
  per_microbatch.op = OpKind::kAllReduce;
  per_microbatch.stage = 0;
  per_microbatch.bytes = sharded.grad_bytes(0);
  per_microbatch.tasks = {{TaskKind::kB, 0, 2}};
  Instruction final_reduction = per_microbatch;
  final_reduction.tasks.clear();
  const double ar = all_reduce.allreduce_s(0, final_reduction);
  ASSERT_GT(ar, 0);
  EXPECT_NEAR(sharded.allreduce_s(0, per_microbatch), ar / 2, ar * 1e-12);
  EXPECT_NEAR(sharded.allreduce_s(0, final_reduction), zero_one.allreduce_s(0, final_reduction),
              ar * 1e-12);
  // ZeRO-1's final reduction adds the parameter all-gather: more than the reduce-scatter alone.
  EXPECT_GT(sharded.allreduce_s(0, final_reduction), ar / 2 * 1.1);
}

struct DpMode {
  bool zero1, shard_grads, shard_params, overlap;
};

ParallelConfig with_mode(ParallelConfig c, const DpMode& m) {
  c.zero1 = m.zero1;
  c.shard_gradients = m.shard_grads || m.shard_params;
  c.shard_parameters = m.shard_params;
  c.overlap_grad_reduce = m.overlap;
  return c;
}

TEST(ShardGradients, OverlappedReductionsArePricedOneBlockAtATime) {
  // Two stages of 4 blocks of 50 M parameters, dp 8 in one node: a block's fp32 reduce-scatter
  // moves 200 MB per device, 7/8 · 200 MB / 100 GB/s = 1.75 ms; the stage's, 7 ms; the
  // all-gather of the stage's 16-bit weights 7/8 · 400 MB / 100 GB/s = 3.5 ms.
  constexpr double kBlockRs = 1.75e-3, kStageRs = 7e-3, kStageAg = 3.5e-3;
  const ClusterSpec cluster = known_link_cluster();
  for (const bool long_compute : {true, false}) {
    PlanRequest r = shard_grads_request(16, true);
    r.model = equal_blocks_model(8, 50e6, long_compute ? 1e14 : 1e9);
    r.cluster = cluster;
    const Plan plan = build_plan(r);
    ASSERT_EQ(plan.partition.num_stages(), 2);
    ASSERT_EQ(plan.partition.stage_begin[1], 4);
    const auto cost = [&](const DpMode& m) {
      return AnalyticCost(plan.model, plan.partition, plan.placement,
                          with_mode(plan.config, m), cluster);
    };
    const AnalyticCost grads = cost({true, true, false, true});
    ASSERT_EQ(grads.grad_bytes(0), static_cast<int64_t>(4 * 4 * 50e6));
    Instruction per_microbatch;
    per_microbatch.op = OpKind::kAllReduce;
    per_microbatch.stage = 0;
    per_microbatch.bytes = grads.grad_bytes(0);
    per_microbatch.tasks = {{TaskKind::kB, 0, 0}};
    Instruction final_reduction = per_microbatch;
    final_reduction.tasks.clear();
    Instruction final_of_stage_1 = final_reduction;
    final_of_stage_1.stage = 1;
    const double backward = grads.task_s(TaskKind::kB, 0);
    // Exposed: the lead block, plus what each further block's reduce-scatter takes beyond a
    // block's backward (4 · 1.75 ms − 3/4 · B when the link is the slower).
    const double exposed =
        long_compute ? kBlockRs : 4 * kBlockRs - 3 * backward / 4;
    if (long_compute) {
      ASSERT_GT(backward / 4, kBlockRs);
    } else {
      ASSERT_LT(backward / 4, kBlockRs);
    }
    // Gradient sharding, overlapped: every reduction (per microbatch and final) one block at a
    // time; the final one is the reduce-scatter alone (the parameter all-gather overlaps the
    // next forward). Its hidden blocks ran beside the backward before it: it holds the stream
    // for its exposed part only.
    EXPECT_NEAR(grads.allreduce_s(0, per_microbatch), exposed, 1e-12);
    EXPECT_NEAR(grads.allreduce_s(0, final_reduction), exposed, 1e-12);
    EXPECT_NEAR(grads.allreduce_s(0, final_of_stage_1), exposed, 1e-12);
    EXPECT_NEAR(grads.collective_busy_s(0, per_microbatch), exposed, 1e-12);
    EXPECT_NEAR(grads.collective_busy_s(0, final_reduction), exposed, 1e-12);
    // Not overlapped: the reductions wait for the actor's last compute and hide nothing: whole,
    // the final one with the parameter all-gather.
    const AnalyticCost grads_serial = cost({true, true, false, false});
    EXPECT_NEAR(grads_serial.allreduce_s(0, per_microbatch), kStageRs, 1e-12);
    EXPECT_NEAR(grads_serial.allreduce_s(0, final_reduction), kStageRs + kStageAg, 1e-12);
    EXPECT_NEAR(grads_serial.collective_busy_s(0, final_reduction), kStageRs + kStageAg, 1e-12);
    // The distributed optimizer alone and plain data parallelism: one whole collective per stage
    // (the reduce-scatter, plus the parameter all-gather unless overlapped; the all-reduce), its
    // busy time the same.
    const AnalyticCost zero1 = cost({true, false, false, true});
    EXPECT_NEAR(zero1.allreduce_s(0, final_reduction), kStageRs, 1e-12);
    EXPECT_NEAR(zero1.collective_busy_s(0, final_reduction), kStageRs, 1e-12);
    EXPECT_NEAR(zero1.allreduce_s(0, final_of_stage_1), kStageRs, 1e-12);
    EXPECT_NEAR(cost({true, false, false, false}).allreduce_s(0, final_reduction),
                kStageRs + kStageAg, 1e-12);
    const AnalyticCost plain = cost({false, false, false, true});
    EXPECT_NEAR(plain.allreduce_s(0, final_reduction), 2 * kStageRs, 1e-12);
    EXPECT_NEAR(plain.collective_busy_s(0, final_reduction), 2 * kStageRs, 1e-12);
    EXPECT_NEAR(cost({false, false, false, false}).allreduce_s(0, final_reduction), 2 * kStageRs,
                1e-12);
  }
}

TEST(ShardGradients, TheSimulatedStepSeesTheBlockExposure) {
  // One stage of 4 blocks (as above, long backward), 2 microbatches (F0 B0 F1 B1): gradient
  // sharding overlapped reduce-scatters after B0 (1.75 ms exposed, hidden under F1 B1) and after
  // B1 (the final one): the step is the compute plus 1.75 ms, where ZeRO-1's one whole
  // reduce-scatter after B1 adds 7 ms (docs/simulate.md, "Data-parallel overlap": Megatron-LM
  // would reduce it bucket by bucket; not modelled). With a short backward the link is the
  // bottleneck: the final reduction queues behind the first one's exposed part, longer than F1
  // and B1.
  const ClusterSpec cluster = known_link_cluster();
  for (const bool long_compute : {true, false}) {
    PlanRequest r = shard_grads_request(16, true);
    r.model = equal_blocks_model(4, 50e6, long_compute ? 1e14 : 1e9);
    r.cluster = cluster;
    r.config.pp = 1;
    r.config.gpus = 8;
    const Plan grads = build_plan(r);
    ASSERT_EQ(grads.config.num_microbatches, 2);
    r.config.shard_gradients = false;
    const Plan zero1 = build_plan(r);
    PlanSimOptions o;
    o.record_trace = false;
    o.check_memory = false;
    const SimResult a = simulate_plan(grads, o).result;
    const SimResult b = simulate_plan(zero1, o).result;
    const AnalyticCost cost(grads.model, grads.partition, grads.placement, grads.config, cluster);
    Instruction final_reduction;
    final_reduction.op = OpKind::kAllReduce;
    final_reduction.stage = 0;
    final_reduction.bytes = cost.grad_bytes(0);
    const double exposed = cost.allreduce_s(0, final_reduction);
    if (long_compute) {
      EXPECT_NEAR(exposed, 1.75e-3, 1e-12);
      EXPECT_NEAR(a.step_time_s, b.step_time_s - 7e-3 + 1.75e-3, 1e-9);
    } else {
      // The first reduce-scatter starts when B0 ends and lasts 7 ms − 3/4 · B; F1 and B1 are
      // shorter, so the final one starts when it ends and lasts as long.
      const double f = cost.task_s(TaskKind::kF, 0), bw = cost.task_s(TaskKind::kB, 0);
      EXPECT_NEAR(exposed, 7e-3 - 0.75 * bw, 1e-12);
      ASSERT_LT(f + bw + cluster.launch_overhead_s * 2, exposed);
      const double b0_end = 2 * cluster.launch_overhead_s + f + bw;
      EXPECT_NEAR(a.makespan_s, b0_end + 2 * exposed + cost.optimizer_s(0), 1e-9);
      EXPECT_GT(a.step_time_s, b.step_time_s);
    }
  }
}

// The same run with more data-parallel communication never comes out faster: parameter sharding
// (gathers on top of the reductions) >= gradient sharding (m reduce-scatters) >= the distributed
// optimizer (one), and plain data parallelism (all-reduces) >= the distributed optimizer, with
// and without overlap_grad_reduce (parameter sharding always overlaps, so it is compared with the
// overlapped runs only; gradient sharding with the distributed optimizer without overlap, where
// both are priced whole). Over models, pipeline depths, data-parallel sizes and microbatch counts;
// the first case is Llama 3 8B on 64 H100 where the whole-stage pricing of gradient sharding made
// it 136 ms slower than parameter sharding.
TEST(ShardGradients, MoreDataParallelCommunicationIsNeverFaster) {
  struct Case {
    const char* model;
    const char* cluster;
    int pp, dp, global_batch;
    const char* schedule;
  };
  const Case cases[] = {
      {"llama3-8b", "h100-sxm", 1, 64, 256, "1f1b"},
      {"llama3-8b", "h100-sxm", 1, 64, 64, "1f1b"},
      {"llama3-8b", "h100-sxm", 2, 32, 256, "1f1b"},
      {"llama3-8b", "h100-sxm", 4, 16, 128, "interleaved-1f1b"},
      {"gpt3-1.3b", "a100-80g", 1, 8, 64, "1f1b"},
      {"gpt3-1.3b", "a100-80g", 2, 8, 16, "1f1b"},
      {"gpt3-1.3b", "a100-80g", 2, 32, 256, "zb-h1"},
      {"gpt3-1.3b", "a100-80g", 4, 4, 32, "1f1b"},
  };
  PlanSimOptions o;
  o.record_trace = false;
  o.check_memory = false;
  for (const Case& k : cases) {
    PlanRequest r;
    r.model = load_model(k.model);
    r.cluster = cluster_preset(k.cluster);
    ParallelConfig& c = r.config;
    c.pp = k.pp;
    c.dp = k.dp;
    c.gpus = k.pp * k.dp;
    c.global_batch = k.global_batch;
    c.schedule = k.schedule;
    if (c.schedule == "interleaved-1f1b") c.virtual_stages = 2;
    const ParallelConfig base = c;
    const auto step = [&](const DpMode& m) {
      r.config = with_mode(base, m);
      return simulate_plan(build_plan(r), o).result.step_time_s;
    };
    const std::string what = std::string(k.model) + " pp " + std::to_string(k.pp) + " dp " +
                             std::to_string(k.dp) + " batch " + std::to_string(k.global_batch) +
                             " " + k.schedule;
    for (const bool overlap : {true, false}) {
      const double plain = step({false, false, false, overlap});
      const double zero1 = step({true, false, false, overlap});
      const double grads = step({true, true, false, overlap});
      EXPECT_GE(plain, zero1 - 1e-12) << what << " overlap " << overlap;
      // Overlapped, gradient sharding's reductions are priced block by block and the distributed
      // optimizer's whole (docs/simulate.md, "Data-parallel overlap"): only the serial runs are
      // comparable.
      if (!overlap) {
        EXPECT_GE(grads, zero1 - 1e-12) << what;
      } else {
        const double params = step({true, true, true, true});
        EXPECT_GE(params, grads - 1e-12) << what;
      }
    }
  }
}

TEST(ShardGradients, PlanJsonCarriesTheOptionAndRefusesItWithoutZeroOne) {
  ParallelConfig c = shard_grads_config(true, true);
  const nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j.at("shard_gradients"), true);
  EXPECT_EQ(config_from_json(j, "plan.json: field 'config'"), c);
  // Off: not written (plans without it read as before).
  EXPECT_FALSE(config_to_json(shard_grads_config(true, false)).contains("shard_gradients"));
  nlohmann::json bad = j;
  bad["zero1"] = false;
  try {
    config_from_json(bad, "plan.json: field 'config'");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "plan.json: field 'config': field 'shard_gradients': gradient sharding (ZeRO-2) "
              "needs the distributed optimizer (\"zero1\": true)");
  }
  PlanRequest r = shard_grads_request(64, true);
  r.config.zero1 = false;
  EXPECT_THROW(build_plan(r), InputError);
}

TEST(ShardGradients, ThePlanFileRoundTripsAndSimulatesTheSame) {
  const Plan plan = build_plan(shard_grads_request(32, true));
  const Plan back = plan_from_json(plan_to_json(plan), "plan.json");
  EXPECT_TRUE(back.config.shard_gradients);
  EXPECT_EQ(back.program, plan.program);
  PlanSimOptions o;
  o.record_trace = false;
  EXPECT_EQ(simulate_plan(back, o).result.step_time_s, simulate_plan(plan, o).result.step_time_s);
}

}  // namespace
}  // namespace jaxpp
