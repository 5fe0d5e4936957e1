// Schedule synthesis (simulator/synthesize.h): wall time of a whole synthesis (greedy
// constructions, built-in candidates, local search, engine check) for p = 8, m = 24 (the search
// ends at a local optimum) and p = 64, m = 256 (the search runs until its time budget; the
// construction-only case sets the budget to 0). Counters: the synthesized step and bubble rate
// (T_F = 1 ms, T_B = 1 ms, T_W = 0.5 ms, T_comm = 0.05 ms), the search's replays.
#include <benchmark/benchmark.h>

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

}  // namespace
}  // namespace jaxpp

BENCHMARK_MAIN();
