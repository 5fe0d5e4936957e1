// The gradient dtype of a plan (ParallelConfig::grad_dtype, graph/plan.h) and a GELU model trained
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
