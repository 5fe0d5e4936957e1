#include "simulator/explore_summary.h"

#include <cstdio>

namespace jaxpp {

std::vector<std::string> explore_warnings(const ExploreResult& result) {
  std::vector<std::string> warnings;
  if (result.ranking.empty()) return warnings;
  const ConfigRecord& best = result.records[result.ranking.front()];
  if (best.bubble_rate >= 0.9) {
    char percent[32];
    std::snprintf(percent, sizeof percent, "%.0f", best.bubble_rate * 100);
    warnings.push_back("the best configuration idles " + std::string(percent) +
                       "% of its step (bubble rate): every configuration of this space is "
                       "dominated by pipeline bubbles or transfers");
  }
  return warnings;
}

nlohmann::json explore_summary_json(const ExploreRequest& request, const ExploreResult& result,
                                    int top, bool include_pruned, const ExploreExtras& extras) {
  nlohmann::json summary = explore_result_to_json(request, result, top, include_pruned);
  summary["warnings"] = explore_warnings(result);
  if (extras.robust) {
    nlohmann::json ranking = nlohmann::json::array();
    const std::vector<RobustEntry>& robust = *extras.robust;
    for (size_t i = 0; i < robust.size(); ++i)
      ranking.push_back({{"rank", i + 1},
                         {"id", robust[i].id},
                         {"config", describe_config(result.records[robust[i].id].config)},
                         {"step_time_s", robust[i].nominal_step_time_s},
                         {"p50_step_time_s", robust[i].p50_step_time_s},
                         {"p90_step_time_s", robust[i].p90_step_time_s},
                         {"max_step_time_s", robust[i].max_step_time_s}});
    summary["robust"] = {
        {"runs", extras.robust_runs}, {"jitter", extras.robust_jitter}, {"ranking", ranking}};
  }
  if (extras.synthesis)
    summary["synthesis"] = {{"considered", extras.synthesis->considered},
                            {"improved", extras.synthesis->improved},
                            {"seconds", extras.synthesis->seconds}};
  return summary;
}

}  // namespace jaxpp
