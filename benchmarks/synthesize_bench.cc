// Schedule synthesis (simulator/synthesize.h): wall time of a whole synthesis (greedy
// constructions, built-in candidates, local search, engine check) for p = 8, m = 24 (the search
// ends at a local optimum) and p = 64, m = 256 (the search runs until its time budget; the
// construction-only case sets the budget to 0). Counters: the synthesized step and bubble rate
// (T_F = 1 ms, T_B = 1 ms, T_W = 0.5 ms, T_comm = 0.05 ms), the search's replays.
//
// BM_ZeroBubblePaper: the twelve settings of the Zero Bubble paper (Qi et al., ICLR 2024; the
// profiled stage times of its Table 9 and the bubble rates of its Table 5, in
// tests/data/zero_bubble/paper_tables.json), synthesized with a budget of p and of 2p stashed
// microbatches (the paper's ZB-1p and ZB-2p memory limits) and the CLI's default search budget of
// 2 s. Counters: our bubble rate, the paper's ZB-1p or ZB-2p figure, ZB-H1 in our simulation and
// in the paper, and our rate minus the paper's. Label: model, p, m, how the search stopped.
#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "schedules/registry.h"
#include "simulator/plan_builder.h"
#include "simulator/synthesize.h"

namespace jaxpp {
namespace {

void BM_Synthesize(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  const int k = static_cast<int>(state.range(2));
  SynthesisOptions o;
  o.max_stashed.assign(p, k);
  o.time_budget_s = static_cast<double>(state.range(3)) / 1000.0;
  const StageTimes t = uniform_stage_times(p, 1e-3, 1e-3, 0.5e-3, 0.05e-3);
  SynthesisResult r;
  for (auto _ : state) {
    r = synthesize_schedule(p, m, t, o);
    benchmark::DoNotOptimize(r);
  }
  state.counters["step_ms"] = r.step_time_s * 1e3;
  state.counters["bubble_rate"] = r.bubble_rate;
  state.counters["evaluations"] = static_cast<double>(r.evaluations);
  state.counters["search_s"] = r.search_s;
  state.SetItemsProcessed(state.iterations() * 3 * int64_t{p} * m);
}
// Args: p, m, budget K (stashed microbatches), search time budget in ms.
BENCHMARK(BM_Synthesize)
    ->Args({8, 24, 8, 2000})
    ->Args({8, 24, 16, 2000})
    ->Args({64, 256, 64, 0})
    ->Args({64, 256, 128, 0})
    ->Args({64, 256, 128, 2000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

const nlohmann::json& zero_bubble_paper_settings() {
  static const nlohmann::json settings = [] {
    std::ifstream in(std::string(JAXPP_TEST_DATA_DIR) + "/zero_bubble/paper_tables.json");
    return nlohmann::json::parse(in).at("settings");
  }();
  return settings;
}

// Args: index of the setting in the data file, budget factor (1: K = p, 2: K = 2p).
void BM_ZeroBubblePaper(benchmark::State& state) {
  const nlohmann::json& s = zero_bubble_paper_settings().at(state.range(0));
  const int factor = static_cast<int>(state.range(1));
  const int p = s.at("p").get<int>();
  const int m = s.at("m").get<int>();
  const StageTimes t = uniform_stage_times(
      p, s.at("t_f_ms").get<double>() * 1e-3, s.at("t_b_ms").get<double>() * 1e-3,
      s.at("t_w_ms").get<double>() * 1e-3, s.at("t_comm_ms").get<double>() * 1e-3);
  SynthesisOptions o;
  o.max_stashed.assign(p, factor * p);
  o.time_budget_s = 2.0;
  SynthesisResult r;
  for (auto _ : state) {
    r = synthesize_schedule(p, m, t, o);
    benchmark::DoNotOptimize(r);
  }
  const Schedule zb_h1 = generate_schedule("zb-h1", {.num_actors = p, .num_microbatches = m});
  PlanSimOptions so;
  so.record_trace = false;
  const double paper = s.at("paper_bubble_rate").at(factor == 1 ? "ZB-1p" : "ZB-2p").get<double>();
  state.counters["bubble_rate"] = r.bubble_rate;
  state.counters["paper_zb"] = paper;
  state.counters["minus_paper"] = r.bubble_rate - paper;
  state.counters["zb_h1"] = simulate_stage_times(zb_h1, t, so).result.bubble_rate;
  state.counters["paper_zb_h1"] = s.at("paper_bubble_rate").at("ZB-H1").get<double>();
  state.counters["evaluations"] = static_cast<double>(r.evaluations);
  state.SetLabel(s.at("model").get<std::string>() + " p=" + std::to_string(p) + " m=" +
                 std::to_string(m) + " K=" + std::to_string(factor * p) + " " + r.stopped_by);
}
BENCHMARK(BM_ZeroBubblePaper)
    ->ArgsProduct({benchmark::CreateDenseRange(0, 11, 1), {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
}  // namespace jaxpp

BENCHMARK_MAIN();
