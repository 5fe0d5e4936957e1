#include "graph/hf_config.h"

#include <string>

#include <gtest/gtest.h>

#include "graph/json_util.h"
#include "graph/model.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

const std::string kHf = std::string(JAXPP_TEST_DATA_DIR) + "/hf/";

// tests/data/hf/<preset>.json holds the preset's published Hugging Face config.json.
const char* const kPresetConfigs[] = {
    "llama2-7b", "llama3-8b",     "llama3-70b",      "qwen3-8b",
    "qwen3-32b", "mixtral-8x7b",  "mixtral-8x22b",   "deepseek-v3",
    "kimi-k2",   "qwen3-30b-a3b", "qwen3-235b-a22b",
};

TEST(HfConfigTest, EachPresetsConfigGivesThePresetsModel) {
  for (const char* preset : kPresetConfigs) {
    const std::string path = kHf + preset + ".json";
    const ModelSpec hf = load_model(path);
    // The config says nothing of the training sequence length (max_position_embeddings is
    // taken): compare with the preset at that length, layer by layer.
    const ModelSpec p = load_model(preset);
    ModelSpec same_seq = model_from_json(model_shape_to_json(p, hf.seq_len), preset);
    // The all-to-all payload types: DeepSeek-V3's FP8 checkpoint (quantization_config) gives its
    // FP8 dispatch and BF16 combine, as the preset; the others, the activations' type.
    EXPECT_EQ(hf.moe.dispatch_dtype, p.moe.dispatch_dtype) << preset;
    EXPECT_EQ(hf.moe.combine_dtype, p.moe.combine_dtype) << preset;
    nlohmann::json a = model_to_json(hf), b = model_to_json(same_seq);
    a.erase("name");
    b.erase("name");
    EXPECT_EQ(a, b) << preset;
    EXPECT_EQ(hf.total_params(), p.total_params()) << preset;
    EXPECT_EQ(hf.active_params(), p.active_params()) << preset;
    EXPECT_EQ(hf.mtp_params(), p.mtp_params()) << preset;
  }
}

TEST(HfConfigTest, ConfigsAreRecognisedAndOurModelFilesAreNot) {
  EXPECT_TRUE(is_hf_config(read_json_file(kHf + "gpt2.json")));
  EXPECT_FALSE(is_hf_config(
      read_json_file(std::string(JAXPP_TEST_DATA_DIR) + "/graph/tiny_transformer.json")));
}

TEST(HfConfigTest, NameComesFromTheFile) {
  EXPECT_EQ(load_model(kHf + "kimi-k2.json").name, "kimi-k2");
}

// A name taken from a folder whose name is not UTF-8 (any bytes are a valid path): the bytes
// that are not become '?', as control characters do; it ended in nlohmann's raw type_error 316
// when a JSON report quoted it.
TEST(HfConfigTest, ANameFromAPathThatIsNotUtf8IsMadeValid) {
  const nlohmann::json doc = read_json_file(kHf + "llama3-8b.json");
  nlohmann::json without_name = doc;
  without_name.erase("_name_or_path");
  const ModelSpec m = hf_model_from_json(without_name, "/tmp/bad\xff\x01"
                                                        "dir/config.json");
  EXPECT_EQ(m.name, "bad??dir");
  EXPECT_EQ(nlohmann::json(m.name).dump(), "\"bad??dir\"");
}

TEST(HfConfigTest, Gpt2HasLearnedPositionsAndTiedEmbeddings) {
  // openai-community/gpt2: 124,439,808 parameters, of which the final LayerNorm (2·768) is not
  // modelled.
  const ModelSpec m = load_model(kHf + "gpt2.json");
  EXPECT_EQ(m.total_params(), 124'439'808 - 2 * 768);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_TRUE(m.learned_positions());
  EXPECT_EQ(m.seq_len, 1024);
  EXPECT_FALSE(m.no_dropout);  // GPT2Config's dropout defaults: 0.1
}

TEST(HfConfigTest, DropoutFollowsTheConfigsProbabilities) {
  nlohmann::json gpt2 = read_json_file(kHf + "gpt2.json");
  for (const char* key : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) gpt2[key] = 0.0;
  EXPECT_TRUE(hf_model_from_json(gpt2, "gpt2/config.json").no_dropout);
  gpt2["attn_pdrop"] = 0.1;
  EXPECT_FALSE(hf_model_from_json(gpt2, "gpt2/config.json").no_dropout);
  // GPTNeoXConfig's defaults are 0.0: Pythia trains without dropout.
  nlohmann::json neox = read_json_file(kHf + "pythia-1b.json");
  EXPECT_TRUE(hf_model_from_json(neox, "pythia/config.json").no_dropout);
  neox["hidden_dropout"] = 0.1;
  EXPECT_FALSE(hf_model_from_json(neox, "pythia/config.json").no_dropout);
  neox["hidden_dropout"] = -0.1;
  EXPECT_THROW(hf_model_from_json(neox, "pythia/config.json"), InputError);
}

TEST(HfConfigTest, GptNeoxUsesRopeAndGeluWithBiases) {
  // EleutherAI/pythia-1b: 1,011,781,632 parameters, less the final LayerNorm (2·2048).
  const ModelSpec m = load_model(kHf + "pythia-1b.json");
  EXPECT_EQ(m.total_params(), 1'011'781'632 - 2 * 2048);
  EXPECT_TRUE(m.gelu_rope);
  EXPECT_FALSE(m.gated_mlp);
  EXPECT_EQ(m.dtype, Dtype::kFp16);
}

TEST(HfConfigTest, MistralAndQwen2CountTheirPublishedParameters) {
  // mistralai/Mistral-7B-v0.1 7,241,732,096 and Qwen/Qwen2-7B 7,615,616,512, less the final
  // RMSNorm; Qwen2 has biases on q, k and v.
  EXPECT_EQ(load_model(kHf + "mistral-7b.json").total_params(), 7'241'732'096 - 4096);
  const ModelSpec qwen2 = load_model(kHf + "qwen2-7b.json");
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_EQ(qwen2.total_params(), 7'615'616'512 - 3584);
}

nlohmann::json config(const std::string& name) { return read_json_file(kHf + name + ".json"); }

std::string error_for(const nlohmann::json& doc) {
  return error_of([&] { hf_model_from_json(doc, "config.json"); });
}

// The model's own rules (limits, layer counts) named its internal fields, which the file does not
// have: "field 'seq_len': too large" for max_position_embeddings.
TEST(HfConfigTest, ErrorsOfTheModelsRulesNameTheConfigKey) {
  nlohmann::json llama = config("llama3-8b");
  llama["max_position_embeddings"] = 1000000000;
  EXPECT_EQ(error_for(llama).rfind("config.json: field 'max_position_embeddings': too large", 0),
            0u)
      << error_for(llama);
  nlohmann::json deepseek = config("deepseek-v3");
  deepseek["first_k_dense_replace"] = 1000;
  EXPECT_EQ(error_for(deepseek).rfind("config.json: field 'first_k_dense_replace': 1000 dense", 0),
            0u)
      << error_for(deepseek);
  nlohmann::json qwen = config("qwen3-30b-a3b");
  qwen["num_experts"] = 1000000000;
  EXPECT_EQ(error_for(qwen).rfind("config.json: field 'num_experts': too large", 0), 0u)
      << error_for(qwen);
}

TEST(HfConfigTest, AControlCharacterInTheNameIsRefusedNamingTheKey) {
  nlohmann::json llama = config("llama3-8b");
  llama["_name_or_path"] = "meta-llama/x\nimport os";
  EXPECT_EQ(error_for(llama).rfind("config.json: field '_name_or_path': contains a control "
                                   "character",
                                   0),
            0u)
      << error_for(llama);
  // A name taken from the path has them replaced: the file still loads.
  nlohmann::json unnamed = config("llama3-8b");
  unnamed.erase("_name_or_path");
  EXPECT_EQ(hf_model_from_json(unnamed, "/tmp/odd\ndir/config.json").name, "odd?dir");
}

TEST(HfConfigTest, UnsupportedArchitectureIsNamed) {
  nlohmann::json doc = config("llama3-8b");
  doc["architectures"] = {"FalconForCausalLM"};
  doc["model_type"] = "falcon";
  EXPECT_EQ(error_for(doc).rfind("config.json: field 'model_type': unsupported architecture "
                                 "'falcon' (supported model types: llama, ",
                                 0),
            0u);
}

TEST(HfConfigTest, UnsupportedArchitectureWithoutModelTypeNamesArchitectures) {
  nlohmann::json doc = config("llama3-8b");
  doc.erase("model_type");
  doc["architectures"] = {"FalconForCausalLM"};
  EXPECT_NE(error_for(doc).find("field 'architectures': unsupported architecture "
                                "'FalconForCausalLM'"),
            std::string::npos);
}

// model_type decides, as transformers' AutoConfig does: an unsupported one is refused even when
// "architectures" names a class the toolkit reads, one of another family than that class is a
// contradiction, and one of the same family (or with an unknown class) is read as itself.
TEST(HfConfigTest, ModelTypeDecidesAndMustAgreeWithTheArchitecture) {
  nlohmann::json doc = config("mixtral-8x7b");
  doc["model_type"] = "falcon";
  EXPECT_NE(error_for(doc).find("field 'model_type': unsupported architecture 'falcon'"),
            std::string::npos);
  doc["model_type"] = "llama";
  EXPECT_EQ(error_for(doc), "config.json: field 'model_type': 'llama' contradicts "
                            "\"architectures\" MixtralForCausalLM (mixtral); give the model_type "
                            "of that class");
  doc["model_type"] = "mixtral";
  doc["architectures"] = {"SomeFineTunedMixtralForCausalLM"};
  EXPECT_TRUE(hf_model_from_json(doc, "config.json").moe.enabled());
  nlohmann::json llama = config("llama3-8b");
  llama["model_type"] = "mistral";  // the same family: read as mistral, the same fields
  EXPECT_EQ(hf_model_from_json(llama, "config.json").total_params(),
            load_model(kHf + "llama3-8b.json").total_params());
}

TEST(HfConfigTest, MissingFieldIsNamed) {
  nlohmann::json doc = config("deepseek-v3");
  doc.erase("kv_lora_rank");
  EXPECT_EQ(error_for(doc), "config.json: field 'kv_lora_rank': missing (required)");
}

TEST(HfConfigTest, TopKAboveTheExpertsIsNamed) {
  nlohmann::json doc = config("mixtral-8x7b");
  doc["num_experts_per_tok"] = 9;
  EXPECT_EQ(error_for(doc),
            "config.json: field 'num_experts_per_tok': 9 experts per token, more than "
            "num_local_experts (8)");
}

TEST(HfConfigTest, MlaFieldOnALlamaIsNamed) {
  nlohmann::json doc = config("llama3-8b");
  doc["kv_lora_rank"] = 512;
  EXPECT_EQ(error_for(doc),
            "config.json: field 'kv_lora_rank': an MLA attention field, but llama models have "
            "none");
}

TEST(HfConfigTest, ExpertFieldOnADenseQwen3IsNamed) {
  nlohmann::json doc = config("qwen3-8b");
  doc["num_experts"] = 128;
  EXPECT_NE(error_for(doc).find("field 'num_experts': a mixture-of-experts field"),
            std::string::npos);
}

TEST(HfConfigTest, DeepSeekRouterScoresWithASigmoidUnlessScoringFuncSaysSoftmax) {
  nlohmann::json doc = config("deepseek-v3");
  EXPECT_EQ(hf_model_from_json(doc, "config.json").moe.router, MoeRouter::kSigmoid);
  doc["scoring_func"] = "softmax";
  EXPECT_EQ(hf_model_from_json(doc, "config.json").moe.router, MoeRouter::kSoftmax);
  doc["scoring_func"] = "relu";
  EXPECT_EQ(error_for(doc),
            "config.json: field 'scoring_func': expected softmax or sigmoid, got 'relu'");
  EXPECT_EQ(hf_model_from_json(config("mixtral-8x7b"), "config.json").moe.router,
            MoeRouter::kSoftmax);
}

TEST(HfConfigTest, DeepSeekV3DispatchesInFp8OnlyWithItsFp8Checkpoint) {
  nlohmann::json doc = config("deepseek-v3");
  ModelSpec m = hf_model_from_json(doc, "config.json");
  EXPECT_EQ(m.moe.dispatch_dtype, Dtype::kFp8);
  EXPECT_EQ(m.moe.combine_dtype, Dtype::kBf16);
  doc["quantization_config"]["quant_method"] = "awq";
  m = hf_model_from_json(doc, "config.json");
  EXPECT_FALSE(m.moe.dispatch_dtype.has_value());
  doc.erase("quantization_config");
  m = hf_model_from_json(doc, "config.json");
  EXPECT_FALSE(m.moe.dispatch_dtype.has_value());
  // Kimi K2 shares the architecture, not the FP8 dispatch.
  nlohmann::json kimi = config("kimi-k2");
  kimi["quantization_config"] = {{"quant_method", "fp8"}};
  EXPECT_FALSE(hf_model_from_json(kimi, "config.json").moe.dispatch_dtype.has_value());
  // A quantization_config that is not an object is named.
  doc["quantization_config"] = "fp8";
  EXPECT_THROW(hf_model_from_json(doc, "config.json"), InputError);
}

TEST(HfConfigTest, NullMeansAbsent) {
  nlohmann::json doc = config("deepseek-v3");
  doc["q_lora_rank"] = nullptr;  // DeepSeek-V2-Lite style: a plain q projection
  const ModelSpec m = hf_model_from_json(doc, "config.json");
  EXPECT_EQ(m.mla.q_lora_rank, 0);
  // q = W_q·x (h × a·192) instead of W_qb·norm(W_qa·x) in each of the 61 layers and the MTP block.
  const int64_t h = 7168, q = 128 * 192, rank = 1536;
  const int64_t per_layer = h * q - (h * rank + rank * q + rank);
  EXPECT_EQ(m.total_params(), load_model("deepseek-v3").total_params() + 61 * per_layer);
  EXPECT_EQ(m.mtp_params(), load_model("deepseek-v3").mtp_params() + per_layer);
}

TEST(HfConfigTest, LayoutsTheModelCannotExpressAreRefused) {
  nlohmann::json doc = config("qwen3-30b-a3b");
  doc["decoder_sparse_step"] = 2;
  EXPECT_NE(error_for(doc).find("field 'decoder_sparse_step'"), std::string::npos);
  doc = config("qwen3-30b-a3b");
  doc["mlp_only_layers"] = {0};
  EXPECT_NE(error_for(doc).find("field 'mlp_only_layers'"), std::string::npos);
  doc = config("deepseek-v3");
  doc["moe_layer_freq"] = 2;
  EXPECT_NE(error_for(doc).find("field 'moe_layer_freq'"), std::string::npos);
}

}  // namespace
}  // namespace jaxpp
