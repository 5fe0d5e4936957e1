#include "simulator/graph_partition.h"

#include <algorithm>
#include <utility>

#include "graph/error.h"
#include "graph/graph_report.h"
#include "graph/limits.h"
#include "graph/placement.h"
#include "simulator/plan_builder.h"

namespace jaxpp {

std::string stage_starts_text(const std::vector<int>& starts) {
  std::string text;
  for (const int b : starts) {  // two appends: "," + to_string trips GCC 12's -Wrestrict
    if (!text.empty()) text += ',';
    text += std::to_string(b);
  }
  return text;
}

GraphPartition resolve_graph_partition(const GraphPartitionRequest& r) {
  check_graph_sizes(r.pp, r.virtual_stages, r.num_microbatches, r.microbatch_size);
  const int stages = checked_int_product(r.pp, r.virtual_stages, kMaxStages, "--pp x --virtual");
  GraphPartition out;
  out.virtual_stages = r.virtual_stages;
  if (r.partition == "even") {
    out.stage_begin = even_partition(r.model, stages).stage_begin;
    return out;
  }
  if (r.partition != "balanced-time")
    throw_input_error("--partition", "expected even or balanced-time, got '" + r.partition + "'");
  if (r.schedule.empty())
    throw_input_error("--schedule",
                      "required with --partition balanced-time (the schedule the partition is "
                      "searched for)");
  for (const auto& [flag, v] :
       {std::pair<const char*, int>{"--tp", r.tp}, {"--dp", r.dp}, {"--cp", r.cp}})
    if (v < 1) throw_input_error(flag, "expected at least 1, got " + std::to_string(v));
  const int64_t gpus = int64_t{r.pp} * r.tp * r.dp * r.cp;
  const int64_t batch = int64_t{r.num_microbatches} * r.microbatch_size * r.dp;
  if (gpus > (int64_t{1} << 24))
    throw_input_error("--pp x --tp x --dp x --cp", "too many GPUs (" + std::to_string(gpus) + ")");
  if (batch > (int64_t{1} << 30))
    throw_input_error("--microbatches x --microbatch-size x --dp",
                      "too large (" + std::to_string(batch) + ")");
  PlanRequest req;
  req.model = r.model;
  req.cluster = r.cluster;
  ParallelConfig& c = req.config;
  c.pp = r.pp;
  c.tp = r.tp;
  c.dp = r.dp;
  c.cp = r.cp;
  c.gpus = static_cast<int>(gpus);
  c.global_batch = static_cast<int>(batch);
  c.virtual_stages = r.virtual_stages;
  c.microbatch_size = r.microbatch_size;
  c.schedule = r.schedule;
  c.recompute = r.recompute;
  c.recompute_layers = r.recompute_layers;
  c.offload_layers = r.offload_layers;
  c.recompute_modules = r.recompute_modules;
  c.sequence_parallel = r.sequence_parallel;
  c.zero1 = r.zero1;
  c.shard_gradients = r.shard_gradients;
  c.shard_parameters = r.shard_parameters;
  check_shard_gradients(c, "configuration", /*flags=*/true);
  req.partition = PartitionMode::kBalancedTime;
  req.max_memory_bytes = r.max_memory_bytes;
  const Plan plan = build_plan(req);
  if (plan.placement.kind == PlacementKind::kExplicit)
    throw_input_error("--schedule", "'" + r.schedule +
                                        "' places its stages explicitly; graph shows linear, "
                                        "loop and V placements (use simulate --timeline)");
  out.stage_begin = plan.partition.stage_begin;
  out.virtual_stages = plan.config.virtual_stages;
  out.placement = std::string(to_string(plan.placement.kind));
  return out;
}

}  // namespace jaxpp
