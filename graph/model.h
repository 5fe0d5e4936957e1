// ModelSpec: the model as a list of layers with their work, independent of hardware.
//
// graph/ speaks in work (FLOPs, bytes, parameter counts); costmodel/ turns work into seconds.
// All per-layer work is for ONE sequence (microbatch size 1) and no tensor parallelism; callers
// multiply by the microbatch size and divide by tp as the cost model decides.
//
// Transformer work follows Megatron-LM (Narayanan et al. 2021) and the Zero Bubble paper, see
// ../shared/VALIDATION.md; the formulas live in model.cc, in one place:
//   forward          2·s·(attention + MLP weights) + 4·s²·h    (= 24·s·h² + 4·s²·h for GPT)
//   backward input   2·s·(weights) + 8·s²·h                      (= s·h·(24h + 8s))
//   backward weight  2·s·(weights)                               (= 24·s·h²)
//   logits           2·s·h·V forward, the same for each backward half
//   activations      s·h·(34 + 5·a·s/h) bytes (none), 34·s·h (selective), 2·s·h (full recompute)
// Embedding and logits/loss are layers of their own (kind kEmbedding / kLogits).
//
// Mixture of experts (MoeSpec) and multi-head latent attention (MlaSpec) change what a layer's
// weights are, not the formulas: "weights" above are the weights a token passes through (the
// router, the top-k routed experts and the shared experts), so FLOPs count active experts only,
// while `params` counts every expert (what memory holds). An MTP (multi-token prediction) module
// is a layer of kind kCustom named "mtp<i>" before the logits; total_params() and
// active_params() leave it out (the published convention, DeepSeek-V3 report Sec. 2.2),
// mtp_params() counts it, and the memory model holds it like any layer.
//
// Usage:
//   ModelSpec m = load_model("gpt3-13b");           // a preset, or a path to a JSON file
//   int64_t n = m.total_params();
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace jaxpp {

class JsonObject;  // graph/json_util.h

enum class Dtype { kBf16, kFp16, kFp32, kFp8 };
inline constexpr std::array kAllDtypes = {Dtype::kBf16, Dtype::kFp16, Dtype::kFp32, Dtype::kFp8};
std::string_view to_string(Dtype d);
int dtype_bytes(Dtype d);
// Bytes of one activation element of a model of dtype d: dtype_bytes, but 2 for FP8 (FP8 training
// runs its GEMMs in FP8 and keeps activations, pipeline messages and logits in 16 bits).
int activation_dtype_bytes(Dtype d);
// Bytes per element of an expert-parallel all-to-all payload: dtype_bytes, plus for FP8 one fp32
// scale per 1×128 tile of activations (DeepSeek-V3 technical report, arXiv 2412.19437,
// §3.3.2), 1 + 4/128.
double alltoall_bytes_per_element(Dtype d);
Dtype parse_dtype(std::string_view s, const std::string& where);  // InputError if unknown

// How an FP8 model's GEMM operands are scaled (Transformer Engine recipes; ModelSpec::fp8_scaling):
// per-tensor current or delayed scaling, or MXFP8 (one E8M0 scale per 32 consecutive elements,
// Blackwell's block-scaled FP8 tensor cores). "current", "delayed", "mxfp8".
enum class Fp8Scaling { kCurrent, kDelayed, kMxfp8 };
inline constexpr std::array kAllFp8Scalings = {Fp8Scaling::kCurrent, Fp8Scaling::kDelayed,
                                               Fp8Scaling::kMxfp8};
std::string_view to_string(Fp8Scaling s);

// Which element-wise kernels a 16-bit model's training framework runs (ModelSpec::kernel_fusion):
//   kFused            Megatron-LM / Transformer Engine's fused kernels (norms, bias + dropout +
//                     residual add, bias + GeLU, SwiGLU, RoPE, a fused cross-entropy), 16-bit
//                     activations throughout. "fused".
//   kEager            eager PyTorch (no torch.compile) under torch.autocast(bfloat16) with 16-bit
//                     parameters, as FSDP's mixed precision (param_dtype bf16) gathers them: one
//                     kernel per operator, the norms run in fp32 (autocast's fp32 list), casts
//                     around every autocast op, an fp32 logits copy and an unfused
//                     log_softmax + nll_loss. "eager".
//   kEagerFp32Params  as kEager with fp32 parameters (no FSDP mixed precision: the parameters
//                     are the master copy): the residual stream is fp32 (the embedding's output),
//                     every forward casts each weight to bf16 and each backward casts its bf16
//                     weight gradient to fp32. "eager_fp32_params".
// graph/kernels.cc lists the kernels of each; costmodel/operator_cost.cc prices them.
enum class KernelFusion { kFused, kEager, kEagerFp32Params };
inline constexpr std::array kAllKernelFusions = {KernelFusion::kFused, KernelFusion::kEager,
                                                 KernelFusion::kEagerFp32Params};
std::string_view to_string(KernelFusion f);
// "fused", "eager" or "eager_fp32_params"; InputError at `where` otherwise.
KernelFusion parse_kernel_fusion(std::string_view s, const std::string& where);
// Eager PyTorch's kernels are for 16-bit training: InputError at `where` for an eager `f` on an
// FP8 model or corpus row (FP8 runs Transformer Engine's or torchao's fused kernels).
void check_kernel_fusion_precision(KernelFusion f, bool fp8, const std::string& where);
// What the loss keeps of the logits for its backward (ModelSpec::cross_entropy; model JSON
// "cross_entropy"):
//   kFp32        "fp32" (default): an fp32 copy. Megatron-Core's vocab-parallel cross-entropy,
//                unfused and fused alike (megatron/core/tensor_parallel/cross_entropy.py,
//                VocabParallelCrossEntropy.calculate_logits_max: `vocab_parallel_logits.float()`,
//                exp and the division in place, ctx.save_for_backward(exp_logits, ...);
//                megatron/core/fusions/fused_cross_entropy.py reuses it), torchtitan
//                (torchtitan/components/loss.py cross_entropy_loss: `pred.flatten(0, 1).float()`
//                into F.cross_entropy, whose log_softmax saves its fp32 output) and Hugging Face
//                models under autocast (cross_entropy runs in fp32). The 16-bit logits are no
//                longer saved but live beside the fp32 copy while the loss runs: the caller
//                holds them through the forward (GPTModel.forward's `logits`, torchtitan's
//                `pred`), and the backward casts the fp32 gradient back to 16 bits.
//   kLogitsDtype "logits_dtype": the logits themselves in their dtype, the fp32 math inside one
//                kernel. flash-attn's Triton cross-entropy (flash_attn/losses/cross_entropy.py,
//                llm-foundry's default loss_fn "fused_crossentropy" for MPT:
//                ctx.save_for_backward(logits, lse, labels), a gradient of the logits' dtype
//                written out of place by default) and Transformer Engine's
//                parallel_cross_entropy (transformer_engine/pytorch/cross_entropy.py, Megatron's
//                cross_entropy_fusion_impl 'te': saves `_input`, the gradient written into it).
enum class CrossEntropy { kFp32, kLogitsDtype };
inline constexpr std::array kAllCrossEntropies = {CrossEntropy::kFp32,
                                                  CrossEntropy::kLogitsDtype};
std::string_view to_string(CrossEntropy c);
// "fp32" or "logits_dtype"; InputError at `where` otherwise.
CrossEntropy parse_cross_entropy(std::string_view s, const std::string& where);
// Bytes per logit element (one token, one vocabulary entry) the loss keeps for its backward: 4
// for kFp32, the activation bytes for kLogitsDtype.
int cross_entropy_saved_bytes_per_logit(CrossEntropy c, Dtype d);
// Bytes per logit element that live beside them only while one microbatch's loss runs (its
// forward, or its backward up to the 16-bit gradient): kFp32 the 16-bit logits (0 for an fp32
// model, whose .float() is the logits themselves); kLogitsDtype the gradient flash-attn writes
// beside the saved logits (an upper bound for Transformer Engine's, written in place).
int cross_entropy_transient_bytes_per_logit(CrossEntropy c, Dtype d);
// An MTP module's projection input per token (DeepSeek-V3 report, Sec. 2.2): the concatenation
// of the normed hidden state and the normed next-token embedding, 2·hidden activations, which
// eh_proj saves for its weight gradient. graph's stash and the memory model both count it here.
int64_t mtp_projection_input_bytes_per_token(int hidden, Dtype d);

// none: keep every activation; selective: re-run the attention core (Megatron's selective
// recompute); full: re-run the whole forward of each layer (keep its input); op: torchtitan's
// op-level selective activation checkpointing (activation_checkpoint.selective_ac_option = "op"):
// keep the layer input, the attention core's output and every other 16-bit matmul's output,
// re-run the rest of the forward (with float8 linears, every GEMM). docs/simulate.md.
enum class Recompute { kNone = 0, kSelective = 1, kFull = 2, kOp = 3 };
inline constexpr std::array kAllRecompute = {Recompute::kNone, Recompute::kSelective,
                                             Recompute::kFull, Recompute::kOp};
// The policies explore searches when none is given (op is opt-in: --recompute op).
inline constexpr std::array kDefaultExploreRecompute = {Recompute::kNone, Recompute::kSelective,
                                                        Recompute::kFull};
std::string_view to_string(Recompute r);
Recompute parse_recompute(std::string_view s, const std::string& where);

enum class LayerKind { kEmbedding, kTransformer, kLogits, kCustom };
std::string_view to_string(LayerKind k);  // "embedding", "transformer", "logits", "custom"
LayerKind parse_layer_kind(std::string_view s, const std::string& where);

// Work of one layer for one sequence, without tensor parallelism.
struct LayerWork {
  std::string name;
  LayerKind kind = LayerKind::kCustom;
  bool moe = false;  // a transformer layer whose FFN is a mixture of experts
  double fwd_flops = 0;         // forward
  double bwd_input_flops = 0;   // backward for inputs (I)
  double bwd_weight_flops = 0;  // backward for weights (W)
  int64_t params = 0;
  // Parameters one token passes through (the top-k routed and shared experts, not all of them);
  // -1 = params (dense layers).
  int64_t active_params = -1;
  int64_t active() const { return active_params >= 0 ? active_params : params; }
  int64_t output_bytes = 0;  // activation handed to the next layer (pipeline P2P payload)
  // Bytes stashed between this layer's F and its backward, indexed by Recompute.
  std::array<int64_t, 4> stash_bytes = {0, 0, 0, 0};
  // Extra forward FLOPs redone in the backward, indexed by Recompute (0 for kNone).
  std::array<double, 4> recompute_flops = {0, 0, 0, 0};
  // Tensor-parallel all-reduce payload per pass (forward; the backward has the same), in bytes.
  // 2 all-reduces of s·h elements per transformer layer (Megatron); 0 for other layers.
  int64_t tp_allreduce_bytes = 0;
};

// Mixture of experts in the FFN of every transformer layer but the first `first_dense_layers`
// (which keep a dense FFN of ffn_hidden). experts == 0: a dense model.
// How the router turns a token's expert scores into gate weights: softmax over the experts
// (Mixtral, Qwen3 MoE) or an independent sigmoid per expert (DeepSeek-V3, Kimi K2).
enum class MoeRouter { kSoftmax, kSigmoid };
std::string_view to_string(MoeRouter r);  // "softmax", "sigmoid"

// How a device runs the GEMMs of its local routed experts (MoeSpec::expert_gemm; costmodel/
// operator_cost.h prices both):
//   kGrouped    one grouped kernel over every local expert (the grouped_gemm package's
//               ops.gmm CUTLASS kernel, DeepSeek's grouped kernels): its tiles share the SMs as
//               one stacked problem; FP8 casts one kernel per tensor for all experts.
//   kPerExpert  Transformer Engine's GroupedLinear (Megatron-Core's TEGroupedMLP) as it runs on
//               Hopper in FP8 and in BF16, and on every GPU up to TE 2.x:
//               general_grouped_gemm → nvte_multi_stream_cublas_gemm / nvte_multi_tensor_gemm's
//               cuBLAS path, one cuBLAS GEMM per local expert, round-robin over
//               expert_gemm_streams compute streams (TE common/util/multi_stream.cpp
//               get_num_compute_streams: 4); each expert's input, weight and output gradient
//               quantized by its own kernels (tex.split_quantize: one quantize per expert, the
//               fused multi-cast-transpose only for delayed scaling's inputs).
enum class ExpertGemm { kGrouped, kPerExpert };
inline constexpr std::array kAllExpertGemms = {ExpertGemm::kGrouped, ExpertGemm::kPerExpert};
std::string_view to_string(ExpertGemm g);  // "grouped", "per_expert"
// "grouped" or "per_expert" (exactly); InputError naming `where` otherwise.
ExpertGemm parse_expert_gemm(const std::string& text, const std::string& where);
// Transformer Engine's compute streams for its multi-stream GEMMs and quantizations
// (transformer_engine/common/util/multi_stream.cpp get_num_compute_streams, TE 2.x; TE 1.x
// gemm.h `constexpr int num_streams = 4`).
inline constexpr int kTransformerEngineComputeStreams = 4;
// Most streams a model may name (model JSON "expert_gemm_streams").
inline constexpr int kMaxExpertGemmStreams = 64;

struct MoeSpec {
  int experts = 0;            // routed experts per layer
  int top_k = 0;              // routed experts per token
  int expert_ffn_hidden = 0;  // FFN width of each routed expert
  int shared_experts = 0;     // experts every token passes through
  int shared_ffn_hidden = 0;  // FFN width of each shared expert
  int first_dense_layers = 0;
  MoeRouter router = MoeRouter::kSoftmax;  // model JSON "router" (written when sigmoid)
  // Element type of the expert-parallel all-to-all payload (model JSON "a2a_dispatch_dtype",
  // "a2a_combine_dtype"; simulate/explore --a2a-dtype): dispatch = what travels from a token to
  // its experts (the forward's dispatch and, in the backward, the output gradients the combine's
  // backward sends), combine = what travels back (the forward's combine and the backward's
  // input gradients of the dispatch). nullopt = the activations' type (the model's dtype, BF16
  // for an FP8 model). DeepSeek-V3 dispatches in FP8 and combines in BF16.
  std::optional<Dtype> dispatch_dtype;
  std::optional<Dtype> combine_dtype;
  // How the local experts' GEMMs run (ExpertGemm above; model JSON "expert_gemm", default
  // "grouped"; a validation-corpus row can set it with its own key) and, per expert, over how
  // many streams (model JSON "expert_gemm_streams", 1..kMaxExpertGemmStreams, only with
  // "per_expert"; default Transformer Engine's 4).
  ExpertGemm expert_gemm = ExpertGemm::kGrouped;
  int expert_gemm_streams = kTransformerEngineComputeStreams;
  bool enabled() const { return experts > 0; }
};
// The keys "expert_gemm" and "expert_gemm_streams" of a model's MoE fields or of a corpus row,
// read into `moe` (the streams only with per_expert, 1..kMaxExpertGemmStreams); InputError
// naming the field otherwise.
void read_expert_gemm_keys(const JsonObject& obj, MoeSpec& moe);

// Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): q = W_qb·norm(W_qa·x) (or W_q·x when
// q_lora_rank is 0), [c_kv, k_rope] = W_kva·x, [k_nope, v] = W_kvb·norm(c_kv); per head, q and k
// have qk_nope_head_dim + qk_rope_head_dim elements, v has v_head_dim. kv_lora_rank == 0: none.
struct MlaSpec {
  int q_lora_rank = 0;  // 0 = a plain q projection
  int kv_lora_rank = 0;
  int qk_rope_head_dim = 0;
  int qk_nope_head_dim = 0;
  int v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

struct ModelSpec {
  std::string name;
  Dtype dtype = Dtype::kBf16;
  // Transformer shape (0 when the model was given in explicit form).
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int ffn_hidden = 0;
  int seq_len = 0;
  int vocab = 0;
  bool tied_embeddings = true;
  bool gated_mlp = false;  // SwiGLU-style MLP with 3 weight matrices (Llama)
  // Attention head size of q, k and v (0 = hidden / heads; Qwen3 sets 128 whatever the hidden).
  int head_dim = 0;
  bool gelu_rope = false;  // a GELU model with RoPE instead of learned positions (GPT-NeoX)
  bool qkv_bias = false;          // biases on q, k, v of a SwiGLU model (Qwen2)
  bool qk_norm = false;           // RMSNorm on each head's q and k (Qwen3)
  // A GELU model trained with every dropout probability 0 (model JSON "dropout": false): no
  // dropout masks are written or stashed (SwiGLU models never have them).
  bool no_dropout = false;
  // FP8 models (dtype fp8, Transformer Engine): kCurrent = per-tensor current scaling (each
  // tensor's scale from its own amax in the same step: an amax pass before every cast; NeMo's
  // "FP8-CS"), kDelayed = per-tensor delayed scaling (the scale from an amax history of earlier
  // steps, the amax recorded during the cast; "FP8-DS"), kMxfp8 = MXFP8 block scaling (one E8M0
  // scale per 32 elements computed in the cast kernel, no amax pass; each operand quantized
  // row-wise and column-wise; "FP8-MX"; needs a GPU with block-scaled FP8 tensor cores,
  // ClusterSpec::fp8_block_scaling). Model JSON "fp8_scaling": "current" (default), "delayed" or
  // "mxfp8" (only with "dtype": "fp8"). costmodel/operator_cost.h prices the casts.
  Fp8Scaling fp8_scaling = Fp8Scaling::kCurrent;
  // What the loss keeps of the logits (CrossEntropy above); a validation-corpus row's inline
  // model sets it with the model key.
  CrossEntropy cross_entropy = CrossEntropy::kFp32;
  // FP8 models: true = the framework is Transformer Engine (Megatron-Core's TE layer spec), whose
  // LayerNormLinear hands its norm the quantizer of the GEMM input it feeds (QKV, a dense MLP's
  // first GEMM): delayed scaling writes the norm's output in FP8 directly, current scaling
  // computes the amax inside the norm (Transformer Engine PR #2013, opened July 2025); MXFP8 quantizes separately (TE's default
  // norm backend). false = every FP8 GEMM input is cast by a separate kernel (another framework:
  // torchao's Float8Linear, DeepSeek's; current scaling with TE before that PR). Model JSON
  // "fp8_norm_fusion" (default true; only with "dtype": "fp8"); a validation-corpus row can set
  // it with its own key. costmodel/operator_cost.h prices it.
  bool fp8_norm_fusion = true;
  // The element-wise kernels the framework runs (KernelFusion above). Model JSON
  // "kernel_fusion" (default "fused"; the eager values only for 16-bit models); a
  // validation-corpus row can set it with its own key.
  KernelFusion kernel_fusion = KernelFusion::kFused;
  // FP8 models: true = the transformer layers' weights are stored in FP8 (Megatron's
  // --fp8-param-gather, TE fp8_model_init; set by Megatron-Bridge's and NeMo's FP8 recipes):
  // 1 byte per parameter, plus a cached transpose on GPUs that need one
  // (kernels.fp8_transpose_copy), instead of 16-bit weights; false = 16-bit weights plus the FP8
  // copy (and transpose) Transformer Engine caches for the step. Model JSON "fp8_params"
  // (default true; only with "dtype": "fp8"). costmodel/memory.cc counts the bytes.
  bool fp8_params = true;
  // Activations an FP8 model caches for the backward in fewer bits than its 16-bit stash
  // (graph/kernels.cc; model JSON "low_precision_activations", a list; a model that does not
  // train in FP8 is refused when simulated, costmodel/memory.cc),
  // as the DeepSeek-V3 report's Section 3.3.3 ("Low-Precision Activation") describes:
  //   attention_out     the attention core's output (the input of the linear layer after it),
  //                     kept once in a 12-bit format (E5M6: 1.5 bytes per element, plus one
  //                     fp32 scale per 1×128 tile) for both the attention backward and the
  //                     output projection's weight gradient, instead of a 16-bit copy plus the
  //                     projection's FP8 copy; a cast in the forward, one back in the backward
  //   moe_swiglu_input  the routed experts' SwiGLU inputs (gate and up) kept in FP8 (1 byte
  //                     plus one fp32 scale per 1×128 tile) instead of 16 bits; a cast in the
  //                     forward, one back in the backward (recomputing the SwiGLU output is
  //                     the recompute module moe_act, graph/plan.h)
  bool low_precision_attention_out = false;
  bool low_precision_moe_swiglu_input = false;
  // The names of the low-precision activations set ("attention_out", "moe_swiglu_input", in
  // that order; empty for none), as the model JSON's "low_precision_activations" lists them.
  std::vector<std::string_view> low_precision_activations() const {
    std::vector<std::string_view> names;
    if (low_precision_attention_out) names.push_back("attention_out");
    if (low_precision_moe_swiglu_input) names.push_back("moe_swiglu_input");
    return names;
  }
  MoeSpec moe;
  MlaSpec mla;
  int mtp_modules = 0;  // multi-token-prediction modules (layers "mtp0"... before the logits)
  int num_transformer_layers = 0;
  std::vector<LayerWork> layers;  // in execution order, embedding first, logits last

  int num_layers() const { return static_cast<int>(layers.size()); }
  // Every parameter but the MTP modules', all experts included (the published "total").
  int64_t total_params() const;
  // Parameters one token passes through, MTP modules left out (the published "activated").
  int64_t active_params() const;
  int64_t mtp_params() const;
  // Parameters of the routed experts of layer `index` (experts · 3 · hidden · expert_ffn_hidden
  // for an MoE layer of a model with a MoeSpec; 0 otherwise): what expert parallelism spreads.
  // An MTP module's block is a copy of the last transformer layer before it (graph/model.cc
  // mtp_layer): it holds that layer's routed experts (at most its own parameters).
  int64_t routed_expert_params(int index) const;
  // For an MTP module (a custom layer "mtp<i>" of a model with mtp_modules): the transformer
  // layer its block copies, the last one before it; -1 for any other layer.
  int mtp_block(int index) const;
  // q (and k) head size of standard attention: head_dim, or hidden / heads.
  int attention_head_dim() const {
    return head_dim > 0 ? head_dim : (heads > 0 ? hidden / heads : 0);
  }
  bool learned_positions() const { return !gated_mlp && !gelu_rope; }
  // True for a model with none of MoE, MLA, MTP, an explicit head_dim, qkv_bias, qk_norm or
  // gelu_rope.
  bool is_classic_transformer() const;
  // Tokens per sequence (seq_len; 1 if unknown).
  int tokens_per_sequence() const { return seq_len > 0 ? seq_len : 1; }
  // Forward + both backward FLOPs of one sequence, no recompute (the "model FLOPs" of MFU).
  double model_flops_per_sequence() const;
  // As above plus the recompute FLOPs of the given policy (the "hardware FLOPs").
  double hardware_flops_per_sequence(Recompute r) const;
};

// A preset name (case-insensitive), a path to a model JSON file, or a path to a Hugging Face
// transformers config.json (recognised by its "architectures" or "model_type" field;
// graph/hf_config.h). InputError otherwise.
ModelSpec load_model(const std::string& name_or_path);
// The all-to-all payload types of an MoE model from a flag value: "D" (dispatch and combine) or
// "DISPATCH,COMBINE" (bf16, fp16, fp32, fp8). InputError naming `where` on an unknown type or a
// model without routed experts.
void set_alltoall_dtypes(ModelSpec& model, std::string_view text, const std::string& where);
// Parses a model JSON document (transformer or explicit form); `source` names it in errors.
ModelSpec model_from_json(const nlohmann::json& doc, const std::string& source);
// The explicit form (layers_list), which model_from_json reads back to an equal ModelSpec.
nlohmann::json model_to_json(const ModelSpec& model);
// The transformer form of a model with a shape (hidden > 0 and transformer layers), with
// `seq_len` (0 = the model's own): model_from_json reads it back to the same model.
nlohmann::json model_shape_to_json(const ModelSpec& model, int seq_len = 0);
std::vector<std::string> model_preset_names();

// Why tensor parallelism of degree `tp` cannot split `model`'s attention, or "" when it can:
// every rank holds whole heads and whole key/value heads (query groups), as Megatron-LM divides
// both by tp (divide(num_query_groups, world_size) in its attention). "tp 16 does not divide the
// 8 key/value heads (query groups) of llama3-8b". A model without a shape (heads 0) has none.
std::string tp_heads_error(const ModelSpec& model, int tp);

}  // namespace jaxpp
