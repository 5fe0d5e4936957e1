#include "simulator/synthesis_request.h"

#include <string>
#include <utility>

#include "costmodel/cluster.h"
#include "costmodel/stage_times_cost.h"
#include "graph/error.h"
#include "graph/limits.h"
#include "graph/range_check.h"

namespace jaxpp {

nlohmann::ordered_json synthesis_to_json(const SynthesisResult& r,
                                         const std::vector<int>& max_stashed) {
  nlohmann::ordered_json j;
  j["schedule"] = r.schedule.name;
  j["pp"] = r.schedule.num_actors();
  j["num_microbatches"] = r.schedule.num_microbatches;
  j["step_time_s"] = r.step_time_s;
  j["bubble_rate"] = r.bubble_rate;
  j["peak_stashed"] = r.peak_stashed;
  j["memory_limit_microbatches"] = max_stashed;
  j["origin"] = r.origin;
  j["greedy_step_time_s"] = r.greedy_step_time_s;
  j["search"] = {
      {"evaluations", r.evaluations}, {"stopped_by", r.stopped_by}, {"seconds", r.search_s},
      {"constructions", r.constructions}};
  nlohmann::ordered_json named = nlohmann::ordered_json::array();
  for (const NamedCandidate& c : r.named) {
    if (!c.applicable) continue;
    named.push_back({{"name", c.name},
                     {"step_time_s", c.step_time_s},
                     {"bubble_rate", c.bubble_rate},
                     {"peak_stashed", c.peak_stashed},
                     {"fits", c.fits}});
  }
  j["named"] = named;
  return j;
}

void check_synthesis_budgets(double time_budget_s, int64_t max_evaluations) {
  check_double_in(time_budget_s, "--time-budget-s", 0, 3600, "a search time in seconds");
  if (max_evaluations < 0)
    throw_input_error("--max-evaluations", "must be >= 0, got " + std::to_string(max_evaluations));
}

namespace {

std::vector<int> microbatch_budget(const SynthesisRequest& request, int num_actors) {
  const int k = request.memory_limit_microbatches.value_or(num_actors);
  if (k < 1)
    throw_input_error("--memory-limit-microbatches",
                      std::to_string(k) +
                          " is below the minimum of 1 stashed microbatch per "
                          "stage (one stage per actor)");
  return std::vector<int>(num_actors, k);
}

}  // namespace

SynthesisRun run_synthesis(const SynthesisRequest& request, SynthesisOptions options) {
  SynthesisRun out;
  if (request.plan) {
    const Plan& plan = *request.plan;
    require_one_stage_per_actor(plan, request.plan_source);
    const int p = plan.placement.num_actors;
    if (request.memory_limit_microbatches) {
      options.max_stashed = microbatch_budget(request, p);
    } else {
      const int64_t limit =
          request.memory_limit_bytes
              ? *request.memory_limit_bytes
              : cluster_from_json(plan.cluster, request.plan_source + ": field 'cluster'")
                    .hbm_bytes;
      options.max_stashed = stash_budget_for_bytes(plan, limit);
    }
    PlanSynthesis ps = synthesize_for_plan(plan, options);
    out.result = std::move(ps.synthesis);
    out.max_stashed = options.max_stashed;
    out.report = synthesis_to_json(out.result, out.max_stashed);
    out.report["peak_memory_bytes"] = ps.metrics["peak_memory_bytes"];
    out.plan = std::move(ps.plan);
    return out;
  }
  if (!request.pp) throw_input_error("--pp", "required (pipeline actors, one stage each)");
  if (!request.microbatches) throw_input_error("--microbatches", "required (or give --plan)");
  const int p = *request.pp;
  const int m = *request.microbatches;
  if (p < 1 || p > kMaxStages)
    throw_input_error(
        "--pp", "must be in [1, " + std::to_string(kMaxStages) + "], got " + std::to_string(p));
  if (m < 1 || m > kMaxMicrobatches)
    throw_input_error("--microbatches", "must be in [1, " + std::to_string(kMaxMicrobatches) +
                                            "], got " + std::to_string(m));
  StageTimes times;
  if (!request.stage_times_file.empty()) {
    times = load_stage_times(request.stage_times_file, p);
  } else if (request.stage_times_doc) {
    times = stage_times_from_json(*request.stage_times_doc, request.stage_times_source, p);
  } else {
    if (!request.t_f_ms)
      throw_input_error("--t-f", "required in measured mode (or --stage-times FILE)");
    if (!request.t_b_ms)
      throw_input_error("--t-b", "required in measured mode (or --stage-times FILE)");
    times = uniform_stage_times(p, stage_time_s_from_ms(*request.t_f_ms, false, "--t-f"),
                                stage_time_s_from_ms(*request.t_b_ms, false, "--t-b"),
                                stage_time_s_from_ms(request.t_w_ms, true, "--t-w"),
                                stage_time_s_from_ms(request.t_comm_ms, true, "--t-comm"));
  }
  options.max_stashed = microbatch_budget(request, p);
  out.result = synthesize_schedule(p, m, times, options);
  out.max_stashed = options.max_stashed;
  out.report = synthesis_to_json(out.result, out.max_stashed);
  return out;
}

}  // namespace jaxpp
