// The partitions of `jaxpp-sim graph` and the Python module's graph() that need the planner:
// `even` (Megatron-LM's split, plan_builder.h's even_partition) and `balanced-time` (the
// cost-aware search of partition_search.h, run through build_plan exactly as `simulate
// --partition balanced-time` runs it), so that graph shows the layer ranges simulate would use.
//
// The configuration of a balanced-time request is simulate's with gpus = pp·tp·dp·cp and a
// global batch of num_microbatches · microbatch_size · dp; the schedule is required and gives
// the placement (an explicit placement is refused: graph shows linear, loop and V).
//
// Usage:
//   GraphPartitionRequest r{.model = load_model("llama3-8b"), .partition = "balanced-time",
//                           .pp = 4, .num_microbatches = 16, .schedule = "1f1b", ...};
//   const GraphPartition p = resolve_graph_partition(r);   // p.stage_begin = {0, 9, 18, 27}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/cluster.h"
#include "graph/model.h"

namespace jaxpp {

struct GraphPartitionRequest {
  ModelSpec model;
  ClusterSpec cluster;    // balanced-time only
  std::string partition;  // "even" or "balanced-time"
  int pp = 1;
  int virtual_stages = 1;
  int num_microbatches = 1;
  int microbatch_size = 1;
  Recompute recompute = Recompute::kNone;
  int recompute_layers = -1;  // ParallelConfig::recompute_layers (balanced-time refuses it)
  int offload_layers = 0;     // ParallelConfig::offload_layers (balanced-time prices it)
  uint32_t recompute_modules = 0;  // ParallelConfig::recompute_modules (balanced-time prices it)
  // balanced-time only:
  std::string schedule;
  int tp = 1, dp = 1, cp = 1;
  bool sequence_parallel = false;
  bool zero1 = false;
  bool shard_gradients = false;  // ZeRO-2; needs zero1
  bool shard_parameters = false;  // ZeRO-3 / FSDP; needs zero1 and shard_gradients
  int64_t max_memory_bytes = 0;  // 0 = the cluster's HBM
};

struct GraphPartition {
  std::vector<int> stage_begin;
  int virtual_stages = 1;
  std::string placement;  // "" for even (the graph's own choice), else linear, loop or v
};

// InputError with one line naming the flag (--pp, --tp, --schedule, --partition balanced-time:
// no partition fits ...) for a request the planner refuses.
GraphPartition resolve_graph_partition(const GraphPartitionRequest& request);

// "0,9,18,27": the --partition form of stage starts.
std::string stage_starts_text(const std::vector<int>& starts);

}  // namespace jaxpp
