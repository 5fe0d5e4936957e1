// Uniform stage times through the real registry + lowering reproduce SCHEDULES.md's closed forms
// (no communication) and the peak stashed microbatches of each schedule.
#include <gtest/gtest.h>

#include "schedules/registry.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

SimulatedPlan run(const std::string& name, int p, int m, double f, double b, double w,
                  int stages = 0, double comm = 0) {
  ScheduleParams params;
  params.num_actors = p;
  params.num_stages = stages;
  params.num_microbatches = m;
  const Schedule s = generate_schedule(name, params);
  PlanSimOptions o;
  return simulate_stage_times(s, uniform_stage_times(s.num_stages, f, b, w, comm), o);
}

TEST(ClosedForms, UnitCostMakespansOfSchedulesMd) {
  // F = 1, B = 2 (T_B = T_W = 1), I = W = 1.
  EXPECT_DOUBLE_EQ(run("Std1F1B", 4, 8, 1, 1, 1).result.makespan_s, 33);
  EXPECT_DOUBLE_EQ(run("Eager1F1B", 4, 8, 1, 1, 1).result.makespan_s, 33);
  EXPECT_DOUBLE_EQ(run("GPipe", 4, 8, 1, 1, 1).result.makespan_s, 33);
  EXPECT_DOUBLE_EQ(run("ZeroBubble", 4, 8, 1, 1, 1).result.makespan_s, 27);
}

TEST(ClosedForms, OneFOneBAndGPipeBubbleIsPMinusOneFullPasses) {
  for (int p : {2, 4, 8}) {
    for (int m : {p, 2 * p, 3 * p}) {
      const double f = 1.5, b = 2.0, w = 0.5;
      const double expected = (m + p - 1) * (f + b + w);
      EXPECT_DOUBLE_EQ(run("1f1b", p, m, f, b, w).result.makespan_s, expected) << p << " " << m;
      EXPECT_DOUBLE_EQ(run("gpipe", p, m, f, b, w).result.makespan_s, expected) << p << " " << m;
      // bubble_rate = (p-1)/(m+p-1) on the actor with the longest span.
      EXPECT_NEAR(run("1f1b", p, m, f, b, w).result.bubble_rate,
                  static_cast<double>(p - 1) / (m + p - 1), 1e-12);
    }
  }
}

TEST(ClosedForms, ZeroBubbleH1BubbleIsPMinusOneTimesFPlusBMinusW) {
  for (int p : {2, 4, 8}) {
    for (int m : {p, 2 * p, 3 * p}) {
      const double t = 1.0;  // T_F = T_B = T_W, the ZB paper's setting
      EXPECT_DOUBLE_EQ(run("zb-h1", p, m, t, t, t).result.makespan_s,
                       m * 3 * t + (p - 1) * (t + t - t))
          << p << " " << m;
    }
  }
}

// Bubble time as DESIGN.md defines it: span − busy of the actor with the longest span.
double bubble_time(const SimResult& r) {
  const ActorStats& a = r.actors[r.bubble_actor];
  return a.span_s() - a.busy_s;
}

TEST(ClosedForms, BubbleTimesMatchTheTable) {
  const int p = 4, m = 12;
  const double f = 1, b = 1, w = 1;  // T_F = T_B = T_W
  EXPECT_DOUBLE_EQ(bubble_time(run("1f1b", p, m, f, b, w).result), (p - 1) * (f + b + w));
  EXPECT_DOUBLE_EQ(bubble_time(run("gpipe", p, m, f, b, w).result), (p - 1) * (f + b + w));
  EXPECT_DOUBLE_EQ(bubble_time(run("zb-h1", p, m, f, b, w).result), (p - 1) * (f + b - w));
}

TEST(ClosedForms, InterleavedBubbleShrinksByV) {
  // Per-stage times 1/v of the actor's whole layer set: bubble (p-1)(F+B+W)/v in actor units.
  const int p = 4, m = 8;
  for (int v : {2, 4}) {
    const double f = 1.0 / v, b = 1.0 / v, w = 1.0 / v;
    const double expected = m * 3.0 + (p - 1) * 3.0 / v;
    EXPECT_NEAR(run("interleaved", p, m, f, b, w, p * v).result.makespan_s, expected, 1e-9) << v;
  }
}

TEST(ClosedForms, CommunicationTimeIsAddedOnEveryCrossActorEdge) {
  // GPipe with T_comm = c: the forward wave crosses p-1 boundaries, the backward wave p-1 more:
  // makespan = (m+p-1)(F+B) + 2(p-1)c (derivation in docs/simulate.md).
  const int p = 4, m = 8;
  const double c = 0.25;
  EXPECT_DOUBLE_EQ(run("gpipe", p, m, 1, 1, 1, 0, c).result.makespan_s,
                   (m + p - 1) * 3.0 + 2 * (p - 1) * c);
  // Std1F1B pays it in the steady state too (each B waits for the round trip): strictly more.
  EXPECT_GT(run("1f1b", p, m, 1, 1, 1, 0, c).result.makespan_s,
            (m + p - 1) * 3.0 + 2 * (p - 1) * c);
}

TEST(PeakStash, OneFOneBHoldsPOnStageZero) {
  for (int p : {2, 4, 8}) {
    EXPECT_EQ(run("1f1b", p, 4 * p, 1, 1, 1).result.peak_stashed_per_stage[0], p) << p;
  }
}

TEST(PeakStash, GPipeHoldsAllMicrobatches) {
  EXPECT_EQ(run("gpipe", 4, 12, 1, 1, 1).result.peak_stashed_per_stage[0], 12);
}

TEST(PeakStash, ZeroBubbleH2HoldsTwoPMinusOneOnStageZero) {
  for (int p : {2, 4, 8}) {
    EXPECT_EQ(run("zb-h2", p, 4 * p, 1, 1, 1).result.peak_stashed_per_stage[0], 2 * p - 1) << p;
  }
}

TEST(PeakStash, ZeroBubbleH1HoldsPOnStageZero) {
  EXPECT_EQ(run("zb-h1", 4, 16, 1, 1, 1).result.peak_stashed_per_stage[0], 4);
}

}  // namespace
}  // namespace jaxpp
