#include "schedules/assigned.h"

#include <optional>

#include "graph/error.h"
#include "schedules/registry.h"
#include "schedules/rule_scheduler.h"
#include "schedules/shardy.h"

namespace jaxpp {
namespace {

// The Shardy rule of a placement-free schedule's canonical name.
std::optional<ShardySchedule> placement_free_rule(const std::string& canonical) {
  if (canonical == "GPipe") return ShardySchedule::kGPipe;
  if (canonical == "Std1F1B") return ShardySchedule::k1F1B;
  for (ShardySchedule s : kAllShardySchedules)
    if (canonical == to_string(s)) return s;
  return std::nullopt;
}

std::string describe_placement(const Placement& placement) {
  return std::to_string(placement.num_stages()) + " stages on " +
         std::to_string(placement.num_actors) + " actors, " +
         std::string(to_string(placement.kind)) + " placement";
}

// The generator's schedule for the placement's shape when it places the stages as `placement`.
std::optional<Schedule> generated_on(const ScheduleInfo& info, const Placement& placement,
                                     int num_microbatches, bool fuse, std::string* why) {
  ScheduleParams params;
  params.num_actors = placement.num_actors;
  params.num_stages = placement.num_stages();
  params.num_microbatches = num_microbatches;
  params.fuse_steady_state = fuse;
  try {
    Schedule s = info.generate(params);
    if (s.placement.stage_to_actor == placement.stage_to_actor) {
      s.placement = placement;  // the same map; keep the assignment's kind
      return s;
    }
    if (why)
      *why = "it places the stages in " + std::string(to_string(s.placement.kind)) + " placement";
  } catch (const InputError& e) {
    if (why) *why = e.what();
  }
  return std::nullopt;
}

// "GPipe, Std1F1B, ..." : the schedules whose generator fits the placement, then the
// placement-free ones.
std::string fitting_schedules(const Placement& placement, int num_microbatches) {
  std::string out;
  for (const ScheduleInfo& info : all_schedules()) {
    if (placement_free_rule(info.name)) continue;
    if (generated_on(info, placement, num_microbatches, false, nullptr))
      out += (out.empty() ? "" : ", ") + info.name;
  }
  for (const std::string& name : placement_free_schedules())
    out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

std::vector<std::string> placement_free_schedules() {
  std::vector<std::string> out;
  for (const ScheduleInfo& info : all_schedules())
    if (placement_free_rule(info.name)) out.push_back(info.name);
  return out;
}

bool is_placement_free_schedule(std::string_view name) {
  const ScheduleInfo* info = find_schedule(name);
  return info != nullptr && placement_free_rule(info->name).has_value();
}

Schedule schedule_on_placement(std::string_view name, const Placement& placement,
                               int num_microbatches, bool fuse_steady_state,
                               const std::string& where) {
  const ScheduleInfo& info = schedule_or_throw(name);
  std::string why;
  if (std::optional<Schedule> s =
          generated_on(info, placement, num_microbatches, fuse_steady_state, &why))
    return std::move(*s);
  const std::optional<ShardySchedule> rule = placement_free_rule(info.name);
  if (!rule) {
    throw_input_error(
        where, "schedule '" + info.name + "' does not fit the assignment (" +
                   describe_placement(placement) + "): " + why +
                   "; schedules that fit: " + fitting_schedules(placement, num_microbatches));
  }
  ScheduleParams params;
  params.num_actors = placement.num_actors;
  params.num_stages = placement.num_stages();
  params.num_microbatches = num_microbatches;
  params.fuse_steady_state = fuse_steady_state;
  RuleProgram program;
  try {
    program = shardy_program_on(*rule, placement, params);
  } catch (const InputError& e) {
    throw_input_error(where, "schedule '" + info.name + "' on the assignment (" +
                                 describe_placement(placement) + "): " + e.what());
  }
  // The per-actor orders are projections of one topological order of the program (rule
  // edges that would close a cycle are never added), so they run without deadlock on any
  // placement: an invariant, tested over every placement of up to 5 stages on 2 and 3 actors.
  return schedule_from_orders(info.name, program, schedule_by_rules(program, shardy_rule(*rule)));
}

}  // namespace jaxpp
