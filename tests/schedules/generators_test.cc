// Built-in generators: SCHEDULES.md's example orders token for token, the closed forms under
// unit costs, constraint errors, and the registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "graph/error.h"
#include "schedules/registry.h"
#include "schedules/timeline.h"
#include "schedules/validate.h"

namespace jaxpp {
namespace {

std::string strip_stars(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '*'), s.end());
  return s;
}

TEST(SchedulesExamples, Std1F1BFourActorsEightMicrobatchesMatchesJaxPP) {
  const Schedule s = generate_schedule("Std1F1B", {.num_actors = 4, .num_microbatches = 8});
  EXPECT_EQ(to_text(s),
            "actor0: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7\n"
            "actor1: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7\n"
            "actor2: F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7\n"
            "actor3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7\n");
}

TEST(SchedulesExamples, ZeroBubbleFourActorsEightMicrobatchesMatchesJaxPP) {
  const Schedule s = generate_schedule("ZeroBubble", {.num_actors = 4, .num_microbatches = 8});
  const std::string expected = strip_stars(
      "actor0: F0 F1 F2 F3 B0* F4 B1* F5 B2* F6 B3* F7 B4* B5* B6* B7*\n"
      "actor1: F0 F1 F2 I0 F3 I1 W0 F4 I2 W1 F5 I3 W2 F6 I4 W3 F7 I5 W4 I6 W5 I7 W6 W7\n"
      "actor2: F0 F1 I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 F6 I5 W3 F7 I6 W4 I7 W5 W6 W7\n"
      "actor3: F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 W3 F7 I7 W4 W5 W6 W7\n");
  EXPECT_EQ(to_text(s), expected);
  EXPECT_EQ(s.split_backward, (std::vector<bool>{false, true, true, true}));
}

TEST(SchedulesExamples, Interleaved1F1BFourStagesTwoActorsMatchesJaxPP) {
  const Schedule s = generate_schedule("Interleaved1F1B",
                                       {.num_actors = 2, .num_stages = 4, .num_microbatches = 4});
  EXPECT_EQ(to_text(s),
            "actor0: F0@s0 F1@s0 F0@s2 F1@s2 F2@s0 B0@s2 F3@s0 B1@s2 F2@s2 B0@s0 F3@s2 B1@s0 "
            "B2@s2 B3@s2 B2@s0 B3@s0\n"
            "actor1: F0@s1 F1@s1 [F0@s3+B0@s3] [F1@s3+B1@s3] F2@s1 B0@s1 F3@s1 B1@s1 "
            "[F2@s3+B2@s3] [F3@s3+B3@s3] B2@s1 B3@s1\n");
  EXPECT_EQ(s.placement.stage_to_actor, (std::vector<int>{0, 1, 0, 1}));
}

TEST(SchedulesExamples, FuseSteadyStateFusesEverySteadyPair) {
  const Schedule s = generate_schedule(
      "interleaved",
      {.num_actors = 2, .num_stages = 4, .num_microbatches = 4, .fuse_steady_state = true});
  EXPECT_EQ(actor_to_text(s, 0),
            "F0@s0 F1@s0 F0@s2 F1@s2 [F2@s0+B0@s2] [F3@s0+B1@s2] [F2@s2+B0@s0] [F3@s2+B1@s0] "
            "B2@s2 B3@s2 B2@s0 B3@s0");
  EXPECT_TRUE(validate_schedule(s).ok());
}

TEST(SchedulesExamples, InterleavedWithOneStagePerActorIsEager1F1BFlattened) {
  for (int p : {2, 3, 4}) {
    for (int m : {p, 2 * p, 3 * p}) {
      const Schedule a = generate_schedule("interleaved", {.num_actors = p, .num_microbatches = m});
      const Schedule b = generate_schedule("eager1f1b", {.num_actors = p, .num_microbatches = m});
      for (int r = 0; r < p; ++r) {
        std::vector<TaskRef> flat_a, flat_b;
        for (const auto& item : a.actors[r]) flat_a.insert(flat_a.end(), item.begin(), item.end());
        for (const auto& item : b.actors[r]) flat_b.insert(flat_b.end(), item.begin(), item.end());
        EXPECT_EQ(flat_a, flat_b) << "p=" << p << " m=" << m << " actor " << r;
      }
    }
  }
}

TEST(SchedulesExamples, KimiK2RunsOneMoreWarmupForwardThanInterleaved) {
  const ScheduleParams params{.num_actors = 4, .num_stages = 8, .num_microbatches = 8};
  const Schedule kimi = generate_schedule("kimik2", params);
  const Schedule inter = generate_schedule("interleaved", params);
  auto leading_forwards = [](const Schedule& s, int r) {
    int n = 0;
    for (const auto& item : s.actors[r]) {
      if (item.size() != 1 || item[0].kind != TaskKind::kF) break;
      ++n;
    }
    return n;
  };
  for (int r = 0; r < 3; ++r) {  // the last actor fuses its steady F with B
    EXPECT_EQ(leading_forwards(kimi, r), leading_forwards(inter, r) + 1) << "actor " << r;
  }
  EXPECT_TRUE(validate_schedule(kimi).ok());
}

TEST(SchedulesExamples, DualPipeVUsesVPlacementAndEveryTaskOnce) {
  const Schedule s = generate_schedule("dualpipev", {.num_actors = 4, .num_microbatches = 10});
  EXPECT_EQ(s.placement.stage_to_actor, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  const ValidationReport report = validate_schedule(s);
  EXPECT_TRUE(report.ok()) << (report.errors.empty() ? "" : report.errors[0]);
  // Step 1 of the rule: actor 0 starts with 2(p-1) forwards of its first stage, then F(a), F(b).
  EXPECT_EQ(actor_to_text(s, 0).substr(0, 47), "F0@s0 F1@s0 F2@s0 F3@s0 F4@s0 F5@s0 F6@s0 F0@s7");
}

TEST(SchedulesExamples, LoopedBfsRunsEachLocalStageBreadthFirst) {
  const Schedule s =
      generate_schedule("looped-bfs", {.num_actors = 2, .num_stages = 4, .num_microbatches = 2});
  EXPECT_EQ(actor_to_text(s, 1), "F0@s1 F1@s1 F0@s3 F1@s3 B1@s3 B0@s3 B1@s1 B0@s1");
}

TEST(SchedulesExamples, MegatronGroupsMicrobatchesByGroupSize) {
  const Schedule s = generate_schedule(
      "megatron", {.num_actors = 2, .num_stages = 4, .num_microbatches = 4, .group_size = 2});
  // warm-up on actor 0: 2(p-1) + (v-1)g = 4 forwards: mb 0,1 of chunk 0, then mb 0,1 of chunk 1.
  EXPECT_EQ(actor_to_text(s, 0).substr(0, 23), "F0@s0 F1@s0 F0@s2 F1@s2");
  EXPECT_TRUE(validate_schedule(s).ok());
}

// --- closed forms under unit costs (F=1, B=2, I=W=1) ---

TEST(SchedulesClosedForms, SchedulesMdMakespans) {
  for (const char* name : {"Std1F1B", "Eager1F1B", "GPipe"}) {
    const Schedule s = generate_schedule(name, {.num_actors = 4, .num_microbatches = 8});
    EXPECT_EQ(unit_cost_timeline(s).makespan, 33) << name;
  }
  const Schedule zb = generate_schedule("ZeroBubble", {.num_actors = 4, .num_microbatches = 8});
  EXPECT_EQ(unit_cost_timeline(zb).makespan, 27);
}

TEST(SchedulesClosedForms, BubbleFormulasOverAGridOfPAndM) {
  for (int p = 2; p <= 6; ++p) {
    for (int m = p; m <= 3 * p + 1; ++m) {
      const ScheduleParams params{.num_actors = p, .num_microbatches = m};
      // GPipe and 1F1B: m(F+B) + (p-1)(F+B).
      EXPECT_EQ(unit_cost_timeline(make_gpipe(params)).makespan, 3 * m + 3 * (p - 1))
          << "GPipe p=" << p << " m=" << m;
      EXPECT_EQ(unit_cost_timeline(make_std_1f1b(params)).makespan, 3 * m + 3 * (p - 1))
          << "Std1F1B p=" << p << " m=" << m;
      // ZB-H1: m(F+I+W) + (p-1)(F+I-W).
      EXPECT_EQ(unit_cost_timeline(make_zero_bubble(params)).makespan, 3 * m + (p - 1))
          << "ZeroBubble p=" << p << " m=" << m;
    }
  }
}

// Bubble as in the Zero Bubble paper: idle time inside the span (first start to last end) of
// the actor with the longest span.
int64_t span_bubble(const Schedule& s, const UnitCosts& costs) {
  const Timeline t = unit_cost_timeline(s, costs);
  int64_t worst_span = -1, bubble = 0;
  for (int r = 0; r < s.num_actors(); ++r) {
    const int64_t span = t.end[r].back() - t.start[r].front();
    if (span > worst_span) {
      worst_span = span;
      bubble = span - t.busy[r];
    }
  }
  return bubble;
}

TEST(SchedulesClosedForms, ZeroBubblePaperBubblesUnderTwoCostSets) {
  // T_B here is the input-gradient backward I; a full backward costs I + W.
  for (const UnitCosts c :
       {UnitCosts{.f = 1, .b = 2, .i = 1, .w = 1}, UnitCosts{.f = 2, .b = 3, .i = 2, .w = 1}}) {
    for (int p = 2; p <= 6; ++p) {
      for (int m = 2 * p; m <= 4 * p; m += p) {
        const ScheduleParams params{.num_actors = p, .num_microbatches = m};
        const std::string at = " p=" + std::to_string(p) + " m=" + std::to_string(m) +
                               " F=" + std::to_string(c.f) + " I=" + std::to_string(c.i) +
                               " W=" + std::to_string(c.w);
        EXPECT_EQ(span_bubble(make_std_1f1b(params), c), (p - 1) * (c.f + c.i + c.w))
            << "1F1B" << at;
        EXPECT_EQ(span_bubble(make_gpipe(params), c), (p - 1) * (c.f + c.i + c.w)) << "GPipe" << at;
        EXPECT_EQ(span_bubble(make_zero_bubble(params), c), (p - 1) * (c.f + c.i - c.w))
            << "ZB-H1" << at;
        EXPECT_EQ(span_bubble(make_zb_h2(params), c), (p - 1) * (c.f + c.i - 2 * c.w))
            << "ZB-H2" << at;
      }
    }
  }
}

TEST(SchedulesClosedForms, InterleavedBubbleShrinksByV) {
  // (p-1)(T_F+T_B)/v with T per actor's whole layer set (v stages): 3(p-1) in unit costs, so the
  // makespan is v·m·(F+B) + 3(p-1).
  for (int p = 2; p <= 4; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m : {2 * p, 4 * p}) {
        const ScheduleParams params{.num_actors = p, .num_stages = v * p, .num_microbatches = m};
        EXPECT_EQ(unit_cost_timeline(make_interleaved_1f1b(params)).makespan,
                  3 * v * m + 3 * (p - 1))
            << "Interleaved1F1B p=" << p << " v=" << v << " m=" << m;
        EXPECT_EQ(unit_cost_timeline(make_megatron_interleaved(params)).makespan,
                  3 * v * m + 3 * (p - 1))
            << "MegatronInterleaved p=" << p << " v=" << v << " m=" << m;
      }
    }
  }
}

TEST(SchedulesClosedForms, PeakInFlightOverAGridOfPAndM) {
  for (int p = 1; p <= 6; ++p) {
    for (int m = p; m <= 3 * p; ++m) {
      const ScheduleParams params{.num_actors = p, .num_microbatches = m};
      EXPECT_EQ(peak_in_flight(make_std_1f1b(params))[0], p) << "1F1B p=" << p << " m=" << m;
      EXPECT_EQ(peak_in_flight(make_gpipe(params))[0], m) << "GPipe p=" << p << " m=" << m;
      if (m >= 2 * p - 1) {
        EXPECT_EQ(peak_in_flight(make_zb_h2(params))[0], 2 * p - 1) << "ZB-H2 p=" << p;
      }
      if (p >= 2) {
        EXPECT_EQ(peak_in_flight(make_zero_bubble(params))[0], p) << "ZB-H1 p=" << p;
      }
    }
  }
}

TEST(SchedulesClosedForms, MegatronInterleavedPeakIsVpPlusPMinusOneStageUnits) {
  // p + (p-1)/v in units of an actor's whole layer set = v·p + p - 1 stage-microbatches.
  for (int p = 2; p <= 4; ++p) {
    for (int v = 2; v <= 3; ++v) {
      const Schedule s = make_megatron_interleaved(
          {.num_actors = p, .num_stages = v * p, .num_microbatches = 4 * p});
      EXPECT_EQ(peak_in_flight(s)[0], v * p + p - 1) << "p=" << p << " v=" << v;
    }
  }
}

// --- constraints and registry ---

TEST(SchedulesConstraints, ZeroBubbleRejectsFewerMicrobatchesThanStages) {
  try {
    generate_schedule("zb-h1", {.num_actors = 4, .num_microbatches = 2});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "ZeroBubble needs m >= S (got m=2, S=4)");
  }
}

TEST(SchedulesConstraints, DualPipeVRejectsFewerThanTwoPMicrobatches) {
  try {
    generate_schedule("dualpipev", {.num_actors = 4, .num_microbatches = 7});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "DualPipeV needs m >= 2p (got m=7, p=4)");
  }
}

TEST(SchedulesConstraints, LinearSchedulesRejectOtherStageCounts) {
  EXPECT_THROW(generate_schedule("1f1b", {.num_actors = 4, .num_stages = 8, .num_microbatches = 8}),
               InputError);
  EXPECT_THROW(
      generate_schedule("interleaved", {.num_actors = 4, .num_stages = 6, .num_microbatches = 8}),
      InputError);
  EXPECT_THROW(generate_schedule("zb-v", {.num_actors = 4, .num_stages = 4, .num_microbatches = 8}),
               InputError);
}

TEST(SchedulesConstraints, InterleavedRejectsMicrobatchesNotDivisibleByRounds) {
  try {
    generate_schedule("interleaved", {.num_actors = 4, .num_stages = 8, .num_microbatches = 9});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("(got m=9, p=4, R=2)"), std::string::npos) << e.what();
  }
}

TEST(SchedulesConstraints, MegatronRejectsGroupSizeOutsidePToM) {
  EXPECT_THROW(
      generate_schedule("megatron",
                        {.num_actors = 4, .num_stages = 8, .num_microbatches = 8, .group_size = 3}),
      InputError);
  EXPECT_THROW(
      generate_schedule("megatron",
                        {.num_actors = 4, .num_stages = 8, .num_microbatches = 8, .group_size = 9}),
      InputError);
}

TEST(SchedulesRegistry, NamesAreCaseInsensitiveWithAliases) {
  EXPECT_EQ(find_schedule("1F1B")->name, "Std1F1B");
  EXPECT_EQ(find_schedule("std1f1b")->name, "Std1F1B");
  EXPECT_EQ(find_schedule("ZB-H1")->name, "ZeroBubble");
  EXPECT_EQ(find_schedule("zb1")->name, "ZeroBubble");
  EXPECT_EQ(find_schedule("zerobubble")->name, "ZeroBubble");
  EXPECT_EQ(find_schedule("Interleaved")->name, "Interleaved1F1B");
  EXPECT_EQ(find_schedule("DUALPIPEV")->name, "DualPipeV");
  EXPECT_EQ(find_schedule("zb_h2")->name, "ZB-H2");
  EXPECT_EQ(find_schedule("nonsense"), nullptr);
}

TEST(SchedulesRegistry, UnknownNameListsValidNames) {
  try {
    schedule_or_throw("fancy");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unknown schedule 'fancy'"), std::string::npos);
    for (const ScheduleInfo& info : all_schedules()) {
      EXPECT_NE(msg.find(info.name), std::string::npos) << info.name;
    }
  }
}

TEST(SchedulesRegistry, EveryAliasIsUniqueAcrossSchedules) {
  std::set<std::string> keys;
  for (const ScheduleInfo& info : all_schedules()) {
    EXPECT_TRUE(keys.insert(normalize_schedule_name(info.name)).second) << info.name;
    for (const std::string& a : info.aliases) {
      const std::string key = normalize_schedule_name(a);
      if (key == normalize_schedule_name(info.name)) continue;
      EXPECT_TRUE(keys.insert(key).second) << a;
    }
  }
}

}  // namespace
}  // namespace jaxpp
