// Runtime benchmarks (threads backend):
//   BM_OverheadPerInstruction   emulated run with zero-duration tasks: the step time divided by
//                               the longest actor instruction list = executor + backend overhead
//                               per instruction (target < 20 us)
//   BM_EmulatedVsSimulated      emulated step time vs the simulator's prediction for the same
//                               stage times (Std1F1B and ZeroBubble, p = 8, m = 32; target 5%)
//   BM_RealComputeStep          real fp64 MLP numerics, step time of a small pipeline
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>

#include "costmodel/stage_times_cost.h"
#include "runtime/run.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "simulator/engine.h"

namespace jaxpp {
namespace {

Program lowered(const char* name, int p, int m) {
  ScheduleParams params;
  params.num_actors = p;
  params.num_microbatches = m;
  return lower(generate_schedule(name, params), {});
}

int64_t longest_list(const Program& prog) {
  size_t n = 0;
  for (const auto& list : prog.actors) n = std::max(n, list.size());
  return static_cast<int64_t>(n);
}

void BM_OverheadPerInstruction(benchmark::State& state) {
  int p = static_cast<int>(state.range(0));
  int m = static_cast<int>(state.range(1));
  Program prog = lowered("Std1F1B", p, m);
  StageTimesCost cost(uniform_stage_times(prog.num_stages, 0, 0, 0, 0));
  RunOptions o;
  o.emulated = true;
  o.steps = 5;
  o.warmup = 1;
  double step_s = 0;
  for (auto _ : state) step_s = run_program(prog, &cost, o).step_time_s;
  state.counters["step_time_us"] = step_s * 1e6;
  state.counters["us_per_instruction"] = step_s * 1e6 / longest_list(prog);
  state.counters["instructions_per_actor"] = static_cast<double>(longest_list(prog));
}
BENCHMARK(BM_OverheadPerInstruction)->Args({4, 32})->Args({8, 32})->Iterations(3)
    ->Unit(benchmark::kMillisecond);

void BM_EmulatedVsSimulated(benchmark::State& state, const char* schedule) {
  Program prog = lowered(schedule, 8, 32);
  const double t_s = static_cast<double>(state.range(0)) * 1e-3;
  StageTimesCost cost(uniform_stage_times(prog.num_stages, t_s, t_s, t_s, 0));
  double predicted_s = simulate(prog, cost, {}).step_time_s;
  RunOptions o;
  o.emulated = true;
  o.steps = 3;
  o.warmup = 1;
  double measured_s = 0;
  for (auto _ : state) measured_s = run_program(prog, &cost, o).step_time_s;
  state.counters["predicted_s"] = predicted_s;
  state.counters["measured_s"] = measured_s;
  state.counters["error_pct"] = 100 * (measured_s - predicted_s) / predicted_s;
}
BENCHMARK_CAPTURE(BM_EmulatedVsSimulated, Std1F1B, "Std1F1B")->Arg(2)->Arg(5)->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EmulatedVsSimulated, ZeroBubble, "ZeroBubble")->Arg(2)->Arg(5)
    ->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_RealComputeStep(benchmark::State& state) {
  Program prog = lowered("Std1F1B", 4, 8);
  RunOptions o;
  o.steps = 3;
  o.warmup = 1;
  o.mlp.hidden = static_cast<int>(state.range(0));
  o.mlp.seq = 32;
  o.mlp.layers_per_stage = 2;
  double step_s = 0;
  for (auto _ : state) step_s = run_program(prog, nullptr, o).step_time_s;
  state.counters["step_time_s"] = step_s;
}
BENCHMARK(BM_RealComputeStep)->Arg(64)->Arg(128)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace jaxpp

BENCHMARK_MAIN();
