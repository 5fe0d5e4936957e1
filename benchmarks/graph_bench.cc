// Throughput of graph/: building task graphs, ordering them, and the exact auto-partition.
#include <benchmark/benchmark.h>

#include <vector>

#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/task_graph.h"

namespace jaxpp {
namespace {

// Task graph of llama3-405b on pp actors with 4 virtual stages each, m = 4·pp microbatches.
void BM_BuildTaskGraph(benchmark::State& state) {
  const int pp = static_cast<int>(state.range(0));
  const ModelSpec model = load_model("llama3-405b");
  const Partition partition = auto_partition(model, {.num_stages = 4 * pp});
  const Placement placement = make_placement(PlacementKind::kLoop, 4 * pp, pp);
  TaskGraphOptions options;
  options.num_microbatches = 4 * pp;
  options.split_backward.assign(4 * pp, true);
  int64_t nodes = 0;
  for (auto _ : state) {
    TaskGraph g = TaskGraph::build(model, partition, placement, options);
    nodes += g.num_nodes();
    benchmark::DoNotOptimize(g.topological_order());
  }
  state.counters["nodes_per_s"] = benchmark::Counter(static_cast<double>(nodes),
                                                     benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BuildTaskGraph)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond);

void BM_AutoPartition(benchmark::State& state) {
  const ModelSpec model = load_model("llama3-405b");
  const int stages = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(auto_partition(model, {.num_stages = stages}));
}
BENCHMARK(BM_AutoPartition)->Arg(8)->Arg(32)->Arg(64)->Unit(benchmark::kMillisecond);

// At graph/limits.h's scale: 100k layers on 64 and on 16384 stages.
void BM_AutoPartitionAtTheLimits(benchmark::State& state) {
  std::vector<double> costs(100000);
  for (size_t i = 0; i < costs.size(); ++i) costs[i] = 1.0 + static_cast<double>(i % 7);
  const int stages = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(jaxpp::auto_partition(costs, stages));
  state.counters["layers"] = static_cast<double>(costs.size());
}
BENCHMARK(BM_AutoPartitionAtTheLimits)->Arg(64)->Arg(16384)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace jaxpp

BENCHMARK_MAIN();
