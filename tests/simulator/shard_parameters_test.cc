// Parameter sharding (ZeRO-3 / FSDP, ParallelConfig::shard_parameters): the memory model keeps a
// 1/(dp·cp) shard of the weights plus two gathered layers, the lowering puts an all-gather of the
// stage's weights before every F, B and I (prefetched one item ahead), an all-gather moves half an
// all-reduce of the stage's weight bytes, one block (layer) at a time: the instruction lasts the
// lead block's collective plus what the link cannot hide beside the paired compute (hand-computed
// below), the gathers hide behind long computes and show as exposed DP time behind short ones,
// and plan.json carries the option (refused without the distributed optimizer, or with gradient
// sharding off).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/analytic_cost.h"
#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/plan.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "simulator/plan_builder.h"
#include "tests/testing/dp_fixtures.h"

namespace jaxpp {
namespace {

// Six custom layers of known parameter counts: 1000, 4 × 40000, 2000 (no kernels: a device holds
// params / tp of each), each pass `flops` FLOPs.
ModelSpec shard_params_model(double flops = 1e9, double scale = 1) {
  nlohmann::json layers = nlohmann::json::array();
  const double params[] = {1000, 40000, 40000, 40000, 40000, 2000};
  for (int i = 0; i < 6; ++i)
    layers.push_back({{"name", "l" + std::to_string(i)},
                      {"fwd_flops", flops},
                      {"bwd_input_flops", flops},
                      {"bwd_weight_flops", flops},
                      {"params", static_cast<int64_t>(params[i] * scale)},
                      {"output_bytes", 4096},
                      {"stash_bytes", 1024}});
  return model_from_json({{"name", "six"}, {"layers_list", layers}}, "test");
}

ParallelConfig shard_params_config(bool shard_params) {
  ParallelConfig c;
  c.pp = 2;
  c.dp = 8;
  c.gpus = 16;
  c.zero1 = true;
  c.shard_gradients = true;
  c.shard_parameters = shard_params;
  return c;
}

TEST(ShardParameters, MemoryKeepsTheWeightShardPlusTwoGatheredLayers) {
  const ModelSpec model = shard_params_model();
  const Partition partition = partition_from_starts({0, 3}, model.num_layers());
  const Placement placement = make_placement(PlacementKind::kLinear, 2, 2);
  const ClusterSpec cluster = cluster_preset("a100-80g");
  ASSERT_EQ(cluster.weight_bytes_per_param, 2);
  const MemoryModel zero2 =
      build_memory_model(model, partition, placement, shard_params_config(false), cluster);
  const MemoryModel zero3 =
      build_memory_model(model, partition, placement, shard_params_config(true), cluster);
  // By hand: actor 0 holds 1000 + 40000 + 40000 = 81000 parameters, actor 1 40000 + 40000 + 2000
  // = 82000; 16-bit weights, dp 8.
  EXPECT_EQ(zero2.actors[0].weight_bytes, 81000 * 2);
  EXPECT_EQ(zero2.actors[1].weight_bytes, 82000 * 2);
  // The shard (÷ 8) plus two full 40000-parameter layers (computed and prefetched).
  EXPECT_EQ(zero3.actors[0].weight_bytes, 81000 * 2 / 8 + 2 * 40000 * 2);  // 180250
  EXPECT_EQ(zero3.actors[1].weight_bytes, 82000 * 2 / 8 + 2 * 40000 * 2);  // 180500
  // Gradients as ZeRO-2 (the shard plus one layer's), the optimizer state unchanged.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(zero3.actors[r].grad_bytes, zero2.actors[r].grad_bytes);
    EXPECT_EQ(zero3.actors[r].optimizer_bytes, zero2.actors[r].optimizer_bytes);
  }
  EXPECT_EQ(zero3.actors[0].grad_bytes, 81000 * 4 / 8 + 40000 * 4);
}

TEST(ShardParameters, AShardGroupOfOneDeviceCostsNoMemory) {
  // dp 1 (cp 1): the shard is the whole stage, so nothing is gathered and no layer's gradient
  // waits for a reduce-scatter: ZeRO-2 and ZeRO-3 hold what ZeRO-1 holds (they held one and two
  // layers more).
  const ModelSpec model = shard_params_model();
  const Partition partition = partition_from_starts({0, 3}, model.num_layers());
  const Placement placement = make_placement(PlacementKind::kLinear, 2, 2);
  const ClusterSpec cluster = cluster_preset("a100-80g");
  ParallelConfig zero1 = shard_params_config(false), zero2 = zero1, zero3 = zero1;
  for (ParallelConfig* c : {&zero1, &zero2, &zero3}) {
    c->dp = 1;
    c->gpus = 2;
  }
  zero1.shard_gradients = false;
  zero3.shard_parameters = true;
  const MemoryModel m1 = build_memory_model(model, partition, placement, zero1, cluster);
  for (const ParallelConfig& c : {zero2, zero3}) {
    const MemoryModel m = build_memory_model(model, partition, placement, c, cluster);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(m.actors[r].weight_bytes, m1.actors[r].weight_bytes) << r;
      EXPECT_EQ(m.actors[r].grad_bytes, m1.actors[r].grad_bytes) << r;
      EXPECT_EQ(m.actors[r].static_bytes(), m1.actors[r].static_bytes()) << r;
    }
  }
  EXPECT_EQ(m1.actors[0].weight_bytes, 81000 * 2);
}

TEST(ShardParameters, FpEightLayersAreGatheredInOneByteWithFp8Params) {
  nlohmann::json j = model_to_json(load_model("llama3-8b"));
  j["dtype"] = "fp8";
  const ModelSpec fp8 = model_from_json(j, "test");
  j["fp8_params"] = false;
  const ModelSpec fp8_16bit_params = model_from_json(j, "test");
  ASSERT_TRUE(fp8.fp8_params);
  ParallelConfig c = shard_params_config(true);
  c.tp = 2;
  const ClusterSpec cluster = cluster_preset("h100-sxm");
  const OperatorCost op(fp8, c, cluster);
  const OperatorCost op16(fp8_16bit_params, c, cluster);
  int transformer = -1, embedding = -1;
  for (int l = 0; l < fp8.num_layers(); ++l) {
    if (fp8.layers[l].kind == LayerKind::kTransformer && transformer < 0) transformer = l;
    if (fp8.layers[l].kind != LayerKind::kTransformer && embedding < 0) embedding = l;
  }
  ASSERT_GE(transformer, 0);
  ASSERT_GE(embedding, 0);
  const double p = static_cast<double>(fp8.layers[transformer].params) / 2;  // ÷ tp
  EXPECT_DOUBLE_EQ(layer_gather_bytes(op, fp8, cluster, transformer), p);
  EXPECT_DOUBLE_EQ(layer_gather_bytes(op16, fp8_16bit_params, cluster, transformer), 2 * p);
  // The embedding stays in 16 bits either way.
  const double e = static_cast<double>(fp8.layers[embedding].params) / 2;
  EXPECT_DOUBLE_EQ(layer_gather_bytes(op, fp8, cluster, embedding), 2 * e);
  EXPECT_DOUBLE_EQ(stage_gather_bytes(op, fp8, cluster, transformer, 2), 2 * p);
}

// Every all-gather of a program, with the compute it precedes.
struct GatherCheck {
  int gathers = 0;
  int gathered_stages = 0;  // distinct stages of the F, B and I tasks of each compute
};

GatherCheck check_gathers(const Program& program, bool gathered = true) {
  GatherCheck out;
  for (const auto& list : program.actors) {
    int previous_compute = -1, before_previous = -1;
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Instruction& ins = list[i];
      if (ins.op == OpKind::kAllGather) {
        ++out.gathers;
        EXPECT_EQ(ins.bytes, 1);  // unit bytes
        EXPECT_EQ(to_string(ins).rfind("all-gather ", 0), 0u) << to_string(ins);
        // It waits for the compute before the last one emitted (one item prefetched).
        if (previous_compute < 0) {
          EXPECT_TRUE(ins.deps.empty());
        } else if (before_previous < 0) {
          EXPECT_TRUE(ins.deps.empty());
        } else {
          EXPECT_EQ(ins.deps.size(), 1u);
          if (ins.deps.size() == 1) {
            EXPECT_EQ(ins.deps[0], before_previous);
          }
        }
      }
      if (ins.op != OpKind::kCompute) continue;
      before_previous = previous_compute;
      previous_compute = i;
      std::vector<int> stages;
      for (const TaskRef& t : ins.tasks) {
        if (t.kind == TaskKind::kW) continue;
        if (std::find(stages.begin(), stages.end(), t.stage) != stages.end()) continue;
        stages.push_back(t.stage);
        ++out.gathered_stages;
        // The compute lists the gather of that task's stage among its deps.
        bool found = false;
        for (int d : ins.deps)
          if (list[d].op == OpKind::kAllGather && list[d].stage == t.stage) found = true;
        EXPECT_EQ(found, gathered) << to_string(ins);
      }
    }
  }
  return out;
}

TEST(ShardParameters, LoweringGathersTheWeightsBeforeEveryForwardAndBackward) {
  for (const auto& [name, v] :
       {std::pair<std::string, int>{"1f1b", 1}, {"zb-h1", 1}, {"interleaved-1f1b", 2}}) {
    ScheduleParams params;
    params.num_actors = 2;
    params.num_stages = 2 * v;
    params.num_microbatches = 4;
    const Schedule schedule = generate_schedule(name, params);
    LoweringOptions lo;
    lo.reduce_each_microbatch = true;
    lo.gather_params = true;
    const Program program = lower(schedule, lo);
    EXPECT_NO_THROW(check_program(program)) << name;
    const GatherCheck g = check_gathers(program);
    // One per stage of each compute's F, B and I tasks: 2 · m per stage, fewer where an item
    // fuses a forward and a backward of the same stage (one gather serves both).
    EXPECT_EQ(g.gathered_stages, g.gathers) << name;
    if (name == "interleaved-1f1b")
      EXPECT_LE(g.gathers, 2 * 4 * schedule.num_stages) << name;
    else
      EXPECT_EQ(g.gathers, 2 * 4 * schedule.num_stages) << name;
    // Without the option: no gathers.
    LoweringOptions plain;
    plain.reduce_each_microbatch = true;
    EXPECT_EQ(check_gathers(lower(schedule, plain), /*gathered=*/false).gathers, 0) << name;
  }
}

TEST(ShardParameters, CheckProgramRefusesAMalformedGather) {
  ScheduleParams params;
  params.num_actors = 2;
  params.num_stages = 2;
  params.num_microbatches = 2;
  LoweringOptions lo;
  lo.gather_params = true;
  Program program = lower(generate_schedule("1f1b", params), lo);
  ASSERT_EQ(program.actors[0][0].op, OpKind::kAllGather);
  Program no_task = program;
  no_task.actors[0][0].tasks.clear();
  EXPECT_THROW(check_program(no_task), InputError);
  Program weight_task = program;
  weight_task.actors[0][0].tasks = {{TaskKind::kW, 0, 0}};
  EXPECT_THROW(check_program(weight_task), InputError);
  Program wrong_stage = program;
  wrong_stage.actors[0][0].stage = 1;
  EXPECT_THROW(check_program(wrong_stage), InputError);
}

PlanRequest shard_params_request(const ModelSpec& model, int pp, int global_batch,
                                 bool shard_params) {
  PlanRequest r;
  r.model = model;
  r.cluster = cluster_preset("a100-80g");
  ParallelConfig& c = r.config;
  c.pp = pp;
  c.dp = 8;
  c.gpus = pp * 8;
  c.global_batch = global_batch;
  c.schedule = "1f1b";
  c.zero1 = true;
  c.shard_gradients = true;
  c.shard_parameters = shard_params;
  c.overlap_grad_reduce = true;
  return r;
}

TEST(ShardParameters, AGatherCostsHalfAnAllReduceOfTheStagesWeightBytes) {
  const Plan plan = build_plan(shard_params_request(load_model("gpt3-1.3b"), 2, 64, true));
  ParallelConfig plain = plan.config;
  plain.zero1 = false;
  plain.shard_gradients = false;
  plain.shard_parameters = false;
  plain.overlap_grad_reduce = false;  // the whole all-reduce (overlapped, stage 0's is per block)
  const ClusterSpec cluster = cluster_preset("a100-80g");
  const AnalyticCost sharded(plan.model, plan.partition, plan.placement, plan.config, cluster);
  const AnalyticCost all_reduce(plan.model, plan.partition, plan.placement, plain, cluster);
  // 16-bit weights, half the fp32 gradient bytes.
  EXPECT_EQ(2 * sharded.param_bytes(0), sharded.grad_bytes(0));
  Instruction gather;
  gather.op = OpKind::kAllGather;
  gather.stage = 0;
  gather.bytes = sharded.param_bytes(0);
  gather.tasks = {{TaskKind::kF, 0, 1}};
  Instruction whole = gather;
  whole.op = OpKind::kAllReduce;
  whole.tasks.clear();
  const double ar = all_reduce.allreduce_s(0, whole);
  ASSERT_GT(ar, 0);
  const double busy = sharded.collective_s(static_cast<double>(gather.bytes), 0, true);
  EXPECT_NEAR(busy, ar / 2, ar * 1e-12);
  // One block at a time: the instruction is the part the forward does not hide, less than the
  // whole gather.
  EXPECT_GT(sharded.allreduce_s(0, gather), 0);
  EXPECT_LT(sharded.allreduce_s(0, gather), busy / 2);
  // It keeps the collective stream busy for the whole gather (every block's collective, each
  // with its own latencies: a little more than the one-piece collective).
  EXPECT_GE(sharded.collective_busy_s(0, gather), busy);
  EXPECT_LT(sharded.collective_busy_s(0, gather), busy * 1.05);
  // The final reduction is the reduce-scatter alone (no parameter all-gather after the step).
  Instruction final_reduction = whole;
  final_reduction.bytes = sharded.grad_bytes(0);
  EXPECT_NEAR(sharded.collective_s(static_cast<double>(final_reduction.bytes), 0, false),
              all_reduce.allreduce_s(0, final_reduction) / 2, ar * 1e-12);
  // The program holds 2 · m gathers per stage of param_bytes each; the simulator counts them.
  int gathers = 0;
  for (const auto& list : plan.program.actors)
    for (const Instruction& ins : list)
      if (ins.op == OpKind::kAllGather) {
        ++gathers;
        EXPECT_EQ(ins.bytes, sharded.param_bytes(ins.stage));
      }
  EXPECT_EQ(gathers, 2 * plan.config.num_microbatches * plan.partition.num_stages());
}

double exposed_dp_s(const SimulatedPlan& s) {
  double total = 0;
  for (const nlohmann::json& a : s.metrics.at("breakdown"))
    total += a.at("dp_exposed_s").get<double>();
  return total;
}

TEST(ShardParameters, GathersHideBehindLongComputesAndShowAsExposedDpBehindShortOnes) {
  PlanSimOptions o;
  o.breakdown = true;
  o.check_memory = false;
  const int m = 4;
  // 200 M-parameter layers: one gather of a stage's 4 layers moves 1.6 GB per device.
  for (const bool long_compute : {true, false}) {
    const ModelSpec model = shard_params_model(long_compute ? 1e16 : 1e6, 5000);
    const Plan zero2 = build_plan(shard_params_request(model, 1, 8 * m, false));
    const Plan zero3 = build_plan(shard_params_request(model, 1, 8 * m, true));
    const AnalyticCost cost(zero3.model, zero3.partition, zero3.placement, zero3.config,
                            cluster_preset("a100-80g"));
    Instruction gather;
    gather.op = OpKind::kAllGather;
    gather.stage = 0;
    gather.bytes = cost.param_bytes(0);
    gather.tasks = {{TaskKind::kF, 0, 0}};
    const double g = cost.allreduce_s(0, gather);
    ASSERT_GT(g, 1e-3);
    const SimulatedPlan a = simulate_plan(zero2, o);
    const SimulatedPlan b = simulate_plan(zero3, o);
    Instruction compute;
    compute.op = OpKind::kCompute;
    compute.stage = 0;
    compute.tasks = {{TaskKind::kF, 0, 0}};
    const double f = cost.compute_s(0, compute);
    if (long_compute) {
      ASSERT_GT(f, 10 * g);
      // Only the first gather's lead block is exposed: nothing computes before it. The final
      // reduce-scatter exposes its last block, as with gradient sharding alone (overlapped, its
      // reductions are per block too), less than half of the whole one.
      const AnalyticCost zero2_cost(zero2.model, zero2.partition, zero2.placement, zero2.config,
                                    cluster_preset("a100-80g"));
      Instruction final_reduction;
      final_reduction.op = OpKind::kAllReduce;
      final_reduction.stage = 0;
      final_reduction.bytes = cost.grad_bytes(0);
      const double tail = cost.allreduce_s(0, final_reduction);
      EXPECT_DOUBLE_EQ(zero2_cost.allreduce_s(0, final_reduction), tail);
      ASSERT_LT(tail, cost.collective_s(static_cast<double>(final_reduction.bytes), 0, true) / 2);
      EXPECT_NEAR(b.result.step_time_s, a.result.step_time_s + g, g * 1e-6);
      EXPECT_NEAR(exposed_dp_s(b), exposed_dp_s(a) + g, g * 1e-6);
    } else {
      ASSERT_LT(f, g / 100);
      // Every gather waits on the one before it: 2·m of them in a row, exposed.
      EXPECT_GT(exposed_dp_s(b) - exposed_dp_s(a), 2 * m * g * 0.99);
      EXPECT_GT(b.result.step_time_s, a.result.step_time_s + 2 * m * g * 0.99);
    }
    // The gathers move 2·m times the stage's weight bytes.
    EXPECT_EQ(b.result.collective_bytes - a.result.collective_bytes, 2 * m * gather.bytes);
  }
}

TEST(ShardParameters, PerBlockCollectivesExposeTheLeadBlockAndWhatTheLinkCannotHide) {
  // One stage of 4 blocks of 50 M parameters, dp 8: a block's gather moves 100 MB per device
  // (16-bit weights), its reduce-scatter 200 MB (fp32 gradients).
  constexpr int kBlocks = 4;
  constexpr double kParams = 50e6;
  const double block_gather_s = 7.0 / 8 * (2 * kParams) / 100e9;  // 0.875 ms
  const double block_reduce_s = 7.0 / 8 * (4 * kParams) / 100e9;  // 1.75 ms
  const ClusterSpec cluster = known_link_cluster();
  // Long blocks hide both collectives, middle ones hide either alone but not both (a block's
  // backward is shorter than its gather plus its reduce-scatter, which share the link), short
  // ones hide neither.
  enum class Compute { kLong, kMiddle, kShort };
  for (const Compute regime : {Compute::kLong, Compute::kMiddle, Compute::kShort}) {
    const bool long_compute = regime == Compute::kLong;
    const double flops = regime == Compute::kLong ? 1e14 : regime == Compute::kMiddle ? 2.3e11 : 1e9;
    PlanRequest r = shard_params_request(equal_blocks_model(kBlocks, kParams, flops), 1, 8, true);
    r.cluster = cluster;
    const Plan plan = build_plan(r);
    ASSERT_EQ(plan.config.num_microbatches, 1);
    const AnalyticCost cost(plan.model, plan.partition, plan.placement, plan.config, cluster);
    ASSERT_EQ(cost.param_bytes(0), static_cast<int64_t>(kBlocks * 2 * kParams));
    ASSERT_EQ(cost.grad_bytes(0), static_cast<int64_t>(kBlocks * 4 * kParams));
    Instruction gather;
    gather.op = OpKind::kAllGather;
    gather.stage = 0;
    gather.bytes = cost.param_bytes(0);
    gather.tasks = {{TaskKind::kF, 0, 0}};
    Instruction final_reduction;
    final_reduction.op = OpKind::kAllReduce;
    final_reduction.stage = 0;
    final_reduction.bytes = cost.grad_bytes(0);
    // The whole stage's collectives (what the per-stage model charged): 4 blocks' worth.
    EXPECT_NEAR(cost.collective_s(static_cast<double>(gather.bytes), 0, true),
                kBlocks * block_gather_s, 1e-12);
    const double forward = cost.task_s(TaskKind::kF, 0);
    const double backward = cost.task_s(TaskKind::kB, 0);
    const double gather_s = cost.allreduce_s(0, gather);
    const double reduce_s = cost.allreduce_s(0, final_reduction);
    if (long_compute) {
      // A block computes longer than its collectives: only the first gathered block and the last
      // reduce-scattered one are exposed.
      ASSERT_GT(forward / kBlocks, block_gather_s);
      ASSERT_GT(backward / kBlocks, block_gather_s + block_reduce_s);
      EXPECT_NEAR(gather_s, block_gather_s, 1e-12);
      EXPECT_NEAR(reduce_s, block_reduce_s, 1e-12);
    } else if (regime == Compute::kMiddle) {
      // A block's backward outlasts its gather and its reduce-scatter alone, not both: the link
      // carries the backward's gather of the next block and the reduce-scatter of the previous
      // one beside each block's backward, so each further block exposes gather + reduce-scatter
      // less the block's backward, charged to the reduce-scatter (the gather alone hides).
      ASSERT_GT(backward / kBlocks, block_reduce_s);
      ASSERT_LT(backward / kBlocks, block_gather_s + block_reduce_s);
      EXPECT_NEAR(reduce_s,
                  block_reduce_s +
                      (kBlocks - 1) * (block_gather_s + block_reduce_s - backward / kBlocks),
                  1e-12);
    } else {
      // The link is slower: each further block adds its collective less a block's compute,
      // i.e. the whole collective less the compute of all blocks but the last; the backward's
      // gather takes the link for longer than a block's backward, so every reduce-scatter block
      // is exposed whole.
      ASSERT_LT(forward / kBlocks, block_gather_s);
      ASSERT_LT(backward / kBlocks, block_gather_s);
      EXPECT_NEAR(gather_s, kBlocks * block_gather_s - (kBlocks - 1) * forward / kBlocks, 1e-12);
      EXPECT_NEAR(reduce_s, kBlocks * block_reduce_s, 1e-12);
    }
    // The simulated step (one microbatch: F, B, the final reduce-scatter, the optimizer step):
    // the F's gather and the reduce-scatter are exposed, in the breakdown's dp column; the B's
    // gather starts when the F's gather frees the stream (all 4 blocks, 3.5 ms) and is exposed
    // where it ends after the F; the compute columns are those of the same run without
    // parameter sharding.
    PlanRequest plain_request = r;
    plain_request.config.shard_parameters = false;
    const Plan plain = build_plan(plain_request);
    PlanSimOptions o;
    o.breakdown = true;
    o.check_memory = false;
    const SimulatedPlan sharded_run = simulate_plan(plan, o);
    const SimulatedPlan plain_run = simulate_plan(plain, o);
    EXPECT_NEAR(cost.collective_busy_s(0, gather), kBlocks * block_gather_s, 1e-12);
    const double b_gather_exposed = std::max(
        0.0, kBlocks * block_gather_s + cost.allreduce_s(0, [&] {
          Instruction b = gather;
          b.tasks = {{TaskKind::kB, 0, 0}};
          return b;
        }()) - (gather_s + cluster.launch_overhead_s + forward));
    const double exposed = gather_s + b_gather_exposed + reduce_s;
    EXPECT_NEAR(exposed_dp_s(sharded_run), exposed, 1e-9);
    const nlohmann::json& a = sharded_run.metrics.at("breakdown").at(0);
    const nlohmann::json& p = plain_run.metrics.at("breakdown").at(0);
    for (const char* column : {"gemm_s", "attention_s", "elementwise_s", "other_s", "optimizer_s"})
      EXPECT_DOUBLE_EQ(a.at(column).get<double>(), p.at(column).get<double>()) << column;
    EXPECT_NEAR(sharded_run.result.step_time_s,
                plain_run.result.step_time_s - exposed_dp_s(plain_run) + exposed, 1e-9);
  }
}

TEST(ShardParameters, PlanJsonCarriesTheOptionAndRefusesItWithoutZeroOneOrGradientSharding) {
  const ParallelConfig c = shard_params_config(true);
  const nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j.at("shard_parameters"), true);
  EXPECT_EQ(j.at("shard_gradients"), true);
  EXPECT_EQ(config_from_json(j, "plan.json: field 'config'"), c);
  EXPECT_FALSE(config_to_json(shard_params_config(false)).contains("shard_parameters"));
  // Absent shard_gradients: implied.
  nlohmann::json implied = j;
  implied.erase("shard_gradients");
  EXPECT_TRUE(config_from_json(implied, "plan.json: field 'config'").shard_gradients);
  const auto message = [](const nlohmann::json& bad) {
    try {
      config_from_json(bad, "plan.json: field 'config'");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json no_zero1 = j;
  no_zero1["zero1"] = false;
  EXPECT_EQ(message(no_zero1),
            "plan.json: field 'config': field 'shard_parameters': parameter sharding (ZeRO-3 / "
            "FSDP) needs the distributed optimizer (\"zero1\": true)");
  nlohmann::json no_grads = j;
  no_grads["shard_gradients"] = false;
  EXPECT_EQ(message(no_grads),
            "plan.json: field 'config': field 'shard_gradients': off, but parameter sharding "
            "(ZeRO-3 / FSDP) implies gradient sharding");
  // The configuration check (CLI flags and plan requests).
  ParallelConfig bad = c;
  bad.zero1 = false;
  try {
    check_shard_gradients(bad, "configuration", /*flags=*/true);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--shard-params: parameter sharding (ZeRO-3 / FSDP) needs the distributed "
              "optimizer (--zero1)");
  }
  bad = c;
  bad.shard_gradients = false;
  EXPECT_THROW(check_shard_gradients(bad, "configuration", /*flags=*/true), InputError);
  PlanRequest r = shard_params_request(load_model("gpt3-1.3b"), 2, 64, true);
  r.config.shard_gradients = false;
  EXPECT_THROW(build_plan(r), InputError);
}

TEST(ShardParameters, ThePlanFileRoundTripsAndSimulatesTheSame) {
  const Plan plan = build_plan(shard_params_request(load_model("gpt3-1.3b"), 2, 32, true));
  const Plan back = plan_from_json(plan_to_json(plan), "plan.json");
  EXPECT_TRUE(back.config.shard_parameters);
  EXPECT_EQ(back.program, plan.program);
  PlanSimOptions o;
  o.record_trace = false;
  EXPECT_EQ(simulate_plan(back, o).result.step_time_s, simulate_plan(plan, o).result.step_time_s);
}

TEST(ShardParameters, ReductionsOverlapWithoutOverlapGradReduce) {
  // Held back until the last compute, a reduction would hold back the gathers queued behind it
  // on the collective stream, which the computes wait for: a deadlock. An actor with gathers
  // overlaps its reductions either way, so the flag changes nothing.
  PlanRequest r = shard_params_request(load_model("gpt3-1.3b"), 2, 64, true);
  const Plan overlapped = build_plan(r);
  r.config.overlap_grad_reduce = false;
  const Plan plain = build_plan(r);
  PlanSimOptions o;
  o.record_trace = false;
  const SimResult a = simulate_plan(overlapped, o).result;
  const SimResult b = simulate_plan(plain, o).result;
  EXPECT_EQ(b.step_time_s, a.step_time_s);
  EXPECT_EQ(b.collective_bytes, a.collective_bytes);
}

}  // namespace
}  // namespace jaxpp
