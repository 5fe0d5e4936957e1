// Host memory for activation offloading: ClusterSpec::host_memory_bytes_per_gpu (the node's
// system memory per GPU, datasheet figures in the presets, host_memory_gib_per_gpu in cluster
// files), the memory model's offloaded bytes per stage, the host bytes of an actor (offloaded
// stash times the microbatches stashed at once) and the one-line refusal; and the graph's stage
// work under offloading (the stash kept: other layers plus the two largest offloaded ones).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/plan.h"
#include "graph/task_graph.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;

constexpr double kGiBytes = 1024.0 * 1024.0 * 1024.0;

TEST(HostMemory, PresetsCarryTheDatasheetFigurePerGpuAndRoundTrip) {
  // DGX A100 640GB / 320GB: 2 TB / 1 TB for 8 GPUs; DGX H100, H200, B200: 2 TB for 8; GB200:
  // 480 GB per Grace for 2 GPUs; MI300X: not known.
  const std::vector<std::pair<std::string, double>> expected = {
      {"a100-80g", 256}, {"a100-40g", 128}, {"h100-sxm", 256},    {"h200", 256},
      {"h800", 256},     {"b200", 256},     {"gb200-nvl72", 240}, {"gb300-nvl72", 240},
      {"mi300x", 0}};
  for (const auto& [name, gib] : expected) {
    const ClusterSpec c = cluster_preset(name);
    EXPECT_EQ(c.host_memory_bytes_per_gpu, static_cast<int64_t>(gib * kGiBytes)) << name;
    const nlohmann::json j = cluster_to_json(c);
    EXPECT_EQ(j.contains("host_memory_gib_per_gpu"), gib > 0) << name;
    EXPECT_EQ(cluster_from_json(j, "test"), c) << name;
  }
  ClusterSpec four_tb = cluster_from_json({{"base", "b200"}, {"host_memory_gib_per_gpu", 512}},
                                          "b200-4tb.json");
  EXPECT_EQ(four_tb.host_memory_bytes_per_gpu, int64_t{512} << 30);
  EXPECT_EQ(cluster_to_json(four_tb).at("host_memory_gib_per_gpu"), 512.0);
  // 0 = not known: read, and not written.
  const ClusterSpec none =
      cluster_from_json({{"base", "h100-sxm"}, {"host_memory_gib_per_gpu", 0}}, "x.json");
  EXPECT_EQ(none.host_memory_bytes_per_gpu, 0);
  EXPECT_FALSE(cluster_to_json(none).contains("host_memory_gib_per_gpu"));
}

TEST(HostMemory, OutOfRangeValuesAreRefusedNamingTheField) {
  for (const double bad : {-1.0, 1e-9, 2e6}) {
    try {
      cluster_from_json({{"base", "h100-sxm"}, {"host_memory_gib_per_gpu", bad}}, "my.json");
      FAIL() << bad;
    } catch (const InputError& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr("my.json: field 'host_memory_gib_per_gpu'"))
          << bad;
    }
  }
  try {
    cluster_from_json({{"base", "h100-sxm"}, {"host_memory_gib_per_gpu", 2e6}}, "my.json");
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()),
                HasSubstr("out of range: expected 0 (not checked), or 1 MiB to 1 PiB"));
  }
}

// gpt3-1.3b: layer 0 the embedding, 1..24 transformer layers (alike), 25 the logits.
struct HostFixture {
  ModelSpec model = load_model("gpt3-1.3b");
  ClusterSpec cluster = cluster_preset("a100-80g");
  ParallelConfig config(int offload) const {
    ParallelConfig c;
    c.microbatch_size = 4;
    c.offload_layers = offload;
    return c;
  }
  MemoryModel memory(int offload) const {
    const Partition one = partition_from_starts({0}, model.num_layers());
    return build_memory_model(model, one, make_placement(PlacementKind::kLinear, 1, 1),
                              config(offload), cluster);
  }
};

TEST(HostMemory, TheMemoryModelHoldsTheOffloadedStashPerStage) {
  HostFixture f;
  const double layer = OperatorCost(f.model, f.config(0), f.cluster).stash_bytes(1);
  ASSERT_GT(layer, 1e8);
  EXPECT_EQ(f.memory(0).offloaded_bytes_per_stage, std::vector<int64_t>{0});
  const MemoryModel ten = f.memory(10);
  ASSERT_EQ(ten.offloaded_bytes_per_stage.size(), 1u);
  EXPECT_EQ(ten.offloaded_bytes_per_stage[0], std::llround(10 * layer));
  // The device keeps 8 layers fewer (two of the ten are in flight).
  EXPECT_NEAR(static_cast<double>(f.memory(0).stash_bytes_per_stage[0] -
                                  ten.stash_bytes_per_stage[0]),
              8 * layer, 1.0);
}

TEST(HostMemory, AnActorHoldsTheOffloadedStashOfEveryMicrobatchStashedAtOnce) {
  MemoryModel mem;
  mem.offloaded_bytes_per_stage = {1000, 0, 30};
  // One stage per actor: each actor its own stage's bytes times its count; one actor with all
  // three stages (loop): the sum.
  Placement p = make_placement(PlacementKind::kLinear, 3, 3);
  EXPECT_EQ(host_offload_bytes_per_actor(mem, p, {4, 2, 1}), (std::vector<int64_t>{4000, 0, 30}));
  Placement loop = make_placement(PlacementKind::kLoop, 3, 1);
  EXPECT_EQ(host_offload_bytes_per_actor(mem, loop, {4, 2, 3}), (std::vector<int64_t>{4090}));
}

TEST(HostMemory, TheCheckRefusesWithOneLineAndSkipsAnUnknownHost) {
  ClusterSpec c = cluster_preset("gb200-nvl72");
  const int64_t over = static_cast<int64_t>(300.25 * kGiBytes);
  const int64_t under = static_cast<int64_t>(239.5 * kGiBytes);
  EXPECT_NO_THROW(check_host_memory_fits({under, 0}, c));
  EXPECT_EQ(host_memory_excess({under, 0}, c), "");
  try {
    check_host_memory_fits({under, over}, c);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "does not fit in host memory: actor 1 offloads 300.2 GiB of activations per GPU, "
              "the host has 240.0 GiB per GPU (gb200-nvl72 host_memory_gib_per_gpu)");
  }
  c.host_memory_bytes_per_gpu = 0;  // not known: not checked
  EXPECT_NO_THROW(check_host_memory_fits({over}, c));
}

// compute_stage_work with offloading: the model's first N transformer layers, counted across
// stages; a stage keeps its other layers plus its two largest offloaded ones.
TEST(HostMemory, TheGraphsStageWorkKeepsTheOtherLayersAndTwoInFlight) {
  const ModelSpec model = load_model("gpt3-1.3b");
  const Partition halves = partition_from_starts({0, 13}, model.num_layers());
  const std::vector<StageWork> none = compute_stage_work(model, halves, 2, Recompute::kNone);
  const std::vector<StageWork> off =
      compute_stage_work(model, halves, 2, Recompute::kNone, -1, 0, 14);
  const int64_t layer = model.layers[1].stash_bytes[0] * 2;  // one transformer layer, b 2
  const int64_t embedding = model.layers[0].stash_bytes[0] * 2;
  ASSERT_GT(layer, 0);
  // Stage 0 = the embedding and layers 1..12, all 12 offloaded: the embedding and two layers stay.
  EXPECT_EQ(none[0].stash_bytes, embedding + 12 * layer);
  EXPECT_EQ(off[0].offloaded_stash_bytes, 12 * layer);
  EXPECT_EQ(off[0].stash_bytes, embedding + 2 * layer);
  // Stage 1 = layers 13..24 and the logits: 13 and 14 offloaded, both in flight: nothing leaves.
  EXPECT_EQ(off[1].offloaded_stash_bytes, 2 * layer);
  EXPECT_EQ(off[1].stash_bytes, none[1].stash_bytes);
  // Without offloading nothing is on the host.
  EXPECT_EQ(none[0].offloaded_stash_bytes, 0);
  EXPECT_EQ(none[1].offloaded_stash_bytes, 0);
}

}  // namespace
}  // namespace jaxpp
