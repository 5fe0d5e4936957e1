// Memory model: bytes one device of each actor holds (Megatron-style mixed-precision Adam).
//
// Static (for the whole iteration), per device of actor r, P_r = Σ params of r's stages / tp
// (the routed experts of MoE layers / (ep · etp): expert parallelism):
//   weights    P_r · weight_bytes_per_param            (2, bf16)
//   gradients  P_r · grad_bytes_per_param              (4, fp32 main grads)
//   optimizer  P_r · optimizer_state_bytes_per_param   (12: fp32 master, m, v; ParallelConfig::
//              optimizer_state: 10 with 16-bit master remainders, 4 with bf16 m, v and no master)
// (÷ dp·cp with the distributed optimizer; the routed experts' ÷ their edp = tp·cp·dp/(ep·etp)
// replicas). With gradient sharding (ParallelConfig::shard_gradients, ZeRO-2) the gradients are
// ÷ the same shards too, plus one transient full-size gradient: that of the largest layer the
// actor holds (L_r · grad_bytes_per_param, L_r its largest layer's per-device parameters), the
// unsharded gradient of the layer whose reduce-scatter is in flight (FSDP wraps and reduces one
// transformer block at a time; Megatron-LM and DeepSpeed reduce buckets of 40M and 500M
// elements). In grad_bytes. With parameter sharding (ParallelConfig::shard_parameters, ZeRO-3 /
// FSDP, implies gradient sharding) the weights are ÷ the same shards too (the FP8 layers' bytes
// as well), plus the unsharded weights of the two layers gathered at once (the layer being
// computed and the one prefetched): 2 · the largest layer's gathered bytes (layer_gather_bytes),
// in weight_bytes. Activations: one stashed microbatch of stage s
// holds the sum over its layers of OperatorCost::stash_bytes (operator_cost.h, graph/kernels.h):
// Korthikanti et al. 2022's inventory for today's kernels (FlashAttention keeps no s×s scores;
// the unfused attention of Megatron before it adds 5 bytes per head and key unless recomputed),
// tokens divided by cp, the hidden-state terms divided by tp only with sequence parallelism, the
// rest by tp; full recompute keeps the layer input only. Layers without kernels (custom) keep the
// old rule on their own stash_bytes:
//   sequence parallel            stash / tp
//   no SP, none or selective     stash · (10 + 24/tp) / 34   (layer norm/dropout inputs replicated)
//   no SP, full recompute        stash                       (the layer input is replicated)
// The simulator adds stash_bytes(s) when an F of stage s starts and frees it when the stage's
// backward for inputs (B or I) ends, so peak memory = static + the peak of that sum over time.
// The loss (the logits layer, an MTP module's own loss): its stash holds what the loss keeps of
// the logits for the backward (graph/model.h CrossEntropy: an fp32 copy, 4 bytes per token and
// vocabulary entry ÷ tp, in Megatron-Core, torchtitan and Hugging Face models), and while one
// microbatch's loss runs the 16-bit logits live beside that copy
// (OperatorCost::loss_transient_bytes). One loss runs at a time on a device, so each actor
// holding a loss adds that transient once (ActorMemory::loss_transient_bytes, counted in
// static_bytes so that the peak is static + the stash peak): exact when the actor's stash peaks
// while its loss runs (the last stage of 1F1B and GPipe, pp 1: the loss's forward and backward
// run with the microbatch's stash in place), an upper bound otherwise.
// Activation offloading (ParallelConfig::offload_layers): the stash of stage s keeps its other
// layers plus the two largest offloaded ones (OperatorCost::stage_stash_bytes); the rest,
// offloaded_bytes_per_stage[s] per stashed microbatch, waits in host memory. A device's host
// bytes are Σ over its actor's stages of offloaded_bytes_per_stage[s] times the most
// microbatches of s stashed at once (exact for one stage per actor, as Megatron's pp 1 has; an
// upper bound otherwise), checked against ClusterSpec::host_memory_bytes_per_gpu.
//
// Usage:
//   MemoryModel mem = build_memory_model(model, partition, placement, config, cluster);
//   check_memory_fits(peak_bytes_per_actor, cluster);   // InputError "does not fit: ..."
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/cluster.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/plan.h"

namespace jaxpp {

struct ActorMemory {
  int64_t params = 0;  // per device
  int64_t weight_bytes = 0;
  int64_t grad_bytes = 0;  // with gradient sharding: the shard plus the transient layer gradient
  int64_t optimizer_bytes = 0;
  // The largest loss transient of the actor's layers (OperatorCost::loss_transient_bytes): the
  // 16-bit logits beside their fp32 copy while one loss runs. An activation, but counted with
  // the static bytes: it does not grow with the microbatches stashed.
  int64_t loss_transient_bytes = 0;
  int64_t static_bytes() const {
    return weight_bytes + grad_bytes + optimizer_bytes + loss_transient_bytes;
  }
};

struct MemoryModel {
  std::vector<ActorMemory> actors;         // per actor, per device
  std::vector<int64_t> stash_bytes_per_stage;  // one stashed microbatch, per device
  // Activation offloading: the part of one stashed microbatch held in host memory, per device
  // (0 for every stage without offloading).
  std::vector<int64_t> offloaded_bytes_per_stage;

  std::vector<int64_t> static_bytes_per_actor() const;
};

class OperatorCost;
// Gradient bytes one device keeps for the `count` layers from `first` (whole parameter count
// `params`): the full per-device gradient, or with shard_gradients its 1/(dp·cp) shard (the
// routed experts' over their edp replicas).
double stage_grad_bytes(const OperatorCost& op, const ParallelConfig& config,
                        double grad_bytes_per_param, int first, int count, double params);
// With shard_gradients: the full per-device gradient of the largest of those layers (the
// transient above); 0 otherwise.
double transient_grad_bytes(const OperatorCost& op, const ModelSpec& model,
                            const ParallelConfig& config, double grad_bytes_per_param, int first,
                            int count);

// The bytes one device receives in an all-gather of layer l's weights under parameter sharding:
// its full per-device parameters (÷ tp; the routed experts ÷ ep·etp) at the bytes they are
// gathered in: 1 for the transformer layers of an FP8 model with fp8_params (Megatron's
// fp8_param_gather), the cluster's weight_bytes_per_param (16-bit) otherwise.
double layer_gather_bytes(const OperatorCost& op, const ModelSpec& model,
                          const ClusterSpec& cluster, int layer);
// Σ layer_gather_bytes over the `count` layers from `first`: one all-gather of a stage.
double stage_gather_bytes(const OperatorCost& op, const ModelSpec& model,
                          const ClusterSpec& cluster, int first, int count);

// What one device of an actor keeps for the `count` layers from `first` (a stage) for the whole
// step, as build_memory_model counts and rounds it (the partition search sums the same terms):
// its per-device parameters, weight bytes (FP8 weights and parameter sharding included),
// gradient bytes and optimizer state; and the two per-actor maxima the stage contributes to,
// taken over all the actor's stages: the transient gradient of gradient sharding
// (transient_grad_bytes), the largest layer's gathered weights of parameter sharding
// (layer_gather_bytes; the actor holds two such layers) and the loss transient
// (OperatorCost::loss_transient_bytes; ActorMemory::loss_transient_bytes).
struct StageStaticBytes {
  int64_t params = 0;
  int64_t weight_bytes = 0;
  int64_t grad_bytes = 0;
  int64_t optimizer_bytes = 0;
  double transient_grad_bytes = 0;
  double gathered_bytes = 0;
  double loss_transient_bytes = 0;
};
// The model, configuration and cluster are the ones `op` was built from (OperatorCost::model(),
// config(), cluster()).
StageStaticBytes stage_static_bytes(const OperatorCost& op, int first, int count);

// The three per-actor maxima of StageStaticBytes, taken over the actor's stages, and the bytes
// they add to the actor as build_memory_model counts them (rounded; the partition search adds the
// same): the transient gradient, two gathered layers (the one computed and the one prefetched),
// the loss transient.
struct ActorTransients {
  double transient_grad_bytes = 0, gathered_bytes = 0, loss_transient_bytes = 0;
  void take(const StageStaticBytes& b);
  int64_t grad_bytes() const;    // added to ActorMemory::grad_bytes
  int64_t weight_bytes() const;  // added to ActorMemory::weight_bytes
  int64_t loss_bytes() const;    // ActorMemory::loss_transient_bytes
};

MemoryModel build_memory_model(const ModelSpec& model, const Partition& partition,
                               const Placement& placement, const ParallelConfig& config,
                               const ClusterSpec& cluster);

// InputError "does not fit: actor r needs X GiB, has Y GiB (<limit_name>)" for the first actor
// whose peak exceeds limit_bytes; the cluster form checks its device memory, named by the cluster.
void check_memory_fits(const std::vector<int64_t>& peak_bytes_per_actor, int64_t limit_bytes,
                       const std::string& limit_name);
void check_memory_fits(const std::vector<int64_t>& peak_bytes_per_actor,
                       const ClusterSpec& cluster);

// Host bytes one device of each actor holds for activation offloading: Σ over the actor's
// stages s of offloaded_bytes_per_stage[s] · peak_stashed_per_stage[s] (the most microbatches
// of s stashed at once, SimResult::peak_stashed_per_stage).
std::vector<int64_t> host_offload_bytes_per_actor(const MemoryModel& mem,
                                                  const Placement& placement,
                                                  const std::vector<int>& peak_stashed_per_stage);
// InputError "does not fit in host memory: actor r offloads X GiB of activations per GPU, the
// host has Y GiB per GPU (<cluster> host_memory_gib_per_gpu)" for the first actor above the
// cluster's host_memory_bytes_per_gpu; nothing when that is 0 (not known).
void check_host_memory_fits(const std::vector<int64_t>& host_bytes_per_actor,
                            const ClusterSpec& cluster);
// The same message without the "does not fit in host memory: " prefix, or "" when it fits.
std::string host_memory_excess(const std::vector<int64_t>& host_bytes_per_actor,
                               const ClusterSpec& cluster);

}  // namespace jaxpp
