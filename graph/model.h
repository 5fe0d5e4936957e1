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
// Usage:
//   ModelSpec m = load_model("gpt3-13b");           // a preset, or a path to a JSON file
//   int64_t n = m.total_params();
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace jaxpp {

enum class Dtype { kBf16, kFp16, kFp32, kFp8 };
inline constexpr std::array kAllDtypes = {Dtype::kBf16, Dtype::kFp16, Dtype::kFp32, Dtype::kFp8};
std::string_view to_string(Dtype d);
int dtype_bytes(Dtype d);
Dtype parse_dtype(std::string_view s, const std::string& where);  // InputError if unknown

enum class Recompute { kNone = 0, kSelective = 1, kFull = 2 };
inline constexpr std::array kAllRecompute = {Recompute::kNone, Recompute::kSelective,
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
  double fwd_flops = 0;         // forward
  double bwd_input_flops = 0;   // backward for inputs (I)
  double bwd_weight_flops = 0;  // backward for weights (W)
  int64_t params = 0;
  int64_t output_bytes = 0;  // activation handed to the next layer (pipeline P2P payload)
  // Bytes stashed between this layer's F and its backward, indexed by Recompute.
  std::array<int64_t, 3> stash_bytes = {0, 0, 0};
  // Extra forward FLOPs redone in the backward, indexed by Recompute (0 for kNone).
  std::array<double, 3> recompute_flops = {0, 0, 0};
  // Tensor-parallel all-reduce payload per pass (forward; the backward has the same), in bytes.
  // 2 all-reduces of s·h elements per transformer layer (Megatron); 0 for other layers.
  int64_t tp_allreduce_bytes = 0;
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
  int num_transformer_layers = 0;
  std::vector<LayerWork> layers;  // in execution order, embedding first, logits last

  int num_layers() const { return static_cast<int>(layers.size()); }
  int64_t total_params() const;
  // Tokens per sequence (seq_len; 1 if unknown).
  int tokens_per_sequence() const { return seq_len > 0 ? seq_len : 1; }
  // Forward + both backward FLOPs of one sequence, no recompute (the "model FLOPs" of MFU).
  double model_flops_per_sequence() const;
  // As above plus the recompute FLOPs of the given policy (the "hardware FLOPs").
  double hardware_flops_per_sequence(Recompute r) const;
};

// A preset name (case-insensitive) or a path to a JSON file. InputError otherwise.
ModelSpec load_model(const std::string& name_or_path);
// Parses a model JSON document (transformer or explicit form); `source` names it in errors.
ModelSpec model_from_json(const nlohmann::json& doc, const std::string& source);
// The explicit form (layers_list), which model_from_json reads back to an equal ModelSpec.
nlohmann::json model_to_json(const ModelSpec& model);
std::vector<std::string> model_preset_names();

}  // namespace jaxpp
