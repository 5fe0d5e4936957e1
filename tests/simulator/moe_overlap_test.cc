// The MoE all-to-all in the simulator (issue 13, item 5 and its target): DualPipeV's overlapped
// F&B pairs hide the expert-parallel all-to-all, so with ep across nodes DualPipeV beats Std1F1B
// by more than its smaller bubble; with the overlap off, the gain shrinks to the bubble
// difference. The same in measured mode, with the all-to-all given per stage.
#include <gtest/gtest.h>

#include <algorithm>

#include "costmodel/cluster.h"
#include "costmodel/stage_times_cost.h"
#include "graph/error.h"
#include "simulator/plan_builder.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

// deepseek-v3 on 512 H100s: pp 8, dp 64, ep 32 (4 nodes per expert group), 16 microbatches.
SimulatedPlan simulate_deepseek(const std::string& schedule, MoeOverlap overlap, int ep = 32) {
  PlanRequest req;
  req.model = load_model("deepseek-v3");
  req.cluster = cluster_preset("h100-sxm");
  ParallelConfig& c = req.config;
  c.gpus = 512;
  c.pp = 8;
  c.dp = 64;
  c.ep = ep;
  c.global_batch = 1024;
  c.schedule = schedule;
  c.moe_overlap = overlap;
  PlanSimOptions o;
  o.record_trace = false;
  o.check_memory = false;
  return simulate_plan(build_plan(req), o);
}

double max_busy_s(const SimResult& r) {
  double busy = 0;
  for (const ActorStats& a : r.actors) busy = std::max(busy, a.busy_s);
  return busy;
}

// Step time not spent computing on the busiest actor: the pipeline bubble (and exposed P2P).
double bubble_s(const SimResult& r) { return r.step_time_s - max_busy_s(r); }

TEST(MoeOverlap, DualPipeVWithOverlapBeatsOneFOneBWhenTheAllToAllCrossesNodes) {
  const SimulatedPlan std1f1b = simulate_deepseek("1f1b", MoeOverlap::kAuto);
  const SimulatedPlan dualpipev = simulate_deepseek("dualpipev", MoeOverlap::kAuto);
  ASSERT_GT(std1f1b.result.alltoall_s, 0);
  // Std1F1B has no F&B pairs: every all-to-all is exposed.
  EXPECT_DOUBLE_EQ(std1f1b.result.alltoall_exposed_s, std1f1b.result.alltoall_s);
  // DualPipeV's pairs hide a large part of it.
  EXPECT_LT(dualpipev.result.alltoall_exposed_s, 0.8 * dualpipev.result.alltoall_s);
  EXPECT_LT(dualpipev.result.step_time_s, 0.85 * std1f1b.result.step_time_s);
}

TEST(MoeOverlap, WithoutOverlapTheGainShrinksToTheBubbleDifference) {
  const SimulatedPlan std1f1b = simulate_deepseek("1f1b", MoeOverlap::kNone);
  const SimulatedPlan overlapped = simulate_deepseek("dualpipev", MoeOverlap::kAuto);
  const SimulatedPlan serial = simulate_deepseek("dualpipev", MoeOverlap::kNone);
  EXPECT_DOUBLE_EQ(serial.result.alltoall_exposed_s, serial.result.alltoall_s);
  const double gain_overlap = std1f1b.result.step_time_s - overlapped.result.step_time_s;
  const double gain_serial = std1f1b.result.step_time_s - serial.result.step_time_s;
  EXPECT_GT(gain_serial, 0) << "DualPipeV's bubble is smaller";
  EXPECT_LT(gain_serial, 0.5 * gain_overlap) << "most of the gain came from the overlap";
  // Both pipelines now compute the same per actor (same layers per actor, all-to-all serialised):
  // the remaining gain is exactly the difference of their bubbles.
  EXPECT_NEAR(max_busy_s(serial.result), max_busy_s(std1f1b.result),
              0.01 * max_busy_s(std1f1b.result));
  EXPECT_NEAR(gain_serial, bubble_s(std1f1b.result) - bubble_s(serial.result),
              0.01 * std1f1b.result.step_time_s);
}

TEST(MoeOverlap, AllToAllInsideANodeCostsLessThanAcrossNodes) {
  const SimulatedPlan intra = simulate_deepseek("1f1b", MoeOverlap::kNone, 8);
  const SimulatedPlan inter = simulate_deepseek("1f1b", MoeOverlap::kNone, 32);
  // Per layer the volume is the same; ep 8 stays on NVLink.
  EXPECT_LT(intra.result.alltoall_s, 0.5 * inter.result.alltoall_s);
}

TEST(MoeOverlap, OneFOneBOverlapPairsBackwardsWithForwardsAndHidesTheirAllToAll) {
  const SimulatedPlan serial = simulate_deepseek("1f1b", MoeOverlap::kNone);
  const SimulatedPlan paired = simulate_deepseek("1f1b", MoeOverlap::k1F1B);
  EXPECT_LT(paired.result.alltoall_exposed_s, 0.5 * serial.result.alltoall_exposed_s);
  // Fewer compute instructions (pairs), the same tasks.
  int64_t groups_serial = 0, groups_paired = 0;
  for (const auto& list : serial.program.actors)
    for (const Instruction& i : list) groups_serial += i.op == OpKind::kCompute ? 1 : 0;
  for (const auto& list : paired.program.actors)
    for (const Instruction& i : list) groups_paired += i.op == OpKind::kCompute ? 1 : 0;
  EXPECT_LT(groups_paired, groups_serial);
}

// ---- Measured mode: the all-to-all given per stage (StageTimesCost) --------------------------

// pp 4, 16 microbatches. Std1F1B runs 4 stages, DualPipeV 8 (two per actor, each half the layers):
// the same model, so DualPipeV's stage times are half of Std1F1B's. Milliseconds per stage of
// Std1F1B: F 2, B 2, W 2, all-to-all 1.6 in F and in B (an ep group across nodes).
SimulatedPlan simulate_measured_moe(const std::string& schedule, MoeOverlap overlap,
                                    double a2a_ms = 1.6) {
  MeasuredRequest req;
  req.schedule = schedule;
  req.pp = 4;
  req.microbatches = 16;
  const double per_stage = schedule == "dualpipev" ? 0.5 : 1.0;
  req.t_f_ms = 2 * per_stage;
  req.t_b_ms = 2 * per_stage;
  req.t_w_ms = 2 * per_stage;
  req.t_a2a_f_ms = a2a_ms * per_stage;
  req.t_a2a_b_ms = a2a_ms * per_stage;
  req.moe_overlap = overlap;
  PlanSimOptions o;
  o.record_trace = false;
  return simulate_measured(req, o);
}

TEST(MeasuredMoeOverlap, DualPipeVWithOverlapBeatsOneFOneBWhenTheAllToAllIsLong) {
  const SimulatedPlan std1f1b = simulate_measured_moe("1f1b", MoeOverlap::kAuto);
  const SimulatedPlan dualpipev = simulate_measured_moe("dualpipev", MoeOverlap::kAuto);
  // Every forward and backward of 4 stages x 16 microbatches carries 1.6 ms of all-to-all.
  EXPECT_NEAR(std1f1b.result.alltoall_s, 4 * 16 * (1.6 + 1.6) * 1e-3, 1e-9);
  EXPECT_DOUBLE_EQ(std1f1b.result.alltoall_exposed_s, std1f1b.result.alltoall_s);
  EXPECT_NEAR(dualpipev.result.alltoall_s, std1f1b.result.alltoall_s, 1e-9);
  EXPECT_LT(dualpipev.result.alltoall_exposed_s, 0.8 * dualpipev.result.alltoall_s);
  EXPECT_LT(dualpipev.result.step_time_s, 0.85 * std1f1b.result.step_time_s);
  EXPECT_EQ(dualpipev.metrics.at("moe_overlap"), "auto");
}

TEST(MeasuredMoeOverlap, WithoutOverlapTheGainShrinksToTheBubbleDifference) {
  const SimulatedPlan std1f1b = simulate_measured_moe("1f1b", MoeOverlap::kNone);
  const SimulatedPlan overlapped = simulate_measured_moe("dualpipev", MoeOverlap::kAuto);
  const SimulatedPlan serial = simulate_measured_moe("dualpipev", MoeOverlap::kNone);
  EXPECT_DOUBLE_EQ(serial.result.alltoall_exposed_s, serial.result.alltoall_s);
  const double gain_overlap = std1f1b.result.step_time_s - overlapped.result.step_time_s;
  const double gain_serial = std1f1b.result.step_time_s - serial.result.step_time_s;
  EXPECT_GT(gain_serial, 0) << "DualPipeV's bubble is smaller";
  EXPECT_LT(gain_serial, 0.5 * gain_overlap) << "most of the gain came from the overlap";
  // Serialised, each actor computes 16 x (F + A_F + B + W + A_B) in both schedules.
  const double busy = 16 * (2 + 1.6 + 2 + 2 + 1.6) * 1e-3;
  EXPECT_NEAR(max_busy_s(serial.result), busy, 1e-9);
  EXPECT_NEAR(max_busy_s(std1f1b.result), busy, 1e-9);
  EXPECT_NEAR(gain_serial, bubble_s(std1f1b.result) - bubble_s(serial.result), 1e-9);
}

TEST(MeasuredMoeOverlap, OneFOneBOverlapPairsBackwardsWithForwards) {
  const SimulatedPlan serial = simulate_measured_moe("1f1b", MoeOverlap::kNone);
  const SimulatedPlan paired = simulate_measured_moe("1f1b", MoeOverlap::k1F1B);
  EXPECT_LT(paired.result.alltoall_exposed_s, 0.5 * serial.result.alltoall_exposed_s);
  EXPECT_NEAR(paired.result.alltoall_s, serial.result.alltoall_s, 1e-9);
  EXPECT_LT(paired.program.num_instructions(), serial.program.num_instructions());
}

// Without an all-to-all an overlap mode other than auto changed nothing and exited 0: it is
// refused, naming the flag; auto (the default) runs as before.
TEST(MeasuredMoeOverlap, WithoutAllToAllAnOverlapModeIsRefused) {
  const SimulatedPlan plain = simulate_measured_moe("dualpipev", MoeOverlap::kAuto, 0);
  EXPECT_EQ(plain.result.alltoall_s, 0);
  EXPECT_FALSE(plain.metrics.contains("moe_overlap"));
  for (const MoeOverlap o : {MoeOverlap::kNone, MoeOverlap::k1F1B, MoeOverlap::kDualPipe})
    EXPECT_EQ(error_of([&] { simulate_measured_moe("dualpipev", o, 0); })
                  .rfind("--moe-overlap: " + std::string(to_string(o)) +
                             " overlaps the MoE all-to-all, but no stage has one",
                         0),
              0u);
}

TEST(MeasuredMoeOverlap, PerStageAllToAllFromAStageTimesDocument) {
  // Only stage 3 of Std1F1B has MoE layers.
  nlohmann::json doc = {{"stages", nlohmann::json::array()}};
  for (int s = 0; s < 4; ++s) {
    nlohmann::json e = {{"t_f_ms", 1.0}, {"t_b_ms", 1.0}};
    if (s == 3) e["t_a2a_f_ms"] = 0.5, e["t_a2a_b_ms"] = 0.25;
    doc["stages"].push_back(e);
  }
  const StageTimes t = stage_times_from_json(doc, "t.json", 4);
  EXPECT_EQ(t.a2a_f_s(0), 0);
  EXPECT_DOUBLE_EQ(t.a2a_f_s(3), 0.5e-3);
  EXPECT_DOUBLE_EQ(t.a2a_b_s(3), 0.25e-3);
  const StageTimesCost cost(t);
  EXPECT_DOUBLE_EQ(cost.task_s(TaskKind::kF, 3), 1.5e-3);
  EXPECT_DOUBLE_EQ(cost.task_s(TaskKind::kB, 3), 1.25e-3);
  EXPECT_DOUBLE_EQ(cost.task_s(TaskKind::kW, 3), 0);
  EXPECT_DOUBLE_EQ(cost.task_s(TaskKind::kF, 2), 1e-3);
  // A negative all-to-all is refused, naming the field.
  doc["stages"][1]["t_a2a_b_ms"] = -1;
  try {
    stage_times_from_json(doc, "t.json", 4);
    FAIL() << "accepted a negative all-to-all";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("t_a2a_b_ms"), std::string::npos) << e.what();
  }
}

TEST(MeasuredMoeOverlap, AnFAndBPairHidesEachSidesAllToAllBehindTheOtherSidesCompute) {
  // F of microbatch 1 and B of microbatch 0 on stage 0: C_F = 2, A_F = 3, C_B = 1, A_B = 0.5 (ms).
  StageTimes t = with_uniform_alltoall(uniform_stage_times(1, 2e-3, 1e-3, 0, 0), 3e-3, 0.5e-3);
  Instruction pair;
  pair.op = OpKind::kCompute;
  pair.tasks = {{TaskKind::kF, 0, 1}, {TaskKind::kB, 0, 0}};
  const StageTimesCost overlapped(t, true), serial(t, false);
  // 2 + 1 + max(0, 3 - 1) + max(0, 0.5 - 2) = 5 ms; serialised 2 + 3 + 1 + 0.5 = 6.5 ms.
  EXPECT_NEAR(overlapped.compute_s(0, pair), 5e-3, 1e-12);
  EXPECT_NEAR(overlapped.alltoall(0, pair).exposed_s, 2e-3, 1e-12);
  EXPECT_NEAR(overlapped.alltoall(0, pair).busy_s, 3.5e-3, 1e-12);
  EXPECT_NEAR(serial.compute_s(0, pair), 6.5e-3, 1e-12);
  // The same microbatch's F and B do not overlap.
  pair.tasks[0].microbatch = 0;
  EXPECT_NEAR(overlapped.compute_s(0, pair), 6.5e-3, 1e-12);
}

}  // namespace
}  // namespace jaxpp
