// Mixture-of-experts, MLA and MTP models: published parameter counts, active-expert FLOPs, the
// kernel listing, JSON validation and round trips.
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/kernels.h"
#include "graph/model.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

struct PublishedCounts {
  const char* preset;
  double total;   // published total parameters
  double active;  // published parameters activated per token
  // Largest relative gap accepted: 1 % unless the published figure is a coarser rounding than
  // 1 % of the count the model's config gives (docs/graph.md, "Presets", explains each).
  double total_tolerance = 0.01;
  double active_tolerance = 0.01;
};

// Sources: docs/graph.md (model cards and technical reports).
const PublishedCounts kPublished[] = {
    {"mixtral-8x7b", 46.7e9, 12.9e9},
    {"mixtral-8x22b", 141e9, 39e9},
    // "37B activated": the config gives 37.55B counting the embedding table as the other models'
    // figures do (36.63B without it); 37B is the report's truncation.
    {"deepseek-v3", 671e9, 37e9, 0.01, 0.016},
    // "1.04T total, 32B activated": the config gives 1.0264T (the released checkpoint's tensors
    // but 60 router biases of 384 and the final norm) and 32.86B.
    {"kimi-k2", 1.04e12, 32e9, 0.014, 0.028},
    // "3.3B activated": the config gives 3.353B.
    {"qwen3-30b-a3b", 30.5e9, 3.3e9, 0.01, 0.017},
    {"qwen3-235b-a22b", 235e9, 22e9},
    {"qwen3-8b", 8.2e9, 8.2e9},
    {"qwen3-32b", 32.8e9, 32.8e9},
};

double rel(double value, double reference) { return std::abs(value / reference - 1); }

TEST(MoeModelTest, PresetsReproduceThePublishedTotalAndActiveCounts) {
  for (const PublishedCounts& p : kPublished) {
    const ModelSpec m = load_model(p.preset);
    EXPECT_LE(rel(static_cast<double>(m.total_params()), p.total), p.total_tolerance)
        << p.preset << " total " << m.total_params();
    EXPECT_LE(rel(static_cast<double>(m.active_params()), p.active), p.active_tolerance)
        << p.preset << " active " << m.active_params();
  }
}

TEST(MoeModelTest, OnlyThreePresetsNeedMoreThanOnePercentAndNoneMoreThanThree) {
  int wider = 0;
  for (const PublishedCounts& p : kPublished) {
    wider += (p.total_tolerance > 0.01) + (p.active_tolerance > 0.01);
    EXPECT_LE(std::max(p.total_tolerance, p.active_tolerance), 0.03) << p.preset;
  }
  EXPECT_EQ(wider, 4);  // deepseek-v3 active, kimi-k2 total and active, qwen3-30b-a3b active
}

TEST(MoeModelTest, CountsEqualTheReleasedCheckpointsLessTheTensorsNotModelled) {
  // Tensor counts of the released safetensors (docs/graph.md says where each comes from):
  // Mixtral-8x7B-v0.1 46,702,792,704 (less the final norm, 4096); Kimi-K2 1,026,408,232,448
  // (less the final norm, 7168, and the 60 MoE layers' router score-correction biases, 384 each).
  EXPECT_EQ(load_model("mixtral-8x7b").total_params(), int64_t{46'702'792'704} - 4096);
  EXPECT_EQ(load_model("kimi-k2").total_params(), int64_t{1'026'408'232'448} - 7168 - 60 * 384);
}

TEST(MoeModelTest, MoeLayerHoldsEveryExpertButATokenPassesThroughTopKAndShared) {
  const ModelSpec m = load_model("deepseek-v3");
  const int64_t h = 7168, expert = 3 * h * 2048;
  const LayerWork& dense = m.layers[1];  // layer0: one of the first three dense layers
  const LayerWork& moe = m.layers[4];    // layer3: the first MoE layer
  EXPECT_FALSE(dense.moe);
  EXPECT_TRUE(moe.moe);
  EXPECT_EQ(dense.active(), dense.params);
  EXPECT_EQ(moe.params - moe.active(), (256 - 8) * expert);
  // Attention and norms are the same in both; the FFNs differ by what a token passes through.
  EXPECT_EQ(moe.active() - dense.params, 9 * expert + 256 * h - 3 * h * 18432);
}

TEST(MoeModelTest, FlopsCountTheActiveExpertsOnly) {
  // A Mixtral layer's FLOPs equal those of a dense layer of FFN 2·14336 (the two experts a
  // token uses) plus the router GEMM, 2·s·h·E.
  const ModelSpec moe = load_model("mixtral-8x7b");
  nlohmann::json dense_json = model_shape_to_json(moe);
  for (const char* key : {"experts", "top_k", "expert_ffn_hidden"}) dense_json.erase(key);
  dense_json["ffn_hidden"] = 2 * 14336;
  const ModelSpec dense = model_from_json(dense_json, "dense.json");
  const double s = 4096, router = 2.0 * s * 4096 * 8;
  EXPECT_DOUBLE_EQ(moe.layers[1].fwd_flops, dense.layers[1].fwd_flops + router);
  EXPECT_DOUBLE_EQ(moe.layers[1].bwd_weight_flops, dense.layers[1].bwd_weight_flops + router);
  // 6·s·(active parameters but the embedding table and the norms) plus the attention cores
  // (12·s²·h per layer): 6·s·12.75B, not 6·s·46.7B.
  const double attention = 32 * 12.0 * s * s * 4096;
  const double matrices = static_cast<double>(moe.active_params() - 32000 * 4096 - 32 * 2 * 4096);
  EXPECT_NEAR(moe.model_flops_per_sequence(), 6.0 * s * matrices + attention, 1e-12 * attention);
}

TEST(MoeModelTest, MtpModuleIsALayerBeforeTheLogitsLeftOutOfTheTotal) {
  const ModelSpec m = load_model("deepseek-v3");
  ASSERT_EQ(m.num_layers(), 61 + 3);
  const LayerWork& mtp = m.layers[62];
  EXPECT_EQ(mtp.name, "mtp0");
  EXPECT_EQ(mtp.kind, LayerKind::kCustom);
  EXPECT_EQ(m.layers.back().kind, LayerKind::kLogits);
  const int64_t h = 7168;
  EXPECT_EQ(m.mtp_params(), m.layers[61].params + 2 * h * h + 3 * h);
  int64_t all = 0;
  for (const LayerWork& l : m.layers) all += l.params;
  EXPECT_EQ(all, m.total_params() + m.mtp_params());
  // Its FLOPs: the block, the 2h -> h projection and the shared head again.
  EXPECT_DOUBLE_EQ(mtp.fwd_flops,
                   m.layers[61].fwd_flops + 2.0 * 4096 * 2 * h * h + 2.0 * 4096 * h * 129280);
}

TEST(MoeModelTest, KernelsListRouterSharedAndRoutedExpertsAndMlaProjections) {
  const ModelSpec m = load_model("deepseek-v3");
  const LayerKernels moe = layer_kernels(m, 4);
  std::vector<std::string> names;
  for (const GemmKernel& g : moe.gemms) names.emplace_back(g.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"q_down", "q_up", "kv_down", "kv_up", "proj", "router",
                                      "shared_up", "shared_down", "expert_up", "expert_down"}));
  const GemmKernel& up = moe.gemms[8];
  EXPECT_EQ(up.count, 256);
  EXPECT_DOUBLE_EQ(up.token_fraction, 8.0 / 256);
  EXPECT_EQ(up.n, 2 * 2048);
  EXPECT_EQ(moe.gemms[1].n, 128 * 192);  // q_up: heads × (nope + rope)
  EXPECT_EQ(moe.gemms[3].n, 128 * 256);  // kv_up: heads × (nope + v)
  EXPECT_EQ(moe.attention.head_dim, 192);
  EXPECT_EQ(moe.attention.v_head_dim, 128);
  EXPECT_DOUBLE_EQ(moe.attention.fwd_flops_per_token(10), 2.0 * 10 * 128 * (192 + 128));
  // GEMM FLOPs per token = 2 × the active matrix parameters of the layer.
  double flops = 0;
  for (const GemmKernel& g : moe.gemms) flops += 2 * g.n * g.k * g.count * g.token_fraction;
  const int64_t norms = 2 * 7168 + 1536 + 512;
  EXPECT_DOUBLE_EQ(flops, 2.0 * static_cast<double>(m.layers[4].active() - norms));
  // The dense layers keep one MLP.
  const LayerKernels dense = layer_kernels(m, 1);
  EXPECT_EQ(dense.gemms[5].name, "mlp_up");
  EXPECT_EQ(dense.gemms[5].n, 2 * 18432);
}

TEST(MoeModelTest, Qwen3AttentionUsesItsOwnHeadDim) {
  const ModelSpec m = load_model("qwen3-30b-a3b");
  const LayerKernels k = layer_kernels(m, 1);
  EXPECT_EQ(k.gemms[0].n, (32 + 2 * 4) * 128);  // q, k, v at head_dim 128, not 2048 / 32
  EXPECT_EQ(k.attention.head_dim, 128);
}

TEST(MoeModelTest, MoePresetsRoundTripThroughBothJsonForms) {
  for (const char* name : {"deepseek-v3", "kimi-k2", "mixtral-8x7b", "qwen3-30b-a3b"}) {
    const ModelSpec m = load_model(name);
    const ModelSpec shape = model_from_json(model_shape_to_json(m), "shape.json");
    EXPECT_EQ(model_to_json(shape), model_to_json(m)) << name;
    const ModelSpec back = model_from_json(model_to_json(m), "explicit.json");
    EXPECT_EQ(model_to_json(back), model_to_json(m)) << name;
    EXPECT_EQ(back.total_params(), m.total_params()) << name;
    EXPECT_EQ(back.active_params(), m.active_params()) << name;
    EXPECT_EQ(back.mtp_params(), m.mtp_params()) << name;
    for (int l = 0; l < m.num_layers(); ++l)
      EXPECT_EQ(layer_kernels(back, l).gemms.size(), layer_kernels(m, l).gemms.size()) << name;
  }
}

// A small MoE model in the transformer form with `key` set to `value` (JSON text).
std::string tiny_moe_error(const std::string& key, const std::string& value) {
  nlohmann::json j = nlohmann::json::parse(R"({"name": "t", "layers": 2, "hidden": 64,
      "heads": 4, "seq_len": 16, "vocab": 100, "mlp": "swiglu", "experts": 4, "top_k": 2,
      "expert_ffn_hidden": 32})");
  if (value.empty())
    j.erase(key);
  else
    j[key] = nlohmann::json::parse(value);
  return error_of([&] { model_from_json(j, "m.json"); });
}

TEST(MoeModelTest, TinyMoeModelLoads) { EXPECT_EQ(tiny_moe_error("top_k", "2"), "<no error>"); }

TEST(MoeModelTest, TopKAboveTheExpertCountIsNamed) {
  EXPECT_EQ(tiny_moe_error("top_k", "5"),
            "m.json: field 'top_k': top_k (5) is larger than experts (4)");
}

TEST(MoeModelTest, MissingTopKIsNamed) {
  EXPECT_EQ(tiny_moe_error("top_k", ""), "m.json: field 'top_k': missing (required)");
}

TEST(MoeModelTest, MoeFieldWithoutExpertsIsNamed) {
  EXPECT_NE(
      tiny_moe_error("experts", "").find("a mixture-of-experts field, but 'experts' is not given"),
      std::string::npos);
}

TEST(MoeModelTest, MlaFieldOnAModelWithoutMlaIsNamed) {
  EXPECT_NE(tiny_moe_error("kv_lora_rank", "16").find("field 'kv_lora_rank': an MLA field"),
            std::string::npos);
}

TEST(MoeModelTest, MlaNeedsItsHeadSizes) {
  EXPECT_EQ(tiny_moe_error("attention", R"("mla")"),
            "m.json: field 'kv_lora_rank': missing (required)");
}

TEST(MoeModelTest, ExpertsNeedSwiglu) {
  EXPECT_NE(tiny_moe_error("mlp", R"("gelu")").find("field 'experts': needs \"mlp\": \"swiglu\""),
            std::string::npos);
}

TEST(MoeModelTest, SharedFfnWithoutSharedExpertsIsNamed) {
  EXPECT_NE(tiny_moe_error("shared_ffn_hidden", "16").find("field 'shared_ffn_hidden'"),
            std::string::npos);
}

TEST(MoeModelTest, MoreDenseLayersThanLayersIsNamed) {
  EXPECT_NE(tiny_moe_error("first_dense_layers", "3").find("field 'first_dense_layers'"),
            std::string::npos);
}

TEST(MoeModelTest, ExplicitMoeFlagOnANonTransformerLayerIsNamed) {
  const nlohmann::json j = nlohmann::json::parse(R"({"name": "x", "layers_list": [{"name": "a",
      "kind": "custom", "fwd_flops": 1, "bwd_input_flops": 1, "bwd_weight_flops": 1,
      "params": 10, "output_bytes": 4, "stash_bytes": 0, "moe": true}]})");
  EXPECT_NE(error_of([&] {
              model_from_json(j, "x.json");
            }).find("layers_list[0]: field 'moe': only a layer of kind transformer"),
            std::string::npos);
}

TEST(MoeModelTest, DenseModelsAreClassicAndMoeModelsAreNot) {
  EXPECT_TRUE(load_model("llama3-70b").is_classic_transformer());
  EXPECT_TRUE(load_model("gpt3-175b").is_classic_transformer());
  EXPECT_FALSE(load_model("mixtral-8x7b").is_classic_transformer());
  EXPECT_FALSE(load_model("qwen3-8b").is_classic_transformer());
}

TEST(MoeModelTest, RouterIsSoftmaxByDefaultSigmoidForDeepSeekAndKimiAndRoundTrips) {
  EXPECT_EQ(load_model("mixtral-8x7b").moe.router, MoeRouter::kSoftmax);
  EXPECT_EQ(load_model("deepseek-v3").moe.router, MoeRouter::kSigmoid);
  EXPECT_EQ(load_model("kimi-k2").moe.router, MoeRouter::kSigmoid);
  const nlohmann::json j = model_to_json(load_model("deepseek-v3"));
  EXPECT_EQ(j.at("router"), "sigmoid");
  EXPECT_EQ(model_from_json(j, "m.json").moe.router, MoeRouter::kSigmoid);
  EXPECT_FALSE(model_to_json(load_model("mixtral-8x7b")).contains("router"));
}

TEST(MoeModelTest, UnknownRouterIsNamed) {
  nlohmann::json j = model_to_json(load_model("mixtral-8x7b"));
  j["router"] = "topk";
  EXPECT_EQ(error_of([&] { model_from_json(j, "m.json"); }),
            "m.json: field 'router': expected softmax or sigmoid, got 'topk'");
}

// DeepSeek-V3's shape in FP8 with `low_precision_activations` set to `list` (JSON text; none
// when empty).
ModelSpec deepseek_v3_fp8(const std::string& list) {
  nlohmann::json j = model_shape_to_json(load_model("deepseek-v3"));
  j["dtype"] = "fp8";
  if (!list.empty()) j["low_precision_activations"] = nlohmann::json::parse(list);
  return model_from_json(j, "m.json");
}

// The DeepSeek-V3 report's Section 3.3.3: the attention output kept once in E5M6 (1.5 bytes and
// a 4-byte scale per 128 elements) instead of 16 bits plus the projection's FP8 copy, and the
// routed experts' SwiGLU inputs in FP8 (1 byte and a scale per 128) instead of 16 bits. By hand,
// per token: attention output a·v_head_dim = 128·128 = 16384 elements, 2 + 1 bytes before and
// 1.5 + 4/128 after: 16384 · 1.46875 = 24064 bytes less; SwiGLU inputs 2·top_k·expert_ffn =
// 2·8·2048 = 32768 elements, 2 bytes before and 1 + 4/128 after: 32768 · 0.96875 = 31744 less.
TEST(MoeModelTest, LowPrecisionActivationsDropTheBytesTheReportNames) {
  const ModelSpec plain = deepseek_v3_fp8("");
  const ModelSpec out = deepseek_v3_fp8(R"(["attention_out"])");
  const ModelSpec both = deepseek_v3_fp8(R"(["attention_out", "moe_swiglu_input"])");
  constexpr int kDense = 1, kMoe = 4;  // layer 0 is the embedding; 3 dense layers
  ASSERT_FALSE(plain.layers[kDense].moe);
  ASSERT_TRUE(plain.layers[kMoe].moe);
  for (int l : {kDense, kMoe}) {
    const LayerKernels p = layer_kernels(plain, l), o = layer_kernels(out, l);
    EXPECT_DOUBLE_EQ(p.stash_split_bytes_per_token - o.stash_split_bytes_per_token, 24064) << l;
    EXPECT_DOUBLE_EQ(p.stash_sequence_bytes_per_token, o.stash_sequence_bytes_per_token) << l;
  }
  const LayerKernels o = layer_kernels(out, kMoe), b = layer_kernels(both, kMoe);
  EXPECT_DOUBLE_EQ(o.stash_split_bytes_per_token - b.stash_split_bytes_per_token, 31744);
  // Dense layers have no routed experts: the SwiGLU rule leaves them alone.
  EXPECT_DOUBLE_EQ(layer_kernels(out, kDense).stash_split_bytes_per_token,
                   layer_kernels(both, kDense).stash_split_bytes_per_token);
  // The recompute module moe_act still frees the FP8 product (top_k·expert_ffn bytes).
  EXPECT_DOUBLE_EQ(b.moe_act_recompute_bytes_per_token, 8 * 2048);
  // The casts: read 16 bits and write the copy (forward), the reverse (backward).
  const auto bytes_of = [](const LayerKernels& k, std::string_view name) {
    for (const ElementwiseKernel& e : k.elementwise)
      if (e.name == name) return e.fwd_bytes_per_token + e.bwd_bytes_per_token;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(bytes_of(b, "attention_out_cache"), 2 * 16384 * (2 + 1.5 + 4.0 / 128));
  EXPECT_DOUBLE_EQ(bytes_of(b, "moe_swiglu_input_cache"), 2 * 32768 * (2 + 1 + 4.0 / 128));
  EXPECT_EQ(bytes_of(layer_kernels(plain, kMoe), "attention_out_cache"), -1.0);
  EXPECT_EQ(bytes_of(layer_kernels(out, kDense), "moe_swiglu_input_cache"), -1.0);
}

TEST(MoeModelTest, LowPrecisionActivationsRoundTripAndAreValidated) {
  const ModelSpec both = deepseek_v3_fp8(R"(["moe_swiglu_input", "attention_out"])");
  EXPECT_TRUE(both.low_precision_attention_out);
  EXPECT_TRUE(both.low_precision_moe_swiglu_input);
  EXPECT_EQ(model_shape_to_json(both).at("low_precision_activations"),
            nlohmann::json::parse(R"(["attention_out", "moe_swiglu_input"])"));
  const ModelSpec back = model_from_json(model_to_json(both), "explicit.json");
  EXPECT_TRUE(back.low_precision_attention_out && back.low_precision_moe_swiglu_input);
  EXPECT_FALSE(model_shape_to_json(deepseek_v3_fp8("")).contains("low_precision_activations"));
  const std::string field = "m.json: field 'low_precision_activations': ";
  EXPECT_EQ(error_of([] { deepseek_v3_fp8(R"(["attention_out", "attention_out"])"); }),
            field + "\"attention_out\" given twice");
  EXPECT_EQ(error_of([] { deepseek_v3_fp8(R"(["logits"])"); }),
            field + "expected \"attention_out\" or \"moe_swiglu_input\", got \"logits\"");
  EXPECT_EQ(error_of([] { deepseek_v3_fp8(R"([1])"); }),
            field + "expected a list of \"attention_out\" and \"moe_swiglu_input\"");
  // A 16-bit model reads the list (a corpus row may train it in FP8) and keeps its 16-bit stash;
  // simulating it in 16 bits is refused (costmodel/memory.cc).
  nlohmann::json bf16 = model_shape_to_json(load_model("deepseek-v3"));
  bf16["low_precision_activations"] = {"attention_out"};
  const ModelSpec sixteen = model_from_json(bf16, "m.json");
  EXPECT_TRUE(sixteen.low_precision_attention_out);
  EXPECT_DOUBLE_EQ(layer_kernels(sixteen, 4).stash_split_bytes_per_token,
                   layer_kernels(load_model("deepseek-v3"), 4).stash_split_bytes_per_token);
  nlohmann::json dense = model_shape_to_json(load_model("llama3-8b"));
  dense["dtype"] = "fp8";
  dense["low_precision_activations"] = {"moe_swiglu_input"};
  EXPECT_EQ(error_of([&] { model_from_json(dense, "m.json"); }),
            field + "\"moe_swiglu_input\" needs routed experts ('experts')");
}

}  // namespace
}  // namespace jaxpp
