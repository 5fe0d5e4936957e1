#include "graph/partition.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdint>
#include <limits>

#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/model.h"

namespace jaxpp {
namespace {

// Exact min-max partition of costs into `k` contiguous non-empty parts. Returns the first index
// of each part; among optimal partitions the lexicographically smallest list of boundaries.
//
// O(n · 64) time, O(n) memory (the limits allow 100k layers on 16k stages, where the
// O(k · n²) dynamic programme it replaces took minutes and gigabytes). Part costs are prefix-sum
// differences, monotone in both ends because costs are >= 0, so for a bottleneck T the greedy
// "each part as long as it fits" needs the fewest parts, and T is feasible when that is <= k
// (n >= k lets parts be split further without raising their cost). The optimum is the smallest
// feasible T; bisecting over the ordered bit patterns of non-negative doubles finds it exactly
// (it is then the cost of one part of the greedy partition). Reconstruction takes, part after
// part, the earliest end whose part fits and whose rest still splits into the remaining parts.
class MinMaxPartitioner {
 public:
  explicit MinMaxPartitioner(const std::vector<double>& costs)
      : n_(static_cast<int>(costs.size())), prefix_(costs.size() + 1, 0.0) {
    for (int i = 0; i < n_; ++i) prefix_[i + 1] = prefix_[i] + costs[i];
  }

  std::vector<int> partition(int k) const {
    const double target = optimal_bottleneck(k);
    // reach[j]: the furthest end of a part starting at j within the target; parts[j]: the fewest
    // parts covering [j, n) (the greedy from j).
    std::vector<int> reach(n_ + 1, n_), parts(n_ + 1, 0);
    for (int j = 0, end = 0; j < n_; ++j) {
      end = std::max(end, j + 1);
      while (end < n_ && seg(j, end + 1) <= target) ++end;
      reach[j] = end;
    }
    for (int j = n_ - 1; j >= 0; --j) parts[j] = 1 + parts[reach[j]];
    std::vector<int> starts = {0};
    int i = 0;
    for (int p = k; p > 1; --p) {
      int j = i + 1;
      while (!(seg(i, j) <= target && parts[j] <= p - 1 && n_ - j >= p - 1)) {
        ++j;
        assert(j < n_ && "the optimal bottleneck always admits a partition");
      }
      starts.push_back(j);
      i = j;
    }
    return starts;
  }

 private:
  double seg(int i, int j) const { return prefix_[j] - prefix_[i]; }  // layers [i, j)

  // Fewest parts of cost <= t covering all layers (n + 1 when a single layer exceeds t).
  int greedy_parts(double t) const {
    int parts = 0;
    for (int i = 0, j = 0; i < n_; i = j, ++parts) {
      j = i;
      while (j < n_ && seg(i, j + 1) <= t) ++j;
      if (j == i) return n_ + 1;
    }
    return parts;
  }

  double optimal_bottleneck(int k) const {
    const auto bits = [](double x) { return std::bit_cast<uint64_t>(x); };
    double lo = 0;  // a lower bound: the largest layer
    for (int i = 0; i < n_; ++i) lo = std::max(lo, seg(i, i + 1));
    if (greedy_parts(lo) <= k) return lo;
    uint64_t lo_bits = bits(lo), hi_bits = bits(seg(0, n_));  // infeasible, feasible
    while (hi_bits - lo_bits > 1) {
      const uint64_t mid = lo_bits + (hi_bits - lo_bits) / 2;
      if (greedy_parts(std::bit_cast<double>(mid)) <= k) {
        hi_bits = mid;
      } else {
        lo_bits = mid;
      }
    }
    return std::bit_cast<double>(hi_bits);
  }

  int n_;
  std::vector<double> prefix_;
};

std::vector<int> min_max_partition(const std::vector<double>& costs, int k) {
  return MinMaxPartitioner(costs).partition(k);
}

}  // namespace

Partition partition_from_starts(const std::vector<int>& starts, int num_layers) {
  if (num_layers < 1) throw_input_error("partition", "the model has no layers");
  if (starts.empty()) throw_input_error("partition", "expected at least one stage start");
  for (size_t s = 0; s < starts.size(); ++s) {
    const std::string where = "partition entry " + std::to_string(s);
    if (s == 0 && starts[0] != 0)
      throw_input_error(where,
                        "the first stage must start at layer 0, got " + std::to_string(starts[0]));
    if (starts[s] < 0 || starts[s] >= num_layers)
      throw_input_error(where, "layer " + std::to_string(starts[s]) + " out of range [0, " +
                                   std::to_string(num_layers) + ")");
    if (s > 0 && starts[s] <= starts[s - 1])
      throw_input_error(where, "stage starts must be strictly increasing, got " +
                                   std::to_string(starts[s]) + " after " +
                                   std::to_string(starts[s - 1]));
  }
  return Partition{starts, num_layers};
}

Partition auto_partition(const std::vector<double>& layer_costs, int num_stages) {
  const int n = static_cast<int>(layer_costs.size());
  if (num_stages < 1)
    throw_input_error("partition", "expected at least 1 stage, got " + std::to_string(num_stages));
  if (num_stages > n)
    throw_input_error("partition", std::to_string(num_stages) + " stages but the model has only " +
                                       std::to_string(n) + " layers");
  for (int i = 0; i < n; ++i)
    if (!(layer_costs[i] >= 0))
      throw_input_error("partition", "layer " + std::to_string(i) + " has a negative cost");
  return Partition{min_max_partition(layer_costs, num_stages), n};
}

Partition auto_partition(const ModelSpec& model, const AutoPartitionOptions& options) {
  const int n = model.num_layers();
  const int stages = options.num_stages;
  if (options.first_stage_fewer == 0 && options.last_stage_fewer == 0) {
    std::vector<double> costs;
    costs.reserve(n);
    for (const LayerWork& l : model.layers)
      costs.push_back(l.fwd_flops + l.bwd_input_flops + l.bwd_weight_flops);
    return auto_partition(costs, stages);
  }
  // Count-based: an even split of the transformer layers, the first/last stage shortened.
  if (options.first_stage_fewer < 0 || options.last_stage_fewer < 0)
    throw_input_error("partition", "first/last stage 'fewer' must be >= 0");
  if (stages < 2)
    throw_input_error("partition", "first/last stage 'fewer' needs at least 2 stages");
  std::vector<int> transformer_index;
  for (int i = 0; i < n; ++i)
    if (model.layers[i].kind == LayerKind::kTransformer) transformer_index.push_back(i);
  const int t = static_cast<int>(transformer_index.size());
  const int padded = t + options.first_stage_fewer + options.last_stage_fewer;
  const int base = padded / stages;
  std::vector<int> count(stages, 0);
  count[0] = base - options.first_stage_fewer;
  count[stages - 1] = base - options.last_stage_fewer;
  int rest = t - count[0] - count[stages - 1];
  const int middle = stages - 2;
  for (int s = 1; s + 1 < stages; ++s) {
    count[s] = rest / middle + ((s - 1) < rest % middle ? 1 : 0);
  }
  if (middle == 0 && rest != 0) count[0] += rest;  // 2 stages: remainder to stage 0
  for (int s = 0; s < stages; ++s)
    if (count[s] < 1)
      throw_input_error("partition", "stage " + std::to_string(s) + " would get " +
                                         std::to_string(count[s]) + " transformer layers (" +
                                         std::to_string(t) + " layers over " +
                                         std::to_string(stages) + " stages)");
  // Stage s starts at its first transformer layer; leading/trailing other layers stay with the
  // first/last stage.
  std::vector<int> starts = {0};
  int seen = count[0];
  for (int s = 1; s < stages; ++s) {
    starts.push_back(transformer_index[seen]);
    seen += count[s];
  }
  return partition_from_starts(starts, n);
}

nlohmann::json partition_to_json(const Partition& p) {
  return {{"stage_begin", p.stage_begin}, {"num_layers", p.num_layers}};
}

Partition partition_from_json(const nlohmann::json& j, const std::string& where) {
  const JsonObject obj(j, where);
  obj.reject_unknown({"stage_begin", "num_layers"});
  const int n = obj.positive_int("num_layers");
  const nlohmann::json& arr = obj.array("stage_begin");
  std::vector<int> starts;
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_number_integer())
      throw_input_error(obj.field("stage_begin") + "[" + std::to_string(i) + "]",
                        "expected an integer, got " + arr[i].dump());
    starts.push_back(arr[i].get<int>());
  }
  try {
    return partition_from_starts(starts, n);
  } catch (const InputError& e) {
    throw InputError(obj.field("stage_begin") + ": " + e.what());
  }
}

}  // namespace jaxpp
