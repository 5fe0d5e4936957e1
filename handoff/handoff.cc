#include "handoff/handoff.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>

#include "graph/error.h"

namespace jaxpp {
namespace {

// Versions the texts were checked against (docs/export.md says where each flag comes from).
constexpr const char* kMegatronVersion =
    "NVIDIA/Megatron-LM megatron/training/arguments.py at commit 000c4ac2 (2025)";
constexpr const char* kTorchtitanVersion =
    "pytorch/torchtitan torchtitan/config/job_config.py at commit 6404b932";
constexpr const char* kJaxppVersion = "NVIDIA/jaxpp src/jaxpp/api.py at commit 01dfbd9c";

[[noreturn]] void cannot_express(HandoffTarget target, const std::string& what) {
  throw_input_error("--format " + std::string(to_string(target)), what);
}

// The model's low-precision activation caching (ModelSpec::low_precision_attention_out and
// low_precision_moe_swiglu_input): no export writes it, so every export refuses a model with it.
void refuse_low_precision_activations(HandoffTarget target, const ModelSpec& model) {
  const std::vector<std::string_view> list = model.low_precision_activations();
  if (list.empty()) return;
  std::string names;
  for (std::string_view n : list) names += std::string(names.empty() ? "" : ", ") + std::string(n);
  cannot_express(target, "low-precision activation caching (\"low_precision_activations\": " +
                             names + "): this export has no setting for it");
}

int transformer_layers(const ModelSpec& model) {
  int n = 0;
  for (const LayerWork& l : model.layers) n += l.kind == LayerKind::kTransformer ? 1 : 0;
  return n;
}

// The most transformer layers any stage chunk of the plan holds.
int max_chunk_transformers(const Plan& plan) {
  int most = 0;
  for (int s = 0; s < plan.partition.num_stages(); ++s) {
    int n = 0;
    for (int l = plan.partition.begin(s); l < plan.partition.end(s); ++l)
      n += plan.model.layers[l].kind == LayerKind::kTransformer ? 1 : 0;
    most = std::max(most, n);
  }
  return most;
}

int first_transformer(const ModelSpec& model) {
  for (int i = 0; i < model.num_layers(); ++i)
    if (model.layers[i].kind == LayerKind::kTransformer) return i;
  return 0;
}

// Megatron-LM's own split: embedding on the first stage, the LM head on the last, transformer
// layers evenly (it needs them divisible by the stages).
bool is_megatron_even_split(const Plan& plan) {
  const int S = plan.partition.num_stages();
  const int count = transformer_layers(plan.model);
  if (count == 0 || count % S != 0) return false;
  const int first = first_transformer(plan.model);
  for (int i = 0; i < first; ++i)
    if (plan.model.layers[i].kind != LayerKind::kEmbedding) return false;
  for (int i = first + count; i < plan.model.num_layers(); ++i)
    if (plan.model.layers[i].kind != LayerKind::kLogits) return false;
  for (int s = 1; s < S; ++s)
    if (plan.partition.begin(s) != first + s * (count / S)) return false;
  return true;
}

char layout_symbol(const LayerWork& layer) {
  switch (layer.kind) {
    case LayerKind::kEmbedding:
      return 'E';
    case LayerKind::kTransformer:
      return 't';
    case LayerKind::kLogits:
      return 'L';
    case LayerKind::kCustom:
      break;
  }
  cannot_express(HandoffTarget::kMegatron,
                 "layer '" + layer.name +
                     "' (custom) has no symbol in --pipeline-model-parallel-layout (E, t, L)");
}

// "Et*3|t*4|t*4|t*3L": one '|'-separated group per stage, runs of a symbol as "t*k".
std::string megatron_layout(const Plan& plan) {
  std::string out;
  for (int s = 0; s < plan.partition.num_stages(); ++s) {
    if (s > 0) out += '|';
    int l = plan.partition.begin(s);
    while (l < plan.partition.end(s)) {
      const char c = layout_symbol(plan.model.layers[l]);
      int run = 1;
      while (l + run < plan.partition.end(s) && layout_symbol(plan.model.layers[l + run]) == c)
        ++run;
      out += c;
      if (run > 1) {
        out += '*';
        out += std::to_string(run);
      }
      l += run;
    }
  }
  return out;
}

// Whether `s` has UTF-8's byte structure (TOML and Python source files must be UTF-8).
bool is_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int extra = c < 0x80                          ? 0
                      : c >= 0xc2 && c <= 0xdf          ? 1
                      : (c & 0xf0) == 0xe0              ? 2
                      : (c & 0xf8) == 0xf0 && c <= 0xf4 ? 3
                                                        : -1;
    if (extra < 0) return false;
    for (int k = 1; k <= extra; ++k)
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    i += extra + 1;
  }
  return true;
}

// User text (a model or schedule name from a plan, possibly written by hand) made safe for the
// text of a comment line in a shell, TOML or Python file: control characters, which could end
// the line (a "\n" or "\r") or be invalid there, are written as escapes (one_line: "\n",
// "\t", "\xNN"), and so is every non-ASCII byte when the text is not UTF-8.
std::string comment_text(const std::string& s) {
  const std::string text = one_line(s);
  if (is_utf8(text)) return text;
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out += ch;
      continue;
    }
    constexpr char kHex[] = "0123456789abcdef";
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

std::string describe_plan(const Plan& plan, const std::string& schedule) {
  const ParallelConfig& c = plan.config;
  std::ostringstream o;
  o << comment_text(plan.model.name) << " on " << c.gpus << " GPUs: pp " << c.pp << ", tp " << c.tp
    << ", dp " << c.dp;
  if (c.cp > 1) o << ", cp " << c.cp;
  o << ", v " << c.virtual_stages << ", " << c.num_microbatches << " microbatches of "
    << c.microbatch_size << ", " << comment_text(schedule);
  return o.str();
}

// A TOML basic string (TOML 1.0, "String"): '"' and '\\' escaped, the control characters as
// \b \t \n \f \r or \uXXXX. `what` names the value in the error for text that is not UTF-8
// (a TOML file must be).
std::string toml_string(const std::string& s, const std::string& what = "a name") {
  if (!is_utf8(s))
    cannot_express(HandoffTarget::kTorchtitan, what + " is not UTF-8 (a TOML file must be)");
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\r':
        out += "\\r";
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", c);
      out += code;
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

}  // namespace

std::string_view to_string(HandoffTarget t) {
  switch (t) {
    case HandoffTarget::kMegatron:
      return "megatron";
    case HandoffTarget::kTorchtitan:
      return "torchtitan";
    case HandoffTarget::kJaxpp:
      return "jaxpp";
  }
  return "?";
}

bool parse_handoff_target(std::string_view text, HandoffTarget& out) {
  for (HandoffTarget t : kAllHandoffTargets) {
    if (text == to_string(t)) {
      out = t;
      return true;
    }
  }
  return false;
}

// ---- Megatron-LM ---------------------------------------------------------------------------

namespace {

// The model's architecture as Megatron-LM's arguments (arguments.py at 000c4ac2:
// _add_network_size_args, _add_regularization_args, _add_training_args, _add_mixed_precision_args,
// _add_tokenizer_args, _add_moe_args, _add_mla_args, _add_vision_args for --qk-layernorm), each
// written even where it is Megatron-LM's default when the plan depends on it. Megatron-LM's
// defaults are MHA, GeLU with biases, LayerNorm, learned absolute positions, tied embeddings,
// dropout 0.1 and fp32 parameters. A model field with no Megatron-LM argument is refused.
void add_megatron_model_flags(
    const ModelSpec& m, const std::function<void(const std::string&, const std::string&)>& add) {
  const HandoffTarget target = HandoffTarget::kMegatron;
  if (m.hidden <= 0 || m.heads <= 0 || m.seq_len <= 0)
    cannot_express(target,
                   "a model given as explicit layers, without its shape (hidden, heads, "
                   "seq_len): Megatron-LM builds its layers from the shape");
  if (m.kernel_fusion != KernelFusion::kFused)
    cannot_express(target, "kernel_fusion " + std::string(to_string(m.kernel_fusion)) +
                               " (eager PyTorch's kernels; Megatron-LM runs its fused kernels)");
  const std::string none;
  switch (m.dtype) {
    case Dtype::kBf16:
    case Dtype::kFp8:  // FP8 GEMMs in a bf16 model (--fp8-format above)
      add("--bf16", none);
      break;
    case Dtype::kFp16:
      add("--fp16", none);
      break;
    case Dtype::kFp32:
      break;  // Megatron-LM's default parameter dtype
  }
  add("--num-layers", std::to_string(transformer_layers(m)));
  add("--hidden-size", std::to_string(m.hidden));
  add("--ffn-hidden-size", std::to_string(m.ffn_hidden));
  add("--num-attention-heads", std::to_string(m.heads));
  if (m.mla.enabled()) {
    // MLA: Megatron's --qk-head-dim is the part without RoPE ("q_head_dim = qk_head_dim +
    // qk_pos_emb_head_dim"); no --q-lora-rank is a plain q projection.
    add("--multi-latent-attention", none);
    if (m.mla.q_lora_rank > 0) add("--q-lora-rank", std::to_string(m.mla.q_lora_rank));
    add("--kv-lora-rank", std::to_string(m.mla.kv_lora_rank));
    add("--qk-head-dim", std::to_string(m.mla.qk_nope_head_dim));
    add("--qk-pos-emb-head-dim", std::to_string(m.mla.qk_rope_head_dim));
    add("--v-head-dim", std::to_string(m.mla.v_head_dim));
  } else {
    if (m.kv_heads > 0 && m.kv_heads != m.heads) {
      add("--group-query-attention", none);
      add("--num-query-groups", std::to_string(m.kv_heads));
    }
    if (m.head_dim > 0 && m.head_dim * m.heads != m.hidden)
      add("--kv-channels", std::to_string(m.head_dim));
  }
  // SwiGLU models (model.h: gated_mlp): RMSNorm, no biases but Qwen2's q/k/v biases, RoPE, no
  // dropout. GeLU models: LayerNorm, biases, learned positions or (gelu_rope) RoPE, dropout
  // unless "dropout": false.
  if (m.gated_mlp) {
    add("--swiglu", none);
    add("--normalization", "RMSNorm");
    add("--disable-bias-linear", none);
    if (m.qkv_bias) add("--add-qkv-bias", none);
  } else {
    add("--normalization", "LayerNorm");
  }
  if (m.qk_norm) add("--qk-layernorm", none);
  add("--position-embedding-type", m.learned_positions() ? "learned_absolute" : "rope");
  add("--seq-length", std::to_string(m.seq_len));
  add("--max-position-embeddings", std::to_string(m.seq_len));  // required by validate_args
  if (m.gated_mlp || m.no_dropout) {
    add("--attention-dropout", "0.0");
    add("--hidden-dropout", "0.0");
  }
  if (!m.tied_embeddings) add("--untie-embeddings-and-output-weights", none);
  if (m.vocab > 0) add("--vocab-size", std::to_string(m.vocab));
  if (m.cross_entropy == CrossEntropy::kLogitsDtype) {
    // Transformer Engine's parallel_cross_entropy (model.h: CrossEntropy).
    add("--cross-entropy-loss-fusion", none);
    add("--cross-entropy-fusion-impl", "te");
  }
  if (m.mtp_modules > 0) add("--mtp-num-layers", std::to_string(m.mtp_modules));
  if (!m.moe.enabled()) return;
  const MoeSpec& e = m.moe;
  if (m.dtype != Dtype::kBf16 && m.dtype != Dtype::kFp8)
    cannot_express(target, "a mixture of experts in " + std::string(to_string(m.dtype)) +
                               " (validate_args: \"Currently GroupedGEMM for MoE only supports "
                               "bf16 dtype\")");
  const Dtype activations = m.dtype == Dtype::kFp8 ? Dtype::kBf16 : m.dtype;
  for (const auto& [key, type] : {std::pair{"a2a_dispatch_dtype", e.dispatch_dtype},
                                  std::pair{"a2a_combine_dtype", e.combine_dtype}})
    if (type && *type != activations)
      cannot_express(target, std::string(key) + " " + std::string(to_string(*type)) +
                                 " (the all-to-all payload in another type than the "
                                 "activations' has no Megatron-LM argument)");
  // The legacy GroupedMLP runs the grouped_gemm package's CUTLASS kernel, outside Transformer
  // Engine: its GEMMs stay 16-bit under --fp8-format, where the plan priced them in FP8.
  if (e.expert_gemm == ExpertGemm::kGrouped && m.dtype == Dtype::kFp8)
    cannot_express(target,
                   "expert_gemm grouped with FP8 (Megatron-LM's legacy GroupedMLP, "
                   "--moe-use-legacy-grouped-gemm, runs the grouped_gemm package's BF16 kernel "
                   "outside Transformer Engine, so its experts would not run in FP8 as the plan "
                   "prices them); give the model \"expert_gemm\": \"per_expert\" "
                   "(TEGroupedMLP)");
  if (e.expert_gemm == ExpertGemm::kPerExpert &&
      e.expert_gemm_streams != kTransformerEngineComputeStreams)
    cannot_express(target, "expert_gemm_streams " + std::to_string(e.expert_gemm_streams) +
                               " (Transformer Engine's GroupedLinear uses its own " +
                               std::to_string(kTransformerEngineComputeStreams) +
                               " streams; Megatron-LM has no argument for them)");
  add("--num-experts", std::to_string(e.experts));
  add("--moe-router-topk", std::to_string(e.top_k));
  add("--moe-ffn-hidden-size", std::to_string(e.expert_ffn_hidden));
  if (e.shared_experts > 0)  // the total width of the shared experts
    add("--moe-shared-expert-intermediate-size",
        std::to_string(int64_t{e.shared_experts} * e.shared_ffn_hidden));
  if (e.first_dense_layers > 0) {
    const int layers = transformer_layers(m);
    add("--moe-layer-freq", "\"([0]*" + std::to_string(e.first_dense_layers) + "+[1]*" +
                                std::to_string(layers - e.first_dense_layers) + ")\"");
  }
  if (e.router == MoeRouter::kSigmoid) add("--moe-router-score-function", "sigmoid");
  // The local experts' GEMMs: Transformer Engine's GroupedLinear (TEGroupedMLP, one GEMM per
  // expert) or the grouped_gemm package's kernel (the legacy GroupedMLP); without
  // --moe-grouped-gemm Megatron-LM loops over the experts (SequentialMLP).
  add("--moe-grouped-gemm", none);
  if (e.expert_gemm == ExpertGemm::kGrouped) add("--moe-use-legacy-grouped-gemm", none);
}

}  // namespace

std::string megatron_arguments(const Plan& plan, const std::string& schedule) {
  const ParallelConfig& c = plan.config;
  const HandoffTarget target = HandoffTarget::kMegatron;
  const int v = c.virtual_stages;
  if (schedule == "Std1F1B") {
    if (v != 1)
      cannot_express(target, "schedule Std1F1B with " + std::to_string(v) + " virtual stages");
  } else if (schedule == "MegatronInterleaved") {
    if (plan.placement.kind != PlacementKind::kLoop)
      cannot_express(target, "schedule MegatronInterleaved with a non-loop placement");
  } else {
    cannot_express(target, "schedule " + schedule +
                               " cannot be expressed (Megatron-LM runs 1F1B, or interleaved 1F1B "
                               "with virtual stages: Std1F1B or MegatronInterleaved)");
  }
  std::vector<std::pair<std::string, std::string>> flags;  // flag, value ("" for a switch)
  auto add = [&](const std::string& flag, const std::string& value = "") {
    flags.emplace_back(flag, value);
  };
  add("--tensor-model-parallel-size", std::to_string(c.tp));
  add("--pipeline-model-parallel-size", std::to_string(c.pp));
  if (c.cp > 1) add("--context-parallel-size", std::to_string(c.cp));
  // Expert parallelism: Megatron Core carves ep·etp out of a stage's tp·cp·dp devices, as the
  // plan does (graph/plan.h); its --expert-tensor-parallel-size defaults to tp.
  if (c.ep > 1) add("--expert-model-parallel-size", std::to_string(c.ep));
  if (c.ep > 1 && c.expert_tp() != c.tp)
    add("--expert-tensor-parallel-size", std::to_string(c.expert_tp()));
  // The token dispatcher (Megatron-LM's default, allgather, is not what the plan prices):
  // alltoall, or flex with the DeepEP backend for one copy per destination rank and node.
  if (c.ep > 1) {
    if (c.moe_routing != MoeRouting::kRandom)
      cannot_express(target, "moe_routing " + std::string(to_string(c.moe_routing)) +
                                 " (a benchmark gate; Megatron-LM routes by its learned router "
                                 "or, with --moe-router-force-load-balancing, at random)");
    if (c.moe_dispatcher == MoeDispatcher::kDeepEP) {
      add("--moe-token-dispatcher-type", "flex");
      add("--moe-flex-dispatcher-backend", "deepep");
    } else {
      add("--moe-token-dispatcher-type", "alltoall");
    }
  }
  if (is_megatron_even_split(plan)) {
    if (v > 1) add("--num-virtual-stages-per-pipeline-rank", std::to_string(v));
  } else {
    add("--pipeline-model-parallel-layout", "\"" + megatron_layout(plan) + "\"");
  }
  add("--micro-batch-size", std::to_string(c.microbatch_size));
  add("--global-batch-size", std::to_string(c.global_batch));
  switch (c.recompute) {
    case Recompute::kNone:
      break;
    case Recompute::kSelective:
      add("--recompute-granularity", "selective");
      // Megatron's modules (nargs='*'); without the flag Megatron recomputes core_attn.
      if (c.recompute_modules != 0)
        add("--recompute-modules", recompute_modules_to_string(c.recompute_modules, " "));
      break;
    case Recompute::kFull:
      add("--recompute-granularity", "full");
      if (c.recompute_layers >= 0) {
        // The first N transformer layers of each stage chunk (transformer_block.py
        // _checkpointed_forward, recompute_method 'block').
        add("--recompute-method", "block");
        add("--recompute-num-layers", std::to_string(c.recompute_layers));
      } else {
        add("--recompute-method", "uniform");
        add("--recompute-num-layers", "1");
      }
      break;
    case Recompute::kOp:
      cannot_express(target,
                     "recompute op (torchtitan's op-level selective checkpointing: every other "
                     "matmul kept) has no Megatron-LM flag (--recompute-granularity is full or "
                     "selective)");
  }
  // Activation offloading: --cpu-offloading-num-layers N (validate_args: "if
  // args.cpu_offloading_num_layers > 0: args.cpu_offloading = True"; TransformerConfig's
  // cpu_offloading rules are the plan's: pp 1, no recompute, fewer than all layers).
  if (c.offload_layers > 0) add("--cpu-offloading-num-layers", std::to_string(c.offload_layers));
  if (c.sequence_parallel) add("--sequence-parallel");
  // Gradient and parameter sharding: Megatron-FSDP (arguments.py at 000c4ac2,
  // _add_distributed_args: --use-megatron-fsdp, --data-parallel-sharding-strategy with choices
  // no_shard, optim, optim_grads, optim_grads_params). optim_grads shards gradients and optimizer
  // state (ZeRO-2, the plan's shard_gradients), optim_grads_params also the parameters (ZeRO-3,
  // shard_parameters). The plan shards over dp·cp; Megatron-Core reduces gradients over the
  // data-parallel group with the cp ranks folded in, and that Megatron-FSDP shards over that same
  // group is assumed here, not read from its code. validate_args asserts
  // `--ckpt-format fsdp_dtensor` ("Megatron FSDP only supports fsdp_dtensor checkpoint format")
  // and CUDA_DEVICE_MAX_CONNECTIONS != 1; Megatron-LM's Megatron-FSDP user guide
  // (docs/discussions/megatron-fsdp-user-guide) lists --no-gradient-accumulation-fusion and
  // --use-distributed-optimizer as required. Torch FSDP2 (--use-torch-fsdp2) is not used: its
  // validate_args block refuses pipeline parallelism, expert parallelism and the distributed
  // optimizer. The plan's sharding implies zero1 (check_sharding), so the distributed optimizer
  // flag follows.
  if (c.shard_gradients) {
    add("--use-megatron-fsdp");
    add("--data-parallel-sharding-strategy",
        c.shard_parameters ? "optim_grads_params" : "optim_grads");
    add("--ckpt-format", "fsdp_dtensor");
    add("--no-gradient-accumulation-fusion");
  }
  if (c.zero1) add("--use-distributed-optimizer");
  if (c.overlap_grad_reduce) {
    add("--overlap-grad-reduce");
    if (c.zero1) add("--overlap-param-gather");
  }
  if (c.tp_comm_overlap) add("--tp-comm-overlap");
  switch (c.grad_dtype) {
    case GradDtype::kCluster:
      break;  // Megatron-LM's bf16 default: fp32 main gradients, as the presets count
    case GradDtype::kFp32:
      add("--accumulate-allreduce-grads-in-fp32");
      break;
    case GradDtype::kBf16:
      add("--grad-reduce-in-bf16");
      break;
    case GradDtype::kFp16:
      cannot_express(HandoffTarget::kMegatron,
                     "fp16 gradients in a bf16 run (Megatron-LM reduces in fp16 only when it "
                     "trains in fp16)");
  }
  switch (c.optimizer_state) {
    case OptimizerState::kCluster:
    case OptimizerState::kFp32:
      break;  // Megatron-LM's default: fp32 master weights, m and v
    case OptimizerState::kRemainders:
      // The precision-aware optimizer: Transformer Engine's FusedAdam (>= 2.1) keeps the 16-bit
      // remainders of the fp32 master weights; Megatron-LM allows it with the distributed
      // optimizer only.
      if (!c.zero1)
        cannot_express(HandoffTarget::kMegatron,
                       "master-weight remainders without the distributed optimizer "
                       "(--use-precision-aware-optimizer needs --use-distributed-optimizer)");
      add("--use-precision-aware-optimizer");
      break;
    case OptimizerState::kBf16Moments:
      // fp32 master weights and bf16 moments: the precision-aware optimizer's moment dtypes,
      // with whole fp32 master weights (it keeps remainders unless told not to).
      if (!c.zero1)
        cannot_express(HandoffTarget::kMegatron,
                       "bf16 moments without the distributed optimizer "
                       "(--use-precision-aware-optimizer needs --use-distributed-optimizer)");
      add("--use-precision-aware-optimizer");
      add("--no-store-param-remainders");
      add("--exp-avg-dtype", "bf16");
      add("--exp-avg-sq-dtype", "bf16");
      break;
    case OptimizerState::kBf16:
      cannot_express(HandoffTarget::kMegatron,
                     "bf16 optimizer state without master weights (Megatron-LM keeps fp32 or "
                     "fp16 master weights)");
  }
  // FP8 (Transformer Engine through Megatron-Core): the format and the scaling recipe
  // (--fp8-recipe tensorwise = per-tensor current scaling), and FP8 weights (fp8_params:
  // --fp8-param-gather). MXFP8 runs E4M3 in both passes (Megatron-Bridge's bf16_with_mxfp8_mixed).
  if (plan.model.dtype == Dtype::kFp8) {
    const Fp8Scaling scaling = plan.model.fp8_scaling;
    add("--fp8-format", scaling == Fp8Scaling::kMxfp8 ? "e4m3" : "hybrid");
    add("--fp8-recipe", scaling == Fp8Scaling::kMxfp8     ? "mxfp8"
                        : scaling == Fp8Scaling::kDelayed ? "delayed"
                                                          : "tensorwise");
    if (plan.model.fp8_params) add("--fp8-param-gather");
    refuse_low_precision_activations(HandoffTarget::kMegatron, plan.model);
  }
  add("--attention-backend", c.attention == AttentionKernel::kUnfused ? "unfused" : "flash");
  add_megatron_model_flags(plan.model, add);

  std::ostringstream o;
  o << "# Megatron-LM arguments for " << describe_plan(plan, schedule) << "\n";
  o << "# Flags checked against " << kMegatronVersion << ".\n";
  o << "# Launch on " << c.gpus << " GPUs (world size): Megatron-LM derives dp = world size / "
    << "(tp x pp x cp) = " << c.dp << ".\n";
  if (c.shard_gradients)
    o << "# Megatron-FSDP (" << (c.shard_parameters ? "ZeRO-3" : "ZeRO-2")
      << "): the plan shards " << (c.shard_parameters ? "parameters, gradients" : "gradients")
      << " and optimizer state over dp x cp = " << c.dp * c.cp
      << " ranks;\n# leave CUDA_DEVICE_MAX_CONNECTIONS unset (validate_args refuses 1).\n";
  if (plan.model.vocab > 0)
    o << "# --vocab-size " << plan.model.vocab
      << " is read by --tokenizer-type NullTokenizer; any other tokenizer sets the vocabulary,\n"
         "# which Megatron-LM pads to a multiple of --make-vocab-size-divisible-by (128) x tp.\n";
  for (size_t i = 0; i < flags.size(); ++i) {
    o << flags[i].first;
    if (!flags[i].second.empty()) o << " " << flags[i].second;
    o << (i + 1 < flags.size() ? " \\\n" : "\n");
  }
  return o.str();
}

namespace {

std::vector<int> parse_layout(const std::string& layout, const std::string& where,
                              int* num_transformer) {
  std::vector<int> stages(1, 0);
  *num_transformer = 0;
  size_t i = 0;
  while (i < layout.size()) {
    const char ch = layout[i];
    if (ch == '|') {
      stages.push_back(0);
      ++i;
      continue;
    }
    if (ch == ',') {
      ++i;
      continue;
    }
    if (ch != 'E' && ch != 't' && ch != 'L') {
      throw_input_error(where, "--pipeline-model-parallel-layout: unsupported symbol '" +
                                   std::string(1, ch) + "' at position " + std::to_string(i) +
                                   " (expected E, t, L, '*k', '|' or ',')");
    }
    ++i;
    int count = 1;
    if (i < layout.size() && layout[i] == '*') {
      ++i;
      size_t digits = 0;
      while (i + digits < layout.size() &&
             std::isdigit(static_cast<unsigned char>(layout[i + digits])))
        ++digits;
      if (digits == 0 || digits > 6)
        throw_input_error(where, "--pipeline-model-parallel-layout: expected a count after '*'");
      count = std::stoi(layout.substr(i, digits));
      i += digits;
    }
    stages.back() += count;
    if (ch == 't') *num_transformer += count;
  }
  return stages;
}

}  // namespace

namespace {

// One of the model arguments add_megatron_model_flags writes, at tokens[i] (i moves past its
// value): false when tokens[i] is not one of them.
bool parse_megatron_model_argument(const std::vector<std::string>& tokens, size_t& i,
                                   const std::string& where, MegatronModel& m) {
  const std::string& f = tokens[i];
  auto value = [&]() -> const std::string& {
    if (i + 1 >= tokens.size()) throw_input_error(where, f + ": missing value");
    return tokens[++i];
  };
  auto count = [&](int min) {
    const std::string& v = value();
    try {
      size_t pos = 0;
      const int x = std::stoi(v, &pos);
      if (pos == v.size() && x >= min) return x;
    } catch (const std::exception&) {
    }
    throw_input_error(where,
                      f + ": expected an integer >= " + std::to_string(min) + ", got '" + v + "'");
  };
  auto choice = [&](std::initializer_list<const char*> allowed) {
    const std::string& v = value();
    std::string list;
    for (const char* a : allowed) {
      if (v == a) return v;
      list += std::string(list.empty() ? "" : ", ") + a;
    }
    throw_input_error(where, f + ": expected " + list + ", got '" + v + "'");
  };
  const std::map<std::string, int*> counts = {
      {"--hidden-size", &m.hidden},
      {"--ffn-hidden-size", &m.ffn_hidden},
      {"--num-attention-heads", &m.heads},
      {"--num-query-groups", &m.query_groups},
      {"--kv-channels", &m.kv_channels},
      {"--seq-length", &m.seq_len},
      {"--max-position-embeddings", &m.max_position_embeddings},
      {"--vocab-size", &m.vocab},
      {"--mtp-num-layers", &m.mtp_layers},
      {"--num-experts", &m.experts},
      {"--moe-router-topk", &m.top_k},
      {"--moe-ffn-hidden-size", &m.moe_ffn_hidden},
      {"--moe-shared-expert-intermediate-size", &m.shared_expert_size},
      {"--q-lora-rank", &m.q_lora_rank},
      {"--kv-lora-rank", &m.kv_lora_rank},
      {"--qk-head-dim", &m.qk_head_dim},
      {"--qk-pos-emb-head-dim", &m.qk_pos_emb_head_dim},
      {"--v-head-dim", &m.v_head_dim}};
  const std::map<std::string, bool*> switches = {
      {"--swiglu", &m.swiglu},
      {"--add-qkv-bias", &m.qkv_bias},
      {"--qk-layernorm", &m.qk_layernorm},
      {"--untie-embeddings-and-output-weights", &m.untied},
      {"--cross-entropy-loss-fusion", &m.te_cross_entropy},
      {"--moe-grouped-gemm", &m.grouped_gemm},
      {"--moe-use-legacy-grouped-gemm", &m.legacy_grouped_gemm},
      {"--multi-latent-attention", &m.mla}};
  if (const auto it = counts.find(f); it != counts.end()) {
    *it->second = count(1);
  } else if (const auto sw = switches.find(f); sw != switches.end()) {
    *sw->second = true;
  } else if (f == "--bf16" || f == "--fp16") {
    m.dtype = f == "--bf16" ? Dtype::kBf16 : Dtype::kFp16;
  } else if (f == "--group-query-attention") {
    if (m.query_groups == 0) m.query_groups = -1;  // set by --num-query-groups
  } else if (f == "--disable-bias-linear") {
    m.bias_linear = false;
  } else if (f == "--normalization") {
    m.rmsnorm = choice({"LayerNorm", "RMSNorm"}) == "RMSNorm";
  } else if (f == "--position-embedding-type") {
    m.rope = choice({"learned_absolute", "rope"}) == "rope";
  } else if (f == "--attention-dropout" || f == "--hidden-dropout") {
    const std::string& v = value();
    char* end = nullptr;
    const double p = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(p >= 0 && p < 1))
      throw_input_error(where, f + ": expected a probability in [0, 1), got '" + v + "'");
    if (p == 0) m.dropout = false;
  } else if (f == "--cross-entropy-fusion-impl") {
    choice({"te"});
  } else if (f == "--moe-router-score-function") {
    m.sigmoid_router = choice({"softmax", "sigmoid"}) == "sigmoid";
  } else if (f == "--moe-layer-freq") {
    // "([0]*K+[1]*M)": K dense layers, then M MoE layers.
    const std::string& v = value();
    int dense = 0, moe = 0;
    char tail = 0;
    if (std::sscanf(v.c_str(), "([0]*%d+[1]*%d%c", &dense, &moe, &tail) != 3 || tail != ')' ||
        v.back() != ')' || dense < 0 || moe < 0)
      throw_input_error(where, f +
                                   ": expected \"([0]*K+[1]*M)\" (the first K layers dense), "
                                   "got '" +
                                   v + "'");
    m.first_dense_layers = dense;
  } else {
    return false;
  }
  return true;
}

}  // namespace

MegatronSettings parse_megatron_arguments(const std::string& text, const std::string& where) {
  std::vector<std::string> tokens;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      if (w == "\\") continue;
      if (w.size() >= 2 && w.front() == '"' && w.back() == '"') w = w.substr(1, w.size() - 2);
      tokens.push_back(w);
    }
  }
  MegatronSettings out;
  ParallelConfig& c = out.config;
  c.schedule = "Std1F1B";
  std::string recompute_method;
  int recompute_num_layers = -1;
  uint32_t recompute_modules = 0;
  auto value_int = [&](size_t& i) {
    if (i + 1 >= tokens.size()) throw_input_error(where, tokens[i] + ": missing value");
    const std::string& v = tokens[++i];
    try {
      size_t pos = 0;
      const int x = std::stoi(v, &pos);
      if (pos != v.size() || x < 1) throw std::invalid_argument(v);
      return x;
    } catch (const std::exception&) {
      throw_input_error(where, tokens[i - 1] + ": expected a positive integer, got '" + v + "'");
    }
  };
  auto value_str = [&](size_t& i) {
    if (i + 1 >= tokens.size()) throw_input_error(where, tokens[i] + ": missing value");
    return tokens[++i];
  };
  std::string layout;
  bool flex_dispatcher = false, flex_backend = false;
  bool megatron_fsdp = false;
  std::string sharding_strategy = "no_shard";  // Megatron-LM's default
  std::string ckpt_format = "torch_dist";      // Megatron-LM's default
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& f = tokens[i];
    if (f == "--tensor-model-parallel-size")
      c.tp = value_int(i);
    else if (f == "--pipeline-model-parallel-size")
      c.pp = value_int(i);
    else if (f == "--context-parallel-size")
      c.cp = value_int(i);
    else if (f == "--expert-model-parallel-size")
      c.ep = value_int(i);
    else if (f == "--expert-tensor-parallel-size")
      c.etp = value_int(i);
    else if (f == "--moe-token-dispatcher-type") {
      const std::string d = value_str(i);
      if (d == "alltoall")
        c.moe_dispatcher = MoeDispatcher::kAllToAll;
      else if (d == "flex")
        flex_dispatcher = true;
      else
        throw_input_error(where, "--moe-token-dispatcher-type: expected alltoall or flex (the "
                                 "dispatchers the cost model prices), got '" + d + "'");
    } else if (f == "--moe-flex-dispatcher-backend") {
      const std::string b = value_str(i);
      if (b != "deepep" && b != "hybridep")
        throw_input_error(where, "--moe-flex-dispatcher-backend: expected deepep or hybridep, got '" +
                                     b + "'");
      flex_backend = true;
    } else if (f == "--moe-enable-deepep")
      flex_backend = true;  // Megatron-LM before --moe-flex-dispatcher-backend
    else if (f == "--num-virtual-stages-per-pipeline-rank")
      c.virtual_stages = value_int(i);
    else if (f == "--pipeline-model-parallel-layout")
      layout = value_str(i);
    else if (f == "--micro-batch-size")
      c.microbatch_size = value_int(i);
    else if (f == "--global-batch-size")
      c.global_batch = value_int(i);
    else if (f == "--recompute-granularity") {
      const std::string g = value_str(i);
      if (g == "full")
        c.recompute = Recompute::kFull;
      else if (g == "selective")
        c.recompute = Recompute::kSelective;
      else
        throw_input_error(where,
                          "--recompute-granularity: expected full or selective, got '" + g + "'");
    } else if (f == "--recompute-method") {
      recompute_method = value_str(i);
      if (recompute_method != "uniform" && recompute_method != "block")
        throw_input_error(where, "--recompute-method: expected uniform or block, got '" +
                                     recompute_method + "'");
    } else if (f == "--recompute-modules") {
      // nargs='*': every following word up to the next flag.
      std::string list;
      while (i + 1 < tokens.size() && tokens[i + 1].rfind("--", 0) != 0) list += tokens[++i] + ",";
      recompute_modules = parse_recompute_modules(list, where + ": --recompute-modules");
    } else if (f == "--recompute-num-layers") {
      recompute_num_layers = value_int(i);
      if (recompute_num_layers < 0)
        throw_input_error(where, "--recompute-num-layers: expected a number >= 0, got " +
                                     std::to_string(recompute_num_layers));
    }
    else if (f == "--cpu-offloading")
      continue;  // on by itself offloads no layer; --cpu-offloading-num-layers turns it on
    else if (f == "--cpu-offloading-num-layers")
      c.offload_layers = value_int(i);
    else if (f == "--sequence-parallel")
      c.sequence_parallel = true;
    else if (f == "--use-distributed-optimizer")
      c.zero1 = true;
    else if (f == "--use-megatron-fsdp")
      megatron_fsdp = true;
    else if (f == "--data-parallel-sharding-strategy") {
      sharding_strategy = value_str(i);
      if (sharding_strategy != "no_shard" && sharding_strategy != "optim" &&
          sharding_strategy != "optim_grads" && sharding_strategy != "optim_grads_params")
        throw_input_error(where, "--data-parallel-sharding-strategy: expected no_shard, optim, "
                                 "optim_grads or optim_grads_params, got '" +
                                     sharding_strategy + "'");
    } else if (f == "--ckpt-format")
      ckpt_format = value_str(i);
    else if (f == "--no-gradient-accumulation-fusion")
      continue;
    else if (f == "--overlap-grad-reduce")
      c.overlap_grad_reduce = true;
    else if (f == "--overlap-param-gather")
      continue;
    else if (f == "--tp-comm-overlap")
      c.tp_comm_overlap = true;
    else if (f == "--accumulate-allreduce-grads-in-fp32")
      c.grad_dtype = GradDtype::kFp32;
    else if (f == "--grad-reduce-in-bf16")
      c.grad_dtype = GradDtype::kBf16;
    else if (f == "--fp8-format") {
      const std::string v = value_str(i);
      if (v != "e4m3" && v != "hybrid")
        throw_input_error(where, "--fp8-format: expected e4m3 or hybrid, got '" + v + "'");
      out.fp8 = true;
    } else if (f == "--fp8-recipe") {
      const std::string v = value_str(i);
      if (v == "tensorwise")
        out.fp8_scaling = Fp8Scaling::kCurrent;
      else if (v == "delayed")
        out.fp8_scaling = Fp8Scaling::kDelayed;
      else if (v == "mxfp8")
        out.fp8_scaling = Fp8Scaling::kMxfp8;
      else
        throw_input_error(where, "--fp8-recipe: expected tensorwise, delayed or mxfp8 (the "
                                 "recipes the cost model prices), got '" + v + "'");
    } else if (f == "--fp8-param-gather")
      out.fp8_param_gather = true;
    else if (f == "--attention-backend") {
      const std::string a = value_str(i);
      if (a == "flash")
        c.attention = AttentionKernel::kFlash;
      else if (a == "unfused")
        c.attention = AttentionKernel::kUnfused;
      else
        throw_input_error(where, "--attention-backend: expected flash or unfused, got '" + a + "'");
    } else if (f == "--num-layers")
      out.num_layers = value_int(i);
    else if (parse_megatron_model_argument(tokens, i, where, out.model))
      continue;
    else
      throw_input_error(where, "unknown argument '" + f + "'");
  }
  // Full recompute with method block: the first N layers of each chunk; uniform checkpoints every
  // layer (in groups of N), which the model prices as full.
  if (recompute_method == "block") {
    if (c.recompute != Recompute::kFull)
      throw_input_error(where, "--recompute-method block needs --recompute-granularity full");
    if (recompute_num_layers < 0)
      throw_input_error(where, "--recompute-method block needs --recompute-num-layers");
    c.recompute_layers = recompute_num_layers;
  }
  if (recompute_modules != 0) {
    if (c.recompute != Recompute::kSelective)
      throw_input_error(where, "--recompute-modules needs --recompute-granularity selective");
    c.recompute_modules = recompute_modules;
  }
  if (!layout.empty()) {
    int transformer = 0;
    out.stage_layers = parse_layout(layout, where, &transformer);
    if (static_cast<int>(out.stage_layers.size()) % c.pp != 0)
      throw_input_error(
          where, "--pipeline-model-parallel-layout: " + std::to_string(out.stage_layers.size()) +
                     " stages are not a multiple of --pipeline-model-parallel-size " +
                     std::to_string(c.pp));
    c.virtual_stages = static_cast<int>(out.stage_layers.size()) / c.pp;
    if (out.num_layers != 0 && transformer != out.num_layers)
      throw_input_error(where,
                        "--pipeline-model-parallel-layout holds " + std::to_string(transformer) +
                            " transformer layers, --num-layers " + std::to_string(out.num_layers));
  }
  if (flex_dispatcher != flex_backend)
    throw_input_error(where, flex_dispatcher
                                 ? "--moe-token-dispatcher-type flex: needs "
                                   "--moe-flex-dispatcher-backend deepep or hybridep"
                                 : "--moe-flex-dispatcher-backend: needs "
                                   "--moe-token-dispatcher-type flex");
  if (flex_dispatcher) c.moe_dispatcher = MoeDispatcher::kDeepEP;
  // Megatron-FSDP's sharding strategy (the sharding only applies on its code path): optim is
  // ZeRO-1, optim_grads ZeRO-2, optim_grads_params ZeRO-3; validate_args asserts the
  // fsdp_dtensor checkpoint format with it.
  if (sharding_strategy != "no_shard" && !megatron_fsdp)
    throw_input_error(where, "--data-parallel-sharding-strategy " + sharding_strategy +
                                 ": needs --use-megatron-fsdp");
  if (megatron_fsdp) {
    if (ckpt_format != "fsdp_dtensor")
      throw_input_error(where, "--use-megatron-fsdp: needs --ckpt-format fsdp_dtensor (Megatron "
                               "FSDP only supports the fsdp_dtensor checkpoint format), got '" +
                                   ckpt_format + "'");
    if (sharding_strategy != "no_shard") c.zero1 = true;
    if (sharding_strategy == "optim_grads" || sharding_strategy == "optim_grads_params")
      c.shard_gradients = true;
    if (sharding_strategy == "optim_grads_params") c.shard_parameters = true;
  }
  if (out.model.query_groups == -1)
    throw_input_error(where, "--group-query-attention: needs --num-query-groups");
  if (c.virtual_stages > 1) c.schedule = "MegatronInterleaved";
  return out;
}

// ---- torchtitan ----------------------------------------------------------------------------

std::string torchtitan_toml(const Plan& plan, const std::string& schedule,
                            const std::string& csv_path) {
  const ParallelConfig& c = plan.config;
  const HandoffTarget target = HandoffTarget::kTorchtitan;
  refuse_low_precision_activations(target, plan.model);
  if (plan.model.dtype == Dtype::kFp8 && plan.model.fp8_scaling == Fp8Scaling::kMxfp8)
    cannot_express(target, "MXFP8 (\"fp8_scaling\": \"mxfp8\"): this export writes no "
                           "torchtitan quantization converter (torchao's MX training is not "
                           "Transformer Engine's MXFP8 recipe)");
  if (c.grad_dtype == GradDtype::kBf16 || c.grad_dtype == GradDtype::kFp16)
    cannot_express(target, std::string(to_string(c.grad_dtype)) +
                               " gradient reduction (this export keeps torchtitan's default "
                               "float32 reduction)");
  if (c.optimizer_state == OptimizerState::kRemainders ||
      c.optimizer_state == OptimizerState::kBf16 ||
      c.optimizer_state == OptimizerState::kBf16Moments)
    cannot_express(target, "optimizer state '" + std::string(to_string(c.optimizer_state)) +
                               "' (this export keeps torchtitan's fp32 AdamW state)");
  if (c.offload_layers > 0)
    cannot_express(target, "activation offloading (offload_layers " +
                               std::to_string(c.offload_layers) +
                               "): this export writes no activation offloading");
  if (c.recompute_modules != 0)
    cannot_express(target, "recompute modules " + recompute_modules_to_string(c.recompute_modules) +
                               " (Megatron-Core's fine-grained selective recompute; torchtitan's "
                               "activation_checkpoint selects layers or ops, not these modules)");
  // Data parallelism. torchtitan has DDP (data_parallel_replicate_degree, replicated weights)
  // and FSDP2 (data_parallel_shard_degree; job_config.py at 6404b932, class Parallelism: lines
  // 236, 250 and 262 define the replicate and shard degrees and fsdp_reshard_after_forward). FSDP2
  // shards parameters, gradients and optimizer state over the mesh dimension "dp_shard_cp" =
  // data_parallel_shard_degree · context_parallel_degree (torchtitan/distributed/parallel_dims.py
  // at 0119de15, build_mesh; models/llama3/infra/parallelize.py at 018740b7, parallelize_llama
  // and apply_fsdp), which is the plan's parameter sharding over dp·cp: shard degree dp,
  // replicate degree 1. The plan all-gathers a stage's weights before every microbatch's forward
  // and backward: fsdp_reshard_after_forward = "always" (its "default" keeps the weights gathered
  // after the forward when pipeline parallelism is on). ZeRO-1 or ZeRO-2 alone has no
  // equivalent: FSDP2 always shards the parameters at rest; "never" keeps them gathered from a
  // forward to its backward only, and under pipeline parallelism PyTorch's pipelining runtime
  // accumulates unsharded gradients until the last microbatch (torch/distributed/pipelining/
  // stage.py at 01386103, backward_maybe_with_nosync: set_requires_gradient_sync(False)), so
  // neither is the distributed optimizer with replicated (or ZeRO-2's gathered) weights.
  const bool fsdp = c.shard_parameters;
  if (c.zero1 && !c.shard_gradients)
    cannot_express(target,
                   "ZeRO-1 (distributed optimizer) without parameter sharding: torchtitan's data "
                   "parallelism is DDP (replicated) or FSDP2 (which also shards parameters and "
                   "gradients); explore with --zero1 off, or --shard-params on for FSDP");
  if (c.shard_gradients && !c.shard_parameters)
    cannot_express(target,
                   "gradient sharding (ZeRO-2) without parameter sharding: FSDP2 always shards "
                   "the parameters at rest, and fsdp_reshard_after_forward = \"never\" keeps "
                   "them gathered only from a forward to its backward; explore with "
                   "--shard-params on, or --shard-grads off and --zero1 off");
  if (c.attention == AttentionKernel::kUnfused)
    cannot_express(target, "unfused attention (torchtitan runs SDPA/flash attention)");
  const int replicate_degree = fsdp ? 1 : c.dp;
  const int shard_degree = fsdp ? c.dp : 1;
  // torchtitan carves ep out of data_parallel_shard_degree·cp (·tp when etp = 1) and supports
  // etp = tp or 1 only (parallel_dims.py, _validate): ep % cp == 0 and (shard·cp) % ep == 0 for
  // etp = tp, ep % (cp·tp) == 0 and (shard·cp·tp) % ep == 0 for etp = 1. With replicated data
  // parallelism (shard degree 1) that leaves ep = cp or ep = cp·tp.
  if (c.ep > 1) {
    const int etp = c.expert_tp();
    const bool fits =
        (etp == c.tp && c.ep % c.cp == 0 && (shard_degree * c.cp) % c.ep == 0) ||
        (etp == 1 && c.ep % (c.cp * c.tp) == 0 && (shard_degree * c.cp * c.tp) % c.ep == 0);
    if (!fits)
      cannot_express(target,
                     "expert parallelism ep " + std::to_string(c.ep) + " with etp " +
                         std::to_string(etp) +
                         (fsdp ? ": torchtitan needs etp = tp with ep a multiple of cp dividing "
                                 "dp*cp, or etp = 1 with ep a multiple of cp*tp dividing dp*cp*tp"
                               : ": torchtitan needs etp = tp with ep = cp, or etp = 1 with ep = "
                                 "cp*tp, when data parallelism is replicated"));
  }
  if (c.tp > 1 && !c.sequence_parallel)
    cannot_express(target,
                   "tensor parallelism without sequence parallelism (torchtitan's "
                   "tensor-parallel plan always shards the sequence in norm regions)");
  const char* style = nullptr;
  switch (plan.placement.kind) {
    case PlacementKind::kLinear:
      style = "1F1B";
      break;
    case PlacementKind::kLoop:
      style = c.virtual_stages > 1 ? "Interleaved1F1B" : "1F1B";
      break;
    case PlacementKind::kV:
      style = "ZBVZeroBubble";
      break;
    case PlacementKind::kExplicit:
      cannot_express(target,
                     "an explicit stage placement (torchtitan places stages in a loop or "
                     "a V)");
  }
  const int first = first_transformer(plan.model);
  std::ostringstream parts;
  parts << "[";
  for (int s = 0; s < plan.partition.num_stages(); ++s) {
    parts << (s ? ", [" : "[");
    bool any = false;
    auto name = [&](const std::string& n) {
      parts << (any ? ", " : "") << toml_string(n);
      any = true;
    };
    for (int l = plan.partition.begin(s); l < plan.partition.end(s); ++l) {
      const LayerWork& layer = plan.model.layers[l];
      switch (layer.kind) {
        case LayerKind::kEmbedding:
          name("tok_embeddings");
          break;
        case LayerKind::kTransformer:
          name("layers." + std::to_string(l - first));
          break;
        case LayerKind::kLogits:
          name("norm");
          name("output");
          break;
        case LayerKind::kCustom:
          cannot_express(target,
                         "layer '" + layer.name + "' (custom) has no torchtitan module name");
      }
    }
    parts << "]";
  }
  parts << "]";
  const char* ac = c.recompute == Recompute::kFull        ? "full"
                   : c.recompute == Recompute::kSelective ? "selective"
                   : c.recompute == Recompute::kOp        ? "selective"
                                                          : "none";
  // Full recompute of some layers: torchtitan's layer-level selective AC checkpoints every k-th
  // block a rank builds (selective_ac_option = "k": a counter over the blocks, block i of
  // 1, 2, ... checkpointed when i % k == 0), floor(L/k) of L blocks. It matches "the first N
  // blocks" in time and memory on one stage whose L blocks give floor(L/k) = N for some k.
  int ac_every = 0;
  if (c.recompute == Recompute::kFull && c.recompute_layers >= 0) {
    const int most = max_chunk_transformers(plan);
    if (c.recompute_layers == 0) {
      ac = "none";
    } else if (c.recompute_layers < most) {
      if (plan.partition.num_stages() > 1)
        cannot_express(target, "recompute_layers " + std::to_string(c.recompute_layers) +
                                   " per stage with " +
                                   std::to_string(plan.partition.num_stages()) +
                                   " stages (torchtitan's selective_ac_option counts every k-th "
                                   "block over all blocks of a rank, not per stage)");
      for (int k = 2; k <= most && ac_every == 0; ++k)
        if (most / k == c.recompute_layers) ac_every = k;
      if (ac_every == 0)
        cannot_express(target, "recompute_layers " + std::to_string(c.recompute_layers) + " of " +
                                   std::to_string(most) +
                                   " blocks (torchtitan checkpoints every k-th block, " +
                                   std::to_string(most) + "/k rounded down for some k)");
      ac = "selective";
    }
  }
  std::ostringstream o;
  o << "# torchtitan job config for " << describe_plan(plan, schedule) << "\n";
  o << "# Keys checked against " << kTorchtitanVersion << ".\n";
  o << "# The schedule itself is the CSV (PyTorch pipelining, compute_only): with "
       "pipeline_parallel_schedule_csv\n# set, torchtitan runs _PipelineScheduleRuntime; "
       "pipeline_parallel_schedule only places the stages\n# ("
    << style << ").\n";
  if (c.overlap_grad_reduce)
    o << "# Gradient reduction overlapped with the backward: torchtitan's FSDP/DDP default.\n";
  if (fsdp) {
    o << "# Parameter sharding (ZeRO-3): FSDP2 over dp x cp = " << c.dp * c.cp
      << " ranks (torchtitan's dp_shard_cp mesh),\n# the weights gathered for each forward and "
         "backward.\n";
    if (c.pp > 1)
      o << "# With pipeline parallelism PyTorch's pipelining runtime defers FSDP's gradient\n"
           "# reduce-scatter to the last microbatch and keeps the weights gathered after each\n"
           "# backward (torch.distributed.pipelining stage.py): more memory than the plan's\n"
           "# reduce-scatter per microbatch.\n";
  } else if (c.cp > 1) {
    o << "# torchtitan applies FSDP over the cp ranks whenever context_parallel_degree > 1\n"
         "# (ParallelDims.fsdp_enabled): the weights are sharded over cp, the plan replicates "
         "them.\n";
  }
  o << "[parallelism]\n";
  o << "data_parallel_replicate_degree = " << replicate_degree << "\n";
  o << "data_parallel_shard_degree = " << shard_degree << "\n";
  if (fsdp) o << "fsdp_reshard_after_forward = \"always\"\n";
  o << "tensor_parallel_degree = " << c.tp << "\n";
  o << "context_parallel_degree = " << c.cp << "\n";
  if (c.ep > 1) {
    o << "expert_parallel_degree = " << c.ep << "\n";
    o << "expert_tensor_parallel_degree = " << c.expert_tp() << "\n";
  }
  o << "pipeline_parallel_degree = " << c.pp << "\n";
  o << "pipeline_parallel_schedule = " << toml_string(style) << "\n";
  o << "pipeline_parallel_schedule_csv = " << toml_string(csv_path, "--csv " + csv_path) << "\n";
  o << "pipeline_parallel_microbatch_size = " << c.microbatch_size << "\n";
  o << "module_fqns_per_model_part = " << parts.str() << "\n";
  if (c.tp_comm_overlap)
    o << "enable_async_tensor_parallel = true  # takes effect with torch.compile\n";
  o << "\n[training]\n";
  o << "local_batch_size = " << c.global_batch / c.dp << "\n";
  o << "global_batch_size = " << c.global_batch << "\n";
  if (plan.model.seq_len > 0) o << "seq_len = " << plan.model.seq_len << "\n";
  o << "\n[activation_checkpoint]\n";
  o << "mode = " << toml_string(ac) << "\n";
  if (c.recompute == Recompute::kOp) o << "selective_ac_option = \"op\"\n";
  if (ac_every > 0)
    o << "selective_ac_option = \"" << ac_every << "\"  # every " << ac_every
      << "-th block: " << c.recompute_layers << " of " << max_chunk_transformers(plan)
      << " recomputed\n";
  return o.str();
}

// ---- JaxPP ---------------------------------------------------------------------------------

std::string jaxpp_snippet(const Plan& plan, const std::string& schedule) {
  const ParallelConfig& c = plan.config;
  const HandoffTarget target = HandoffTarget::kJaxpp;
  if (c.recompute_modules != 0)
    cannot_express(target, "recompute modules " + recompute_modules_to_string(c.recompute_modules) +
                               " (Megatron-Core's fine-grained selective recompute; the snippet "
                               "checkpoints whole layers with a jax.checkpoint policy)");
  refuse_low_precision_activations(target, plan.model);
  if (plan.model.dtype == Dtype::kFp8 && plan.model.fp8_scaling == Fp8Scaling::kMxfp8)
    cannot_express(target, "MXFP8 (\"fp8_scaling\": \"mxfp8\"): the snippet sets no "
                           "precision (the trainer's own dtype policy decides)");
  if (c.cp > 1) cannot_express(target, "context parallelism (cp " + std::to_string(c.cp) + ")");
  if (c.ep > 1) cannot_express(target, "expert parallelism (ep " + std::to_string(c.ep) + ")");
  if (c.zero1) cannot_express(target, "ZeRO-1 (distributed optimizer)");
  if (c.sequence_parallel)
    cannot_express(target, "sequence parallelism (XLA decides the sharding)");
  if (c.recompute == Recompute::kOp)
    cannot_express(target, "recompute op (torchtitan's op-level selective checkpointing; "
                           "jax.checkpoint_policies has no every-other-matmul policy)");
  if (c.tp_comm_overlap) cannot_express(target, "tensor-parallel communication overlap");
  if (c.offload_layers > 0)
    cannot_express(target, "activation offloading (offload_layers " +
                               std::to_string(c.offload_layers) + ")");
  if (c.recompute == Recompute::kFull && c.recompute_layers >= 0 &&
      c.recompute_layers < max_chunk_transformers(plan))
    cannot_express(target, "recompute_layers " + std::to_string(c.recompute_layers) +
                               " (the snippet checkpoints every layer or none)");
  if (c.grad_dtype != GradDtype::kCluster)
    cannot_express(target, std::string(to_string(c.grad_dtype)) +
                               " gradients (the trainer's own dtype policy decides)");
  if (c.optimizer_state != OptimizerState::kCluster)
    cannot_express(target, "optimizer state '" + std::string(to_string(c.optimizer_state)) +
                               "' (the trainer's own optimizer decides)");
  if (c.overlap_grad_reduce)
    cannot_express(target, "the overlapped gradient reduction (XLA schedules the reduction)");
  const int S = plan.partition.num_stages();
  std::string schedule_expr;
  if (schedule == "Std1F1B" || schedule == "Eager1F1B" || schedule == "ZeroBubble") {
    if (plan.placement.kind != PlacementKind::kLinear)
      cannot_express(target, "schedule " + schedule + " with a non-linear placement");
    schedule_expr = "jaxpp." + schedule + "(num_stages=NUM_STAGES)";
  } else if (schedule == "Interleaved1F1B") {
    if (c.num_microbatches % S != 0)
      cannot_express(target, "Interleaved1F1B with " + std::to_string(c.num_microbatches) +
                                 " microbatches, not a multiple of the " + std::to_string(S) +
                                 " stages (JaxPP requires it)");
    schedule_expr = "jaxpp.Interleaved1F1B(num_stages=NUM_STAGES, mpmd_dim=PP)";
  } else {
    cannot_express(target, "schedule " + schedule +
                               " cannot be expressed (jaxpp.api has Std1F1B, Eager1F1B, "
                               "ZeroBubble and Interleaved1F1B)");
  }
  std::ostringstream starts;
  for (int s = 0; s < S; ++s) starts << (s ? ", " : "") << plan.partition.begin(s);
  std::ostringstream o;
  o << "# JaxPP hand-off for " << describe_plan(plan, schedule) << "\n";
  o << "# API checked against " << kJaxppVersion << ".\n";
  o << "from functools import partial\n\n";
  o << "import jax\nimport numpy as np\nimport optax\n\nimport jaxpp.api as jaxpp\n\n";
  o << "PP, DP, TP = " << c.pp << ", " << c.dp << ", " << c.tp << "  # mesh shape: " << c.gpus
    << " devices\n";
  o << "NUM_STAGES = " << S << "  # " << c.virtual_stages << " per pipeline rank\n";
  o << "NUM_MICROBATCHES = " << c.num_microbatches
    << "  # leading axis of the batch given to treduce\n";
  o << "MICROBATCH_SIZE = " << c.microbatch_size << " * DP  # sequences per microbatch (global)\n";
  o << "# First model layer of each stage (layers in model order: embedding, blocks, head):\n";
  o << "STAGE_FIRST_LAYER = [" << starts.str() << "]\n\n";
  o << "mpmd_mesh = jaxpp.MpmdMesh(\n"
       "    jax.sharding.Mesh(np.array(jax.devices()).reshape((PP, DP, TP)), (\"stages\", "
       "\"data\", \"model\")),\n"
       "    \"stages\",\n)\n";
  o << "schedule = " << schedule_expr << "\n\n";
  std::string layer_call = "layer(p, x)";
  if (c.recompute == Recompute::kFull && c.recompute_layers != 0) {
    o << "# Full recompute: every layer rematerialised in the backward.\n";
    layer_call = "jax.checkpoint(layer)(p, x)";
  } else if (c.recompute == Recompute::kSelective) {
    o << "# Selective recompute: keep the matmul outputs, recompute the rest.\n";
    layer_call = "jax.checkpoint(layer, policy=jax.checkpoint_policies.checkpoint_dots)(p, x)";
  }
  o << "def forward(layers, params, x):\n"
       "    for index, (layer, p) in enumerate(zip(layers, params)):\n"
       "        if index in STAGE_FIRST_LAYER[1:]:\n"
       "            x = jaxpp.pipeline_enter_stage(x)\n"
       "        x = "
    << layer_call
    << "\n"
       "    return x\n\n";
  o << "def make_train_step(loss_fn, optimizer):\n"
       "    @partial(jaxpp.mpmd_jit_with_loop, mpmd_mesh=mpmd_mesh)\n"
       "    def train_step(opt_state, params, batch):  # batch: [NUM_MICROBATCHES, "
       "MICROBATCH_SIZE, ...]\n"
       "        grad_fn = partial(jax.value_and_grad(loss_fn), params)\n"
       "        losses, grad = jaxpp.treduce(grad_fn, batch, schedule=schedule)\n"
       "        updates, opt_state = optimizer.update(grad, opt_state, params)\n"
       "        return opt_state, optax.apply_updates(params, updates), losses\n"
       "    return train_step\n";
  return o.str();
}

}  // namespace jaxpp
