// Eager PyTorch's element-wise kernels (ModelSpec::kernel_fusion, graph/kernels.cc
// add_eager_transformer_elementwise, docs/simulate.md "Eager PyTorch"): the inventory of a tiny
// model computed by hand kernel by kernel, so that a kernel dropped, double counted or moved to
// the wrong pass fails; the per-parameter weight casts priced per GEMM; the model JSON round trip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/kernels.h"
#include "graph/model.h"

namespace jaxpp {
namespace eager_kernels_test {

using ::testing::HasSubstr;

// A tiny MPT-like model (LayerNorm, biases, learned positions, GeLU MLP of 4h, no dropout,
// tied embeddings) and a tiny Llama (RMSNorm, RoPE, SwiGLU, GQA with 2 KV heads of 4).
constexpr double kH = 64, kF = 256, kV = 100;
ModelSpec tiny_gpt(KernelFusion fusion) {
  ModelSpec m = model_from_json(nlohmann::json::parse(R"({"name":"g","layers":2,"hidden":64,
      "heads":4,"seq_len":32,"vocab":100,"dropout":false})"),
                                "g.json");
  m.kernel_fusion = fusion;
  return m;
}
ModelSpec tiny_llama(KernelFusion fusion) {
  ModelSpec m = model_from_json(nlohmann::json::parse(R"({"name":"l","layers":2,"hidden":64,
      "heads":4,"kv_heads":2,"ffn_hidden":128,"seq_len":32,"vocab":100,"mlp":"swiglu",
      "tied_embeddings":false})"),
                                "l.json");
  m.kernel_fusion = fusion;
  return m;
}

struct Bytes {
  double fwd = 0, bwd = 0;
};
// Per kernel name: forward and backward bytes per token. A name listed twice fails.
std::map<std::string, Bytes> by_name(const LayerKernels& k) {
  std::map<std::string, Bytes> out;
  for (const ElementwiseKernel& e : k.elementwise) {
    EXPECT_EQ(out.count(std::string(e.name)), 0u) << e.name << " listed twice";
    out[std::string(e.name)] = {e.fwd_bytes_per_token, e.bwd_bytes_per_token};
  }
  return out;
}

TEST(EagerKernels, Fp32ParametersGptLayerMovesSixtyFourHForwardAndHundredFortyTwoHBackward) {
  const LayerKernels k = layer_kernels(tiny_gpt(KernelFusion::kEagerFp32Params), 1);
  const auto b = by_name(k);
  // Forward per token: two fp32 norms (read and write 4h each), two input casts (read 4h,
  // write 2h), two residual adds (read 4h + 2h, write 4h), GeLU (read and write 2f).
  const std::map<std::string, Bytes> expected = {
      {"norm", {2 * 8 * kH, 2 * (12 + 8) * kH}},
      {"input_cast", {2 * 6 * kH, 2 * 6 * kH}},
      // Backward: the branch gradient cast to bf16 (6h) and x's two gradients summed (12h).
      {"residual_add", {2 * 10 * kH, 2 * (6 + 12) * kH}},
      {"gelu", {4 * kF, 6 * kF}},
      // dq, dk, dv stacked into the qkv gradient: read and write 3h in bf16.
      {"qkv_grad_cat", {0, 12 * kH}},
      // Bias gradients: qkv (3h) and up (f) split by tp, proj and down (h each) on the hidden.
      {"bias_grad", {0, 2 * (3 * kH + kF)}},
      {"bias_grad_hidden", {0, 2 * 2 * kH}},
  };
  ASSERT_EQ(b.size(), expected.size());
  double fwd = 0, bwd = 0;
  for (const auto& [name, bytes] : expected) {
    ASSERT_EQ(b.count(name), 1u) << name;
    EXPECT_DOUBLE_EQ(b.at(name).fwd, bytes.fwd) << name;
    EXPECT_DOUBLE_EQ(b.at(name).bwd, bytes.bwd) << name;
    fwd += b.at(name).fwd;
    bwd += b.at(name).bwd;
  }
  EXPECT_DOUBLE_EQ(fwd, 64 * kH);   // f = 4h
  EXPECT_DOUBLE_EQ(bwd, 142 * kH);  // against the fused list's 36h and 72h
  EXPECT_DOUBLE_EQ(k.weight_fwd_bytes_per_param, 6);
  EXPECT_DOUBLE_EQ(k.weight_bwd_bytes_per_param, 6);
  // The fused list is untouched by the flag's default.
  const LayerKernels fused = layer_kernels(tiny_gpt(KernelFusion::kFused), 1);
  EXPECT_EQ(by_name(fused).count("bias_gelu"), 1u);
  EXPECT_DOUBLE_EQ(fused.weight_fwd_bytes_per_param, 0);
}

TEST(EagerKernels, Bf16ParametersLlamaLayerHasNoCastsButTheGradientSums) {
  const LayerKernels k = layer_kernels(tiny_llama(KernelFusion::kEager), 1);
  const auto b = by_name(k);
  const double q = 64, kv = 32, f = 128;
  const std::map<std::string, Bytes> expected = {
      {"norm", {2 * 4 * kH, 2 * 10 * kH}},  // bf16 norms
      // No casts (the stream and the norms are bf16); the gradients of wq, wk, wv (two sums)
      // and of w1, w3 (one) summed in bf16, read 4h write 2h each.
      {"input_cast", {0, 3 * 6 * kH}},
      {"residual_add", {2 * 6 * kH, 2 * 6 * kH}},
      {"swiglu", {10 * f, 18 * f}},
      {"rope", {20 * (q + kv), 20 * (q + kv)}},
  };
  ASSERT_EQ(b.size(), expected.size());
  for (const auto& [name, bytes] : expected) {
    ASSERT_EQ(b.count(name), 1u) << name;
    EXPECT_DOUBLE_EQ(b.at(name).fwd, bytes.fwd) << name;
    EXPECT_DOUBLE_EQ(b.at(name).bwd, bytes.bwd) << name;
  }
  EXPECT_DOUBLE_EQ(k.weight_fwd_bytes_per_param, 0) << "bf16 parameters: no weight casts";
  EXPECT_DOUBLE_EQ(k.weight_bwd_bytes_per_param, 0);
}

TEST(EagerKernels, LossRunsOnAnFp32CopyOfTheLogits) {
  const ModelSpec m = tiny_gpt(KernelFusion::kEagerFp32Params);
  const LayerKernels k = layer_kernels(m, m.num_layers() - 1);
  ASSERT_EQ(m.layers.back().kind, LayerKind::kLogits);
  const auto b = by_name(k);
  const std::map<std::string, Bytes> expected = {
      {"logits_cast", {6 * kV, 6 * kV}},           // .float() and its gradient cast back
      {"log_softmax", {16 * kV, 16 * kV}},         // three reads and a write; 16 backward
      {"nll_loss", {0, 4 * kV}},                   // the zero-filled fp32 gradient
      {"final_norm", {8 * kH, 20 * kH}},           // fp32
      {"input_cast", {6 * kH, 6 * kH}},            // the head's input
  };
  ASSERT_EQ(b.size(), expected.size());
  for (const auto& [name, bytes] : expected) {
    ASSERT_EQ(b.count(name), 1u) << name;
    EXPECT_DOUBLE_EQ(b.at(name).fwd, bytes.fwd) << name;
    EXPECT_DOUBLE_EQ(b.at(name).bwd, bytes.bwd) << name;
  }
  // The tied head: its weight cast (6), its gradient cast back (6) and summed into the
  // embedding's (read two fp32, write one: 12).
  EXPECT_DOUBLE_EQ(k.weight_fwd_bytes_per_param, 6);
  EXPECT_DOUBLE_EQ(k.weight_bwd_bytes_per_param, 6 + 12);
}

TEST(EagerKernels, WeightCastsArePricedPerGemmInTheForwardAndTheWeightGradientPass) {
  // Llama 3 8B, one sequence of 8192 tokens, no kernel overhead: the forward's element-wise time
  // is the per-token kernels' bytes plus 6 bytes per GEMM parameter over the HBM rate; the
  // weight-gradient pass moves only the 6 bytes per parameter of the gradients' casts.
  ModelSpec m = load_model("llama3-8b");
  m.kernel_fusion = KernelFusion::kEagerFp32Params;
  const ParallelConfig config;
  ClusterSpec cluster = cluster_preset("h200");
  cluster.kernel_overhead_s = 0;
  const double hbm = cluster.hbm_bandwidth_bytes_per_s * cluster.hbm_efficiency;
  const auto elementwise_s = [&](const ModelSpec& model, Pass p) {
    return OperatorCost(model, config, cluster).stage(1, 1, 0).at(p).elementwise_s;
  };
  const LayerKernels k = layer_kernels(m, 1);
  double params = 0, per_token = 0;
  for (const GemmKernel& g : k.gemms) params += g.n * g.k * g.count;
  for (const ElementwiseKernel& e : k.elementwise) per_token += e.fwd_bytes_per_token;
  const double tokens = static_cast<double>(config.microbatch_size) * m.seq_len;
  EXPECT_NEAR(elementwise_s(m, Pass::kForward), (per_token * tokens + 6 * params) / hbm, 1e-12);
  EXPECT_NEAR(elementwise_s(m, Pass::kBackwardWeight), 6 * params / hbm, 1e-12);
  m.kernel_fusion = KernelFusion::kEager;
  EXPECT_DOUBLE_EQ(elementwise_s(m, Pass::kBackwardWeight), 0) << "bf16 parameters: no casts";
}

TEST(EagerKernels, ModelJsonKeyRoundTripsAndIsRefusedOnFp8Models) {
  const auto base = nlohmann::json::parse(
      R"({"name":"x","layers":2,"hidden":8,"heads":2,"seq_len":4,"vocab":10})");
  EXPECT_EQ(model_from_json(base, "m.json").kernel_fusion, KernelFusion::kFused);
  EXPECT_FALSE(model_to_json(model_from_json(base, "m.json")).contains("kernel_fusion"));
  for (KernelFusion f : {KernelFusion::kEager, KernelFusion::kEagerFp32Params}) {
    auto j = base;
    j["kernel_fusion"] = std::string(to_string(f));
    const ModelSpec m = model_from_json(j, "m.json");
    EXPECT_EQ(m.kernel_fusion, f);
    EXPECT_EQ(model_to_json(m).at("kernel_fusion"), to_string(f));
    EXPECT_EQ(model_from_json(model_to_json(m), "again").kernel_fusion, f);
  }
  auto bad = base;
  bad["kernel_fusion"] = "compiled";
  try {
    model_from_json(bad, "m.json");
    FAIL() << "an unknown kernel_fusion";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected \"fused\", \"eager\" or \"eager_fp32_params\""));
  }
  auto fp8 = base;
  fp8["dtype"] = "fp8";
  fp8["kernel_fusion"] = "eager";
  try {
    model_from_json(fp8, "m.json");
    FAIL() << "eager kernels on an FP8 model";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("16-bit models"));
  }
}

}  // namespace eager_kernels_test
}  // namespace jaxpp
