#include "graph/model.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "graph/error.h"
#include "graph/json_util.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

const std::string kData = std::string(JAXPP_TEST_DATA_DIR) + "/graph/";

struct MegatronRow {
  const char* preset;
  double table_params;  // "params" column of Megatron-LM Table 1
  int heads, hidden, layers;
};

// Narayanan et al. 2021, Table 1 (VALIDATION.md).
const MegatronRow kTable1[] = {
    {"megatron-1.7b", 1.7e9, 24, 2304, 24},        {"megatron-3.6b", 3.6e9, 32, 3072, 30},
    {"megatron-7.5b", 7.5e9, 32, 4096, 36},        {"megatron-18.4b", 18.4e9, 48, 6144, 40},
    {"megatron-39.1b", 39.1e9, 64, 8192, 48},      {"megatron-76.1b", 76.1e9, 80, 10240, 60},
    {"megatron-145.6b", 145.6e9, 96, 12288, 80},   {"megatron-310.1b", 310.1e9, 128, 16384, 96},
    {"megatron-529.6b", 529.6e9, 128, 20480, 105}, {"megatron-1t", 1008e9, 160, 25600, 128},
};

void expect_models_equal(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.heads, b.heads);
  EXPECT_EQ(a.kv_heads, b.kv_heads);
  EXPECT_EQ(a.ffn_hidden, b.ffn_hidden);
  EXPECT_EQ(a.seq_len, b.seq_len);
  EXPECT_EQ(a.vocab, b.vocab);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.gated_mlp, b.gated_mlp);
  EXPECT_EQ(a.num_transformer_layers, b.num_transformer_layers);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWork &x = a.layers[i], &y = b.layers[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.fwd_flops, y.fwd_flops);
    EXPECT_EQ(x.bwd_input_flops, y.bwd_input_flops);
    EXPECT_EQ(x.bwd_weight_flops, y.bwd_weight_flops);
    EXPECT_EQ(x.params, y.params);
    EXPECT_EQ(x.output_bytes, y.output_bytes);
    EXPECT_EQ(x.stash_bytes, y.stash_bytes);
    EXPECT_EQ(x.recompute_flops, y.recompute_flops);
    EXPECT_EQ(x.tp_allreduce_bytes, y.tp_allreduce_bytes);
  }
}

TEST(ModelTest, MegatronPresetsMatchTable1ParameterCounts) {
  for (const MegatronRow& row : kTable1) {
    const ModelSpec m = load_model(row.preset);
    EXPECT_EQ(m.heads, row.heads) << row.preset;
    EXPECT_EQ(m.hidden, row.hidden) << row.preset;
    EXPECT_EQ(m.num_transformer_layers, row.layers) << row.preset;
    const double p = static_cast<double>(m.total_params());
    // Within 1%, or within the table's printed precision (one decimal of a billion): the 1.7B and
    // 3.6B rows are the paper's own formula (1.652B, 3.562B) rounded to one decimal.
    const double tolerance = std::max(0.01 * row.table_params, 0.05e9);
    EXPECT_NEAR(p, row.table_params, tolerance) << row.preset;
  }
}

TEST(ModelTest, MegatronParameterCountEqualsThePapersFormulaExactly) {
  for (const MegatronRow& row : kTable1) {
    const ModelSpec m = load_model(row.preset);
    const int64_t l = m.num_transformer_layers, h = m.hidden, v = m.vocab, s = m.seq_len;
    // P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)) = 12lh² + 13lh + (V+s)h
    EXPECT_EQ(m.total_params(), 12 * l * h * h + 13 * l * h + (v + s) * h) << row.preset;
  }
}

// FP8 training keeps activations in 16 bits: a model written with "dtype": "fp8" sends the same
// pipeline messages and keeps the same logits as its 16-bit twin (the output head and the loss run
// in BF16), whether the dtype is in the model file or set after building (a corpus row's fp8).
TEST(ModelTest, AnFp8ModelsActivationsAndLogitsAreSixteenBit) {
  nlohmann::json j = nlohmann::json::parse(
      R"({"name":"x","layers":2,"hidden":64,"heads":4,"seq_len":32,"vocab":100})");
  const ModelSpec bf16 = model_from_json(j, "m.json");
  j["dtype"] = "fp8";
  const ModelSpec fp8 = model_from_json(j, "m.json");
  ASSERT_EQ(fp8.dtype, Dtype::kFp8);
  ASSERT_EQ(fp8.num_layers(), bf16.num_layers());
  for (int l = 0; l < fp8.num_layers(); ++l) {
    const LayerWork &a = fp8.layers[static_cast<size_t>(l)], &b = bf16.layers[static_cast<size_t>(l)];
    EXPECT_EQ(a.output_bytes, b.output_bytes) << a.name;
    // A transformer layer's stash differs (its FP8 GEMM inputs are kept as FP8 copies).
    if (a.kind != LayerKind::kTransformer) {
      EXPECT_EQ(a.stash_bytes, b.stash_bytes) << a.name;
    }
    EXPECT_EQ(a.tp_allreduce_bytes, b.tp_allreduce_bytes) << a.name;
  }
  EXPECT_EQ(fp8.layers[0].output_bytes, 32 * 64 * 2);  // the embedding's output, 16-bit
  EXPECT_EQ(activation_dtype_bytes(Dtype::kFp8), 2);
  EXPECT_EQ(activation_dtype_bytes(Dtype::kFp32), 4);
}

TEST(ModelTest, HardwareFlopsWithFullRecomputeEqualMegatronFormula) {
  for (const MegatronRow& row : kTable1) {
    const ModelSpec m = load_model(row.preset);
    const double s = m.seq_len, l = m.num_transformer_layers, h = m.hidden, v = m.vocab;
    const double expected = 96 * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
    EXPECT_NEAR(m.hardware_flops_per_sequence(Recompute::kFull), expected, expected * 1e-12)
        << row.preset;
    // Without recompute: one transformer forward less, 72·s·l·h²·(1 + s/(6h) + V/(12·l·h)).
    const double model_flops = 72 * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));
    EXPECT_NEAR(m.model_flops_per_sequence(), model_flops, model_flops * 1e-12) << row.preset;
  }
}

TEST(ModelTest, TransformerLayerWorkFollowsMegatronPerLayerFormulas) {
  const ModelSpec m = load_model("gpt3-13b");
  const double s = m.seq_len, h = m.hidden, a = m.heads;
  const LayerWork& layer = m.layers[1];
  ASSERT_EQ(layer.kind, LayerKind::kTransformer);
  EXPECT_DOUBLE_EQ(layer.fwd_flops, 24 * s * h * h + 4 * s * s * h);
  EXPECT_DOUBLE_EQ(layer.bwd_input_flops, s * h * (24 * h + 8 * s));
  EXPECT_DOUBLE_EQ(layer.bwd_weight_flops, 24 * s * h * h);
  EXPECT_EQ(layer.params, int64_t(12 * h * h + 13 * h));
  EXPECT_EQ(layer.stash_bytes[0], int64_t(s * h * (34 + 5 * a * s / h)));
  EXPECT_EQ(layer.stash_bytes[1], int64_t(34 * s * h));
  EXPECT_EQ(layer.stash_bytes[2], int64_t(2 * s * h));
  EXPECT_EQ(layer.output_bytes, int64_t(2 * s * h));
  EXPECT_EQ(layer.tp_allreduce_bytes, int64_t(4 * s * h));
  EXPECT_DOUBLE_EQ(layer.recompute_flops[2], layer.fwd_flops);
  EXPECT_DOUBLE_EQ(layer.recompute_flops[1], 4 * s * s * h);
  const LayerWork& logits = m.layers.back();
  EXPECT_EQ(logits.kind, LayerKind::kLogits);
  EXPECT_DOUBLE_EQ(logits.fwd_flops, 2 * s * h * m.vocab);
  EXPECT_EQ(logits.params, 0);  // tied to the embedding
  EXPECT_EQ(m.layers.front().params, int64_t(m.vocab) * m.hidden + int64_t(m.seq_len) * m.hidden);
}

TEST(ModelTest, LlamaPresetsHavePublishedParameterCounts) {
  const std::pair<const char*, double> expected[] = {
      {"llama2-7b", 6.74e9},   {"llama2-70b", 68.98e9},  {"llama3-8b", 8.03e9},
      {"llama3-70b", 70.55e9}, {"llama3-405b", 405.0e9}, {"gpt3-175b", 175e9},
      {"bert-large", 335e6}};
  for (const auto& [name, params] : expected)
    EXPECT_NEAR(static_cast<double>(load_model(name).total_params()), params, 0.01 * params)
        << name;
}

TEST(ModelTest, Llama3UsesGroupedQueryAttentionAndUntiedEmbeddings) {
  const ModelSpec m = load_model("llama3-405b");
  EXPECT_EQ(m.num_transformer_layers, 126);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_TRUE(m.gated_mlp);
  EXPECT_FALSE(m.tied_embeddings);
  const int64_t h = 16384, f = 53248, kv_dim = 8 * 128;
  EXPECT_EQ(m.layers[1].params, 2 * h * h + 2 * h * kv_dim + 3 * h * f + 2 * h);
  EXPECT_EQ(m.layers.back().params, int64_t(128256) * h);
  EXPECT_EQ(m.layers.front().params, int64_t(128256) * h);  // RoPE: no position table
}

TEST(ModelTest, PresetNamesAreCaseInsensitive) {
  EXPECT_EQ(load_model("GPT3-13B").total_params(), load_model("gpt3-13b").total_params());
}

TEST(ModelTest, EveryPresetRoundTripsThroughJson) {
  const auto names = model_preset_names();
  EXPECT_EQ(names.size(), 29u);
  for (const std::string& name : names) {
    const ModelSpec m = load_model(name);
    const ModelSpec back = model_from_json(model_to_json(m), name + ".json");
    expect_models_equal(m, back);
    EXPECT_EQ(model_to_json(back), model_to_json(m)) << name;
  }
}

// The operator model times an explicit-layer model from its header's shape: a header that
// contradicts the layers' FLOPs mixed two models (hidden 2048 -> 4096 changed the step
// 0.27 -> 0.62 s with every layer unchanged).
TEST(ModelTest, ExplicitHeaderThatContradictsItsLayersIsRefused) {
  const nlohmann::json written = model_to_json(load_model("gpt3-1.3b"));
  EXPECT_NO_THROW(model_from_json(written, "m.json"));
  nlohmann::json wider = written;
  wider["hidden"] = 4096;
  const std::string msg = error_of([&] { model_from_json(wider, "m.json"); });
  EXPECT_NE(msg.find("m.json: layers_list[1]: field 'fwd_flops': "), std::string::npos) << msg;
  EXPECT_NE(msg.find("the model's shape (hidden 4096, heads 16, ffn_hidden 8192, seq_len 2048)"),
            std::string::npos)
      << msg;
  // A source's own FLOP count within 10 % of the shape's is kept; 15 % is not.
  nlohmann::json near = written;
  near["layers_list"][3]["fwd_flops"] = near["layers_list"][3]["fwd_flops"].get<double>() * 1.09;
  EXPECT_NO_THROW(model_from_json(near, "m.json"));
  near["layers_list"][3]["fwd_flops"] = written["layers_list"][3]["fwd_flops"].get<double>() * 0.85;
  EXPECT_NE(error_of([&] { model_from_json(near, "m.json"); }).find("layers_list[3]"),
            std::string::npos);
  // Without a whole shape (no heads) the layers are the model, as before.
  nlohmann::json headless = wider;
  headless.erase("heads");
  headless.erase("kv_heads");
  EXPECT_NO_THROW(model_from_json(headless, "m.json"));
}

TEST(ModelTest, TransformerFormFileLoadsWithDefaults) {
  const ModelSpec m = load_model(kData + "tiny_transformer.json");
  EXPECT_EQ(m.name, "tiny");
  EXPECT_EQ(m.num_layers(), 6);
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_TRUE(m.gated_mlp);
  const int64_t h = 64, kv_dim = 2 * 16;
  EXPECT_EQ(m.layers[1].params, 2 * h * h + 2 * h * kv_dim + 3 * h * 192 + 2 * h);
}

TEST(ModelTest, ExplicitFormFileLoadsLayersAsGiven) {
  const ModelSpec m = load_model(kData + "explicit_model.json");
  ASSERT_EQ(m.num_layers(), 4);
  EXPECT_EQ(m.dtype, Dtype::kFp32);
  EXPECT_EQ(m.num_transformer_layers, 1);
  EXPECT_EQ(m.layers[1].stash_bytes, (std::array<int64_t, 4>{65536, 16384, 4096, 4096}));
  EXPECT_EQ(m.layers[2].stash_bytes, (std::array<int64_t, 4>{1024, 1024, 1024, 1024}));
  EXPECT_EQ(m.layers[2].kind, LayerKind::kCustom);
  EXPECT_DOUBLE_EQ(m.layers[2].recompute_flops[2], 3e9);  // default: full redoes the forward
  EXPECT_DOUBLE_EQ(m.layers[1].recompute_flops[1], 1e8);
  EXPECT_EQ(m.total_params(), 121000);
  expect_models_equal(m, model_from_json(model_to_json(m), "again"));
}

// A name goes into reports and into the comment lines of the hand-off files, where a newline
// would start a line of code (sweep 5): control characters are refused, in both forms.
TEST(ModelTest, NameWithAControlCharacterIsRefused) {
  const auto shape = nlohmann::json::parse(
      R"({"name":"tiny\nimport os","layers":2,"hidden":8,"heads":2,"seq_len":4,"vocab":10})");
  EXPECT_EQ(error_of([&] { model_from_json(shape, "m.json"); }),
            "m.json: field 'name': contains a control character (it is printed in reports and "
            "written into the comments of the hand-off files), got \"tiny\\nimport os\"");
  for (const char* name : {"a\x1b[2Jb", "tab\there", "del\x7f"}) {
    nlohmann::json explicit_form = model_to_json(load_model("gpt3-1.3b"));
    explicit_form["name"] = name;
    EXPECT_NE(error_of([&] {
                model_from_json(explicit_form, "e.json");
              }).find("e.json: field 'name': contains a control character"),
              std::string::npos)
        << name;
  }
  // Every preset's name passes the reader (its shape read back as a model file).
  for (const std::string& preset : model_preset_names())
    EXPECT_EQ(error_of([&] { model_from_json(model_shape_to_json(load_model(preset)), preset); }),
              "<no error>");
}

TEST(ModelTest, MissingFieldIsNamed) {
  const auto doc =
      nlohmann::json::parse(R"({"name":"x","layers":2,"hidden":8,"heads":2,"vocab":10})");
  const std::string msg = error_of([&] { model_from_json(doc, "m.json"); });
  EXPECT_NE(msg.find("m.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'seq_len'"), std::string::npos) << msg;
}

TEST(ModelTest, NegativeFieldIsNamed) {
  const auto doc = nlohmann::json::parse(
      R"({"name":"x","layers":-3,"hidden":8,"heads":2,"seq_len":4,"vocab":10})");
  const std::string msg = error_of([&] { model_from_json(doc, "m.json"); });
  EXPECT_NE(msg.find("'layers'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("-3"), std::string::npos) << msg;
}

TEST(ModelTest, NegativeExplicitLayerFieldIsNamedWithItsIndex) {
  const auto doc = nlohmann::json::parse(R"({"name":"x","layers_list":[
      {"name":"a","fwd_flops":1,"bwd_input_flops":1,"bwd_weight_flops":1,"params":1,
       "output_bytes":1,"stash_bytes":1},
      {"name":"b","fwd_flops":1,"bwd_input_flops":-1,"bwd_weight_flops":1,"params":1,
       "output_bytes":1,"stash_bytes":1}]})");
  const std::string msg = error_of([&] { model_from_json(doc, "m.json"); });
  EXPECT_NE(msg.find("layers_list[1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'bwd_input_flops'"), std::string::npos) << msg;
}

// Recompute op of an explicit layer: its own "op" entries, or full's values when absent; both
// written back and read again unchanged.
TEST(ModelTest, ExplicitLayerOpRecomputeDefaultsToFullAndRoundTrips) {
  const auto doc = nlohmann::json::parse(R"({"name":"x","layers_list":[
      {"name":"a","fwd_flops":9,"bwd_input_flops":1,"bwd_weight_flops":1,"params":1,
       "output_bytes":1,"stash_bytes":{"none":40,"selective":30,"full":10,"op":20},
       "recompute_flops":{"selective":2,"full":9,"op":5}},
      {"name":"b","fwd_flops":7,"bwd_input_flops":1,"bwd_weight_flops":1,"params":1,
       "output_bytes":1,"stash_bytes":{"none":40,"selective":30,"full":10}}]})");
  const ModelSpec m = model_from_json(doc, "m.json");
  EXPECT_EQ(m.layers[0].stash_bytes, (std::array<int64_t, 4>{40, 30, 10, 20}));
  EXPECT_EQ(m.layers[0].recompute_flops, (std::array<double, 4>{0, 2, 9, 5}));
  EXPECT_EQ(m.layers[1].stash_bytes, (std::array<int64_t, 4>{40, 30, 10, 10}));
  EXPECT_EQ(m.layers[1].recompute_flops, (std::array<double, 4>{0, 0, 7, 7}));
  EXPECT_DOUBLE_EQ(m.hardware_flops_per_sequence(Recompute::kOp) -
                       m.hardware_flops_per_sequence(Recompute::kNone),
                   12);
  const nlohmann::json back = model_to_json(m);
  EXPECT_EQ(back["layers_list"][1]["stash_bytes"]["op"], 10);
  expect_models_equal(m, model_from_json(back, "again"));
  auto bad = doc;
  bad["layers_list"][0]["recompute_flops"]["layer"] = 1;
  EXPECT_NE(error_of([&] { model_from_json(bad, "m.json"); }).find("layer"), std::string::npos);
}

TEST(ModelTest, Fp8ParamsDefaultOnIsWrittenOnlyWhenOffAndNeedsAnFp8Model) {
  const auto base = nlohmann::json::parse(
      R"({"name":"x","layers":2,"hidden":8,"heads":2,"seq_len":4,"vocab":10,"dtype":"fp8"})");
  EXPECT_TRUE(model_from_json(base, "m.json").fp8_params) << "FP8 weights by default";
  auto off = base;
  off["fp8_params"] = false;
  const ModelSpec m = model_from_json(off, "m.json");
  EXPECT_FALSE(m.fp8_params);
  EXPECT_EQ(model_to_json(m).value("fp8_params", true), false);
  EXPECT_FALSE(model_from_json(model_to_json(m), "again").fp8_params);
  EXPECT_FALSE(model_to_json(model_from_json(base, "m.json")).contains("fp8_params"));
  auto bf16 = off;
  bf16["dtype"] = "bf16";
  const std::string msg = error_of([&] { model_from_json(bf16, "m.json"); });
  EXPECT_NE(msg.find("'fp8_params'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fp8"), std::string::npos) << msg;
  auto odd = base;
  odd["fp8_params"] = "yes";
  EXPECT_FALSE(error_of([&] { model_from_json(odd, "m.json"); }).empty());
}

TEST(ModelTest, Fp8ScalingIsReadWrittenOnlyWhenNotCurrentAndNeedsAnFp8Model) {
  const auto base = nlohmann::json::parse(
      R"({"name":"x","layers":2,"hidden":8,"heads":2,"seq_len":4,"vocab":10,"dtype":"fp8"})");
  EXPECT_EQ(model_from_json(base, "m.json").fp8_scaling, Fp8Scaling::kCurrent)
      << "current by default";
  for (const auto& [text, scaling] : {std::pair{"delayed", Fp8Scaling::kDelayed},
                                      std::pair{"mxfp8", Fp8Scaling::kMxfp8},
                                      std::pair{"MXFP8", Fp8Scaling::kMxfp8}}) {
    auto j = base;
    j["fp8_scaling"] = text;
    const ModelSpec m = model_from_json(j, "m.json");
    EXPECT_EQ(m.fp8_scaling, scaling) << text;
    EXPECT_EQ(model_to_json(m).value("fp8_scaling", ""), to_string(scaling)) << text;
    EXPECT_EQ(model_from_json(model_to_json(m), "again").fp8_scaling, scaling) << text;
  }
  EXPECT_FALSE(model_to_json(model_from_json(base, "m.json")).contains("fp8_scaling"));
  auto odd = base;
  odd["fp8_scaling"] = "per-block";
  std::string msg = error_of([&] { model_from_json(odd, "m.json"); });
  EXPECT_NE(msg.find("'fp8_scaling'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("per-block"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mxfp8"), std::string::npos) << "the error lists the choices: " << msg;
  for (const char* scaling : {"delayed", "mxfp8"}) {
    auto bf16 = base;
    bf16["fp8_scaling"] = scaling;
    bf16["dtype"] = "bf16";
    msg = error_of([&] { model_from_json(bf16, "m.json"); });
    EXPECT_NE(msg.find("'fp8_scaling'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\"dtype\": \"fp8\""), std::string::npos) << msg;
  }
}

TEST(ModelTest, UnknownKeyIsRejected) {
  const auto doc = nlohmann::json::parse(
      R"({"name":"x","layers":2,"hidden":8,"heads":2,"seq_len":4,"vocab":10,"hiden":3})");
  EXPECT_NE(error_of([&] { model_from_json(doc, "m.json"); }).find("'hiden'"), std::string::npos);
}

TEST(ModelTest, HiddenNotDivisibleByHeadsIsRejected) {
  const auto doc = nlohmann::json::parse(
      R"({"name":"x","layers":2,"hidden":10,"heads":4,"seq_len":4,"vocab":10})");
  EXPECT_NE(error_of([&] { model_from_json(doc, "m.json"); }).find("multiple of heads"),
            std::string::npos);
}

TEST(ModelTest, UnknownPresetListsThePresets) {
  const std::string msg = error_of([] { load_model("gpt9-1t"); });
  EXPECT_NE(msg.find("gpt9-1t"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama3-405b"), std::string::npos) << msg;
}

TEST(ModelTest, DtypeAndRecomputeRoundTripThroughStrings) {
  for (Dtype d : kAllDtypes) EXPECT_EQ(parse_dtype(to_string(d), "x"), d);
  for (Recompute r : kAllRecompute) EXPECT_EQ(parse_recompute(to_string(r), "x"), r);
  EXPECT_THROW(parse_dtype("int4", "x"), InputError);
  EXPECT_THROW(parse_recompute("some", "x"), InputError);
  EXPECT_EQ(parse_layer_kind("Logits", "x"), LayerKind::kLogits);
}

}  // namespace
}  // namespace jaxpp
