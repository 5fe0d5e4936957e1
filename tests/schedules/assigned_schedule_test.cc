// schedules/assigned.h: which schedules run on an assignment's placement, and in which order.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "graph/assignment.h"
#include "schedules/assigned.h"
#include "schedules/registry.h"
#include "schedules/rule_scheduler.h"
#include "schedules/shardy.h"
#include "schedules/validate.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

Placement loop_placement(int stages, int actors) {
  return make_placement(PlacementKind::kLoop, stages, actors);
}

TEST(AssignedSchedule, LoopScheduleOnTheLoopPlacementIsItsOwnOrder) {
  for (const char* name : {"Interleaved1F1B", "Circular", "KimiK2", "InterleavedGPipe",
                           "CircularWithReversedBackward", "LoopedBFS"}) {
    const Schedule own =
        generate_schedule(name, {.num_actors = 4, .num_stages = 8, .num_microbatches = 8});
    const Schedule on = schedule_on_placement(name, loop_placement(8, 4), 8, false, "a.json");
    EXPECT_EQ(on, own) << name;
  }
}

TEST(AssignedSchedule, LinearScheduleOnTheLinearPlacementIsItsOwnOrder) {
  const Placement linear = make_placement(PlacementKind::kLinear, 4, 4);
  for (const char* name : {"GPipe", "Std1F1B", "Eager1F1B", "ZeroBubble", "ZB-H2"}) {
    EXPECT_EQ(schedule_on_placement(name, linear, 8, false, "a.json"),
              generate_schedule(name, {.num_actors = 4, .num_microbatches = 8}))
        << name;
  }
}

TEST(AssignedSchedule, VScheduleOnTheVPlacementIsItsOwnOrder) {
  const Placement v = make_placement(PlacementKind::kV, 8, 4);
  for (const char* name : {"DualPipeV", "ZB-V"}) {
    EXPECT_EQ(schedule_on_placement(name, v, 8, false, "a.json"),
              generate_schedule(name, {.num_actors = 4, .num_microbatches = 8}))
        << name;
  }
}

TEST(AssignedSchedule, PlacementFreeSchedulesAreShardysRuleSchedules) {
  EXPECT_EQ(placement_free_schedules(),
            (std::vector<std::string>{"GPipe", "Std1F1B", "Circular",
                                      "CircularWithReversedBackward", "GPipeBut1F1BForLastMesh",
                                      "ZeroBubbleH1", "ZeroBubbleH2ZeroTxLatency",
                                      "ZeroBubbleH2HalfTxLatency", "ZeroBubbleH2FullTxLatency"}));
  EXPECT_TRUE(is_placement_free_schedule("1f1b"));
  EXPECT_TRUE(is_placement_free_schedule("gpipe"));
  EXPECT_FALSE(is_placement_free_schedule("interleaved"));
  EXPECT_FALSE(is_placement_free_schedule("zb-h1"));  // JaxPP's ZeroBubble: its own generator
}

TEST(AssignedSchedule, OneFOneBOnAnExplicitPlacementFollowsShardysRule) {
  const Placement p = explicit_placement({0, 1, 0}, 2);
  const Schedule s = schedule_on_placement("1f1b", p, 4, false, "a.json");
  EXPECT_EQ(s.name, "Std1F1B");
  EXPECT_EQ(s.placement, p);
  EXPECT_TRUE(validate_schedule(s).ok());
  const RuleProgram program = shardy_program_on(ShardySchedule::k1F1B, p, {.num_microbatches = 4});
  EXPECT_EQ(s.actors,
            schedule_from_orders("Std1F1B", program,
                                 schedule_by_rules(program, shardy_rule(ShardySchedule::k1F1B)))
                .actors);
  // Actor 1 (r = 1 of n = 2) holds stage 1 only: Shardy's 1F1B there is F0 B0 F1 B1 ...
  EXPECT_EQ(actor_to_text(s, 1), "F0@s1 B0@s1 F1@s1 B1@s1 F2@s1 B2@s1 F3@s1 B3@s1");
}

TEST(AssignedSchedule, GPipeOnAnExplicitPlacementRunsEveryForwardFirst) {
  const Placement p = explicit_placement({0, 1, 0}, 2);
  const Schedule s = schedule_on_placement("GPipe", p, 2, false, "a.json");
  EXPECT_EQ(actor_to_text(s, 0), "F0@s0 F0@s2 F1@s0 F1@s2 B0@s2 B0@s0 B1@s2 B1@s0");
  EXPECT_EQ(actor_to_text(s, 1), "F0@s1 F1@s1 B0@s1 B1@s1");
}

TEST(AssignedSchedule, ZeroBubbleH1SplitsWhereAGradientIsSent) {
  const Placement p = explicit_placement({0, 1, 0}, 2);
  const Schedule s = schedule_on_placement("ZeroBubbleH1", p, 4, false, "a.json");
  EXPECT_EQ(s.split_backward, (std::vector<bool>{false, true, true}));
  EXPECT_TRUE(validate_schedule(s).ok());
}

// Every stage -> actor list of `stages` stages over `actors` actors using every actor.
std::vector<std::vector<int>> every_placement(int stages, int actors) {
  std::vector<std::vector<int>> out;
  std::vector<int> map(stages, 0);
  for (;;) {
    std::vector<bool> used(actors, false);
    for (int a : map) used[a] = true;
    if (std::find(used.begin(), used.end(), false) == used.end()) out.push_back(map);
    int k = 0;
    while (k < stages && ++map[k] == actors) map[k++] = 0;
    if (k == stages) return out;
  }
}

TEST(AssignedSchedule, PlacementFreeSchedulesRunWithoutDeadlockOnEveryPlacement) {
  int checked = 0;
  for (const auto& [stages, actors] : {std::pair{5, 2}, std::pair{4, 3}}) {
    for (const std::vector<int>& map : every_placement(stages, actors)) {
      const Placement p = explicit_placement(map, actors);
      for (const std::string& name : placement_free_schedules()) {
        for (int m : {1, 3, 5}) {
          const Schedule s = schedule_on_placement(name, p, m, false, "a.json");
          const ValidationReport report = validate_schedule(s, 1);
          ASSERT_TRUE(report.ok()) << name << " m=" << m << " on " << ::testing::PrintToString(map)
                                   << ": " << report.errors.front();
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, (30 + 36) * 9 * 3);
}

TEST(AssignedSchedule, AScheduleThatDoesNotFitNamesTheAssignmentAndTheFittingSchedules) {
  const std::string e =
      error_of([] { schedule_on_placement("zb-h1", loop_placement(8, 4), 8, false, "a.json"); });
  EXPECT_EQ(e.rfind("a.json: schedule 'ZeroBubble' does not fit the assignment (8 stages on 4 "
                    "actors, loop placement): ZeroBubble places stage r on actor r: needs S = p "
                    "(got S=8, p=4)",
                    0),
            0u)
      << e;
  EXPECT_NE(e.find("; schedules that fit: Interleaved1F1B, KimiK2, InterleavedGPipe, LoopedBFS, "
                   "MegatronInterleaved, GPipe, Std1F1B, Circular,"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  const std::string v = error_of([] {
    schedule_on_placement("dualpipev", explicit_placement({0, 1, 0}, 2), 8, false, "a.json");
  });
  EXPECT_NE(v.find("'DualPipeV' does not fit the assignment (3 stages on 2 actors, explicit "
                   "placement)"),
            std::string::npos)
      << v;
}

TEST(AssignedSchedule, AGeneratorConstraintIsNamedWithTheAssignment) {
  // ZeroBubble on its own (linear) placement, but with m < S.
  const std::string e = error_of([] {
    schedule_on_placement("zb-h1", make_placement(PlacementKind::kLinear, 4, 4), 2, false,
                          "a.json");
  });
  EXPECT_EQ(e.rfind("a.json: schedule 'ZeroBubble' does not fit the assignment (4 stages on 4 "
                    "actors, linear placement): ZeroBubble needs m >= S",
                    0),
            0u)
      << e;
}

}  // namespace
}  // namespace jaxpp
