// Cost-aware partition search (simulator/partition_search.h, --partition balanced-time): the
// time to partition one configuration.
//
//   BM_PartitionLlama3_405b_pp16_v2   Llama 3 405B (preset llama3-405b: 126 transformer layers,
//                                     128 with embedding and LM head) on 128 H100s, pp 16, tp 8,
//                                     v 2 (S = 32 stages), Interleaved1F1B, sequence parallel,
//                                     full recompute, global batch Arg
//                                     (m = Arg microbatches of 1 sequence), the device memory
//                                     as the limit; the whole search (layer times, starting
//                                     candidates, local search)
//   BM_PartitionLlama3_405b_pp16_v1   the same with v 1 (S = 16), Std1F1B
//   BM_PartitionStartOnly             v 2, m 32: the layer times and the starting candidates
//                                     alone (max_evaluations 1: no local search)
//   BM_PartitionOneLayerMoves         v 2 and v 1 (Arg), m 32: the search without its long moves
//                                     (one_layer_moves)
//
// Counters: evaluations (simulations of the search), improvements (local-search moves kept),
// long_moves (of which long moves),
// gain (1 − step time / step time of the FLOPs-balanced partition), step_s (the step time found).
#include <benchmark/benchmark.h>

#include <string>

#include "costmodel/cluster.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "simulator/partition_search.h"
#include "simulator/plan_builder.h"

namespace {

struct Setup {
  jaxpp::ModelSpec model;
  jaxpp::ClusterSpec cluster;
  jaxpp::ParallelConfig config;
  jaxpp::Schedule schedule;
};

Setup llama405(int v, int microbatches, const std::string& schedule) {
  Setup s;
  s.model = jaxpp::load_model("llama3-405b");
  s.cluster = jaxpp::load_cluster("h100-sxm");
  jaxpp::ParallelConfig& c = s.config;
  c.pp = 16;
  c.tp = 8;
  c.dp = 1;
  c.gpus = 128;
  c.virtual_stages = v;
  c.microbatch_size = 1;
  c.global_batch = microbatches;
  c.num_microbatches = microbatches;
  c.schedule = schedule;
  c.sequence_parallel = true;
  c.recompute = jaxpp::Recompute::kFull;
  s.schedule = jaxpp::make_schedule(schedule, "", c.pp, v > 1 ? c.pp * v : 0, microbatches, false);
  return s;
}

void run(benchmark::State& state, const Setup& s, int max_evaluations,
         bool one_layer_moves = false) {
  jaxpp::PartitionSearchResult r;
  for (auto _ : state) {
    r = jaxpp::search_partition(
        s.model, s.cluster, s.config, s.schedule,
        {.max_evaluations = max_evaluations, .one_layer_moves = one_layer_moves});
    benchmark::DoNotOptimize(r.evaluations);
  }
  const double flops = jaxpp::partition_step_time_s(
      s.model, s.cluster, s.config, s.schedule,
      jaxpp::auto_partition(s.model, {.num_stages = s.schedule.num_stages}));
  state.counters["evaluations"] = r.evaluations;
  state.counters["improvements"] = r.improvements;
  state.counters["long_moves"] = r.long_moves;
  state.counters["gain"] = 1 - r.step_time_s / flops;
  state.counters["step_s"] = r.step_time_s;
}

void BM_PartitionLlama3_405b_pp16_v2(benchmark::State& state) {
  run(state, llama405(2, static_cast<int>(state.range(0)), "Interleaved1F1B"), 0);
}
BENCHMARK(BM_PartitionLlama3_405b_pp16_v2)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);

void BM_PartitionLlama3_405b_pp16_v1(benchmark::State& state) {
  run(state, llama405(1, static_cast<int>(state.range(0)), "Std1F1B"), 0);
}
BENCHMARK(BM_PartitionLlama3_405b_pp16_v1)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);

void BM_PartitionStartOnly(benchmark::State& state) {
  run(state, llama405(2, 32, "Interleaved1F1B"), 1);
}
BENCHMARK(BM_PartitionStartOnly)->Unit(benchmark::kMillisecond);

void BM_PartitionOneLayerMoves(benchmark::State& state) {
  const int v = static_cast<int>(state.range(0));
  run(state, llama405(v, 32, v > 1 ? "Interleaved1F1B" : "Std1F1B"), 0, true);
}
BENCHMARK(BM_PartitionOneLayerMoves)->Arg(2)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
