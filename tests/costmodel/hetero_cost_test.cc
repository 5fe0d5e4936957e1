// HeteroCost and HeteroCluster (costmodel/hetero_cost.h, costmodel/hetero_cluster.h): each actor
// priced on its own kind and tp, the links between actors, the reshard of a transfer between
// different tps, the per-kind memory model and its fit check, and the cluster's JSON form.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "costmodel/analytic_cost.h"
#include "costmodel/hetero_cluster.h"
#include "costmodel/hetero_cost.h"
#include "costmodel/memory.h"
#include "graph/error.h"
#include "graph/partition.h"
#include "graph/placement.h"

namespace jaxpp {
namespace {

HeteroCluster h100_a100_cluster() {
  return hetero_cluster_from_json(
      nlohmann::json::parse(R"({"name": "mixed", "kinds": [{"preset": "h100-sxm", "gpus": 8},
                                                          {"preset": "a100-80g", "gpus": 4}]})"),
      "mixed.json");
}

struct HeteroFixture {
  ModelSpec model = load_model("gpt3-13b");
  Partition partition = auto_partition(model, {.num_stages = 4});
  Placement placement = make_placement(PlacementKind::kLinear, 4, 4);
  ParallelConfig config;
  HeteroCluster cluster = h100_a100_cluster();
  // Two H100 actors of tp 4 (8 GPUs), two A100 actors of tp 2 (4 GPUs).
  std::vector<ActorMesh> meshes = {
      {"h100-sxm", 4}, {"h100-sxm", 4}, {"a100-80g", 2}, {"a100-80g", 2}};
  HeteroFixture() {
    config.pp = 4;
    config.num_microbatches = 8;
    config.global_batch = 8;
  }
  ParallelConfig with_tp(int tp) const {
    ParallelConfig c = config;
    c.tp = tp;
    return c;
  }
};

TEST(HeteroCostTest, EachActorIsPricedOnItsOwnKindAndTp) {
  const HeteroFixture f;
  const HeteroCost cost(f.model, f.partition, f.placement, f.config, f.cluster, f.meshes, "meshes");
  const AnalyticCost h100(f.model, f.partition, f.placement, f.with_tp(4),
                          cluster_preset("h100-sxm"));
  const AnalyticCost a100(f.model, f.partition, f.placement, f.with_tp(2),
                          cluster_preset("a100-80g"));
  Instruction f1;
  f1.tasks.push_back(TaskRef{TaskKind::kF, 1, 0});
  f1.stage = 1;
  Instruction f2 = f1;
  f2.tasks[0].stage = 2;
  f2.stage = 2;
  EXPECT_DOUBLE_EQ(cost.compute_s(1, f1), h100.compute_s(1, f1));
  EXPECT_DOUBLE_EQ(cost.compute_s(2, f2), a100.compute_s(2, f2));
  // The same stage is slower on an A100 of tp 2 than on an H100 of tp 4.
  EXPECT_GT(a100.compute_s(1, f1), h100.compute_s(1, f1));
  EXPECT_EQ(cost.grad_bytes(1), h100.grad_bytes(1));
  EXPECT_EQ(cost.grad_bytes(2), a100.grad_bytes(2));
}

TEST(HeteroCostTest, LinksAndReshardBetweenKindsAndTps) {
  const HeteroFixture f;
  const HeteroCost cost(f.model, f.partition, f.placement, f.config, f.cluster, f.meshes, "meshes");
  const ClusterSpec h100 = cluster_preset("h100-sxm");
  const ClusterSpec a100 = cluster_preset("a100-80g");
  // Actors 0 and 1 hold H100 devices 0-3 and 4-7: one node, NVLink.
  EXPECT_TRUE(cost.same_node(0, 1));
  EXPECT_DOUBLE_EQ(cost.p2p_bandwidth_bytes_per_s(0, 1),
                   h100.intra_node.effective_bandwidth_bytes_per_s());
  // Actors 1 and 2 are of different kinds: the inter-kind link (default: the slower network).
  EXPECT_FALSE(cost.same_node(1, 2));
  const LinkSpec slower = h100.inter_node.effective_bandwidth_bytes_per_s() <
                                  a100.inter_node.effective_bandwidth_bytes_per_s()
                              ? h100.inter_node
                              : a100.inter_node;
  EXPECT_EQ(f.cluster.inter_kind, slower);
  EXPECT_DOUBLE_EQ(cost.p2p_bandwidth_bytes_per_s(1, 2), slower.effective_bandwidth_bytes_per_s());
  EXPECT_DOUBLE_EQ(cost.p2p_latency_s(1, 2),
                   slower.latency_s + std::max(h100.p2p_overhead_s, a100.p2p_overhead_s));
  // Payload: the stage-1 activation over min(tp 4, tp 2) = 2 device pairs.
  const AnalyticCost tp2(f.model, f.partition, f.placement, f.with_tp(2), a100);
  const AnalyticCost tp4(f.model, f.partition, f.placement, f.with_tp(4), h100);
  EXPECT_EQ(cost.activation_bytes(1), tp2.activation_bytes(1));
  EXPECT_EQ(cost.activation_bytes(0), tp4.activation_bytes(0));
  EXPECT_EQ(cost.activation_bytes(2), tp2.activation_bytes(2));
  // Reshard on the tp-4 side (k = 2 H100 devices per slice): an all-gather over its NVLink.
  const int64_t n = cost.activation_bytes(1);
  const double expected =
      0.5 * static_cast<double>(n) /
          (h100.intra_node.bandwidth_bytes_per_s * h100.allreduce_bus_efficiency) +
      h100.intra_collective_latency_s();
  EXPECT_DOUBLE_EQ(cost.reshard_s(1, 2, n), expected);
  EXPECT_DOUBLE_EQ(cost.reshard_s(2, 1, n), expected);  // the gradient back: same reshard
  EXPECT_EQ(cost.reshard_s(0, 1, n), 0.0);
  EXPECT_EQ(cost.reshard_s(2, 3, n), 0.0);
  Instruction send;
  send.op = OpKind::kSend;
  send.tasks.push_back(TaskRef{TaskKind::kF, 1, 0});
  send.stage = 1;
  send.peer = 2;
  send.bytes = n;
  EXPECT_DOUBLE_EQ(cost.transfer_latency_s(1, 2, send), cost.p2p_latency_s(1, 2) + expected);
}

TEST(HeteroCostTest, TpsThatAreNotMultiplesAndUnknownKindsAreRefused) {
  const HeteroFixture f;
  std::vector<ActorMesh> meshes = f.meshes;
  meshes[2].tp = 3;
  try {
    HeteroCost(f.model, f.partition, f.placement, f.config, f.cluster, meshes, "meshes");
    FAIL() << "tp 4 next to tp 3 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("multiples of each other"), std::string::npos) << e.what();
  }
  meshes = f.meshes;
  meshes[3].kind = "v100";
  try {
    HeteroCost(f.model, f.partition, f.placement, f.config, f.cluster, meshes,
               "plan: field 'meshes'");
    FAIL() << "unknown kind accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "plan: field 'meshes'[3]: device kind 'v100' is not in cluster mixed (kinds: "
              "h100-sxm, a100-80g)");
  }
}

TEST(HeteroCostTest, MemoryIsPerKindAndCheckedAgainstEachKindsHbm) {
  const HeteroFixture f;
  const MemoryModel mem = build_hetero_memory_model(f.model, f.partition, f.placement, f.config,
                                                    f.cluster, f.meshes, "meshes");
  const MemoryModel a100 = build_memory_model(f.model, f.partition, f.placement, f.with_tp(2),
                                              cluster_preset("a100-80g"));
  const MemoryModel h100 = build_memory_model(f.model, f.partition, f.placement, f.with_tp(4),
                                              cluster_preset("h100-sxm"));
  EXPECT_EQ(mem.actors[0].static_bytes(), h100.actors[0].static_bytes());
  EXPECT_EQ(mem.actors[3].static_bytes(), a100.actors[3].static_bytes());
  EXPECT_EQ(mem.stash_bytes_per_stage[1], h100.stash_bytes_per_stage[1]);
  EXPECT_EQ(mem.stash_bytes_per_stage[2], a100.stash_bytes_per_stage[2]);
  const int64_t gib = int64_t{1} << 30;
  EXPECT_NO_THROW(
      check_hetero_memory_fits({79 * gib, 79 * gib, 79 * gib, 79 * gib}, f.cluster, f.meshes, 0));
  try {
    check_hetero_memory_fits({10 * gib, 10 * gib, 10 * gib, 81 * gib}, f.cluster, f.meshes, 0);
    FAIL() << "81 GiB on an 80 GiB A100 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "does not fit: actor 3 (a100-80g) needs 81.0 GiB, has 80.0 GiB (a100-80g's HBM)");
  }
  EXPECT_THROW(check_hetero_memory_fits({10 * gib, 10 * gib, 10 * gib, 11 * gib}, f.cluster,
                                        f.meshes, 10 * gib),
               InputError);
}

TEST(HeteroClusterTest, JsonFormRoundTripsAndPlainFilesAreNotHeterogeneous) {
  const HeteroCluster h =
      hetero_cluster_from_json(nlohmann::json::parse(R"({"name": "mixed", "kinds": [
          {"preset": "H100-SXM", "gpus": 8},
          {"cluster": {"base": "a100-80g", "name": "a100-40", "hbm_gib": 40}, "gpus": 16}],
          "inter_kind": {"bandwidth_gb_per_s": 25, "latency_us": 15, "efficiency": 0.9}})"),
                               "mixed.json");
  ASSERT_EQ(h.kinds.size(), 2u);
  EXPECT_EQ(h.kinds[0].name, "h100-sxm");
  EXPECT_EQ(h.kinds[1].name, "a100-40");
  EXPECT_EQ(h.kinds[1].spec.hbm_bytes, int64_t{40} << 30);
  EXPECT_EQ(h.total_gpus(), 24);
  EXPECT_EQ(h.kind_index("a100-40"), 1);
  EXPECT_EQ(h.kind_index("a100-80g"), -1);
  EXPECT_DOUBLE_EQ(h.inter_kind.bandwidth_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(h.inter_kind.latency_s, 15e-6);
  EXPECT_DOUBLE_EQ(h.inter_kind.efficiency, 0.9);
  const nlohmann::json j = hetero_cluster_to_json(h);
  const HeteroCluster back = hetero_cluster_from_json(j, "plan: field 'cluster'");
  EXPECT_EQ(back.kinds, h.kinds);
  EXPECT_EQ(hetero_cluster_to_json(back), j);
  EXPECT_TRUE(is_hetero_cluster_doc(j));
  EXPECT_FALSE(is_hetero_cluster_doc(cluster_to_json(cluster_preset("h100-sxm"))));
  EXPECT_FALSE(load_hetero_cluster_arg("h100-sxm").has_value());
  // A heterogeneous document given where one cluster is read says so.
  try {
    cluster_from_json(j, "mixed.json");
    FAIL() << "a heterogeneous document read as one cluster";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mixed.json: field 'kinds': a heterogeneous cluster"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace jaxpp
