#include "schedules/timeline.h"

#include "graph/error.h"

namespace jaxpp {

Timeline unit_cost_timeline(const Schedule& schedule, const UnitCosts& costs) {
  const ReplayResult replay = replay_schedule(schedule, costs);
  if (!replay.completed) {
    std::string msg = "deadlock:";
    for (const std::string& line : describe_deadlock(schedule, replay)) msg += " " + line + ";";
    msg.pop_back();
    throw InputError(schedule.name + ": " + msg);
  }
  Timeline t;
  t.costs = costs;
  t.start = replay.start;
  t.end = replay.end;
  t.makespan = replay.makespan;
  for (const auto& items : schedule.actors) {
    int64_t busy = 0;
    for (const ScheduleItem& item : items) busy += costs.of(item);
    t.busy.push_back(busy);
  }
  return t;
}

std::string timeline_to_text(const Schedule& schedule, const Timeline& timeline) {
  std::string out;
  const std::string label_pad(std::to_string(schedule.num_actors() - 1).size(), ' ');
  for (int r = 0; r < schedule.num_actors(); ++r) {
    std::string row(static_cast<size_t>(timeline.makespan), '.');
    const auto& items = schedule.actors[r];
    for (size_t i = 0; i < items.size(); ++i) {
      int64_t t = timeline.start[r][i];
      for (const TaskRef& task : items[i]) {
        const int64_t c = timeline.costs.of(task.kind);
        for (int64_t u = 0; u < c; ++u) row[static_cast<size_t>(t + u)] = to_string(task.kind)[0];
        t += c;
      }
    }
    std::string label = "actor" + std::to_string(r);
    label += std::string(5 + label_pad.size() + 1 - label.size(), ' ');
    out += label + "|" + row + "|\n";
  }
  int64_t total_busy = 0;
  for (int64_t b : timeline.busy) total_busy += b;
  const int64_t capacity = timeline.makespan * schedule.num_actors();
  out += "makespan " + std::to_string(timeline.makespan) +
         " (unit costs F=" + std::to_string(timeline.costs.f) +
         " B=" + std::to_string(timeline.costs.b) + " I=" + std::to_string(timeline.costs.i) +
         " W=" + std::to_string(timeline.costs.w) + "), idle " +
         std::to_string(capacity - total_busy) + " of " + std::to_string(capacity) +
         " actor-units\n";
  return out;
}

}  // namespace jaxpp
