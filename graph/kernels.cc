#include "graph/kernels.h"

#include <string_view>
#include <vector>

namespace jaxpp {
namespace {

// Bytes of one activation element: FP8 training (Transformer Engine) runs its GEMMs in FP8 but
// keeps activations, norms and attention in 16 bits.
double activation_bytes(Dtype d) { return d == Dtype::kFp8 ? 2.0 : dtype_bytes(d); }

bool has_shape(const ModelSpec& m) {
  const bool heads_fit =
      m.mla.enabled() || m.head_dim > 0 || (m.heads > 0 && m.hidden % m.heads == 0);
  return m.hidden > 0 && m.heads > 0 && m.seq_len > 0 && m.vocab > 0 && heads_fit;
}

// Eager PyTorch's residual stream and norm bytes per element (ModelSpec::kernel_fusion): 4 with
// fp32 parameters (kEagerFp32Params), 2 with FSDP's bf16 parameters (kEager).
double eager_stream_bytes(const ModelSpec& m) {
  return m.kernel_fusion == KernelFusion::kEagerFp32Params ? 4.0 : 2.0;
}

// Per-parameter weight traffic of eager PyTorch (LayerKernels::weight_fwd_bytes_per_param): with
// fp32 parameters autocast's cast of each weight (aten/src/ATen/autocast_mode.cpp cached_cast:
// cached only for leaf fp32 tensors within one autocast region) and _to_copy's backward casting
// the bf16 weight gradient to fp32.
void add_eager_weight_bytes(const ModelSpec& m, LayerKernels& k) {
  if (m.kernel_fusion != KernelFusion::kEagerFp32Params) return;
  k.weight_fwd_bytes_per_param = 4.0 + 2.0;
  k.weight_bwd_bytes_per_param = 2.0 + 4.0;
}

// Eager PyTorch under torch.autocast(bfloat16) (ModelSpec::kernel_fusion kEager or
// kEagerFp32Params): the element-wise kernels of one transformer layer, one per operator, bytes
// per token read + written (forward; backward), from PyTorch 2.x's code. `r` is the bytes of the
// residual stream and the norms: 4 with fp32 parameters, 2 with FSDP's bf16 parameters.
//   norm             fp32 parameters: torch.nn.LayerNorm / RMSNorm, in autocast's fp32 list
//                    (aten/src/ATen/autocast_mode.h AT_FORALL_FP32: layer_norm, rms_norm) on the
//                    fp32 stream: vectorized_layer_norm_kernel<float> reads and writes fp32.
//                    bf16 parameters: one norm kernel in bf16 (llm-foundry's
//                    low_precision_layernorm runs F.layer_norm on bf16 with autocast off;
//                    torchtitan's and fms-fsdp's Python RMSNorm return bf16 through several
//                    kernels, counted here as one). Backward: layer_norm_grad_input (read dy and
//                    x, write dx) and GammaBetaBackward (read dy and x)
//   input casts      fp32 parameters only: every linear (autocast's lower-precision list) casts
//                    its fp32 input to bf16 (read 4, write 2), once per projection reading the
//                    norm: one for a fused qkv (llm-foundry's Wqkv) or MLP up projection, three
//                    for separate wq, wk, wv and two for w1, w3 (torchtitan's Llama); backward:
//                    each bf16 gradient cast to fp32 (_to_copy's backward); with either, the
//                    gradients of the projections reading one norm output are summed
//   residual add     read r + 2, write r; backward: with an fp32 stream the branch's gradient cast
//                    to bf16 (the autograd engine casts a gradient to its input's dtype), and the
//                    residual and norm gradients of x summed (the engine's InputBuffer)
//   GeLU / SwiGLU    F.gelu (read and write bf16; backward reads the gradient and the input);
//                    F.silu and the product (backward: two products and silu_backward)
//   RoPE             torchtitan's apply_rotary_emb: xq.float(), the complex product, type_as
//                    (20 bytes per element of q and k, forward and backward)
//   qkv gradient     a fused qkv projection split into q, k, v by view/permute/unbind: the
//                    backward stacks dq, dk and dv into its gradient (CatArrayBatchedCopy)
//   bias gradients   biases are added in cuBLASLt's epilogue (the profile's *_bias_* GEMMs); their
//                    gradients are reductions of each output gradient (reduce_kernel<BFloat16>)
//   dropout          native_dropout: a bf16 output and a 1-byte mask
void add_eager_transformer_elementwise(const ModelSpec& m, double q, double kv, double ffn_width,
                                       LayerKernels& k) {
  const double h = m.hidden;
  const bool gpt = !m.gated_mlp;
  const double r = eager_stream_bytes(m);
  const double f32 = 4.0, b16 = 2.0;
  // Two norms per layer.
  k.elementwise.push_back({"norm", 2 * 2 * h * r, 2 * 5 * h * r, TpSplit::kSequence});
  const double casts = gpt ? 2 : 5;  // fused Wqkv + up, or wq, wk, wv + w1, w3
  const double sums = gpt ? 0 : 3;   // gradient sums of the 3 and 2 readers
  const double cast_bytes = r > b16 ? casts * h * (f32 + b16) : 0;
  if (cast_bytes + sums > 0)
    k.elementwise.push_back(
        {"input_cast", cast_bytes, cast_bytes + sums * 3 * h * r, TpSplit::kSequence});
  // Two residual adds; backward: the branch gradient cast to bf16 (fp32 stream) and the sum of
  // x's two gradients.
  const double add_fwd = 2 * (2 * r + b16) * h;
  const double add_bwd = 2 * ((r > b16 ? h * (r + b16) : 0) + 3 * r * h);
  k.elementwise.push_back({"residual_add", add_fwd, add_bwd, TpSplit::kSequence});
  if (gpt) {
    k.elementwise.push_back({"gelu", 2 * ffn_width * b16, 3 * ffn_width * b16, TpSplit::kColumn});
    k.elementwise.push_back({"qkv_grad_cat", 0, 2 * (q + 2 * kv) * b16, TpSplit::kColumn});
    // Bias gradients: qkv and up (split by tp), proj and down (the hidden state).
    k.elementwise.push_back({"bias_grad", 0, (q + 2 * kv + ffn_width) * b16, TpSplit::kColumn});
    k.elementwise.push_back({"bias_grad_hidden", 0, 2 * h * b16, TpSplit::kSequence});
    if (!m.no_dropout)  // after the attention block and the MLP: bf16 output and a 1-byte mask
      k.elementwise.push_back(
          {"dropout", 2 * h * (2 * b16 + 1), 2 * h * (2 * b16 + 1), TpSplit::kSequence});
  } else {
    // silu(w1) (read, write) and its product with w3 (read two, write one); backward: the
    // product's two gradients (read two, write one, each) and silu_backward (read two, write).
    k.elementwise.push_back(
        {"swiglu", 5 * ffn_width * b16, 9 * ffn_width * b16, TpSplit::kColumn});
    if (m.qk_norm)
      k.elementwise.push_back(
          {"qk_norm", 2 * (q + kv) * f32 + (q + kv) * (b16 + f32),
           5 * (q + kv) * f32 + (q + kv) * (b16 + f32), TpSplit::kColumn});
  }
  if (m.learned_positions() || m.mla.enabled()) return;  // MLA keeps its RoPE kernel
  // RoPE on q and k (torchtitan's apply_rotary_emb): the fp32 copy, the complex product and
  // the cast back; the backward mirrors it.
  const double rope = (q + kv) * ((b16 + f32) + 2 * f32 + (f32 + b16));
  k.elementwise.push_back({"rope", rope, rope, TpSplit::kColumn});
}

LayerKernels transformer_kernels(const ModelSpec& m, bool moe_layer) {
  const double h = m.hidden, f = m.ffn_hidden > 0 ? m.ffn_hidden : 4.0 * m.hidden;
  const int kv_heads = m.kv_heads > 0 ? m.kv_heads : m.heads;
  const double d = static_cast<double>(m.attention_head_dim());
  const double q = m.heads * d, kv = kv_heads * d;
  const double db = activation_bytes(m.dtype);
  const bool gpt = !m.gated_mlp;  // GPT-style: LayerNorm, biases, GeLU, dropout
  const bool dropout = gpt && !m.no_dropout;  // 1-byte masks written and stashed
  const bool classic = m.is_classic_transformer();
  const MlaSpec& mla = m.mla;
  const MoeSpec& moe = m.moe;
  moe_layer = moe_layer && moe.enabled();
  LayerKernels k;
  k.has_kernels = true;
  k.has_attention = true;
  if (mla.enabled()) {
    const double a = m.heads, qk = mla.qk_head_dim(), vd = mla.v_head_dim;
    if (mla.q_lora_rank > 0) {
      k.gemms.push_back({"q_down", static_cast<double>(mla.q_lora_rank), h, TpSplit::kNone, 1, 1,
                         true});
      k.gemms.push_back({"q_up", a * qk, static_cast<double>(mla.q_lora_rank), TpSplit::kColumn});
    } else {
      k.gemms.push_back({"q", a * qk, h, TpSplit::kColumn, 1, 1, true});
    }
    k.gemms.push_back(
        {"kv_down", static_cast<double>(mla.kv_lora_rank + mla.qk_rope_head_dim), h,
         TpSplit::kNone});
    k.gemms.push_back({"kv_up", a * (mla.qk_nope_head_dim + vd),
                       static_cast<double>(mla.kv_lora_rank), TpSplit::kColumn});
    k.gemms.push_back({"proj", h, a * vd, TpSplit::kRow, 1, 1, true});
    k.attention = {m.heads, m.heads, mla.qk_head_dim(), /*causal=*/true, mla.v_head_dim};
  } else {
    k.gemms.push_back({"qkv", q + 2 * kv, h, TpSplit::kColumn, 1, 1, true});
    k.gemms.back().norm_input = true;
    k.gemms.push_back({"proj", h, q, TpSplit::kRow, 1, 1, true});
    k.attention = {m.heads, kv_heads, static_cast<int>(d), /*causal=*/true};
  }
  // Intermediate FFN elements per token (a token passes through top_k routed + shared experts).
  double ffn_width = f;
  if (moe_layer) {
    const double experts = moe.experts, fe = moe.expert_ffn_hidden;
    const double shared = static_cast<double>(moe.shared_experts) * moe.shared_ffn_hidden;
    k.gemms.push_back({"router", experts, h, TpSplit::kNone, 1, 1, false, /*fp8=*/false});
    if (shared > 0) {
      k.gemms.push_back({"shared_up", 2 * shared, h, TpSplit::kColumn});
      k.gemms.push_back({"shared_down", h, shared, TpSplit::kRow});
    }
    const double share = moe.top_k / experts;
    k.gemms.push_back({"expert_up", 2 * fe, h, TpSplit::kColumn, experts, share, true});
    k.gemms.push_back({"expert_down", h, fe, TpSplit::kRow, experts, share, true});
    ffn_width = moe.top_k * fe + shared;
  } else {
    k.gemms.push_back({"mlp_up", m.gated_mlp ? 2 * f : f, h, TpSplit::kColumn, 1, 1, true});
    k.gemms.back().norm_input = true;
    k.gemms.push_back({"mlp_down", h, f, TpSplit::kRow, 1, 1, true});
  }
  // Norm: read x, write y (16-bit) = 2·h·db; twice per layer. FP8 delayed scaling with
  // Transformer Engine's fused norm (ModelSpec::fp8_norm_fusion): a norm feeding a GEMM of its
  // own module (GemmKernel::norm_input) writes y in FP8, 1 byte (the scale is known before the
  // kernel runs); its backward is unchanged.
  double norm_fwd = 2 * 2 * h * db;
  if (m.dtype == Dtype::kFp8 && m.fp8_norm_fusion && m.fp8_scaling == Fp8Scaling::kDelayed) {
    for (const GemmKernel& g : k.gemms)
      if (g.norm_input) norm_fwd -= h * (db - 1.0);
  }
  k.elementwise.push_back({"norm", norm_fwd, 2 * 2 * 2 * h * db, TpSplit::kSequence});
  if (gpt) {
    // Bias + dropout + residual add (fused): read x, bias, residual, write y and a 1-byte mask
    // (no mask without dropout).
    const double mask = dropout ? h : 0;
    k.elementwise.push_back({"bias_dropout_add", 2 * (3 * h * db + mask),
                             2 * 2 * (3 * h * db + mask), TpSplit::kSequence});
    // Bias + GeLU (fused): read f, write f.
    k.elementwise.push_back({"bias_gelu", 2 * f * db, 2 * 2 * f * db, TpSplit::kColumn});
  } else {
    // Residual adds: read two, write one.
    k.elementwise.push_back(
        {"residual_add", 2 * 3 * h * db, 2 * 2 * 3 * h * db, TpSplit::kSequence});
    // SwiGLU: read gate and up, write f.
    k.elementwise.push_back(
        {"swiglu", 3 * ffn_width * db, 2 * 3 * ffn_width * db, TpSplit::kColumn});
    if (mla.enabled()) {
      // RoPE on the rope part of each head's q and on the one shared rope key; the latent norms.
      const double rope = (static_cast<double>(m.heads) + 1) * mla.qk_rope_head_dim;
      k.elementwise.push_back({"rope", 2 * rope * db, 2 * 2 * rope * db, TpSplit::kColumn});
      const double latent = mla.q_lora_rank + mla.kv_lora_rank;
      k.elementwise.push_back(
          {"latent_norm", 2 * latent * db, 2 * 2 * latent * db, TpSplit::kNone});
    } else {
      // RoPE on q and k: read and write.
      k.elementwise.push_back({"rope", 2 * (q + kv) * db, 2 * 2 * (q + kv) * db, TpSplit::kColumn});
    }
    if (m.qk_norm)
      k.elementwise.push_back(
          {"qk_norm", 2 * (q + kv) * db, 2 * 2 * (q + kv) * db, TpSplit::kColumn});
  }
  if (moe_layer) {
    // Dispatch: each token's hidden state copied to its top_k expert slots; combine: the top_k
    // outputs read back and summed (no expert parallelism: every tp rank permutes all tokens).
    const double moved = (h + moe.top_k * h) * db;
    k.elementwise.push_back({"moe_permute", 2 * moved, 2 * 2 * moved, TpSplit::kNone});
    // Router: read the E logits, write fp32 probabilities, pick the top_k.
    k.elementwise.push_back(
        {"router_topk", moe.experts * (db + 4.0), 2 * moe.experts * (db + 4.0), TpSplit::kNone});
  }
  if (m.kernel_fusion != KernelFusion::kFused) {
    // Eager PyTorch: the fused kernels above replaced by the eager ones; the MoE permutation and
    // router and MLA's RoPE and latent norms stay as listed.
    const bool mla_rope = mla.enabled();
    std::erase_if(k.elementwise, [mla_rope](const ElementwiseKernel& e) {
      for (std::string_view fused :
           {"norm", "bias_dropout_add", "bias_gelu", "residual_add", "swiglu", "qk_norm"})
        if (e.name == fused) return true;
      return e.name == "rope" && !mla_rope;
    });
    add_eager_transformer_elementwise(m, q, kv, ffn_width, k);
    add_eager_weight_bytes(m, k);
  }
  // Stash (Korthikanti et al. 2022, Sec. 4.1, without the s×s terms): norm inputs 2·h, the
  // inputs of qkv and mlp_up (h each) and GPT's two dropout masks (1 byte each) on the full
  // hidden state; q, k, v, the attention output, the MLP's intermediate tensors split by tp.
  // FP8 (Transformer Engine): a linear layer saves the FP8 cast of its input for its weight
  // gradient (gb = 1 byte), and no 16-bit copy where nothing else reads it: the norm outputs
  // feeding qkv and mlp_up, and the MLP tensor feeding mlp_down. The attention output stays in
  // 16 bits for the attention backward, so the projection's FP8 input is a copy on top of it.
  const bool fp8 = m.dtype == Dtype::kFp8;
  const double gb = fp8 ? 1.0 : db;
  // Low-precision activations (ModelSpec::low_precision_attention_out, _moe_swiglu_input; the
  // DeepSeek-V3 report's Section 3.3.3): the attention output kept once in 12-bit E5M6 for the
  // attention backward and the projection's weight gradient (no 16-bit copy, no FP8 copy), and
  // the routed experts' SwiGLU inputs in FP8; both with one fp32 scale per 1×128 tile.
  constexpr double kTileScaleBytes = 4.0 / 128;
  const bool e5m6_out = fp8 && m.low_precision_attention_out;
  const bool fp8_swiglu_in = fp8 && moe_layer && m.low_precision_moe_swiglu_input;
  const double out_bytes = e5m6_out ? 1.5 + kTileScaleBytes : db;
  const double proj_copy = fp8 && !e5m6_out ? q * gb : 0;
  k.stash_sequence_bytes_per_token = 2 * h * db + 2 * h * gb + (dropout ? 2 * h : 0);
  // Per element of the MLP's width: GeLU's input (16-bit) and output (mlp_down's input), or
  // SwiGLU's gate and up (16-bit) and their product (mlp_down's input).
  const double mlp_bytes = (gpt ? 1 : 2) * db + gb;
  k.stash_split_bytes_per_token = (q + 2 * kv) * db + q * out_bytes + proj_copy + mlp_bytes * f;
  if (!classic) {
    // Other shapes: the same inventory with their own sizes. MLA: q, k (qk_nope + qk_rope per
    // head), v and the attention output (v_head_dim per head) split by tp; the latent vectors
    // (replicated) counted on the hidden state. MoE: gate, up and product of the top_k routed
    // and the shared experts split by tp; the permuted expert inputs (top_k·h) and the router's
    // fp32 probabilities on the hidden state.
    double attention_split = (q + 2 * kv) * db + q * out_bytes + proj_copy;
    if (mla.enabled()) {
      const double a = m.heads, out = a * mla.v_head_dim;
      attention_split = (2 * a * mla.qk_head_dim() + out) * db + out * out_bytes +
                        (fp8 && !e5m6_out ? out * gb : 0);
      k.stash_sequence_bytes_per_token +=
          (mla.q_lora_rank + mla.kv_lora_rank + mla.qk_rope_head_dim) * db;
    }
    if (moe_layer)
      k.stash_sequence_bytes_per_token += moe.top_k * h * db + moe.experts * 4.0;
    double mlp_split = mlp_bytes * ffn_width;
    if (fp8_swiglu_in)  // the routed gate and up in FP8 instead of 16 bits
      mlp_split -= moe.top_k * moe.expert_ffn_hidden * 2 * (db - (1 + kTileScaleBytes));
    k.stash_split_bytes_per_token = attention_split + mlp_split;
  }
  // The casts these take: read 16 bits, write the low-precision copy (forward); read it, write 16
  // bits (backward), split by tp as the tensors.
  if (e5m6_out) {
    const double out = mla.enabled() ? static_cast<double>(m.heads) * mla.v_head_dim : q;
    const double bytes = out * (db + out_bytes);
    k.elementwise.push_back({"attention_out_cache", bytes, bytes, TpSplit::kColumn});
  }
  if (fp8_swiglu_in) {
    const double bytes = 2.0 * moe.top_k * moe.expert_ffn_hidden * (db + 1 + kTileScaleBytes);
    k.elementwise.push_back({"moe_swiglu_input_cache", bytes, bytes, TpSplit::kColumn});
  }
  k.stash_full_recompute_bytes_per_token = h * db;
  // Megatron-Core's recompute modules (graph/kernels.h). Separate norms: an MLA layer's
  // input_layernorm (q_down and kv_down read it: TELinear, not a fused LayerNormLinear) and an
  // MoE layer's pre_mlp_layernorm (the router and the shared experts read it).
  const int separate_norms = (mla.enabled() ? 1 : 0) + (moe_layer ? 1 : 0);
  k.separate_norms = separate_norms;
  k.layernorm_recompute_bytes_per_token = separate_norms * h * gb;
  k.layernorm_fwd_bytes_per_token = separate_norms * 2 * h * db;  // read x, write y
  if (fp8) {
    const double readers = (mla.enabled() ? 2 : 0) + (moe_layer && moe.shared_experts > 0 ? 1 : 0);
    k.layernorm_recast_elements_per_token = readers * h;
  }
  if (mla.enabled()) {
    const double a = m.heads;
    k.mla_up_proj_recompute_bytes_per_token =
        (2 * a * mla.qk_head_dim() + a * mla.v_head_dim) * db;
  }
  if (moe_layer) {
    const double routed = static_cast<double>(moe.top_k) * moe.expert_ffn_hidden;
    k.moe_act_recompute_bytes_per_token = routed * gb;
    k.moe_act_fwd_bytes_per_token = (gpt ? 2 : 3) * routed * db;
    k.moe_act_elements_per_token = routed;
  }
  // Recompute::kOp (torchtitan's op SAC, graph/kernels.h): which 16-bit GEMMs are re-run and what
  // is kept. torchtitan counts the block's aten.mm calls in forward order and saves the odd ones:
  // wq (1), wv (3), w1 (5) and w2 (7) of a gated MLP, wq, wv and the MLP's up projection of a
  // GeLU MLP (its down projection is the 6th); wk, wo and w3 (or down) are re-run. Other GEMMs
  // (MLA's projections, the router, experts) are priced as re-run.
  const bool gemm_fp8 = m.dtype == Dtype::kFp8;
  for (GemmKernel& g : k.gemms) {
    if (gemm_fp8 && g.fp8) continue;  // torch._scaled_mm: never saved
    if (g.name == "qkv")
      g.op_recompute = kv / (q + 2 * kv);
    else if (g.name == "mlp_up")
      g.op_recompute = m.gated_mlp ? 0.5 : 0.0;
    else if (g.name == "mlp_down")
      g.op_recompute = m.gated_mlp ? 0.0 : 1.0;
  }
  const auto saved_16bit = [&](std::string_view name) {
    for (const GemmKernel& g : k.gemms)
      if (g.name == name) return !(gemm_fp8 && g.fp8);
    return false;
  };
  const double attention_out = mla.enabled() ? m.heads * mla.v_head_dim : q;
  k.stash_op_sequence_bytes_per_token = h * db;
  k.stash_op_split_bytes_per_token = attention_out * db + m.heads * 4.0;  // + fp32 lse
  if (saved_16bit("qkv")) k.stash_op_split_bytes_per_token += (q + kv) * db;
  if (saved_16bit("mlp_up")) k.stash_op_split_bytes_per_token += f * db;
  if (m.gated_mlp && saved_16bit("mlp_down")) k.stash_op_unsplit_bytes_per_token = h * db;
  k.stash_scores_bytes_per_head_key = dropout ? 5 : 2;  // softmax output (2) + dropout mask/output
  k.scores_traffic_bytes_per_head_key = dropout ? 9 : 4;
  k.hidden_bytes_per_token = h * db;
  return k;
}

LayerKernels logits_kernels(const ModelSpec& m) {
  const double h = m.hidden, v = m.vocab, db = activation_bytes(m.dtype);
  LayerKernels k;
  k.has_kernels = true;
  k.gemms = {{"lm_head", v, h, TpSplit::kColumn, 1, 1, false, /*fp8=*/false}};
  // Fused cross-entropy in fp32 over the vocabulary slice: read the logits, write fp32 values,
  // read them back for max/sum (forward); read the softmax, write the gradient (backward).
  k.elementwise.push_back({"cross_entropy", v * (db + 4 + 4), v * (4 + db), TpSplit::kColumn});
  k.elementwise.push_back({"final_norm", 2 * h * db, 2 * 2 * h * db, TpSplit::kSequence});
  if (m.kernel_fusion != KernelFusion::kFused) {
    // Eager PyTorch: the loss as the frameworks write it, F.cross_entropy on an fp32 copy of the
    // bf16 logits (scripts/measure_eager_steps.py and torchtitan's cross_entropy_loss:
    // pred.float(); F.cross_entropy under autocast, whose fp32 list casts the logits the same
    // way), unfused (PyTorch 2.x aten/src/ATen/native/cuda/SoftMax.cu,
    // LossNLL.cu), per vocabulary entry:
    //   logits_cast  read bf16, write fp32; backward the gradient cast back (read 4, write 2)
    //   log_softmax  cunn_SoftMaxForward: the row's max, the sum of exponentials, then the output:
    //                read fp32 three times, write once; cunn_SoftMaxBackward: read the gradient
    //                for its sum, then the gradient and the output, write
    //   nll_loss     forward one entry per token; backward a zero-filled fp32 gradient
    //                (FillFunctor) with one entry per token scattered
    // and the final norm (as a layer's, transformer_kernels).
    const double r = eager_stream_bytes(m);
    const double f32 = 4.0, b16 = 2.0;
    // A loss that keeps the 16-bit logits (ModelSpec::cross_entropy kLogitsDtype: llm-foundry's
    // default loss_fn "fused_crossentropy", flash-attn's Triton cross-entropy, called on the
    // 16-bit logits without a cast) is one kernel each way instead: the forward reads the logits
    // for the log-sum-exp and the loss, the backward reads them again and writes the 16-bit
    // gradient.
    if (m.cross_entropy == CrossEntropy::kLogitsDtype) {
      k.elementwise = {{"cross_entropy", v * b16, v * (b16 + b16), TpSplit::kColumn}};
    } else {
      k.elementwise = {
          {"logits_cast", v * (b16 + f32), v * (f32 + b16), TpSplit::kColumn},
          {"log_softmax", v * (3 * f32 + f32), v * (f32 + 2 * f32 + f32), TpSplit::kColumn},
          {"nll_loss", 0, v * f32, TpSplit::kColumn},
      };
    }
    k.elementwise.push_back({"final_norm", 2 * h * r, 5 * h * r, TpSplit::kSequence});
    if (r > b16)  // the fp32 norm output cast for the head's GEMM, and its gradient back
      k.elementwise.push_back({"input_cast", h * (f32 + b16), h * (b16 + f32), TpSplit::kSequence});
    // The head's weight: cast per forward and its gradient cast back with fp32 parameters; tied
    // to the embedding, its gradient summed into the embedding's (read both, write one).
    add_eager_weight_bytes(m, k);
    if (m.tied_embeddings) k.weight_bwd_bytes_per_param += 3 * r;
  }
  // The head's input, and what the loss keeps of the logits for the backward (graph/model.h
  // CrossEntropy); the logits layer of graph/model.cc counts the same bytes.
  k.stash_sequence_bytes_per_token = h * db;
  k.stash_split_bytes_per_token = v * cross_entropy_saved_bytes_per_logit(m.cross_entropy, m.dtype);
  k.loss_transient_split_bytes_per_token =
      v * cross_entropy_transient_bytes_per_logit(m.cross_entropy, m.dtype);
  k.hidden_bytes_per_token = h * db;
  return k;
}

LayerKernels embedding_kernels(const ModelSpec& m) {
  const double h = m.hidden, db = activation_bytes(m.dtype);
  const bool gpt = m.learned_positions();
  LayerKernels k;
  k.has_kernels = true;
  // Gather a row, (GPT) add the learned position and apply dropout; backward: accumulate the
  // rows' gradients into the fp32 gradient buffer.
  k.elementwise.push_back({"embedding", gpt ? 2 * h * db + 3 * h * db + h : 2 * h * db,
                           h * (db + 4 + 4), TpSplit::kSequence});
  if (m.kernel_fusion != KernelFusion::kFused) {
    // Eager PyTorch: the embedding runs in the parameters' dtype (autocast leaves it alone): the
    // gather, GPT's separate position add (read two, write one) and dropout (output and a
    // 1-byte mask); backward: embedding_dense_backward into an fp32 buffer.
    const double r = eager_stream_bytes(m);
    const double dropout = gpt && !m.no_dropout ? h * (2 * r + 1) : 0;
    k.elementwise = {{"embedding", 2 * h * r + (gpt ? 3 * h * r : 0) + dropout,
                      h * (r + 4 + 4), TpSplit::kSequence}};
  }
  k.hidden_bytes_per_token = h * db;
  return k;
}

}  // namespace

LayerKernels layer_kernels(const ModelSpec& model, int index) {
  if (!has_shape(model) || index < 0 || index >= model.num_layers()) return {};
  switch (model.layers[index].kind) {
    case LayerKind::kTransformer:
      return transformer_kernels(model, model.layers[index].moe);
    case LayerKind::kLogits:
      return logits_kernels(model);
    case LayerKind::kEmbedding:
      return embedding_kernels(model);
    case LayerKind::kCustom:
      break;
  }
  return {};
}

}  // namespace jaxpp
