// Transformer Engine's fused norm + quantization (ModelSpec::fp8_norm_fusion, costmodel/
// operator_cost.h, docs/simulate.md "FP8 training"): the inputs of QKV and of a dense MLP's first
// GEMM come from the norm their LayerNormLinear runs, and TE quantizes them there: delayed
// scaling writes the norm's output in FP8 (only the transpose is left, where the GPU needs it),
// current scaling computes the amax in the norm (no amax pass), MXFP8 quantizes separately.
// Each assertion is the hand-computed byte difference on a Llama 3 8B layer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/kernels.h"
#include "graph/model.h"

namespace jaxpp {
namespace fp8_norm_fusion_test {

using ::testing::HasSubstr;

constexpr int kLayer = 1;  // the first transformer layer (0 is the embedding)

// Llama 3 8B (h 4096, 32 heads, 8 KV heads, SwiGLU f 14336, s 8192), one sequence per
// microbatch: m = 8192 tokens.
struct Llama {
  ModelSpec model = load_model("llama3-8b");
  ParallelConfig config;
  ClusterSpec cluster;
  explicit Llama(const char* gpu, Fp8Scaling scaling, bool fusion = true) {
    cluster = cluster_preset(gpu);
    cluster.kernel_overhead_s = 2e-6;
    model.dtype = Dtype::kFp8;
    model.fp8_scaling = scaling;
    model.fp8_norm_fusion = fusion;
    config.num_microbatches = 4;
  }
  PassBreakdown layer(Pass p) const {
    return OperatorCost(model, config, cluster).stage(kLayer, 1, 0).at(p);
  }
  double hbm() const { return cluster.hbm_bandwidth_bytes_per_s * cluster.hbm_efficiency; }
};

constexpr double kH = 4096, kM = 8192;

// The forward element-wise time the fusion removes, fused against separate casts on one layer.
double saved_forward_s(const char* gpu, Fp8Scaling scaling) {
  const Llama fused(gpu, scaling, true), separate(gpu, scaling, false);
  return separate.layer(Pass::kForward).elementwise_s - fused.layer(Pass::kForward).elementwise_s;
}

TEST(Fp8NormFusion, InventoryMarksTheInputsOfTheFusedNormModules) {
  const ModelSpec llama = load_model("llama3-8b");
  const LayerKernels k = layer_kernels(llama, kLayer);
  for (const GemmKernel& g : k.gemms) {
    const bool fed = g.name == "qkv" || g.name == "mlp_up";
    EXPECT_EQ(g.norm_input, fed) << g.name;
  }
  // An MoE layer's MLP reads a separate TENorm: only QKV is norm-fed.
  const ModelSpec mixtral = load_model("mixtral-8x7b");
  for (const GemmKernel& g : layer_kernels(mixtral, kLayer).gemms)
    EXPECT_EQ(g.norm_input, g.name == "qkv") << g.name;
}

TEST(Fp8NormFusion, DelayedNormWritesItsOutputInOneByte) {
  // BF16 and FP8 current scaling: two norms, each reads and writes h 16-bit values per token.
  ModelSpec m = load_model("llama3-8b");
  const auto norm_fwd = [&](const ModelSpec& model) {
    for (const ElementwiseKernel& e : layer_kernels(model, kLayer).elementwise)
      if (e.name == "norm") return e.fwd_bytes_per_token;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(norm_fwd(m), 2 * (2 * kH + 2 * kH));
  m.dtype = Dtype::kFp8;
  EXPECT_DOUBLE_EQ(norm_fwd(m), 2 * (2 * kH + 2 * kH));
  // Delayed: each writes its FP8 copy, 1 byte per value; the backward is unchanged.
  m.fp8_scaling = Fp8Scaling::kDelayed;
  EXPECT_DOUBLE_EQ(norm_fwd(m), 2 * (2 * kH + 1 * kH));
  m.fp8_norm_fusion = false;
  EXPECT_DOUBLE_EQ(norm_fwd(m), 2 * (2 * kH + 2 * kH));
}

TEST(Fp8NormFusion, NormCastPerRecipeOnHopper) {
  const double n = 3e6;
  const auto cast = [&](Fp8Scaling s, bool fusion) {
    const Llama l("h100-sxm", s, fusion);
    return OperatorCost(l.model, l.config, l.cluster).fp8_norm_cast_s(n);
  };
  const Llama l("h100-sxm", Fp8Scaling::kCurrent);
  // Delayed: the transpose of the norm's FP8 output, read 1 + write 1, one kernel.
  EXPECT_NEAR(cast(Fp8Scaling::kDelayed, true), 2 * n / l.hbm() + 2e-6, 1e-15);
  // Current: read 2, write 1 + 1, one kernel (the norm computed the amax).
  EXPECT_NEAR(cast(Fp8Scaling::kCurrent, true), 4 * n / l.hbm() + 2e-6, 1e-15);
  // Without the fusion: the separate casts (delayed 4 bytes and 1 kernel, current 6 and 2).
  EXPECT_NEAR(cast(Fp8Scaling::kDelayed, false), 4 * n / l.hbm() + 2e-6, 1e-15);
  EXPECT_NEAR(cast(Fp8Scaling::kCurrent, false), 6 * n / l.hbm() + 2 * 2e-6, 1e-15);
}

TEST(Fp8NormFusion, NormCastPerRecipeOnBlackwell) {
  const double n = 3e6;
  const auto cast = [&](Fp8Scaling s) {
    const Llama l("b200", s);
    return OperatorCost(l.model, l.config, l.cluster).fp8_norm_cast_s(n);
  };
  const Llama l("b200", Fp8Scaling::kMxfp8);
  EXPECT_EQ(cast(Fp8Scaling::kDelayed), 0) << "no transpose: nothing is left of the cast";
  EXPECT_NEAR(cast(Fp8Scaling::kCurrent), 3 * n / l.hbm() + 2e-6, 1e-15);
  // MXFP8: TE's default norm writes 16 bits; the usual MXFP8 cast, read 2, write 2·33/32.
  EXPECT_NEAR(cast(Fp8Scaling::kMxfp8), 4.0625 * n / l.hbm() + 2e-6, 1e-15);
}

// Per norm-fed element (two inputs of m × h per layer), separate → fused:
//   delayed, Hopper: norm write 2 → 1, cast 4 → transpose 2 (a kernel either way): 3 bytes;
//   delayed, B200:   norm write 2 → 1, cast 3 → nothing: 4 bytes and a kernel;
//   current:         the amax pass (read 2, a kernel);
//   MXFP8:           nothing.
TEST(Fp8NormFusion, ForwardSavesTheHandComputedBytesPerRecipe) {
  const double hopper = Llama("h100-sxm", Fp8Scaling::kDelayed).hbm();
  const double b200 = Llama("b200", Fp8Scaling::kDelayed).hbm();
  EXPECT_NEAR(saved_forward_s("h100-sxm", Fp8Scaling::kDelayed), 2 * 3 * kM * kH / hopper, 1e-12);
  EXPECT_NEAR(saved_forward_s("b200", Fp8Scaling::kDelayed), 2 * (4 * kM * kH / b200 + 2e-6),
              1e-12);
  EXPECT_NEAR(saved_forward_s("h100-sxm", Fp8Scaling::kCurrent), 2 * (2 * kM * kH / hopper + 2e-6),
              1e-12);
  EXPECT_NEAR(saved_forward_s("b200", Fp8Scaling::kCurrent), 2 * (2 * kM * kH / b200 + 2e-6),
              1e-12);
  EXPECT_EQ(saved_forward_s("b200", Fp8Scaling::kMxfp8), 0);
}

TEST(Fp8NormFusion, FusedCastsAreNotPricedAgain) {
  // The fused forward's element-wise time is the separate one less exactly the hand-computed
  // saving: pricing the norm-fed casts again (on top of the norm's FP8 write) fails here.
  const Llama fused("h100-sxm", Fp8Scaling::kDelayed), separate("h100-sxm", Fp8Scaling::kDelayed,
                                                                 false);
  const OperatorCost op(fused.model, fused.config, fused.cluster);
  const double casts_again = 2 * op.fp8_cast_s(kM * kH);
  const double fwd = fused.layer(Pass::kForward).elementwise_s;
  EXPECT_NEAR(fwd, separate.layer(Pass::kForward).elementwise_s - 2 * 3 * kM * kH / fused.hbm(),
              1e-12);
  EXPECT_GT(separate.layer(Pass::kForward).elementwise_s, fwd + 0.5 * casts_again);
  // The other passes do not change: the output gradients are cast separately.
  for (Pass p : {Pass::kBackwardInput, Pass::kBackwardWeight})
    EXPECT_DOUBLE_EQ(fused.layer(p).elementwise_s, separate.layer(p).elementwise_s);
  // Full recompute re-runs the fused forward.
  Llama fr = fused, sr = separate;
  fr.config.recompute = sr.config.recompute = Recompute::kFull;
  EXPECT_NEAR(sr.layer(Pass::kRecompute).elementwise_s - fr.layer(Pass::kRecompute).elementwise_s,
              2 * 3 * kM * kH / fused.hbm(), 1e-12);
}

TEST(Fp8NormFusion, SequenceParallelNormWritesItsShardAndTheCastSeesTheGatheredInput) {
  // tp 2 with sequence parallelism: the norm runs on m/2 tokens (write 2 → 1 byte), the
  // transpose on the gathered m tokens (4 → 2 bytes).
  Llama fused("h100-sxm", Fp8Scaling::kDelayed), separate("h100-sxm", Fp8Scaling::kDelayed, false);
  for (Llama* l : {&fused, &separate}) {
    l->config.tp = 2;
    l->config.sequence_parallel = true;
  }
  const double saved =
      separate.layer(Pass::kForward).elementwise_s - fused.layer(Pass::kForward).elementwise_s;
  EXPECT_NEAR(saved, (2 * 1 * kM / 2 * kH + 2 * 2 * kM * kH) / fused.hbm(), 1e-12);
}

TEST(Fp8NormFusion, Bf16ModelsIgnoreTheFlag) {
  ModelSpec model = load_model("llama3-8b");
  ParallelConfig config;
  const ClusterSpec cluster = cluster_preset("h100-sxm");
  const StageBreakdown a = OperatorCost(model, config, cluster).stage(0, model.num_layers(), 8e9);
  model.fp8_norm_fusion = false;
  const StageBreakdown b = OperatorCost(model, config, cluster).stage(0, model.num_layers(), 8e9);
  for (int p = 0; p < 4; ++p) EXPECT_DOUBLE_EQ(a.pass[p].total_s(), b.pass[p].total_s());
}

TEST(Fp8NormFusion, ModelJsonKeyIsWrittenOnlyWhenOffAndNeedsAnFp8Model) {
  const auto base = nlohmann::json::parse(
      R"({"name":"x","layers":2,"hidden":8,"heads":2,"seq_len":4,"vocab":10,"dtype":"fp8"})");
  EXPECT_TRUE(model_from_json(base, "m.json").fp8_norm_fusion) << "Transformer Engine by default";
  EXPECT_FALSE(model_to_json(model_from_json(base, "m.json")).contains("fp8_norm_fusion"));
  auto off = base;
  off["fp8_norm_fusion"] = false;
  const ModelSpec m = model_from_json(off, "m.json");
  EXPECT_FALSE(m.fp8_norm_fusion);
  EXPECT_FALSE(model_from_json(model_to_json(m), "again").fp8_norm_fusion);
  auto bf16 = off;
  bf16["dtype"] = "bf16";
  try {
    model_from_json(bf16, "m.json");
    FAIL() << "fp8_norm_fusion on a BF16 model";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("fp8_norm_fusion"));
  }
}

}  // namespace fp8_norm_fusion_test
}  // namespace jaxpp
