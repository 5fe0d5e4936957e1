// What-if studies (simulator/what_if.h): a slow actor delays the step and the actors after it,
// jittered runs are reproducible, the quantile is the nearest rank, and the robust ranking is
// ordered by p90.
#include "simulator/what_if.h"

#include <gtest/gtest.h>

#include "costmodel/cluster.h"
#include "costmodel/memory.h"
#include "graph/error.h"
#include "graph/model.h"
#include "schedules/registry.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

SimulatedPlan what_if_sim(const Perturbation* p) {
  const Schedule s = generate_schedule("1f1b", {.num_actors = 4, .num_microbatches = 8});
  PlanSimOptions o;
  o.record_trace = false;
  o.perturbation = p;
  return simulate_stage_times(s, uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 1e-4), o);
}

TEST(WhatIf, SlowActorDelaysTheStepAndPropagatesToTheOtherActors) {
  const Perturbation p = parse_perturbation("slow-actor=1:2", "--perturb");
  const SimulatedPlan base = what_if_sim(nullptr);
  const SimulatedPlan slow = what_if_sim(&p);
  const nlohmann::json r = perturbation_report(base.result, slow.result, p);
  EXPECT_GT(r.at("slowdown").get<double>(), 1.3);
  EXPECT_EQ(r.at("spec"), "slow-actor=1:2");
  // The actors that do not run slower still end later, and idle more: the bubble propagates.
  for (int a : {0, 2, 3}) {
    EXPECT_GT(r.at("actors")[a].at("end_delay_s").get<double>(), 1e-3) << a;
    EXPECT_GT(r.at("actors")[a].at("idle_delta_s").get<double>(), 0) << a;
  }
  EXPECT_DOUBLE_EQ(r.at("actors")[1].at("busy_s").get<double>(),
                   2 * r.at("actors")[1].at("baseline_busy_s").get<double>());
}

TEST(WhatIf, JitteredRunsAreReproducibleAndSeedsDiffer) {
  const Perturbation a = parse_perturbation("jitter=0.2,seed=3", "x");
  const Perturbation b = parse_perturbation("jitter=0.2,seed=4", "x");
  EXPECT_EQ(what_if_sim(&a).result.step_time_s, what_if_sim(&a).result.step_time_s);
  EXPECT_NE(what_if_sim(&a).result.step_time_s, what_if_sim(&b).result.step_time_s);
}

TEST(WhatIf, NearestRankQuantile) {
  EXPECT_EQ(nearest_rank_quantile({5, 1, 4, 2, 3, 6, 7, 8, 9, 10}, 0.9), 9);
  EXPECT_EQ(nearest_rank_quantile({5, 1, 4, 2, 3}, 0.5), 3);
  EXPECT_EQ(nearest_rank_quantile({7}, 0.9), 7);
}

TEST(WhatIf, RobustRankingIsOrderedByP90AndReproducible) {
  ExploreRequest req;
  req.model = load_model("gpt3-1.3b");
  req.cluster = load_cluster("a100-80g");
  req.gpus = 8;
  req.global_batch = 64;
  req.threads = 1;
  req.space.pp = {4};
  req.space.tp = {1};
  req.space.schedules = {"1f1b", "zb-h1", "gpipe"};
  req.space.recompute = {Recompute::kNone};
  req.space.zero1 = {true};
  const ExploreResult res = explore(req);
  const std::vector<RobustEntry> r = robust_ranking(req, res, 8, 0.2, 5);
  ASSERT_EQ(r.size(), 5u);
  for (size_t i = 1; i < r.size(); ++i) EXPECT_LE(r[i - 1].p90_step_time_s, r[i].p90_step_time_s);
  for (const RobustEntry& e : r) {
    EXPECT_LE(e.p50_step_time_s, e.p90_step_time_s);
    EXPECT_LE(e.p90_step_time_s, e.max_step_time_s);
  }
  const std::vector<RobustEntry> again = robust_ranking(req, res, 8, 0.2, 5);
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].id, again[i].id);
    EXPECT_EQ(r[i].p90_step_time_s, again[i].p90_step_time_s);
  }
}

// GPT-3 1.3B (2048 tokens per sequence) on 4 A100s, pp 4, 1F1B, m = 8; `model` at another
// length keeps the partition of the 2048-token plan when `starts` is given.
Plan seq_len_plan(const ModelSpec& model, const std::vector<int>& starts = {}) {
  PlanRequest req;
  req.model = model;
  req.cluster = load_cluster("a100-80g");
  req.config.gpus = 4;
  req.config.pp = 4;
  req.config.global_batch = 8;
  req.config.schedule = "1f1b";
  if (!starts.empty()) {
    req.partition = PartitionMode::kExplicit;
    req.partition_starts = starts;
  }
  return build_plan(req);
}

PlanSimOptions seq_len_options() {
  PlanSimOptions o;
  o.record_trace = false;
  o.check_memory = false;
  return o;
}

TEST(WhatIfSeqLens, NominalLengthsGiveTheUnperturbedStepExactly) {
  const Plan plan = seq_len_plan(load_model("gpt3-1.3b"));
  const Perturbation p = parse_perturbation("seq-lens=2048*8", "--perturb");
  const SimulatedPlan sim = simulate_plan_perturbed(plan, seq_len_options(), p);
  const nlohmann::json& r = sim.metrics.at("perturbation");
  EXPECT_EQ(r.at("step_time_s").get<double>(), r.at("baseline_step_time_s").get<double>());
  const SimulatedPlan base = simulate_plan(plan, seq_len_options());
  EXPECT_EQ(sim.result.step_time_s, base.result.step_time_s);
  EXPECT_EQ(sim.metrics.at("peak_memory_bytes"), base.metrics.at("peak_memory_bytes"));
  EXPECT_EQ(r.at("spec"), "seq-lens=2048*8");
}

TEST(WhatIfSeqLens, UniformLengthsEqualThePlanOfTheModelAtThatLength) {
  // Llama 2 7B (RoPE: no parameter depends on the length; 4096 tokens) at 4 x 8192 tokens.
  const ModelSpec nominal = load_model("llama2-7b");
  const Plan plan = seq_len_plan(nominal);
  const ModelSpec long_model = model_from_json(model_shape_to_json(nominal, 8192), "test");
  ASSERT_EQ(long_model.total_params(), nominal.total_params());
  const Plan long_plan = seq_len_plan(long_model, plan.partition.stage_begin);
  const SimulatedPlan want = simulate_plan(long_plan, seq_len_options());
  const SimulatedPlan got = simulate_plan_perturbed(
      plan, seq_len_options(), parse_perturbation("seq-lens=8192*8", "--perturb"));
  EXPECT_EQ(got.result.step_time_s, want.result.step_time_s);
  EXPECT_EQ(got.metrics.at("p2p_bytes"), want.metrics.at("p2p_bytes"));
  // Each microbatch stashes the activations of its length: the peaks of the long model.
  EXPECT_EQ(got.metrics.at("peak_memory_bytes"), want.metrics.at("peak_memory_bytes"));
  EXPECT_NE(got.metrics.at("peak_memory_bytes"),
            simulate_plan(plan, seq_len_options()).metrics.at("peak_memory_bytes"));
  EXPECT_DOUBLE_EQ(got.metrics.at("tokens_per_s").get<double>(),
                   want.metrics.at("tokens_per_s").get<double>());
  EXPECT_DOUBLE_EQ(got.metrics.at("mfu").get<double>(), want.metrics.at("mfu").get<double>());
  // Twice the tokens cost more than twice the time: the attention core is quadratic.
  EXPECT_GT(got.result.step_time_s,
            2.1 * got.metrics.at("perturbation").at("baseline_step_time_s").get<double>());
}

TEST(WhatIfSeqLens, OneLongMicrobatchIsPricedByTheOperatorModelAndDelaysTheStep) {
  const ModelSpec model = load_model("gpt3-1.3b");
  const Plan plan = seq_len_plan(model);
  const std::vector<int> lens = {2048, 2048, 2048, 2048, 2048, 2048, 2048, 8192};
  const SequenceLengthCost cost(plan.model, plan.partition, plan.placement, plan.config,
                                load_cluster("a100-80g"), lens, "--perturb");
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(cost.at(0).task_s(TaskKind::kF, s), cost.nominal().task_s(TaskKind::kF, s));
    // The operator model, not a linear scale: at 4x the tokens the GEMMs take about 4x, the
    // causal attention core about 16x, so a transformer stage's forward more than 4x.
    const PassBreakdown& at_long = cost.at(7).breakdown(s).at(Pass::kForward);
    const PassBreakdown& at_nominal = cost.at(0).breakdown(s).at(Pass::kForward);
    EXPECT_GT(at_long.gemm_s / at_nominal.gemm_s, 3.5) << s;
    EXPECT_LT(at_long.gemm_s / at_nominal.gemm_s, 4.5) << s;
    EXPECT_GT(at_long.attention_s / at_nominal.attention_s, 12) << s;
    EXPECT_LT(at_long.attention_s / at_nominal.attention_s, 17) << s;
    const double ratio = cost.at(7).task_s(TaskKind::kF, s) / cost.at(0).task_s(TaskKind::kF, s);
    EXPECT_GT(ratio, 4.1) << s;
  }
  // P2P bytes of microbatch 7 are 4x those of the others.
  const Program scaled = cost.scale_program(plan.program);
  int64_t short_bytes = 0, long_bytes = 0;
  for (const Instruction& ins : scaled.actors[0])
    if (ins.op == OpKind::kSend) (ins.tasks[0].microbatch == 7 ? long_bytes : short_bytes) = ins.bytes;
  EXPECT_GT(short_bytes, 0);
  EXPECT_EQ(long_bytes, 4 * short_bytes);

  const SimulatedPlan sim = simulate_plan_perturbed(
      plan, seq_len_options(), parse_perturbation("seq-lens=2048*7:8192", "--perturb"));
  const nlohmann::json& r = sim.metrics.at("perturbation");
  const double base = r.at("baseline_step_time_s").get<double>();
  // At least the extra compute of microbatch 7 on one stage, F and B, lies on the critical path;
  // less than running every microbatch at 8192 tokens.
  const double extra = cost.at(7).task_s(TaskKind::kF, 1) - cost.at(0).task_s(TaskKind::kF, 1) +
                       cost.at(7).task_s(TaskKind::kB, 1) - cost.at(0).task_s(TaskKind::kB, 1);
  EXPECT_GT(sim.result.step_time_s, base + extra);
  const SimulatedPlan all_long = simulate_plan_perturbed(
      plan, seq_len_options(), parse_perturbation("seq-lens=8192*8", "--perturb"));
  EXPECT_LT(sim.result.step_time_s, all_long.result.step_time_s);
  // The delay reaches every actor (the backward of microbatch 7 runs through all of them).
  for (int a = 0; a < 4; ++a)
    EXPECT_GT(r.at("actors")[a].at("end_delay_s").get<double>(), 0) << a;
  // Memory: under 1F1B the last actor stashes one microbatch at a time, so its peak is static +
  // the stash of the long microbatch, 4x (or more, the stash has a quadratic part) the short one,
  // and the loss transient of the long microbatch's loss (the 16-bit logits beside their fp32
  // copy, costmodel/memory.h), 4x the short one's.
  const SimulatedPlan base_sim = simulate_plan(plan, seq_len_options());
  const int64_t base_peak = base_sim.metrics.at("peak_memory_bytes")[3].get<int64_t>();
  const int64_t peak = sim.metrics.at("peak_memory_bytes")[3].get<int64_t>();
  const MemoryModel short_mem = build_memory_model(plan.model, plan.partition, plan.placement,
                                                   plan.config, load_cluster("a100-80g"));
  const MemoryModel long_mem = build_memory_model(cost.model_at(7), plan.partition,
                                                  plan.placement, plan.config,
                                                  load_cluster("a100-80g"));
  const int64_t short_loss = short_mem.actors[3].loss_transient_bytes;
  const int64_t long_loss = long_mem.actors[3].loss_transient_bytes;
  EXPECT_EQ(short_loss, int64_t{2048} * 50257 * 2);  // gpt3-1.3b: V 50257, BF16
  EXPECT_EQ(long_loss, 4 * short_loss);
  EXPECT_EQ(peak - base_peak, long_mem.stash_bytes_per_stage[3] -
                                  short_mem.stash_bytes_per_stage[3] + long_loss - short_loss);
  EXPECT_GE(long_mem.stash_bytes_per_stage[3], 4 * short_mem.stash_bytes_per_stage[3]);
}

TEST(WhatIfSeqLens, AGroupMixingLengthsCostsEachTaskAtItsOwnLength) {
  const Plan plan = seq_len_plan(load_model("gpt3-1.3b"));
  const ClusterSpec cluster = load_cluster("a100-80g");
  const SequenceLengthCost cost(plan.model, plan.partition, plan.placement, plan.config, cluster,
                                {2048, 2048, 2048, 2048, 8192, 2048, 2048, 2048}, "--perturb");
  Instruction group;
  group.op = OpKind::kCompute;
  group.stage = 1;
  group.tasks.push_back(TaskRef{TaskKind::kF, 1, 4});
  group.tasks.push_back(TaskRef{TaskKind::kB, 1, 0});
  EXPECT_DOUBLE_EQ(cost.compute_s(1, group), cluster.launch_overhead_s +
                                                 cost.at(4).task_s(TaskKind::kF, 1) +
                                                 cost.at(0).task_s(TaskKind::kB, 1));
  // One length: that length's own cost model, launch overhead once.
  group.tasks[0].microbatch = 5;
  EXPECT_EQ(cost.compute_s(1, group), cost.nominal().compute_s(1, group));
  // Optimizer steps and gradient reductions do not depend on the tokens.
  Instruction opt;
  opt.op = OpKind::kOptimizer;
  opt.stage = 2;
  EXPECT_EQ(cost.compute_s(2, opt), cost.nominal().compute_s(2, opt));
}

TEST(WhatIfSeqLens, BadLengthsForThePlanAreInputErrors) {
  const Plan plan = seq_len_plan(load_model("gpt3-1.3b"));
  const auto message = [&](const std::string& spec) {
    try {
      simulate_plan_perturbed(plan, seq_len_options(), parse_perturbation(spec, "--perturb"));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message("seq-lens=2048*7"),
            "--perturb: seq-lens gives 7 lengths but there are 8 microbatches (one length per "
            "microbatch)");
  EXPECT_NE(message("seq-lens=2048*8,nominal-seq-len=1024")
                .find("--perturb: nominal-seq-len is for measured mode"),
            std::string::npos);
  // A model given as explicit layers has no shape to price at another length.
  Plan explicit_plan = plan;
  nlohmann::json layers_only = model_to_json(plan.model);
  layers_only.erase("hidden");
  explicit_plan.model = model_from_json(layers_only, "explicit");
  ASSERT_EQ(explicit_plan.model.hidden, 0);
  std::string e;
  try {
    simulate_plan_perturbed(explicit_plan, seq_len_options(),
                            parse_perturbation("seq-lens=2048*7:4096", "--perturb"));
  } catch (const InputError& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("--perturb: seq-lens: model 'gpt3-1.3b' is given in explicit form"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace jaxpp
