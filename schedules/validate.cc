#include "schedules/validate.h"

#include <map>
#include <set>
#include <tuple>

#include "graph/error.h"
#include "schedules/replay.h"

namespace jaxpp {
namespace {

struct Position {
  int actor = -1;
  int item = -1;
  int member = -1;  // index inside a fused group
  bool valid() const { return actor >= 0; }
  auto key() const { return std::tie(item, member); }
};

std::string at(int actor, int item) {
  return "actor " + std::to_string(actor) + ", position " + std::to_string(item);
}

class ErrorList {
 public:
  explicit ErrorList(int max_errors) : max_(max_errors) {}
  void add(std::string e) {
    ++total_;
    if (static_cast<int>(errors_.size()) < max_) errors_.push_back(std::move(e));
  }
  bool empty() const { return total_ == 0; }
  std::vector<std::string> take() {
    if (total_ > static_cast<int>(errors_.size())) {
      errors_.push_back("... and " + std::to_string(total_ - errors_.size()) + " more errors");
    }
    return std::move(errors_);
  }

 private:
  int max_;
  int total_ = 0;
  std::vector<std::string> errors_;
};

}  // namespace

std::vector<int> peak_in_flight(const Schedule& schedule) {
  std::vector<int> peaks;
  for (const auto& items : schedule.actors) {
    int live = 0;
    int peak = 0;
    for (const ScheduleItem& item : items) {
      for (const TaskRef& t : item) {
        if (t.kind == TaskKind::kF) ++live;
        if (t.kind == TaskKind::kB || t.kind == TaskKind::kI) --live;
        peak = std::max(peak, live);
      }
    }
    peaks.push_back(peak);
  }
  return peaks;
}

ValidationReport validate_schedule(const Schedule& schedule, int max_errors) {
  ValidationReport report;
  report.peak_in_flight = peak_in_flight(schedule);
  ErrorList errors(max_errors);
  const int p = schedule.num_actors();
  const int S = schedule.num_stages;
  const int m = schedule.num_microbatches;

  // 1. Shape.
  if (p < 1) errors.add("the schedule has no actor");
  if (S < 1) errors.add("the schedule has no stage (num_stages = " + std::to_string(S) + ")");
  if (m < 1) errors.add("num_microbatches must be >= 1 (got " + std::to_string(m) + ")");
  if (schedule.placement.num_actors != p) {
    errors.add("placement has " + std::to_string(schedule.placement.num_actors) +
               " actors but the schedule has " + std::to_string(p));
  }
  if (schedule.placement.num_stages() != S) {
    errors.add("placement covers " + std::to_string(schedule.placement.num_stages()) +
               " stages but the schedule has " + std::to_string(S));
  }
  if (static_cast<int>(schedule.split_backward.size()) != S) {
    errors.add("split_backward has " + std::to_string(schedule.split_backward.size()) +
               " entries but the schedule has " + std::to_string(S) + " stages");
  }
  if (!errors.empty()) {
    report.errors = errors.take();
    return report;
  }

  // 2. Range and placement; 3. exactly once.
  std::map<TaskRef, Position> seen;
  for (int r = 0; r < p; ++r) {
    const auto& items = schedule.actors[r];
    for (int i = 0; i < static_cast<int>(items.size()); ++i) {
      if (items[i].empty()) {
        errors.add(at(r, i) + ": empty fused group");
        continue;
      }
      for (int j = 0; j < static_cast<int>(items[i].size()); ++j) {
        const TaskRef& t = items[i][j];
        const std::string task = to_string(t);
        if (t.stage < 0 || t.stage >= S) {
          errors.add(at(r, i) + ": " + task + " names stage " + std::to_string(t.stage) +
                     " but the schedule has stages 0.." + std::to_string(S - 1));
          continue;
        }
        if (t.microbatch < 0 || t.microbatch >= m) {
          errors.add(at(r, i) + ": " + task + " names microbatch " + std::to_string(t.microbatch) +
                     " but the schedule has microbatches 0.." + std::to_string(m - 1));
          continue;
        }
        if (schedule.placement.actor_of(t.stage) != r) {
          errors.add(at(r, i) + ": " + task + " runs stage " + std::to_string(t.stage) +
                     ", which is placed on actor " +
                     std::to_string(schedule.placement.actor_of(t.stage)));
          continue;
        }
        const bool split = schedule.split_backward[t.stage];
        if (t.kind == TaskKind::kB && split) {
          errors.add(at(r, i) + ": " + task + " is a full backward but stage " +
                     std::to_string(t.stage) + " uses split I/W backwards");
          continue;
        }
        if ((t.kind == TaskKind::kI || t.kind == TaskKind::kW) && !split) {
          errors.add(at(r, i) + ": " + task + " is a split backward but stage " +
                     std::to_string(t.stage) + " uses full B backwards");
          continue;
        }
        auto [it, inserted] = seen.emplace(t, Position{r, i, j});
        if (!inserted) {
          errors.add(at(r, i) + ": " + task + " is duplicated (first at " +
                     at(it->second.actor, it->second.item) + ")");
        }
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    const bool split = schedule.split_backward[s];
    for (int k = 0; k < m; ++k) {
      std::vector<TaskKind> kinds = {TaskKind::kF};
      if (split) {
        kinds.push_back(TaskKind::kI);
        kinds.push_back(TaskKind::kW);
      } else {
        kinds.push_back(TaskKind::kB);
      }
      for (TaskKind kind : kinds) {
        const TaskRef t{kind, s, k};
        if (!seen.count(t)) {
          errors.add("actor " + std::to_string(schedule.placement.actor_of(s)) + ": task " +
                     to_string(t) + " is missing (every stage-microbatch needs F and " +
                     (split ? "I and W" : "B") + ")");
        }
      }
    }
  }
  if (!errors.empty()) {
    report.errors = errors.take();
    return report;
  }

  // 4. Local order.
  for (const auto& [t, pos] : seen) {
    TaskRef before;
    if (t.kind == TaskKind::kW) {
      before = TaskRef{TaskKind::kI, t.stage, t.microbatch};
    } else if (t.kind == TaskKind::kB || t.kind == TaskKind::kI) {
      before = TaskRef{TaskKind::kF, t.stage, t.microbatch};
    } else {
      continue;
    }
    const Position& b = seen.at(before);
    if (b.key() > pos.key()) {
      errors.add(at(pos.actor, pos.item) + ": " + to_string(t) + " runs before its " +
                 to_string(before) + " (position " + std::to_string(b.item) + ")");
    }
  }
  if (!errors.empty()) {
    report.errors = errors.take();
    return report;
  }

  // 5. Dependency replay.
  const UnitCosts unit;
  const ReplayResult replay =
      replay_schedule(schedule, [&](const ScheduleItem& item) { return unit.of(item); });
  if (!replay.completed) {
    std::string msg = "deadlock: no actor can make progress;";
    for (const std::string& line : describe_deadlock(schedule, replay)) msg += " " + line + ";";
    msg.pop_back();
    errors.add(msg);
  }
  report.errors = errors.take();
  return report;
}

void validate_or_throw(const Schedule& schedule, const std::string& where) {
  const ValidationReport report = validate_schedule(schedule, 5);
  if (report.ok()) return;
  std::string msg;
  for (const std::string& e : report.errors) msg += (msg.empty() ? "" : "; ") + e;
  throw_input_error(where, "invalid schedule: " + msg);
}

}  // namespace jaxpp
