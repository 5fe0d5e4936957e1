// Plan: everything needed to simulate or run one configuration, as a versioned JSON file.
//
// plan.json = { "format": "jaxpp-sim-plan", "version": 1, "model": <model explicit form>,
//   "cluster": <ClusterSpec JSON, opaque to graph/>, "config": {...}, "partition": {...},
//   "placement": {...}, "program": {...}, "predicted": <metrics JSON, opaque to graph/>,
//   "assignment": {...} (only for a plan built from a name-to-actor assignment),
//   "meshes": [{"kind": "h100-sxm", "tp": 4}, ...] (only for a plan on a heterogeneous cluster:
//   one entry per actor, its device kind and tensor parallelism; docs/hardware.md) }
// `explore` and `simulate --plan` write it; `run` and `validate` read it. A file of another
// format or version is rejected with a clear error.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/assignment.h"
#include "graph/limits.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/program.h"

namespace jaxpp {

inline constexpr int kPlanVersion = 1;

// Attention kernel of the run: FlashAttention (fused, causal work only, no s x s activations;
// today's default in Megatron-LM/Transformer Engine, torchtitan, JAX) or the unfused form of
// Megatron-LM before FlashAttention (batched QK^T and attention x V GEMMs, a fused
// scale-mask-softmax kernel, s x s scores and dropout mask stashed for the backward).
// kFlash: the fused attention kernels of the cluster's `attention_efficiency` (FlashAttention-3 or
// cuDNN on Hopper); kFlash2: the FlashAttention-2 library kernels (its own efficiencies, lower on
// Hopper); kUnfused: pre-FlashAttention batched GEMMs and softmax over the s×s scores.
enum class AttentionKernel { kFlash, kUnfused, kFlash2 };
inline constexpr std::array kAllAttentionKernels = {
    AttentionKernel::kFlash, AttentionKernel::kUnfused, AttentionKernel::kFlash2};
std::string_view to_string(AttentionKernel a);  // "flash", "unfused", "flash2"
AttentionKernel parse_attention_kernel(std::string_view s, const std::string& where);

// How an MoE layer's expert-parallel all-to-all overlaps compute (docs/simulate.md):
//   kDualPipe  a fused group holding a forward and a backward of different microbatches
//   (DualPipeV's
//              F&B pairs, Interleaved1F1B/KimiK2 with --fuse-steady-state) hides each one's
//              all-to-all behind the other's compute
//   k1F1B      as kDualPipe, and every backward immediately followed on its actor by the forward
//              of another microbatch is paired with it (Megatron-LM's combined 1F1B EP overlap)
//   kNone      every all-to-all is serialised with the compute of its layer
//   kAuto      kDualPipe (overlap exactly what the schedule pairs)
enum class MoeOverlap { kAuto, kDualPipe, k1F1B, kNone };
inline constexpr std::array kAllMoeOverlaps = {MoeOverlap::kAuto, MoeOverlap::kDualPipe,
                                               MoeOverlap::k1F1B, MoeOverlap::kNone};
std::string_view to_string(MoeOverlap o);  // "auto", "dualpipe", "1f1b", "none"
MoeOverlap parse_moe_overlap(std::string_view s, const std::string& where);

// How the expert-parallel all-to-all sends a token (docs/simulate.md "Dispatcher and routing"):
//   kAllToAll  one copy per routed expert (top_k copies), Megatron-LM's "alltoall" token dispatcher
//   kDeepEP    one copy per destination rank (the rank duplicates it to its local experts), and
//              over the network one copy per destination node, forwarded over NVLink inside it
//              (DeepEP; Megatron-LM's "flex" dispatcher with the DeepEP or HybridEP backend)
enum class MoeDispatcher { kAllToAll, kDeepEP };
inline constexpr std::array kAllMoeDispatchers = {MoeDispatcher::kAllToAll, MoeDispatcher::kDeepEP};
std::string_view to_string(MoeDispatcher d);  // "alltoall", "deepep"
MoeDispatcher parse_moe_dispatcher(std::string_view s, const std::string& where);

// Which experts a token's top_k choices land on, for the all-to-all's destination count:
//   kRandom      balanced random routing (top_k distinct experts drawn uniformly)
//   kContiguous  token t to experts t·k … t·k+k−1 (mod E): consecutive experts, so few ranks (the
//                "fake balanced gate" of benchmark recipes such as NeMo AutoModel's)
enum class MoeRouting { kRandom, kContiguous };
inline constexpr std::array kAllMoeRoutings = {MoeRouting::kRandom, MoeRouting::kContiguous};
std::string_view to_string(MoeRouting r);  // "random", "contiguous"
MoeRouting parse_moe_routing(std::string_view s, const std::string& where);

// Dtype of the gradient buffer and of its data-parallel reduction (the framework's setting, not
// the hardware's): kCluster keeps the cluster's grad_bytes_per_param (4 in the presets: fp32 main
// gradients, Megatron-LM's default for bf16 training); kFp32 = 4 bytes per parameter (Megatron-LM
// --accumulate-allreduce-grads-in-fp32), kBf16 / kFp16 = 2 bytes (Megatron-LM --grad-reduce-in-bf16,
// NeMo optim.grad_sync_dtype: bf16; fp16 training without that flag reduces in fp16).
enum class GradDtype { kCluster, kFp32, kBf16, kFp16 };
inline constexpr std::array kAllGradDtypes = {GradDtype::kCluster, GradDtype::kFp32,
                                              GradDtype::kBf16, GradDtype::kFp16};
std::string_view to_string(GradDtype g);  // "cluster", "fp32", "bf16", "fp16"
GradDtype parse_grad_dtype(std::string_view s, const std::string& where);
// Bytes per parameter of the gradient buffer: `cluster_default` for kCluster.
double grad_bytes_per_param(GradDtype g, double cluster_default);

// What Adam keeps per parameter besides the weights and gradients (the framework's setting):
//   kCluster     the cluster's optimizer_state_bytes_per_param (12 in the presets: fp32 master
//                weights, m and v)
//   kFp32        12 bytes: fp32 master weights, m and v (Megatron-LM's distributed optimizer)
//   kRemainders  10 bytes: fp32 m and v and the 16 low bits of each fp32 master weight, whose
//                high 16 bits are the bf16 weight itself (Apex DistributedFusedAdam and
//                Transformer Engine FusedAdam store_param_remainders; NeMo 1.x sets it with fp32
//                optimizer state and bf16 weights); needs 16-bit weights
//   kBf16        4 bytes: m and v in bf16 and no master copy, the bf16 weights updated in place
//                (NeMo 1.x with optim.dtype bf16: store_params false)
//   kBf16Moments 8 bytes: fp32 master weights, m and v in bf16 (DeepSeek-V3 report Section 3.3.3,
//                "Low-Precision Optimizer States"; Megatron-LM's precision-aware optimizer with
//                --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16)
// The optimizer step's HBM traffic changes with it: each state byte is read and written once.
enum class OptimizerState { kCluster, kFp32, kRemainders, kBf16, kBf16Moments };
inline constexpr std::array kAllOptimizerStates = {
    OptimizerState::kCluster, OptimizerState::kFp32, OptimizerState::kRemainders,
    OptimizerState::kBf16, OptimizerState::kBf16Moments};
// "cluster", "fp32", "remainders", "bf16", "bf16-moments"
std::string_view to_string(OptimizerState o);
OptimizerState parse_optimizer_state(std::string_view s, const std::string& where);
// Bytes per parameter of the optimizer state: `cluster_default` for kCluster.
double optimizer_state_bytes_per_param(OptimizerState o, double cluster_default);
// HBM bytes one optimizer step moves per parameter: the cluster's traffic, less a read and a write
// of every state byte the setting drops (the cluster's traffic for kCluster).
double optimizer_traffic_bytes_per_param(OptimizerState o, double cluster_state,
                                         double cluster_traffic);

// Some layer has routed experts (a model with MoE fields can have none: a Hugging Face config with
// first_k_dense_replace = num_hidden_layers; every MoE flag was accepted and ignored on it).
bool has_routed_experts(const ModelSpec& model);
// --etp given on a model without routed experts: InputError naming --etp, whatever its value
// (etp equal to tp was accepted, any other refused; a plan file may still carry etp = tp).
void check_etp_flag(const ModelSpec& model);

// How the devices are used. gpus = pp · dp · cp · tp. Rank layout (costmodel/analytic_cost.h):
// tensor parallelism innermost, then context parallelism, then data parallelism, then pipeline.
struct ParallelConfig {
  int gpus = 1;
  int pp = 1;
  int tp = 1;
  int dp = 1;
  // Context parallelism: each sequence split over cp devices (ring attention exchanging K/V);
  // gradients are reduced over dp · cp devices.
  int cp = 1;
  int virtual_stages = 1;  // v: stages per actor
  int microbatch_size = 1;
  int num_microbatches = 1;
  int global_batch = 1;  // sequences per iteration over all dp replicas
  std::string schedule = "1f1b";
  Recompute recompute = Recompute::kNone;
  // With recompute full: the number of transformer layers fully recomputed in each stage chunk
  // (each virtual stage), its first ones; the chunk's other transformer layers keep their
  // activations as under none (Megatron-LM --recompute-granularity full --recompute-method block
  // --recompute-num-layers N). -1 = every layer (full as before). Only with recompute full.
  int recompute_layers = -1;
  // With recompute selective: Megatron-Core's fine-grained selective recompute, the set of
  // RecomputeModule bits (--recompute-granularity selective --recompute-modules m1 m2 ...;
  // TransformerConfig.recompute_modules). 0 = Megatron's default ["core_attn"], which is what
  // selective means without a list; a set of core_attn alone is stored as 0. Only with recompute
  // selective (check_recompute_modules).
  uint32_t recompute_modules = 0;
  // Activation offloading (Megatron Core --cpu-offloading --cpu-offloading-num-layers N,
  // Transformer Engine's CPU offload context): the activations the first N transformer layers
  // keep for their backward are copied to host memory during the forward and back during the
  // backward, over the host link (ClusterSpec::host_link_bandwidth_bytes_per_s). 0 = off.
  // Megatron's rules: 0 <= N < the model's transformer layers, no pipeline parallelism
  // (pp = 1), no activation recompute (costmodel/operator_cost.h, docs/simulate.md).
  int offload_layers = 0;
  bool sequence_parallel = false;
  // Distributed optimizer (Megatron-LM's --use-distributed-optimizer, ZeRO-1): optimizer state
  // sharded over the dp · cp replicas; gradients reduce-scattered, parameters all-gathered.
  bool zero1 = false;
  // Gradient sharding (ZeRO-2; FSDP's "shard gradients and optimizer state"), valid only with
  // the distributed optimizer: each device keeps 1/(dp·cp) of its gradients plus the full
  // gradient of the layer being reduced, and every microbatch's backward of a stage ends with a
  // reduce-scatter of that stage's gradients (m per step instead of one reduction at the end;
  // costmodel/analytic_cost.h, costmodel/memory.h).
  bool shard_gradients = false;
  // Parameter sharding (ZeRO-3; PyTorch FSDP/FSDP2 FULL_SHARD, Megatron-FSDP), valid only with
  // the distributed optimizer, and implies shard_gradients (set both): each device keeps 1/(dp·cp)
  // of its weights plus the full weights of the two largest layers in flight (the one computed
  // and the one prefetched), and every microbatch's forward and backward of a stage is preceded
  // by an all-gather of that stage's weights on the collective stream (kAllGather,
  // schedules/lower.h); the distributed optimizer's final parameter all-gather is not needed.
  bool shard_parameters = false;
  AttentionKernel attention = AttentionKernel::kFlash;
  // Tensor-parallel communication overlapped with the neighbouring GEMMs (Megatron-LM
  // --tp-comm-overlap, Transformer Engine userbuffers; needs sequence parallelism). Megatron's
  // default: off.
  bool tp_comm_overlap = false;
  // Data-parallel gradient reduction overlapped with the backward (Megatron-LM
  // --overlap-grad-reduce) and, with the distributed optimizer, the parameter all-gather with the
  // next forward (--overlap-param-gather). Megatron's default: off.
  bool overlap_grad_reduce = false;
  // Expert parallelism (MoE models only; docs/simulate.md "Expert parallelism"). The routed
  // experts of every MoE layer are spread over ep devices, each expert's weights split over etp
  // devices (expert tensor parallelism; 0 = tp, Megatron-LM's default). Placement rule (Megatron
  // Core's "parallel folding"): the ep·etp expert ranks are carved out of the tp·cp·dp devices of
  // one pipeline stage, etp innermost: device d of a stage (d = tp_index + tp·(cp_index +
  // cp·dp_index)) has etp_index d mod etp, ep_index (d / etp) mod ep; edp = tp·cp·dp / (ep·etp)
  // replicas hold the same experts. So ep must divide the routed experts and ep·etp the
  // stage's tp·cp·dp devices.
  int ep = 1;
  int etp = 0;
  // Tokens the busiest expert rank receives over the balanced share (>= 1; 1 = a balanced
  // router): scales that rank's routed-expert compute and the all-to-all volume.
  double moe_imbalance = 1.0;
  MoeOverlap moe_overlap = MoeOverlap::kAuto;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  MoeRouting moe_routing = MoeRouting::kRandom;
  // Group-limited random routing (DeepSeek's gates, docs/simulate.md "Dispatcher and routing"):
  // each token's top_k experts lie on at most moe_node_limit nodes of the ep group (DeepSeek-V3's
  // node-limited routing, M = 4) or on at most moe_device_limit of its ranks (DeepSeek-V2's
  // device-limited routing, M = 3); 0 = no limit. Random routing only, one of the two at a time.
  int moe_node_limit = 0;
  int moe_device_limit = 0;
  GradDtype grad_dtype = GradDtype::kCluster;
  OptimizerState optimizer_state = OptimizerState::kCluster;
  int expert_tp() const { return etp > 0 ? etp : tp; }
  // Replicas of each expert (expert data parallelism): tp·cp·dp / (ep·etp).
  int expert_dp() const { return tp * cp * dp / std::max(1, ep * expert_tp()); }
  bool operator==(const ParallelConfig&) const = default;
};
nlohmann::json config_to_json(const ParallelConfig& c);
ParallelConfig config_from_json(const nlohmann::json& j, const std::string& where);
// InputError when the expert-parallel fields do not fit the model and the devices: ep, etp, an
// imbalance, or a dispatcher or routing other than the defaults on a model without routed experts, ep not dividing the routed experts, ep·etp not
// dividing tp·cp·dp, an imbalance below 1 or above ep. `flags` names the fields as command-line
// flags (--ep, --etp, --moe-imbalance), otherwise as "<where>: field '<field_prefix>ep'"
// (field_prefix "config." in plan.json, "" in a validation-corpus row).
// Where a configuration's sharding settings were given, for the error messages: the location of
// each setting (a flag such as "--shard-params", or "<file>: field 'shard_parameters'") and how the
// distributed optimizer is switched on there ("--zero1", "\"zero1\": true").
struct ShardingOrigin {
  std::string shard_parameters;
  std::string shard_gradients;
  std::string distributed_optimizer;
};
// The sharding rules, in one place for flags, plan.json and corpus rows. InputError when
// shard_parameters or shard_gradients is set without zero1 (sharding needs the distributed
// optimizer), or shard_parameters without shard_gradients (parameter sharding implies gradient
// sharding; the entry points set both).
void check_sharding(const ParallelConfig& config, const ShardingOrigin& at);
// check_sharding with the settings named as command-line flags (`flags`: --shard-params,
// --shard-grads, --zero1), otherwise as "<where>: field 'shard_parameters'" and
// "<where>: field 'shard_gradients'" of a request whose optimizer field is zero1.
void check_shard_gradients(const ParallelConfig& config, const std::string& where, bool flags);
// InputError when recompute_layers is set (>= 0) with a policy other than full, or is below -1.
// `where` names the setting ("--recompute-layers", "<file>: field 'config.recompute_layers'").
void check_recompute_layers(const ParallelConfig& config, const std::string& where);
// The modules of Megatron-Core's selective recompute that jaxpp-sim models
// (megatron/core/transformer/transformer_config.py, field recompute_modules; docs/simulate.md):
//   core_attn    the attention core (transformer_layer.py / attention.py, normal checkpoint):
//                its forward runs again in the backward (today's "selective")
//   layernorm    input_layernorm and pre_mlp_layernorm where they are separate modules
//                (transformer_layer.py TransformerLayer.__init__: not IdentityOp; with Transformer
//                Engine's layer specs a dense attention or dense MLP fuses its norm into the next
//                linear, so only MLA layers' input norm and MoE layers' pre-MLP norm qualify):
//                their outputs are discarded after the forward and recomputed (output-discarding
//                checkpoint, CheckpointWithoutOutput)
//   mla_up_proj  the MLA up-projections and RoPE (multi_latent_attention.py,
//                qkv_up_proj_and_rope_apply under CheckpointWithoutOutput): q, k and v are
//                discarded once the attention core ran and recomputed from the latent vectors
//   moe_act      the routed experts' activation function (moe/experts.py TEGroupedMLP,
//                activation_checkpoint): its output, the input of linear_fc2, is discarded
// Megatron's other modules (mlp, moe, shared_experts: normal checkpoints of whole MLPs) are not
// modelled: the parser refuses them with that reason.
enum class RecomputeModule { kCoreAttn = 0, kLayernorm = 1, kMlaUpProj = 2, kMoeAct = 3 };
inline constexpr std::array kAllRecomputeModules = {RecomputeModule::kCoreAttn,
                                                    RecomputeModule::kLayernorm,
                                                    RecomputeModule::kMlaUpProj,
                                                    RecomputeModule::kMoeAct};
inline constexpr uint32_t recompute_module_bit(RecomputeModule m) {
  return uint32_t{1} << static_cast<int>(m);
}
std::string_view to_string(RecomputeModule m);  // Megatron's names: "core_attn", ...
// A list "a,b" (commas or spaces) of Megatron module names into a set of bits, core_attn alone
// stored as 0 (the default). InputError naming `where` on an unknown or unmodelled name (listing
// the valid names), an empty list or a repeated name.
uint32_t parse_recompute_modules(std::string_view text, const std::string& where);
// --recompute-modules as given by a user (simulate, graph, the Python module): parse_recompute_
// modules, and InputError naming `where` unless `recompute` is selective, whatever the list names
// ("core_attn" alone, stored as 0, was accepted and ignored beside recompute none).
uint32_t recompute_modules_flag(std::string_view text, Recompute recompute,
                                const std::string& where);
// InputError naming `where` (a flag, or a plan's or corpus row's "recompute_modules") unless
// `recompute` is selective: the rule for modules given at all, whatever they list.
void check_modules_need_selective(Recompute recompute, const std::string& where);
// The set as Megatron's names in kAllRecomputeModules order, joined by `sep` ("core_attn" for 0).
std::string recompute_modules_to_string(uint32_t modules, std::string_view sep = ",");
// JSON form (plan.json config.recompute_modules, corpus rows): an array of Megatron's names (the
// reader also takes parse_recompute_modules's string, as a corpus CSV cell gives it); the reader
// throws InputError naming `where` as parse_recompute_modules does.
nlohmann::json recompute_modules_to_json(uint32_t modules);
uint32_t recompute_modules_from_json(const nlohmann::json& value, const std::string& where);
// The modules the configuration recomputes: config.recompute_modules, core_attn when that is 0,
// and nothing unless the policy is selective.
uint32_t effective_recompute_modules(const ParallelConfig& config);
inline bool recomputes_module(const ParallelConfig& config, RecomputeModule m) {
  return (effective_recompute_modules(config) & recompute_module_bit(m)) != 0;
}
// Extra forward FLOPs of one sequence that layer `index` redoes in its backward under recompute
// selective with the module set `modules` (0 = core_attn): the attention core's
// (LayerWork::recompute_flops for selective) with core_attn, plus 2·s·(weights of q_up, or q,
// and kv_up) of an MLA transformer layer, or of an MTP module's copied MLA block
// (ModelSpec::mtp_block), with mla_up_proj; the norms and the activation are memory-bound (no
// FLOPs counted).
double selective_recompute_flops(const ModelSpec& model, int index, uint32_t modules);
// Bytes of one sequence that layer `index` stashes under recompute selective with the module set
// `modules` (0 = core_attn), before tensor parallelism: LayerWork::stash_bytes for selective
// with core_attn, for none without it (unfused attention keeps its scores), less what each other
// module frees (graph/kernels.h, as OperatorCost's stash subtracts it); an MTP module frees what
// its copied block frees (ModelSpec::mtp_block), other custom layers nothing.
int64_t selective_stash_bytes(const ModelSpec& model, int index, uint32_t modules);
// InputError naming `where` when recompute_modules is set with a policy other than selective.
// With a model (non-null): also when no layer of the model has one of the modules (mla_up_proj
// without MLA, moe_act without MoE layers, layernorm without an MLA or MoE layer), and for an FP8
// model with delayed scaling and layernorm or moe_act (Megatron refuses it:
// TransformerConfig.__post_init__).
void check_recompute_modules(const ParallelConfig& config, const std::string& where,
                             const ModelSpec* model = nullptr);
// The policy layer `layer` of the stage chunk [first_layer, ...) runs under: config.recompute,
// except that with recompute_layers = N >= 0 only the chunk's first N transformer layers are
// recomputed (full) and every later transformer layer keeps its activations (none). Layers that
// are not transformer layers get config.recompute (they recompute nothing under any policy).
Recompute layer_recompute(const ModelSpec& model, const ParallelConfig& config, int first_layer,
                          int layer);
// InputError when offload_layers breaks Megatron Core's rules (TransformerConfig.__post_init__):
// negative, not below the model's transformer layers, with pipeline parallelism (pp > 1) or
// with activation recompute. `where` names the setting ("--offload-layers", "<file>: field
// 'config.offload_layers'").
void check_offload_layers(const ModelSpec& model, const ParallelConfig& config,
                          const std::string& where);
// simulate's checks of graph's pipeline settings before anything is priced: check_offload_layers
// ("--offload-layers"), then check_recompute_modules with the model ("--recompute-modules"), as
// `jaxpp-sim graph` and Python graph() run them.
void check_graph_settings(const ModelSpec& model, int pp, Recompute recompute, int offload_layers,
                          uint32_t recompute_modules);
void check_moe_config(const ModelSpec& model, const ParallelConfig& config,
                      const std::string& where, bool flags,
                      std::string_view field_prefix = "config.");

// The mesh of one pipeline actor on a heterogeneous cluster (costmodel/hetero_cluster.h): the
// device kind it runs on (a kind name of the cluster) and its tensor parallelism.
struct ActorMesh {
  std::string kind;
  int tp = 1;
  bool operator==(const ActorMesh&) const = default;
};

struct Plan {
  ModelSpec model;
  nlohmann::json cluster;  // parsed by costmodel/
  ParallelConfig config;
  Partition partition;
  Placement placement;
  Program program;
  nlohmann::json predicted;  // metrics written by the simulator; may be null
  // The name-to-actor assignment the partition and placement came from (graph/assignment.h),
  // written as plan.json's "assignment" field and checked on reading: it must give exactly the
  // plan's partition and placement. nullopt for plans built from --partition and a schedule.
  std::optional<AssignmentSpec> assignment;
  // Heterogeneous cluster only (empty otherwise): the mesh of each actor (size config.pp);
  // plan.cluster is then the heterogeneous cluster's JSON form and config.tp the first actor's.
  std::vector<ActorMesh> meshes;
};

nlohmann::json plan_to_json(const Plan& plan);
Plan plan_from_json(const nlohmann::json& j, const std::string& source);
Plan load_plan(const std::string& path);
// The plan file's text (plan_to_json, indented). A plan that could not be read back (longer than
// kMaxInputFileBytes, graph/limits.h) is an InputError "<where>: the plan would be N MiB, ..."
// instead of a file that load_plan refuses.
std::string plan_to_text(const Plan& plan, const std::string& where = "plan",
                         int64_t max_bytes = kMaxInputFileBytes);
void save_plan(const Plan& plan, const std::string& path);  // atomic write

}  // namespace jaxpp
