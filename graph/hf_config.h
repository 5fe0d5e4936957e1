// Hugging Face transformers config.json -> ModelSpec.
//
// A model JSON file with an "architectures" or a "model_type" field is a transformers config;
// load_model (graph/model.h) hands it here. The config is mapped field by field to the
// transformer form of the model JSON (docs/graph.md) and built by the same code as the presets,
// so a preset and its published config give the same model. Supported (architectures entry /
// model_type):
//   LlamaForCausalLM llama · MistralForCausalLM mistral · Qwen2ForCausalLM qwen2 (q/k/v biases)
//   Qwen3ForCausalLM qwen3 (head_dim, q/k norms) · MixtralForCausalLM mixtral (experts)
//   Qwen3MoeForCausalLM qwen3_moe · DeepseekV3ForCausalLM deepseek_v3 / kimi_k2 (MLA, shared
//   experts, first dense layers, MTP modules) · GPT2LMHeadModel gpt2 · GPTNeoXForCausalLM gpt_neox
// The sequence length is the config's max_position_embeddings (n_positions for GPT-2): a config
// does not say what length a model is trained at.
//
// Errors (InputError, one line naming the file and the field): an unsupported architecture, a
// missing or mistyped field, num_experts_per_tok above the expert count, MLA fields
// (kv_lora_rank, ...) or expert fields on an architecture without them, and layouts the model
// cannot express (Qwen3-MoE with decoder_sparse_step != 1 or mlp_only_layers, DeepSeek with
// moe_layer_freq != 1). JSON null counts as absent, as transformers reads it.
//
// Usage:
//   nlohmann::json doc = read_json_file("config.json");
//   if (is_hf_config(doc)) ModelSpec m = hf_model_from_json(doc, "config.json");
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/model.h"

namespace jaxpp {

// True for a JSON object with an "architectures" or a "model_type" field.
bool is_hf_config(const nlohmann::json& doc);

// The model of a transformers config; `source` (the file) names it in errors.
ModelSpec hf_model_from_json(const nlohmann::json& doc, const std::string& source);

// The transformer form (model JSON) a config maps to; hf_model_from_json builds it.
nlohmann::json hf_config_to_model_json(const nlohmann::json& doc, const std::string& source);

// The supported model_type values, for messages and docs.
std::vector<std::string> hf_model_types();

}  // namespace jaxpp
