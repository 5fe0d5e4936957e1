// Dependency replay: runs a schedule's per-actor orders against the pipeline's data
// dependencies with given item costs (list scheduling, no communication time).
//
// Data dependencies of one task (S stages, `split_backward` per stage):
//   F(s,k)    needs F(s-1,k)                                  (s > 0)
//   B|I(s,k)  needs F(s,k) and the input-gradient task of (s+1,k): B(s+1,k) or I(s+1,k),
//             whichever stage s+1 uses                         (s < S-1)
//   W(s,k)    needs I(s,k)
// A fused item is issued when every dependency of its members that lies outside the item has
// finished; it then occupies its actor for cost(item) time units, and all its members finish
// together. Each actor runs its items strictly in its list order, one at a time.
//
// Times are abstract integer units (the unit-cost timeline uses F=1, B=2, I=W=1). The replay
// is deterministic. If the orders cannot all complete, the result says which item each actor is
// blocked on and which dependency it waits for (a deadlock).
//
// Precondition: every task of the schedule is in range (stage < S, microbatch < m); run the
// structural checks of validate.h first on untrusted input.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "schedules/schedule.h"

namespace jaxpp {

// The data dependencies of `task` (see above), in a fixed order.
std::vector<TaskRef> task_dependencies(const TaskRef& task, int num_stages,
                                       const std::vector<bool>& split_backward);
// The same without allocating: writes them to `out` and returns how many (0, 1 or 2). Inline:
// the replay and the lowering call it for every task.
inline constexpr int kMaxTaskDependencies = 2;
inline int task_dependencies(const TaskRef& task, int num_stages,
                             const std::vector<bool>& split_backward,
                             TaskRef (&out)[kMaxTaskDependencies]) {
  const int s = task.stage;
  const int k = task.microbatch;
  switch (task.kind) {
    case TaskKind::kF:
      if (s == 0) return 0;
      out[0] = TaskRef{TaskKind::kF, s - 1, k};
      return 1;
    case TaskKind::kB:
    case TaskKind::kI: {
      out[0] = TaskRef{TaskKind::kF, s, k};
      if (s + 1 >= num_stages) return 1;
      const bool next_split =
          s + 1 < static_cast<int>(split_backward.size()) && split_backward[s + 1];
      out[1] = TaskRef{next_split ? TaskKind::kI : TaskKind::kB, s + 1, k};
      return 2;
    }
    case TaskKind::kW:
      out[0] = TaskRef{TaskKind::kI, s, k};
      return 1;
  }
  return 0;
}

struct ItemPosition {
  int actor = -1;
  int item = -1;  // index in the actor's list
};

struct ReplayResult {
  bool completed = false;
  // Per actor, per item: start and end time (-1 when the item never ran).
  std::vector<std::vector<int64_t>> start;
  std::vector<std::vector<int64_t>> end;
  // Items in a global issue order that respects every dependency: sorted by (start, actor,
  // item). Only items that ran.
  std::vector<ItemPosition> order;
  int64_t makespan = 0;
  // When !completed: per actor, the index of the first item that could not run (-1 if the actor
  // finished), the dependency it waits for, and where that dependency sits (actor -1 if absent).
  std::vector<int> blocked_item;
  std::vector<TaskRef> blocked_on;
  std::vector<ItemPosition> blocked_on_position;
};

using ItemCostFn = std::function<int64_t(const ScheduleItem&)>;

// Runs the replay. `cost` must return >= 1 for every item.
ReplayResult replay_schedule(const Schedule& schedule, const ItemCostFn& cost);

// Unit costs: F=1, B=2, I=1, W=1 per task; an item costs the sum of its members.
struct UnitCosts {
  int64_t f = 1;
  int64_t b = 2;
  int64_t i = 1;
  int64_t w = 1;
  int64_t of(TaskKind kind) const;
  int64_t of(const ScheduleItem& item) const;
};

// The same replay with per-task costs (each must be >= 1), priced without a call through
// std::function per item: the validator's and the lowering's replay (validate.h, lower.h).
ReplayResult replay_schedule(const Schedule& schedule, const UnitCosts& costs);

// One line per blocked actor: "actor 1: position 4 B0@s1 waits for B0@s2 (actor 2, position 7)"
// or "actor 3: finished". Used by the validator and by error messages.
std::vector<std::string> describe_deadlock(const Schedule& schedule, const ReplayResult& result);

}  // namespace jaxpp
