#include "simulator/what_if.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "graph/error.h"
#include "simulator/plan_builder.h"

namespace jaxpp {

nlohmann::json perturbation_report(const SimResult& baseline, const SimResult& perturbed,
                                   const Perturbation& perturbation) {
  nlohmann::json actors = nlohmann::json::array();
  for (size_t r = 0; r < perturbed.actors.size() && r < baseline.actors.size(); ++r) {
    const ActorStats& b = baseline.actors[r];
    const ActorStats& p = perturbed.actors[r];
    actors.push_back({{"actor", r},
                      {"baseline_busy_s", b.busy_s},
                      {"busy_s", p.busy_s},
                      {"baseline_idle_s", b.idle_s},
                      {"idle_s", p.idle_s},
                      {"idle_delta_s", p.idle_s - b.idle_s},
                      {"end_delay_s", p.last_end_s - b.last_end_s}});
  }
  return {{"spec", perturbation.to_string()},
          {"baseline_step_time_s", baseline.step_time_s},
          {"step_time_s", perturbed.step_time_s},
          {"slowdown", perturbed.step_time_s / baseline.step_time_s},
          {"baseline_bubble_rate", baseline.bubble_rate},
          {"bubble_rate", perturbed.bubble_rate},
          {"actors", actors}};
}

SimulatedPlan simulate_plan_perturbed(const Plan& plan, const PlanSimOptions& options,
                                      const Perturbation& perturbation) {
  check_perturbation(perturbation, plan.placement.num_actors, plan.config.num_microbatches,
                     "--perturb");
  if (perturbation.nominal_seq_len > 0)
    throw_input_error("--perturb", "nominal-seq-len is for measured mode; model mode prices "
                                   "seq-lens against the model's seq_len (" +
                                       std::to_string(plan.model.tokens_per_sequence()) + ")");
  PlanSimOptions base_options = options;
  base_options.record_trace = false;
  base_options.perturbation = nullptr;
  const SimulatedPlan base = simulate_plan(plan, base_options);
  PlanSimOptions perturbed_options = options;
  perturbed_options.perturbation = &perturbation;
  SimulatedPlan sim = simulate_plan(plan, perturbed_options);
  sim.metrics["perturbation"] = perturbation_report(base.result, sim.result, perturbation);
  return sim;
}

double nearest_rank_quantile(std::vector<double> values, double p) {
  assert(!values.empty() && p > 0 && p <= 1 && "nearest_rank_quantile: bad arguments");
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::max<size_t>(rank, 1) - 1];
}

std::vector<RobustEntry> robust_ranking(const ExploreRequest& request, const ExploreResult& result,
                                        int runs, double jitter, int top,
                                        const std::vector<std::pair<int64_t, Plan>>& plans) {
  std::vector<RobustEntry> out;
  for (size_t i = 0; i < result.ranking.size() && static_cast<int>(i) < top; ++i) {
    const ConfigRecord& rec = result.records[result.ranking[i]];
    const Plan* given = nullptr;
    for (const auto& [id, p] : plans)
      if (id == rec.id) given = &p;
    const Plan plan = given ? *given : build_config_plan(request, rec.config);
    std::vector<double> steps;
    for (int seed = 1; seed <= runs; ++seed) {
      Perturbation p;
      p.jitter = jitter;
      p.seed = static_cast<uint64_t>(seed);
      PlanSimOptions so;
      so.record_trace = false;
      so.check_memory = false;
      so.overlap_grad_reduce = request.overlap_grad_reduce;
      so.perturbation = &p;
      steps.push_back(simulate_plan(plan, so).result.step_time_s);
    }
    RobustEntry e;
    e.id = rec.id;
    e.nominal_step_time_s = rec.step_time_s;
    e.p50_step_time_s = nearest_rank_quantile(steps, 0.5);
    e.p90_step_time_s = nearest_rank_quantile(steps, 0.9);
    e.max_step_time_s = *std::max_element(steps.begin(), steps.end());
    out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const RobustEntry& a, const RobustEntry& b) {
    if (a.p90_step_time_s != b.p90_step_time_s) return a.p90_step_time_s < b.p90_step_time_s;
    if (a.p50_step_time_s != b.p50_step_time_s) return a.p50_step_time_s < b.p50_step_time_s;
    return a.id < b.id;
  });
  return out;
}

}  // namespace jaxpp
