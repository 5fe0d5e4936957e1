// Schedule synthesis (simulator/synthesize.h): the replay equals the engine, the result is valid
// and within the budget, never slower than a built-in schedule that fits the same budget (grid),
// deterministic, better than ZB-H1 when the budget allows more, and bad budgets are refused.
#include "simulator/synthesize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "graph/error.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

StageTimes synth_test_times(int p, double f, double b, double w, double comm, bool uneven) {
  StageTimes t = uniform_stage_times(p, f * 1e-3, b * 1e-3, w * 1e-3, comm * 1e-3);
  if (uneven) {
    for (int s = 0; s < p; ++s) {
      const double scale = 1.0 + 0.15 * ((s * 7) % 5);  // 1.0 .. 1.6, not monotone
      t.t_f_s[s] *= scale;
      t.t_b_s[s] *= scale;
      t.t_w_s[s] *= 2.0 - scale / 1.6;
    }
    t.t_f_s[p - 1] *= 1.3;  // the loss on the last stage
  }
  return t;
}

double engine_step_s(const Schedule& s, const StageTimes& t) {
  PlanSimOptions o;
  o.record_trace = false;
  return simulate_stage_times(s, t, o).result.step_time_s;
}

SynthesisOptions synth_test_options(int p, int k) {
  SynthesisOptions o;
  o.max_stashed.assign(p, k);
  o.time_budget_s = 60;      // never the binding bound in these tests
  o.max_evaluations = 4000;  // the same result on every machine
  return o;
}

TEST(SynthesizeReplay, EqualsTheEngineOnBuiltInSchedulesWithUnevenTimesAndSlowLinks) {
  for (const char* name : {"gpipe", "1f1b", "eager-1f1b", "zb-h1", "zb-h2"}) {
    for (double comm : {0.0, 0.3, 2.5}) {  // 2.5 > T_F: transfers queue on a link
      const Schedule s = generate_schedule(name, {.num_actors = 4, .num_microbatches = 8});
      const StageTimes t = synth_test_times(4, 1.0, 1.2, 0.7, comm, true);
      EXPECT_NEAR(replay_makespan_s(s, t), engine_step_s(s, t), 1e-12) << name << " comm " << comm;
    }
  }
}

TEST(SynthesizeReplay, ReportsADeadlockAsInfinity) {
  Schedule s = generate_schedule("1f1b", {.num_actors = 2, .num_microbatches = 2});
  // Actor 0 waits for I0 of stage 0 before sending F0: B0@s0 first.
  std::swap(s.actors[0][0], s.actors[0][2]);
  EXPECT_EQ(replay_makespan_s(s, uniform_stage_times(2, 1, 1, 1, 0)),
            std::numeric_limits<double>::infinity());
}

TEST(Synthesize, ResultIsValidWithinBudgetAndItsStepIsTheEngines) {
  const StageTimes t = synth_test_times(4, 1.0, 1.0, 1.0, 0.1, true);
  const SynthesisResult r = synthesize_schedule(4, 12, t, synth_test_options(4, 5));
  EXPECT_TRUE(validate_schedule(r.schedule).ok());
  EXPECT_EQ(r.schedule.name, "synthesized");
  ASSERT_EQ(r.peak_stashed.size(), 4u);
  for (int k : r.peak_stashed) EXPECT_LE(k, 5);
  for (int k : peak_in_flight(r.schedule)) EXPECT_LE(k, 5);
  EXPECT_NEAR(r.step_time_s, engine_step_s(r.schedule, t), 1e-15);
  EXPECT_GT(r.evaluations, 0);
}

TEST(Synthesize, NeverSlowerThanTheBestBuiltInScheduleThatFitsTheBudgetOverAGrid) {
  struct Ratio {
    double f, b, w, comm;
    bool uneven;
  };
  const Ratio ratios[] = {
      {1, 1, 1, 0, false}, {1, 2, 1, 0.1, false}, {1, 1, 0.5, 0.05, true}, {1, 1.5, 2, 0.3, true}};
  int compared = 0;
  for (int p : {2, 4, 6}) {
    for (int m : {p, 2 * p, 3 * p}) {
      for (const Ratio& q : ratios) {
        const StageTimes t = synth_test_times(p, q.f, q.b, q.w, q.comm, q.uneven);
        for (int k : {1, p / 2 + 1, p, 2 * p}) {
          const SynthesisResult r = synthesize_schedule(p, m, t, synth_test_options(p, k));
          double best_named = std::numeric_limits<double>::infinity();
          for (const char* name : {"gpipe", "1f1b", "eager-1f1b", "zb-h1", "zb-h2"}) {
            Schedule s;
            try {
              s = generate_schedule(name, {.num_actors = p, .num_microbatches = m});
            } catch (const InputError&) {
              continue;
            }
            const std::vector<int> peak = peak_in_flight(s);
            if (*std::max_element(peak.begin(), peak.end()) > k) continue;
            best_named = std::min(best_named, engine_step_s(s, t));
            ++compared;
          }
          EXPECT_LE(r.step_time_s, best_named * (1 + 1e-12))
              << "p " << p << " m " << m << " K " << k << " ratio " << q.f << "/" << q.b << "/"
              << q.w << "/" << q.comm;
          EXPECT_TRUE(validate_schedule(r.schedule).ok());
          for (int peak : r.peak_stashed) EXPECT_LE(peak, k);
        }
      }
    }
  }
  EXPECT_GT(compared, 100);  // the grid did compare against built-in schedules
}

TEST(Synthesize, SameInputGivesTheSameSchedule) {
  const StageTimes t = synth_test_times(6, 1.0, 1.3, 0.8, 0.1, true);
  const SynthesisResult a = synthesize_schedule(6, 18, t, synth_test_options(6, 8));
  const SynthesisResult b = synthesize_schedule(6, 18, t, synth_test_options(6, 8));
  EXPECT_EQ(a.schedule, b.schedule);
  EXPECT_EQ(a.step_time_s, b.step_time_s);
  EXPECT_EQ(a.evaluations, b.evaluations);
}

TEST(Synthesize, TwiceTheStagesAsBudgetBeatsZbH1AndApproachesZeroBubble) {
  const int p = 8, m = 24;
  const StageTimes t = uniform_stage_times(p, 1e-3, 1e-3, 1e-3, 0);
  const Schedule zb = generate_schedule("zb-h1", {.num_actors = p, .num_microbatches = m});
  PlanSimOptions o;
  o.record_trace = false;
  const double zb_bubble = simulate_stage_times(zb, t, o).result.bubble_rate;
  const SynthesisResult r = synthesize_schedule(p, m, t, synth_test_options(p, 2 * p));
  EXPECT_LT(r.bubble_rate, zb_bubble - 0.01) << "ZB-H1 " << zb_bubble;
  EXPECT_LT(r.bubble_rate, 0.02);  // ZB-2p is near zero bubble with m = 3p
  const SynthesisResult k1 = synthesize_schedule(p, m, t, synth_test_options(p, p));
  EXPECT_LE(k1.bubble_rate, zb_bubble + 1e-12);
}

TEST(Synthesize, BudgetBelowOneStashedMicrobatchNamesTheMinimum) {
  SynthesisOptions o = synth_test_options(4, 4);
  o.max_stashed[2] = 0;
  try {
    synthesize_schedule(4, 8, uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 0), o);
    FAIL() << "a budget of 0 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("actor 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("minimum of 1"), std::string::npos) << e.what();
  }
}

TEST(Synthesize, StageTimesForAnotherStageCountAreRefused) {
  EXPECT_THROW(synthesize_schedule(4, 8, uniform_stage_times(3, 1e-3, 1e-3, 1e-3, 0),
                                   synth_test_options(4, 4)),
               InputError);
}

TEST(Synthesize, EvaluationBudgetStopsTheSearch) {
  SynthesisOptions o = synth_test_options(8, 16);
  o.max_evaluations = 10;
  const SynthesisResult r =
      synthesize_schedule(8, 24, uniform_stage_times(8, 1e-3, 2e-3, 1e-3, 0), o);
  EXPECT_EQ(r.stopped_by, "evaluation-budget");
  EXPECT_EQ(r.evaluations, 10);
  EXPECT_TRUE(validate_schedule(r.schedule).ok());
}

}  // namespace
}  // namespace jaxpp
