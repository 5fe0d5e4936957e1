// Megatron-Core's fine-grained selective recompute (ParallelConfig::recompute_modules,
// --recompute-granularity selective --recompute-modules ...): what each module frees from a
// layer's stash and what it runs again in the backward, computed by hand on the deepseek-v3 preset
// (h 7168, 128 heads, MLA q rank 1536, kv rank 512, rope 64, nope 128, v 128; 256 experts, top 8
// of 2048, 1 shared; s 4096; BF16) and qwen3-30b-a3b; core_attn alone is today's selective bit
// for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "costmodel/analytic_cost.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/partition.h"
#include "graph/plan.h"
#include "graph/task_graph.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;

constexpr int kDenseLayer = 1;  // deepseek-v3: layer 0 the embedding, 1..3 dense, 4..61 MoE
constexpr int kMoeLayer = 4;
constexpr double kTokens = 4096;  // microbatch 1, seq 4096, cp 1

uint32_t modules(std::string_view text) { return parse_recompute_modules(text, "test"); }

struct ModulesFixture {
  ModelSpec model = load_model("deepseek-v3");
  ClusterSpec cluster = cluster_preset("h100-sxm");
  ParallelConfig config;
  OperatorCost with(Recompute r, uint32_t mods = 0, int tp = 1) const {
    ParallelConfig c = config;
    c.recompute = r;
    c.recompute_modules = mods;
    c.tp = tp;
    return OperatorCost(model, c, cluster);
  }
  // One element-wise kernel moving `bytes` (costmodel/operator_cost.cc elementwise_s).
  double elementwise(double bytes) const {
    return bytes / (cluster.hbm_bandwidth_bytes_per_s * cluster.hbm_efficiency) +
           cluster.kernel_overhead_s;
  }
};

TEST(RecomputeModules, CoreAttnAloneIsSelectiveBitForBit) {
  EXPECT_EQ(modules("core_attn"), 0u);  // stored as the default
  ModulesFixture s;
  ParallelConfig c;
  c.recompute = Recompute::kSelective;
  c.recompute_modules = modules("core_attn");
  EXPECT_EQ(effective_recompute_modules(c), recompute_module_bit(RecomputeModule::kCoreAttn));
  const OperatorCost selective = s.with(Recompute::kSelective);
  for (int l : {kDenseLayer, kMoeLayer}) {
    const PassBreakdown r = selective.stage(l, 1, 0).at(Pass::kRecompute);
    EXPECT_GT(r.attention_s, 0);
    EXPECT_EQ(r.total_s(), r.attention_s);  // the attention core's forward, nothing else
    EXPECT_EQ(selective.stash_bytes(l), s.with(Recompute::kNone).stash_bytes(l));  // flash
  }
}

TEST(RecomputeModules, LayernormFreesTheSeparateNormOutputsAndRunsThemAgain) {
  ModulesFixture s;
  const OperatorCost sel = s.with(Recompute::kSelective);
  const OperatorCost ln = s.with(Recompute::kSelective, modules("core_attn,layernorm"));
  // Dense MLA layer: the input norm only (its MLP's norm is fused into mlp_up): 7168 x 2 bytes
  // per token; MoE layer: the input norm and the pre-MLP norm, 2 x 7168 x 2.
  EXPECT_DOUBLE_EQ(sel.stash_bytes(kDenseLayer) - ln.stash_bytes(kDenseLayer),
                   kTokens * 7168 * 2);  // 58,720,256
  EXPECT_DOUBLE_EQ(sel.stash_bytes(kMoeLayer) - ln.stash_bytes(kMoeLayer),
                   kTokens * 2 * 7168 * 2);  // 117,440,512
  // Recompute: the attention core as before plus one norm kernel (read 7168, write 7168 BF16
  // values per token) per separate norm.
  const PassBreakdown a = sel.stage(kMoeLayer, 1, 0).at(Pass::kRecompute);
  const PassBreakdown b = ln.stage(kMoeLayer, 1, 0).at(Pass::kRecompute);
  EXPECT_EQ(b.attention_s, a.attention_s);
  EXPECT_DOUBLE_EQ(b.elementwise_s, 2 * s.elementwise(kTokens * 2 * 7168 * 2));
  EXPECT_DOUBLE_EQ(ln.stage(kDenseLayer, 1, 0).at(Pass::kRecompute).elementwise_s,
                   s.elementwise(kTokens * 2 * 7168 * 2));
  // Sequence parallelism splits the norms over tp.
  s.config.sequence_parallel = true;
  const OperatorCost sp = s.with(Recompute::kSelective, modules("layernorm"), 2);
  const OperatorCost sp_sel = s.with(Recompute::kSelective, 0, 2);
  EXPECT_DOUBLE_EQ(sp_sel.stash_bytes(kMoeLayer) - sp.stash_bytes(kMoeLayer),
                   kTokens * 2 * 7168 * 2 / 2);
  EXPECT_EQ(sp.stage(kMoeLayer, 1, 0).at(Pass::kRecompute).attention_s, 0);  // no core_attn
}

TEST(RecomputeModules, MlaUpProjFreesQKVAndRunsTheUpProjectionsAgain) {
  ModulesFixture s;
  const OperatorCost none = s.with(Recompute::kNone);
  const OperatorCost up = s.with(Recompute::kSelective, modules("mla_up_proj"));
  // q and k: 128 heads x (128 + 64); v: 128 x 128; BF16: (2 x 24576 + 16384) x 2 = 131072 bytes
  // per token, in every MLA layer, dense or MoE.
  for (int l : {kDenseLayer, kMoeLayer})
    EXPECT_DOUBLE_EQ(none.stash_bytes(l) - up.stash_bytes(l), kTokens * 131072);  // 512 MiB
  const OperatorCost up2 = s.with(Recompute::kSelective, modules("mla_up_proj"), 2);
  EXPECT_DOUBLE_EQ(s.with(Recompute::kNone, 0, 2).stash_bytes(kMoeLayer) - up2.stash_bytes(kMoeLayer),
                   kTokens * 131072 / 2);  // split by tp
  // Recompute: q_up (n 128 x 192 = 24576, k 1536) and kv_up (n 128 x 256 = 32768, k 512), the
  // RoPE of 129 heads x 64 (read and write) and the latent norms (1536 + 512, read and write).
  const PassBreakdown r = up.stage(kMoeLayer, 1, 0).at(Pass::kRecompute);
  EXPECT_EQ(r.attention_s, 0);
  EXPECT_DOUBLE_EQ(r.gemm_s, up.gemm_s(kTokens, 24576, 1536) + up.gemm_s(kTokens, 32768, 512));
  EXPECT_DOUBLE_EQ(r.elementwise_s, s.elementwise(kTokens * 2 * 129 * 64 * 2) +
                                        s.elementwise(kTokens * 2 * 2048 * 2));
  EXPECT_EQ(r.tp_comm_s + r.ep_comm_s + r.cp_comm_s, 0);
  // Hardware FLOPs: 2 s (1536 x 24576 + 512 x 32768) per layer, no attention core.
  EXPECT_DOUBLE_EQ(selective_recompute_flops(s.model, kMoeLayer, modules("mla_up_proj")),
                   2.0 * 4096 * (1536.0 * 24576 + 512.0 * 32768));
  EXPECT_DOUBLE_EQ(selective_recompute_flops(s.model, kMoeLayer, 0),
                   s.model.layers[kMoeLayer].recompute_flops[1]);
}

TEST(RecomputeModules, MoeActFreesTheRoutedActivationOutputOnMoeLayersOnly) {
  ModulesFixture s;
  const OperatorCost none = s.with(Recompute::kNone);
  const OperatorCost act = s.with(Recompute::kSelective, modules("moe_act"));
  // top 8 x 2048 BF16 values per token: 32768 bytes.
  EXPECT_DOUBLE_EQ(none.stash_bytes(kMoeLayer) - act.stash_bytes(kMoeLayer), kTokens * 32768);
  EXPECT_DOUBLE_EQ(none.stash_bytes(kDenseLayer), act.stash_bytes(kDenseLayer));
  // Recompute: the routed share of the SwiGLU kernel, read gate and up, write the product.
  const PassBreakdown r = act.stage(kMoeLayer, 1, 0).at(Pass::kRecompute);
  EXPECT_DOUBLE_EQ(r.total_s(), s.elementwise(kTokens * 3 * 8 * 2048 * 2));
  EXPECT_EQ(act.stage(kDenseLayer, 1, 0).at(Pass::kRecompute).total_s(), 0);
}

TEST(RecomputeModules, ModulesAddUpAndTheStepPricesThem) {
  ModulesFixture s;
  const OperatorCost none = s.with(Recompute::kNone);
  const OperatorCost all = s.with(Recompute::kSelective, modules("layernorm,mla_up_proj,moe_act"));
  EXPECT_DOUBLE_EQ(none.stash_bytes(kMoeLayer) - all.stash_bytes(kMoeLayer),
                   kTokens * (2 * 7168 * 2 + 131072 + 32768));
  // The stage's input-gradient task carries the recompute pass.
  const StageBreakdown b = all.stage(kMoeLayer, 2, 0);
  EXPECT_DOUBLE_EQ(b.at(Pass::kRecompute).total_s(),
                   2 * all.stage(kMoeLayer, 1, 0).at(Pass::kRecompute).total_s());
  EXPECT_GT(b.at(Pass::kRecompute).total_s(), 0);
}

TEST(RecomputeModules, UnfusedAttentionKeepsItsScoresWithoutCoreAttn) {
  ModulesFixture s;
  s.model = load_model("qwen3-30b-a3b");  // layer 1: MoE (no dense layers)
  s.config.attention = AttentionKernel::kUnfused;
  const OperatorCost none = s.with(Recompute::kNone);
  const OperatorCost act = s.with(Recompute::kSelective, modules("moe_act"));
  const OperatorCost both = s.with(Recompute::kSelective, modules("core_attn,moe_act"));
  // qwen3-30b-a3b: top 8 of 768, BF16: 8 x 768 x 2 = 12288 bytes per token of activation output;
  // the scores (32 heads x 4096 keys x 2 bytes per token) stay without core_attn.
  EXPECT_DOUBLE_EQ(none.stash_bytes(1) - act.stash_bytes(1), 4096.0 * 12288);
  EXPECT_DOUBLE_EQ(act.stash_bytes(1) - both.stash_bytes(1), 4096.0 * 32 * 4096 * 2);
}

TEST(RecomputeModules, RefusesModulesNoLayerHasAndOtherPolicies) {
  const auto error = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ModulesFixture s;
  s.model = load_model("llama3-8b");
  EXPECT_THAT(error([&] { s.with(Recompute::kSelective, modules("mla_up_proj")); }),
              HasSubstr("configuration: recompute_modules: recompute module mla_up_proj needs "
                        "multi-head latent attention, which no layer of model 'llama3-8b' has"));
  EXPECT_THAT(error([&] { s.with(Recompute::kSelective, modules("moe_act")); }),
              HasSubstr("moe_act needs routed experts"));
  EXPECT_THAT(error([&] { s.with(Recompute::kSelective, modules("layernorm")); }),
              HasSubstr("separate norm modules"));
  // qwen3-30b-a3b has MoE layers (moe_act, layernorm) but no MLA.
  s.model = load_model("qwen3-30b-a3b");
  EXPECT_EQ(error([&] { s.with(Recompute::kSelective, modules("layernorm,moe_act")); }),
            "no error");
  EXPECT_THAT(error([&] { s.with(Recompute::kSelective, modules("mla_up_proj")); }),
              HasSubstr("no layer of model 'qwen3-30b-a3b'"));
  EXPECT_THAT(error([&] { s.with(Recompute::kFull, modules("moe_act")); }),
              HasSubstr("needs recompute selective (recompute is full)"));
  // FP8 delayed scaling: Megatron refuses layernorm and moe_act.
  s.model.dtype = Dtype::kFp8;
  s.model.fp8_scaling = Fp8Scaling::kDelayed;
  EXPECT_THAT(error([&] { s.with(Recompute::kSelective, modules("moe_act")); }),
              HasSubstr("FP8 delayed scaling"));
  // Names.
  EXPECT_THAT(error([] { modules("core_attn,attn"); }),
              HasSubstr("test: unknown recompute module \"attn\" (expected core_attn, layernorm, "
                        "mla_up_proj or moe_act)"));
  EXPECT_THAT(error([] { modules("mlp"); }), HasSubstr("\"mlp\" (a normal checkpoint of a whole "
                                                       "MLP) is not modelled"));
  EXPECT_THAT(error([] { modules(""); }), HasSubstr("expected at least one recompute module"));
  EXPECT_THAT(error([] { modules("moe_act moe_act"); }), HasSubstr("twice"));
  EXPECT_EQ(modules("layernorm mla_up_proj"), modules("mla_up_proj,layernorm"));
  EXPECT_EQ(recompute_modules_to_string(modules("moe_act,core_attn,layernorm")),
            "core_attn,layernorm,moe_act");
}

TEST(RecomputeModules, PlanJsonWritesAndReadsTheList) {
  ParallelConfig c;
  c.recompute = Recompute::kSelective;
  c.recompute_modules = modules("layernorm,mla_up_proj");
  const nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j.at("recompute_modules"), nlohmann::json({"layernorm", "mla_up_proj"}));
  EXPECT_EQ(config_from_json(j, "plan.json: field 'config'"), c);
  EXPECT_FALSE(config_to_json(ParallelConfig{}).contains("recompute_modules"));
  nlohmann::json bad = j;
  bad["recompute_modules"] = {"layernorm", "mla_upproj"};
  try {
    config_from_json(bad, "plan.json: field 'config'");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "plan.json: field 'config': field 'recompute_modules': unknown recompute module "
                 "\"mla_upproj\" (expected core_attn, layernorm, mla_up_proj or moe_act)");
  }
  bad = j;
  bad["recompute"] = "none";
  EXPECT_THROW(config_from_json(bad, "plan.json"), InputError);
}

TEST(RecomputeModules, HardwareFlopsCountTheModulesRecomputedForward) {
  ModulesFixture s;
  const Partition one = partition_from_starts({0}, s.model.num_layers());
  const double none = hardware_flops_per_sequence(s.model, one, Recompute::kNone, -1);
  const double up = hardware_flops_per_sequence(s.model, one, Recompute::kSelective, -1,
                                                modules("mla_up_proj"));
  // 61 MLA transformer layers and the MTP module's block, a copy of the last one
  // (ModelSpec::mtp_block): 62 x 2 x 4096 x (1536 x 24576 + 512 x 32768) = 62 x 446,676,598,784.
  EXPECT_DOUBLE_EQ(up - none, 62 * 2.0 * 4096 * (1536.0 * 24576 + 512.0 * 32768));
  EXPECT_DOUBLE_EQ(up - none, 27693949124608.0);
  EXPECT_DOUBLE_EQ(hardware_flops_per_sequence(s.model, one, Recompute::kSelective, -1, 0),
                   s.model.hardware_flops_per_sequence(Recompute::kSelective));
}

// The MTP module (layer 62 of deepseek-v3: embedding, 61 transformer layers, mtp0, logits) is
// priced as the block it copies (OperatorCost::mtp_pass): its recompute runs that block's q_up and
// kv_up again, and the hardware FLOPs count them as that block's (they counted nothing for it).
TEST(RecomputeModules, MtpModuleCountsItsBlocksModuleFlops) {
  ModulesFixture s;
  constexpr int kMtp = 62;
  ASSERT_EQ(s.model.layers[kMtp].name, "mtp0");
  ASSERT_EQ(s.model.mtp_block(kMtp), 61);
  const uint32_t up = modules("mla_up_proj");
  const double per_layer = 2.0 * 4096 * (1536.0 * 24576 + 512.0 * 32768);
  EXPECT_DOUBLE_EQ(selective_recompute_flops(s.model, kMtp, up), per_layer);
  EXPECT_DOUBLE_EQ(selective_recompute_flops(s.model, kMtp, up),
                   selective_recompute_flops(s.model, 61, up));
  // With core_attn too: the block's attention core (the MTP layer's own selective figure).
  EXPECT_DOUBLE_EQ(selective_recompute_flops(s.model, kMtp, modules("core_attn,mla_up_proj")),
                   per_layer + s.model.layers[kMtp].recompute_flops[1]);
  // Its time and stash take the module too (the same q_up and kv_up GEMMs as the block's).
  const OperatorCost op = s.with(Recompute::kSelective, up);
  const PassBreakdown r = op.stage(kMtp, 1, 0).at(Pass::kRecompute);
  EXPECT_DOUBLE_EQ(r.gemm_s, op.gemm_s(kTokens, 24576, 1536) + op.gemm_s(kTokens, 32768, 512));
  EXPECT_DOUBLE_EQ(s.with(Recompute::kSelective).stash_bytes(kMtp) - op.stash_bytes(kMtp),
                   kTokens * 131072);
  // Other layers: the embedding and the logits have no modules.
  EXPECT_EQ(selective_recompute_flops(s.model, 0, up), 0.0);
  EXPECT_EQ(selective_recompute_flops(s.model, 63, up), 0.0);
}

}  // namespace
}  // namespace jaxpp
