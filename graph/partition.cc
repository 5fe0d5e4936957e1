#include "graph/partition.h"

#include <algorithm>
#include <limits>

#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/model.h"

namespace jaxpp {
namespace {

// Exact min-max partition of costs into `k` contiguous non-empty parts. Returns the first index
// of each part; among optimal partitions the lexicographically smallest list of boundaries.
std::vector<int> min_max_partition(const std::vector<double>& costs, int k) {
  const int n = static_cast<int>(costs.size());
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  auto seg = [&](int i, int j) { return prefix[j] - prefix[i]; };  // layers [i, j)
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[p][i] = the smallest max-part cost of splitting layers [i, n) into p parts.
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, kInf));
  best[0][n] = 0;
  for (int p = 1; p <= k; ++p) {
    for (int i = n - p; i >= 0; --i) {
      double b = kInf;
      for (int j = i + 1; j <= n - (p - 1); ++j)
        b = std::min(b, std::max(seg(i, j), best[p - 1][j]));
      best[p][i] = b;
    }
  }
  const double target = best[k][0];
  // Reconstruct: the earliest boundary whose part fits and whose rest can still reach target.
  std::vector<int> starts = {0};
  int i = 0;
  for (int p = k; p > 1; --p) {
    int j = i + 1;
    while (!(seg(i, j) <= target && best[p - 1][j] <= target)) ++j;
    starts.push_back(j);
    i = j;
  }
  return starts;
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
