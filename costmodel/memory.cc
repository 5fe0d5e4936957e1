#include "costmodel/memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/limits.h"
#include "graph/task_graph.h"

namespace jaxpp {

std::vector<int64_t> MemoryModel::static_bytes_per_actor() const {
  std::vector<int64_t> out;
  out.reserve(actors.size());
  for (const ActorMemory& a : actors) out.push_back(a.static_bytes());
  return out;
}

double stage_grad_bytes(const OperatorCost& op, const ParallelConfig& config,
                        double grad_bytes_per_param, int first, int count, double params) {
  return op.device_params(first, count, params, /*optimizer_sharded=*/config.shard_gradients) *
         grad_bytes_per_param;
}

double transient_grad_bytes(const OperatorCost& op, const ModelSpec& model,
                            const ParallelConfig& config, double grad_bytes_per_param, int first,
                            int count) {
  // A shard group of one device holds the whole gradient: it is reduced in place, no layer's full
  // gradient waits in a second buffer for a reduce-scatter.
  if (!config.shard_gradients || int64_t{config.dp} * config.cp == 1) return 0;
  double largest = 0;
  for (int l = first; l < first + count; ++l)
    largest = std::max(largest, op.device_params(l, 1, static_cast<double>(model.layers[l].params),
                                                 /*optimizer_sharded=*/false));
  return largest * grad_bytes_per_param;
}

double layer_gather_bytes(const OperatorCost& op, const ModelSpec& model,
                          const ClusterSpec& cluster, int layer) {
  const LayerWork& lw = model.layers[static_cast<size_t>(layer)];
  const double bytes = model.dtype == Dtype::kFp8 && model.fp8_params &&
                               lw.kind == LayerKind::kTransformer
                           ? 1.0
                           : cluster.weight_bytes_per_param;
  return op.device_params(layer, 1, static_cast<double>(lw.params), /*optimizer_sharded=*/false) *
         bytes;
}

double stage_gather_bytes(const OperatorCost& op, const ModelSpec& model,
                          const ClusterSpec& cluster, int first, int count) {
  double total = 0;
  for (int l = first; l < first + count; ++l) total += layer_gather_bytes(op, model, cluster, l);
  return total;
}

StageStaticBytes stage_static_bytes(const OperatorCost& op, int first, int count) {
  const ModelSpec& model = op.model();
  const ParallelConfig& config = op.config();
  const ClusterSpec& cluster = op.cluster();
  const double grad_per_param =
      grad_bytes_per_param(config.grad_dtype, cluster.grad_bytes_per_param);
  const bool shard_weights = config.shard_parameters;
  int64_t whole_params = 0;
  for (int l = first; l < first + count; ++l) whole_params += model.layers[l].params;
  const double whole = static_cast<double>(whole_params);
  // Routed experts ÷ ep·etp, the rest ÷ tp (OperatorCost::device_params).
  const double params = op.device_params(first, count, whole, false);
  const double sharded = op.device_params(first, count, whole, /*optimizer_sharded=*/true);
  StageStaticBytes b;
  b.params = std::llround(params);
  // Parameter sharding: each device stores its 1/(dp·cp) shard of the weights.
  b.weight_bytes = std::llround((shard_weights ? sharded : params) * cluster.weight_bytes_per_param);
  // Transformer-layer weights of an FP8 model (ModelSpec::fp8_params): stored in FP8 (1 byte)
  // instead of 16 bits, or 16 bits plus the FP8 copy Transformer Engine casts once per step and
  // keeps for the other microbatches; either way plus a cached transpose on GPUs whose FP8 GEMMs
  // need one. MXFP8 (ModelSpec::fp8_scaling) keeps a row-wise and a column-wise copy on every GPU,
  // each with one E8M0 scale byte per 32 elements (their blocks differ, so neither is the
  // other's transpose). The embedding and the LM head stay in 16 bits.
  const double fp8_bytes = model.fp8_scaling == Fp8Scaling::kMxfp8 ? 2.0 * (1.0 + 1.0 / 32)
                           : cluster.fp8_transpose_copy            ? 2.0
                                                                   : 1.0;
  const double fp8_per_param =
      model.fp8_params ? fp8_bytes : cluster.weight_bytes_per_param + fp8_bytes;
  for (int l = first; l < first + count; ++l) {
    const LayerWork& lw = model.layers[static_cast<size_t>(l)];
    if (model.dtype == Dtype::kFp8 && lw.kind == LayerKind::kTransformer) {
      const double p = op.device_params(l, 1, static_cast<double>(lw.params), shard_weights);
      b.weight_bytes += std::llround(p * (fp8_per_param - cluster.weight_bytes_per_param));
    }
    // A shard group of one device gathers nothing: its shard is the whole layer.
    if (shard_weights && int64_t{config.dp} * config.cp > 1)
      b.gathered_bytes = std::max(b.gathered_bytes, layer_gather_bytes(op, model, cluster, l));
    b.loss_transient_bytes = std::max(b.loss_transient_bytes, op.loss_transient_bytes(l));
  }
  b.grad_bytes = std::llround(stage_grad_bytes(op, config, grad_per_param, first, count, whole));
  b.transient_grad_bytes = transient_grad_bytes(op, model, config, grad_per_param, first, count);
  b.optimizer_bytes = std::llround(
      sharded *
      optimizer_state_bytes_per_param(config.optimizer_state, cluster.optimizer_state_bytes_per_param));
  return b;
}

MemoryModel build_memory_model(const ModelSpec& model, const Partition& partition,
                               const Placement& placement, const ParallelConfig& config,
                               const ClusterSpec& cluster) {
  const std::vector<StageWork> work =
      compute_stage_work(model, partition, config.microbatch_size, config.recompute,
                         config.recompute_layers, config.recompute_modules);
  const OperatorCost op(model, config, cluster);
  // The remainders complete 16-bit weights to fp32 master weights: FP8 weights have no such
  // 16 bits (Apex and NeMo keep full fp32 master copies for them).
  if (config.optimizer_state == OptimizerState::kRemainders && model.dtype == Dtype::kFp8 &&
      model.fp8_params)
    throw InputError(
        "optimizer state 'remainders' needs 16-bit weights: the model stores its transformer "
        "weights in FP8 (fp8_params), so the master weights stay fp32 (use fp32 or set "
        "\"fp8_params\": false)");
  // The low-precision activations are FP8 training's (graph/model.h): a 16-bit model has none.
  if (!model.low_precision_activations().empty() && model.dtype != Dtype::kFp8)
    throw InputError("\"low_precision_activations\" needs FP8 training: the model trains in " +
                     std::string(to_string(model.dtype)) + " (set \"dtype\": \"fp8\")");
  MemoryModel mem;
  mem.actors.resize(placement.num_actors);
  std::vector<ActorTransients> transients(placement.num_actors);
  mem.stash_bytes_per_stage.resize(work.size());
  mem.offloaded_bytes_per_stage.assign(work.size(), 0);
  for (int s = 0; s < static_cast<int>(work.size()); ++s) {
    const int actor = placement.actor_of(s);
    ActorMemory& a = mem.actors[actor];
    const StageStaticBytes b =
        stage_static_bytes(op, work[s].first_layer, work[s].num_layers);
    a.params += b.params;
    a.weight_bytes += b.weight_bytes;
    a.grad_bytes += b.grad_bytes;
    a.optimizer_bytes += b.optimizer_bytes;
    transients[actor].take(b);
    const double stash = op.stage_stash_bytes(work[s].first_layer, work[s].num_layers);
    if (stash > kMaxDeviceBytes) {
      char text[220];
      std::snprintf(text, sizeof text,
                    "model '%s': stage %d stashes %.3g bytes per microbatch (microbatch size %d): "
                    "beyond the %.3g bytes the simulator counts",
                    model.name.c_str(), s, stash, config.microbatch_size, kMaxDeviceBytes);
      throw InputError(text);
    }
    mem.stash_bytes_per_stage[s] = std::llround(stash);
    if (config.offload_layers > 0)
      mem.offloaded_bytes_per_stage[s] =
          std::llround(op.offloaded_stash_bytes(work[s].first_layer, work[s].num_layers));
  }
  // The most one device can hold: its static memory and the stash of every microbatch of its
  // stages in flight at once (GPipe). Past kMaxDeviceBytes the int64 byte counts of the simulation
  // could overflow: refused (the model's own totals are bounded when it is read).
  std::vector<double> stash_of_actor(static_cast<size_t>(placement.num_actors), 0);
  for (int s = 0; s < static_cast<int>(work.size()); ++s)
    stash_of_actor[static_cast<size_t>(placement.actor_of(s))] +=
        static_cast<double>(mem.stash_bytes_per_stage[s]);
  for (int r = 0; r < placement.num_actors; ++r) {
    const double most = static_cast<double>(mem.actors[r].static_bytes()) +
                        stash_of_actor[static_cast<size_t>(r)] *
                            std::max(1, config.num_microbatches);
    if (most > kMaxDeviceBytes) {
      char text[260];
      std::snprintf(text, sizeof text,
                    "model '%s': actor %d could hold %.3g bytes (%d microbatches in flight): "
                    "beyond the %.3g bytes the simulator counts; the model or the batch is far too "
                    "large for any device",
                    model.name.c_str(), r, most, std::max(1, config.num_microbatches),
                    kMaxDeviceBytes);
      throw InputError(text);
    }
  }
  for (int r = 0; r < placement.num_actors; ++r) {
    mem.actors[r].grad_bytes += transients[r].grad_bytes();
    mem.actors[r].weight_bytes += transients[r].weight_bytes();
    mem.actors[r].loss_transient_bytes = transients[r].loss_bytes();
  }
  return mem;
}

void ActorTransients::take(const StageStaticBytes& b) {
  transient_grad_bytes = std::max(transient_grad_bytes, b.transient_grad_bytes);
  gathered_bytes = std::max(gathered_bytes, b.gathered_bytes);
  loss_transient_bytes = std::max(loss_transient_bytes, b.loss_transient_bytes);
}

int64_t ActorTransients::grad_bytes() const { return std::llround(transient_grad_bytes); }

// The layer being computed and the one prefetched, gathered whole.
int64_t ActorTransients::weight_bytes() const { return std::llround(2 * gathered_bytes); }

int64_t ActorTransients::loss_bytes() const { return std::llround(loss_transient_bytes); }

void check_memory_fits(const std::vector<int64_t>& peak_bytes_per_actor, int64_t limit_bytes,
                       const std::string& limit_name) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  for (size_t r = 0; r < peak_bytes_per_actor.size(); ++r) {
    if (peak_bytes_per_actor[r] <= limit_bytes) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, "does not fit: actor %zu needs %.1f GiB, has %.1f GiB (%s)", r,
                  static_cast<double>(peak_bytes_per_actor[r]) / kGiB,
                  static_cast<double>(limit_bytes) / kGiB, limit_name.c_str());
    throw InputError(buf);
  }
}

void check_memory_fits(const std::vector<int64_t>& peak_bytes_per_actor,
                       const ClusterSpec& cluster) {
  check_memory_fits(peak_bytes_per_actor, cluster.hbm_bytes, cluster.name);
}

std::vector<int64_t> host_offload_bytes_per_actor(const MemoryModel& mem,
                                                  const Placement& placement,
                                                  const std::vector<int>& peak_stashed_per_stage) {
  std::vector<int64_t> host(static_cast<size_t>(placement.num_actors), 0);
  for (size_t s = 0; s < mem.offloaded_bytes_per_stage.size(); ++s) {
    const int count = s < peak_stashed_per_stage.size() ? peak_stashed_per_stage[s] : 0;
    host[static_cast<size_t>(placement.actor_of(static_cast<int>(s)))] +=
        mem.offloaded_bytes_per_stage[s] * count;
  }
  return host;
}

std::string host_memory_excess(const std::vector<int64_t>& host_bytes_per_actor,
                               const ClusterSpec& cluster) {
  if (cluster.host_memory_bytes_per_gpu <= 0) return "";
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  for (size_t r = 0; r < host_bytes_per_actor.size(); ++r) {
    if (host_bytes_per_actor[r] <= cluster.host_memory_bytes_per_gpu) continue;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "actor %zu offloads %.1f GiB of activations per GPU, the host has %.1f GiB per "
                  "GPU (%s host_memory_gib_per_gpu)",
                  r, static_cast<double>(host_bytes_per_actor[r]) / kGiB,
                  static_cast<double>(cluster.host_memory_bytes_per_gpu) / kGiB,
                  cluster.name.c_str());
    return buf;
  }
  return "";
}

void check_host_memory_fits(const std::vector<int64_t>& host_bytes_per_actor,
                            const ClusterSpec& cluster) {
  const std::string excess = host_memory_excess(host_bytes_per_actor, cluster);
  if (!excess.empty()) throw InputError("does not fit in host memory: " + excess);
}

}  // namespace jaxpp
