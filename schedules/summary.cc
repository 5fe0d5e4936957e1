#include "schedules/summary.h"

#include "schedules/timeline.h"

namespace jaxpp {

nlohmann::ordered_json schedule_summary_json(const Schedule& schedule,
                                             const ValidationReport& report,
                                             int64_t makespan_unit) {
  nlohmann::json actors = nlohmann::json::array();
  for (const auto& items : schedule.actors) {
    nlohmann::json list = nlohmann::json::array();
    for (const ScheduleItem& item : items) list.push_back(item_to_string(item));
    actors.push_back(std::move(list));
  }
  return {{"schedule", schedule.name},
          {"num_actors", schedule.num_actors()},
          {"num_stages", schedule.num_stages},
          {"num_microbatches", schedule.num_microbatches},
          {"placement", std::string(to_string(schedule.placement.kind))},
          {"stage_to_actor", schedule.placement.stage_to_actor},
          {"split_backward", schedule.split_backward},
          {"actors", std::move(actors)},
          {"makespan_unit", makespan_unit},
          {"peak_in_flight", report.peak_in_flight}};
}

nlohmann::ordered_json schedule_file_report_json(const std::string& path, const Schedule& schedule,
                                                 const ValidationReport& report) {
  nlohmann::ordered_json out = {{"file", path},
                                {"kind", "schedule"},
                                {"schedule", schedule.name},
                                {"ok", report.ok()},
                                {"errors", report.errors},
                                {"num_actors", schedule.num_actors()},
                                {"num_stages", schedule.num_stages},
                                {"num_microbatches", schedule.num_microbatches},
                                {"stage_to_actor", schedule.placement.stage_to_actor},
                                {"peak_in_flight", report.peak_in_flight}};
  if (report.ok()) out["makespan_unit"] = unit_cost_timeline(schedule).makespan;
  return out;
}

}  // namespace jaxpp
