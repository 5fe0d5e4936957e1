// explore --synthesize: a synthesized schedule (simulator/synthesize.h) considered for the best
// configurations of an exploration, next to the registry schedules.
//
// After the explorer has ranked its space, the `top_groups` best configurations that differ in
// more than the schedule and have one stage per actor (v = 1, pp > 1) are taken, best first. For
// each, the plan is built (build_config_plan) and synthesize_for_plan searches a schedule under
// the exploration's memory limit (the stash budget per actor in bytes, stash_budget_for_bytes),
// with a small per-configuration search budget. When the result is faster than every registry
// schedule of that configuration, it is added as a new simulated record (id = the next free id,
// schedule "synthesized", metrics from simulate_plan) and the ranking and Pareto front are
// recomputed (finish_exploration). The plan of each added record is kept, so the caller can write
// it (its program is the synthesized one; the registry cannot regenerate it from the name).
//
// Cost: per configuration, one plan build and simulation, the synthesis (greedy constructions,
// the fitting registry schedules simulated with the cost model, the search bounded by
// time_budget_s and max_evaluations). The explorer itself is unchanged.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "graph/plan.h"
#include "simulator/explorer.h"

namespace jaxpp {

struct ExploreSynthesisOptions {
  int top_groups = 10;             // configurations synthesized for, best first
  double time_budget_s = 0.1;      // local search per configuration, wall clock
  int64_t max_evaluations = 2000;  // local search per configuration, replays (0 = no bound)
};

struct ExploreSynthesis {
  int considered = 0;  // configurations synthesized for
  int improved = 0;    // of those, faster than every registry schedule (records added)
  double seconds = 0;  // wall clock
  std::vector<std::pair<int64_t, Plan>> plans;  // added record id -> its plan (predicted filled)
};

// Adds the synthesized records to `result` (see above) and returns what was done.
ExploreSynthesis add_synthesized_configs(const ExploreRequest& request, ExploreResult& result,
                                         const ExploreSynthesisOptions& options);

// The plan of an added record, nullptr for an id the synthesis did not add.
const Plan* synthesized_plan(const ExploreSynthesis& synthesis, int64_t id);

}  // namespace jaxpp
