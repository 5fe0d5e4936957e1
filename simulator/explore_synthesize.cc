#include "simulator/explore_synthesize.h"

#include <chrono>
#include <set>
#include <string>

#include "simulator/synthesize.h"

namespace jaxpp {

ExploreSynthesis add_synthesized_configs(const ExploreRequest& request, ExploreResult& result,
                                         const ExploreSynthesisOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  ExploreSynthesis out;
  std::vector<ConfigRecord> records = result.records;
  std::set<std::string> seen;
  for (int64_t id : result.ranking) {
    if (out.considered >= options.top_groups) break;
    const ConfigRecord& base = result.records[id];
    if (base.config.virtual_stages != 1 || base.config.pp < 2) continue;
    ParallelConfig key = base.config;
    key.schedule.clear();
    if (!seen.insert(describe_config(key)).second) continue;  // a faster schedule came first
    ++out.considered;
    const Plan plan = build_config_plan(request, base.config);
    SynthesisOptions so;
    so.time_budget_s = options.time_budget_s;
    so.max_evaluations = options.max_evaluations;
    so.max_stashed = stash_budget_for_bytes(plan, result.max_memory_bytes);
    PlanSynthesis ps = synthesize_for_plan(plan, so);
    if (!(ps.synthesis.step_time_s < base.step_time_s * (1 - 1e-9))) continue;
    ConfigRecord rec;
    rec.id = static_cast<int64_t>(records.size());
    rec.config = ps.plan.config;
    rec.status = ConfigStatus::kSimulated;
    const nlohmann::json& m = ps.metrics;
    rec.step_time_s = m.at("step_time_s").get<double>();
    rec.bubble_rate = m.at("bubble_rate").get<double>();
    rec.tokens_per_s = m.at("tokens_per_s").get<double>();
    rec.tflops_per_gpu = m.at("tflops_per_gpu").get<double>();
    rec.mfu = m.at("mfu").get<double>();
    const nlohmann::json& peaks = m.at("peak_memory_bytes");
    for (size_t r = 0; r < peaks.size(); ++r) {
      const int64_t peak = peaks[r].get<int64_t>();
      if (peak > rec.peak_memory_bytes) {
        rec.peak_memory_bytes = peak;
        rec.peak_memory_actor = static_cast<int>(r);
      }
    }
    rec.fits = rec.peak_memory_bytes <= result.max_memory_bytes;
    records.push_back(rec);
    out.plans.emplace_back(rec.id, std::move(ps.plan));
    ++out.improved;
  }
  const ExploreTimings timings = result.timings;
  result = finish_exploration(request, std::move(records));
  result.timings = timings;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

const Plan* synthesized_plan(const ExploreSynthesis& synthesis, int64_t id) {
  for (const auto& [plan_id, plan] : synthesis.plans)
    if (plan_id == id) return &plan;
  return nullptr;
}

}  // namespace jaxpp
