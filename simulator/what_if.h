// What-if studies on top of the simulator: how a perturbation (costmodel/perturbed_cost.h: a slow
// actor, a slow link, seeded jitter of task times) propagates through a pipeline, and a ranking of
// explored configurations by their 90th-percentile step time over jittered runs.
//
//   perturbation_report  compares a baseline and a perturbed simulation of the same program:
//                        step time and slowdown, bubble rate, and per actor the idle time before
//                        and after and how much later its last compute ends (end_delay_s), which
//                        shows how a delay on one actor spreads to the others.
//   robust_ranking       for the `top` best configurations of an exploration (the explorer's own
//                        ranking), simulates `runs` copies with jitter j and seeds 1..runs and
//                        ranks them by p90 (nearest rank: the ceil(0.9·runs)-th smallest), then
//                        p50, then id. Deterministic: the jitter of an instruction depends only on
//                        its seed and identity.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/perturbed_cost.h"
#include "simulator/engine.h"
#include "simulator/explorer.h"
#include "simulator/plan_builder.h"

namespace jaxpp {

nlohmann::json perturbation_report(const SimResult& baseline, const SimResult& perturbed,
                                   const Perturbation& perturbation);

// simulate --perturb in model mode: the plan simulated without and with `perturbation` (checked
// against the plan's actors, InputError naming --perturb), the perturbed metrics with the
// "perturbation" report added. `options.perturbation` is ignored; the trace is the perturbed one.
SimulatedPlan simulate_plan_perturbed(const Plan& plan, const PlanSimOptions& options,
                                      const Perturbation& perturbation);

struct RobustEntry {
  int64_t id = 0;
  double nominal_step_time_s = 0;  // the exploration's (unperturbed) step time
  double p50_step_time_s = 0;
  double p90_step_time_s = 0;
  double max_step_time_s = 0;
};

// The p-th quantile (0 < p <= 1) by nearest rank of `values` (not empty).
double nearest_rank_quantile(std::vector<double> values, double p);

// `plans` gives the plan of records the explorer cannot rebuild from their configuration (the
// synthesized ones of explore_synthesize.h, by id); other records are rebuilt with
// build_config_plan.
std::vector<RobustEntry> robust_ranking(const ExploreRequest& request, const ExploreResult& result,
                                        int runs, double jitter, int top,
                                        const std::vector<std::pair<int64_t, Plan>>& plans = {});

}  // namespace jaxpp
