// Explorer throughput: configurations explored per second.
//
//   BM_ExploreGpt3_175b_1024   every configuration of GPT-3 175B (preset gpt3-175b) on 1024
//                              A100-80GB with a global batch of 1536 sequences (GPT-3's 3.2M
//                              tokens), default space, all hardware threads
//   BM_ExploreGpt3_13b_64      GPT-3 13B on 64 GPUs, global batch 512, one thread per run arg
//
// Counters: configs_per_s (simulated configurations per second of wall time), enumerated,
// evaluated (simulated), feasible, and the share of worker time per phase (schedule generation,
// memory pre-check, lowering, simulation) plus simulated instructions per second of engine time.
#include <benchmark/benchmark.h>

#include <thread>

#include "costmodel/cluster.h"
#include "graph/model.h"
#include "simulator/explorer.h"

namespace {

using jaxpp::ExploreRequest;
using jaxpp::ExploreResult;

void report(benchmark::State& state, const ExploreResult& res, int64_t runs) {
  const auto& t = res.timings;
  const double worker_s = t.schedule_s + t.memory_s + t.lower_s + t.simulate_s;
  state.counters["configs_per_s"] =
      benchmark::Counter(static_cast<double>(res.evaluated * runs), benchmark::Counter::kIsRate);
  state.counters["enumerated"] = static_cast<double>(res.records.size());
  state.counters["evaluated"] = static_cast<double>(res.evaluated);
  state.counters["feasible"] = static_cast<double>(res.feasible);
  state.counters["programs"] = static_cast<double>(t.programs_lowered);
  if (worker_s > 0) {
    state.counters["schedule_share"] = t.schedule_s / worker_s;
    state.counters["memory_share"] = t.memory_s / worker_s;
    state.counters["lower_share"] = t.lower_s / worker_s;
    state.counters["simulate_share"] = t.simulate_s / worker_s;
  }
  if (t.simulate_s > 0) {
    state.counters["engine_instr_per_s"] =
        static_cast<double>(t.simulated_instructions) / t.simulate_s;
  }
}

void run(benchmark::State& state, ExploreRequest req) {
  ExploreResult res;
  int64_t runs = 0;
  for (auto _ : state) {
    res = jaxpp::explore(req);
    benchmark::DoNotOptimize(res.ranking.data());
    ++runs;
  }
  if (res.feasible == 0) state.SkipWithError("nothing feasible");
  report(state, res, runs);
}

void BM_ExploreGpt3_175b_1024(benchmark::State& state) {
  ExploreRequest req;
  req.model = jaxpp::load_model("gpt3-175b");
  req.cluster = jaxpp::load_cluster("a100-80g");
  req.gpus = 1024;
  req.global_batch = 1536;
  req.threads = static_cast<int>(state.range(0));
  run(state, req);
}
BENCHMARK(BM_ExploreGpt3_175b_1024)->Arg(0)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

void BM_ExploreGpt3_13b_64(benchmark::State& state) {
  ExploreRequest req;
  req.model = jaxpp::load_model("gpt3-13b");
  req.cluster = jaxpp::load_cluster("a100-80g");
  req.gpus = 64;
  req.global_batch = 512;
  req.threads = static_cast<int>(state.range(0));
  run(state, req);
}
BENCHMARK(BM_ExploreGpt3_13b_64)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
