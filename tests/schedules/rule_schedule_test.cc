// Rule-based custom schedules: Shardy-style "before" rules expanded into orders, and every way a
// rule file can be wrong.
#include "schedules/rule_schedule.h"

#include <gtest/gtest.h>

#include <string>

#include "graph/error.h"
#include "schedules/custom.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/shardy.h"
#include "schedules/validate.h"

namespace jaxpp {
namespace {

std::string rules_data(const std::string& name) {
  return std::string(JAXPP_TEST_DATA_DIR) + "/schedules/" + name;
}

// The error message of loading `text` as a schedule file ("" when it loads).
std::string rule_error(const std::string& text) {
  try {
    parse_schedule_json(text, "r.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(RuleSchedules, ShardysOneFOneBRulesInAFileGiveStd1F1B) {
  const Schedule s = load_schedule_file(rules_data("rules_1f1b.json"));
  EXPECT_EQ(s.name, "rules-1f1b");
  EXPECT_EQ(s.actors, make_std_1f1b({.num_actors = 4, .num_microbatches = 8}).actors);
  EXPECT_TRUE(validate_schedule(s).ok());
  EXPECT_NO_THROW(lower(s, {}));
}

TEST(RuleSchedules, ShardysZeroBubbleH1RulesInAFileGiveItsOrder) {
  const Schedule s = load_schedule_file(rules_data("rules_zero_bubble_h1.json"));
  const Schedule builtin =
      make_shardy_schedule(ShardySchedule::kZeroBubbleH1, {.num_actors = 4, .num_microbatches = 8});
  EXPECT_EQ(s.actors, builtin.actors);
  EXPECT_EQ(s.split_backward, (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(s.actors, make_zero_bubble({.num_actors = 4, .num_microbatches = 8}).actors);
}

// With "unordered": "program-order" a rule file is scheduled exactly as Shardy schedules its own
// rules: Shardy's five ZeroBubbleH1 clauses alone give the built-in ZeroBubbleH1.
TEST(RuleSchedules, ShardysClausesWithProgramOrderGiveShardysOwnOrderOverAGrid) {
  for (int p = 1; p <= 5; ++p) {
    for (int m = 1; m <= 8; ++m) {
      const std::string text =
          R"({"num_actors": )" + std::to_string(p) + R"(, "num_microbatches": )" +
          std::to_string(m) + R"(, "split_backward": "where-sent", "unordered": "program-order",
          "rules": [
            {"before": ["I", "B"], "after": "F", "offset": {"meshes": 1, "mesh": -1}},
            {"before": "F", "after": ["I", "B"], "offset": {"const": 1, "meshes": -1, "mesh": 1}},
            {"before": "W", "after": "F", "offset": {"meshes": 1}},
            {"before": "I", "after": "W", "offset": {"mesh": -1}},
            {"before": "W", "after": "I", "offset": {"const": 1, "mesh": 1}}]})";
      if (p == 1) {
        // One actor: nothing is split, so the W and I rules name missing tasks.
        EXPECT_THROW(parse_schedule_json(text, "r.json"), InputError);
        continue;
      }
      EXPECT_EQ(parse_schedule_json(text, "r.json").actors,
                make_shardy_schedule(ShardySchedule::kZeroBubbleH1,
                                     {.num_actors = p, .num_microbatches = m})
                    .actors)
          << "p=" << p << " m=" << m;
    }
  }
}

TEST(RuleSchedules, OneFOneBRulesReproduceStd1F1BOverAGrid) {
  for (int p = 1; p <= 5; ++p) {
    for (int m = 1; m <= 10; ++m) {
      const std::string text = R"({"num_actors": )" + std::to_string(p) +
                               R"(, "num_microbatches": )" + std::to_string(m) + R"(, "rules": [
            {"before": "B", "after": "F", "offset": {"meshes": 1, "mesh": -1}},
            {"before": "F", "after": "B", "offset": {"const": 1, "meshes": -1, "mesh": 1}},
            {"before": "F", "after": "F", "relation": "at-least", "offset": 1},
            {"before": "B", "after": "B", "relation": "at-least", "offset": 1}]})";
      EXPECT_EQ(parse_schedule_json(text, "r.json").actors,
                make_std_1f1b({.num_actors = p, .num_microbatches = m}).actors)
          << "p=" << p << " m=" << m;
    }
  }
}

TEST(RuleSchedules, GPipeButOneFOneBForTheLastActorThroughActorFilters) {
  const std::string text = R"({"num_actors": 3, "num_microbatches": 4, "rules": [
      {"before": "F", "after": "F", "relation": "at-least", "offset": 1},
      {"before": "B", "after": "B", "relation": "at-least", "offset": 1},
      {"before": "F", "after": "B", "relation": "any", "actors": [0, 1]},
      {"before": "B", "after": "F", "offset": 1, "actors": [-1]}]})";
  EXPECT_EQ(parse_schedule_json(text, "r.json").actors,
            make_shardy_schedule(ShardySchedule::kGPipeBut1F1BForLastMesh,
                                 {.num_actors = 3, .num_microbatches = 4})
                .actors);
}

TEST(RuleSchedules, LoopPlacementAndReversedBackwardProgram) {
  // Every F before every B; program order decides the rest: forwards microbatch-major (stage 0,
  // then stage 2 of microbatch 0, ...), backwards from the last microbatch.
  const std::string text = R"({"num_actors": 2, "num_stages": 4, "num_microbatches": 2,
      "program_order": "reversed-backward", "unordered": "program-order", "rules": [
      {"before": "F", "after": "B", "relation": "any"}]})";
  const Schedule s = parse_schedule_json(text, "r.json");
  EXPECT_EQ(s.placement.kind, PlacementKind::kLoop);
  EXPECT_EQ(actor_to_text(s, 0), "F0@s0 F0@s2 F1@s0 F1@s2 B1@s2 B1@s0 B0@s2 B0@s0");
}

TEST(RuleSchedules, ProgramOrderTieBreakIsOptIn) {
  const std::string base = R"({"num_actors": 2, "num_microbatches": 4, "rules": [
      {"before": "B", "after": "F", "offset": {"meshes": 1, "mesh": -1}}])";
  EXPECT_NE(rule_error(base + "}").find("unordered"), std::string::npos);
  const Schedule s = parse_schedule_json(base + R"(, "unordered": "program-order"})", "r.json");
  EXPECT_TRUE(validate_schedule(s).ok());
}

TEST(RuleSchedules, ACycleIsAnErrorNamingTheRuleAndTheCycle) {
  try {
    load_schedule_file(rules_data("rules_cycle.json"));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rules_cycle.json: rules[1] (\"backward first\"): puts B"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("closes a cycle"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line";
  }
}

TEST(RuleSchedules, ARuleNamingAMissingTaskKindIsAnError) {
  try {
    load_schedule_file(rules_data("rules_missing_task.json"));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "rules[0] (\"input gradients first\"): names I tasks, but its actors have none "
                  "(no stage there has a split backward)"),
              std::string::npos)
        << e.what();
  }
  // B on actors whose stages are all split.
  EXPECT_NE(rule_error(R"({"num_actors": 2, "num_microbatches": 2, "split_backward": [true, true],
                           "rules": [{"before": "B", "after": "F"}]})")
                .find("names B tasks, but its actors have none"),
            std::string::npos);
}

TEST(RuleSchedules, UnorderedTasksAreAnErrorNamingThemAndTheActor) {
  try {
    load_schedule_file(rules_data("rules_unordered.json"));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rules_unordered.json: the rules leave B0@s0 and F1@s0 "
                                         "on actor 0 unordered"),
              std::string::npos)
        << e.what();
  }
}

TEST(RuleSchedules, MalformedRulesNameTheFieldAndReason) {
  const std::string head = R"({"num_actors": 2, "num_microbatches": 2, )";
  EXPECT_NE(rule_error(head + R"("rules": [{"before": "X", "after": "F"}]})")
                .find("r.json: rules[0]: field 'before': expected a task kind F, B, I or W"),
            std::string::npos);
  EXPECT_NE(rule_error(head + R"("rules": [{"before": "B", "after": "F", "relation": "near"}]})")
                .find("field 'relation': expected \"equal\", \"at-least\" or \"any\""),
            std::string::npos);
  EXPECT_NE(rule_error(head + R"("rules": [{"before": "B", "after": "F", "actors": [2]}]})")
                .find("field 'actors': expected actor indices from -2 to 1"),
            std::string::npos);
  EXPECT_NE(rule_error(head + R"("rules": [{"before": "B", "after": "F", "offset": 1.5}]})")
                .find("field 'offset': expected an integer"),
            std::string::npos);
  EXPECT_NE(rule_error(head + R"("rules": [{"before": "B", "after": "F", "offset": {"x": 1}}]})")
                .find("unknown"),
            std::string::npos);
  EXPECT_NE(rule_error(head + R"("rules": []})").find("field 'rules': expected at least one rule"),
            std::string::npos);
  EXPECT_NE(rule_error(head + R"("rules": [{"before": "B", "after": "F"}], "actors": [[]]})")
                .find("give either 'actors' (explicit orders) or 'rules', not both"),
            std::string::npos);
  EXPECT_NE(rule_error(R"({"num_microbatches": 2, "rules": [{"before": "B", "after": "F"}]})")
                .find("needs 'num_actors' or a 'placement'"),
            std::string::npos);
  EXPECT_NE(rule_error(R"({"num_actors": 2, "num_stages": 3, "num_microbatches": 2,
                           "rules": [{"before": "B", "after": "F"}]})")
                .find("field 'num_stages': must be a multiple of num_actors"),
            std::string::npos);
  EXPECT_NE(
      rule_error(head + R"("split_backward": [true], "rules": [{"before": "B", "after": "F"}]})")
          .find("field 'split_backward': expected one flag per stage (2), got 1"),
      std::string::npos);
  EXPECT_NE(
      rule_error(head + R"("program_order": "random", "rules": [{"before": "B", "after": "F"}]})")
          .find("field 'program_order'"),
      std::string::npos);
  EXPECT_NE(rule_error(head + R"("unordered": "ignore", "rules": [{"before": "B", "after": "F"}]})")
                .find("field 'unordered'"),
            std::string::npos);
}

TEST(RuleSchedules, TooManyPairsIsRefusedBeforeAnyWork) {
  EXPECT_NE(rule_error(R"({"num_actors": 1, "num_microbatches": 100000,
                           "rules": [{"before": "B", "after": "F"}]})")
                .find("combinations; at most"),
            std::string::npos);
}

TEST(RuleSchedules, RuleHoldsEvaluatesTheOffsetPerActor) {
  ScheduleRule rule;
  rule.before = {TaskKind::kB};
  rule.after = {TaskKind::kF};
  rule.offset_meshes = 1;
  rule.offset_mesh = -1;
  // Actor 1 of 4: B(i) before F(i + 3).
  EXPECT_TRUE(rule.holds({TaskKind::kB, 1, 2}, {TaskKind::kF, 1, 5}, 1, 4));
  EXPECT_FALSE(rule.holds({TaskKind::kB, 1, 2}, {TaskKind::kF, 1, 4}, 1, 4));
  EXPECT_FALSE(rule.holds({TaskKind::kF, 1, 2}, {TaskKind::kF, 1, 5}, 1, 4));
  rule.relation = RuleRelation::kAtLeast;
  EXPECT_TRUE(rule.holds({TaskKind::kB, 1, 2}, {TaskKind::kF, 1, 7}, 1, 4));
  rule.actors = {-1};
  EXPECT_TRUE(rule.applies_to(3, 4));
  EXPECT_FALSE(rule.applies_to(1, 4));
}

}  // namespace
}  // namespace jaxpp
