// Memory accounting of the simulator over small grids of p and m: the peak number of stashed
// microbatches per actor against closed forms (SCHEDULES.md's table and its per-actor
// generalisation, including m < p), against the schedule validator's order-based count, and
// peak bytes = static bytes + peak stash × bytes per stashed microbatch. The worst-actor cases
// at one m per p are in closed_forms_test.cc; these cover every actor and small m.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "costmodel/stage_times_cost.h"
#include "graph/error.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "simulator/engine.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

Schedule make(const std::string& name, int p, int m, int stages = 0) {
  ScheduleParams params;
  params.num_actors = p;
  params.num_stages = stages;
  params.num_microbatches = m;
  return generate_schedule(name, params);
}

// Uneven stage times, so that the peaks do not hinge on ties.
SimResult run(const Schedule& s) {
  PlanSimOptions o;
  return simulate_stage_times(s, uniform_stage_times(s.num_stages, 1.0, 1.3, 0.6, 0.1), o).result;
}

std::vector<int> actor_peaks(const SimResult& r) {
  std::vector<int> out;
  for (const ActorStats& a : r.actors) out.push_back(a.peak_stashed_microbatches);
  return out;
}

TEST(MemoryPeak, OneFOneBActorRHoldsTheSmallerOfPMinusRAndM) {
  for (int p : {2, 3, 4, 6}) {
    for (int m : {1, 2, 3, p, 2 * p + 1}) {
      const SimResult r = run(make("Std1F1B", p, m));
      for (int a = 0; a < p; ++a) {
        EXPECT_EQ(r.actors[a].peak_stashed_microbatches, std::min(p - a, m))
            << "p " << p << " m " << m << " actor " << a;
      }
      EXPECT_EQ(r.peak_stashed_per_stage[0], std::min(p, m)) << "p " << p << " m " << m;
    }
  }
}

TEST(MemoryPeak, GPipeEveryActorHoldsAllMicrobatches) {
  for (int p : {2, 3, 4}) {
    for (int m : {1, 2, 5, 8}) {
      const SimResult r = run(make("GPipe", p, m));
      EXPECT_EQ(actor_peaks(r), std::vector<int>(p, m)) << "p " << p << " m " << m;
    }
  }
}

TEST(MemoryPeak, ZeroBubbleH1ActorRHoldsPMinusR) {
  for (int p : {2, 3, 4, 6}) {
    for (int m : {p, p + 1, 2 * p, 3 * p}) {
      const SimResult r = run(make("ZeroBubble", p, m));
      for (int a = 0; a < p; ++a) {
        EXPECT_EQ(r.actors[a].peak_stashed_microbatches, p - a)
            << "p " << p << " m " << m << " actor " << a;
      }
    }
  }
}

TEST(MemoryPeak, ZeroBubbleH2ActorRHoldsTheSmallerOfTwoPMinusTwoRMinusOneAndM) {
  for (int p : {2, 3, 4, 6}) {
    for (int m : {1, 2, p, 2 * p - 1, 3 * p}) {
      const SimResult r = run(make("ZB-H2", p, m));
      for (int a = 0; a < p; ++a) {
        EXPECT_EQ(r.actors[a].peak_stashed_microbatches, std::min(2 * (p - a) - 1, m))
            << "p " << p << " m " << m << " actor " << a;
      }
      EXPECT_EQ(r.peak_stashed_per_stage[0], std::min(2 * p - 1, m));
    }
  }
}

TEST(MemoryPeak, MegatronInterleavedActorRHoldsItsWarmUpPlusOne) {
  // Warm-up of actor r: 2(p-1-r) + (v-1)p forwards (group size p), then the first steady F
  // before the first B frees: a peak of warm-up + 1 stage-microbatches, at most all m·v.
  for (int p : {2, 3, 4}) {
    for (int v : {2, 3}) {
      for (int m : {p, 2 * p, 3 * p}) {
        const SimResult r = run(make("MegatronInterleaved", p, m, p * v));
        for (int a = 0; a < p; ++a) {
          EXPECT_EQ(r.actors[a].peak_stashed_microbatches,
                    std::min(2 * (p - 1 - a) + (v - 1) * p + 1, m * v))
              << "p " << p << " v " << v << " m " << m << " actor " << a;
        }
      }
    }
  }
}

TEST(MemoryPeak, MegatronInterleavedMatchesSchedulesMdInWholeActorUnits) {
  // SCHEDULES.md: p + (p-1)/v microbatches of an actor's whole layer set = v·p + p - 1 stashed
  // (stage, microbatch) pairs of 1/v of those layers each.
  for (int p : {2, 4}) {
    for (int v : {2, 4}) {
      const SimResult r = run(make("MegatronInterleaved", p, 2 * p, p * v));
      EXPECT_DOUBLE_EQ(static_cast<double>(r.actors[0].peak_stashed_microbatches) / v,
                       p + static_cast<double>(p - 1) / v)
          << "p " << p << " v " << v;
    }
  }
}

TEST(MemoryPeak, TimedPeaksEqualTheValidatorsOrderBasedPeaksForEverySchedule) {
  // On one actor compute runs in order, an F adds at its start and a B or I frees at its end,
  // so the peak over time is the peak over the order (schedules/validate.h).
  int checked = 0;
  for (const ScheduleInfo& info : all_schedules()) {
    for (int p : {2, 3, 4}) {
      for (int m : {1, 2, 4, 8}) {
        for (int stages : {0, 2 * p}) {
          Schedule s;
          try {
            s = make(info.name, p, m, stages);
          } catch (const InputError&) {
            continue;  // a shape the schedule does not support
          }
          EXPECT_EQ(actor_peaks(run(s)), peak_in_flight(s))
              << info.name << " p " << p << " m " << m << " S " << s.num_stages;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

// A lowered 1F1B program with stash bytes 1000·(s+1) for stage s and static bytes 10^6·(r+1).
struct BytesCase {
  Program program;
  SimOptions options;
};

BytesCase bytes_case(const std::string& name, int p, int m) {
  BytesCase c;
  c.program = lower(make(name, p, m), {});
  for (int r = 0; r < p; ++r) c.options.static_bytes_per_actor.push_back(1000000 * (r + 1));
  for (int s = 0; s < p; ++s) c.options.stash_bytes_per_stage.push_back(1000 * (s + 1));
  return c;
}

TEST(MemoryPeak, PeakBytesAreStaticPlusPeakStashTimesStashBytes) {
  for (const char* name : {"Std1F1B", "GPipe", "ZB-H2"}) {
    for (int p : {2, 4}) {
      for (int m : {1, 3, 8}) {
        const BytesCase c = bytes_case(name, p, m);
        const SimResult r =
            simulate(c.program, StageTimesCost(uniform_stage_times(p, 1, 1, 0.5, 0)), c.options);
        for (int a = 0; a < p; ++a) {  // linear placement: actor a holds stage a only
          EXPECT_EQ(r.actors[a].static_bytes, 1000000 * (a + 1));
          EXPECT_EQ(
              r.actors[a].peak_memory_bytes,
              1000000 * (a + 1) + int64_t{1000} * (a + 1) * r.actors[a].peak_stashed_microbatches)
              << name << " p " << p << " m " << m << " actor " << a;
        }
      }
    }
  }
}

TEST(MemoryPeak, MemoryTraceStartsAndEndsAtTheStaticBytesAndPeaksAtThePeak) {
  const int p = 4, m = 6;
  const BytesCase c = bytes_case("Std1F1B", p, m);
  const SimResult r =
      simulate(c.program, StageTimesCost(uniform_stage_times(p, 1, 1, 0.5, 0.1)), c.options);
  std::map<int, std::vector<MemorySample>> by_actor;
  for (size_t i = 0; i < r.trace.memory.size(); ++i) {
    const MemorySample& s = r.trace.memory[i];
    by_actor[s.actor].push_back(s);
    if (i > 0) {  // sorted by (time, actor)
      const MemorySample& prev = r.trace.memory[i - 1];
      EXPECT_TRUE(prev.time_s < s.time_s || (prev.time_s == s.time_s && prev.actor <= s.actor));
    }
  }
  ASSERT_EQ(by_actor.size(), static_cast<size_t>(p));
  for (const auto& [a, samples] : by_actor) {
    EXPECT_EQ(samples.front().time_s, 0.0);
    EXPECT_EQ(samples.front().bytes, r.actors[a].static_bytes);
    EXPECT_EQ(samples.back().bytes, r.actors[a].static_bytes) << "actor " << a;
    int64_t max_bytes = 0;
    for (const MemorySample& s : samples) max_bytes = std::max(max_bytes, s.bytes);
    EXPECT_EQ(max_bytes, r.actors[a].peak_memory_bytes) << "actor " << a;
  }
}

TEST(MemoryPeak, SplitBackwardFreesTheStashWhenIEndsNotWhenWEnds) {
  // ZB-H2 splits the backward of every stage into I and W; W is made long so that the two differ.
  const int p = 3, m = 3;
  BytesCase c = bytes_case("ZB-H2", p, m);
  const SimResult r =
      simulate(c.program, StageTimesCost(uniform_stage_times(p, 1, 1, 5, 0)), c.options);
  int checked = 0;
  for (const TraceEvent& e : r.trace.events) {
    if (e.op != OpKind::kCompute || e.tasks.size() != 1 || e.tasks[0].kind != TaskKind::kI)
      continue;
    // The actor's memory drops by one stage's stash exactly when its I ends.
    int64_t before = -1, after = -1;
    for (const MemorySample& s : r.trace.memory) {
      if (s.actor != e.actor) continue;
      if (s.time_s < e.end_s) before = s.bytes;
      if (s.time_s == e.end_s && after < 0) after = s.bytes;
    }
    EXPECT_EQ(before - after, c.options.stash_bytes_per_stage[e.stage]) << e.name();
    ++checked;
  }
  EXPECT_EQ(checked, p * m);
}

}  // namespace
}  // namespace jaxpp
