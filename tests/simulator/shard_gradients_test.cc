// Gradient sharding (ZeRO-2, ParallelConfig::shard_gradients): the memory model keeps a 1/(dp·cp)
// shard of the gradients plus the largest layer's full gradient, the lowering emits one
// reduction per microbatch and stage (the first m − 1 carry their backward task and cost a
// reduce-scatter), the simulator moves m times the gradient bytes, and plan.json carries the
// option (refused without the distributed optimizer).
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
    // m reduce-scatters cannot take less time than one.
    EXPECT_GE(b.step_time_s, a.step_time_s);
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
