// The gradient dtype of a plan (ParallelConfig::grad_dtype, graph/plan.h), its optimizer state
// (ParallelConfig::optimizer_state: 12 bytes per parameter of fp32 master weights, m and v; 10
// with 16-bit master remainders; 4 with bf16 m and v and no master copy) and a GELU model trained
// without dropout (ModelSpec::no_dropout): what each changes in the memory model and the costs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "costmodel/analytic_cost.h"
#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/plan.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;

struct GradFixture {
  ModelSpec model = load_model("gpt3-1.3b");
  ClusterSpec cluster = cluster_preset("a100-80g");
  ParallelConfig config;
  Partition partition;
  Placement placement;
  GradFixture() {
    config.gpus = 8;
    config.pp = 2;
    config.dp = 4;
    config.global_batch = 16;
    config.num_microbatches = 4;
    AutoPartitionOptions o;
    o.num_stages = 2;
    partition = auto_partition(model, o);
    placement = make_placement(PlacementKind::kLinear, 2, 2);
  }
  MemoryModel memory() const {
    return build_memory_model(model, partition, placement, config, cluster);
  }
};

TEST(GradDtype, NamesParseAndPrint) {
  for (GradDtype g : kAllGradDtypes) EXPECT_EQ(parse_grad_dtype(to_string(g), "x"), g);
  EXPECT_THAT([] { parse_grad_dtype("int8", "--grad-dtype"); },
              ::testing::ThrowsMessage<InputError>(
                  HasSubstr("--grad-dtype: expected cluster, fp32, bf16 or fp16, got \"int8\"")));
  EXPECT_EQ(grad_bytes_per_param(GradDtype::kCluster, 8), 8);
  EXPECT_EQ(grad_bytes_per_param(GradDtype::kFp32, 8), 4);
  EXPECT_EQ(grad_bytes_per_param(GradDtype::kBf16, 8), 2);
  EXPECT_EQ(grad_bytes_per_param(GradDtype::kFp16, 8), 2);
}

TEST(GradDtype, Bf16HalvesTheGradientBufferAndNothingElse) {
  GradFixture f;
  const MemoryModel fp32 = f.memory();
  f.config.grad_dtype = GradDtype::kBf16;
  const MemoryModel bf16 = f.memory();
  ASSERT_EQ(fp32.actors.size(), bf16.actors.size());
  for (size_t r = 0; r < fp32.actors.size(); ++r) {
    EXPECT_GT(fp32.actors[r].grad_bytes, 0);
    EXPECT_NEAR(static_cast<double>(bf16.actors[r].grad_bytes),
                fp32.actors[r].grad_bytes / 2.0, 2.0);
    EXPECT_EQ(bf16.actors[r].weight_bytes, fp32.actors[r].weight_bytes);
    EXPECT_EQ(bf16.actors[r].optimizer_bytes, fp32.actors[r].optimizer_bytes);
  }
  EXPECT_EQ(bf16.stash_bytes_per_stage, fp32.stash_bytes_per_stage);
}

TEST(GradDtype, TheDataParallelReductionCarriesTheGradientDtype) {
  GradFixture f;
  const AnalyticCost fp32(f.model, f.partition, f.placement, f.config, f.cluster);
  f.config.grad_dtype = GradDtype::kFp16;
  const AnalyticCost fp16(f.model, f.partition, f.placement, f.config, f.cluster);
  for (int s = 0; s < 2; ++s) {
    EXPECT_NEAR(static_cast<double>(fp16.grad_bytes(s)), fp32.grad_bytes(s) / 2.0, 1.0);
    // The all-reduce of half the bytes is faster (bandwidth term halves, latency stays).
    EXPECT_LT(fp16.dp_allreduce_s(fp16.grad_bytes(s)), fp32.dp_allreduce_s(fp32.grad_bytes(s)));
  }
  // The cluster default follows the cluster's grad_bytes_per_param.
  f.config.grad_dtype = GradDtype::kCluster;
  f.cluster.grad_bytes_per_param = 2;
  const AnalyticCost cluster2(f.model, f.partition, f.placement, f.config, f.cluster);
  EXPECT_EQ(cluster2.grad_bytes(0), fp16.grad_bytes(0));
}

TEST(GradDtype, PlanJsonRoundTripWritesTheFieldOnlyWhenSet) {
  ParallelConfig c;
  EXPECT_FALSE(config_to_json(c).contains("grad_dtype"));
  c.grad_dtype = GradDtype::kBf16;
  const nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j.at("grad_dtype"), "bf16");
  EXPECT_EQ(config_from_json(j, "plan.json").grad_dtype, GradDtype::kBf16);
  nlohmann::json bad = j;
  bad["grad_dtype"] = "fp8";
  EXPECT_THAT([&] { config_from_json(bad, "plan.json"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("grad_dtype")));
}

TEST(OptimizerState, NamesParseAndPrintAndGiveTheirBytes) {
  for (OptimizerState o : kAllOptimizerStates)
    EXPECT_EQ(parse_optimizer_state(to_string(o), "x"), o);
  EXPECT_THAT(
      [] { parse_optimizer_state("fp8", "--optimizer-state"); },
      ::testing::ThrowsMessage<InputError>(HasSubstr(
          "--optimizer-state: expected cluster, fp32, remainders, bf16 or bf16-moments, got "
          "\"fp8\"")));
  EXPECT_EQ(optimizer_state_bytes_per_param(OptimizerState::kCluster, 16), 16);
  EXPECT_EQ(optimizer_state_bytes_per_param(OptimizerState::kFp32, 16), 12);
  EXPECT_EQ(optimizer_state_bytes_per_param(OptimizerState::kRemainders, 16), 10);
  EXPECT_EQ(optimizer_state_bytes_per_param(OptimizerState::kBf16, 16), 4);
  EXPECT_EQ(parse_optimizer_state("bf16-moments", "x"), OptimizerState::kBf16Moments);
  EXPECT_EQ(optimizer_state_bytes_per_param(OptimizerState::kBf16Moments, 16), 8);  // 4 + 2 + 2
  // Traffic: each dropped state byte is one read and one write less (the presets: 12 and 36).
  EXPECT_EQ(optimizer_traffic_bytes_per_param(OptimizerState::kCluster, 12, 36), 36);
  EXPECT_EQ(optimizer_traffic_bytes_per_param(OptimizerState::kFp32, 12, 36), 36);
  EXPECT_EQ(optimizer_traffic_bytes_per_param(OptimizerState::kRemainders, 12, 36), 32);
  EXPECT_EQ(optimizer_traffic_bytes_per_param(OptimizerState::kBf16, 12, 36), 20);
  EXPECT_EQ(optimizer_traffic_bytes_per_param(OptimizerState::kBf16Moments, 12, 36), 28);
}

// Low-precision activations (graph/model.h) are FP8 training's: a 16-bit model listing them is
// refused when its memory is modelled.
TEST(LowPrecisionActivations, NeedFp8Training) {
  GradFixture f;
  f.model.low_precision_attention_out = true;
  EXPECT_THAT([&] { f.memory(); },
              ::testing::ThrowsMessage<InputError>(HasSubstr(
                  "\"low_precision_activations\" needs FP8 training: the model trains in bf16")));
  f.model.dtype = Dtype::kFp8;
  f.cluster = cluster_preset("h100-sxm");  // A100 has no FP8
  EXPECT_NO_THROW(f.memory());
}

TEST(OptimizerState, ScalesTheOptimizerBytesAndNothingElseInMemory) {
  GradFixture f;
  f.config.zero1 = true;
  const MemoryModel fp32 = f.memory();
  for (const auto& [state, bytes] :
       {std::pair{OptimizerState::kRemainders, 10.0}, std::pair{OptimizerState::kBf16, 4.0},
        std::pair{OptimizerState::kBf16Moments, 8.0}}) {
    f.config.optimizer_state = state;
    const MemoryModel m = f.memory();
    ASSERT_EQ(m.actors.size(), fp32.actors.size());
    for (size_t r = 0; r < m.actors.size(); ++r) {
      EXPECT_GT(fp32.actors[r].optimizer_bytes, 0);
      // The optimizer bytes are the sharded parameters times 12 (the preset); the setting's
      // bytes replace the 12, the weights and gradients stay.
      EXPECT_NEAR(static_cast<double>(m.actors[r].optimizer_bytes),
                  fp32.actors[r].optimizer_bytes * bytes / 12.0, 2.0)
          << to_string(state);
      EXPECT_EQ(m.actors[r].weight_bytes, fp32.actors[r].weight_bytes);
      EXPECT_EQ(m.actors[r].grad_bytes, fp32.actors[r].grad_bytes);
    }
    EXPECT_EQ(m.stash_bytes_per_stage, fp32.stash_bytes_per_stage);
  }
  // kFp32 is the presets' 12 bytes; kCluster follows a cluster with another figure.
  f.config.optimizer_state = OptimizerState::kFp32;
  EXPECT_EQ(f.memory().actors[0].optimizer_bytes, fp32.actors[0].optimizer_bytes);
  f.config.optimizer_state = OptimizerState::kCluster;
  f.cluster.optimizer_state_bytes_per_param = 6;
  EXPECT_NEAR(static_cast<double>(f.memory().actors[0].optimizer_bytes),
              fp32.actors[0].optimizer_bytes / 2.0, 2.0);
}

TEST(OptimizerState, TheOptimizerStepMovesFewerBytes) {
  GradFixture f;
  f.config.zero1 = true;
  const AnalyticCost fp32(f.model, f.partition, f.placement, f.config, f.cluster);
  f.config.optimizer_state = OptimizerState::kBf16;
  const AnalyticCost bf16(f.model, f.partition, f.placement, f.config, f.cluster);
  for (int s = 0; s < 2; ++s) {
    EXPECT_GT(fp32.optimizer_s(s), 0);
    EXPECT_NEAR(bf16.optimizer_s(s), fp32.optimizer_s(s) * 20.0 / 36.0,
                1e-9 * fp32.optimizer_s(s));
  }
}

TEST(OptimizerState, RemaindersNeedSixteenBitWeights) {
  GradFixture f;
  f.config.zero1 = true;
  f.cluster = cluster_preset("h100-sxm");  // a GPU with FP8 GEMMs
  f.model.dtype = Dtype::kFp8;
  f.model.fp8_params = true;
  f.config.optimizer_state = OptimizerState::kRemainders;
  EXPECT_THAT([&] { f.memory(); },
              ::testing::ThrowsMessage<InputError>(HasSubstr(
                  "optimizer state 'remainders' needs 16-bit weights")));
  // FP8 compute with 16-bit weights (fp8_params false) keeps them: accepted.
  f.model.fp8_params = false;
  EXPECT_NO_THROW(f.memory());
}

TEST(OptimizerState, PlanJsonRoundTripWritesTheFieldOnlyWhenSet) {
  ParallelConfig c;
  EXPECT_FALSE(config_to_json(c).contains("optimizer_state"));
  c.optimizer_state = OptimizerState::kRemainders;
  const nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j.at("optimizer_state"), "remainders");
  EXPECT_EQ(config_from_json(j, "plan.json").optimizer_state, OptimizerState::kRemainders);
  nlohmann::json bad = j;
  bad["optimizer_state"] = "int8";
  EXPECT_THAT([&] { config_from_json(bad, "plan.json"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("optimizer_state")));
}

nlohmann::json gelu_model(bool with_dropout_key, bool dropout) {
  nlohmann::json m = {{"name", "g"}, {"layers", 4},  {"hidden", 1024}, {"heads", 16},
                      {"seq_len", 512}, {"vocab", 32000}, {"mlp", "gelu"}};
  if (with_dropout_key) m["dropout"] = dropout;
  return m;
}

TEST(NoDropout, AGeluModelWithoutDropoutStashesNoMasks) {
  const ModelSpec with = model_from_json(gelu_model(false, true), "m.json");
  const ModelSpec without = model_from_json(gelu_model(true, false), "m.json");
  EXPECT_FALSE(with.no_dropout);
  EXPECT_TRUE(without.no_dropout);
  EXPECT_EQ(with.total_params(), without.total_params());
  ParallelConfig config;
  const ClusterSpec cluster = cluster_preset("h100-sxm");
  const OperatorCost a(with, config, cluster), b(without, config, cluster);
  // Layer 1 is the first transformer layer: two 1-byte masks of h per token fewer.
  const double tokens = 512;
  EXPECT_NEAR(a.stash_bytes(1) - b.stash_bytes(1), 2 * 1024 * tokens, 1e-6);
  // The fused bias-dropout-add writes no mask: less memory traffic, so a faster forward.
  EXPECT_LT(b.stage(1, 1, without.layers[1].params).at(Pass::kForward).elementwise_s,
            a.stage(1, 1, with.layers[1].params).at(Pass::kForward).elementwise_s);
  // Written back only when off; read back equal.
  const nlohmann::json j = model_to_json(without);
  EXPECT_EQ(j.at("dropout"), false);
  EXPECT_TRUE(model_from_json(j, "m.json").no_dropout);
  EXPECT_FALSE(model_to_json(with).contains("dropout"));
}

TEST(NoDropout, DropoutOnASwigluModelIsRefused) {
  nlohmann::json m = gelu_model(true, true);
  m["mlp"] = "swiglu";
  EXPECT_THAT([&] { model_from_json(m, "m.json"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("m.json: field 'dropout'")));
  m["dropout"] = false;  // already so: accepted
  EXPECT_FALSE(model_from_json(m, "m.json").no_dropout);
}

}  // namespace
}  // namespace jaxpp
