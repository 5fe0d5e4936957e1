// One synthesis as `jaxpp-sim synthesize` and the Python module's synthesize() ask for it: the
// inputs in either mode, checked in the CLI's order with its messages (flag names), and the
// report `synthesize --json` prints.
//
//   measured mode  pp actors (one stage each), m microbatches, stage times in milliseconds:
//                  uniform (t_f, t_b, t_w, t_comm), a stage-times file or a stage-times document
//                  (costmodel/stage_times_cost.h); budget: memory_limit_microbatches per actor
//                  (default pp, ZB-H1's budget).
//   plan mode      a plan (one stage per actor) priced by its cost model; budget: stashed
//                  microbatches per actor, or bytes per device (default the cluster's HBM)
//                  turned into stashed microbatches (stash_budget_for_bytes).
//
// Which flags belong to which mode is the caller's check (the CLI refuses flags, Python refuses
// keyword arguments); run_synthesis checks what is required and every value.
//
// Usage:
//   SynthesisRequest r;  r.pp = 4;  r.microbatches = 8;  r.t_f_ms = 1;  r.t_b_ms = 1;  r.t_w_ms =
//   1; SynthesisRun out = run_synthesis(r, SynthesisOptions{}); out.report["step_time_s"];
//   out.result.schedule;  // the synthesized schedule
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/plan.h"
#include "simulator/synthesize.h"

namespace jaxpp {

struct SynthesisRequest {
  // Plan mode when set.
  std::optional<Plan> plan;
  std::string plan_source = "plan";          // names the plan in errors (its file)
  std::optional<int64_t> memory_limit_bytes;  // plan mode only
  // Measured mode.
  std::optional<int> pp;
  std::optional<int> microbatches;
  std::optional<double> t_f_ms, t_b_ms;
  double t_w_ms = 0, t_comm_ms = 0;
  std::string stage_times_file;                   // or
  std::optional<nlohmann::json> stage_times_doc;  // (source name: stage_times_source)
  std::string stage_times_source = "stage_times";
  // Both modes.
  std::optional<int> memory_limit_microbatches;
};

struct SynthesisRun {
  SynthesisResult result;
  std::vector<int> max_stashed;   // the budget per actor the search ran under
  nlohmann::ordered_json report;  // synthesize --json
  std::optional<Plan> plan;       // plan mode: the plan with the synthesized schedule
};

// `options.max_stashed` is set from the request; the other options (time budget, evaluation
// budget, progress) are the caller's. InputError with the CLI's message for a missing or bad input.
SynthesisRun run_synthesis(const SynthesisRequest& request, SynthesisOptions options);

// The --json report of a synthesis under the budget `max_stashed` (schedule, pp, microbatches,
// step time, bubble, peak stash, budget, origin, search, the built-in schedules considered).
nlohmann::ordered_json synthesis_to_json(const SynthesisResult& result,
                                         const std::vector<int>& max_stashed);

// --time-budget-s and --max-evaluations, checked as the CLI checks them.
void check_synthesis_budgets(double time_budget_s, int64_t max_evaluations);

}  // namespace jaxpp
