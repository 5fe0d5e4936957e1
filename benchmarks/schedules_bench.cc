// Schedule library throughput: generating, validating (with dependency replay) and lowering
// large schedules. Reported as tasks per second (items_per_second).
#include <benchmark/benchmark.h>

#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace jaxpp {
namespace {

ScheduleParams big_params(const std::string& name) {
  const int p = 16, m = 64;
  ScheduleParams params{.num_actors = p, .num_microbatches = m};
  if (name == "Interleaved1F1B" || name == "MegatronInterleaved") params.num_stages = 4 * p;
  return params;
}

void BM_Generate(benchmark::State& state, const std::string& name) {
  const ScheduleParams params = big_params(name);
  int64_t tasks = 0;
  for (auto _ : state) {
    const Schedule s = generate_schedule(name, params);
    tasks += s.num_tasks();
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(tasks);
}

void BM_Validate(benchmark::State& state, const std::string& name) {
  const Schedule s = generate_schedule(name, big_params(name));
  for (auto _ : state) {
    const ValidationReport r = validate_schedule(s);
    if (!r.ok()) state.SkipWithError(r.errors[0].c_str());
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * s.num_tasks());
}

void BM_Lower(benchmark::State& state, const std::string& name) {
  const Schedule s = generate_schedule(name, big_params(name));
  for (auto _ : state) {
    const Program prog = lower(s, {});
    benchmark::DoNotOptimize(prog);
  }
  state.SetItemsProcessed(state.iterations() * s.num_tasks());
}

BENCHMARK_CAPTURE(BM_Generate, std1f1b_p16_m64, std::string("Std1F1B"));
BENCHMARK_CAPTURE(BM_Generate, interleaved_p16_v4_m64, std::string("Interleaved1F1B"));
BENCHMARK_CAPTURE(BM_Validate, zerobubble_p16_m64, std::string("ZeroBubble"));
BENCHMARK_CAPTURE(BM_Validate, interleaved_p16_v4_m64, std::string("Interleaved1F1B"));
BENCHMARK_CAPTURE(BM_Validate, dualpipev_p16_m64, std::string("DualPipeV"));
BENCHMARK_CAPTURE(BM_Lower, zerobubble_p16_m64, std::string("ZeroBubble"));
BENCHMARK_CAPTURE(BM_Lower, megatron_p16_v4_m64, std::string("MegatronInterleaved"));

}  // namespace
}  // namespace jaxpp

BENCHMARK_MAIN();
