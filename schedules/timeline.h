// Unit-cost timeline of a schedule, for the terminal (`jaxpp-sim show`).
//
// List scheduling over the dependency replay (replay.h) with unit costs F=1, B=2, I=1, W=1 and
// no communication time: each actor runs its items in order, each as soon as the actor is free
// and the item's dependencies have finished. Gives a quick picture of a schedule's bubbles; the
// simulator (simulator/) is the tool for real costs.
//
// Text Gantt: one row per actor, one character per time unit: the kind letter of the task
// running (F, B, I, W), '.' when idle; then the makespan. Example (Std1F1B, p=2, m=2):
//   actor0 |FF.BBBB|
//   actor1 |.FBBFBB|
//   makespan 7 (unit costs F=1 B=2 I=1 W=1)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/replay.h"
#include "schedules/schedule.h"

namespace jaxpp {

struct Timeline {
  UnitCosts costs;
  std::vector<std::vector<int64_t>> start;  // per actor, per item
  std::vector<std::vector<int64_t>> end;
  int64_t makespan = 0;
  std::vector<int64_t> busy;  // per actor: sum of item costs
};

// InputError listing the blocked task of every actor when the schedule deadlocks.
// Precondition: the schedule passed validate.h's structural checks (tokens in range).
Timeline unit_cost_timeline(const Schedule& schedule, const UnitCosts& costs = {});

std::string timeline_to_text(const Schedule& schedule, const Timeline& timeline);

}  // namespace jaxpp
