// Partition: contiguous layer ranges -> pipeline stages.
//
// Stage s owns layers [begin(s), end(s)). Every stage owns at least one layer. With virtual
// stages, S = v·p stages are partitioned here and Placement maps them to the p actors.
//
// Usage:
//   Partition p = partition_from_starts({0, 12, 24}, model.num_layers());  // like mark_stage_end
//   Partition q = auto_partition(layer_costs, 4);  // minimises the largest stage cost exactly
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace jaxpp {

struct ModelSpec;

struct Partition {
  std::vector<int> stage_begin;  // stage_begin[s] = first layer of stage s; stage_begin[0] = 0
  int num_layers = 0;

  int num_stages() const { return static_cast<int>(stage_begin.size()); }
  int begin(int stage) const { return stage_begin[stage]; }
  int end(int stage) const {
    return stage + 1 < num_stages() ? stage_begin[stage + 1] : num_layers;
  }
  int size(int stage) const { return end(stage) - begin(stage); }
  bool operator==(const Partition&) const = default;
};

// From the first layer index of each stage (strictly increasing, starting at 0, all < num_layers).
// InputError naming the offending entry otherwise.
Partition partition_from_starts(const std::vector<int>& starts, int num_layers);

struct AutoPartitionOptions {
  int num_stages = 1;
  // Give the first / last stage this many fewer transformer layers than an even split would
  // (Llama 3 405B: one fewer on each). 0 = purely cost-balanced.
  int first_stage_fewer = 0;
  int last_stage_fewer = 0;
};

// Minimises the maximum stage cost exactly (bisection on the bottleneck with a greedy check,
// O(layers · 64) time and O(layers) memory); ties broken towards earlier boundaries so the result
// is deterministic. costs[i] >= 0 is layer i's cost.
// InputError if num_stages > costs.size() or num_stages < 1.
Partition auto_partition(const std::vector<double>& layer_costs, int num_stages);
// Cost-balanced partition of a model (cost = forward + backward FLOPs of each layer), honouring
// the first/last-stage options.
Partition auto_partition(const ModelSpec& model, const AutoPartitionOptions& options);

nlohmann::json partition_to_json(const Partition& p);
Partition partition_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace jaxpp
