#include "graph/task_graph.h"

#include <functional>
#include <set>

#include <gtest/gtest.h>

#include "graph/error.h"

namespace jaxpp {
namespace {

// A model of `n` identical custom layers (so stage work is easy to predict by hand).
ModelSpec uniform_model(int n) {
  ModelSpec m;
  m.name = "uniform";
  for (int i = 0; i < n; ++i) {
    LayerWork l;
    l.name = std::string("l").append(std::to_string(i));
    l.fwd_flops = 10;
    l.bwd_input_flops = 12;
    l.bwd_weight_flops = 8;
    l.params = 100;
    l.output_bytes = 1000 + i;  // distinct, to check which stage's bytes a transfer carries
    l.stash_bytes = {50, 20, 5};
    l.recompute_flops = {0, 3, 10};
    m.layers.push_back(l);
  }
  return m;
}

TaskGraph build(int stages, PlacementKind kind, int actors, int m, bool split = false,
                Recompute rc = Recompute::kNone, int mb_size = 1) {
  const ModelSpec model = uniform_model(2 * stages);
  const Partition p = auto_partition(std::vector<double>(2 * stages, 1.0), stages);
  TaskGraphOptions o;
  o.num_microbatches = m;
  o.microbatch_size = mb_size;
  o.recompute = rc;
  if (split) o.split_backward.assign(stages, true);
  return TaskGraph::build(model, p, make_placement(kind, stages, actors), o);
}

int count(const TaskGraph& g, NodeKind kind) {
  int n = 0;
  for (int i = 0; i < g.num_nodes(); ++i) n += g.node(i).kind == kind;
  return n;
}

void expect_transfers_exactly_between_different_actors(const TaskGraph& g) {
  for (int v = 0; v < g.num_nodes(); ++v) {
    const TaskNode& n = g.node(v);
    if (n.kind == NodeKind::kTransfer) {
      EXPECT_NE(n.actor, n.peer) << n.label();
      ASSERT_EQ(g.predecessors(v).size(), 1u);
      ASSERT_EQ(g.successors(v).size(), 1u);
      EXPECT_EQ(g.node(g.predecessors(v)[0]).actor, n.actor) << n.label();
      EXPECT_EQ(g.node(g.successors(v)[0]).actor, n.peer) << n.label();
      continue;
    }
    for (int w : g.successors(v)) {
      if (g.node(w).kind == NodeKind::kTransfer) continue;
      EXPECT_EQ(g.node(w).actor, n.actor) << n.label() << " -> " << g.node(w).label();
    }
  }
}

TEST(TaskGraphTest, LinearPlacementCountsByHand) {
  // 3 stages on 3 actors, 2 microbatches: 12 F/B, 2 boundaries x 2 directions x 2 microbatches
  // = 8 transfers, 3 reductions, 3 optimizer steps.
  const TaskGraph g = build(3, PlacementKind::kLinear, 3, 2);
  EXPECT_EQ(count(g, NodeKind::kCompute), 12);
  EXPECT_EQ(count(g, NodeKind::kTransfer), 8);
  EXPECT_EQ(count(g, NodeKind::kGradReduce), 3);
  EXPECT_EQ(count(g, NodeKind::kOptimizer), 3);
  EXPECT_EQ(g.num_nodes(), 26);
  // F chain 8 (2 per transfer) + F->B 6 + B chain 8 + B->reduce 6 + reduce->optimizer 3.
  EXPECT_EQ(g.num_edges(), 31);
  expect_transfers_exactly_between_different_actors(g);
}

TEST(TaskGraphTest, LoopPlacementCountsByHand) {
  // 4 stages on 2 actors (0,1,0,1): every boundary crosses actors.
  const TaskGraph g = build(4, PlacementKind::kLoop, 2, 2);
  EXPECT_EQ(count(g, NodeKind::kCompute), 16);
  EXPECT_EQ(count(g, NodeKind::kTransfer), 12);
  EXPECT_EQ(g.num_nodes(), 36);
  EXPECT_EQ(g.num_edges(), 12 + 8 + 12 + 8 + 4);
  expect_transfers_exactly_between_different_actors(g);
}

TEST(TaskGraphTest, VPlacementKeepsTheTurnOnOneActor) {
  // 4 stages on 2 actors (0,1,1,0): the 1->2 boundary stays on actor 1, no transfer there.
  const TaskGraph g = build(4, PlacementKind::kV, 2, 2);
  EXPECT_EQ(count(g, NodeKind::kTransfer), 8);
  EXPECT_EQ(g.num_nodes(), 32);
  // F chain: 2 crossing boundaries x 2 edges + 1 direct = 5 per microbatch; same for B.
  EXPECT_EQ(g.num_edges(), 10 + 8 + 10 + 8 + 4);
  EXPECT_FALSE(g.find_transfer({TaskKind::kF, 1, 0}).has_value());
  EXPECT_TRUE(g.find_transfer({TaskKind::kF, 2, 0}).has_value());
  expect_transfers_exactly_between_different_actors(g);
}

TEST(TaskGraphTest, SplitBackwardAddsIAndWTasks) {
  const TaskGraph g = build(4, PlacementKind::kV, 2, 2, /*split=*/true);
  EXPECT_EQ(count(g, NodeKind::kCompute), 24);
  EXPECT_EQ(g.num_nodes(), 40);
  EXPECT_EQ(g.num_edges(), 10 + 8 + 10 + 8 + 8 + 4);  // + I->W
  ASSERT_TRUE(g.find_compute({TaskKind::kW, 3, 1}).has_value());
  EXPECT_FALSE(g.find_compute({TaskKind::kB, 3, 1}).has_value());
  const int w = *g.find_compute({TaskKind::kW, 3, 1});
  EXPECT_EQ(g.predecessors(w), std::vector<int>{*g.find_compute({TaskKind::kI, 3, 1})});
  expect_transfers_exactly_between_different_actors(g);
}

TEST(TaskGraphTest, EveryPlacementGivesAnAcyclicGraph) {
  for (const TaskGraph& g :
       {build(3, PlacementKind::kLinear, 3, 4), build(6, PlacementKind::kLoop, 3, 3, true),
        build(4, PlacementKind::kV, 2, 5)}) {
    const std::vector<int> order = g.topological_order();
    ASSERT_EQ(static_cast<int>(order.size()), g.num_nodes());
    std::vector<int> position(g.num_nodes());
    for (int i = 0; i < g.num_nodes(); ++i) position[order[i]] = i;
    for (int v = 0; v < g.num_nodes(); ++v)
      for (int w : g.successors(v)) EXPECT_LT(position[v], position[w]);
  }
}

TEST(TaskGraphTest, WorkAndBytesScaleWithMicrobatchAndRecompute) {
  const TaskGraph g = build(2, PlacementKind::kLinear, 2, 1, false, Recompute::kSelective, 3);
  // Each stage has 2 layers; microbatch size 3.
  const TaskNode& f = g.node(*g.find_compute({TaskKind::kF, 1, 0}));
  EXPECT_DOUBLE_EQ(f.flops, 2 * 10 * 3);
  const TaskNode& b = g.node(*g.find_compute({TaskKind::kB, 1, 0}));
  EXPECT_DOUBLE_EQ(b.flops, 2 * (12 + 8 + 3) * 3);
  // Activation of stage 0 = output of its last layer (layer 1); the gradient back to stage 0
  // has the same shape.
  EXPECT_EQ(g.node(*g.find_transfer({TaskKind::kF, 0, 0})).bytes, 1001 * 3);
  EXPECT_EQ(g.node(*g.find_transfer({TaskKind::kB, 1, 0})).bytes, 1001 * 3);
  EXPECT_EQ(g.stage_work()[0].stash_bytes, 2 * 20 * 3);
  // Gradient reduction: the stage's parameters in the model dtype (bf16).
  for (int v = 0; v < g.num_nodes(); ++v)
    if (g.node(v).kind == NodeKind::kGradReduce) {
      EXPECT_EQ(g.node(v).bytes, 200 * 2);
    }
}

TEST(TaskGraphTest, CycleIsReportedWithATaskOnIt) {
  TaskGraph g = build(1, PlacementKind::kLinear, 1, 1);
  const int f = *g.find_compute({TaskKind::kF, 0, 0});
  const int b = *g.find_compute({TaskKind::kB, 0, 0});
  g.add_edge(b, f);
  try {
    g.topological_order();
    FAIL() << "expected a cycle error";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
    EXPECT_TRUE(msg.find("F0@s0") != std::string::npos || msg.find("B0@s0") != std::string::npos)
        << msg;
  }
}

TEST(TaskGraphTest, CycleMessageDoesNotNameANodeOffTheCycle) {
  // A cycle between stage 1's reduce and optimizer; every other node of stage 1 precedes it, so
  // a careless report would name one of those.
  TaskGraph g = build(2, PlacementKind::kLinear, 2, 1);
  int reduce1 = -1, opt1 = -1;
  for (int v = 0; v < g.num_nodes(); ++v) {
    if (g.node(v).task.stage != 1) continue;
    if (g.node(v).kind == NodeKind::kGradReduce) reduce1 = v;
    if (g.node(v).kind == NodeKind::kOptimizer) opt1 = v;
  }
  g.add_edge(opt1, reduce1);
  try {
    g.topological_order();
    FAIL();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find("reduce s1") != std::string::npos ||
                msg.find("optimizer s1") != std::string::npos)
        << msg;
  }
}

TEST(TaskGraphTest, CriticalPathOfATinyGraph) {
  const TaskGraph g = build(2, PlacementKind::kLinear, 2, 1);
  const CriticalPath cp = g.critical_path([](const TaskNode& n) {
    switch (n.kind) {
      case NodeKind::kCompute:
        return n.task.kind == TaskKind::kF ? 1.0 : 2.0;
      case NodeKind::kTransfer:
        return 0.5;
      case NodeKind::kGradReduce:
        return 0.25;
      case NodeKind::kOptimizer:
        return 0.125;
    }
    return 0.0;
  });
  // F0@s0 1 + xfer .5 + F0@s1 1 + B0@s1 2 + xfer .5 + B0@s0 2 + reduce s0 .25 + optimizer .125
  EXPECT_DOUBLE_EQ(cp.length_s, 7.375);
  std::vector<std::string> labels;
  for (int v : cp.nodes) labels.push_back(g.node(v).label());
  EXPECT_EQ(labels,
            (std::vector<std::string>{"F0@s0", "xfer F0@s0 a0->a1", "F0@s1", "B0@s1",
                                      "xfer B0@s1 a1->a0", "B0@s0", "reduce s0", "optimizer s0"}));
}

TEST(TaskGraphTest, MismatchedPartitionAndPlacementIsAnInputError) {
  const ModelSpec m = uniform_model(4);
  EXPECT_THROW(TaskGraph::build(m, partition_from_starts({0, 2}, 4),
                                make_placement(PlacementKind::kLinear, 3, 3), {}),
               InputError);
  TaskGraphOptions o;
  o.num_microbatches = 0;
  EXPECT_THROW(TaskGraph::build(m, partition_from_starts({0, 2}, 4),
                                make_placement(PlacementKind::kLinear, 2, 2), o),
               InputError);
}

TEST(TaskGraphTest, DotClustersNodesByActor) {
  const TaskGraph g = build(2, PlacementKind::kLinear, 2, 1);
  const std::string dot = g.to_dot();
  EXPECT_EQ(dot.rfind("digraph", 0), 0u);
  EXPECT_NE(dot.find("cluster_actor1"), std::string::npos);
  EXPECT_NE(dot.find("xfer F0@s0 a0->a1"), std::string::npos);
  size_t arrows = 0;
  for (size_t p = dot.find("->"); p != std::string::npos; p = dot.find("->", p + 1)) ++arrows;
  // Every edge plus the arrows inside the two transfer labels.
  EXPECT_EQ(arrows, static_cast<size_t>(g.num_edges()) + 2);
}

}  // namespace
}  // namespace jaxpp
