// Schedule library throughput: generating, validating (with dependency replay) and lowering
// large schedules. Reported as tasks per second (items_per_second); the per-instruction cases
// (BM_LowerPerInstruction, BM_CheckProgram, BM_ValidatePerInstruction) also report
// time_per_instruction (CPU seconds per instruction of the lowered program), the figure the
// explorer pays per configuration.
#include <benchmark/benchmark.h>

#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/shardy.h"
#include "schedules/validate.h"

namespace jaxpp {
namespace {

ScheduleParams big_params(const std::string& name) {
  const int p = 16, m = 64;
  ScheduleParams params{.num_actors = p, .num_microbatches = m};
  if (name == "Interleaved1F1B" || name == "MegatronInterleaved" || name == "Circular") {
    params.num_stages = 4 * p;
  }
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

// Schedule, p, v (stages per actor), m; a lowering options with one byte size per stage.
struct LoweringCase {
  std::string name;
  int p = 0;
  int v = 1;
  int m = 0;
};

Schedule case_schedule(const LoweringCase& c) {
  return generate_schedule(
      c.name, {.num_actors = c.p, .num_stages = c.v > 1 ? c.v * c.p : 0, .num_microbatches = c.m});
}

LoweringOptions case_options(const Schedule& s) {
  LoweringOptions lo;
  for (int st = 0; st < s.num_stages; ++st) {
    lo.activation_bytes.push_back(int64_t{1} << 24);
    lo.grad_bytes.push_back(int64_t{1} << 30);
  }
  return lo;
}

void report_per_instruction(benchmark::State& state, int64_t instructions) {
  state.SetItemsProcessed(state.iterations() * instructions);
  state.counters["instructions"] = static_cast<double>(instructions);
  // The inverted rate of instructions: seconds (CPU) per instruction, printed as e.g. "120ns".
  state.counters["time_per_instruction"] = benchmark::Counter(
      static_cast<double>(instructions),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_LowerPerInstruction(benchmark::State& state, const LoweringCase& c) {
  const Schedule s = case_schedule(c);
  const LoweringOptions lo = case_options(s);
  int64_t instructions = 0;
  for (auto _ : state) {
    const Program prog = lower(s, lo);
    instructions = prog.num_instructions();
    benchmark::DoNotOptimize(prog);
  }
  report_per_instruction(state, instructions);
}

void BM_CheckProgram(benchmark::State& state, const LoweringCase& c) {
  const Schedule s = case_schedule(c);
  const Program prog = lower(s, case_options(s));
  for (auto _ : state) check_program(prog);
  report_per_instruction(state, prog.num_instructions());
}

void BM_ValidatePerInstruction(benchmark::State& state, const LoweringCase& c) {
  const Schedule s = case_schedule(c);
  const int64_t instructions = lower(s, case_options(s)).num_instructions();
  for (auto _ : state) {
    const ValidationReport r = validate_schedule(s);
    if (!r.ok()) state.SkipWithError(r.errors[0].c_str());
    benchmark::DoNotOptimize(r);
  }
  report_per_instruction(state, instructions);
}

const LoweringCase kInterleavedP16V4M64{"Interleaved1F1B", 16, 4, 64};
const LoweringCase kZeroBubbleP64M256{"ZeroBubble", 64, 1, 256};
const LoweringCase kStd1F1BP64M256{"Std1F1B", 64, 1, 256};
BENCHMARK_CAPTURE(BM_LowerPerInstruction, interleaved_p16_v4_m64, kInterleavedP16V4M64);
BENCHMARK_CAPTURE(BM_LowerPerInstruction, zerobubble_p64_m256, kZeroBubbleP64M256);
BENCHMARK_CAPTURE(BM_LowerPerInstruction, std1f1b_p64_m256, kStd1F1BP64M256);
BENCHMARK_CAPTURE(BM_CheckProgram, interleaved_p16_v4_m64, kInterleavedP16V4M64);
BENCHMARK_CAPTURE(BM_CheckProgram, zerobubble_p64_m256, kZeroBubbleP64M256);
BENCHMARK_CAPTURE(BM_ValidatePerInstruction, interleaved_p16_v4_m64, kInterleavedP16V4M64);
BENCHMARK_CAPTURE(BM_ValidatePerInstruction, zerobubble_p64_m256, kZeroBubbleP64M256);

BENCHMARK_CAPTURE(BM_Generate, std1f1b_p16_m64, std::string("Std1F1B"));
BENCHMARK_CAPTURE(BM_Generate, interleaved_p16_v4_m64, std::string("Interleaved1F1B"));
BENCHMARK_CAPTURE(BM_Validate, zerobubble_p16_m64, std::string("ZeroBubble"));
BENCHMARK_CAPTURE(BM_Validate, interleaved_p16_v4_m64, std::string("Interleaved1F1B"));
BENCHMARK_CAPTURE(BM_Validate, dualpipev_p16_m64, std::string("DualPipeV"));
BENCHMARK_CAPTURE(BM_Lower, zerobubble_p16_m64, std::string("ZeroBubble"));
BENCHMARK_CAPTURE(BM_Lower, megatron_p16_v4_m64, std::string("MegatronInterleaved"));

// Shardy's rule scheduler: every rule edge and one sort, against Shardy's literal pairwise loop
// with its dependency search (the fallback), on the same program.
void BM_ShardyRuleScheduler(benchmark::State& state, ShardySchedule kind, bool pairwise) {
  const int p = 4, m = static_cast<int>(state.range(0));
  const RuleProgram program = shardy_program(kind, {.num_actors = p, .num_microbatches = m});
  const MustHappenBefore rule = shardy_rule(kind);
  for (auto _ : state) {
    auto orders =
        pairwise ? schedule_by_rules_pairwise(program, rule) : schedule_by_rules(program, rule);
    benchmark::DoNotOptimize(orders);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(program.tasks.size()));
}

BENCHMARK_CAPTURE(BM_Generate, shardy_zerobubbleh1_p16_m64, std::string("ZeroBubbleH1"));
BENCHMARK_CAPTURE(BM_Generate, shardy_gpipe_1f1b_last_p16_m64,
                  std::string("GPipeBut1F1BForLastMesh"));
BENCHMARK_CAPTURE(BM_Generate, shardy_circular_p16_v4_m64, std::string("Circular"));
BENCHMARK_CAPTURE(BM_ShardyRuleScheduler, zerobubbleh1_edges_p4, ShardySchedule::kZeroBubbleH1,
                  false)
    ->Arg(16)
    ->Arg(64);
BENCHMARK_CAPTURE(BM_ShardyRuleScheduler, zerobubbleh1_pairwise_p4, ShardySchedule::kZeroBubbleH1,
                  true)
    ->Arg(16)
    ->Arg(64);
BENCHMARK_CAPTURE(BM_ShardyRuleScheduler, gpipe_edges_p4, ShardySchedule::kGPipe, false)
    ->Arg(16)
    ->Arg(64);
BENCHMARK_CAPTURE(BM_ShardyRuleScheduler, gpipe_pairwise_p4, ShardySchedule::kGPipe, true)
    ->Arg(16)
    ->Arg(64);

}  // namespace
}  // namespace jaxpp

BENCHMARK_MAIN();
