// Test helper: a built-in schedule generated and lowered to a Program.
#pragma once

#include <string>

#include "graph/program.h"
#include "schedules/lower.h"
#include "schedules/registry.h"

namespace jaxpp {

// Schedule `name` for p actors and m microbatches (stages: 0 = the schedule's default), lowered
// with default options.
inline Program lowered(const std::string& name, int p, int m, int stages = 0) {
  ScheduleParams params;
  params.num_actors = p;
  params.num_microbatches = m;
  params.num_stages = stages;
  return lower(generate_schedule(name, params), {});
}

}  // namespace jaxpp
