// The optimizer state of a plan (ParallelConfig::optimizer_state, graph/plan.h): the bytes Adam
// keeps per parameter (12 fp32 master, m and v; 10 with 16-bit master remainders; 4 with bf16 m
// and v and no master copy), what it changes in the memory model and the optimizer step's time,
// and where it is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "costmodel/analytic_cost.h"
#include "costmodel/memory.h"
#include "graph/error.h"
#include "graph/plan.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;

struct OptimizerFixture {
  ModelSpec model = load_model("gpt3-1.3b");
  ClusterSpec cluster = cluster_preset("a100-80g");
  ParallelConfig config;
  Partition partition;
  Placement placement;
  OptimizerFixture() {
    config.gpus = 8;
    config.pp = 2;
    config.dp = 4;
    config.zero1 = true;
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

TEST(OptimizerState, NamesParseAndPrintAndGiveTheirBytes) {
  for (OptimizerState o : kAllOptimizerStates)
    EXPECT_EQ(parse_optimizer_state(to_string(o), "x"), o);
  EXPECT_THAT([] { parse_optimizer_state("fp8", "--optimizer-state"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr(
                  "--optimizer-state: expected cluster, fp32, remainders or bf16, got \"fp8\"")));
  EXPECT_EQ(optimizer_state_bytes_per_param(OptimizerState::kCluster, 16), 16);
  EXPECT_EQ(optimizer_state_bytes_per_param(OptimizerState::kFp32, 16), 12);
  EXPECT_EQ(optimizer_state_bytes_per_param(OptimizerState::kRemainders, 16), 10);
  EXPECT_EQ(optimizer_state_bytes_per_param(OptimizerState::kBf16, 16), 4);
  // Traffic: each dropped state byte is one read and one write less (the presets: 12 and 36).
  EXPECT_EQ(optimizer_traffic_bytes_per_param(OptimizerState::kCluster, 12, 36), 36);
  EXPECT_EQ(optimizer_traffic_bytes_per_param(OptimizerState::kFp32, 12, 36), 36);
  EXPECT_EQ(optimizer_traffic_bytes_per_param(OptimizerState::kRemainders, 12, 36), 32);
  EXPECT_EQ(optimizer_traffic_bytes_per_param(OptimizerState::kBf16, 12, 36), 20);
}

TEST(OptimizerState, ScalesTheOptimizerBytesAndNothingElseInMemory) {
  OptimizerFixture f;
  const MemoryModel fp32 = f.memory();
  for (const auto& [state, bytes] : {std::pair{OptimizerState::kRemainders, 10.0},
                                     std::pair{OptimizerState::kBf16, 4.0}}) {
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
  OptimizerFixture f;
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
  OptimizerFixture f;
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

}  // namespace
}  // namespace jaxpp
