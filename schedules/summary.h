// JSON summaries of a schedule, shared by `jaxpp-sim show --json`, `jaxpp-sim validate --json` and
// the Python module (jaxpp_sim.show, jaxpp_sim.validate).
//
//   schedule_summary_json      show: schedule, num_actors, num_stages, num_microbatches,
//                              placement, stage_to_actor, split_backward, actors (per-actor item
//                              strings), makespan_unit (the unit-cost timeline), peak_in_flight
//   schedule_file_report_json  validate of a schedule file: file, kind "schedule", schedule, ok,
//                              errors, num_actors, num_stages, num_microbatches, stage_to_actor,
//                              peak_in_flight and, when valid, makespan_unit
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "schedules/schedule.h"
#include "schedules/validate.h"

namespace jaxpp {

nlohmann::ordered_json schedule_summary_json(const Schedule& schedule,
                                             const ValidationReport& report, int64_t makespan_unit);

nlohmann::ordered_json schedule_file_report_json(const std::string& path, const Schedule& schedule,
                                                 const ValidationReport& report);

}  // namespace jaxpp
