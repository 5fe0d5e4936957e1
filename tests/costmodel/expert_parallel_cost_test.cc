// Expert parallelism in the cost model (issue 13, item 4): routed experts per ep rank, the
// dispatch/combine all-to-all inside and across nodes, the routing imbalance, the overlap rule of
// an F&B pair, and expert weights, gradients and optimizer state per ep·etp device.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "costmodel/analytic_cost.h"
#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/partition.h"
#include "graph/placement.h"

namespace jaxpp {
namespace {

constexpr int kEpMoeLayer = 1;  // mixtral: the first transformer layer is an MoE layer

struct EpFixture {
  ParallelConfig config;
  ClusterSpec cluster = cluster_preset("h100-sxm");
  ModelSpec model = load_model("mixtral-8x7b");
  EpFixture() {
    cluster.kernel_overhead_s = 0;
    config.dp = 64;
  }
  PassBreakdown pass(Pass p) const {
    const OperatorCost op(model, config, cluster);
    return op.stage(kEpMoeLayer, 1, 0).at(p);
  }
};

TEST(ExpertParallelCost, NoAllToAllWithoutExpertParallelism) {
  EpFixture f;
  EXPECT_EQ(f.pass(Pass::kForward).ep_comm_s, 0);
  EXPECT_EQ(f.pass(Pass::kBackwardInput).ep_comm_s, 0);
}

TEST(ExpertParallelCost, AllToAllInsideANodeIsTheNvlinkShareOfTheBytes) {
  EpFixture f;
  f.config.ep = 8;  // 8 devices of one node
  const OperatorCost op(f.model, f.config, f.cluster);
  const double v = 4096.0 * 2 * 4096 * 2;  // tokens · top_k · hidden · bf16
  const LinkSpec& nv = f.cluster.intra_node;
  const double one = v * 7 / 8 / nv.effective_bandwidth_bytes_per_s() + nv.latency_s;
  EXPECT_NEAR(op.moe_alltoall_s(v), one, 1e-12);
  // Dispatch + combine in the forward, the same again in the input-gradient pass, none in W.
  EXPECT_NEAR(f.pass(Pass::kForward).ep_comm_s, 2 * one, 1e-12);
  EXPECT_NEAR(f.pass(Pass::kBackwardInput).ep_comm_s, 2 * one, 1e-12);
  EXPECT_EQ(f.pass(Pass::kBackwardWeight).ep_comm_s, 0);
}

TEST(ExpertParallelCost, AllToAllAcrossNodesUsesTheNetworkAndTheCheaperOfFlatAndHierarchical) {
  EpFixture f;
  f.model = load_model("deepseek-v3");
  f.config.ep = 64;  // 8 nodes
  const OperatorCost op(f.model, f.config, f.cluster);
  const double v = 1e8;
  const double nv = f.cluster.intra_node.effective_bandwidth_bytes_per_s();
  const double net = f.cluster.inter_node.effective_bandwidth_bytes_per_s();
  const double lat = f.cluster.intra_node.latency_s + f.cluster.inter_node.latency_s;
  const double flat = std::max(v * 7 / 64 / nv, v * 56 / 64 / net) + lat;
  // Top 8 of 256 experts, drawn without replacement, 32 per node: the nodes reached, each remote
  // with probability 7/8.
  double miss = 1;  // C(224, 8) / C(256, 8): a node holds none of the token's experts
  for (int i = 0; i < 8; ++i) miss *= (224.0 - i) / (256.0 - i);
  const double remote_nodes = 8 * (1 - miss) * 7 / 8;
  const double hierarchical = v * remote_nodes / 8 / net + v * 7 / 8 / nv + lat;
  EXPECT_NEAR(op.moe_alltoall_s(v), std::min(flat, hierarchical), 1e-12);
  EXPECT_LT(hierarchical, flat) << "top-8 routing over 8 nodes sends a token to fewer nodes";
  // The network is the bottleneck: across nodes costs more than inside one.
  ParallelConfig intra = f.config;
  intra.ep = 8;
  EXPECT_GT(op.moe_alltoall_s(v), OperatorCost(f.model, intra, f.cluster).moe_alltoall_s(v));
}

TEST(ExpertParallelCost, ExpertGemmsRunAsFewerLargerGroupsPerRank) {
  EpFixture f;
  f.config.ep = 4;
  const OperatorCost op(f.model, f.config, f.cluster);
  const double m = 4096, h = 4096, fe = 14336;
  const double attention = op.gemm_s(m, h + 2 * 1024, h) + op.gemm_s(m, h, h);
  // 2 of the 8 experts per rank, each over the tokens of 4 ranks routed to it (m·2/8·4).
  EXPECT_NEAR(f.pass(Pass::kForward).gemm_s,
              attention + op.gemm_s(m, 8, h) + op.grouped_gemm_s(2, m * 2 / 8 * 4, 2 * fe, h) +
                  op.grouped_gemm_s(2, m * 2 / 8 * 4, h, fe),
              1e-12);
}

TEST(ExpertParallelCost, ImbalanceScalesTheBusiestRanksExpertsAndTheAllToAll) {
  EpFixture f;
  f.config.ep = 8;
  const PassBreakdown balanced = f.pass(Pass::kForward);
  f.config.moe_imbalance = 1.5;
  const PassBreakdown skewed = f.pass(Pass::kForward);
  const OperatorCost op(f.model, f.config, f.cluster);
  const double v = 4096.0 * 2 * 4096 * 2;
  EXPECT_NEAR(skewed.ep_comm_s, 2 * op.moe_alltoall_s(1.5 * v), 1e-12);
  EXPECT_GT(skewed.gemm_s, balanced.gemm_s * 1.3);
  EXPECT_EQ(skewed.attention_s, balanced.attention_s);
}

TEST(ExpertParallelCost, ExpertWeightsGradsAndOptimizerStateAreDividedByEpTimesEtp) {
  EpFixture f;
  f.config.pp = 2;
  f.config.tp = 2;
  f.config.dp = 8;
  f.config.ep = 4;
  f.config.etp = 2;
  const Partition p = auto_partition(f.model, {2, 0, 0});
  const Placement place = make_placement(PlacementKind::kLinear, 2, 2);
  const MemoryModel mem = build_memory_model(f.model, p, place, f.config, f.cluster);
  double routed = 0;
  for (int l = 0; l < f.model.num_layers(); ++l)
    routed += static_cast<double>(f.model.routed_expert_params(l));
  int64_t params = 0;
  for (const ActorMemory& a : mem.actors) params += a.params;
  const double expected =
      (static_cast<double>(f.model.total_params()) - routed) / 2 + routed / (4 * 2);
  EXPECT_NEAR(static_cast<double>(params), expected, 4);
  // The distributed optimizer shards the experts over their edp = 2·8/(4·2) = 2 replicas.
  f.config.zero1 = true;
  const MemoryModel z = build_memory_model(f.model, p, place, f.config, f.cluster);
  int64_t optimizer = 0;
  for (const ActorMemory& a : z.actors) optimizer += a.optimizer_bytes;
  const double dense = static_cast<double>(f.model.total_params()) - routed;
  EXPECT_NEAR(static_cast<double>(optimizer), 12 * (dense / 2 / 8 + routed / 8 / 2), 64);
}

// DeepSeek-V3's MTP module copies the last (MoE) transformer block: its routed experts are spread
// over the ep ranks like that block's, not held whole by the stage that runs the module.
TEST(ExpertParallelCost, TheMtpModulesRoutedExpertsAreDividedByEpLikeItsBlocks) {
  EpFixture f;
  f.model = load_model("deepseek-v3");
  f.config.dp = 128;
  f.config.ep = 64;
  const int mtp = f.model.num_layers() - 2;
  ASSERT_EQ(f.model.layers[static_cast<size_t>(mtp)].name, "mtp0");
  const double routed = 256.0 * 3 * 7168 * 2048;
  EXPECT_EQ(static_cast<double>(f.model.routed_expert_params(mtp)), routed);
  EXPECT_EQ(f.model.routed_expert_params(mtp), f.model.routed_expert_params(mtp - 1));
  const double params = static_cast<double>(f.model.layers[static_cast<size_t>(mtp)].params);
  const OperatorCost op(f.model, f.config, f.cluster);
  EXPECT_NEAR(op.device_params(mtp, 1, params, false), (params - routed) + routed / 64, 1);
  // The total over the model is unchanged: the module is still left out of it.
  double all = 0;
  for (int l = 0; l < f.model.num_layers(); ++l)
    all += static_cast<double>(f.model.routed_expert_params(l));
  EXPECT_EQ(all, 59 * routed);  // 58 MoE layers (61 less 3 dense) and the module
  // A dense model's MTP module has no routed experts.
  ModelSpec dense = load_model("deepseek-v3");
  dense.moe = MoeSpec{};
  EXPECT_EQ(dense.routed_expert_params(mtp), 0);
}

// DeepSeek-V3 with its MTP module: the module, the transformer layer its block copies and the
// logits layer whose head it shares.
struct MtpFixture : EpFixture {
  int mtp = 0, block = 0, head = 0;
  MtpFixture() {
    model = load_model("deepseek-v3");
    mtp = model.num_layers() - 2;
    block = mtp - 1;
    head = mtp + 1;
  }
};

// The MTP module priced kernel by kernel: the block it copies (attention, experts, all-to-all),
// the shared head and loss, and its own 2h -> h projection, norms and concatenation; nothing on
// the FLOP curve ("other").
TEST(ExpertParallelCost, TheMtpModuleIsItsBlockPlusTheSharedHeadPlusItsProjection) {
  MtpFixture f;
  f.config.dp = 128;
  f.config.ep = 64;
  const int mtp = f.mtp, block = f.block, head = f.head;
  ASSERT_EQ(f.model.layers[static_cast<size_t>(block)].kind, LayerKind::kTransformer);
  ASSERT_EQ(f.model.layers[static_cast<size_t>(head)].kind, LayerKind::kLogits);
  const OperatorCost op(f.model, f.config, f.cluster);
  const auto at = [&](int l, Pass p) { return op.stage(l, 1, 0).at(p); };
  const double h = 7168, m = 4096;
  const double proj[] = {op.gemm_s(m, h, 2 * h), op.gemm_s(m, 2 * h, h), op.gemm_s(2 * h, h, m)};
  const double hbm = f.cluster.hbm_bandwidth_bytes_per_s * f.cluster.hbm_efficiency;
  const double norms[] = {8 * h * 2 * m / hbm, 16 * h * 2 * m / hbm, 0};
  const Pass passes[] = {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight};
  for (int i = 0; i < 3; ++i) {
    const Pass p = passes[i];
    const PassBreakdown got = at(mtp, p), b = at(block, p), lm = at(head, p);
    EXPECT_EQ(got.other_s, 0) << i;
    EXPECT_NEAR(got.gemm_s, b.gemm_s + lm.gemm_s + proj[i], 1e-12) << i;
    EXPECT_NEAR(got.attention_s, b.attention_s + lm.attention_s, 1e-12) << i;
    EXPECT_NEAR(got.elementwise_s, b.elementwise_s + lm.elementwise_s + norms[i], 1e-12) << i;
    EXPECT_NEAR(got.ep_comm_s, b.ep_comm_s, 1e-12) << i;
  }
  EXPECT_GT(at(mtp, Pass::kForward).ep_comm_s, 0);  // the block's experts are 64 ranks apart
  EXPECT_NEAR(op.stash_bytes(mtp), op.stash_bytes(block) + op.stash_bytes(head) + m * 2 * h * 2,
              1);
  // Selective recompute re-runs the block's attention core only.
  f.config.recompute = Recompute::kSelective;
  const OperatorCost sel(f.model, f.config, f.cluster);
  EXPECT_NEAR(sel.stage(mtp, 1, 0).at(Pass::kRecompute).attention_s,
              sel.stage(block, 1, 0).at(Pass::kRecompute).attention_s, 1e-12);
  EXPECT_GT(sel.stage(mtp, 1, 0).at(Pass::kRecompute).attention_s, 0);
}

// With tensor parallelism the MTP module adds its projection's collectives to its block's and the
// head's: the output gathered along the hidden dimension (forward) and the input gradient
// all-reduced (backward); with sequence parallelism also the input's all-gather along the
// sequence (forward), the scatter's all-gather and the input gradient's reduce-scatter, and the
// weight gradient's re-gather where the input-gradient GEMM does not hide it (backward).
TEST(ExpertParallelCost, TheMtpProjectionsTensorParallelCollectivesAreAddedToItsBlocks) {
  MtpFixture f;
  f.config.tp = 2;
  f.config.dp = 64;
  f.config.ep = 64;
  const int mtp = f.mtp, block = f.block, head = f.head;
  const double h = 7168, m = 4096, bytes = m * h * 2;
  for (const bool sp : {false, true}) {
    f.config.sequence_parallel = sp;
    const OperatorCost op(f.model, f.config, f.cluster);
    const auto tp_s = [&](int l, Pass p) { return op.stage(l, 1, 0).at(p).tp_comm_s; };
    const double forward = sp ? op.tp_gather_s(bytes) + op.tp_gather_s(2 * bytes)
                              : op.tp_gather_s(bytes);
    const double regather = std::max(0.0, op.tp_gather_s(2 * bytes) - op.gemm_s(m, 2 * h, h / 2));
    const double backward = sp ? op.tp_gather_s(bytes) + op.tp_gather_s(2 * bytes) + regather
                               : op.tp_allreduce_s(2 * bytes);
    ASSERT_GT(forward, 0);
    EXPECT_NEAR(tp_s(mtp, Pass::kForward),
                tp_s(block, Pass::kForward) + tp_s(head, Pass::kForward) + forward, 1e-12)
        << sp;
    EXPECT_NEAR(tp_s(mtp, Pass::kBackwardInput),
                tp_s(block, Pass::kBackwardInput) + tp_s(head, Pass::kBackwardInput) + backward,
                1e-12)
        << sp;
    EXPECT_NEAR(tp_s(mtp, Pass::kBackwardWeight),
                tp_s(block, Pass::kBackwardWeight) + tp_s(head, Pass::kBackwardWeight), 1e-12)
        << sp;
  }
}

// One stage of one MoE layer: F and B of a microbatch, priced by AnalyticCost.
struct PairFixture : EpFixture {
  Partition partition;
  Placement placement = make_placement(PlacementKind::kLinear, 1, 1);
  PairFixture() {
    config.dp = 64;
    config.ep = 64;  // across 8 nodes
    partition = auto_partition(model, {1, 0, 0});
  }
  Instruction group(std::vector<TaskRef> tasks) const {
    Instruction ins;
    ins.op = OpKind::kCompute;
    ins.tasks.assign(tasks.begin(), tasks.end());
    ins.stage = 0;
    return ins;
  }
};

TEST(ExpertParallelCost, AnFAndBPairHidesEachAllToAllBehindTheOtherSidesCompute) {
  PairFixture f;
  const AnalyticCost cost(f.model, f.partition, f.placement, f.config, f.cluster);
  const double a_f = cost.alltoall_task_s(TaskKind::kF, 0);
  const double a_b = cost.alltoall_task_s(TaskKind::kB, 0);
  const double c_f = cost.task_s(TaskKind::kF, 0) - a_f;
  const double c_b = cost.task_s(TaskKind::kB, 0) - a_b;
  ASSERT_GT(a_f, 0);
  const Instruction pair = f.group({{TaskKind::kF, 0, 1}, {TaskKind::kB, 0, 0}});
  const double expected =
      f.cluster.launch_overhead_s + c_f + c_b + std::max(0.0, a_f - c_b) + std::max(0.0, a_b - c_f);
  EXPECT_NEAR(cost.compute_s(0, pair), expected, 1e-12);
  EXPECT_LT(cost.compute_s(0, pair), f.cluster.launch_overhead_s + cost.task_s(TaskKind::kF, 0) +
                                         cost.task_s(TaskKind::kB, 0));
  const CostProvider::AllToAll a = cost.alltoall(0, pair);
  EXPECT_NEAR(a.busy_s, a_f + a_b, 1e-12);
  EXPECT_LT(a.exposed_s, a.busy_s);
}

TEST(ExpertParallelCost, APairOfOneMicrobatchOrOverlapNoneKeepsTheAllToAllSerialised) {
  PairFixture f;
  const Instruction same = f.group({{TaskKind::kF, 0, 0}, {TaskKind::kB, 0, 0}});
  const Instruction other = f.group({{TaskKind::kF, 0, 1}, {TaskKind::kB, 0, 0}});
  const AnalyticCost cost(f.model, f.partition, f.placement, f.config, f.cluster);
  const double serial =
      f.cluster.launch_overhead_s + cost.task_s(TaskKind::kF, 0) + cost.task_s(TaskKind::kB, 0);
  EXPECT_NEAR(cost.compute_s(0, same), serial, 1e-12);  // B waits for its own F
  f.config.moe_overlap = MoeOverlap::kNone;
  const AnalyticCost none(f.model, f.partition, f.placement, f.config, f.cluster);
  EXPECT_NEAR(none.compute_s(0, other), serial, 1e-12);
  EXPECT_EQ(none.alltoall(0, other).exposed_s, none.alltoall(0, other).busy_s);
}

TEST(ExpertParallelCost, ExpertGradientsAreReducedOverTheirOwnReplicas) {
  PairFixture f;
  const AnalyticCost cost(f.model, f.partition, f.placement, f.config, f.cluster);
  Instruction reduce;
  reduce.op = OpKind::kAllReduce;
  reduce.stage = 0;
  reduce.bytes = cost.grad_bytes(0);
  // Per device: the dense gradients plus 1/64 of the experts'.
  double routed = 0;
  for (int l = 0; l < f.model.num_layers(); ++l)
    routed += static_cast<double>(f.model.routed_expert_params(l));
  const double dense = static_cast<double>(f.model.total_params()) - routed;
  EXPECT_NEAR(static_cast<double>(reduce.bytes), 4 * (dense + routed / 64), 8);
  // ep = dp = 64: each expert has a single replica, so only the dense part is reduced.
  EXPECT_NEAR(cost.allreduce_s(0, reduce), cost.replica_allreduce_s(4 * dense, 64, 1), 1e-9);
}

// ---- The all-to-all payload type (dispatch and combine) ---------------------------------------

TEST(AllToAllDtype, UnsetBothDirectionsCarryTheActivationsType) {
  EpFixture f;
  f.config.ep = 8;
  const OperatorCost op(f.model, f.config, f.cluster);
  const double v = 4096.0 * 2 * 4096 * 2;  // tokens · top_k · hidden · bf16
  EXPECT_DOUBLE_EQ(op.moe_alltoall_bytes(true), v);
  EXPECT_DOUBLE_EQ(op.moe_alltoall_bytes(false), v);
}

TEST(AllToAllDtype, AnFp8DispatchSendsOneBytePlusAScalePer128ElementsAndCostsLess) {
  EpFixture f;
  f.config.ep = 8;
  const double bf16_forward = f.pass(Pass::kForward).ep_comm_s;
  set_alltoall_dtypes(f.model, "fp8,bf16", "--a2a-dtype");
  const OperatorCost op(f.model, f.config, f.cluster);
  const double tokens_routed = 4096.0 * 2;
  EXPECT_DOUBLE_EQ(op.moe_alltoall_bytes(true), tokens_routed * 4096 * (1 + 4.0 / 128));
  EXPECT_DOUBLE_EQ(op.moe_alltoall_bytes(false), tokens_routed * 4096 * 2);
  // Forward and input-gradient pass: one all-to-all of each direction.
  const double expected = op.moe_alltoall_s(op.moe_alltoall_bytes(true)) +
                          op.moe_alltoall_s(op.moe_alltoall_bytes(false));
  EXPECT_NEAR(f.pass(Pass::kForward).ep_comm_s, expected, 1e-15);
  EXPECT_NEAR(f.pass(Pass::kBackwardInput).ep_comm_s, expected, 1e-15);
  EXPECT_LT(f.pass(Pass::kForward).ep_comm_s, bf16_forward);
  // fp32 both ways: twice bf16's bytes.
  set_alltoall_dtypes(f.model, "fp32", "--a2a-dtype");
  EXPECT_DOUBLE_EQ(OperatorCost(f.model, f.config, f.cluster).moe_alltoall_bytes(true),
                   tokens_routed * 4096 * 4);
  EXPECT_DOUBLE_EQ(OperatorCost(f.model, f.config, f.cluster).moe_alltoall_bytes(false),
                   tokens_routed * 4096 * 4);
}

TEST(AllToAllDtype, DeepSeekV3DispatchesInFp8AndCombinesInBf16) {
  const ModelSpec m = load_model("deepseek-v3");
  ASSERT_TRUE(m.moe.dispatch_dtype && m.moe.combine_dtype);
  EXPECT_EQ(*m.moe.dispatch_dtype, Dtype::kFp8);
  EXPECT_EQ(*m.moe.combine_dtype, Dtype::kBf16);
  EXPECT_FALSE(load_model("mixtral-8x7b").moe.dispatch_dtype.has_value());
}

TEST(AllToAllDtype, ModelJsonKeepsThePayloadTypesInBothForms) {
  ModelSpec m = load_model("mixtral-8x7b");
  set_alltoall_dtypes(m, "fp8,fp16", "--a2a-dtype");
  for (const nlohmann::json& j : {model_to_json(m), model_shape_to_json(m)}) {
    EXPECT_EQ(j.at("a2a_dispatch_dtype"), "fp8");
    EXPECT_EQ(j.at("a2a_combine_dtype"), "fp16");
    const ModelSpec back = model_from_json(j, "m.json");
    EXPECT_EQ(back.moe.dispatch_dtype, m.moe.dispatch_dtype);
    EXPECT_EQ(back.moe.combine_dtype, m.moe.combine_dtype);
  }
  // Unset stays unset (the activations' type), and writes no key.
  EXPECT_FALSE(model_to_json(load_model("mixtral-8x7b")).contains("a2a_dispatch_dtype"));
}

TEST(AllToAllDtype, BadPayloadTypesAreRefusedNamingTheFlagOrField) {
  ModelSpec m = load_model("mixtral-8x7b");
  const auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message([&] { set_alltoall_dtypes(m, "fp4", "--a2a-dtype"); }).find("--a2a-dtype"),
            std::string::npos);
  EXPECT_NE(message([&] { set_alltoall_dtypes(m, "fp8,int8", "--a2a-dtype"); }).find("int8"),
            std::string::npos);
  ModelSpec dense = load_model("gpt3-13b");
  EXPECT_NE(message([&] { set_alltoall_dtypes(dense, "fp8", "--a2a-dtype"); }).find("no routed"),
            std::string::npos);
  nlohmann::json j = model_shape_to_json(m);
  j["a2a_combine_dtype"] = "int4";
  EXPECT_NE(message([&] { model_from_json(j, "m.json"); }).find("a2a_combine_dtype"),
            std::string::npos);
  nlohmann::json d = model_shape_to_json(dense);
  d["a2a_dispatch_dtype"] = "fp8";
  EXPECT_NE(message([&] { model_from_json(d, "d.json"); }).find("a2a_dispatch_dtype"),
            std::string::npos);
}

}  // namespace
}  // namespace jaxpp
