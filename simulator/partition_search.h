// Cost-aware partition search (`--partition balanced-time`): the layer ranges of the S = v·p
// stages that minimise the *predicted step time* of one configuration under a memory limit per
// device.
//
// Inputs: a model, a cluster, a resolved ParallelConfig (num_microbatches and virtual_stages
// set) and the Schedule that will run (its placement maps the S stages to the p actors, its
// per-actor order gives how many microbatches each stage stashes).
//
// Layer times. Every layer of the model (embedding, transformer layers, LM head and loss, custom
// layers) is priced by the same operator-level model AnalyticCost uses (costmodel/
// operator_cost.h: GEMMs, attention, memory-bound element-wise kernels, exposed TP/CP/EP
// communication, recompute), one layer at a time; stage times are sums of layer times, exactly
// as AnalyticCost sums them. A layer's weight is the time it adds to its actor in one step:
//   weight(l) = F(l) + B(l) + optimizer(l) / m        (B = I + W − hidden, a fused backward)
//   weight(l) = F(l) + I(l) + W(l) + optimizer(l) / m (schedules that split the backward)
//
// Memory. The peak of an actor is computed exactly as the simulator accounts it: the memory
// model's static bytes (costmodel/memory.h) plus the largest sum of stashed microbatches along
// the actor's compute order (an F adds its stage's stash when it starts, the B or I of that
// stage frees it when it ends). With one stage per actor this is static + k_r · stash_r with k_r
// the schedule's stash count (1F1B: p on the first actor, 1 on the last). The limit is
// `max_memory_bytes` (0 = the cluster's HBM per device).
//
// Algorithm (deterministic; bounded work):
//   1. Starting candidates, each checked against the limit:
//        time      the bottleneck-optimal partition on the layer weights (graph/partition.h's
//                  exact min-max); with one stage per actor and a limit, the min-max subject to
//                  every stage's memory (bisection on the bottleneck, greedy check with the
//                  per-stage stash counts k_s)
//        flops     `--partition auto` (forward + backward FLOPs balanced)
//        even      `--partition even` (Megatron-LM's split), when the model has >= S transformer
//                  layers
//      Those that fit are simulated; the fastest (ties: this order) is the start.
//   2. If none fits: a partition of least peak memory. One stage per actor: exact (bisection on
//      the peak, greedy check); otherwise a descent on the largest peak over the moves of step 3
//      (memory only, no simulation, at most num_layers · S moves). If it does not fit either,
//      InputError "--partition balanced-time: no partition fits in L GiB per device; the least
//      peak memory ... is X GiB on actor r (...)".
//   3. Local search, first improvement; each partition is simulated at most once (a move back to
//      a partition already simulated costs no evaluation):
//      a. one-layer moves: passes over the boundaries b = 1 .. S−1, each boundary moved one layer
//         left, then one layer right (both stages keep >= 1 layer); a move that fits the limit
//         is simulated and kept when it lowers the step time by more than 1e-12 s; until a pass
//         without improvement;
//      b. long moves, when a pass of (a) improves nothing: every boundary moved k = 2, 4, 8, ...
//         layers either way (k up to max(2, n / (4·S)), a quarter of a mean stage), every
//         boundary moved to the layer that balances the weights of its two stages, and every
//         block of consecutive boundaries b .. c shifted one layer either way (a layer passes
//         from stage c to stage b−1 or back, the stages between keep their sizes). Moves that do
//         not raise the largest actor weight (the sum of its stages' layer weights) are tried in
//         order of (largest actor weight, sum of squared actor weights), ties in the order
//         listed; the first that lowers the step time is kept and (a) runs again from it.
//      Stops when (b) improves nothing or after `max_evaluations` simulations in all (steps 1 and
//      3; default 4·S + 16).
//   Since (a) runs exactly as a search of one-layer moves alone and (b) only keeps improvements,
//   the result is never slower than that of the one-layer search (`one_layer_moves`).
// The result is never slower than the fitting candidates of step 1, so never slower than
// `--partition auto` or `--partition even` when they fit.
//
// Units: seconds (_s), bytes (_bytes).
//
// Usage:
//   PartitionSearchResult r = search_partition(model, cluster, config, schedule, {});
//   plan.partition = r.partition;   // r.step_time_s is the simulated step time
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "graph/plan.h"
#include "schedules/schedule.h"

namespace jaxpp {

// The InputError of a search in which no partition fits: it carries the least peak memory found
// (per device) and its actor, so that explore can report the configuration's need.
class PartitionDoesNotFit : public InputError {
 public:
  PartitionDoesNotFit(const std::string& message, int64_t least_peak_bytes, int actor)
      : InputError(message), least_peak_bytes(least_peak_bytes), actor(actor) {}
  int64_t least_peak_bytes;
  int actor;
};

struct PartitionSearchOptions {
  int64_t max_memory_bytes = 0;  // per device; 0 = cluster.hbm_bytes; no limit when both are 0
  int max_evaluations = 0;       // simulations in all; 0 = 4·S + 16
  // Start from this partition alone instead of the candidates of step 1 (it must have S stages
  // over the model's layers and fit the limit; InputError otherwise). For tests and studies.
  std::optional<Partition> start = std::nullopt;
  bool one_layer_moves = false;  // skip the long moves of step 3b
};

struct PartitionSearchResult {
  Partition partition;
  double step_time_s = 0;                  // simulated, with the cluster's iteration overhead
  std::vector<int64_t> peak_memory_bytes;  // per actor, per device
  std::string start;                       // "time", "flops", "even", "memory" or "given"
  double start_step_time_s = 0;            // of the start partition
  int evaluations = 0;                     // simulations run
  int improvements = 0;                    // local-search moves kept
  int long_moves = 0;                      // of which long moves (step 3b)
};

// Per-layer weights (seconds) as described above, for the schedule's backward split.
std::vector<double> layer_weights_s(const ModelSpec& model, const ClusterSpec& cluster,
                                    const ParallelConfig& config, bool split_backward);

// Peak bytes per device of every actor for a partition, as the simulator accounts them.
std::vector<int64_t> partition_peak_memory(const ModelSpec& model, const ClusterSpec& cluster,
                                           const ParallelConfig& config, const Schedule& schedule,
                                           const Partition& partition);

// Simulated step time of the configuration with this partition (record_trace off).
double partition_step_time_s(const ModelSpec& model, const ClusterSpec& cluster,
                             const ParallelConfig& config, const Schedule& schedule,
                             const Partition& partition);

// InputError (one line, naming --partition balanced-time) when the model has fewer layers than
// stages or no partition fits the limit.
PartitionSearchResult search_partition(const ModelSpec& model, const ClusterSpec& cluster,
                                       const ParallelConfig& config, const Schedule& schedule,
                                       const PartitionSearchOptions& options);

}  // namespace jaxpp
