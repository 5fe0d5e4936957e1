#include "schedules/validate.h"

#include <algorithm>
#include <span>
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

namespace {

// validate_schedule; when check 5 runs, its replay is moved into *replay_out (if given). A
// caller that asks for the replay (validate_and_replay_or_throw) reads only the errors, so the
// peak in-flight activations, another pass over every item, are left out then.
ValidationReport validate(const Schedule& schedule, int max_errors, ReplayResult* replay_out) {
  ValidationReport report;
  if (replay_out == nullptr) report.peak_in_flight = peak_in_flight(schedule);
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

  // 2. Range and placement; 3. exactly once. seen[slot(t)] = where t first appears.
  const size_t num_slots = kAllTaskKinds.size() * static_cast<size_t>(S) * static_cast<size_t>(m);
  std::vector<Position> seen(num_slots);
  // Slots in TaskRef order (kind, stage, microbatch), so that walking them visits tasks in the
  // same order as a sorted container would.
  auto slot = [&](const TaskRef& t) {
    return (static_cast<size_t>(t.kind) * static_cast<size_t>(S) + static_cast<size_t>(t.stage)) *
               static_cast<size_t>(m) +
           static_cast<size_t>(t.microbatch);
  };
  for (int r = 0; r < p; ++r) {
    const auto& items = schedule.actors[r];
    for (int i = 0; i < static_cast<int>(items.size()); ++i) {
      if (items[i].empty()) {
        errors.add(at(r, i) + ": empty fused group");
        continue;
      }
      for (int j = 0; j < static_cast<int>(items[i].size()); ++j) {
        const TaskRef& t = items[i][j];
        auto task = [&] { return to_string(t); };
        if (t.stage < 0 || t.stage >= S) {
          errors.add(at(r, i) + ": " + task() + " names stage " + std::to_string(t.stage) +
                     " but the schedule has stages 0.." + std::to_string(S - 1));
          continue;
        }
        if (t.microbatch < 0 || t.microbatch >= m) {
          errors.add(at(r, i) + ": " + task() + " names microbatch " +
                     std::to_string(t.microbatch) + " but the schedule has microbatches 0.." +
                     std::to_string(m - 1));
          continue;
        }
        if (schedule.placement.actor_of(t.stage) != r) {
          errors.add(at(r, i) + ": " + task() + " runs stage " + std::to_string(t.stage) +
                     ", which is placed on actor " +
                     std::to_string(schedule.placement.actor_of(t.stage)));
          continue;
        }
        const bool split = schedule.split_backward[t.stage];
        if (t.kind == TaskKind::kB && split) {
          errors.add(at(r, i) + ": " + task() + " is a full backward but stage " +
                     std::to_string(t.stage) + " uses split I/W backwards");
          continue;
        }
        if ((t.kind == TaskKind::kI || t.kind == TaskKind::kW) && !split) {
          errors.add(at(r, i) + ": " + task() + " is a split backward but stage " +
                     std::to_string(t.stage) + " uses full B backwards");
          continue;
        }
        Position& first = seen[slot(t)];
        if (first.valid()) {
          errors.add(at(r, i) + ": " + task() + " is duplicated (first at " +
                     at(first.actor, first.item) + ")");
          continue;
        }
        first = Position{r, i, j};
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    const bool split = schedule.split_backward[s];
    const TaskKind split_kinds[] = {TaskKind::kF, TaskKind::kI, TaskKind::kW};
    const TaskKind full_kinds[] = {TaskKind::kF, TaskKind::kB};
    const std::span<const TaskKind> kinds =
        split ? std::span<const TaskKind>(split_kinds) : std::span<const TaskKind>(full_kinds);
    for (int k = 0; k < m; ++k) {
      for (TaskKind kind : kinds) {
        const TaskRef t{kind, s, k};
        if (!seen[slot(t)].valid()) {
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

  // 4. Local order, walking the tasks in (kind, stage, microbatch) order.
  for (TaskKind kind : {TaskKind::kB, TaskKind::kI, TaskKind::kW}) {
    const TaskKind before_kind = kind == TaskKind::kW ? TaskKind::kI : TaskKind::kF;
    for (int s = 0; s < S; ++s) {
      for (int k = 0; k < m; ++k) {
        const TaskRef t{kind, s, k};
        const Position& pos = seen[slot(t)];
        if (!pos.valid()) continue;
        const TaskRef before{before_kind, s, k};
        const Position& b = seen[slot(before)];
        if (b.key() > pos.key()) {
          errors.add(at(pos.actor, pos.item) + ": " + to_string(t) + " runs before its " +
                     to_string(before) + " (position " + std::to_string(b.item) + ")");
        }
      }
    }
  }
  // A fused group's members run in their order (the lowering and the runtime execute them one
  // after another), so a member must come after any member it depends on; the replay treats the
  // group as one item and would not notice.
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < static_cast<int>(schedule.actors[r].size()); ++i) {
      const ScheduleItem& item = schedule.actors[r][i];
      for (size_t j = 0; j + 1 < item.size(); ++j) {
        TaskRef deps[kMaxTaskDependencies];
        const int n = task_dependencies(item[j], S, schedule.split_backward, deps);
        for (int d = 0; d < n; ++d) {
          const auto later = std::find(item.begin() + static_cast<std::ptrdiff_t>(j) + 1,
                                       item.end(), deps[d]);
          if (later == item.end()) continue;
          errors.add(at(r, i) + ": " + to_string(item[j]) + " comes before " +
                     to_string(deps[d]) + ", which it depends on, in the same fused group " +
                     "(members run in the order given)");
        }
      }
    }
  }
  if (!errors.empty()) {
    report.errors = errors.take();
    return report;
  }

  // 5. Dependency replay.
  const UnitCosts unit;
  ReplayResult replay = replay_schedule(schedule, unit);
  if (!replay.completed) {
    std::string msg = "deadlock: no actor can make progress;";
    for (const std::string& line : describe_deadlock(schedule, replay)) msg += " " + line + ";";
    msg.pop_back();
    errors.add(msg);
  }
  if (replay_out != nullptr) *replay_out = std::move(replay);
  report.errors = errors.take();
  return report;
}

void throw_if_invalid(const ValidationReport& report, const std::string& where) {
  if (report.ok()) return;
  std::string msg;
  for (const std::string& e : report.errors) msg += (msg.empty() ? "" : "; ") + e;
  throw_input_error(where, "invalid schedule: " + msg);
}

}  // namespace

ValidationReport validate_schedule(const Schedule& schedule, int max_errors) {
  return validate(schedule, max_errors, nullptr);
}

void validate_or_throw(const Schedule& schedule, const std::string& where) {
  throw_if_invalid(validate(schedule, 5, nullptr), where);
}

ReplayResult validate_and_replay_or_throw(const Schedule& schedule, const std::string& where) {
  ReplayResult replay;
  throw_if_invalid(validate(schedule, 5, &replay), where);
  return replay;
}

}  // namespace jaxpp
