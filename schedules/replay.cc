#include "schedules/replay.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <queue>
#include <utility>

namespace jaxpp {
namespace {

// Dense index of a task: ((microbatch * S) + stage) * 4 + kind. Microbatch-major: a task's
// dependencies (the neighbouring stages' tasks of its microbatch) sit next to it.
size_t task_index(const TaskRef& t, int num_stages) {
  return (static_cast<size_t>(t.microbatch) * static_cast<size_t>(num_stages) +
          static_cast<size_t>(t.stage)) *
             4 +
         static_cast<size_t>(t.kind);
}

}  // namespace

std::vector<TaskRef> task_dependencies(const TaskRef& task, int num_stages,
                                       const std::vector<bool>& split_backward) {
  TaskRef deps[kMaxTaskDependencies];
  const int n = task_dependencies(task, num_stages, split_backward, deps);
  return std::vector<TaskRef>(deps, deps + n);
}

int64_t UnitCosts::of(TaskKind kind) const {
  switch (kind) {
    case TaskKind::kF:
      return f;
    case TaskKind::kB:
      return b;
    case TaskKind::kI:
      return i;
    case TaskKind::kW:
      return w;
  }
  return 0;
}

int64_t UnitCosts::of(const ScheduleItem& item) const {
  int64_t total = 0;
  for (const TaskRef& t : item) total += of(t.kind);
  return total;
}

namespace {

// How many items of an actor ahead of the one being replayed run_replay fetches (their vectors;
// their tasks half as far ahead).
constexpr size_t kReplayPrefetchDistance = 4;

// The replay, with `cost(item)` the cost of one item (a callable: ItemCostFn or a lambda over
// UnitCosts, which the compiler inlines).
template <typename Cost>
ReplayResult run_replay(const Schedule& schedule, const Cost& cost) {
  const int p = schedule.num_actors();
  const int S = schedule.num_stages;
  const int m = schedule.num_microbatches;
  const size_t num_ids = static_cast<size_t>(S) * static_cast<size_t>(m) * 4;
  std::vector<int64_t> finish(num_ids, -1);

  ReplayResult res;
  res.start.resize(p);
  res.end.resize(p);
  for (int r = 0; r < p; ++r) {
    res.start[r].assign(schedule.actors[r].size(), -1);
    res.end[r].assign(schedule.actors[r].size(), -1);
  }
  std::vector<size_t> next(p, 0);
  std::vector<int64_t> free_at(p, 0);
  res.blocked_item.assign(p, -1);
  res.blocked_on.assign(p, TaskRef{});
  res.blocked_on_position.assign(p, ItemPosition{});

  // Returns the earliest start of `item` on an actor free at `free`, or -1 when a dependency has
  // not run yet (its TaskRef stored in *missing).
  auto ready_time = [&](const ScheduleItem& item, int64_t free, TaskRef* missing) -> int64_t {
    int64_t t0 = free;
    for (const TaskRef& task : item) {
      TaskRef deps[kMaxTaskDependencies];
      const int num_deps = task_dependencies(task, S, schedule.split_backward, deps);
      for (int d = 0; d < num_deps; ++d) {
        const TaskRef& dep = deps[d];
        if (item.size() > 1 && std::find(item.begin(), item.end(), dep) != item.end()) continue;
        const int64_t f = finish[task_index(dep, S)];
        if (f < 0) {
          *missing = dep;
          return -1;
        }
        t0 = std::max(t0, f);
      }
    }
    return t0;
  };

  // Each actor runs its list until an item waits for a task that has not finished; it then waits
  // on that task (an intrusive list per task) and is woken when the task finishes. An item's
  // times depend only on its dependencies and on its actor's previous item, so the order in
  // which actors advance does not change the result.
  std::vector<int> first_waiter(num_ids, -1);  // per task: an actor waiting for it, or -1
  std::vector<int> next_waiter(p, -1);         // per actor: the next actor waiting on the same task
  std::vector<int> runnable(p);
  for (int r = 0; r < p; ++r) runnable[r] = p - 1 - r;  // actor 0 first
  while (!runnable.empty()) {
    const int r = runnable.back();
    runnable.pop_back();
    const auto& items = schedule.actors[r];
    while (next[r] < items.size()) {
      // An actor's items and their tasks (each item's own heap block) are read in list order,
      // but the actors take turns: fetch the next items ahead of use.
      if (next[r] + kReplayPrefetchDistance < items.size())
        __builtin_prefetch(&items[next[r] + kReplayPrefetchDistance]);
      if (next[r] + kReplayPrefetchDistance / 2 < items.size())
        __builtin_prefetch(items[next[r] + kReplayPrefetchDistance / 2].data());
      const ScheduleItem& item = items[next[r]];
      TaskRef missing;
      const int64_t t0 = ready_time(item, free_at[r], &missing);
      if (t0 < 0) {
        const size_t id = task_index(missing, S);
        next_waiter[r] = first_waiter[id];
        first_waiter[id] = r;
        break;
      }
      const int64_t c = cost(item);
      assert(c >= 1 && "replay_schedule: item costs must be >= 1");
      const int64_t t1 = t0 + c;
      for (const TaskRef& task : item) {
        assert(task.stage >= 0 && task.stage < S && task.microbatch >= 0 && task.microbatch < m &&
               "replay_schedule: task out of range; validate the structure first");
        const size_t id = task_index(task, S);
        finish[id] = t1;
        for (int w = first_waiter[id]; w >= 0; w = next_waiter[w]) runnable.push_back(w);
        first_waiter[id] = -1;
      }
      res.start[r][next[r]] = t0;
      res.end[r][next[r]] = t1;
      free_at[r] = t1;
      res.makespan = std::max(res.makespan, t1);
      ++next[r];
    }
  }

  res.completed = true;
  for (int r = 0; r < p; ++r) {
    if (next[r] < schedule.actors[r].size()) {
      res.completed = false;
      res.blocked_item[r] = static_cast<int>(next[r]);
      TaskRef missing;
      ready_time(schedule.actors[r][next[r]], free_at[r], &missing);
      res.blocked_on[r] = missing;
    }
  }
  if (!res.completed) {
    // Where each awaited task sits; only a deadlock needs it, so it is found here, not up front.
    std::vector<ItemPosition> where(num_ids);
    for (int r = 0; r < p; ++r) {
      for (size_t i = 0; i < schedule.actors[r].size(); ++i) {
        for (const TaskRef& t : schedule.actors[r][i])
          where[task_index(t, S)] = {r, static_cast<int>(i)};
      }
    }
    for (int r = 0; r < p; ++r) {
      if (res.blocked_item[r] >= 0)
        res.blocked_on_position[r] = where[task_index(res.blocked_on[r], S)];
    }
  }

  // Merge the actors' runs by (start, actor, item): within one actor, starts strictly increase
  // along the list, so a p-way merge on (start, actor) yields the global order.
  size_t num_ran = 0;
  for (int r = 0; r < p; ++r) num_ran += next[r];
  res.order.reserve(num_ran);
  if (res.makespan <= static_cast<int64_t>(4 * num_ran + 1024)) {
    // Start times span a short range (unit costs): a counting sort by start over the items in
    // (actor, item) order, which is stable, gives the same order in linear time.
    std::vector<int> first(static_cast<size_t>(res.makespan) + 2, 0);
    for (int r = 0; r < p; ++r)
      for (size_t i = 0; i < next[r]; ++i) ++first[static_cast<size_t>(res.start[r][i]) + 1];
    for (size_t t = 1; t < first.size(); ++t) first[t] += first[t - 1];
    res.order.resize(num_ran);
    for (int r = 0; r < p; ++r) {
      for (size_t i = 0; i < next[r]; ++i)
        res.order[first[static_cast<size_t>(res.start[r][i])]++] = {r, static_cast<int>(i)};
    }
    return res;
  }
  using Head = std::pair<int64_t, int>;  // (start of the actor's next item, actor)
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  std::vector<size_t> cursor(p, 0);
  for (int r = 0; r < p; ++r)
    if (next[r] > 0) heads.emplace(res.start[r][0], r);
  while (!heads.empty()) {
    const int r = heads.top().second;
    heads.pop();
    const size_t i = cursor[r]++;
    res.order.push_back({r, static_cast<int>(i)});
    if (cursor[r] < next[r]) heads.emplace(res.start[r][cursor[r]], r);
  }
  return res;
}

}  // namespace

ReplayResult replay_schedule(const Schedule& schedule, const ItemCostFn& cost) {
  return run_replay(schedule, cost);
}

ReplayResult replay_schedule(const Schedule& schedule, const UnitCosts& costs) {
  return run_replay(schedule, [&costs](const ScheduleItem& item) { return costs.of(item); });
}

std::vector<std::string> describe_deadlock(const Schedule& schedule, const ReplayResult& result) {
  std::vector<std::string> lines;
  for (int r = 0; r < schedule.num_actors(); ++r) {
    const int i = result.blocked_item[r];
    if (i < 0) {
      lines.push_back("actor " + std::to_string(r) + ": finished");
      continue;
    }
    const ItemPosition& at = result.blocked_on_position[r];
    std::string line = "actor " + std::to_string(r) + ": position " + std::to_string(i) + " " +
                       item_to_string(schedule.actors[r][i]) + " waits for " +
                       to_string(result.blocked_on[r]);
    if (at.actor >= 0) {
      line += " (actor " + std::to_string(at.actor) + ", position " + std::to_string(at.item) + ")";
    } else {
      line += " (not in the schedule)";
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace jaxpp
