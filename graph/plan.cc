#include "graph/plan.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/json_util.h"
#include "graph/kernels.h"
#include "graph/limits.h"
#include "graph/range_check.h"

namespace jaxpp {
namespace {

constexpr const char* kPlanFormat = "jaxpp-sim-plan";

}  // namespace

std::string_view to_string(AttentionKernel a) {
  switch (a) {
    case AttentionKernel::kFlash:
      return "flash";
    case AttentionKernel::kUnfused:
      return "unfused";
    case AttentionKernel::kFlash2:
      return "flash2";
  }
  return "?";
}

AttentionKernel parse_attention_kernel(std::string_view s, const std::string& where) {
  for (AttentionKernel a : kAllAttentionKernels)
    if (to_string(a) == s) return a;
  throw_input_error(
      where, "expected \"flash\", \"flash2\" or \"unfused\", got \"" + std::string(s) + "\"");
}

std::string_view to_string(MoeOverlap o) {
  switch (o) {
    case MoeOverlap::kAuto:
      return "auto";
    case MoeOverlap::kDualPipe:
      return "dualpipe";
    case MoeOverlap::k1F1B:
      return "1f1b";
    case MoeOverlap::kNone:
      return "none";
  }
  return "?";
}

MoeOverlap parse_moe_overlap(std::string_view s, const std::string& where) {
  for (MoeOverlap o : kAllMoeOverlaps)
    if (to_string(o) == s) return o;
  throw_input_error(where, "expected auto, dualpipe, 1f1b or none, got \"" + std::string(s) + "\"");
}

std::string_view to_string(MoeDispatcher d) {
  switch (d) {
    case MoeDispatcher::kAllToAll:
      return "alltoall";
    case MoeDispatcher::kDeepEP:
      return "deepep";
  }
  return "?";
}

MoeDispatcher parse_moe_dispatcher(std::string_view s, const std::string& where) {
  for (MoeDispatcher d : kAllMoeDispatchers)
    if (to_string(d) == s) return d;
  throw_input_error(where, "expected alltoall or deepep, got \"" + std::string(s) + "\"");
}

std::string_view to_string(MoeRouting r) {
  switch (r) {
    case MoeRouting::kRandom:
      return "random";
    case MoeRouting::kContiguous:
      return "contiguous";
  }
  return "?";
}

MoeRouting parse_moe_routing(std::string_view s, const std::string& where) {
  for (MoeRouting r : kAllMoeRoutings)
    if (to_string(r) == s) return r;
  throw_input_error(where, "expected random or contiguous, got \"" + std::string(s) + "\"");
}

std::string_view to_string(GradDtype g) {
  switch (g) {
    case GradDtype::kCluster:
      return "cluster";
    case GradDtype::kFp32:
      return "fp32";
    case GradDtype::kBf16:
      return "bf16";
    case GradDtype::kFp16:
      return "fp16";
  }
  return "?";
}

GradDtype parse_grad_dtype(std::string_view s, const std::string& where) {
  for (GradDtype g : kAllGradDtypes)
    if (to_string(g) == s) return g;
  throw_input_error(where, "expected cluster, fp32, bf16 or fp16, got \"" + std::string(s) + "\"");
}

double grad_bytes_per_param(GradDtype g, double cluster_default) {
  switch (g) {
    case GradDtype::kFp32:
      return 4;
    case GradDtype::kBf16:
    case GradDtype::kFp16:
      return 2;
    case GradDtype::kCluster:
      break;
  }
  return cluster_default;
}

std::string_view to_string(OptimizerState o) {
  switch (o) {
    case OptimizerState::kCluster:
      return "cluster";
    case OptimizerState::kFp32:
      return "fp32";
    case OptimizerState::kRemainders:
      return "remainders";
    case OptimizerState::kBf16:
      return "bf16";
    case OptimizerState::kBf16Moments:
      return "bf16-moments";
  }
  return "?";
}

OptimizerState parse_optimizer_state(std::string_view s, const std::string& where) {
  for (OptimizerState o : kAllOptimizerStates)
    if (to_string(o) == s) return o;
  throw_input_error(where, "expected cluster, fp32, remainders, bf16 or bf16-moments, got \"" +
                               std::string(s) + "\"");
}

double optimizer_state_bytes_per_param(OptimizerState o, double cluster_default) {
  switch (o) {
    case OptimizerState::kFp32:
      return 12;
    case OptimizerState::kRemainders:
      return 10;
    case OptimizerState::kBf16:
      return 4;
    case OptimizerState::kBf16Moments:
      return 8;
    case OptimizerState::kCluster:
      break;
  }
  return cluster_default;
}

double optimizer_traffic_bytes_per_param(OptimizerState o, double cluster_state,
                                         double cluster_traffic) {
  const double state = optimizer_state_bytes_per_param(o, cluster_state);
  return std::max(0.0, cluster_traffic - 2 * (cluster_state - state));
}

bool has_routed_experts(const ModelSpec& model) {
  return model.moe.enabled() && std::any_of(model.layers.begin(), model.layers.end(),
                                            [](const LayerWork& l) { return l.moe; });
}

void check_etp_flag(const ModelSpec& model) {
  if (!has_routed_experts(model))
    throw_input_error(
        "--etp", "expert tensor parallelism on " + model.name + ", which has no routed experts");
}

void check_moe_config(const ModelSpec& model, const ParallelConfig& c, const std::string& where,
                      bool flags, std::string_view field_prefix) {
  const auto name = [&](const char* flag, const char* field) {
    return flags ? std::string(flag)
                 : where + ": field '" + std::string(field_prefix) + field + "'";
  };
  const int experts = model.moe.experts;
  if (c.ep < 1) throw_input_error(name("--ep", "ep"), "must be >= 1");
  if (c.etp < 0) throw_input_error(name("--etp", "etp"), "must be >= 1");
  if (!(c.moe_imbalance >= 1.0) || !std::isfinite(c.moe_imbalance))
    throw_input_error(name("--moe-imbalance", "moe_imbalance"),
                      "must be a number >= 1 (1 = a balanced router)");
  if (!has_routed_experts(model)) {
    if (c.ep > 1)
      throw_input_error(name("--ep", "ep"), "ep " + std::to_string(c.ep) + " on " + model.name +
                                                ", which has no routed experts (a dense model)");
    if (c.etp > 0 && c.etp != c.tp)
      throw_input_error(name("--etp", "etp"), "expert tensor parallelism on " + model.name +
                                                  ", which has no routed experts");
    if (c.moe_overlap != MoeOverlap::kAuto)
      throw_input_error(name("--moe-overlap", "moe_overlap"),
                        "overlaps the all-to-all of " + model.name +
                            ", which has no routed experts (no all-to-all)");
    if (c.moe_imbalance != 1.0)
      throw_input_error(name("--moe-imbalance", "moe_imbalance"),
                        "a routing imbalance on " + model.name + ", which has no routed experts");
    if (c.moe_dispatcher != MoeDispatcher::kAllToAll)
      throw_input_error(
          name("--moe-dispatcher", "moe_dispatcher"),
          "an expert-parallel dispatcher on " + model.name + ", which has no routed experts");
    if (c.moe_routing != MoeRouting::kRandom)
      throw_input_error(
          name("--moe-routing", "moe_routing"),
          "an expert routing pattern on " + model.name + ", which has no routed experts");
    if (c.moe_node_limit != 0 || c.moe_device_limit != 0)
      throw_input_error(c.moe_node_limit != 0 ? name("--moe-node-limit", "moe_node_limit")
                                              : name("--moe-device-limit", "moe_device_limit"),
                        "a routing limit on " + model.name + ", which has no routed experts");
    return;
  }
  for (const auto& [limit, flag, field] :
       {std::tuple{c.moe_node_limit, "--moe-node-limit", "moe_node_limit"},
        std::tuple{c.moe_device_limit, "--moe-device-limit", "moe_device_limit"}}) {
    if (limit < 0)
      throw_input_error(name(flag, field),
                        "must be >= 1 (0 = no limit), got " + std::to_string(limit));
    if (limit > 0 && c.moe_routing != MoeRouting::kRandom)
      throw_input_error(name(flag, field), "limits random routing only, not moe_routing " +
                                               std::string(to_string(c.moe_routing)));
  }
  if (c.moe_node_limit > 0 && c.moe_device_limit > 0)
    throw_input_error(name("--moe-device-limit", "moe_device_limit"),
                      "give a node limit or a device limit, not both");
  if (experts % c.ep != 0)
    throw_input_error(name("--ep", "ep"), "ep " + std::to_string(c.ep) + " does not divide the " +
                                              std::to_string(experts) + " routed experts of " +
                                              model.name);
  const int64_t stage_devices = int64_t{c.tp} * c.cp * c.dp;
  const int64_t expert_devices = int64_t{c.ep} * c.expert_tp();
  if (stage_devices % expert_devices != 0)
    throw_input_error(name(c.etp > 0 ? "--etp" : "--ep", c.etp > 0 ? "etp" : "ep"),
                      "ep·etp = " + std::to_string(c.ep) + "·" + std::to_string(c.expert_tp()) +
                          " does not divide the tp·cp·dp = " + std::to_string(stage_devices) +
                          " devices of a pipeline stage it is carved from");
  if (model.moe.expert_ffn_hidden % c.expert_tp() != 0)
    throw_input_error(name("--etp", "etp"), "etp " + std::to_string(c.expert_tp()) +
                                                " does not divide the expert FFN width " +
                                                std::to_string(model.moe.expert_ffn_hidden));
  if (c.moe_imbalance > c.ep)
    throw_input_error(name("--moe-imbalance", "moe_imbalance"),
                      "larger than ep (" + std::to_string(c.ep) +
                          "): the busiest rank cannot receive more than every token");
  if (c.moe_device_limit > 0 && int64_t{c.moe_device_limit} * (experts / c.ep) < model.moe.top_k)
    throw_input_error(name("--moe-device-limit", "moe_device_limit"),
                      std::to_string(c.moe_device_limit) + " devices of " +
                          std::to_string(experts / c.ep) + " experts each cannot hold a token's " +
                          std::to_string(model.moe.top_k) + " experts");
}

void check_sharding(const ParallelConfig& c, const ShardingOrigin& at) {
  if (c.shard_parameters && !c.zero1)
    throw_input_error(at.shard_parameters,
                      "parameter sharding (ZeRO-3 / FSDP) needs the distributed optimizer (" +
                          at.distributed_optimizer + ")");
  if (c.shard_parameters && !c.shard_gradients)
    throw_input_error(at.shard_gradients,
                      "off, but parameter sharding (ZeRO-3 / FSDP) implies gradient sharding");
  if (c.shard_gradients && !c.zero1)
    throw_input_error(at.shard_gradients,
                      "gradient sharding (ZeRO-2) needs the distributed optimizer (" +
                          at.distributed_optimizer + ")");
}

void check_shard_gradients(const ParallelConfig& c, const std::string& where, bool flags) {
  if (flags) {
    check_sharding(c, {"--shard-params", "--shard-grads", "--zero1"});
    return;
  }
  check_sharding(
      c, {where + ": field 'shard_parameters'", where + ": field 'shard_gradients'", "zero1"});
}

void check_recompute_layers(const ParallelConfig& config, const std::string& where) {
  if (config.recompute_layers < -1)
    throw_input_error(
        where, "expected a number of layers >= 0, got " + std::to_string(config.recompute_layers));
  if (config.recompute_layers >= 0 && config.recompute != Recompute::kFull)
    throw_input_error(where,
                      "counts fully recomputed layers and needs recompute full (recompute is " +
                          std::string(to_string(config.recompute)) + ")");
}

void check_graph_settings(const ModelSpec& model, int pp, Recompute recompute, int offload_layers,
                          uint32_t recompute_modules) {
  ParallelConfig rules;
  rules.pp = pp;
  rules.recompute = recompute;
  rules.offload_layers = offload_layers;
  check_offload_layers(model, rules, "--offload-layers");
  rules.recompute_modules = recompute_modules;
  check_recompute_modules(rules, "--recompute-modules", &model);
}

void check_offload_layers(const ModelSpec& model, const ParallelConfig& config,
                          const std::string& where) {
  const int n = config.offload_layers;
  if (n == 0) return;
  if (n < 0) throw_input_error(where, "expected a number of layers >= 0, got " + std::to_string(n));
  // Megatron's num_layers: the transformer layers, multi-token-prediction modules left out.
  const int transformers = model.num_transformer_layers;
  if (n >= transformers)
    throw_input_error(where, "offloads " + std::to_string(n) + " layers but model '" + model.name +
                                 "' has " + std::to_string(transformers) +
                                 " transformer layers (Megatron offloads fewer than all of them)");
  if (config.pp > 1)
    throw_input_error(where,
                      "activation offloading needs pp 1 (Megatron Core has no support for "
                      "pipeline parallelism with CPU offloading), got pp " +
                          std::to_string(config.pp));
  if (config.recompute != Recompute::kNone)
    throw_input_error(where,
                      "activation offloading needs recompute none (Megatron Core: CPU "
                      "offloading does not work when activation recomputation is "
                      "enabled), got recompute " +
                          std::string(to_string(config.recompute)));
}

std::string_view to_string(RecomputeModule m) {
  switch (m) {
    case RecomputeModule::kCoreAttn:
      return "core_attn";
    case RecomputeModule::kLayernorm:
      return "layernorm";
    case RecomputeModule::kMlaUpProj:
      return "mla_up_proj";
    case RecomputeModule::kMoeAct:
      return "moe_act";
  }
  return "?";
}

uint32_t parse_recompute_modules(std::string_view text, const std::string& where) {
  const std::string valid = "core_attn, layernorm, mla_up_proj or moe_act";
  uint32_t bits = 0;
  int names = 0;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find_first_of(", ", i);
    if (j == std::string_view::npos) j = text.size();
    const std::string_view name = text.substr(i, j - i);
    i = j + 1;
    if (name.empty()) continue;
    ++names;
    bool found = false;
    for (RecomputeModule m : kAllRecomputeModules) {
      if (name != to_string(m)) continue;
      if ((bits & recompute_module_bit(m)) != 0)
        throw_input_error(where, "names recompute module \"" + std::string(name) + "\" twice");
      bits |= recompute_module_bit(m);
      found = true;
    }
    if (found) continue;
    if (name == "mlp" || name == "moe" || name == "shared_experts")
      throw_input_error(where, "recompute module \"" + std::string(name) +
                                   "\" (a normal checkpoint of a whole MLP) is not modelled; "
                                   "expected " +
                                   valid);
    throw_input_error(
        where, "unknown recompute module \"" + std::string(name) + "\" (expected " + valid + ")");
  }
  if (names == 0)
    throw_input_error(where, "expected at least one recompute module (" + valid +
                                 "); for no recompute use recompute none");
  return bits == recompute_module_bit(RecomputeModule::kCoreAttn) ? 0 : bits;
}

void check_modules_need_selective(Recompute recompute, const std::string& where) {
  if (recompute != Recompute::kSelective)
    throw_input_error(where,
                      "names the modules of selective recompute and needs recompute "
                      "selective (recompute is " +
                          std::string(to_string(recompute)) + ")");
}

uint32_t recompute_modules_flag(std::string_view text, Recompute recompute,
                                const std::string& where) {
  const uint32_t modules = parse_recompute_modules(text, where);
  check_modules_need_selective(recompute, where);
  return modules;
}

std::string recompute_modules_to_string(uint32_t modules, std::string_view sep) {
  if (modules == 0) modules = recompute_module_bit(RecomputeModule::kCoreAttn);
  std::string out;
  for (RecomputeModule m : kAllRecomputeModules) {
    if ((modules & recompute_module_bit(m)) == 0) continue;
    if (!out.empty()) out += sep;
    out += to_string(m);
  }
  return out;
}

nlohmann::json recompute_modules_to_json(uint32_t modules) {
  nlohmann::json names = nlohmann::json::array();
  if (modules == 0) modules = recompute_module_bit(RecomputeModule::kCoreAttn);
  for (RecomputeModule m : kAllRecomputeModules)
    if ((modules & recompute_module_bit(m)) != 0) names.push_back(std::string(to_string(m)));
  return names;
}

uint32_t recompute_modules_from_json(const nlohmann::json& value, const std::string& where) {
  if (value.is_string()) return parse_recompute_modules(value.get<std::string>(), where);
  if (!value.is_array())
    throw_input_error(where,
                      "expected an array of recompute module names (core_attn, "
                      "layernorm, mla_up_proj, moe_act)");
  std::string list;
  for (const nlohmann::json& name : value) {
    if (!name.is_string() || name.get<std::string>().empty() ||
        name.get<std::string>().find_first_of(", ") != std::string::npos)
      throw_input_error(where,
                        "expected an array of recompute module names (core_attn, "
                        "layernorm, mla_up_proj, moe_act), got " +
                            name.dump());
    list += name.get<std::string>() + ",";
  }
  return parse_recompute_modules(list, where);
}

uint32_t effective_recompute_modules(const ParallelConfig& config) {
  if (config.recompute != Recompute::kSelective) return 0;
  return config.recompute_modules != 0 ? config.recompute_modules
                                       : recompute_module_bit(RecomputeModule::kCoreAttn);
}

double selective_recompute_flops(const ModelSpec& model, int index, uint32_t modules) {
  if (modules == 0) modules = recompute_module_bit(RecomputeModule::kCoreAttn);
  const LayerWork& l = model.layers[static_cast<size_t>(index)];
  double flops = 0;
  if ((modules & recompute_module_bit(RecomputeModule::kCoreAttn)) != 0)
    flops += l.recompute_flops[static_cast<int>(Recompute::kSelective)];
  const MlaSpec& mla = model.mla;
  // An MTP module's block is a copy of a transformer layer (ModelSpec::mtp_block): its q_up and
  // kv_up run again as that layer's do (OperatorCost prices its recompute so).
  if ((modules & recompute_module_bit(RecomputeModule::kMlaUpProj)) != 0 && mla.enabled() &&
      (l.kind == LayerKind::kTransformer || model.mtp_block(index) >= 0)) {
    const double a = model.heads;
    const double q_in = mla.q_lora_rank > 0 ? mla.q_lora_rank : model.hidden;
    const double weights =
        q_in * a * mla.qk_head_dim() +
        static_cast<double>(mla.kv_lora_rank) * a * (mla.qk_nope_head_dim + mla.v_head_dim);
    flops += 2.0 * model.tokens_per_sequence() * weights;
  }
  return flops;
}

int64_t selective_stash_bytes(const ModelSpec& model, int index, uint32_t modules) {
  const uint32_t core_attn = recompute_module_bit(RecomputeModule::kCoreAttn);
  if (modules == 0) modules = core_attn;
  const LayerWork& l = model.layers[static_cast<size_t>(index)];
  const Recompute base = (modules & core_attn) != 0 ? Recompute::kSelective : Recompute::kNone;
  const int64_t bytes = l.stash_bytes[static_cast<int>(base)];
  if (modules == core_attn) return bytes;
  const int source = l.kind == LayerKind::kTransformer ? index : model.mtp_block(index);
  if (source < 0) return bytes;
  const LayerKernels k = layer_kernels(model, source);
  if (!k.has_kernels) return bytes;
  const auto has = [&](RecomputeModule m) { return (modules & recompute_module_bit(m)) != 0; };
  double freed = 0;  // per token
  if (has(RecomputeModule::kLayernorm)) freed += k.layernorm_recompute_bytes_per_token;
  if (has(RecomputeModule::kMlaUpProj)) freed += k.mla_up_proj_recompute_bytes_per_token;
  if (has(RecomputeModule::kMoeAct)) freed += k.moe_act_recompute_bytes_per_token;
  return bytes - std::llround(model.tokens_per_sequence() * freed);
}

void check_recompute_modules(const ParallelConfig& config, const std::string& where,
                             const ModelSpec* model) {
  if (config.recompute_modules == 0) return;
  if (config.recompute_modules >= (uint32_t{1} << kAllRecomputeModules.size()))
    throw_input_error(where, "holds an unknown recompute module bit");
  check_modules_need_selective(config.recompute, where);
  if (model == nullptr) return;
  bool mla = false, moe = false;
  for (const LayerWork& l : model->layers) {
    if (l.kind != LayerKind::kTransformer) continue;
    mla = mla || model->mla.enabled();
    moe = moe || (l.moe && model->moe.enabled());
  }
  const auto has = [&](RecomputeModule m) {
    return (config.recompute_modules & recompute_module_bit(m)) != 0;
  };
  const std::string name = "model '" + model->name + "'";
  if (has(RecomputeModule::kMlaUpProj) && !mla)
    throw_input_error(where,
                      "recompute module mla_up_proj needs multi-head latent attention, "
                      "which no layer of " +
                          name + " has");
  if (has(RecomputeModule::kMoeAct) && !moe)
    throw_input_error(
        where, "recompute module moe_act needs routed experts, which no layer of " + name + " has");
  if (has(RecomputeModule::kLayernorm) && !mla && !moe)
    throw_input_error(where,
                      "recompute module layernorm recomputes separate norm modules (an "
                      "MLA layer's input norm, an MoE layer's pre-MLP norm; Transformer "
                      "Engine fuses the others into their linear layer), which no layer "
                      "of " +
                          name + " has");
  if (model->dtype == Dtype::kFp8 && model->fp8_scaling == Fp8Scaling::kDelayed &&
      (has(RecomputeModule::kLayernorm) || has(RecomputeModule::kMoeAct)))
    throw_input_error(where,
                      "recompute modules layernorm and moe_act do not work with FP8 "
                      "delayed scaling (Megatron-Core: \"Delayed scaling does not support "
                      "moe_act and layernorm recompute for fp8\")");
}

Recompute layer_recompute(const ModelSpec& model, const ParallelConfig& config, int first_layer,
                          int layer) {
  if (config.recompute_layers < 0 || config.recompute != Recompute::kFull ||
      model.layers[layer].kind != LayerKind::kTransformer)
    return config.recompute;
  int before = 0;  // transformer layers of the chunk before `layer`
  for (int l = first_layer; l < layer; ++l)
    before += model.layers[l].kind == LayerKind::kTransformer ? 1 : 0;
  return before < config.recompute_layers ? Recompute::kFull : Recompute::kNone;
}

nlohmann::json config_to_json(const ParallelConfig& c) {
  nlohmann::json j = {{"gpus", c.gpus},
                      {"pp", c.pp},
                      {"tp", c.tp},
                      {"dp", c.dp},
                      {"virtual_stages", c.virtual_stages},
                      {"microbatch_size", c.microbatch_size},
                      {"num_microbatches", c.num_microbatches},
                      {"global_batch", c.global_batch},
                      {"schedule", c.schedule},
                      {"recompute", std::string(to_string(c.recompute))},
                      {"sequence_parallel", c.sequence_parallel},
                      {"zero1", c.zero1},
                      {"cp", c.cp},
                      {"attention", std::string(to_string(c.attention))},
                      {"tp_comm_overlap", c.tp_comm_overlap},
                      {"overlap_grad_reduce", c.overlap_grad_reduce}};
  // The expert-parallel fields only where they differ from the defaults (dense plans as before).
  if (c.ep != 1) j["ep"] = c.ep;
  if (c.etp > 0) j["etp"] = c.etp;
  if (c.moe_imbalance != 1.0) j["moe_imbalance"] = c.moe_imbalance;
  if (c.moe_overlap != MoeOverlap::kAuto) j["moe_overlap"] = std::string(to_string(c.moe_overlap));
  if (c.moe_dispatcher != MoeDispatcher::kAllToAll)
    j["moe_dispatcher"] = std::string(to_string(c.moe_dispatcher));
  if (c.moe_routing != MoeRouting::kRandom)
    j["moe_routing"] = std::string(to_string(c.moe_routing));
  if (c.moe_node_limit != 0) j["moe_node_limit"] = c.moe_node_limit;
  if (c.moe_device_limit != 0) j["moe_device_limit"] = c.moe_device_limit;
  if (c.grad_dtype != GradDtype::kCluster) j["grad_dtype"] = std::string(to_string(c.grad_dtype));
  if (c.shard_gradients) j["shard_gradients"] = true;
  if (c.optimizer_state != OptimizerState::kCluster)
    j["optimizer_state"] = std::string(to_string(c.optimizer_state));
  if (c.shard_parameters) j["shard_parameters"] = true;
  if (c.recompute_layers >= 0) j["recompute_layers"] = c.recompute_layers;
  if (c.recompute_modules != 0)
    j["recompute_modules"] = recompute_modules_to_json(c.recompute_modules);
  if (c.offload_layers != 0) j["offload_layers"] = c.offload_layers;
  return j;
}

ParallelConfig config_from_json(const nlohmann::json& j, const std::string& where) {
  const JsonObject obj(j, where);
  obj.reject_unknown({"gpus",
                      "pp",
                      "tp",
                      "dp",
                      "virtual_stages",
                      "microbatch_size",
                      "num_microbatches",
                      "global_batch",
                      "schedule",
                      "recompute",
                      "sequence_parallel",
                      "zero1",
                      "cp",
                      "attention",
                      "tp_comm_overlap",
                      "overlap_grad_reduce",
                      "ep",
                      "etp",
                      "moe_imbalance",
                      "moe_overlap",
                      "moe_dispatcher",
                      "moe_routing",
                      "moe_node_limit",
                      "moe_device_limit",
                      "grad_dtype",
                      "shard_gradients",
                      "optimizer_state",
                      "shard_parameters",
                      "recompute_layers",
                      "recompute_modules",
                      "offload_layers"});
  ParallelConfig c;
  c.gpus = check_int_in(obj.positive_int_or("gpus", c.gpus), obj.field("gpus"), 1, kMaxGpus,
                        kGpuCountWhat);
  c.pp = obj.positive_int_or("pp", c.pp);
  c.tp = obj.positive_int_or("tp", c.tp);
  c.dp = obj.positive_int_or("dp", c.dp);
  c.virtual_stages = obj.positive_int_or("virtual_stages", c.virtual_stages);
  c.microbatch_size = obj.positive_int_or("microbatch_size", c.microbatch_size);
  c.num_microbatches = obj.positive_int_or("num_microbatches", c.num_microbatches);
  c.global_batch = obj.positive_int_or("global_batch", c.global_batch);
  c.schedule = obj.single_line_string_or(
      "schedule", c.schedule, "it is printed in reports and written into the hand-off files");
  if (obj.has("recompute"))
    c.recompute = parse_recompute(obj.string("recompute"), obj.field("recompute"));
  c.sequence_parallel = obj.boolean_or("sequence_parallel", c.sequence_parallel);
  c.zero1 = obj.boolean_or("zero1", c.zero1);
  c.cp = obj.positive_int_or("cp", c.cp);
  if (obj.has("attention"))
    c.attention = parse_attention_kernel(obj.string("attention"), obj.field("attention"));
  c.tp_comm_overlap = obj.boolean_or("tp_comm_overlap", c.tp_comm_overlap);
  c.overlap_grad_reduce = obj.boolean_or("overlap_grad_reduce", c.overlap_grad_reduce);
  c.ep = obj.positive_int_or("ep", c.ep);
  c.etp = obj.has("etp") ? obj.positive_int_or("etp", 1) : 0;
  if (c.etp == c.tp) c.etp = 0;  // the default (etp = tp) is stored as 0
  if (obj.has("moe_imbalance")) {
    if (!obj.at("moe_imbalance").is_number())
      throw_input_error(obj.field("moe_imbalance"), "expected a number >= 1");
    c.moe_imbalance = obj.at("moe_imbalance").get<double>();
  }
  if (obj.has("moe_overlap"))
    c.moe_overlap = parse_moe_overlap(obj.string("moe_overlap"), obj.field("moe_overlap"));
  if (obj.has("moe_dispatcher"))
    c.moe_dispatcher =
        parse_moe_dispatcher(obj.string("moe_dispatcher"), obj.field("moe_dispatcher"));
  if (obj.has("moe_routing"))
    c.moe_routing = parse_moe_routing(obj.string("moe_routing"), obj.field("moe_routing"));
  for (const auto& [key, limit] :
       {std::pair<const char*, int*>{"moe_node_limit", &c.moe_node_limit},
        {"moe_device_limit", &c.moe_device_limit}})
    if (obj.has(key))
      *limit = static_cast<int>(std::min<int64_t>(obj.non_negative_integer(key), 1 << 20));
  if (obj.has("grad_dtype"))
    c.grad_dtype = parse_grad_dtype(obj.string("grad_dtype"), obj.field("grad_dtype"));
  if (obj.has("optimizer_state"))
    c.optimizer_state =
        parse_optimizer_state(obj.string("optimizer_state"), obj.field("optimizer_state"));
  c.shard_parameters = obj.boolean_or("shard_parameters", c.shard_parameters);
  c.shard_gradients = obj.boolean_or("shard_gradients", c.shard_parameters);
  check_sharding(c,
                 {obj.field("shard_parameters"), obj.field("shard_gradients"), "\"zero1\": true"});
  if (obj.has("recompute_layers")) {
    c.recompute_layers =
        static_cast<int>(std::min<int64_t>(obj.non_negative_integer("recompute_layers"), 1 << 20));
    check_recompute_layers(c, obj.field("recompute_layers"));
  }
  if (obj.has("recompute_modules")) {
    c.recompute_modules =
        recompute_modules_from_json(obj.at("recompute_modules"), obj.field("recompute_modules"));
    // ["core_attn"] (stored as 0) beside another policy was accepted and ignored.
    check_modules_need_selective(c.recompute, obj.field("recompute_modules"));
    check_recompute_modules(c, obj.field("recompute_modules"));
  }
  if (obj.has("offload_layers"))
    c.offload_layers =
        static_cast<int>(std::min<int64_t>(obj.non_negative_integer("offload_layers"), 1 << 20));
  return c;
}

namespace {

// A plan's assignment must give exactly its partition and placement.
void check_plan_assignment(Plan& plan, const nlohmann::json& entries, const std::string& source) {
  plan.assignment = assignment_spec_from_json(entries, source);
  const Assignment a = resolve_assignment(*plan.assignment, plan.model, plan.config.pp);
  if (a.partition != plan.partition || a.placement.stage_to_actor != plan.placement.stage_to_actor)
    throw_input_error(plan.assignment->where(),
                      "gives " + std::to_string(a.partition.num_stages()) +
                          " stages that differ from the plan's partition and placement (" +
                          std::to_string(plan.partition.num_stages()) +
                          " stages); edit the assignment and rebuild the plan");
}

}  // namespace

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json j = {{"format", kPlanFormat},
                      {"version", kPlanVersion},
                      {"model", model_to_json(plan.model)},
                      {"cluster", plan.cluster},
                      {"config", config_to_json(plan.config)},
                      {"partition", partition_to_json(plan.partition)},
                      {"placement", placement_to_json(plan.placement)},
                      {"program", program_to_json(plan.program)},
                      {"predicted", plan.predicted}};
  if (plan.assignment) j["assignment"] = plan.assignment->entries;
  if (!plan.meshes.empty()) {
    nlohmann::json meshes = nlohmann::json::array();
    for (const ActorMesh& m : plan.meshes) meshes.push_back({{"kind", m.kind}, {"tp", m.tp}});
    j["meshes"] = meshes;
  }
  return j;
}

Plan plan_from_json(const nlohmann::json& j, const std::string& source) {
  const JsonObject obj(j, source);
  if (!obj.has("format") || !obj.at("format").is_string() ||
      obj.at("format").get<std::string>() != kPlanFormat)
    throw_input_error(obj.field("format"),
                      std::string("not a jaxpp-sim plan (expected \"format\": \"") + kPlanFormat +
                          "\", got " + (obj.has("format") ? obj.at("format").dump() : "nothing") +
                          ")");
  const int64_t version = obj.integer("version");
  if (version != kPlanVersion)
    throw_input_error(obj.field("version"), "unsupported plan version " + std::to_string(version) +
                                                " (this build reads version " +
                                                std::to_string(kPlanVersion) + ")");
  obj.reject_unknown({"format", "version", "model", "cluster", "config", "partition", "placement",
                      "program", "predicted", "assignment", "meshes"});
  Plan plan;
  plan.model = model_from_json(obj.at("model"), obj.field("model"));
  plan.cluster = obj.has("cluster") ? obj.at("cluster") : nlohmann::json();
  plan.config = config_from_json(obj.at("config"), obj.field("config"));
  plan.partition = partition_from_json(obj.at("partition"), obj.field("partition"));
  plan.placement = placement_from_json(obj.at("placement"), obj.field("placement"));
  plan.program = program_from_json(obj.at("program"), obj.field("program"));
  plan.predicted = obj.has("predicted") ? obj.at("predicted") : nlohmann::json();
  check_moe_config(plan.model, plan.config, source, /*flags=*/false);
  check_offload_layers(plan.model, plan.config, obj.field("config") + ": field 'offload_layers'");
  if (plan.partition.num_layers != plan.model.num_layers())
    throw_input_error(obj.field("partition"),
                      "covers " + std::to_string(plan.partition.num_layers) +
                          " layers but the model has " + std::to_string(plan.model.num_layers()));
  if (plan.placement.num_stages() != plan.partition.num_stages())
    throw_input_error(obj.field("placement"), "has " + std::to_string(plan.placement.num_stages()) +
                                                  " stages but the partition has " +
                                                  std::to_string(plan.partition.num_stages()));
  if (obj.has("assignment")) check_plan_assignment(plan, obj.at("assignment"), source);
  if (obj.has("meshes")) {
    const nlohmann::json& meshes = obj.array("meshes");
    if (static_cast<int64_t>(meshes.size()) != plan.config.pp)
      throw_input_error(obj.field("meshes"), "has " + std::to_string(meshes.size()) +
                                                 " entries but config.pp is " +
                                                 std::to_string(plan.config.pp));
    for (size_t i = 0; i < meshes.size(); ++i) {
      const JsonObject m(meshes[i], obj.field("meshes") + "[" + std::to_string(i) + "]");
      m.reject_unknown({"kind", "tp"});
      ActorMesh mesh{m.string("kind"), m.positive_int("tp")};
      if (mesh.kind.empty()) throw_input_error(m.field("kind"), "empty device kind");
      plan.meshes.push_back(std::move(mesh));
    }
  }
  // The program must be the lowering of this configuration: a hand-edited count would otherwise
  // silently change what is run (the loss is averaged over config.num_microbatches).
  const Program& program = plan.program;
  if (program.stage_to_actor != plan.placement.stage_to_actor)
    throw_input_error(obj.field("program"), "its stage_to_actor does not match the placement");
  if (program.num_actors != plan.config.pp)
    throw_input_error(obj.field("program"), "has " + std::to_string(program.num_actors) +
                                                " actors but config.pp is " +
                                                std::to_string(plan.config.pp));
  if (program.num_microbatches != plan.config.num_microbatches)
    throw_input_error(obj.field("program"), "has " + std::to_string(program.num_microbatches) +
                                                " microbatches but config.num_microbatches is " +
                                                std::to_string(plan.config.num_microbatches));
  return plan;
}

Plan load_plan(const std::string& path) { return plan_from_json(read_json_file(path), path); }

std::string plan_to_text(const Plan& plan, const std::string& where, int64_t max_bytes) {
  std::string text = plan_to_json(plan).dump(2) + "\n";
  if (static_cast<int64_t>(text.size()) > max_bytes) {
    throw_input_error(where, "the plan would be " +
                                 format_file_size(static_cast<int64_t>(text.size())) +
                                 ", more than the " + format_file_size(max_bytes) +
                                 " a plan file may have to be read back (" +
                                 std::to_string(plan.program.num_stages) + " stages x " +
                                 std::to_string(plan.program.num_microbatches) +
                                 " microbatches); use fewer microbatches or stages");
  }
  return text;
}

void save_plan(const Plan& plan, const std::string& path) {
  write_text_file_atomic(path, plan_to_text(plan, path));
}

}  // namespace jaxpp
