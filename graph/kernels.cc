#include "graph/kernels.h"

namespace jaxpp {
namespace {

// Bytes of one activation element: FP8 training (Transformer Engine) runs its GEMMs in FP8 but
// keeps activations, norms and attention in 16 bits.
double activation_bytes(Dtype d) { return d == Dtype::kFp8 ? 2.0 : dtype_bytes(d); }

bool has_shape(const ModelSpec& m) {
  return m.hidden > 0 && m.heads > 0 && m.seq_len > 0 && m.vocab > 0 && m.hidden % m.heads == 0;
}

LayerKernels transformer_kernels(const ModelSpec& m) {
  const double h = m.hidden, f = m.ffn_hidden > 0 ? m.ffn_hidden : 4.0 * m.hidden;
  const int kv_heads = m.kv_heads > 0 ? m.kv_heads : m.heads;
  const double d = static_cast<double>(m.hidden / m.heads);
  const double q = m.heads * d, kv = kv_heads * d;
  const double db = activation_bytes(m.dtype);
  const bool gpt = !m.gated_mlp;  // GPT-style: LayerNorm, biases, GeLU, dropout
  LayerKernels k;
  k.has_kernels = true;
  k.gemms = {{"qkv", q + 2 * kv, h, TpSplit::kColumn},
             {"proj", h, q, TpSplit::kRow},
             {"mlp_up", m.gated_mlp ? 2 * f : f, h, TpSplit::kColumn},
             {"mlp_down", h, f, TpSplit::kRow}};
  k.has_attention = true;
  k.attention = {m.heads, kv_heads, static_cast<int>(d), /*causal=*/true};
  // Norm: read x, write y (16-bit) = 2·h·db; twice per layer.
  k.elementwise.push_back({"norm", 2 * 2 * h * db, 2 * 2 * 2 * h * db, TpSplit::kSequence});
  if (gpt) {
    // Bias + dropout + residual add (fused): read x, bias, residual, write y and a 1-byte mask.
    k.elementwise.push_back(
        {"bias_dropout_add", 2 * (3 * h * db + h), 2 * 2 * (3 * h * db + h), TpSplit::kSequence});
    // Bias + GeLU (fused): read f, write f.
    k.elementwise.push_back({"bias_gelu", 2 * f * db, 2 * 2 * f * db, TpSplit::kColumn});
  } else {
    // Residual adds: read two, write one.
    k.elementwise.push_back(
        {"residual_add", 2 * 3 * h * db, 2 * 2 * 3 * h * db, TpSplit::kSequence});
    // SwiGLU: read gate and up, write f.
    k.elementwise.push_back({"swiglu", 3 * f * db, 2 * 3 * f * db, TpSplit::kColumn});
    // RoPE on q and k: read and write.
    k.elementwise.push_back({"rope", 2 * (q + kv) * db, 2 * 2 * (q + kv) * db, TpSplit::kColumn});
  }
  // Stash (Korthikanti et al. 2022, Sec. 4.1, without the s×s terms): norm inputs 2·h, the
  // inputs of qkv and mlp_up (h each) and GPT's two dropout masks (1 byte each) on the full
  // hidden state; q, k, v, the attention output, the MLP's intermediate tensors split by tp.
  k.stash_sequence_bytes_per_token = (2 * h + 2 * h) * db + (gpt ? 2 * h : 0);
  const double mlp_split = gpt ? 2 * f * db   // GeLU input and output
                               : 3 * f * db;  // gate, up, and their product
  k.stash_split_bytes_per_token = (q + 2 * kv + q) * db + mlp_split;
  k.stash_full_recompute_bytes_per_token = h * db;
  k.stash_scores_bytes_per_head_key = gpt ? 5 : 2;  // softmax output (2) + dropout mask/output
  k.scores_traffic_bytes_per_head_key = gpt ? 9 : 4;
  k.hidden_bytes_per_token = h * db;
  return k;
}

LayerKernels logits_kernels(const ModelSpec& m) {
  const double h = m.hidden, v = m.vocab, db = activation_bytes(m.dtype);
  LayerKernels k;
  k.has_kernels = true;
  k.gemms = {{"lm_head", v, h, TpSplit::kColumn}};
  // Fused cross-entropy in fp32 over the vocabulary slice: read the logits, write fp32 values,
  // read them back for max/sum (forward); read the softmax, write the gradient (backward).
  k.elementwise.push_back({"cross_entropy", v * (db + 4 + 4), v * (4 + db), TpSplit::kColumn});
  k.elementwise.push_back({"final_norm", 2 * h * db, 2 * 2 * h * db, TpSplit::kSequence});
  k.stash_sequence_bytes_per_token = h * db;
  k.stash_split_bytes_per_token = v * db;
  k.hidden_bytes_per_token = h * db;
  return k;
}

LayerKernels embedding_kernels(const ModelSpec& m) {
  const double h = m.hidden, db = activation_bytes(m.dtype);
  const bool gpt = !m.gated_mlp;
  LayerKernels k;
  k.has_kernels = true;
  // Gather a row, (GPT) add the learned position and apply dropout; backward: accumulate the
  // rows' gradients into the fp32 gradient buffer.
  k.elementwise.push_back({"embedding", gpt ? 2 * h * db + 3 * h * db + h : 2 * h * db,
                           h * (db + 4 + 4), TpSplit::kSequence});
  k.hidden_bytes_per_token = h * db;
  return k;
}

}  // namespace

LayerKernels layer_kernels(const ModelSpec& model, int index) {
  if (!has_shape(model) || index < 0 || index >= model.num_layers()) return {};
  switch (model.layers[index].kind) {
    case LayerKind::kTransformer:
      return transformer_kernels(model);
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
