#include "graph/model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>

#include "graph/error.h"
#include "graph/hf_config.h"
#include "graph/input_file.h"
#include "graph/json_util.h"
#include "graph/kernels.h"
#include "graph/limits.h"

namespace jaxpp {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The shape of a decoder/encoder-only transformer; everything else is derived in one place,
// build_transformer_model() below.
enum class Positions { kAuto, kLearned, kRope };  // kAuto: learned for GELU, RoPE for SwiGLU

struct TransformerShape {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;    // 0 = heads
  int ffn_hidden = 0;  // 0 = 4·hidden
  int seq_len = 0;
  int vocab = 0;
  Dtype dtype = Dtype::kBf16;
  bool tied_embeddings = true;
  bool gated_mlp = false;  // SwiGLU (3 matrices), RMSNorm, no biases, RoPE (Llama)
  int head_dim = 0;        // 0 = hidden / heads
  Positions positions = Positions::kAuto;
  bool qkv_bias = false;
  bool qk_norm = false;
  bool no_dropout = false;  // a GELU model trained with every dropout probability 0
  Fp8Scaling fp8_scaling = Fp8Scaling::kCurrent;
  bool fp8_params = true;
  bool fp8_norm_fusion = true;
  KernelFusion kernel_fusion = KernelFusion::kFused;
  CrossEntropy cross_entropy = CrossEntropy::kFp32;
  bool low_precision_attention_out = false;
  bool low_precision_moe_swiglu_input = false;
  MoeSpec moe;
  MlaSpec mla;
  int mtp_modules = 0;

  bool learned_positions() const {
    return positions == Positions::kAuto ? !gated_mlp : positions == Positions::kLearned;
  }
  int64_t d() const { return head_dim > 0 ? head_dim : hidden / heads; }
  bool classic() const {
    return head_dim == 0 && !qkv_bias && !qk_norm && !moe.enabled() && !mla.enabled() &&
           mtp_modules == 0 && learned_positions() == !gated_mlp;
  }
};

// ---- The work formulas (VALIDATION.md; Megatron-LM, Narayanan et al. 2021). -----------------
// All for one sequence of length s, no tensor parallelism.

// Weight-matrix elements of the attention of one layer: q and o are h×(a·d), k and v are
// h×(kv·d) (= 4h² for GPT); MLA: its down and up projections (model.h).
int64_t attention_matrix_params(const TransformerShape& t) {
  const int64_t h = t.hidden, a = t.heads;
  if (t.mla.enabled()) {
    const MlaSpec& m = t.mla;
    const int64_t q_out = a * m.qk_head_dim();
    const int64_t q =
        m.q_lora_rank > 0 ? h * m.q_lora_rank + int64_t{m.q_lora_rank} * q_out : h * q_out;
    return q + h * (m.kv_lora_rank + m.qk_rope_head_dim) +
           int64_t{m.kv_lora_rank} * a * (m.qk_nope_head_dim + m.v_head_dim) + a * m.v_head_dim * h;
  }
  return 2 * h * a * t.d() + 2 * h * t.kv_heads * t.d();
}

// FFN weight elements of one layer: 2 (GELU) or 3 (SwiGLU) h×f matrices; a mixture of experts
// has the router (h×E) and every routed and shared expert (`active`: the top-k routed ones).
int64_t ffn_matrix_params(const TransformerShape& t, bool moe, bool active) {
  const int64_t h = t.hidden;
  if (!moe) return (t.gated_mlp ? 3 : 2) * h * t.ffn_hidden;
  const MoeSpec& e = t.moe;
  const int64_t routed = active ? e.top_k : e.experts;
  return h * e.experts + routed * 3 * h * e.expert_ffn_hidden +
         int64_t{e.shared_experts} * 3 * h * e.shared_ffn_hidden;
}

// Biases and norms of one layer: GPT-style biases on q,k,v,o and both MLP matrices plus two
// LayerNorms (scale + shift) = 13h for the 4h MLP; Llama-style: two RMSNorm scales, no biases,
// plus q/k/v biases (Qwen2), per-head q and k norms (Qwen3), MLA's two latent norms.
int64_t layer_vector_params(const TransformerShape& t) {
  const int64_t h = t.hidden, f = t.ffn_hidden;
  const int64_t q_dim = t.heads * t.d(), kv_dim = t.kv_heads * t.d();
  if (!t.gated_mlp) return (q_dim + 2 * kv_dim + h) + (f + h) + 4 * h;
  int64_t v = 2 * h;
  if (t.qkv_bias) v += q_dim + 2 * kv_dim;
  if (t.qk_norm) v += 2 * t.d();
  if (t.mla.enabled()) v += t.mla.q_lora_rank + t.mla.kv_lora_rank;
  return v;
}

// Forward FLOPs of the attention core (QK^T and attention·V over all s keys, not halved for
// causality): 4·s²·h for GPT; 2·s²·a·(d_qk + d_v) in general.
double attention_core_fwd_flops(const TransformerShape& t) {
  const double s = t.seq_len, a = t.heads;
  if (t.classic()) return 4.0 * s * s * t.hidden;
  const double dqk = t.mla.enabled() ? t.mla.qk_head_dim() : t.d();
  const double dv = t.mla.enabled() ? t.mla.v_head_dim : t.d();
  return 2.0 * s * s * a * (dqk + dv);
}

LayerWork transformer_layer(const TransformerShape& t, int index, bool moe) {
  const double s = t.seq_len, a = t.heads;
  const int64_t db = activation_dtype_bytes(t.dtype);
  const int64_t si = t.seq_len, hi = t.hidden;
  const int64_t attention = attention_matrix_params(t);
  const int64_t active_matrix = attention + ffn_matrix_params(t, moe, /*active=*/true);
  const double matrix_flops = 2.0 * s * static_cast<double>(active_matrix);
  const double attention_fwd_flops = attention_core_fwd_flops(t);
  LayerWork w;
  w.name = "layer" + std::to_string(index);
  w.kind = LayerKind::kTransformer;
  w.moe = moe;
  w.fwd_flops = matrix_flops + attention_fwd_flops;
  w.bwd_input_flops = matrix_flops + 2.0 * attention_fwd_flops;
  w.bwd_weight_flops = matrix_flops;
  w.params = attention + ffn_matrix_params(t, moe, /*active=*/false) + layer_vector_params(t);
  if (moe) w.active_params = active_matrix + layer_vector_params(t);
  w.output_bytes = si * hi * db;
  // Megatron's activation memory in 16-bit units, scaled to the dtype (models of other shapes
  // take their kernels' inventory instead, in build_transformer_model).
  const int64_t none_16 = 34 * si * hi + 5 * static_cast<int64_t>(a) * si * si;
  // op (torchtitan's op SAC): the layer input, the attention output (and its fp32 log-sum-exp)
  // and, in 16 bits, the outputs of the odd-numbered matmuls (q, v, w1 or up, and a gated MLP's
  // w2); the build of the model's kernels (graph/kernels.cc) replaces it with the same inventory.
  const bool op_saves_mm = t.dtype != Dtype::kFp8;
  const int64_t q_dim = t.heads * t.d(), kv_dim = t.kv_heads * t.d();
  const int64_t f = t.ffn_hidden;
  int64_t op_per_token = 2 * hi * db + 4 * static_cast<int64_t>(a);
  if (op_saves_mm) op_per_token += (q_dim + kv_dim + f + (t.gated_mlp ? hi : 0)) * db;
  w.stash_bytes = {none_16 * db / 2, 34 * si * hi * db / 2, 2 * si * hi * db / 2,
                   si * op_per_token};
  // op re-runs the forward but the attention core and, in 16 bits, the saved matmuls (wq, wv and
  // the first MLP projection; a gated MLP's w2 too). Experts and MLA projections are re-run.
  double op_saved_flops = 0;
  if (op_saves_mm) {
    if (!t.mla.enabled()) op_saved_flops += 2.0 * s * hi * static_cast<double>(q_dim + kv_dim);
    if (!moe) op_saved_flops += 2.0 * s * hi * static_cast<double>(f) * (t.gated_mlp ? 2 : 1);
  }
  w.recompute_flops = {0, attention_fwd_flops, w.fwd_flops,
                       w.fwd_flops - attention_fwd_flops - op_saved_flops};
  w.tp_allreduce_bytes = 2 * si * hi * db;
  return w;
}

LayerWork embedding_layer(const TransformerShape& t) {
  const int64_t s = t.seq_len, h = t.hidden, v = t.vocab;
  LayerWork w;
  w.name = "embedding";
  w.kind = LayerKind::kEmbedding;
  w.params = v * h + (t.learned_positions() ? s * h : 0);
  w.output_bytes = s * h * activation_dtype_bytes(t.dtype);
  return w;
}

LayerWork logits_layer(const TransformerShape& t) {
  const double s = t.seq_len, h = t.hidden, v = t.vocab;
  const int64_t db = activation_dtype_bytes(t.dtype);
  LayerWork w;
  w.name = "logits";
  w.kind = LayerKind::kLogits;
  w.fwd_flops = 2.0 * s * h * v;
  w.bwd_input_flops = 2.0 * s * h * v;
  w.bwd_weight_flops = 2.0 * s * h * v;
  w.params = t.tied_embeddings ? 0 : static_cast<int64_t>(t.vocab) * t.hidden;
  w.output_bytes = 4;  // the fp32 loss
  // Its input and what the loss keeps of the logits (CrossEntropy, model.h) are kept for the
  // backward whatever the recompute policy; graph/kernels.cc lists the same bytes per token.
  const int64_t stash =
      static_cast<int64_t>(t.seq_len) * t.hidden * db +
      static_cast<int64_t>(t.seq_len) * t.vocab *
          cross_entropy_saved_bytes_per_logit(t.cross_entropy, t.dtype);
  w.stash_bytes = {stash, stash, stash, stash};
  return w;
}

// An MTP module (DeepSeek-V3 report, Sec. 2.2): RMSNorms of the hidden state and of the next
// token's embedding (shared embedding table), their concatenation projected 2h -> h, one
// transformer block (a mixture of experts when the model has one), a final norm and the shared
// output head with its own loss. A custom layer; costmodel/operator_cost.h prices it kernel by
// kernel as its block, the head and its own projection (mtp_pass).
LayerWork mtp_layer(const TransformerShape& t, const LayerWork& block, int index) {
  const double s = t.seq_len, h = t.hidden, v = t.vocab;
  const double proj_flops = 2.0 * s * 2.0 * h * h;
  const double head_flops = 2.0 * s * h * v;
  LayerWork w = block;
  w.name = "mtp" + std::to_string(index);
  w.kind = LayerKind::kCustom;
  w.moe = false;
  w.fwd_flops = block.fwd_flops + proj_flops + head_flops;
  w.bwd_input_flops = block.bwd_input_flops + proj_flops + head_flops;
  w.bwd_weight_flops = block.bwd_weight_flops + proj_flops + head_flops;
  const int64_t extra = 2 * static_cast<int64_t>(t.hidden) * t.hidden + 3 * int64_t{t.hidden};
  w.params = block.params + extra;
  w.active_params = block.active() + extra;
  // Its stash: the block's, the projection's 2h input and the shared head's with its loss
  // (costmodel/operator_cost.cc counts the same three parts).
  const int64_t head_stash =
      logits_layer(t).stash_bytes[0] +
      static_cast<int64_t>(t.seq_len) * mtp_projection_input_bytes_per_token(t.hidden, t.dtype);
  for (int64_t& b : w.stash_bytes) b += head_stash;
  // A custom layer: op re-runs its forward as full does.
  w.recompute_flops = {0, block.recompute_flops[1], w.fwd_flops, w.fwd_flops};
  return w;
}

// The fields beyond the classic shape (head size, biases, norms, MoE, MLA, MTP) that a model takes
// from its transformer shape, whether the shape is a preset's or was parsed beside explicit layers.
void copy_shape_extras(const TransformerShape& t, ModelSpec& m) {
  m.head_dim = t.head_dim;
  m.gelu_rope = !t.gated_mlp && !t.learned_positions();
  m.qkv_bias = t.qkv_bias;
  m.qk_norm = t.qk_norm;
  m.no_dropout = t.no_dropout;
  m.fp8_scaling = t.fp8_scaling;
  m.fp8_params = t.fp8_params;
  m.fp8_norm_fusion = t.fp8_norm_fusion;
  m.kernel_fusion = t.kernel_fusion;
  m.cross_entropy = t.cross_entropy;
  m.low_precision_attention_out = t.low_precision_attention_out;
  m.low_precision_moe_swiglu_input = t.low_precision_moe_swiglu_input;
  m.moe = t.moe;
  m.mla = t.mla;
  m.mtp_modules = t.mtp_modules;
}

void fill_shape(ModelSpec& m, const TransformerShape& t) {
  m.name = t.name;
  m.dtype = t.dtype;
  m.hidden = t.hidden;
  m.heads = t.heads;
  m.kv_heads = t.kv_heads;
  m.ffn_hidden = t.ffn_hidden;
  m.seq_len = t.seq_len;
  m.vocab = t.vocab;
  m.tied_embeddings = t.tied_embeddings;
  m.gated_mlp = t.gated_mlp;
  copy_shape_extras(t, m);
}

// The head-count rules of both model forms: hidden is a multiple of heads (unless head_dim or
// MLA give the heads their own width) and heads a multiple of kv_heads. A count of 0 (metadata
// not given in an explicit-layer model) skips its rules.
void check_head_counts(int64_t hidden, int64_t heads, int64_t kv_heads, bool own_head_width,
                       const std::string& heads_where, const std::string& kv_heads_where) {
  if (heads > 0 && hidden > 0 && !own_head_width && hidden % heads != 0)
    throw_input_error(heads_where, "hidden (" + std::to_string(hidden) +
                                       ") must be a multiple of heads (" + std::to_string(heads) +
                                       ")");
  if (heads > 0 && kv_heads > 0 && heads % kv_heads != 0)
    throw_input_error(kv_heads_where, "heads (" + std::to_string(heads) +
                                          ") must be a multiple of kv_heads (" +
                                          std::to_string(kv_heads) + ")");
}

ModelSpec build_transformer_model(TransformerShape t, const std::string& where) {
  if (t.mla.enabled()) t.kv_heads = t.heads;  // after the up-projection every head has its k, v
  if (t.kv_heads == 0) t.kv_heads = t.heads;
  if (t.ffn_hidden == 0) t.ffn_hidden = 4 * t.hidden;
  if (t.head_dim > 0 && t.hidden % t.heads == 0 && t.head_dim == t.hidden / t.heads)
    t.head_dim = 0;  // the default, said explicitly
  check_head_counts(t.hidden, t.heads, t.kv_heads, t.head_dim > 0 || t.mla.enabled(), where, where);
  ModelSpec m;
  fill_shape(m, t);
  m.num_transformer_layers = t.layers;
  m.layers.reserve(t.layers + t.mtp_modules + 2);
  m.layers.push_back(embedding_layer(t));
  for (int i = 0; i < t.layers; ++i)
    m.layers.push_back(transformer_layer(t, i, t.moe.enabled() && i >= t.moe.first_dense_layers));
  if (!t.classic()) {
    // Activations stashed for the backward: the kernels' inventory (graph/kernels.h), with the
    // unfused attention's scores for kNone.
    const double s = t.seq_len;
    for (int i = 1; i <= t.layers; ++i) {
      const LayerKernels k = layer_kernels(m, i);
      const double per_token = k.stash_sequence_bytes_per_token + k.stash_split_bytes_per_token;
      const double scores =
          static_cast<double>(k.attention.heads) * s * s * k.stash_scores_bytes_per_head_key;
      m.layers[i].stash_bytes = {std::llround(s * per_token + scores), std::llround(s * per_token),
                                 std::llround(s * k.stash_full_recompute_bytes_per_token), 0};
    }
  }
  for (int i = 1; i <= t.layers; ++i) {
    const LayerKernels k = layer_kernels(m, i);
    m.layers[i].stash_bytes[3] = std::llround(t.seq_len * (k.stash_op_sequence_bytes_per_token +
                                                           k.stash_op_split_bytes_per_token +
                                                           k.stash_op_unsplit_bytes_per_token));
  }
  // The MTP block is shaped like the last transformer layer (a mixture of experts in MoE models).
  for (int i = 0; i < t.mtp_modules; ++i) m.layers.push_back(mtp_layer(t, m.layers[t.layers], i));
  m.layers.push_back(logits_layer(t));
  return m;
}

// ---- Presets. -------------------------------------------------------------------------------

TransformerShape gpt(std::string name, int layers, int hidden, int heads, int vocab, int seq) {
  TransformerShape t;
  t.name = std::move(name);
  t.layers = layers;
  t.hidden = hidden;
  t.heads = heads;
  t.seq_len = seq;
  t.vocab = vocab;
  return t;
}

TransformerShape llama(std::string name, int layers, int hidden, int heads, int kv_heads, int ffn,
                       int vocab, int seq) {
  TransformerShape t = gpt(std::move(name), layers, hidden, heads, vocab, seq);
  t.kv_heads = kv_heads;
  t.ffn_hidden = ffn;
  t.gated_mlp = true;
  t.tied_embeddings = false;
  return t;
}

TransformerShape qwen3(std::string name, int layers, int hidden, int heads, int kv_heads, int ffn,
                       int seq) {
  TransformerShape t = llama(std::move(name), layers, hidden, heads, kv_heads, ffn, 151936, seq);
  t.head_dim = 128;
  t.qk_norm = true;
  return t;
}

TransformerShape with_moe(TransformerShape t, int experts, int top_k, int expert_ffn,
                          int shared = 0, int first_dense = 0) {
  t.moe = MoeSpec{};
  t.moe.experts = experts;
  t.moe.top_k = top_k;
  t.moe.expert_ffn_hidden = expert_ffn;
  t.moe.shared_experts = shared;
  t.moe.shared_ffn_hidden = shared > 0 ? expert_ffn : 0;
  t.moe.first_dense_layers = first_dense;
  return t;
}

// DeepSeek-V3 / Kimi K2: MLA with q rank 1536, kv rank 512, rope 64, nope 128, v 128.
TransformerShape with_mla(TransformerShape t) {
  t.mla = {1536, 512, 64, 128, 128};
  return t;
}

const std::vector<TransformerShape>& presets() {
  static const std::vector<TransformerShape> kPresets = [] {
    std::vector<TransformerShape> p;
    // GPT-3 (Brown et al. 2020, Table 2.1), GPT-2 BPE vocabulary, context 2048. The paper's
    // 1.3B row lists 24 heads of 128 for d_model 2048; we use 16 heads of 128.
    p.push_back(gpt("gpt3-1.3b", 24, 2048, 16, 50257, 2048));
    p.push_back(gpt("gpt3-2.7b", 32, 2560, 32, 50257, 2048));
    p.push_back(gpt("gpt3-6.7b", 32, 4096, 32, 50257, 2048));
    p.push_back(gpt("gpt3-13b", 40, 5120, 40, 50257, 2048));  // paper: d_model 5140 (typo)
    p.push_back(gpt("gpt3-175b", 96, 12288, 96, 50257, 2048));
    // Llama 2 (Touvron et al. 2023) and Llama 3 (Dubey et al. 2024).
    p.push_back(llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096));
    p.push_back(llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096));
    p.push_back(llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192));
    p.push_back(llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192));
    // VALIDATION.md rounds the vocabulary to 128000; the released tokenizer has 128256.
    p.push_back(llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192));
    p.push_back(gpt("bert-large", 24, 1024, 16, 30522, 512));
    // Megatron-LM Table 1 (Narayanan et al. 2021): V = 51200, s = 2048.
    p.push_back(gpt("megatron-1.7b", 24, 2304, 24, 51200, 2048));
    p.push_back(gpt("megatron-3.6b", 30, 3072, 32, 51200, 2048));
    p.push_back(gpt("megatron-7.5b", 36, 4096, 32, 51200, 2048));
    p.push_back(gpt("megatron-18.4b", 40, 6144, 48, 51200, 2048));
    p.push_back(gpt("megatron-39.1b", 48, 8192, 64, 51200, 2048));
    p.push_back(gpt("megatron-76.1b", 60, 10240, 80, 51200, 2048));
    p.push_back(gpt("megatron-145.6b", 80, 12288, 96, 51200, 2048));
    p.push_back(gpt("megatron-310.1b", 96, 16384, 128, 51200, 2048));
    p.push_back(gpt("megatron-529.6b", 105, 20480, 128, 51200, 2048));
    p.push_back(gpt("megatron-1t", 128, 25600, 160, 51200, 2048));
    // Qwen3 (Qwen3 technical report, 2025; Hugging Face Qwen/Qwen3-*/config.json): head_dim 128,
    // q/k RMSNorm, vocabulary 151936, untied; pretraining sequence length 4096.
    p.push_back(qwen3("qwen3-8b", 36, 4096, 32, 8, 12288, 4096));
    p.push_back(qwen3("qwen3-32b", 64, 5120, 64, 8, 25600, 4096));
    // Mixture of experts (docs/graph.md lists the published counts and the configs used).
    // Mixtral (Jiang et al. 2024; mistralai/Mixtral-8x7B-v0.1 and -8x22B-v0.1 config.json).
    p.push_back(with_moe(llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096), 8, 2, 14336));
    p.push_back(with_moe(llama("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32000, 4096), 8, 2, 16384));
    // Qwen3 MoE (Qwen/Qwen3-30B-A3B and Qwen/Qwen3-235B-A22B config.json): no shared expert.
    p.push_back(with_moe(qwen3("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 4096), 128, 8, 768));
    p.push_back(with_moe(qwen3("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 4096), 128, 8, 1536));
    // DeepSeek-V3 (DeepSeek-AI 2024, arXiv 2412.19437; deepseek-ai/DeepSeek-V3 config.json):
    // 3 dense layers, 256 routed experts (top 8) and 1 shared, MLA, one MTP module, 4K sequences.
    {
      TransformerShape t = with_mla(with_moe(
          llama("deepseek-v3", 61, 7168, 128, 128, 18432, 129280, 4096), 256, 8, 2048, 1, 3));
      t.mtp_modules = 1;
      t.moe.router = MoeRouter::kSigmoid;
      // FP8 dispatch, BF16 combine (the report's §3.3.2, "Low-Precision Communication").
      t.moe.dispatch_dtype = Dtype::kFp8;
      t.moe.combine_dtype = Dtype::kBf16;
      p.push_back(t);
    }
    // Kimi K2 (Moonshot AI 2025, arXiv 2507.20534; moonshotai/Kimi-K2-Instruct config.json):
    // DeepSeek-V3's architecture with 64 heads, 384 experts, 1 dense layer, no MTP.
    {
      TransformerShape t = with_mla(
          with_moe(llama("kimi-k2", 61, 7168, 64, 64, 18432, 163840, 4096), 384, 8, 2048, 1, 1));
      t.moe.router = MoeRouter::kSigmoid;
      p.push_back(t);
    }
    return p;
  }();
  return kPresets;
}

// ---- JSON. ----------------------------------------------------------------------------------

// Keys of the shape that MoE, MLA, MTP and non-Llama attention add (both forms).
const std::set<std::string> kMlaKeys = {"q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
                                        "qk_nope_head_dim", "v_head_dim"};
const std::set<std::string> kMoeKeys = {"experts",
                                        "top_k",
                                        "expert_ffn_hidden",
                                        "shared_experts",
                                        "shared_ffn_hidden",
                                        "first_dense_layers",
                                        "router",
                                        "a2a_dispatch_dtype",
                                        "a2a_combine_dtype",
                                        "expert_gemm",
                                        "expert_gemm_streams"};
const std::set<std::string> kExtraKeys = {"head_dim",
                                          "positions",
                                          "qkv_bias",
                                          "qk_norm",
                                          "attention",
                                          "mtp_modules",
                                          "dropout",
                                          "fp8_scaling",
                                          "fp8_params",
                                          "fp8_norm_fusion",
                                          "kernel_fusion",
                                          "cross_entropy",
                                          "low_precision_activations"};

std::set<std::string> with_extras(std::set<std::string> keys) {
  for (const auto* extra : {&kMlaKeys, &kMoeKeys, &kExtraKeys})
    keys.insert(extra->begin(), extra->end());
  return keys;
}

const std::set<std::string> kTransformerKeys =
    with_extras({"name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len", "vocab",
                 "dtype", "tied_embeddings", "mlp"});
const std::set<std::string> kExplicitKeys =
    with_extras({"name", "dtype", "layers_list", "hidden", "heads", "kv_heads", "ffn_hidden",
                 "seq_len", "vocab", "tied_embeddings", "mlp"});
const std::set<std::string> kLayerKeys = {
    "name",   "kind",         "fwd_flops",   "bwd_input_flops", "bwd_weight_flops",
    "params", "output_bytes", "stash_bytes", "recompute_flops", "tp_allreduce_bytes",
    "moe",    "active_params"};

bool parse_mlp_gated(const JsonObject& obj) {
  const std::string mlp = lower(obj.string_or("mlp", "gelu"));
  if (mlp == "gelu") return false;
  if (mlp == "swiglu") return true;
  throw_input_error(obj.field("mlp"), "expected \"gelu\" or \"swiglu\", got \"" + mlp + "\"");
}

// `value` of field `key`, or InputError when it is above `max` (graph/limits.h).
template <class T>
T at_most(const JsonObject& obj, const std::string& key, T value, T max) {
  if (value > max)
    throw_input_error(obj.field(key), "too large: " + std::to_string(value) + " (the limit is " +
                                          std::to_string(max) + ")");
  return value;
}

}  // namespace

void read_expert_gemm_keys(const JsonObject& obj, MoeSpec& moe) {
  if (obj.has("expert_gemm"))
    moe.expert_gemm = parse_expert_gemm(obj.string("expert_gemm"), obj.field("expert_gemm"));
  if (obj.has("expert_gemm_streams")) {
    if (moe.expert_gemm != ExpertGemm::kPerExpert)
      throw_input_error(obj.field("expert_gemm_streams"),
                        "only with \"expert_gemm\": \"per_expert\"");
    moe.expert_gemm_streams = at_most(obj, "expert_gemm_streams",
                                      obj.positive_int("expert_gemm_streams"),
                                      kMaxExpertGemmStreams);
  }
}

namespace {

// A non-negative integer field (0 when absent) of at most `max`.
int count_or_zero(const JsonObject& obj, const std::string& key, int max) {
  if (!obj.has(key)) return 0;
  return static_cast<int>(at_most<int64_t>(obj, key, obj.non_negative_integer(key), max));
}

// The fields MoE, MLA, MTP, explicit head sizes, biases and norms add to a shape (model.h), with
// their consistency checks. `layers` is the transformer layer count (0 = unknown).
void parse_shape_extras(const JsonObject& obj, TransformerShape& t, int layers) {
  const std::string attention = lower(obj.string_or("attention", "mha"));
  if (attention != "mha" && attention != "mla")
    throw_input_error(obj.field("attention"),
                      "expected \"mha\" or \"mla\", got \"" + attention + "\"");
  if (attention == "mha") {
    for (const std::string& key : kMlaKeys)
      if (obj.has(key))
        throw_input_error(obj.field(key),
                          "an MLA field, but the model's attention is not MLA (add \"attention\": "
                          "\"mla\" or remove the field)");
  } else {
    for (const char* key : {"kv_heads", "head_dim"})
      if (obj.has(key))
        throw_input_error(obj.field(key),
                          "not used with MLA attention (its head sizes are "
                          "qk_nope_head_dim, qk_rope_head_dim and v_head_dim)");
    t.mla.q_lora_rank = count_or_zero(obj, "q_lora_rank", kMaxHidden);
    t.mla.kv_lora_rank = at_most(obj, "kv_lora_rank", obj.positive_int("kv_lora_rank"), kMaxHidden);
    t.mla.qk_rope_head_dim =
        at_most(obj, "qk_rope_head_dim", obj.positive_int("qk_rope_head_dim"), kMaxHidden);
    t.mla.qk_nope_head_dim = count_or_zero(obj, "qk_nope_head_dim", kMaxHidden);
    t.mla.v_head_dim = at_most(obj, "v_head_dim", obj.positive_int("v_head_dim"), kMaxHidden);
    if (!obj.has("qk_nope_head_dim"))
      throw_input_error(obj.field("qk_nope_head_dim"), "missing (required with MLA attention)");
  }
  if (obj.has("head_dim"))
    t.head_dim = at_most(obj, "head_dim", obj.positive_int("head_dim"), kMaxHidden);
  const std::string positions = lower(obj.string_or("positions", t.gated_mlp ? "rope" : "learned"));
  if (positions != "learned" && positions != "rope")
    throw_input_error(obj.field("positions"),
                      "expected \"learned\" or \"rope\", got \"" + positions + "\"");
  if (positions == "learned" && t.gated_mlp)
    throw_input_error(obj.field("positions"),
                      "SwiGLU models use RoPE (learned positions need "
                      "\"mlp\": \"gelu\")");
  t.positions = positions == "learned" ? Positions::kLearned : Positions::kRope;
  t.qkv_bias = obj.boolean_or("qkv_bias", false);
  t.qk_norm = obj.boolean_or("qk_norm", false);
  if (obj.has("dropout")) {
    const bool dropout = obj.boolean_or("dropout", true);
    if (dropout && t.gated_mlp)
      throw_input_error(obj.field("dropout"),
                        "SwiGLU models are modelled without dropout (it "
                        "needs \"mlp\": \"gelu\")");
    t.no_dropout = !dropout && !t.gated_mlp;
  }
  t.mtp_modules = count_or_zero(obj, "mtp_modules", kMaxMtpModules);
  // The model's layers are the transformer layers, the embedding, the logits and the MTP modules:
  // all of them within kMaxLayers, or a plan written of it could not be read back.
  if (layers > 0 && int64_t{layers} + 2 + t.mtp_modules > kMaxLayers)
    throw_input_error(obj.field(t.mtp_modules > 0 ? "mtp_modules" : "layers"),
                      "too many layers: " + std::to_string(layers) + " transformer layers" +
                          (t.mtp_modules > 0
                               ? " and " + std::to_string(t.mtp_modules) + " MTP modules"
                               : std::string()) +
                          ", with the embedding and the logits " +
                          std::to_string(int64_t{layers} + 2 + t.mtp_modules) +
                          " (the limit is " + std::to_string(kMaxLayers) + ")");
  if (obj.has("fp8_scaling")) {
    const std::string scaling = lower(obj.string("fp8_scaling"));
    if (scaling != "current" && scaling != "delayed" && scaling != "mxfp8")
      throw_input_error(obj.field("fp8_scaling"),
                        "expected \"current\", \"delayed\" or "
                        "\"mxfp8\", got \"" +
                            scaling + "\"");
    if (t.dtype != Dtype::kFp8)
      throw_input_error(obj.field("fp8_scaling"),
                        "only for FP8 training (it needs \"dtype\": \"fp8\")");
    t.fp8_scaling = scaling == "delayed" ? Fp8Scaling::kDelayed
                    : scaling == "mxfp8" ? Fp8Scaling::kMxfp8
                                         : Fp8Scaling::kCurrent;
  }
  if (obj.has("cross_entropy"))
    t.cross_entropy =
        parse_cross_entropy(lower(obj.string("cross_entropy")), obj.field("cross_entropy"));
  if (obj.has("fp8_params")) {
    if (t.dtype != Dtype::kFp8)
      throw_input_error(obj.field("fp8_params"),
                        "only for FP8 training (it needs \"dtype\": \"fp8\")");
    t.fp8_params = obj.boolean_or("fp8_params", true);
  }
  if (obj.has("fp8_norm_fusion")) {
    if (t.dtype != Dtype::kFp8)
      throw_input_error(obj.field("fp8_norm_fusion"),
                        "only for FP8 training (it needs \"dtype\": \"fp8\")");
    t.fp8_norm_fusion = obj.boolean_or("fp8_norm_fusion", true);
  }
  if (obj.has("kernel_fusion")) {
    const std::string where = obj.field("kernel_fusion");
    t.kernel_fusion = parse_kernel_fusion(obj.string_or("kernel_fusion", ""), where);
    check_kernel_fusion_precision(t.kernel_fusion, t.dtype == Dtype::kFp8, where);
  }
  if (obj.has("low_precision_activations")) {
    // Only FP8 training caches them; the dtype is checked when the model is simulated
    // (costmodel/memory.cc), as a corpus row may make a 16-bit model FP8 ("fp8": true).
    const std::string where = obj.field("low_precision_activations");
    for (const nlohmann::json& item : obj.array("low_precision_activations")) {
      if (!item.is_string())
        throw_input_error(where, "expected a list of \"attention_out\" and \"moe_swiglu_input\"");
      const std::string name = item.get<std::string>();
      bool* flag = nullptr;
      if (name == "attention_out")
        flag = &t.low_precision_attention_out;
      else if (name == "moe_swiglu_input")
        flag = &t.low_precision_moe_swiglu_input;
      else
        throw_input_error(
            where, "expected \"attention_out\" or \"moe_swiglu_input\", got \"" + name + "\"");
      if (*flag) throw_input_error(where, "\"" + name + "\" given twice");
      *flag = true;
    }
    if (t.low_precision_moe_swiglu_input && !obj.has("experts"))
      throw_input_error(where, "\"moe_swiglu_input\" needs routed experts ('experts')");
  }

  if (!obj.has("experts")) {
    for (const std::string& key : kMoeKeys)
      if (obj.has(key))
        throw_input_error(obj.field(key), "a mixture-of-experts field, but 'experts' is not given");
  } else {
    MoeSpec& e = t.moe;
    e.experts = at_most(obj, "experts", obj.positive_int("experts"), kMaxExperts);
    e.top_k = obj.positive_int("top_k");
    if (e.top_k > e.experts)
      throw_input_error(obj.field("top_k"), "top_k (" + std::to_string(e.top_k) +
                                                ") is larger than experts (" +
                                                std::to_string(e.experts) + ")");
    e.expert_ffn_hidden =
        at_most(obj, "expert_ffn_hidden", obj.positive_int("expert_ffn_hidden"), kMaxFfnHidden);
    e.shared_experts = count_or_zero(obj, "shared_experts", kMaxExperts);
    if (obj.has("shared_ffn_hidden") && e.shared_experts == 0)
      throw_input_error(obj.field("shared_ffn_hidden"), "given, but there are no shared_experts");
    e.shared_ffn_hidden =
        e.shared_experts == 0
            ? 0
            : at_most(obj, "shared_ffn_hidden",
                      obj.positive_int_or("shared_ffn_hidden", e.expert_ffn_hidden), kMaxFfnHidden);
    e.first_dense_layers = count_or_zero(obj, "first_dense_layers", kMaxLayers);
    if (obj.has("router")) {
      const std::string router = obj.string("router");
      if (router != "softmax" && router != "sigmoid")
        throw_input_error(obj.field("router"), "expected softmax or sigmoid, got '" + router + "'");
      e.router = router == "sigmoid" ? MoeRouter::kSigmoid : MoeRouter::kSoftmax;
    }
    if (obj.has("a2a_dispatch_dtype"))
      e.dispatch_dtype =
          parse_dtype(obj.string("a2a_dispatch_dtype"), obj.field("a2a_dispatch_dtype"));
    if (obj.has("a2a_combine_dtype"))
      e.combine_dtype =
          parse_dtype(obj.string("a2a_combine_dtype"), obj.field("a2a_combine_dtype"));
    read_expert_gemm_keys(obj, e);
    if (layers > 0 && e.first_dense_layers > layers)
      throw_input_error(obj.field("first_dense_layers"), std::to_string(e.first_dense_layers) +
                                                             " dense layers, but the model has " +
                                                             std::to_string(layers) + " layers");
    // Sums over every layer stay inside int64 (graph/limits.h).
    const double expert_params = static_cast<double>(e.experts + e.shared_experts) * 3.0 *
                                 t.hidden * std::max(e.expert_ffn_hidden, e.shared_ffn_hidden);
    if (expert_params > static_cast<double>(kMaxLayerQuantity))
      throw_input_error(obj.field("experts"),
                        "too large: the experts of one layer would hold more than 2^45 parameters");
  }
  for (const auto& [key, on] : {std::pair<std::string, bool>{"experts", t.moe.enabled()},
                                {"attention", t.mla.enabled()},
                                {"qkv_bias", t.qkv_bias},
                                {"qk_norm", t.qk_norm}})
    if (on && !t.gated_mlp)
      throw_input_error(obj.field(key),
                        "needs \"mlp\": \"swiglu\" (GELU models have neither "
                        "experts, MLA nor Qwen-style q/k/v biases and norms)");
}

// Where a model's name goes (the reason a control character in it is refused).
constexpr const char* kModelNameUse =
    "it is printed in reports and written into the comments of the hand-off files";

ModelSpec transformer_from_json(const JsonObject& obj) {
  obj.reject_unknown(kTransformerKeys);
  TransformerShape t;
  t.name = obj.single_line_string("name", kModelNameUse);
  t.layers = at_most(obj, "layers", obj.positive_int("layers"), kMaxLayers);
  t.hidden = at_most(obj, "hidden", obj.positive_int("hidden"), kMaxHidden);
  t.heads = at_most(obj, "heads", obj.positive_int("heads"), kMaxHeads);
  t.kv_heads = at_most(obj, "kv_heads", obj.positive_int_or("kv_heads", t.heads), kMaxHeads);
  t.ffn_hidden =
      at_most(obj, "ffn_hidden", obj.positive_int_or("ffn_hidden", 4 * t.hidden), kMaxFfnHidden);
  t.seq_len = at_most(obj, "seq_len", obj.positive_int("seq_len"), kMaxSeqLen);
  t.vocab = at_most(obj, "vocab", obj.positive_int("vocab"), kMaxVocab);
  t.dtype = parse_dtype(obj.string_or("dtype", "bf16"), obj.field("dtype"));
  t.tied_embeddings = obj.boolean_or("tied_embeddings", true);
  t.gated_mlp = parse_mlp_gated(obj);
  parse_shape_extras(obj, t, t.layers);
  return build_transformer_model(t, obj.where());
}

// A shape field of an explicit model: 0 (unknown) or at most `max`, the transformer's limit
// (graph/limits.h), as the operator cost model multiplies them.
int metadata_int(const JsonObject& obj, const std::string& key, int max) {
  if (!obj.has(key)) return 0;
  return static_cast<int>(at_most<int64_t>(obj, key, obj.non_negative_integer(key), max));
}

// FLOPs of one pass of one explicit layer: finite, and at most kMaxLayerFlops so that sums over
// every layer and microbatch stay finite.
double layer_flops(const JsonObject& obj, const std::string& key) {
  const double f = obj.non_negative_number(key);
  if (f > kMaxLayerFlops) {
    throw_input_error(obj.field(key), "too large: " + obj.at(key).dump() +
                                          " (the limit is 1e21 FLOPs per layer pass)");
  }
  return f;
}

LayerWork layer_from_json(const JsonObject& obj) {
  obj.reject_unknown(kLayerKeys);
  LayerWork w;
  w.name = obj.string("name");
  w.kind = obj.has("kind") ? parse_layer_kind(obj.string("kind"), obj.field("kind"))
                           : LayerKind::kCustom;
  w.fwd_flops = layer_flops(obj, "fwd_flops");
  w.bwd_input_flops = layer_flops(obj, "bwd_input_flops");
  w.bwd_weight_flops = layer_flops(obj, "bwd_weight_flops");
  auto quantity = [](const JsonObject& o, const std::string& key) {
    return at_most(o, key, o.non_negative_integer(key), kMaxLayerQuantity);
  };
  w.params = quantity(obj, "params");
  w.output_bytes = quantity(obj, "output_bytes");
  const nlohmann::json& stash = obj.at("stash_bytes");
  if (stash.is_object()) {
    const JsonObject s = obj.object("stash_bytes");
    s.reject_unknown({"none", "selective", "full", "op"});
    // "op" (optional) defaults to what full keeps.
    const int64_t full = quantity(s, "full");
    w.stash_bytes = {quantity(s, "none"), quantity(s, "selective"), full,
                     s.has("op") ? quantity(s, "op") : full};
  } else {
    const int64_t b = quantity(obj, "stash_bytes");
    w.stash_bytes = {b, b, b, b};
  }
  // Default: selective recompute redoes nothing, full (and op) recompute redoes the forward.
  w.recompute_flops = {0, 0, w.fwd_flops, w.fwd_flops};
  if (obj.has("recompute_flops")) {
    if (obj.at("recompute_flops").is_object()) {
      const JsonObject r = obj.object("recompute_flops");
      r.reject_unknown({"selective", "full", "op"});
      const double full = layer_flops(r, "full");
      w.recompute_flops = {0, layer_flops(r, "selective"), full,
                           r.has("op") ? layer_flops(r, "op") : full};
    } else {
      const double full = layer_flops(obj, "recompute_flops");
      w.recompute_flops = {0, 0, full, full};
    }
  }
  if (obj.has("tp_allreduce_bytes")) w.tp_allreduce_bytes = quantity(obj, "tp_allreduce_bytes");
  w.moe = obj.boolean_or("moe", false);
  if (w.moe && w.kind != LayerKind::kTransformer)
    throw_input_error(obj.field("moe"), "only a layer of kind transformer has experts");
  if (obj.has("active_params")) {
    w.active_params = quantity(obj, "active_params");
    if (w.active_params > w.params)
      throw_input_error(obj.field("active_params"),
                        "larger than params (" + std::to_string(w.params) + ")");
  }
  return w;
}

// Relative difference allowed between an explicit transformer layer's forward FLOPs and those of
// the shape its model's header gives: wide enough for a source's own FLOP count (causal attention
// halved, biases counted), far below what a wrong hidden or ffn_hidden makes (x1.5 and more).
constexpr double kLayerFlopsTolerance = 0.10;

// An explicit-layer model whose header gives a whole shape (hidden, heads, ffn_hidden, seq_len,
// vocab) is timed by the operator model from that shape (graph/kernels.cc), while its memory,
// bound and curve fallbacks read each layer's FLOPs: a header that contradicts the layers (hidden
// 2048 edited to 4096 made the step 0.27 -> 0.62 s with the layers unchanged) would mix two models.
// Each transformer layer's fwd_flops must be within kLayerFlopsTolerance of the shape's layer at
// the same index (a layer list of another length: the shape's first layer of the same kind, dense
// or MoE).
void check_layers_against_shape(const ModelSpec& m, const JsonObject& obj) {
  if (!(m.hidden > 0 && m.heads > 0 && m.ffn_hidden > 0 && m.seq_len > 0 && m.vocab > 0) ||
      m.num_transformer_layers == 0)
    return;
  const nlohmann::json shape_json = model_shape_to_json(m, 0);
  const ModelSpec shaped = transformer_from_json(JsonObject(shape_json, obj.where()));
  const auto shaped_layer = [&](size_t i) -> const LayerWork* {
    if (shaped.layers.size() == m.layers.size()) return &shaped.layers[i];
    for (const LayerWork& w : shaped.layers)
      if (w.kind == LayerKind::kTransformer && w.moe == m.layers[i].moe) return &w;
    return nullptr;
  };
  // The embedding's table and the logits' FLOPs follow vocab and hidden, and each transformer
  // layer's output the dtype (a header vocab 50257 edited to 500000 made the step 154 -> 280 ms, a
  // dtype bf16 edited to fp32 154 ms -> 2 s, the layers unchanged).
  const auto first_of = [](const ModelSpec& model, LayerKind kind) -> const LayerWork* {
    for (const LayerWork& w : model.layers)
      if (w.kind == kind) return &w;
    return nullptr;
  };
  const auto check_quantity = [&](size_t i, const char* field, double given, double shape_gives,
                                  const std::string& from) {
    if (std::abs(given - shape_gives) <= kLayerFlopsTolerance * shape_gives) return;
    char text[360];
    std::snprintf(text, sizeof text,
                  "%.6g, but the model's header (%s) gives %.6g: the operator model times layers "
                  "from the header; fix the header or the layer (they may differ by 10 %%)",
                  given, from.c_str(), shape_gives);
    throw_input_error(obj.where() + ": layers_list[" + std::to_string(i) + "]: field '" + field +
                          "'",
                      text);
  };
  const std::string vocab_from =
      "vocab " + std::to_string(m.vocab) + ", hidden " + std::to_string(m.hidden);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerWork& w = m.layers[i];
    if (w.kind != LayerKind::kTransformer) continue;
    const LayerWork* s = shaped_layer(i);
    if (s == nullptr || s->kind != LayerKind::kTransformer) continue;
    if (std::abs(w.fwd_flops - s->fwd_flops) <= kLayerFlopsTolerance * s->fwd_flops) continue;
    char text[320];
    std::snprintf(text, sizeof text,
                  "%.4g forward FLOPs, but the model's shape (hidden %d, heads %d, ffn_hidden %d, "
                  "seq_len %d) gives %.4g: the operator model times layers from the shape; fix "
                  "the shape or the FLOPs (they may differ by 10 %%)",
                  w.fwd_flops, m.hidden, m.heads, m.ffn_hidden, m.seq_len, s->fwd_flops);
    throw_input_error(obj.where() + ": layers_list[" + std::to_string(i) + "]: field 'fwd_flops'",
                      text);
  }
  // Then what the transformer FLOPs do not show: the vocabulary and the dtype.
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerWork& w = m.layers[i];
    if (w.kind == LayerKind::kEmbedding) {
      if (const LayerWork* e = first_of(shaped, LayerKind::kEmbedding)) {
        if (w.params > 0)
          check_quantity(i, "params", static_cast<double>(w.params),
                         static_cast<double>(e->params), vocab_from);
        check_quantity(i, "fwd_flops", w.fwd_flops, e->fwd_flops, vocab_from);
      }
    } else if (w.kind == LayerKind::kLogits) {
      if (const LayerWork* l = first_of(shaped, LayerKind::kLogits))
        check_quantity(i, "fwd_flops", w.fwd_flops, l->fwd_flops,
                       vocab_from + ", seq_len " + std::to_string(m.seq_len));
    } else if (w.kind == LayerKind::kTransformer) {
      if (const LayerWork* s = shaped_layer(i); s && s->kind == LayerKind::kTransformer)
        check_quantity(i, "output_bytes", static_cast<double>(w.output_bytes),
                       static_cast<double>(s->output_bytes),
                       "dtype " + std::string(to_string(m.dtype)) + ", hidden " +
                           std::to_string(m.hidden) + ", seq_len " + std::to_string(m.seq_len));
    }
  }
}

ModelSpec explicit_from_json(const JsonObject& obj) {
  obj.reject_unknown(kExplicitKeys);
  ModelSpec m;
  m.name = obj.single_line_string("name", kModelNameUse);
  m.dtype = parse_dtype(obj.string_or("dtype", "bf16"), obj.field("dtype"));
  m.hidden = metadata_int(obj, "hidden", kMaxHidden);
  m.heads = metadata_int(obj, "heads", kMaxHeads);
  m.kv_heads = metadata_int(obj, "kv_heads", kMaxHeads);
  m.ffn_hidden = metadata_int(obj, "ffn_hidden", kMaxFfnHidden);
  m.seq_len = metadata_int(obj, "seq_len", kMaxSeqLen);
  m.vocab = metadata_int(obj, "vocab", kMaxVocab);
  m.tied_embeddings = obj.boolean_or("tied_embeddings", true);
  m.gated_mlp = parse_mlp_gated(obj);
  TransformerShape extras;
  extras.hidden = m.hidden;
  extras.gated_mlp = m.gated_mlp;
  extras.dtype = m.dtype;
  parse_shape_extras(obj, extras, 0);
  copy_shape_extras(extras, m);
  if (m.mla.enabled()) m.kv_heads = m.heads;
  // The shape rules of the compact form (transformer_from_shape), where the metadata is given:
  // "heads": 3 beside "hidden": 4096 was accepted and handed to Megatron-LM by export.
  check_head_counts(m.hidden, m.heads, m.kv_heads, extras.head_dim > 0 || m.mla.enabled(),
                    obj.field("heads"), obj.field("kv_heads"));
  const nlohmann::json& list = obj.array("layers_list");
  if (list.empty()) throw_input_error(obj.field("layers_list"), "expected at least one layer");
  if (list.size() > static_cast<size_t>(kMaxLayers))
    throw_input_error(obj.field("layers_list"), "too many layers: " + std::to_string(list.size()) +
                                                    " (the limit is " + std::to_string(kMaxLayers) +
                                                    ")");
  for (size_t i = 0; i < list.size(); ++i) {
    m.layers.push_back(layer_from_json(
        JsonObject(list[i], obj.where() + ": layers_list[" + std::to_string(i) + "]")));
    if (m.layers.back().kind == LayerKind::kTransformer) ++m.num_transformer_layers;
  }
  if (m.mtp_modules > 0) {
    // With mtp_modules, the custom layers named "mtp..." are the modules (ModelSpec::mtp_block).
    int named = 0;
    for (const LayerWork& l : m.layers)
      named += l.kind == LayerKind::kCustom && l.name.rfind("mtp", 0) == 0 ? 1 : 0;
    if (named != m.mtp_modules)
      throw_input_error(obj.field("mtp_modules"),
                        std::to_string(m.mtp_modules) + " MTP modules, but layers_list has " +
                            std::to_string(named) + " custom layers named \"mtp...\"");
  }
  check_layers_against_shape(m, obj);
  return m;
}

}  // namespace

std::string_view to_string(Dtype d) {
  switch (d) {
    case Dtype::kBf16:
      return "bf16";
    case Dtype::kFp16:
      return "fp16";
    case Dtype::kFp32:
      return "fp32";
    case Dtype::kFp8:
      return "fp8";
  }
  return "?";
}

void set_alltoall_dtypes(ModelSpec& model, std::string_view text, const std::string& where) {
  if (!model.moe.enabled())
    throw_input_error(where, "model '" + model.name + "' has no routed experts (no all-to-all)");
  const size_t comma = text.find(',');
  // "fp8,bf16,fp8" said: unknown dtype "bf16,fp8".
  if (comma != std::string_view::npos && text.find(',', comma + 1) != std::string_view::npos)
    throw_input_error(where, "expected D or DISPATCH,COMBINE (at most two types), got '" +
                                 std::string(text) + "'");
  const std::string_view dispatch = text.substr(0, comma);
  const std::string_view combine = comma == std::string_view::npos ? text : text.substr(comma + 1);
  model.moe.dispatch_dtype = parse_dtype(dispatch, where);
  model.moe.combine_dtype = parse_dtype(combine, where);
}

double alltoall_bytes_per_element(Dtype d) {
  return d == Dtype::kFp8 ? 1.0 + 4.0 / 128 : dtype_bytes(d);
}

int activation_dtype_bytes(Dtype d) { return d == Dtype::kFp8 ? 2 : dtype_bytes(d); }

int dtype_bytes(Dtype d) {
  switch (d) {
    case Dtype::kBf16:
      return 2;
    case Dtype::kFp16:
      return 2;
    case Dtype::kFp32:
      return 4;
    case Dtype::kFp8:
      return 1;
  }
  return 2;
}

Dtype parse_dtype(std::string_view s, const std::string& where) {
  const std::string l = lower(s);
  for (Dtype d : kAllDtypes)
    if (l == to_string(d)) return d;
  throw_input_error(where,
                    "unknown dtype \"" + std::string(s) + "\" (expected bf16, fp16, fp32 or fp8)");
}

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
    case Recompute::kOp:
      return "op";
  }
  return "?";
}

Recompute parse_recompute(std::string_view s, const std::string& where) {
  const std::string l = lower(s);
  for (Recompute r : kAllRecompute)
    if (l == to_string(r)) return r;
  throw_input_error(where, "unknown recompute policy \"" + std::string(s) +
                               "\" (expected none, selective, full or op)");
}

std::string_view to_string(Fp8Scaling s) {
  switch (s) {
    case Fp8Scaling::kCurrent:
      return "current";
    case Fp8Scaling::kDelayed:
      return "delayed";
    case Fp8Scaling::kMxfp8:
      return "mxfp8";
  }
  return "?";
}

std::string_view to_string(KernelFusion f) {
  switch (f) {
    case KernelFusion::kFused:
      return "fused";
    case KernelFusion::kEager:
      return "eager";
    case KernelFusion::kEagerFp32Params:
      return "eager_fp32_params";
  }
  return "?";
}

KernelFusion parse_kernel_fusion(std::string_view s, const std::string& where) {
  for (KernelFusion f : kAllKernelFusions)
    if (s == to_string(f)) return f;
  throw_input_error(where, "expected \"fused\", \"eager\" or \"eager_fp32_params\", got \"" +
                               std::string(s) + "\"");
}

void check_kernel_fusion_precision(KernelFusion f, bool fp8, const std::string& where) {
  if (f != KernelFusion::kFused && fp8)
    throw_input_error(where, "the eager kernels are for 16-bit models (FP8 training runs "
                             "Transformer Engine's or torchao's fused kernels)");
}

std::string_view to_string(CrossEntropy c) {
  return c == CrossEntropy::kLogitsDtype ? "logits_dtype" : "fp32";
}

CrossEntropy parse_cross_entropy(std::string_view s, const std::string& where) {
  for (CrossEntropy c : kAllCrossEntropies)
    if (s == to_string(c)) return c;
  throw_input_error(where, "expected \"fp32\" or \"logits_dtype\", got \"" + std::string(s) + "\"");
}

int cross_entropy_saved_bytes_per_logit(CrossEntropy c, Dtype d) {
  return c == CrossEntropy::kFp32 ? 4 : activation_dtype_bytes(d);
}

int cross_entropy_transient_bytes_per_logit(CrossEntropy c, Dtype d) {
  const int logits = activation_dtype_bytes(d);
  return c == CrossEntropy::kFp32 && logits >= 4 ? 0 : logits;
}

int64_t mtp_projection_input_bytes_per_token(int hidden, Dtype d) {
  return 2 * static_cast<int64_t>(hidden) * activation_dtype_bytes(d);
}

std::string_view to_string(MoeRouter r) { return r == MoeRouter::kSigmoid ? "sigmoid" : "softmax"; }

std::string_view to_string(ExpertGemm g) {
  return g == ExpertGemm::kPerExpert ? "per_expert" : "grouped";
}

ExpertGemm parse_expert_gemm(const std::string& text, const std::string& where) {
  for (ExpertGemm g : kAllExpertGemms)
    if (text == to_string(g)) return g;
  throw_input_error(where, "expected \"grouped\" or \"per_expert\", got \"" + text + "\"");
}

std::string_view to_string(LayerKind k) {
  switch (k) {
    case LayerKind::kEmbedding:
      return "embedding";
    case LayerKind::kTransformer:
      return "transformer";
    case LayerKind::kLogits:
      return "logits";
    case LayerKind::kCustom:
      return "custom";
  }
  return "?";
}

LayerKind parse_layer_kind(std::string_view s, const std::string& where) {
  const std::string l = lower(s);
  for (LayerKind k :
       {LayerKind::kEmbedding, LayerKind::kTransformer, LayerKind::kLogits, LayerKind::kCustom})
    if (l == to_string(k)) return k;
  throw_input_error(where, "unknown layer kind \"" + std::string(s) +
                               "\" (expected embedding, transformer, logits or custom)");
}

namespace {
// An MTP module: a custom layer named "mtp<i>" (counted only when the model has mtp_modules).
bool is_mtp(const LayerWork& l) {
  return l.kind == LayerKind::kCustom && l.name.rfind("mtp", 0) == 0;
}
}  // namespace

int64_t ModelSpec::total_params() const {
  int64_t n = 0;
  for (const LayerWork& l : layers)
    if (mtp_modules == 0 || !is_mtp(l)) n += l.params;
  return n;
}

int64_t ModelSpec::active_params() const {
  int64_t n = 0;
  for (const LayerWork& l : layers)
    if (mtp_modules == 0 || !is_mtp(l)) n += l.active();
  return n;
}

int64_t ModelSpec::routed_expert_params(int index) const {
  const LayerWork& l = layers[static_cast<size_t>(index)];
  if (!moe.enabled() || hidden <= 0) return 0;
  const int64_t experts = int64_t{moe.experts} * 3 * hidden * moe.expert_ffn_hidden;
  if (l.moe) return experts;
  const int block = mtp_block(index);
  return block >= 0 && layers[static_cast<size_t>(block)].moe ? std::min(experts, l.params) : 0;
}

int ModelSpec::mtp_block(int index) const {
  if (mtp_modules == 0 || !is_mtp(layers[static_cast<size_t>(index)])) return -1;
  for (int i = index - 1; i >= 0; --i)
    if (layers[static_cast<size_t>(i)].kind == LayerKind::kTransformer) return i;
  return -1;
}

int64_t ModelSpec::mtp_params() const {
  int64_t n = 0;
  if (mtp_modules > 0)
    for (const LayerWork& l : layers)
      if (is_mtp(l)) n += l.params;
  return n;
}

bool ModelSpec::is_classic_transformer() const {
  return head_dim == 0 && !qkv_bias && !qk_norm && !moe.enabled() && !mla.enabled() &&
         mtp_modules == 0 && !gelu_rope;
}

double ModelSpec::model_flops_per_sequence() const {
  double f = 0;
  for (const LayerWork& l : layers) f += l.fwd_flops + l.bwd_input_flops + l.bwd_weight_flops;
  return f;
}

double ModelSpec::hardware_flops_per_sequence(Recompute r) const {
  double f = model_flops_per_sequence();
  for (const LayerWork& l : layers) f += l.recompute_flops[static_cast<int>(r)];
  return f;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const TransformerShape& t : presets()) names.push_back(t.name);
  return names;
}

namespace {

// The whole model within kMaxModelParams, summed in double (a model of 100,000 layers of hidden
// 2^20, each within the per-layer limits, had 1.3e18 parameters and was simulated with a negative
// static memory: the int64 byte counts overflowed). Its activations are bounded per device when
// its memory is modelled (build_memory_model, kMaxDeviceBytes).
void check_model_totals(const ModelSpec& m, const JsonObject& obj) {
  double params = 0;
  for (const LayerWork& l : m.layers) params += static_cast<double>(l.params);
  if (params <= static_cast<double>(kMaxModelParams)) return;
  char text[240];
  std::snprintf(text, sizeof text, "model '%s': %.3g parameters (the limit is %.3g)",
                m.name.c_str(), params, static_cast<double>(kMaxModelParams));
  throw_input_error(obj.where(), text);
}

}  // namespace

ModelSpec model_from_json(const nlohmann::json& doc, const std::string& source) {
  const JsonObject obj(doc, source);
  ModelSpec m;
  if (obj.has("layers_list")) {
    if (obj.has("layers"))
      throw_input_error(obj.field("layers"),
                        "give either 'layers' (transformer form) or 'layers_list' (explicit "
                        "form), not both");
    m = explicit_from_json(obj);
  } else {
    if (!obj.has("layers"))
      throw_input_error(obj.field("layers"),
                        "missing (required: 'layers' for the transformer form or 'layers_list' "
                        "for the explicit form)");
    m = transformer_from_json(obj);
  }
  check_model_totals(m, obj);
  return m;
}

namespace {

// The fields parse_shape_extras reads, written only where they differ from the defaults (so a
// Llama or GPT model's JSON is as before).
void add_shape_extras(nlohmann::json& j, const ModelSpec& m) {
  if (m.head_dim > 0) j["head_dim"] = m.head_dim;
  if (m.gelu_rope) j["positions"] = "rope";
  if (m.qkv_bias) j["qkv_bias"] = true;
  if (m.qk_norm) j["qk_norm"] = true;
  if (m.no_dropout) j["dropout"] = false;
  if (m.fp8_scaling != Fp8Scaling::kCurrent)
    j["fp8_scaling"] = std::string(to_string(m.fp8_scaling));
  if (m.dtype == Dtype::kFp8 && !m.fp8_params) j["fp8_params"] = false;
  if (m.dtype == Dtype::kFp8 && !m.fp8_norm_fusion) j["fp8_norm_fusion"] = false;
  if (m.kernel_fusion != KernelFusion::kFused)
    j["kernel_fusion"] = std::string(to_string(m.kernel_fusion));
  if (m.cross_entropy != CrossEntropy::kFp32)
    j["cross_entropy"] = std::string(to_string(m.cross_entropy));
  if (const auto names = m.low_precision_activations(); !names.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (std::string_view n : names) list.push_back(std::string(n));
    j["low_precision_activations"] = list;
  }
  if (m.mtp_modules > 0) j["mtp_modules"] = m.mtp_modules;
  if (m.mla.enabled()) {
    j["attention"] = "mla";
    if (m.mla.q_lora_rank > 0) j["q_lora_rank"] = m.mla.q_lora_rank;
    j["kv_lora_rank"] = m.mla.kv_lora_rank;
    j["qk_rope_head_dim"] = m.mla.qk_rope_head_dim;
    j["qk_nope_head_dim"] = m.mla.qk_nope_head_dim;
    j["v_head_dim"] = m.mla.v_head_dim;
    j.erase("kv_heads");
  }
  if (m.moe.enabled()) {
    j["experts"] = m.moe.experts;
    j["top_k"] = m.moe.top_k;
    j["expert_ffn_hidden"] = m.moe.expert_ffn_hidden;
    if (m.moe.shared_experts > 0) {
      j["shared_experts"] = m.moe.shared_experts;
      j["shared_ffn_hidden"] = m.moe.shared_ffn_hidden;
    }
    if (m.moe.first_dense_layers > 0) j["first_dense_layers"] = m.moe.first_dense_layers;
    if (m.moe.router == MoeRouter::kSigmoid) j["router"] = "sigmoid";
    if (m.moe.dispatch_dtype)
      j["a2a_dispatch_dtype"] = std::string(to_string(*m.moe.dispatch_dtype));
    if (m.moe.combine_dtype) j["a2a_combine_dtype"] = std::string(to_string(*m.moe.combine_dtype));
    if (m.moe.expert_gemm != ExpertGemm::kGrouped) {
      j["expert_gemm"] = std::string(to_string(m.moe.expert_gemm));
      j["expert_gemm_streams"] = m.moe.expert_gemm_streams;
    }
  }
}

}  // namespace

nlohmann::json model_shape_to_json(const ModelSpec& m, int seq_len) {
  nlohmann::json j = {{"name", m.name},
                      {"layers", m.num_transformer_layers},
                      {"hidden", m.hidden},
                      {"heads", m.heads},
                      {"kv_heads", m.kv_heads},
                      {"ffn_hidden", m.ffn_hidden},
                      {"seq_len", seq_len > 0 ? seq_len : m.seq_len},
                      {"vocab", m.vocab},
                      {"dtype", std::string(to_string(m.dtype))},
                      {"tied_embeddings", m.tied_embeddings},
                      {"mlp", m.gated_mlp ? "swiglu" : "gelu"}};
  add_shape_extras(j, m);
  return j;
}

nlohmann::json model_to_json(const ModelSpec& model) {
  nlohmann::json j;
  j["name"] = model.name;
  j["dtype"] = std::string(to_string(model.dtype));
  const std::pair<const char*, int> meta[] = {
      {"hidden", model.hidden},         {"heads", model.heads},     {"kv_heads", model.kv_heads},
      {"ffn_hidden", model.ffn_hidden}, {"seq_len", model.seq_len}, {"vocab", model.vocab}};
  for (const auto& [key, value] : meta)
    if (value != 0) j[key] = value;
  j["tied_embeddings"] = model.tied_embeddings;
  j["mlp"] = model.gated_mlp ? "swiglu" : "gelu";
  add_shape_extras(j, model);
  nlohmann::json list = nlohmann::json::array();
  for (const LayerWork& l : model.layers) {
    nlohmann::json lj;
    lj["name"] = l.name;
    lj["kind"] = std::string(to_string(l.kind));
    lj["fwd_flops"] = l.fwd_flops;
    lj["bwd_input_flops"] = l.bwd_input_flops;
    lj["bwd_weight_flops"] = l.bwd_weight_flops;
    lj["params"] = l.params;
    lj["output_bytes"] = l.output_bytes;
    lj["stash_bytes"] = {{"none", l.stash_bytes[0]},
                         {"selective", l.stash_bytes[1]},
                         {"full", l.stash_bytes[2]},
                         {"op", l.stash_bytes[3]}};
    lj["recompute_flops"] = {{"selective", l.recompute_flops[1]},
                             {"full", l.recompute_flops[2]},
                             {"op", l.recompute_flops[3]}};
    lj["tp_allreduce_bytes"] = l.tp_allreduce_bytes;
    if (l.moe) lj["moe"] = true;
    if (l.active_params >= 0) lj["active_params"] = l.active_params;
    list.push_back(std::move(lj));
  }
  j["layers_list"] = std::move(list);
  return j;
}

ModelSpec load_model(const std::string& name_or_path) {
  const std::string key = lower(name_or_path);
  for (const TransformerShape& t : presets())
    if (t.name == key) return build_transformer_model(t, t.name);
  if (!path_exists(name_or_path)) {  // anything else at the path: read_json_file says what it is
    std::string list;
    for (const std::string& n : model_preset_names()) list += (list.empty() ? "" : ", ") + n;
    throw_input_error(name_or_path,
                      "unknown model: not a preset and no such file (presets: " + list + ")");
  }
  const nlohmann::json doc = read_json_file(name_or_path);
  if (is_hf_config(doc)) return hf_model_from_json(doc, name_or_path);
  return model_from_json(doc, name_or_path);
}

std::string tp_heads_error(const ModelSpec& model, int tp) {
  if (tp <= 1 || model.heads <= 0) return "";
  const std::string of = model.name.empty() ? "" : " of " + model.name;
  if (model.heads % tp != 0)
    return "tp " + std::to_string(tp) + " does not divide the " + std::to_string(model.heads) +
           " attention heads" + of;
  if (model.kv_heads > 0 && model.kv_heads % tp != 0)
    return "tp " + std::to_string(tp) + " does not divide the " + std::to_string(model.kv_heads) +
           " key/value heads (query groups)" + of;
  return "";
}

}  // namespace jaxpp
