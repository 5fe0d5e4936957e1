#include "graph/model.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <set>

#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/json_util.h"
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
};

// ---- The work formulas (VALIDATION.md; Megatron-LM, Narayanan et al. 2021). -----------------
// All for one sequence of length s, no tensor parallelism.

// Weight-matrix elements of one transformer layer: q and o are h×h, k and v are h×(kv·h/a),
// the MLP has 2 (GELU) or 3 (SwiGLU) h×f matrices. = 12h² for GPT.
int64_t layer_matrix_params(const TransformerShape& t) {
  const int64_t h = t.hidden, f = t.ffn_hidden;
  const int64_t kv_dim = static_cast<int64_t>(t.kv_heads) * (h / t.heads);
  return 2 * h * h + 2 * h * kv_dim + (t.gated_mlp ? 3 : 2) * h * f;
}

// Biases and norms of one layer: GPT-style biases on q,k,v,o and both MLP matrices plus two
// LayerNorms (scale + shift) = 13h for the 4h MLP; Llama-style: two RMSNorm scales, no biases.
int64_t layer_vector_params(const TransformerShape& t) {
  const int64_t h = t.hidden, f = t.ffn_hidden;
  if (t.gated_mlp) return 2 * h;
  const int64_t kv_dim = static_cast<int64_t>(t.kv_heads) * (h / t.heads);
  return (h + 2 * kv_dim + h) + (f + h) + 4 * h;
}

LayerWork transformer_layer(const TransformerShape& t, int index) {
  const double s = t.seq_len, h = t.hidden, a = t.heads;
  const int64_t db = dtype_bytes(t.dtype);
  const int64_t si = t.seq_len, hi = t.hidden;
  const double matrix_flops = 2.0 * s * static_cast<double>(layer_matrix_params(t));
  const double attention_fwd_flops = 4.0 * s * s * h;  // QK^T and attention·V
  LayerWork w;
  w.name = "layer" + std::to_string(index);
  w.kind = LayerKind::kTransformer;
  w.fwd_flops = matrix_flops + attention_fwd_flops;
  w.bwd_input_flops = matrix_flops + 2.0 * attention_fwd_flops;
  w.bwd_weight_flops = matrix_flops;
  w.params = layer_matrix_params(t) + layer_vector_params(t);
  w.output_bytes = si * hi * db;
  // Megatron's activation memory in 16-bit units, scaled to the dtype.
  const int64_t none_16 = 34 * si * hi + 5 * static_cast<int64_t>(a) * si * si;
  w.stash_bytes = {none_16 * db / 2, 34 * si * hi * db / 2, 2 * si * hi * db / 2};
  w.recompute_flops = {0, attention_fwd_flops, w.fwd_flops};
  w.tp_allreduce_bytes = 2 * si * hi * db;
  return w;
}

LayerWork embedding_layer(const TransformerShape& t) {
  const int64_t s = t.seq_len, h = t.hidden, v = t.vocab;
  const bool learned_positions = !t.gated_mlp;  // GPT/BERT learn positions; Llama uses RoPE
  LayerWork w;
  w.name = "embedding";
  w.kind = LayerKind::kEmbedding;
  w.params = v * h + (learned_positions ? s * h : 0);
  w.output_bytes = s * h * dtype_bytes(t.dtype);
  return w;
}

LayerWork logits_layer(const TransformerShape& t) {
  const double s = t.seq_len, h = t.hidden, v = t.vocab;
  const int64_t db = dtype_bytes(t.dtype);
  LayerWork w;
  w.name = "logits";
  w.kind = LayerKind::kLogits;
  w.fwd_flops = 2.0 * s * h * v;
  w.bwd_input_flops = 2.0 * s * h * v;
  w.bwd_weight_flops = 2.0 * s * h * v;
  w.params = t.tied_embeddings ? 0 : static_cast<int64_t>(t.vocab) * t.hidden;
  w.output_bytes = 4;  // the fp32 loss
  // Its input and the logits are kept for the backward whatever the recompute policy.
  const int64_t stash =
      (static_cast<int64_t>(t.seq_len) * t.hidden + static_cast<int64_t>(t.seq_len) * t.vocab) * db;
  w.stash_bytes = {stash, stash, stash};
  return w;
}

ModelSpec build_transformer_model(TransformerShape t, const std::string& where) {
  if (t.kv_heads == 0) t.kv_heads = t.heads;
  if (t.ffn_hidden == 0) t.ffn_hidden = 4 * t.hidden;
  if (t.hidden % t.heads != 0)
    throw_input_error(where, "hidden (" + std::to_string(t.hidden) +
                                 ") must be a multiple of heads (" + std::to_string(t.heads) + ")");
  if (t.heads % t.kv_heads != 0)
    throw_input_error(where, "heads (" + std::to_string(t.heads) +
                                 ") must be a multiple of kv_heads (" + std::to_string(t.kv_heads) +
                                 ")");
  ModelSpec m;
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
  m.num_transformer_layers = t.layers;
  m.layers.reserve(t.layers + 2);
  m.layers.push_back(embedding_layer(t));
  for (int i = 0; i < t.layers; ++i) m.layers.push_back(transformer_layer(t, i));
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
    return p;
  }();
  return kPresets;
}

// ---- JSON. ----------------------------------------------------------------------------------

const std::set<std::string> kTransformerKeys = {"name",     "layers",          "hidden",  "heads",
                                                "kv_heads", "ffn_hidden",      "seq_len", "vocab",
                                                "dtype",    "tied_embeddings", "mlp"};
const std::set<std::string> kExplicitKeys = {"name",  "dtype",           "layers_list", "hidden",
                                             "heads", "kv_heads",        "ffn_hidden",  "seq_len",
                                             "vocab", "tied_embeddings", "mlp"};
const std::set<std::string> kLayerKeys = {
    "name",   "kind",         "fwd_flops",   "bwd_input_flops", "bwd_weight_flops",
    "params", "output_bytes", "stash_bytes", "recompute_flops", "tp_allreduce_bytes"};

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

ModelSpec transformer_from_json(const JsonObject& obj) {
  obj.reject_unknown(kTransformerKeys);
  TransformerShape t;
  t.name = obj.string("name");
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
    s.reject_unknown({"none", "selective", "full"});
    w.stash_bytes = {quantity(s, "none"), quantity(s, "selective"), quantity(s, "full")};
  } else {
    const int64_t b = quantity(obj, "stash_bytes");
    w.stash_bytes = {b, b, b};
  }
  // Default: selective recompute redoes nothing, full recompute redoes the forward.
  w.recompute_flops = {0, 0, w.fwd_flops};
  if (obj.has("recompute_flops")) {
    if (obj.at("recompute_flops").is_object()) {
      const JsonObject r = obj.object("recompute_flops");
      r.reject_unknown({"selective", "full"});
      w.recompute_flops = {0, layer_flops(r, "selective"), layer_flops(r, "full")};
    } else {
      w.recompute_flops = {0, 0, layer_flops(obj, "recompute_flops")};
    }
  }
  if (obj.has("tp_allreduce_bytes")) w.tp_allreduce_bytes = quantity(obj, "tp_allreduce_bytes");
  return w;
}

ModelSpec explicit_from_json(const JsonObject& obj) {
  obj.reject_unknown(kExplicitKeys);
  ModelSpec m;
  m.name = obj.string("name");
  m.dtype = parse_dtype(obj.string_or("dtype", "bf16"), obj.field("dtype"));
  m.hidden = metadata_int(obj, "hidden", kMaxHidden);
  m.heads = metadata_int(obj, "heads", kMaxHeads);
  m.kv_heads = metadata_int(obj, "kv_heads", kMaxHeads);
  m.ffn_hidden = metadata_int(obj, "ffn_hidden", kMaxFfnHidden);
  m.seq_len = metadata_int(obj, "seq_len", kMaxSeqLen);
  m.vocab = metadata_int(obj, "vocab", kMaxVocab);
  m.tied_embeddings = obj.boolean_or("tied_embeddings", true);
  m.gated_mlp = parse_mlp_gated(obj);
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
  }
  return "?";
}

Recompute parse_recompute(std::string_view s, const std::string& where) {
  const std::string l = lower(s);
  for (Recompute r : kAllRecompute)
    if (l == to_string(r)) return r;
  throw_input_error(where, "unknown recompute policy \"" + std::string(s) +
                               "\" (expected none, selective or full)");
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

int64_t ModelSpec::total_params() const {
  int64_t n = 0;
  for (const LayerWork& l : layers) n += l.params;
  return n;
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

ModelSpec model_from_json(const nlohmann::json& doc, const std::string& source) {
  const JsonObject obj(doc, source);
  if (obj.has("layers_list")) {
    if (obj.has("layers"))
      throw_input_error(obj.field("layers"),
                        "give either 'layers' (transformer form) or 'layers_list' (explicit "
                        "form), not both");
    return explicit_from_json(obj);
  }
  if (!obj.has("layers"))
    throw_input_error(obj.field("layers"),
                      "missing (required: 'layers' for the transformer form or 'layers_list' for "
                      "the explicit form)");
  return transformer_from_json(obj);
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
    lj["stash_bytes"] = {
        {"none", l.stash_bytes[0]}, {"selective", l.stash_bytes[1]}, {"full", l.stash_bytes[2]}};
    lj["recompute_flops"] = {{"selective", l.recompute_flops[1]}, {"full", l.recompute_flops[2]}};
    lj["tp_allreduce_bytes"] = l.tp_allreduce_bytes;
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
  return model_from_json(read_json_file(name_or_path), name_or_path);
}

}  // namespace jaxpp
