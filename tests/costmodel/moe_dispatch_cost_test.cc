// The expert-parallel all-to-all's destination count (ParallelConfig::moe_dispatcher and
// moe_routing): one copy per routed expert (alltoall) or per destination rank and node (deepep),
// for balanced random routing and for a contiguous benchmark gate, by hand on small E, top_k, ep.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "costmodel/operator_cost.h"
#include "graph/plan.h"

namespace jaxpp {
namespace {

// C(n, k) from lgamma: an implementation independent of the cost model's product form.
double binomial(int n, int k) {
  if (k < 0 || k > n) return 0;
  return std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0));
}

struct DispatchFixture {
  ParallelConfig config;
  ClusterSpec cluster = cluster_preset("h100-sxm");
  ModelSpec model = load_model("mixtral-8x7b");  // 8 experts, top 2
  DispatchFixture() {
    cluster.kernel_overhead_s = 0;
    config.dp = 8;
    config.ep = 4;
  }
  OperatorCost op() const { return OperatorCost(model, config, cluster); }
};

TEST(MoeDispatchCost, RandomRoutingDistinctRanksAndNodesAreTheBinomialExpression) {
  DispatchFixture f;
  f.cluster.devices_per_node = 2;  // ep 4 = 2 nodes of 2 ranks, 2 experts per rank
  OperatorCost::MoeDestinations d = f.op().moe_destinations();
  // 1 − C(6,2)/C(8,2) = 13/28 per rank; 1 − C(4,2)/C(8,2) = 11/14 per node.
  EXPECT_NEAR(d.ranks, 4 * 13.0 / 28, 1e-12);
  EXPECT_NEAR(d.nodes, 2 * 11.0 / 14, 1e-12);
  f.model.moe.top_k = 3;  // 1 − C(6,3)/C(8,3) = 9/14
  d = f.op().moe_destinations();
  EXPECT_NEAR(d.ranks, 4 * 9.0 / 14, 1e-12);
  EXPECT_NEAR(d.ranks, 4 * (1 - binomial(6, 3) / binomial(8, 3)), 1e-12);
}

TEST(MoeDispatchCost, Qwen3OnEightRanksReachesAboutFiveAndAThirdRanksPerToken) {
  DispatchFixture f;
  f.model = load_model("qwen3-30b-a3b");  // 128 experts, top 8
  f.config.ep = 8;
  const double ranks = f.op().moe_destinations().ranks;
  EXPECT_NEAR(ranks, 8 * (1 - binomial(112, 8) / binomial(128, 8)), 1e-9);
  EXPECT_NEAR(ranks, 5.3, 0.05);
  EXPECT_NEAR(f.op().moe_destinations().nodes, 1.0, 1e-12) << "one node";
}

// Node-limited routing (DeepSeek-V3): M uniform nodes, top_k experts uniformly from their
// experts. 8 experts top 2 on 4 ranks of 2 experts.
TEST(MoeDispatchCost, NodeLimitedRoutingDrawsTheExpertsFromMNodes) {
  DispatchFixture f;
  f.cluster.devices_per_node = 1;  // 4 nodes of one rank
  const OperatorCost::MoeDestinations free = f.op().moe_destinations();
  EXPECT_NEAR(free.nodes, 4 * 13.0 / 28, 1e-12);  // 1 − C(6,2)/C(8,2) per node
  f.config.moe_node_limit = 2;                     // pool of 4 experts on 2 nodes
  OperatorCost::MoeDestinations d = f.op().moe_destinations();
  EXPECT_NEAR(d.nodes, 2 * (1 - 1.0 / 6), 1e-12);  // 2 · (1 − C(2,2)/C(4,2)) = 5/3
  EXPECT_NEAR(d.ranks, 5.0 / 3, 1e-12);
  EXPECT_LT(d.nodes, free.nodes);
  f.cluster.devices_per_node = 2;  // 2 nodes of 2 ranks, 4 experts per node
  f.config.moe_node_limit = 1;     // one node: both experts there
  d = f.op().moe_destinations();
  EXPECT_NEAR(d.nodes, 1.0, 1e-12);
  EXPECT_NEAR(d.ranks, 2 * (1 - 1.0 / 6), 1e-12);  // 2 ranks · (1 − C(2,2)/C(4,2))
  f.config.moe_node_limit = 2;  // as many as there are nodes: no limit
  d = f.op().moe_destinations();
  EXPECT_NEAR(d.nodes, 2 * 11.0 / 14, 1e-12);
  EXPECT_NEAR(d.ranks, 4 * 13.0 / 28, 1e-12);
}

// DeepSeek-V3 on ep 64 over 8 nodes: unlimited, 5.3 nodes and 7.7 ranks; to 4 nodes, 3.6 and 7.4.
TEST(MoeDispatchCost, DeepSeekV3NodeLimitOfFourCutsTheRemoteNodes) {
  DispatchFixture f;
  f.model = load_model("deepseek-v3");
  f.config.dp = 128;
  f.config.ep = 64;
  const OperatorCost::MoeDestinations free = f.op().moe_destinations();
  EXPECT_NEAR(free.nodes, 8 * (1 - binomial(224, 8) / binomial(256, 8)), 1e-9);
  EXPECT_NEAR(free.nodes, 5.3, 0.05);
  f.config.moe_node_limit = 4;
  const OperatorCost::MoeDestinations d = f.op().moe_destinations();
  EXPECT_NEAR(d.nodes, 4 * (1 - binomial(96, 8) / binomial(128, 8)), 1e-9);
  EXPECT_NEAR(d.ranks, 32 * (1 - binomial(124, 8) / binomial(128, 8)), 1e-9);
  EXPECT_NEAR(d.nodes, 3.63, 0.01);
  EXPECT_NEAR(d.ranks, 7.36, 0.01);
  // DeepEP's network copies fall with the nodes: the all-to-all over 8 nodes is network-bound.
  f.config.moe_dispatcher = MoeDispatcher::kDeepEP;
  const double limited = f.op().moe_alltoall_s(1e10);  // large: the latencies negligible
  f.config.moe_node_limit = 0;
  const double unlimited = f.op().moe_alltoall_s(1e10);
  EXPECT_NEAR(limited / unlimited, d.nodes / free.nodes, 0.01);
}

// Device-limited routing (DeepSeek-V2): M uniform ranks; the nodes are at most those of the M
// ranks and at most the unlimited count.
TEST(MoeDispatchCost, DeviceLimitedRoutingDrawsTheExpertsFromMRanks) {
  DispatchFixture f;  // 8 experts top 2 on 4 ranks of 2
  f.config.moe_device_limit = 2;
  OperatorCost::MoeDestinations d = f.op().moe_destinations();
  EXPECT_NEAR(d.ranks, 2 * (1 - 1.0 / 6), 1e-12);  // 5/3 instead of 4 · 13/28 = 1.86
  EXPECT_NEAR(d.nodes, 1.0, 1e-12) << "one node";
  f.cluster.devices_per_node = 2;
  d = f.op().moe_destinations();
  EXPECT_NEAR(d.nodes, std::min(2 * (1 - 1.0 / 6), 2 * 11.0 / 14), 1e-12);
  f.cluster.devices_per_node = 1;  // 4 nodes of one rank
  f.config.moe_device_limit = 1;   // one rank holds both experts: its node, 4 · (1 − 3/4) = 1
  d = f.op().moe_destinations();
  EXPECT_NEAR(d.ranks, 1.0, 1e-12);
  EXPECT_NEAR(d.nodes, 1.0, 1e-12);
  f.config.moe_device_limit = 4;  // all ranks: no limit
  EXPECT_NEAR(f.op().moe_destinations().ranks, 4 * 13.0 / 28, 1e-12);
}

TEST(MoeDispatchCost, ContiguousRoutingCountsTheRanksAndNodesOfEachWindow) {
  DispatchFixture f;
  f.config.moe_routing = MoeRouting::kContiguous;
  f.cluster.devices_per_node = 2;
  // top 2 of 8 on 4 ranks of 2 experts: token t starts at expert 2t mod 8, one rank.
  EXPECT_NEAR(f.op().moe_destinations().ranks, 1.0, 1e-12);
  EXPECT_NEAR(f.op().moe_destinations().nodes, 1.0, 1e-12);
  // top 3: starts 0,3,6,1,4,7,2,5; windows {0,1,2} … {5,6,7} (mod 8) cover 2 ranks each; nodes
  // of experts 0-3 and 4-7: 1,2,2,1,1,2,2,1 → 1.5.
  f.model.moe.top_k = 3;
  EXPECT_NEAR(f.op().moe_destinations().ranks, 2.0, 1e-12);
  EXPECT_NEAR(f.op().moe_destinations().nodes, 1.5, 1e-12);
  // Random routing of the same: more ranks.
  f.config.moe_routing = MoeRouting::kRandom;
  EXPECT_GT(f.op().moe_destinations().ranks, 2.0);
}

TEST(MoeDispatchCost, DeepEpInsideANodeSendsOneCopyPerDestinationRank) {
  DispatchFixture f;  // ep 4 inside one 8-GPU node: g = 4, one node
  f.config.moe_dispatcher = MoeDispatcher::kDeepEP;
  const double v = 1e8;  // V = tokens · top_k · hidden · bytes
  const LinkSpec& nv = f.cluster.intra_node;
  const double ranks = 4 * 13.0 / 28;
  const double expected =
      v / 2 * ranks * 3 / 4 / nv.effective_bandwidth_bytes_per_s() + nv.latency_s;
  EXPECT_NEAR(f.op().moe_alltoall_s(v), expected, 1e-12);
  // alltoall: top_k copies, 3/4 of them to the other ranks.
  f.config.moe_dispatcher = MoeDispatcher::kAllToAll;
  EXPECT_NEAR(f.op().moe_alltoall_s(v),
              v * 3 / 4 / nv.effective_bandwidth_bytes_per_s() + nv.latency_s, 1e-12);
  EXPECT_LT(expected, f.op().moe_alltoall_s(v));
  // Contiguous routing with deepep: one rank per token.
  f.config.moe_dispatcher = MoeDispatcher::kDeepEP;
  f.config.moe_routing = MoeRouting::kContiguous;
  EXPECT_NEAR(f.op().moe_alltoall_s(v),
              v / 2 * 1.0 * 3 / 4 / nv.effective_bandwidth_bytes_per_s() + nv.latency_s, 1e-12);
}

TEST(MoeDispatchCost, DeepEpAcrossNodesSendsOncePerNodeOverTheNetworkAndForwardsOverNvlink) {
  DispatchFixture f;
  f.cluster.devices_per_node = 2;  // g = 2, 2 nodes
  f.config.moe_dispatcher = MoeDispatcher::kDeepEP;
  const double v = 1e8, u = v / 2;
  const double nv = f.cluster.intra_node.effective_bandwidth_bytes_per_s();
  const double net = f.cluster.inter_node.effective_bandwidth_bytes_per_s();
  const double lat = f.cluster.intra_node.latency_s + f.cluster.inter_node.latency_s;
  const double ranks = 4 * 13.0 / 28, nodes = 2 * 11.0 / 14;
  // NVLink: R·(g−1)/ep direct + R·(ep−g)/ep·(g−1)/g forwarded; network: N·(k−1)/k.
  const double nvlink = u * (ranks * 1 / 4 + ranks * 2 / 4 * 1 / 2);
  const double network = u * nodes * 1 / 2;
  EXPECT_NEAR(f.op().moe_alltoall_s(v), std::max(nvlink / nv, network / net) + lat, 1e-12);
}

TEST(MoeDispatchCost, AlltoallWithContiguousRoutingTakesTheWindowsNodesInItsHierarchicalForm) {
  DispatchFixture f;
  f.cluster.devices_per_node = 2;
  f.model.moe.top_k = 3;
  const double v = 1e8;
  const double nv = f.cluster.intra_node.effective_bandwidth_bytes_per_s();
  const double net = f.cluster.inter_node.effective_bandwidth_bytes_per_s();
  const double lat = f.cluster.intra_node.latency_s + f.cluster.inter_node.latency_s;
  const double flat = std::max(v * 1 / 4 / nv, v * 2 / 4 / net) + lat;
  const auto hierarchical = [&](double remote_nodes) {
    return v * remote_nodes / 3 / net + v * 1 / 2 / nv + lat;
  };
  // Random: the nodes a token's 3 experts (drawn without replacement from 8, 4 per node) are on,
  // each of the 2 remote with probability 1/2.
  const double nodes = 2 * (1 - binomial(4, 3) / binomial(8, 3));
  EXPECT_NEAR(f.op().moe_alltoall_s(v), std::min(flat, hierarchical(nodes / 2)), 1e-12);
  // Node-limited routing (one node per token) reaches one node, remote with probability 1/2: the
  // limit was ignored by this dispatcher (sweep 5).
  f.config.moe_node_limit = 1;
  EXPECT_NEAR(f.op().moe_alltoall_s(v), std::min(flat, hierarchical(0.5)), 1e-12);
  EXPECT_LT(f.op().moe_alltoall_s(v), std::min(flat, hierarchical(nodes / 2)));
  f.config.moe_node_limit = 0;
  f.config.moe_routing = MoeRouting::kContiguous;  // N = 1.5 → d = 0.75
  EXPECT_NEAR(f.op().moe_alltoall_s(v), std::min(flat, hierarchical(0.75)), 1e-12);
}

TEST(MoeDispatchCost, ThePassesPriceTheDispatchersAllToAll) {
  DispatchFixture f;
  const double alltoall = f.op().stage(1, 1, 0).at(Pass::kForward).ep_comm_s;
  f.config.moe_dispatcher = MoeDispatcher::kDeepEP;
  const OperatorCost op = f.op();
  const double deepep = op.stage(1, 1, 0).at(Pass::kForward).ep_comm_s;
  EXPECT_NEAR(deepep,
              op.moe_alltoall_s(op.moe_alltoall_bytes(true)) +
                  op.moe_alltoall_s(op.moe_alltoall_bytes(false)),
              1e-15);
  EXPECT_LT(deepep, alltoall);
  EXPECT_GT(deepep, 0);
}

}  // namespace
}  // namespace jaxpp
