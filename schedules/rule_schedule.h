// Rule-based custom schedules: "before" rules in Shardy:MPMD's style instead of explicit orders.
//
// A custom schedule JSON file (custom.h) that has "rules" instead of "actors" describes the
// schedule by pairwise rules over the tasks of one actor, expanded into per-actor orders by the
// rule scheduler (rule_scheduler.h: the program of one training step, every rule pair as a
// dependency, then Shardy's topological sort):
//
//   {"schedule": "my-1f1b",            // name, default "custom"
//    "num_actors": 4,                  // or "placement" (graph/placement.h JSON); default linear
//    "num_stages": 4,                  // default: the placement's, else num_actors
//    "num_microbatches": 6,            // required
//    "split_backward": "none",         // "none" | "where-sent" (Shardy's ZeroBubble split: every
//                                      //   stage whose gradient goes to another actor) | [bools]
//    "program_order": "microbatch",    // "microbatch" | "reversed-backward" (rule_scheduler.h)
//    "unordered": "error",             // "error" | "program-order": what to do when the rules
//                                      //   and data flow leave two tasks of an actor unordered
//    "rules": [
//      {"name": "1F1B steady backward",   // optional, for messages
//       "before": "B", "after": "F",      // a kind F|B|I|W, or a list of kinds
//       "offset": {"mesh": -1, "meshes": 1},  // d = const + mesh*r + meshes*n (an integer = const)
//       "relation": "equal",              // "equal": after's microbatch = before's + d;
//                                         // "at-least": after's >= before's + d; "any"
//       "actors": [0, -1]}                // optional: only these actors (-1 = the last); default
//       all
//    ]}
// A rule says: on actor r of n, every task of a `before` kind with microbatch i happens before
// every task of an `after` kind with microbatch j when (i, j) satisfy the relation. So Shardy's
// 1F1B is three rules: B(i) < F(i + n - r); F(i + n - r - 1) < B(i) (offset {"const": 1,
// "meshes": -1, "mesh": 1} from F to B); and F, B each in microbatch order ("at-least", 1).
//
// Errors (InputError, one line naming the file and the rule, e.g.
//   my.json: rules[2] ("warm-up"): puts B0@s1 before F1@s1, which closes a cycle
//     B0@s1 -> F1@s1 -> B1@s2 -> B0@s1 (... on one line)):
//   - a rule whose kinds no task of its actors has (a missing task: e.g. "I" when nothing is
//     split), or an actor out of range;
//   - rules that, with the data dependencies, form a cycle (the rule that closes it is named);
//   - with "unordered": "error", two tasks of one actor that neither the rules nor data flow
//     order (both tasks and the actor are named).
// The result is an ordinary Schedule (one task per item), validated and lowered like any other.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "schedules/rule_scheduler.h"
#include "schedules/schedule.h"

namespace jaxpp {

enum class RuleRelation { kEqual, kAtLeast, kAny };

struct ScheduleRule {
  std::string name;              // "" when not given
  std::vector<TaskKind> before;  // kinds of the earlier task
  std::vector<TaskKind> after;   // kinds of the later task
  int offset_const = 0;          // d = offset_const + offset_mesh * r + offset_meshes * n
  int offset_mesh = 0;
  int offset_meshes = 0;
  RuleRelation relation = RuleRelation::kEqual;
  std::vector<int> actors;  // empty = every actor; negative counts from the end

  bool applies_to(int actor, int num_actors) const;
  bool holds(const TaskRef& a, const TaskRef& b, int actor, int num_actors) const;
};

struct RuleSchedule {
  std::string name = "custom";
  Placement placement;
  int num_microbatches = 0;
  std::vector<bool> split_backward;
  ProgramOrder order = ProgramOrder::kMicrobatchMajor;
  bool unordered_is_error = true;
  std::vector<ScheduleRule> rules;
};

// Parses the JSON form above (the object must have "rules"). InputError names `where` and field.
RuleSchedule rule_schedule_from_json(const nlohmann::json& j, const std::string& where);

// Expands the rules into per-actor orders (see above for the errors, prefixed by `where`).
Schedule expand_rule_schedule(const RuleSchedule& rules, const std::string& where);

}  // namespace jaxpp
