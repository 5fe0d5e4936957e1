#include "graph/hf_config.h"

#include <array>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <utility>

#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/json_util.h"

namespace jaxpp {
namespace {

enum class Family { kLlama, kMixtral, kQwen3Moe, kDeepseek, kGpt2, kGptNeox };

struct Architecture {
  const char* model_type;
  const char* class_name;
  Family family;
};

constexpr std::array kArchitectures = {
    Architecture{"llama", "LlamaForCausalLM", Family::kLlama},
    Architecture{"mistral", "MistralForCausalLM", Family::kLlama},
    Architecture{"qwen2", "Qwen2ForCausalLM", Family::kLlama},
    Architecture{"qwen3", "Qwen3ForCausalLM", Family::kLlama},
    Architecture{"mixtral", "MixtralForCausalLM", Family::kMixtral},
    Architecture{"qwen3_moe", "Qwen3MoeForCausalLM", Family::kQwen3Moe},
    Architecture{"deepseek_v3", "DeepseekV3ForCausalLM", Family::kDeepseek},
    Architecture{"kimi_k2", "DeepseekV3ForCausalLM", Family::kDeepseek},
    Architecture{"gpt2", "GPT2LMHeadModel", Family::kGpt2},
    Architecture{"gpt_neox", "GPTNeoXForCausalLM", Family::kGptNeox},
};

const std::array kMlaFields = {"q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
                               "qk_nope_head_dim", "v_head_dim"};
const std::array kExpertFields = {"num_local_experts", "num_experts",
                                  "n_routed_experts",  "num_experts_per_tok",
                                  "n_shared_experts",  "moe_intermediate_size"};

// Present and not null (transformers reads null as "use the default").
bool present(const nlohmann::json& doc, const char* key) {
  return doc.contains(key) && !doc.at(key).is_null();
}

std::string supported_list() {
  std::string list;
  for (const Architecture& a : kArchitectures)
    list += (list.empty() ? "" : ", ") + std::string(a.model_type);
  return list;
}

// The architecture: "model_type" when given (transformers picks the config class, and the model
// class AutoModel builds, by it), which must then be supported and agree with any known class of
// "architectures"; else the first known class of "architectures".
const Architecture& detect(const JsonObject& obj, const nlohmann::json& doc) {
  std::string model_type;
  if (present(doc, "model_type")) model_type = obj.string("model_type");
  const Architecture* by_type = nullptr;
  for (const Architecture& a : kArchitectures)
    if (model_type == a.model_type) by_type = &a;
  if (!model_type.empty() && by_type == nullptr)
    throw_input_error(obj.field("model_type"),
                      "unsupported architecture '" + model_type +
                          "' (supported model types: " + supported_list() + ")");
  if (present(doc, "architectures")) {
    const nlohmann::json& list = obj.array("architectures");
    std::string names;
    for (const nlohmann::json& entry : list) {
      if (!entry.is_string())
        throw_input_error(obj.field("architectures"), "expected a list of class names");
      const std::string name = entry.get<std::string>();
      names += (names.empty() ? "" : ", ") + name;
      for (const Architecture& a : kArchitectures) {
        if (name != a.class_name) continue;
        if (by_type == nullptr) return a;  // no model_type: the first known class
        // One family reads the same fields (llama, mistral, qwen2, qwen3; DeepseekV3ForCausalLM
        // serves deepseek_v3 and kimi_k2): model_type picks the entry.
        if (by_type->family == a.family) return *by_type;
        throw_input_error(obj.field("model_type"),
                          "'" + model_type + "' contradicts \"architectures\" " + name + " (" +
                              a.model_type + "); give the model_type of that class");
      }
    }
    if (by_type == nullptr)
      throw_input_error(obj.field("architectures"),
                        "unsupported architecture '" + names +
                            "' (supported model types: " + supported_list() + ")");
  }
  if (by_type == nullptr)
    throw_input_error(obj.field("architectures"),
                      "unsupported architecture '' (supported model types: " + supported_list() +
                          ")");
  return *by_type;
}

Dtype hf_dtype(const JsonObject& obj, const nlohmann::json& doc) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!present(doc, key)) continue;
    const std::string d = obj.string(key);
    if (d == "bfloat16") return Dtype::kBf16;
    if (d == "float16") return Dtype::kFp16;
    if (d == "float32") return Dtype::kFp32;
    throw_input_error(obj.field(key),
                      "unsupported dtype '" + d + "' (expected bfloat16, float16 or float32)");
  }
  return Dtype::kBf16;
}

std::string model_name(const JsonObject& obj, const nlohmann::json& doc,
                       const std::string& source) {
  if (present(doc, "_name_or_path")) {
    const std::string n = obj.string("_name_or_path");
    if (!n.empty()) return n;
  }
  // The name from the path: its control characters, which the model's name may not hold
  // (model_from_json refuses them), and bytes that are not UTF-8 (JSON reports cannot hold them)
  // become '?'.
  const std::filesystem::path path(source);
  std::string name =
      path.stem() == "config" && path.has_parent_path() && !path.parent_path().filename().empty()
          ? path.parent_path().filename().string()
          : path.stem().string();
  for (char& ch : name)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return with_invalid_utf8_replaced(std::move(name));  // so do bytes that are not UTF-8
}

int positive_or(const JsonObject& obj, const nlohmann::json& doc, const char* key, int fallback) {
  return present(doc, key) ? obj.positive_int(key) : fallback;
}

int non_negative_or(const JsonObject& obj, const nlohmann::json& doc, const char* key,
                    int fallback) {
  if (!present(doc, key)) return fallback;
  const int64_t v = obj.non_negative_integer(key);
  if (v > (int64_t{1} << 30)) throw_input_error(obj.field(key), "too large");
  return static_cast<int>(v);
}

// Whether a GELU model trains with dropout: any of `keys` (probabilities; `fallback` where
// absent, as transformers' defaults) above 0.
bool any_dropout(const JsonObject& obj, const nlohmann::json& doc,
                 std::initializer_list<const char*> keys, double fallback) {
  for (const char* key : keys) {
    const double p = present(doc, key) ? obj.non_negative_number(key) : fallback;
    if (p > 0) return true;
  }
  return false;
}

bool bool_or(const JsonObject& obj, const nlohmann::json& doc, const char* key, bool fallback) {
  return present(doc, key) ? obj.boolean_or(key, fallback) : fallback;
}

void refuse_fields(const JsonObject& obj, const nlohmann::json& doc, const auto& fields,
                   const std::string& what, const Architecture& a) {
  for (const char* key : fields)
    if (present(doc, key))
      throw_input_error(obj.field(key), what + ", but " + a.model_type + " models have none");
}

// Experts per token, checked against the expert count (named by `experts_key`).
int top_k(const JsonObject& obj, int experts, const char* experts_key) {
  const int k = obj.positive_int("num_experts_per_tok");
  if (k > experts)
    throw_input_error(obj.field("num_experts_per_tok"),
                      std::to_string(k) + " experts per token, more than " + experts_key + " (" +
                          std::to_string(experts) + ")");
  return k;
}

}  // namespace

bool is_hf_config(const nlohmann::json& doc) {
  return doc.is_object() && (doc.contains("architectures") || doc.contains("model_type"));
}

std::vector<std::string> hf_model_types() {
  std::vector<std::string> types;
  for (const Architecture& a : kArchitectures) types.push_back(a.model_type);
  return types;
}

namespace {

// The model JSON of a config.json; `from` gets, for each model field read from one key of the
// file, that key (errors of the model's rules name it: hf_model_from_json).
nlohmann::json convert(const nlohmann::json& doc, const std::string& source,
                       std::map<std::string, std::string>& from) {
  const JsonObject obj(doc, source);
  const Architecture& arch = detect(obj, doc);
  const std::string type = arch.model_type;
  nlohmann::json m = {{"name", model_name(obj, doc, source)},
                      {"dtype", std::string(to_string(hf_dtype(obj, doc)))}};
  const auto read = [&](const char* ours, const char* key, nlohmann::json value) {
    m[ours] = std::move(value);
    from[ours] = key;
  };
  if (present(doc, "_name_or_path")) from["name"] = "_name_or_path";
  if (arch.family != Family::kDeepseek)
    refuse_fields(obj, doc, kMlaFields, "an MLA attention field", arch);
  if (arch.family == Family::kLlama || arch.family == Family::kGpt2 ||
      arch.family == Family::kGptNeox)
    refuse_fields(obj, doc, kExpertFields, "a mixture-of-experts field", arch);

  if (arch.family == Family::kGpt2) {
    read("layers", "n_layer", obj.positive_int("n_layer"));
    read("hidden", "n_embd", obj.positive_int("n_embd"));
    read("heads", "n_head", obj.positive_int("n_head"));
    read("ffn_hidden", "n_inner", positive_or(obj, doc, "n_inner", 4 * obj.positive_int("n_embd")));
    read("seq_len", "n_positions", obj.positive_int("n_positions"));
    read("vocab", "vocab_size", obj.positive_int("vocab_size"));
    m["tied_embeddings"] = bool_or(obj, doc, "tie_word_embeddings", true);
    m["mlp"] = "gelu";
    // GPT2Config's defaults: 0.1 each.
    if (!any_dropout(obj, doc, {"resid_pdrop", "embd_pdrop", "attn_pdrop"}, 0.1))
      m["dropout"] = false;
    return m;
  }

  read("layers", "num_hidden_layers", obj.positive_int("num_hidden_layers"));
  read("hidden", "hidden_size", obj.positive_int("hidden_size"));
  read("heads", "num_attention_heads", obj.positive_int("num_attention_heads"));
  read("ffn_hidden", "intermediate_size", obj.positive_int("intermediate_size"));
  read("seq_len", "max_position_embeddings", obj.positive_int("max_position_embeddings"));
  read("vocab", "vocab_size", obj.positive_int("vocab_size"));
  m["tied_embeddings"] = bool_or(obj, doc, "tie_word_embeddings", false);
  if (arch.family == Family::kGptNeox) {
    m["mlp"] = "gelu";
    m["positions"] = "rope";
    // GPTNeoXConfig's defaults: 0.0 each (the Pythia models train without dropout).
    if (!any_dropout(obj, doc, {"hidden_dropout", "attention_dropout"}, 0.0))
      m["dropout"] = false;
    return m;
  }
  m["mlp"] = "swiglu";
  if (bool_or(obj, doc, "attention_bias", false))
    throw_input_error(obj.field("attention_bias"),
                      "biases on the attention projections are not supported for " + type);

  if (arch.family == Family::kDeepseek) {
    if (non_negative_or(obj, doc, "moe_layer_freq", 1) != 1)
      throw_input_error(obj.field("moe_layer_freq"),
                        "only 1 is supported (every layer after first_k_dense_replace is MoE)");
    m["attention"] = "mla";
    if (present(doc, "q_lora_rank")) read("q_lora_rank", "q_lora_rank", obj.positive_int("q_lora_rank"));
    for (const char* key : {"kv_lora_rank", "qk_rope_head_dim", "v_head_dim"})
      read(key, key, obj.positive_int(key));
    read("qk_nope_head_dim", "qk_nope_head_dim", obj.non_negative_integer("qk_nope_head_dim"));
    const int experts = obj.positive_int("n_routed_experts");
    read("experts", "n_routed_experts", experts);
    read("top_k", "num_experts_per_tok", top_k(obj, experts, "n_routed_experts"));
    read("expert_ffn_hidden", "moe_intermediate_size", obj.positive_int("moe_intermediate_size"));
    const int shared = non_negative_or(obj, doc, "n_shared_experts", 0);
    if (shared > 0) {
      read("shared_experts", "n_shared_experts", shared);
      read("shared_ffn_hidden", "moe_intermediate_size", obj.positive_int("moe_intermediate_size"));
    }
    const int dense = non_negative_or(obj, doc, "first_k_dense_replace", 0);
    if (dense > 0) read("first_dense_layers", "first_k_dense_replace", dense);
    const int mtp = non_negative_or(obj, doc, "num_nextn_predict_layers", 0);
    if (mtp > 0) read("mtp_modules", "num_nextn_predict_layers", mtp);
    // DeepSeek-V3's router scores each expert with a sigmoid (scoring_func, when given).
    const std::string scoring =
        present(doc, "scoring_func") ? obj.string("scoring_func") : "sigmoid";
    if (scoring != "softmax" && scoring != "sigmoid")
      throw_input_error(obj.field("scoring_func"),
                        "expected softmax or sigmoid, got '" + scoring + "'");
    if (scoring == "sigmoid") m["router"] = "sigmoid";
    // DeepSeek-V3 trained in FP8 and dispatches its expert all-to-all in FP8, combining in BF16
    // (the technical report's §3.3.2); its config.json marks the FP8 checkpoint with
    // quantization_config.quant_method "fp8". Other models (Kimi K2's FP8 checkpoint among them)
    // keep the activations' type unless --a2a-dtype says otherwise.
    if (type == "deepseek_v3" && present(doc, "quantization_config")) {
      const JsonObject q = obj.object("quantization_config");
      if (q.has("quant_method") && q.string("quant_method") == "fp8") {
        m["a2a_dispatch_dtype"] = "fp8";
        m["a2a_combine_dtype"] = "bf16";
      }
    }
    return m;
  }

  read("kv_heads", "num_key_value_heads",
       positive_or(obj, doc, "num_key_value_heads", obj.positive_int("num_attention_heads")));
  const bool qwen3 = type == "qwen3" || type == "qwen3_moe";
  if (qwen3) {
    read("head_dim", "head_dim", positive_or(obj, doc, "head_dim", 128));  // Qwen3Config's default
    m["qk_norm"] = true;
  } else if (present(doc, "head_dim")) {
    read("head_dim", "head_dim", obj.positive_int("head_dim"));
  }
  if (type == "qwen2") m["qkv_bias"] = true;
  if (arch.family == Family::kMixtral) {
    const int experts = obj.positive_int("num_local_experts");
    read("experts", "num_local_experts", experts);
    read("top_k", "num_experts_per_tok", top_k(obj, experts, "num_local_experts"));
    read("expert_ffn_hidden", "intermediate_size", obj.positive_int("intermediate_size"));
  } else if (arch.family == Family::kQwen3Moe) {
    if (non_negative_or(obj, doc, "decoder_sparse_step", 1) != 1)
      throw_input_error(obj.field("decoder_sparse_step"),
                        "only 1 is supported (every layer is a mixture of experts)");
    if (present(doc, "mlp_only_layers") && !obj.array("mlp_only_layers").empty())
      throw_input_error(obj.field("mlp_only_layers"),
                        "dense layers among the MoE layers are not supported");
    const int experts = obj.positive_int("num_experts");
    read("experts", "num_experts", experts);
    read("top_k", "num_experts_per_tok", top_k(obj, experts, "num_experts"));
    read("expert_ffn_hidden", "moe_intermediate_size", obj.positive_int("moe_intermediate_size"));
  }
  return m;
}

}  // namespace

nlohmann::json hf_config_to_model_json(const nlohmann::json& doc, const std::string& source) {
  std::map<std::string, std::string> from;
  return convert(doc, source, from);
}

ModelSpec hf_model_from_json(const nlohmann::json& doc, const std::string& source) {
  std::map<std::string, std::string> from;
  const nlohmann::json model = convert(doc, source, from);
  try {
    return model_from_json(model, source);
  } catch (const InputError& e) {
    // "<source>: field 'seq_len': ..." names the config key it came from
    // ("field 'max_position_embeddings'"), when the file has that key (not for a default).
    std::string message = e.what();
    for (const auto& [ours, key] : from) {
      const std::string prefix = source + ": field '" + ours + "'";
      if (message.rfind(prefix, 0) != 0 || !doc.contains(key)) continue;
      message = source + ": field '" + key + "'" + message.substr(prefix.size());
      break;
    }
    throw InputError(message);
  }
}

}  // namespace jaxpp
