// Validator: each rule gives one precise error; deadlocks list every actor.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "graph/error.h"
#include "schedules/custom.h"
#include "schedules/registry.h"
#include "schedules/replay.h"
#include "schedules/timeline.h"
#include "schedules/validate.h"

namespace jaxpp {
namespace {

std::string schedule_data(const std::string& name) {
  return std::string(JAXPP_TEST_DATA_DIR) + "/schedules/" + name;
}

Schedule two_actor(const std::string& actors_json) {
  return parse_schedule_json(R"({"actors": )" + actors_json + "}", "t.json");
}

TEST(ValidateSchedule, BuiltinIsValid) {
  const ValidationReport r =
      validate_schedule(generate_schedule("1f1b", {.num_actors = 4, .num_microbatches = 8}));
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.peak_in_flight, (std::vector<int>{4, 3, 2, 1}));
}

TEST(ValidateSchedule, DeadlockListsTheBlockedTaskOnEveryActor) {
  const ValidationReport r = validate_schedule(load_schedule_file(schedule_data("deadlock.json")));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0],
            "deadlock: no actor can make progress; actor 0: position 1 B0@s0 waits for B0@s1 "
            "(actor 1, position 3); actor 1: position 0 F1@s1 waits for F1@s0 (actor 0, "
            "position 2)");
}

TEST(ValidateSchedule, MissingTaskIsNamed) {
  const ValidationReport r = validate_schedule(load_schedule_file(schedule_data("missing_task.json")));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "actor 1: task B1@s1 is missing (every stage-microbatch needs F and B)");
}

TEST(ValidateSchedule, DuplicatedTaskNamesBothPositions) {
  const ValidationReport r = validate_schedule(load_schedule_file(schedule_data("duplicate_task.json")));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "actor 1, position 4: B1@s1 is duplicated (first at actor 1, position 3)");
}

TEST(ValidateSchedule, TaskOnTheWrongActorIsRejected) {
  Schedule s = generate_schedule("1f1b", {.num_actors = 2, .num_microbatches = 2});
  std::swap(s.actors[0][0], s.actors[1][0]);  // F0@s1 now on actor 0
  const ValidationReport r = validate_schedule(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors[0], "actor 0, position 0: F0@s1 runs stage 1, which is placed on actor 1");
}

TEST(ValidateSchedule, WeightGradientBeforeItsInputGradientIsRejected) {
  const Schedule s = two_actor(R"([["F0@s0", "B0@s0"], ["F0@s1", "W0@s1", "I0@s1"]])");
  const ValidationReport r = validate_schedule(s);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "actor 1, position 1: W0@s1 runs before its I0@s1 (position 2)");
}

TEST(ValidateSchedule, BackwardBeforeItsForwardIsRejected) {
  const Schedule s = two_actor(R"([["B0@s0", "F0@s0"], ["F0@s1", "B0@s1"]])");
  const ValidationReport r = validate_schedule(s);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "actor 0, position 0: B0@s0 runs before its F0@s0 (position 1)");
}

TEST(ValidateSchedule, MixingFullAndSplitBackwardOnAStageIsRejected) {
  const Schedule s = two_actor(R"([["F0@s0", "B0@s0"], ["F0@s1", "B0@s1", "W0@s1"]])");
  const ValidationReport r = validate_schedule(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors[0],
            "actor 1, position 1: B0@s1 is a full backward but stage 1 uses split I/W backwards");
}

TEST(ValidateSchedule, FusedGroupMembersMayDependOnEachOther) {
  const Schedule s = two_actor(R"([["F0@s0", "B0@s0"], ["F0@s1+B0@s1"]])");
  EXPECT_TRUE(validate_schedule(s).ok());
}

TEST(ValidateSchedule, ValidateOrThrowCarriesTheFirstError) {
  const Schedule s = load_schedule_file(schedule_data("deadlock.json"));
  try {
    validate_or_throw(s, "deadlock.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("deadlock.json: invalid schedule: deadlock", 0), 0u)
        << e.what();
  }
}

TEST(ValidateSchedule, TimelineOfADeadlockThrows) {
  EXPECT_THROW(unit_cost_timeline(load_schedule_file(schedule_data("deadlock.json"))), InputError);
}

TEST(ValidateSchedule, TimelineTextHasOneRowPerActorAndTheMakespan) {
  const Schedule s = generate_schedule("1f1b", {.num_actors = 2, .num_microbatches = 2});
  const Timeline t = unit_cost_timeline(s);
  EXPECT_EQ(t.makespan, 9);
  EXPECT_EQ(timeline_to_text(s, t),
            "actor0 |FF..BB.BB|\n"
            "actor1 |.FBBFBB..|\n"
            "makespan 9 (unit costs F=1 B=2 I=1 W=1), idle 6 of 18 actor-units\n");
}

TEST(ReplaySchedule, IssueOrderIsByStartThenActorThenItemWhateverTheCostScale) {
  // Unit costs give a short time range (the order is then sorted by counting), costs scaled by
  // 10^9 a long one (merged actor by actor): both orders list every item once, by (start,
  // actor, item), and scaling all costs keeps the order.
  for (const char* name : {"ZeroBubble", "Interleaved1F1B", "1f1b"}) {
    const Schedule s = generate_schedule(
        name, {.num_actors = 4, .num_stages = std::string(name) == "Interleaved1F1B" ? 8 : 0,
               .num_microbatches = 8});
    const UnitCosts unit;
    const ReplayResult short_range = replay_schedule(s, unit);
    const ReplayResult long_range = replay_schedule(
        s, [&unit](const ScheduleItem& item) { return unit.of(item) * 1000000000; });
    ASSERT_TRUE(short_range.completed);
    ASSERT_TRUE(long_range.completed);
    EXPECT_EQ(long_range.makespan, short_range.makespan * 1000000000) << name;
    size_t items = 0;
    for (const auto& list : s.actors) items += list.size();
    ASSERT_EQ(short_range.order.size(), items) << name;
    ASSERT_EQ(long_range.order.size(), items) << name;
    for (size_t k = 0; k < short_range.order.size(); ++k) {
      EXPECT_EQ(short_range.order[k].actor, long_range.order[k].actor) << name << " " << k;
      EXPECT_EQ(short_range.order[k].item, long_range.order[k].item) << name << " " << k;
      if (k == 0) continue;
      const ItemPosition& a = short_range.order[k - 1];
      const ItemPosition& b = short_range.order[k];
      const auto key = [&](const ItemPosition& p) {
        return std::tuple(short_range.start[p.actor][p.item], p.actor, p.item);
      };
      EXPECT_LT(key(a), key(b)) << name << " " << k;
    }
  }
}

}  // namespace
}  // namespace jaxpp
