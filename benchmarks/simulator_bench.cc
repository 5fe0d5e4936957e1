// Simulator throughput on large plans: simulated instructions per second of the discrete-event
// engine (simulator/engine.h) and its memory per instruction.
//
//   BM_Engine          simulate() alone on a program lowered once outside the timed loop.
//                      Plans: ZeroBubble (ZB-H1) with pp = 64, m = 1024 and Interleaved1F1B with
//                      pp = 64, v = 4, m = 1024. Costs: `stage_times` (measured mode, T_comm as
//                      pure latency) or `analytic` (a 256-layer GPT on a100-80g: finite link
//                      bandwidths, so the link-sharing path runs). With record_trace on and off.
//                      Target: >= 5 million instructions per second on one core.
//   BM_BuildPlan       schedule generation + partition + lowering of the same analytic plans,
//                      to see whether building dominates an end-to-end `simulate`.
//   BM_EngineMemory    ZeroBubble, pp = 64, m = 256 … 1024: bytes per instruction stay flat,
//                      i.e. memory is linear in the plan.
//   BM_SimulateCommand the whole in-process path of `jaxpp-sim simulate --schedule zerobubble
//                      --pp 64 --microbatches 1024 --t-f 1 --t-b 1 --t-w 1 --t-comm 0.05 --json`
//                      (measured mode) and of the same in unit time (no --t-comm, the case of
//                      the 4 M/s target): schedule generation, validation, lowering, engine,
//                      metrics and the JSON text, everything freed again. Only process start-up
//                      and flag parsing are left out. Target: >= 4 million instructions per
//                      second for the process as a whole, which benchmarks/startup_bench.cc
//                      measures (BM_SimulateProcess).
//   BM_UnitTimePhase   the phases of that unit-time command, each alone on inputs built outside
//                      the timed loop: schedule generation (`generate`), validation with its
//                      dependency replay (`validate`), lowering (`lower`, which validates
//                      first) and the engine without a trace (`engine`; transfers without
//                      latency or bytes, which end at the time they start).
//
// Counters: instructions (per simulate call), instructions_per_s (rate over the timed loop),
// peak_heap_bytes_per_instruction (highest live heap during one simulate() call above what was
// live before it, counted by the operator new below, measured once outside the timed loop),
// peak_rss_mib (process high-water mark, for orientation only: it includes every earlier case).
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <sstream>
#include <string>

#include "costmodel/analytic_cost.h"
#include "costmodel/cluster.h"
#include "costmodel/stage_times_cost.h"
#include "graph/model.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "simulator/engine.h"
#include "simulator/plan_builder.h"

// Live-heap accounting for the memory counters. Only active while g_track_heap is set, so the
// timed loops pay one relaxed load per allocation.
namespace {
std::atomic<bool> g_track_heap{false};
std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};

void* counted_alloc(std::size_t n, std::size_t alignment = 0) {
  if (n == 0) n = 1;
  void* p = alignment == 0
                ? std::malloc(n)
                : std::aligned_alloc(alignment, (n + alignment - 1) / alignment * alignment);
  if (p == nullptr) throw std::bad_alloc();
  if (g_track_heap.load(std::memory_order_relaxed)) {
    const int64_t live = g_live_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p)),
                                                std::memory_order_relaxed) +
                         static_cast<int64_t>(malloc_usable_size(p));
    int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
    while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
    }
  }
  return p;
}

void counted_free(void* p) {
  if (p == nullptr) return;
  if (g_track_heap.load(std::memory_order_relaxed)) {
    g_live_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  }
  std::free(p);
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void* operator new(std::size_t n, std::align_val_t a) {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }

namespace jaxpp {
namespace {

constexpr int kPp = 64;
constexpr int kMicrobatches = 1024;
constexpr int kVirtual = 4;

// A GPT-style model with 256 transformer layers, so that 64 actors × 4 virtual stages each get
// one layer.
ModelSpec bench_model() {
  return model_from_json({{"name", "bench-gpt-256l"},
                          {"layers", 256},
                          {"hidden", 4096},
                          {"heads", 32},
                          {"seq_len", 2048},
                          {"vocab", 51200}},
                         "bench model");
}

PlanRequest analytic_request(const std::string& schedule, int m) {
  PlanRequest req;
  req.model = bench_model();
  req.cluster = cluster_preset("a100-80g");
  ParallelConfig& c = req.config;
  c.gpus = kPp;
  c.pp = kPp;
  c.virtual_stages = schedule == "Interleaved1F1B" ? kVirtual : 1;
  c.global_batch = m;
  c.microbatch_size = 1;
  c.schedule = schedule;
  req.partition = PartitionMode::kEven;
  return req;
}

Program stage_times_program(const std::string& schedule, int m) {
  ScheduleParams params;
  params.num_actors = kPp;
  params.num_stages = schedule == "Interleaved1F1B" ? kPp * kVirtual : 0;
  params.num_microbatches = m;
  return lower(generate_schedule(schedule, params), {});
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Highest live heap (bytes) during one simulate() call, above what was live before it.
int64_t peak_heap_bytes_of_one_run(const Program& program, const CostProvider& cost,
                                   const SimOptions& options) {
  g_live_bytes = 0;
  g_peak_bytes = 0;
  g_track_heap = true;
  {
    const SimResult r = simulate(program, cost, options);
    benchmark::DoNotOptimize(r.makespan_s);
  }
  g_track_heap = false;
  return g_peak_bytes.load();
}

void run_engine(benchmark::State& state, const Program& program, const CostProvider& cost,
                bool record_trace) {
  SimOptions options;
  options.record_trace = record_trace;
  const int64_t n = program.num_instructions();
  const int64_t peak_heap = peak_heap_bytes_of_one_run(program, cost, options);
  double makespan_s = 0;
  for (auto _ : state) {
    const SimResult r = simulate(program, cost, options);
    benchmark::DoNotOptimize(&r);
    makespan_s = r.makespan_s;
  }
  state.counters["instructions"] = static_cast<double>(n);
  state.counters["instructions_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_heap_bytes_per_instruction"] =
      static_cast<double>(peak_heap) / static_cast<double>(n);
  state.counters["peak_rss_mib"] = peak_rss_mib();
  state.counters["makespan_s"] = makespan_s;
}

void BM_Engine_StageTimes(benchmark::State& state, const std::string& schedule) {
  const bool record_trace = state.range(0) != 0;
  const Program program = stage_times_program(schedule, kMicrobatches);
  const StageTimesCost cost(
      uniform_stage_times(program.num_stages, 1e-3, 1e-3, 1e-3, 5e-5));  // ms-scale, 5% comm
  run_engine(state, program, cost, record_trace);
}

void BM_Engine_Analytic(benchmark::State& state, const std::string& schedule) {
  const bool record_trace = state.range(0) != 0;
  const PlanRequest req = analytic_request(schedule, kMicrobatches);
  const Plan plan = build_plan(req);
  const AnalyticCost cost(plan.model, plan.partition, plan.placement, plan.config, req.cluster);
  run_engine(state, plan.program, cost, record_trace);
}

void BM_BuildPlan(benchmark::State& state, const std::string& schedule) {
  const PlanRequest req = analytic_request(schedule, kMicrobatches);
  int64_t n = 0;
  for (auto _ : state) {
    const Plan plan = build_plan(req);
    n = plan.program.num_instructions();
    benchmark::DoNotOptimize(n);
  }
  state.counters["instructions"] = static_cast<double>(n);
  state.counters["instructions_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_EngineMemory(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0));
  const Program program = stage_times_program("ZeroBubble", m);
  const StageTimesCost cost(uniform_stage_times(program.num_stages, 1e-3, 1e-3, 1e-3, 5e-5));
  run_engine(state, program, cost, /*record_trace=*/true);
}

// As cli/cmd_simulate.cc in measured mode, with --json: the request goes through
// simulate_measured, the function the command calls.
void BM_SimulateCommand(benchmark::State& state, const std::string& schedule_name,
                        double t_comm_ms) {
  int64_t n = 0;
  size_t json_bytes = 0;
  MeasuredRequest request;
  request.schedule = schedule_name;
  request.pp = kPp;
  request.microbatches = kMicrobatches;
  request.t_f_ms = 1;
  request.t_b_ms = 1;
  request.t_w_ms = 1;
  request.t_comm_ms = t_comm_ms;
  PlanSimOptions options;
  options.record_trace = false;
  for (auto _ : state) {
    const SimulatedPlan sim = simulate_measured(request, options);
    std::ostringstream out;
    out << sim.metrics.dump(2) << "\n";
    n = sim.result.num_instructions;
    json_bytes = out.str().size();
    benchmark::DoNotOptimize(json_bytes);
  }
  state.counters["instructions"] = static_cast<double>(n);
  state.counters["instructions_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["json_bytes"] = static_cast<double>(json_bytes);
}

enum class Phase { kGenerate, kValidate, kLower, kEngine };

void BM_UnitTimePhase(benchmark::State& state, Phase phase) {
  ScheduleParams params;
  params.num_actors = kPp;
  params.num_microbatches = kMicrobatches;
  const Schedule schedule = generate_schedule("ZeroBubble", params);
  const Program program = lower(schedule, {});
  const StageTimesCost cost(uniform_stage_times(program.num_stages, 1e-3, 1e-3, 1e-3, 0));
  SimOptions options;
  options.record_trace = false;
  for (auto _ : state) {
    switch (phase) {
      case Phase::kGenerate: {
        const Schedule s = generate_schedule("ZeroBubble", params);
        benchmark::DoNotOptimize(s.actors.data());
        break;
      }
      case Phase::kValidate: {
        const ReplayResult r = validate_and_replay_or_throw(schedule, "bench");
        benchmark::DoNotOptimize(r.makespan);
        break;
      }
      case Phase::kLower: {
        const Program p = lower(schedule, {});
        benchmark::DoNotOptimize(p.actors.data());
        break;
      }
      case Phase::kEngine: {
        const SimResult r = simulate(program, cost, options);
        benchmark::DoNotOptimize(r.makespan_s);
        break;
      }
    }
  }
  const int64_t n = program.num_instructions();
  state.counters["instructions"] = static_cast<double>(n);
  state.counters["instructions_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_UnitTimePhase, generate, Phase::kGenerate)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_UnitTimePhase, validate, Phase::kValidate)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_UnitTimePhase, lower, Phase::kLower)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_UnitTimePhase, engine, Phase::kEngine)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Engine_StageTimes, zb_h1_p64_m1024, std::string("ZeroBubble"))
    ->ArgName("trace")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Engine_StageTimes, interleaved_p64_v4_m1024, std::string("Interleaved1F1B"))
    ->ArgName("trace")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Engine_Analytic, zb_h1_p64_m1024, std::string("ZeroBubble"))
    ->ArgName("trace")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Engine_Analytic, interleaved_p64_v4_m1024, std::string("Interleaved1F1B"))
    ->ArgName("trace")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildPlan, zb_h1_p64_m1024, std::string("ZeroBubble"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildPlan, interleaved_p64_v4_m1024, std::string("Interleaved1F1B"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SimulateCommand, zb_h1_p64_m1024, std::string("zerobubble"), 0.05)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SimulateCommand, zb_h1_p64_m1024_unit_time, std::string("ZeroBubble"), 0.0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EngineMemory)
    ->ArgName("m")
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace jaxpp

BENCHMARK_MAIN();
