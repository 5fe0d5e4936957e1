// The document `jaxpp-sim explore --json` prints and the Python module's explore() returns: the
// explorer's result (explore_result_to_json) with the warnings about the best configuration and,
// when they ran, the what-if additions: the robust ranking (what_if.h, --robust) and the summary
// of the schedule synthesis (explore_synthesize.h, --synthesize).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "simulator/explore_synthesize.h"
#include "simulator/explorer.h"
#include "simulator/what_if.h"

namespace jaxpp {

// What the explore --json document holds beyond the explorer's result; null = not run.
struct ExploreExtras {
  const ExploreSynthesis* synthesis = nullptr;       // --synthesize
  const std::vector<RobustEntry>* robust = nullptr;  // --robust N
  int robust_runs = 0;
  double robust_jitter = 0;
};

// Warnings about a ranked exploration (result.ranking not empty): the best configuration idles
// 90 % or more of its step (every configuration is dominated by bubbles or transfers).
std::vector<std::string> explore_warnings(const ExploreResult& result);

// explore_result_to_json(request, result, top, include_pruned) with "warnings" and, per `extras`,
// "robust" ({runs, jitter, ranking}) and "synthesis" ({considered, improved, seconds}).
nlohmann::json explore_summary_json(const ExploreRequest& request, const ExploreResult& result,
                                    int top, bool include_pruned, const ExploreExtras& extras);

}  // namespace jaxpp
