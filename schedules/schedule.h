// Schedule: the per-actor compute order of one pipeline iteration.
//
// A schedule says, for every actor (pipeline rank), in which order it runs its compute tasks
// (F, B, I, W of a (stage, microbatch); see graph/task.h). Each entry of an actor's list is an
// *item*: a fused group of one or more tasks issued as one executable (JaxPP's FusedTask), e.g.
// the last stage's F and B in Interleaved1F1B. When things happen across actors is not part of a
// schedule: it follows from the pipeline's data dependencies and the task costs.
//
// Invariants of a valid schedule (checked by schedules/validate.h, not by construction):
//   - actors.size() == placement.num_actors, num_stages == placement.num_stages();
//   - every task names a stage placed on that actor;
//   - per stage s and microbatch k: F once, and either B once (split_backward[s] == false) or
//     I once and W once (split_backward[s] == true);
//   - the order executes without deadlock under the dependency replay of validate.h.
//
// Text form (to_text), one line per actor, items separated by one space, fused groups in
// brackets:
//   actor0: F0@s0 F1@s0 F0@s2 F1@s2 F2@s0 B0@s2 ...
//   actor1: F0@s1 F1@s1 [F0@s3+B0@s3] ...
// When every actor owns exactly one stage, the short form drops the stage ("F0 F1 B0 ..."), which
// is the form of SCHEDULES.md's examples.
//
// JSON form (schedule_to_json / schedule_from_json):
//   {"schedule": "std1f1b", "num_stages": 4, "num_microbatches": 8,
//    "placement": {...graph/placement.h JSON...},
//    "actors": [["F0@s0", "F1@s0", "F0@s3+B0@s3", ...], ...]}
// schedules/custom.h reads the same form with most fields optional.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/placement.h"
#include "graph/task.h"

namespace jaxpp {

// One item of an actor's list: the tasks of a fused group, in issue order (size >= 1).
using ScheduleItem = std::vector<TaskRef>;

struct Schedule {
  std::string name;  // canonical registry name, or "custom"
  Placement placement;
  int num_stages = 0;
  int num_microbatches = 0;
  std::vector<std::vector<ScheduleItem>> actors;  // actors[r] = ordered items of actor r
  std::vector<bool> split_backward;               // per stage: true = I and W, false = B

  int num_actors() const { return static_cast<int>(actors.size()); }
  int64_t num_tasks() const;
  bool operator==(const Schedule&) const = default;
};

// "F0@s3+B0@s3" (JSON form) for an item.
std::string item_to_string(const ScheduleItem& item);
// Text form of one item: "F3@s2", "[F0@s3+B0@s3]", or short "F3" / "[F0+B0]".
std::string item_to_text(const ScheduleItem& item, bool short_form);
// Whether to_text uses the short form: every actor owns exactly one stage.
bool uses_short_form(const Schedule& schedule);
// The per-actor grid, one line per actor, "actor<r>: <items>\n".
std::string to_text(const Schedule& schedule);
// One line of the grid without the "actor<r>: " prefix.
std::string actor_to_text(const Schedule& schedule, int actor);

nlohmann::json schedule_to_json(const Schedule& schedule);
// Parses the JSON form; `where` names the source for errors. Missing optional fields are inferred
// as in custom.h (placement from which actor holds a stage, sizes from the tokens).
Schedule schedule_from_json(const nlohmann::json& j, const std::string& where);

// Parses one JSON item string ("F0@s3+B0@s3"). InputError names `where` and the token.
ScheduleItem parse_item(const std::string& text, const std::string& where);

// Placement inferred from which actor holds each stage (a named kind when the mapping matches
// linear, loop or V, explicit otherwise). InputError when a stage is on two actors or on none.
Placement infer_placement(int num_stages, int num_actors,
                          const std::vector<std::vector<ScheduleItem>>& actors,
                          const std::string& where);

// Fills split_backward from the tasks present: a stage is split if it has any I or W task.
std::vector<bool> infer_split_backward(int num_stages,
                                       const std::vector<std::vector<ScheduleItem>>& actors);

}  // namespace jaxpp
