// Hand-off to trainers (handoff/handoff.h): golden Megatron-LM arguments, torchtitan TOML and
// JaxPP snippets; the Megatron arguments read back build the same plan (round trip); options a
// target cannot express are errors naming them.
// Regenerate the golden files after an intended change with
//   JAXPP_UPDATE_GOLDEN=1 ./build/bin/handoff_tests      (then review the diff)
#include "handoff/handoff.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/model.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

void expect_handoff_golden(const std::string& actual, const std::string& name) {
  const std::string path = std::string(JAXPP_TEST_DATA_DIR) + "/handoff/" + name;
  if (const char* update = std::getenv("JAXPP_UPDATE_GOLDEN");
      update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing golden file " << path;
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str()) << "output differs from " << path;
}

struct HandoffCase {
  int gpus, pp, tp, dp, v, global_batch, microbatch_size;
  std::string schedule;
  Recompute recompute = Recompute::kNone;
  bool sp = false, zero1 = false, overlap = false;
  PartitionMode partition = PartitionMode::kAuto;
  int cp = 1;
  int recompute_layers = -1;
};

PlanRequest handoff_request(const HandoffCase& c) {
  PlanRequest req;
  req.model = load_model("gpt3-1.3b");
  req.cluster = load_cluster("a100-80g");
  ParallelConfig& p = req.config;
  p.gpus = c.gpus;
  p.pp = c.pp;
  p.tp = c.tp;
  p.dp = c.dp;
  p.cp = c.cp;
  p.virtual_stages = c.v;
  p.global_batch = c.global_batch;
  p.microbatch_size = c.microbatch_size;
  p.schedule = c.schedule;
  p.recompute = c.recompute;
  p.recompute_layers = c.recompute_layers;
  p.sequence_parallel = c.sp;
  p.zero1 = c.zero1;
  p.overlap_grad_reduce = c.overlap;
  req.partition = c.partition;
  return req;
}

// Uneven (cost-balanced) partition: the layout; 1F1B with everything Megatron has a flag for.
const HandoffCase kMegatron1F1B{.gpus = 16,
                                .pp = 4,
                                .tp = 2,
                                .dp = 2,
                                .v = 1,
                                .global_batch = 64,
                                .microbatch_size = 1,
                                .schedule = "Std1F1B",
                                .recompute = Recompute::kFull,
                                .sp = true,
                                .zero1 = true,
                                .overlap = true};
// Megatron's own even split with virtual stages: --num-virtual-stages-per-pipeline-rank.
const HandoffCase kMegatronInterleaved{.gpus = 8,
                                       .pp = 2,
                                       .tp = 2,
                                       .dp = 2,
                                       .v = 3,
                                       .global_batch = 32,
                                       .microbatch_size = 2,
                                       .schedule = "MegatronInterleaved",
                                       .recompute = Recompute::kSelective,
                                       .sp = true,
                                       .partition = PartitionMode::kEven};
const HandoffCase kZbH1{.gpus = 8,
                        .pp = 4,
                        .tp = 1,
                        .dp = 2,
                        .v = 1,
                        .global_batch = 64,
                        .microbatch_size = 1,
                        .schedule = "ZeroBubble"};
const HandoffCase kInterleavedJaxpp{.gpus = 8,
                                    .pp = 2,
                                    .tp = 2,
                                    .dp = 2,
                                    .v = 2,
                                    .global_batch = 32,
                                    .microbatch_size = 1,
                                    .schedule = "Interleaved1F1B"};

TEST(Handoff, MegatronArgumentsOfAnUnevenPartitionGiveTheLayout) {
  const Plan plan = build_plan(handoff_request(kMegatron1F1B));
  const std::string text = megatron_arguments(plan, "Std1F1B");
  EXPECT_NE(text.find("--pipeline-model-parallel-layout \"E"), std::string::npos) << text;
  expect_handoff_golden(text, "megatron_1f1b_layout.txt");
}

TEST(Handoff, MegatronArgumentsOfAnEvenInterleavedPlanGiveTheVirtualStages) {
  const Plan plan = build_plan(handoff_request(kMegatronInterleaved));
  const std::string text = megatron_arguments(plan, "MegatronInterleaved");
  EXPECT_NE(text.find("--num-virtual-stages-per-pipeline-rank 3"), std::string::npos) << text;
  EXPECT_EQ(text.find("--pipeline-model-parallel-layout"), std::string::npos) << text;
  expect_handoff_golden(text, "megatron_interleaved_even.txt");
}

int count_transformer_layers(const ModelSpec& m) {
  int n = 0;
  for (const LayerWork& l : m.layers) n += l.kind == LayerKind::kTransformer ? 1 : 0;
  return n;
}

// The architecture Megatron-LM builds from the arguments read back (its default for each one left
// out) is the plan's model.
void expect_megatron_model(const MegatronSettings& s, const ModelSpec& m) {
  SCOPED_TRACE(m.name);
  const MegatronModel& a = s.model;
  EXPECT_EQ(a.dtype, m.dtype == Dtype::kFp8 ? Dtype::kBf16 : m.dtype);
  EXPECT_EQ(s.fp8, m.dtype == Dtype::kFp8);
  EXPECT_EQ(s.num_layers, count_transformer_layers(m));
  EXPECT_EQ(a.hidden, m.hidden);
  EXPECT_EQ(a.ffn_hidden, m.ffn_hidden);
  EXPECT_EQ(a.heads, m.heads);
  EXPECT_EQ(a.mla, m.mla.enabled());
  if (m.mla.enabled()) {
    EXPECT_EQ(a.query_groups, 0);
    EXPECT_EQ(a.q_lora_rank, m.mla.q_lora_rank);
    EXPECT_EQ(a.kv_lora_rank, m.mla.kv_lora_rank);
    EXPECT_EQ(a.qk_head_dim, m.mla.qk_nope_head_dim);
    EXPECT_EQ(a.qk_pos_emb_head_dim, m.mla.qk_rope_head_dim);
    EXPECT_EQ(a.v_head_dim, m.mla.v_head_dim);
  } else {
    EXPECT_EQ(a.query_groups == 0 ? a.heads : a.query_groups, m.kv_heads);
    EXPECT_EQ(a.kv_channels == 0 ? a.hidden / a.heads : a.kv_channels, m.attention_head_dim());
  }
  EXPECT_EQ(a.swiglu, m.gated_mlp);
  EXPECT_EQ(a.rmsnorm, m.gated_mlp);
  EXPECT_EQ(a.bias_linear, !m.gated_mlp);
  EXPECT_EQ(a.qkv_bias || a.bias_linear, m.qkv_bias || !m.gated_mlp);
  EXPECT_EQ(a.qk_layernorm, m.qk_norm);
  EXPECT_EQ(a.rope, !m.learned_positions());
  EXPECT_EQ(a.seq_len, m.seq_len);
  EXPECT_EQ(a.max_position_embeddings, m.seq_len);
  EXPECT_EQ(a.dropout, !m.gated_mlp && !m.no_dropout);
  EXPECT_EQ(a.untied, !m.tied_embeddings);
  EXPECT_EQ(a.vocab, m.vocab);
  EXPECT_EQ(a.te_cross_entropy, m.cross_entropy == CrossEntropy::kLogitsDtype);
  EXPECT_EQ(a.mtp_layers, m.mtp_modules);
  EXPECT_EQ(a.experts, m.moe.experts);
  if (!m.moe.enabled()) return;
  EXPECT_EQ(a.top_k, m.moe.top_k);
  EXPECT_EQ(a.moe_ffn_hidden, m.moe.expert_ffn_hidden);
  EXPECT_EQ(a.shared_expert_size, m.moe.shared_experts * m.moe.shared_ffn_hidden);
  EXPECT_EQ(a.first_dense_layers, m.moe.first_dense_layers);
  EXPECT_EQ(a.sigmoid_router, m.moe.router == MoeRouter::kSigmoid);
  EXPECT_TRUE(a.grouped_gemm);
  EXPECT_EQ(a.legacy_grouped_gemm, m.moe.expert_gemm == ExpertGemm::kGrouped);
}

// Arguments -> configuration and partition -> build_plan gives the same plan, and the model
// arguments describe the plan's model.
void expect_megatron_round_trip(const PlanRequest& original_request, const std::string& schedule) {
  const Plan plan = build_plan(original_request);
  const MegatronSettings s = parse_megatron_arguments(megatron_arguments(plan, schedule), "args");
  expect_megatron_model(s, plan.model);
  PlanRequest req;
  req.model = original_request.model;
  req.cluster = original_request.cluster;
  req.config = s.config;
  req.config.gpus = plan.config.gpus;  // the launch's world size
  req.config.dp = plan.config.gpus / (s.config.pp * s.config.tp * s.config.cp);
  if (s.stage_layers.empty()) {
    req.partition = PartitionMode::kEven;
  } else {
    req.partition = PartitionMode::kExplicit;
    int start = 0;
    for (int layers : s.stage_layers) {
      req.partition_starts.push_back(start);
      start += layers;
    }
  }
  const Plan back = build_plan(req);
  EXPECT_EQ(back.config, plan.config);
  EXPECT_EQ(back.partition, plan.partition);
  EXPECT_EQ(back.placement, plan.placement);
  EXPECT_EQ(back.program, plan.program);
}

void expect_megatron_round_trip(const HandoffCase& c) {
  expect_megatron_round_trip(handoff_request(c), c.schedule);
}

TEST(Handoff, MegatronArgumentsReadBackBuildTheSamePlan) {
  expect_megatron_round_trip(kMegatron1F1B);
  expect_megatron_round_trip(kMegatronInterleaved);
}

TEST(Handoff, TorchtitanTomlNamesTheCsvAndTheModulesOfEachStage) {
  const Plan plan = build_plan(handoff_request(kZbH1));
  const std::string text = torchtitan_toml(plan, "ZeroBubble", "zb.csv");
  EXPECT_NE(text.find("pipeline_parallel_schedule_csv = \"zb.csv\""), std::string::npos);
  EXPECT_NE(text.find("[\"tok_embeddings\", \"layers.0\""), std::string::npos);
  EXPECT_NE(text.find("\"norm\", \"output\"]]"), std::string::npos);
  expect_handoff_golden(text, "torchtitan_zb_h1.toml");
}

TEST(Handoff, JaxppSnippetGivesTheScheduleClassMeshAndStageBoundaries) {
  const Plan plan = build_plan(handoff_request(kInterleavedJaxpp));
  const std::string text = jaxpp_snippet(plan, "Interleaved1F1B");
  EXPECT_NE(text.find("jaxpp.Interleaved1F1B(num_stages=NUM_STAGES, mpmd_dim=PP)"),
            std::string::npos);
  EXPECT_NE(text.find("reshape((PP, DP, TP))"), std::string::npos);
  expect_handoff_golden(text, "jaxpp_interleaved.py");
}

std::string handoff_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Handoff, OptionsATargetCannotExpressAreErrorsNamingThem) {
  const Plan zb = build_plan(handoff_request(kZbH1));
  EXPECT_NE(handoff_error([&] {
              megatron_arguments(zb, "ZeroBubble");
            }).find("--format megatron: schedule ZeroBubble cannot be expressed"),
            std::string::npos);
  const Plan zero1 = build_plan(handoff_request(kMegatron1F1B));
  EXPECT_NE(handoff_error([&] {
              torchtitan_toml(zero1, "Std1F1B", "s.csv");
            }).find("--format torchtitan: ZeRO-1"),
            std::string::npos);
  EXPECT_NE(handoff_error([&] { jaxpp_snippet(zero1, "Std1F1B"); }).find("--format jaxpp: ZeRO-1"),
            std::string::npos);
  const Plan interleaved = build_plan(handoff_request(kMegatronInterleaved));
  EXPECT_NE(handoff_error([&] {
              jaxpp_snippet(interleaved, "MegatronInterleaved");
            }).find("--format jaxpp: sequence parallelism"),
            std::string::npos);
  HandoffCase gpipe = kZbH1;
  gpipe.schedule = "GPipe";
  EXPECT_NE(handoff_error([&] {
              jaxpp_snippet(build_plan(handoff_request(gpipe)), "GPipe");
            }).find("--format jaxpp: schedule GPipe cannot be expressed"),
            std::string::npos);
}

// Gradient sharding goes to Megatron-FSDP (megatron/training/arguments.py at 000c4ac2:
// --use-megatron-fsdp, --data-parallel-sharding-strategy optim_grads; validate_args asserts
// --ckpt-format fsdp_dtensor), with the distributed optimizer the plan's sharding implies; the
// arguments read back give the same plan.
TEST(Handoff, MegatronGradientShardingIsMegatronFsdpOptimGrads) {
  PlanRequest req = handoff_request(kMegatron1F1B);
  const std::string plain = megatron_arguments(build_plan(req), "Std1F1B");
  EXPECT_EQ(plain.find("--use-megatron-fsdp"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("--data-parallel-sharding-strategy"), std::string::npos) << plain;
  req.config.shard_gradients = true;
  const std::string text = megatron_arguments(build_plan(req), "Std1F1B");
  EXPECT_NE(text.find("--sequence-parallel \\\n--use-megatron-fsdp \\\n"
                      "--data-parallel-sharding-strategy optim_grads \\\n"
                      "--ckpt-format fsdp_dtensor \\\n--no-gradient-accumulation-fusion \\\n"
                      "--use-distributed-optimizer \\\n--overlap-grad-reduce \\\n"
                      "--overlap-param-gather \\\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# Megatron-FSDP (ZeRO-2): the plan shards gradients and optimizer state "
                      "over dp x cp = 2 ranks"),
            std::string::npos)
      << text;
  const MegatronSettings back = parse_megatron_arguments(text, "args");
  EXPECT_TRUE(back.config.zero1);
  EXPECT_TRUE(back.config.shard_gradients);
  EXPECT_FALSE(back.config.shard_parameters);
}

// Recompute op (torchtitan's op-level selective checkpointing) is torchtitan's own policy: its
// job config selects it; Megatron-LM (full or selective granularity) and the JaxPP snippet (no
// every-other-matmul policy) refuse it by name.
TEST(Handoff, OpRecomputeGoesToTorchtitanOnly) {
  PlanRequest req = handoff_request(kZbH1);
  req.config.recompute = Recompute::kOp;
  const Plan plan = build_plan(req);
  const std::string toml = torchtitan_toml(plan, "ZeroBubble", "zb.csv");
  EXPECT_NE(toml.find("[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"op\"\n"),
            std::string::npos)
      << toml;
  EXPECT_NE(handoff_error([&] { jaxpp_snippet(plan, "ZeroBubble"); }).find("recompute op"),
            std::string::npos);
  PlanRequest m = handoff_request(kMegatron1F1B);
  m.config.recompute = Recompute::kOp;
  EXPECT_NE(handoff_error([&] {
              megatron_arguments(build_plan(m), "Std1F1B");
            }).find("--format megatron: recompute op"),
            std::string::npos);
  m.config.recompute = Recompute::kSelective;
  EXPECT_FALSE(megatron_arguments(build_plan(m), "Std1F1B").empty());
}

// Megatron-LM's --attention-backend: "flash" (Transformer Engine's flash-attn backend) for both
// flash kernels of the plan, "unfused" for the unfused one.
TEST(Handoff, MegatronAttentionBackendOfEachKernel) {
  PlanRequest req = handoff_request(kMegatron1F1B);
  for (const auto& [kernel, backend] :
       {std::pair{AttentionKernel::kFlash, "--attention-backend flash "},
        std::pair{AttentionKernel::kFlash2, "--attention-backend flash "},
        std::pair{AttentionKernel::kUnfused, "--attention-backend unfused "}}) {
    req.config.attention = kernel;
    EXPECT_NE(megatron_arguments(build_plan(req), "Std1F1B").find(backend), std::string::npos)
        << to_string(kernel);
  }
}

// Parameter sharding: Megatron-FSDP's optim_grads_params (ZeRO-3); read back as zero1 with
// gradient and parameter sharding, and the whole plan round-trips.
TEST(Handoff, MegatronParameterShardingIsMegatronFsdpOptimGradsParams) {
  PlanRequest req = handoff_request(kMegatron1F1B);
  req.config.zero1 = true;
  req.config.shard_gradients = true;
  req.config.shard_parameters = true;
  const std::string text = megatron_arguments(build_plan(req), "Std1F1B");
  EXPECT_NE(text.find("--use-megatron-fsdp \\\n"
                      "--data-parallel-sharding-strategy optim_grads_params \\\n"
                      "--ckpt-format fsdp_dtensor \\\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(ZeRO-3): the plan shards parameters, gradients and optimizer state over "
                      "dp x cp = 2 ranks"),
            std::string::npos)
      << text;
  const MegatronSettings back = parse_megatron_arguments(text, "args");
  EXPECT_TRUE(back.config.zero1);
  EXPECT_TRUE(back.config.shard_gradients);
  EXPECT_TRUE(back.config.shard_parameters);
  // The round trip rebuilds the plan from the arguments alone.
  expect_megatron_round_trip(req, "Std1F1B");
}

// Megatron-LM's own constraints on the sharding arguments, read back: the strategy applies on
// the Megatron-FSDP code path only, which needs the fsdp_dtensor checkpoint format
// (validate_args), and the strategy has four choices.
TEST(Handoff, MegatronShardingArgumentsThatMegatronRefusesAreErrors) {
  EXPECT_NE(handoff_error([] {
              parse_megatron_arguments("--data-parallel-sharding-strategy optim_grads", "a.txt");
            }).find("a.txt: --data-parallel-sharding-strategy optim_grads: needs "
                    "--use-megatron-fsdp"),
            std::string::npos);
  EXPECT_NE(handoff_error([] {
              parse_megatron_arguments(
                  "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads", "a.txt");
            }).find("a.txt: --use-megatron-fsdp: needs --ckpt-format fsdp_dtensor"),
            std::string::npos);
  EXPECT_NE(handoff_error([] {
              parse_megatron_arguments("--data-parallel-sharding-strategy full_shard", "a.txt");
            }).find("expected no_shard, optim, optim_grads or optim_grads_params, got "
                    "'full_shard'"),
            std::string::npos);
  // optim is ZeRO-1 on the Megatron-FSDP path.
  const MegatronSettings optim = parse_megatron_arguments(
      "--use-megatron-fsdp --data-parallel-sharding-strategy optim --ckpt-format fsdp_dtensor",
      "a.txt");
  EXPECT_TRUE(optim.config.zero1);
  EXPECT_FALSE(optim.config.shard_gradients);
}

// The optimizer state: Megatron-LM keeps master-weight remainders with its precision-aware
// optimizer (distributed optimizer only) and has no bf16 state without master weights;
// torchtitan's and JaxPP's exports keep their own fp32 state, so only the default passes.
TEST(Handoff, OptimizerStateOfEachTarget) {
  PlanRequest req = handoff_request(kMegatron1F1B);
  ASSERT_TRUE(req.config.zero1);
  EXPECT_EQ(megatron_arguments(build_plan(req), "Std1F1B").find("--use-precision-aware-optimizer"),
            std::string::npos);
  req.config.optimizer_state = OptimizerState::kRemainders;
  const Plan remainders = build_plan(req);
  EXPECT_NE(megatron_arguments(remainders, "Std1F1B").find("--use-precision-aware-optimizer"),
            std::string::npos);
  EXPECT_NE(handoff_error([&] {
              torchtitan_toml(remainders, "Std1F1B", "s.csv");
            }).find("--format torchtitan: optimizer state 'remainders'"),
            std::string::npos);
  req.config.zero1 = false;
  EXPECT_NE(handoff_error([&] {
              megatron_arguments(build_plan(req), "Std1F1B");
            }).find("needs --use-distributed-optimizer"),
            std::string::npos);
  // fp32 master weights with bf16 moments: the precision-aware optimizer's moment dtypes, and
  // whole master weights (no remainders).
  req.config.optimizer_state = OptimizerState::kBf16Moments;
  EXPECT_NE(handoff_error([&] {
              megatron_arguments(build_plan(req), "Std1F1B");
            }).find("needs --use-distributed-optimizer"),
            std::string::npos);
  req.config.zero1 = true;
  const std::string moments = megatron_arguments(build_plan(req), "Std1F1B");
  EXPECT_NE(moments.find("--use-precision-aware-optimizer"), std::string::npos);
  EXPECT_NE(moments.find("--no-store-param-remainders"), std::string::npos);
  EXPECT_NE(moments.find("--exp-avg-dtype bf16"), std::string::npos);
  EXPECT_NE(moments.find("--exp-avg-sq-dtype bf16"), std::string::npos);
  req.config.zero1 = false;
  req.config.optimizer_state = OptimizerState::kBf16;
  EXPECT_NE(handoff_error([&] {
              megatron_arguments(build_plan(req), "Std1F1B");
            }).find("--format megatron: bf16 optimizer state without master weights"),
            std::string::npos);
  HandoffCase gpipe = kZbH1;
  gpipe.schedule = "GPipe";
  PlanRequest jax = handoff_request(gpipe);
  jax.config.optimizer_state = OptimizerState::kBf16;
  EXPECT_NE(handoff_error([&] {
              jaxpp_snippet(build_plan(jax), "GPipe");
            }).find("--format jaxpp: optimizer state 'bf16'"),
            std::string::npos);
}

// An MoE plan: Megatron gets the expert-parallel sizes (and reads them back), torchtitan only
// the expert layouts it supports with replicated data parallelism, JaxPP none.
PlanRequest moe_handoff_request(int ep, int etp) {
  PlanRequest req;
  req.model = load_model("mixtral-8x7b");
  req.cluster = load_cluster("h100-sxm");
  ParallelConfig& p = req.config;
  p.gpus = 16;
  p.pp = 2;
  p.tp = 2;
  p.dp = 4;
  p.ep = ep;
  p.etp = etp;
  p.global_batch = 64;
  p.microbatch_size = 1;
  p.schedule = "Std1F1B";
  p.sequence_parallel = true;
  req.partition = PartitionMode::kEven;
  return req;
}

// The legacy GroupedMLP (--moe-use-legacy-grouped-gemm) runs the grouped_gemm package outside
// Transformer Engine, in BF16: an FP8 plan with grouped expert GEMMs is refused, per_expert
// (TEGroupedMLP) is written, and BF16 grouped still gets the legacy flag.
TEST(Handoff, Fp8ExpertsOnTheLegacyGroupedGemmAreRefused) {
  PlanRequest req = moe_handoff_request(4, 1);
  req.model.moe.expert_gemm = ExpertGemm::kGrouped;
  const std::string bf16 = megatron_arguments(build_plan(req), "Std1F1B");
  EXPECT_NE(bf16.find("--moe-use-legacy-grouped-gemm"), std::string::npos) << bf16;
  req.model.dtype = Dtype::kFp8;
  const Plan fp8_grouped = build_plan(req);
  EXPECT_NE(handoff_error([&] {
              megatron_arguments(fp8_grouped, "Std1F1B");
            }).find("--format megatron: expert_gemm grouped with FP8"),
            std::string::npos);
  req.model.moe.expert_gemm = ExpertGemm::kPerExpert;
  const std::string per_expert = megatron_arguments(build_plan(req), "Std1F1B");
  EXPECT_NE(per_expert.find("--moe-grouped-gemm"), std::string::npos) << per_expert;
  EXPECT_EQ(per_expert.find("--moe-use-legacy-grouped-gemm"), std::string::npos) << per_expert;
  EXPECT_NE(per_expert.find("--fp8-format"), std::string::npos) << per_expert;
}

TEST(Handoff, TheMoeDispatcherGoesToMegatronAndReadsBack) {
  PlanRequest req = moe_handoff_request(4, 1);
  const std::string alltoall = megatron_arguments(build_plan(req), "Std1F1B");
  EXPECT_NE(alltoall.find("--moe-token-dispatcher-type alltoall"), std::string::npos) << alltoall;
  EXPECT_EQ(alltoall.find("--moe-flex-dispatcher-backend"), std::string::npos) << alltoall;
  EXPECT_EQ(parse_megatron_arguments(alltoall, "args").config.moe_dispatcher,
            MoeDispatcher::kAllToAll);
  req.config.moe_dispatcher = MoeDispatcher::kDeepEP;
  const std::string deepep = megatron_arguments(build_plan(req), "Std1F1B");
  EXPECT_NE(deepep.find("--moe-token-dispatcher-type flex"), std::string::npos) << deepep;
  EXPECT_NE(deepep.find("--moe-flex-dispatcher-backend deepep"), std::string::npos) << deepep;
  EXPECT_EQ(parse_megatron_arguments(deepep, "args").config.moe_dispatcher,
            MoeDispatcher::kDeepEP);
  EXPECT_EQ(parse_megatron_arguments("--moe-token-dispatcher-type flex --moe-enable-deepep", "a")
                .config.moe_dispatcher,
            MoeDispatcher::kDeepEP);
  EXPECT_NE(handoff_error([&] {
              parse_megatron_arguments("--moe-token-dispatcher-type flex", "a.txt");
            }).find("needs --moe-flex-dispatcher-backend"),
            std::string::npos);
  EXPECT_NE(handoff_error([&] {
              parse_megatron_arguments("--moe-token-dispatcher-type allgather", "a.txt");
            }).find("expected alltoall or flex"),
            std::string::npos);
  // A contiguous benchmark gate has no Megatron-LM flag.
  req.config.moe_routing = MoeRouting::kContiguous;
  const Plan contiguous = build_plan(req);
  EXPECT_NE(handoff_error([&] {
              megatron_arguments(contiguous, "Std1F1B");
            }).find("moe_routing contiguous"),
            std::string::npos);
}

TEST(Handoff, ExpertParallelSizesGoToMegatronAndTorchtitanWhereExpressible) {
  const Plan ep4 = build_plan(moe_handoff_request(4, 1));
  const std::string args = megatron_arguments(ep4, "Std1F1B");
  EXPECT_NE(args.find("--expert-model-parallel-size 4"), std::string::npos) << args;
  EXPECT_NE(args.find("--expert-tensor-parallel-size 1"), std::string::npos) << args;
  const MegatronSettings back = parse_megatron_arguments(args, "args");
  EXPECT_EQ(back.config.ep, 4);
  EXPECT_EQ(back.config.expert_tp(), 1);
  // etp = tp is Megatron's default: not written.
  const std::string args_etp_tp = megatron_arguments(build_plan(moe_handoff_request(2, 0)), "Std1F1B");
  EXPECT_NE(args_etp_tp.find("--expert-model-parallel-size 2"), std::string::npos);
  EXPECT_EQ(args_etp_tp.find("--expert-tensor-parallel-size"), std::string::npos);
  // torchtitan: etp 1 with ep = cp·tp = 2 fits; ep 4 does not (its ep comes from FSDP shards).
  const std::string toml = torchtitan_toml(build_plan(moe_handoff_request(2, 1)), "Std1F1B", "s.csv");
  EXPECT_NE(toml.find("expert_parallel_degree = 2\nexpert_tensor_parallel_degree = 1\n"),
            std::string::npos)
      << toml;
  EXPECT_NE(handoff_error([&] {
              torchtitan_toml(ep4, "Std1F1B", "s.csv");
            }).find("--format torchtitan: expert parallelism ep 4 with etp 1"),
            std::string::npos);
  EXPECT_NE(handoff_error([&] {
              jaxpp_snippet(ep4, "Std1F1B");
            }).find("--format jaxpp: expert parallelism (ep 4)"),
            std::string::npos);
}

TEST(Handoff, UnknownMegatronArgumentIsRefusedWithItsName) {
  EXPECT_NE(handoff_error([] {
              parse_megatron_arguments("--pipeline-model-parallel-size 2 --foo 3", "a.txt");
            }).find("a.txt: unknown argument '--foo'"),
            std::string::npos);
}

}  // namespace
}  // namespace jaxpp

namespace jaxpp {
namespace {

// The gradient dtype: Megatron gets its flag and reads it back; fp16 gradients of a bf16 run,
// a bf16 reduction in torchtitan and any explicit dtype in JaxPP are refused by name.
TEST(Handoff, GradientDtypeGoesToMegatronAndReadsBack) {
  for (GradDtype g : {GradDtype::kFp32, GradDtype::kBf16}) {
    PlanRequest req = handoff_request(kMegatron1F1B);
    req.config.grad_dtype = g;
    const Plan plan = build_plan(req);
    const std::string text = megatron_arguments(plan, "Std1F1B");
    const char* flag = g == GradDtype::kFp32 ? "--accumulate-allreduce-grads-in-fp32"
                                             : "--grad-reduce-in-bf16";
    EXPECT_NE(text.find(flag), std::string::npos) << text;
    EXPECT_EQ(parse_megatron_arguments(text, "args").config.grad_dtype, g);
  }
  PlanRequest plain = handoff_request(kMegatron1F1B);
  const std::string text = megatron_arguments(build_plan(plain), "Std1F1B");
  EXPECT_EQ(text.find("grads-in"), std::string::npos) << text;
  EXPECT_EQ(text.find("--grad-reduce-in-bf16"), std::string::npos) << text;

  PlanRequest fp16 = handoff_request(kMegatron1F1B);
  fp16.config.grad_dtype = GradDtype::kFp16;
  EXPECT_NE(handoff_error([&] { megatron_arguments(build_plan(fp16), "Std1F1B"); })
                .find("--format megatron: fp16 gradients"),
            std::string::npos);
  PlanRequest zb = handoff_request(kZbH1);
  zb.config.grad_dtype = GradDtype::kBf16;
  const Plan zb_plan = build_plan(zb);
  EXPECT_NE(handoff_error([&] { torchtitan_toml(zb_plan, "ZBH1", "s.csv"); })
                .find("--format torchtitan: bf16 gradient reduction"),
            std::string::npos);
  EXPECT_NE(handoff_error([&] { jaxpp_snippet(zb_plan, "Std1F1B"); })
                .find("--format jaxpp: bf16 gradients"),
            std::string::npos);
}

}  // namespace
}  // namespace jaxpp

namespace jaxpp {
namespace {

// FP8: Megatron gets the format and the recipe of the model's scaling (and --fp8-param-gather for
// FP8 weights) and reads them back; MXFP8 is refused by torchtitan and JaxPP, which cannot say it.
TEST(Handoff, Fp8RecipeGoesToMegatronAndMxfp8IsRefusedElsewhere) {
  struct Want {
    Fp8Scaling scaling;
    const char* format;
    const char* recipe;
  };
  for (const Want& w : {Want{Fp8Scaling::kCurrent, "hybrid", "tensorwise"},
                        Want{Fp8Scaling::kDelayed, "hybrid", "delayed"},
                        Want{Fp8Scaling::kMxfp8, "e4m3", "mxfp8"}}) {
    PlanRequest req = handoff_request(kMegatron1F1B);
    req.cluster = load_cluster("b200");
    req.model.dtype = Dtype::kFp8;
    req.model.fp8_scaling = w.scaling;
    const std::string text = megatron_arguments(build_plan(req), "Std1F1B");
    EXPECT_NE(text.find(std::string("--fp8-format ") + w.format + " \\\n"), std::string::npos)
        << text;
    EXPECT_NE(text.find(std::string("--fp8-recipe ") + w.recipe + " \\\n"), std::string::npos)
        << text;
    EXPECT_NE(text.find("--fp8-param-gather"), std::string::npos) << text;
    const MegatronSettings back = parse_megatron_arguments(text, "args");
    EXPECT_TRUE(back.fp8);
    EXPECT_EQ(back.fp8_scaling, w.scaling) << w.recipe;
    EXPECT_TRUE(back.fp8_param_gather);
    req.model.fp8_params = false;
    EXPECT_EQ(megatron_arguments(build_plan(req), "Std1F1B").find("--fp8-param-gather"),
              std::string::npos);
  }
  const std::string bf16 = megatron_arguments(build_plan(handoff_request(kMegatron1F1B)), "Std1F1B");
  EXPECT_EQ(bf16.find("--fp8"), std::string::npos) << bf16;
  EXPECT_FALSE(parse_megatron_arguments(bf16, "args").fp8);

  EXPECT_NE(handoff_error([&] {
              parse_megatron_arguments("--fp8-format e4m3 --fp8-recipe blockwise", "a.txt");
            }).find("--fp8-recipe: expected tensorwise, delayed or mxfp8"),
            std::string::npos);
  EXPECT_NE(handoff_error([&] { parse_megatron_arguments("--fp8-format e5m2", "a.txt"); })
                .find("--fp8-format: expected e4m3 or hybrid"),
            std::string::npos);

  PlanRequest mx = handoff_request(kZbH1);
  mx.cluster = load_cluster("b200");
  mx.model.dtype = Dtype::kFp8;
  mx.model.fp8_scaling = Fp8Scaling::kMxfp8;
  const Plan plan = build_plan(mx);
  EXPECT_NE(handoff_error([&] { torchtitan_toml(plan, "ZeroBubble", "s.csv"); })
                .find("--format torchtitan: MXFP8"),
            std::string::npos);
  EXPECT_NE(handoff_error([&] { jaxpp_snippet(plan, "ZeroBubble"); }).find("--format jaxpp: MXFP8"),
            std::string::npos);
  mx.model.fp8_scaling = Fp8Scaling::kCurrent;  // per-tensor FP8 still exports as before
  EXPECT_NO_THROW(torchtitan_toml(build_plan(mx), "ZeroBubble", "s.csv"));
}

}  // namespace
}  // namespace jaxpp

namespace jaxpp {
namespace {

// Full recompute of the first N layers of each stage chunk: Megatron-LM's block method (read
// back as the same plan); torchtitan's every-k-th block where one stage of L blocks has
// floor(L/k) = N; refused otherwise and by the JaxPP snippet.
TEST(Handoff, RecomputeLayersGoToMegatronsBlockMethod) {
  HandoffCase c = kMegatron1F1B;
  c.recompute_layers = 2;
  const std::string text = megatron_arguments(build_plan(handoff_request(c)), "Std1F1B");
  EXPECT_NE(text.find("--recompute-granularity full"), std::string::npos) << text;
  EXPECT_NE(text.find("--recompute-method block"), std::string::npos) << text;
  EXPECT_NE(text.find("--recompute-num-layers 2"), std::string::npos) << text;
  expect_megatron_round_trip(c);
  HandoffCase v = kMegatronInterleaved;
  v.recompute = Recompute::kFull;
  v.recompute_layers = 1;
  expect_megatron_round_trip(v);
  // Uniform (every layer, in groups) reads back as full; block without a count is an error.
  EXPECT_EQ(parse_megatron_arguments("--recompute-granularity full --recompute-method uniform "
                                     "--recompute-num-layers 4",
                                     "args")
                .config.recompute_layers,
            -1);
  EXPECT_NE(handoff_error([] {
              parse_megatron_arguments("--recompute-granularity full --recompute-method block",
                                       "args");
            }).find("--recompute-method block needs --recompute-num-layers"),
            std::string::npos);
  EXPECT_NE(handoff_error([] {
              parse_megatron_arguments("--recompute-method block --recompute-num-layers 2",
                                       "args");
            }).find("needs --recompute-granularity full"),
            std::string::npos);
}

TEST(Handoff, RecomputeLayersGoToTorchtitanAsEveryKthBlockOnOneStage) {
  HandoffCase c{.gpus = 2,
                .pp = 1,
                .tp = 1,
                .dp = 2,
                .v = 1,
                .global_batch = 8,
                .microbatch_size = 1,
                .schedule = "Std1F1B",
                .recompute = Recompute::kFull};
  const auto toml = [&](int n) {
    c.recompute_layers = n;
    return torchtitan_toml(build_plan(handoff_request(c)), "Std1F1B", "s.csv");
  };
  EXPECT_NE(toml(12).find("mode = \"selective\"\nselective_ac_option = \"2\""),
            std::string::npos)
      << toml(12);  // 24 blocks, every 2nd: 12
  EXPECT_NE(toml(8).find("selective_ac_option = \"3\""), std::string::npos);
  EXPECT_NE(toml(24).find("mode = \"full\"\n"), std::string::npos);
  EXPECT_NE(toml(0).find("mode = \"none\"\n"), std::string::npos);
  EXPECT_NE(handoff_error([&] { toml(7); }).find("--format torchtitan: recompute_layers 7 of 24"),
            std::string::npos);
  HandoffCase pp = kZbH1;
  pp.recompute = Recompute::kFull;
  pp.recompute_layers = 2;
  const Plan plan = build_plan(handoff_request(pp));
  EXPECT_NE(handoff_error([&] {
              torchtitan_toml(plan, "ZeroBubble", "zb.csv");
            }).find("not per stage"),
            std::string::npos);
  EXPECT_NE(handoff_error([&] { jaxpp_snippet(plan, "ZeroBubble"); })
                .find("--format jaxpp: recompute_layers 2"),
            std::string::npos);
}

}  // namespace
}  // namespace jaxpp

namespace jaxpp {
namespace {

PlanRequest sharded_request(PlanRequest req, bool params) {
  req.config.zero1 = true;
  req.config.shard_gradients = true;
  req.config.shard_parameters = params;
  return req;
}

// Parameter sharding is torchtitan's FSDP2 over dp·cp (its dp_shard_cp mesh): shard degree dp,
// replicate degree 1, weights resharded after every forward ("always"; torchtitan's "default"
// keeps them gathered under pipeline parallelism). Unsharded plans keep replicate degree dp.
TEST(Handoff, TorchtitanParameterShardingIsFsdpOverDp) {
  const std::string replicated =
      torchtitan_toml(build_plan(handoff_request(kZbH1)), "ZeroBubble", "zb.csv");
  EXPECT_NE(replicated.find("[parallelism]\ndata_parallel_replicate_degree = 2\n"
                            "data_parallel_shard_degree = 1\ntensor_parallel_degree = 1\n"),
            std::string::npos)
      << replicated;
  EXPECT_EQ(replicated.find("fsdp_reshard_after_forward"), std::string::npos) << replicated;
  const std::string fsdp = torchtitan_toml(
      build_plan(sharded_request(handoff_request(kZbH1), true)), "ZeroBubble", "zb.csv");
  EXPECT_NE(fsdp.find("[parallelism]\ndata_parallel_replicate_degree = 1\n"
                      "data_parallel_shard_degree = 2\nfsdp_reshard_after_forward = \"always\"\n"
                      "tensor_parallel_degree = 1\ncontext_parallel_degree = 1\n"),
            std::string::npos)
      << fsdp;
  // The global batch over dp: the same local batch as the replicated run.
  EXPECT_NE(fsdp.find("local_batch_size = 32\nglobal_batch_size = 64\n"), std::string::npos)
      << fsdp;
  // pp 4: the pipelining runtime's deferred reduce-scatter is said.
  EXPECT_NE(fsdp.find("defers FSDP's gradient\n# reduce-scatter to the last microbatch"),
            std::string::npos)
      << fsdp;
}

// ZeRO-1 and ZeRO-2 without parameter sharding have no torchtitan equivalent (FSDP2 always
// shards the parameters); JaxPP refuses every sharding through ZeRO-1.
TEST(Handoff, TorchtitanRefusesZero1AndZero2WithoutParameterSharding) {
  PlanRequest zero1 = handoff_request(kZbH1);
  zero1.config.zero1 = true;
  EXPECT_NE(handoff_error([&] {
              torchtitan_toml(build_plan(zero1), "ZeroBubble", "zb.csv");
            }).find("--format torchtitan: ZeRO-1 (distributed optimizer) without parameter "
                    "sharding"),
            std::string::npos);
  const Plan zero2 = build_plan(sharded_request(handoff_request(kZbH1), false));
  EXPECT_NE(handoff_error([&] {
              torchtitan_toml(zero2, "ZeroBubble", "zb.csv");
            }).find("--format torchtitan: gradient sharding (ZeRO-2) without parameter sharding: "
                    "FSDP2 always shards the parameters at rest"),
            std::string::npos);
  const Plan zero3 = build_plan(sharded_request(handoff_request(kZbH1), true));
  EXPECT_NE(handoff_error([&] { jaxpp_snippet(zero3, "ZeroBubble"); }).find("--format jaxpp: ZeRO-1"),
            std::string::npos);
}

// Expert parallelism under FSDP: torchtitan borrows ep from dp_shard·cp (·tp for etp 1), so ep 4
// with etp 1 fits a sharded plan of dp 4, tp 2 (ep | dp·tp = 8 and cp·tp = 2 | ep), and not the
// replicated one.
TEST(Handoff, TorchtitanExpertParallelismBorrowsFromTheFsdpShards) {
  PlanRequest req = moe_handoff_request(4, 1);
  EXPECT_NE(handoff_error([&] {
              torchtitan_toml(build_plan(req), "Std1F1B", "s.csv");
            }).find("when data parallelism is replicated"),
            std::string::npos);
  const std::string toml =
      torchtitan_toml(build_plan(sharded_request(req, true)), "Std1F1B", "s.csv");
  EXPECT_NE(toml.find("data_parallel_replicate_degree = 1\ndata_parallel_shard_degree = 4\n"),
            std::string::npos)
      << toml;
  EXPECT_NE(toml.find("expert_parallel_degree = 4\nexpert_tensor_parallel_degree = 1\n"),
            std::string::npos)
      << toml;
  // ep 8 with etp 1 (8 | dp·cp·tp = 8) fits too; replicated, it needs ep = cp·tp = 2.
  PlanRequest ep8 = moe_handoff_request(8, 1);
  EXPECT_NE(handoff_error([&] {
              torchtitan_toml(build_plan(ep8), "Std1F1B", "s.csv");
            }).find("expert parallelism ep 8 with etp 1"),
            std::string::npos);
  EXPECT_NE(torchtitan_toml(build_plan(sharded_request(ep8, true)), "Std1F1B", "s.csv")
                .find("expert_parallel_degree = 8\n"),
            std::string::npos);
  // cp 2, tp 2, dp 2: ep 2 with etp 1 is a plan (ep·etp = 2 divides tp·cp·dp = 8), but
  // torchtitan's etp 1 borrows all of cp·tp = 4 ranks, so ep must be a multiple of 4.
  PlanRequest cp2 = sharded_request(moe_handoff_request(2, 1), true);
  cp2.config.cp = 2;
  cp2.config.dp = 2;
  EXPECT_NE(handoff_error([&] {
              torchtitan_toml(build_plan(cp2), "Std1F1B", "s.csv");
            }).find("expert parallelism ep 2 with etp 1: torchtitan needs etp = tp with ep a "
                    "multiple of cp dividing dp*cp, or etp = 1 with ep a multiple of cp*tp "
                    "dividing dp*cp*tp"),
            std::string::npos);
}

}  // namespace
}  // namespace jaxpp

namespace jaxpp {
namespace {

// Activation offloading: Megatron-LM's --cpu-offloading-num-layers (validate_args turns
// cpu_offloading on when it is > 0), read back; torchtitan and the JaxPP snippet refuse it.
TEST(Handoff, ActivationOffloadingGoesToMegatronOnly) {
  PlanRequest req;
  req.model = load_model("gpt3-1.3b");
  req.cluster = load_cluster("h100-sxm");
  ParallelConfig& c = req.config;
  c.gpus = 8;
  c.pp = 1;
  c.dp = 8;
  c.global_batch = 32;
  c.microbatch_size = 2;
  c.schedule = "Std1F1B";
  c.offload_layers = 6;
  const Plan plan = build_plan(req);
  const std::string text = megatron_arguments(plan, "Std1F1B");
  EXPECT_NE(text.find("--cpu-offloading-num-layers 6 \\\n"), std::string::npos) << text;
  EXPECT_EQ(parse_megatron_arguments(text, "args").config.offload_layers, 6);
  EXPECT_EQ(parse_megatron_arguments("--cpu-offloading --cpu-offloading-num-layers 3", "a")
                .config.offload_layers,
            3);
  EXPECT_EQ(parse_megatron_arguments("--cpu-offloading", "a").config.offload_layers, 0);
  try {
    parse_megatron_arguments("--cpu-offloading-num-layers -2", "a.txt");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "a.txt: --cpu-offloading-num-layers: expected a positive integer, got '-2'");
  }
  for (const HandoffTarget target : {HandoffTarget::kTorchtitan, HandoffTarget::kJaxpp}) {
    try {
      if (target == HandoffTarget::kTorchtitan)
        torchtitan_toml(plan, "1F1B", "schedule.csv");
      else
        jaxpp_snippet(plan, "Std1F1B");
      FAIL() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("activation offloading (offload_layers 6)"),
                std::string::npos)
          << e.what();
    }
  }
}

// A model with the features the presets above lack: MLA, shared experts, dense first layers, a
// sigmoid router, per-expert GEMMs.
ModelSpec mla_moe_model() {
  return model_from_json(nlohmann::json::parse(R"({
      "name": "mla-moe", "layers": 4, "hidden": 1024, "heads": 16, "ffn_hidden": 2816,
      "seq_len": 2048, "vocab": 32000, "mlp": "swiglu", "tied_embeddings": false,
      "attention": "mla", "q_lora_rank": 384, "kv_lora_rank": 256, "qk_rope_head_dim": 32,
      "qk_nope_head_dim": 64, "v_head_dim": 64, "experts": 8, "top_k": 2,
      "expert_ffn_hidden": 512, "shared_experts": 2, "shared_ffn_hidden": 256,
      "first_dense_layers": 1, "router": "sigmoid", "expert_gemm": "per_expert",
      "cross_entropy": "logits_dtype"})"),
                         "mla-moe.json");
}

TEST(Handoff, MegatronModelArgumentsOfEachArchitectureReadBackToThePlansModel) {
  PlanRequest llama = handoff_request(kMegatron1F1B);
  llama.model = load_model("llama3-8b");  // GQA, SwiGLU, RMSNorm, RoPE, untied, no biases
  expect_megatron_round_trip(llama, "Std1F1B");
  PlanRequest qwen3 = handoff_request(kMegatron1F1B);
  qwen3.model = load_model("qwen3-8b");  // head_dim 128 with hidden 4096 / 32 heads, q/k norms
  expect_megatron_round_trip(qwen3, "Std1F1B");
  PlanRequest gpt = handoff_request(kMegatron1F1B);
  gpt.model = model_from_json(nlohmann::json::parse(R"({"name": "neox", "layers": 8,
      "hidden": 1024, "heads": 16, "seq_len": 2048, "vocab": 50432, "positions": "rope",
      "dropout": false})"),
                              "neox.json");  // GeLU with RoPE, no dropout
  expect_megatron_round_trip(gpt, "Std1F1B");
  expect_megatron_round_trip(moe_handoff_request(4, 1), "Std1F1B");  // mixtral-8x7b
  PlanRequest mla = moe_handoff_request(4, 1);
  mla.model = mla_moe_model();
  expect_megatron_round_trip(mla, "Std1F1B");
  const std::string args = megatron_arguments(build_plan(mla), "Std1F1B");
  EXPECT_NE(args.find("--moe-layer-freq \"([0]*1+[1]*3)\""), std::string::npos) << args;
  EXPECT_NE(args.find("--moe-shared-expert-intermediate-size 512"), std::string::npos) << args;
  EXPECT_NE(args.find("--qk-head-dim 64 \\\n--qk-pos-emb-head-dim 32"), std::string::npos) << args;
}

TEST(Handoff, MegatronRefusesModelFieldsItHasNoArgumentFor) {
  PlanRequest eager = handoff_request(kMegatron1F1B);
  nlohmann::json shape = model_shape_to_json(eager.model);
  shape["kernel_fusion"] = "eager";
  eager.model = model_from_json(shape, "eager.json");
  EXPECT_EQ(handoff_error([&] { megatron_arguments(build_plan(eager), "Std1F1B"); }),
            "--format megatron: kernel_fusion eager (eager PyTorch's kernels; Megatron-LM runs "
            "its fused kernels)");
  PlanRequest fp8_dispatch = moe_handoff_request(4, 1);
  nlohmann::json moe = model_shape_to_json(fp8_dispatch.model);
  moe["a2a_dispatch_dtype"] = "fp8";
  fp8_dispatch.model = model_from_json(moe, "moe.json");
  EXPECT_NE(handoff_error([&] {
              megatron_arguments(build_plan(fp8_dispatch), "Std1F1B");
            }).find("--format megatron: a2a_dispatch_dtype fp8"),
            std::string::npos);
}

// User text in a hand-off (sweep 5): a model name or --csv path with a newline could start a line
// of Python, shell or TOML. Comments get escapes; TOML strings TOML's own escapes.
TEST(Handoff, UserTextIsEscapedInCommentsAndTomlStrings) {
  const std::string name = "tiny\nimport os; os.system(\"echo INJECTED\")\r#";
  auto expect_no_injected_line = [](const std::string& text) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      EXPECT_EQ(line.find('\r'), std::string::npos) << text;
      EXPECT_NE(line.rfind("import os", 0), 0u) << text;
    }
    EXPECT_NE(text.find("tiny\\nimport os; os.system(\"echo INJECTED\")\\r#"), std::string::npos)
        << text;
  };
  Plan megatron = build_plan(handoff_request(kMegatron1F1B));
  megatron.model.name = name;
  expect_no_injected_line(megatron_arguments(megatron, "Std1F1B"));
  Plan jaxpp = build_plan(handoff_request(kInterleavedJaxpp));
  jaxpp.model.name = name;
  expect_no_injected_line(jaxpp_snippet(jaxpp, "Interleaved1F1B"));
  Plan torchtitan = build_plan(handoff_request(kZbH1));
  torchtitan.model.name = name;
  const std::string toml =
      torchtitan_toml(torchtitan, "ZeroBubble", std::string("a\nb\t\x01\"\\c.csv"));
  expect_no_injected_line(toml);
  EXPECT_NE(toml.find("pipeline_parallel_schedule_csv = \"a\\nb\\t\\u0001\\\"\\\\c.csv\"\n"),
            std::string::npos)
      << toml;
  EXPECT_NE(handoff_error([&] {
              torchtitan_toml(torchtitan, "ZeroBubble", "\xff.csv");
            }).find("is not UTF-8"),
            std::string::npos);
}

// A plan written by hand goes through the model reader too: its name is checked as a model
// file's is.
TEST(Handoff, APlansModelNameWithAControlCharacterIsRefused) {
  nlohmann::json doc = plan_to_json(build_plan(handoff_request(kMegatron1F1B)));
  doc["model"]["name"] = "tiny\nimport os";
  EXPECT_NE(handoff_error([&] {
              plan_from_json(doc, "p.json");
            }).find("p.json: field 'model': field 'name': contains a control character"),
            std::string::npos)
      << handoff_error([&] { plan_from_json(doc, "p.json"); });
}

}  // namespace
}  // namespace jaxpp
