// Megatron-Core's recompute modules in the hand-offs: --recompute-granularity selective
// --recompute-modules m1 m2 ... for Megatron-LM (read back to the same plan); torchtitan and the
// JaxPP snippet refuse them with the reason.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/model.h"
#include "handoff/handoff.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

PlanRequest moe_request(uint32_t modules) {
  PlanRequest req;
  req.model = load_model("qwen3-30b-a3b");
  req.cluster = load_cluster("h100-sxm");
  ParallelConfig& c = req.config;
  c.gpus = 8;
  c.pp = 2;
  c.tp = 1;
  c.dp = 4;
  c.ep = 4;
  c.global_batch = 16;
  c.microbatch_size = 1;
  c.schedule = "Std1F1B";
  c.recompute = Recompute::kSelective;
  c.recompute_modules = modules;
  req.partition = PartitionMode::kEven;
  return req;
}

// The model's low-precision activations (ModelSpec::low_precision_activations) have no setting in
// any export: each refuses them, naming the ones the model sets in the model JSON's order.
TEST(RecomputeModulesHandoff, LowPrecisionActivationsAreRefusedNamingEachOneSet) {
  PlanRequest req = moe_request(0);
  req.model.dtype = Dtype::kFp8;
  req.model.moe.expert_gemm = ExpertGemm::kPerExpert;  // FP8 experts: TEGroupedMLP
  req.model.low_precision_moe_swiglu_input = true;
  const Plan swiglu = build_plan(req);
  const std::string one = "low-precision activation caching (\"low_precision_activations\": "
                          "moe_swiglu_input): this export has no setting for it";
  EXPECT_NE(error_of([&] { megatron_arguments(swiglu, "Std1F1B"); }).find(one), std::string::npos);
  req.model.low_precision_attention_out = true;
  const Plan both = build_plan(req);
  const std::string two = "(\"low_precision_activations\": attention_out, moe_swiglu_input)";
  EXPECT_NE(error_of([&] { megatron_arguments(both, "Std1F1B"); }).find(two), std::string::npos);
  EXPECT_NE(error_of([&] { jaxpp_snippet(both, "Std1F1B"); }).find(two), std::string::npos);
  req.model.low_precision_attention_out = req.model.low_precision_moe_swiglu_input = false;
  EXPECT_EQ(error_of([&] { megatron_arguments(build_plan(req), "Std1F1B"); }), "no error");
}

TEST(RecomputeModulesHandoff, MegatronGetsTheModulesAndReadsThemBack) {
  const uint32_t modules = parse_recompute_modules("moe_act,layernorm", "test");
  const Plan plan = build_plan(moe_request(modules));
  const std::string text = megatron_arguments(plan, "Std1F1B");
  EXPECT_NE(text.find("--recompute-granularity selective \\\n--recompute-modules layernorm "
                      "moe_act \\\n"),
            std::string::npos)
      << text;
  const MegatronSettings back = parse_megatron_arguments(text, "args");
  EXPECT_EQ(back.config.recompute, Recompute::kSelective);
  EXPECT_EQ(back.config.recompute_modules, modules);
  // Without modules: no flag (Megatron's default is core_attn), read back as 0.
  const std::string plain = megatron_arguments(build_plan(moe_request(0)), "Std1F1B");
  EXPECT_EQ(plain.find("--recompute-modules"), std::string::npos);
  EXPECT_EQ(parse_megatron_arguments("--recompute-granularity selective --recompute-modules "
                                     "core_attn",
                                     "args")
                .config.recompute_modules,
            0u);
  EXPECT_EQ(error_of([] {
              parse_megatron_arguments("--recompute-granularity full --recompute-modules moe_act",
                                       "args");
            }),
            "args: --recompute-modules needs --recompute-granularity selective");
  EXPECT_EQ(error_of([] {
              parse_megatron_arguments("--recompute-modules moe_act shared_experts", "args");
            }),
            "args: --recompute-modules: recompute module \"shared_experts\" (a normal checkpoint "
            "of a whole MLP) is not modelled; expected core_attn, layernorm, mla_up_proj or "
            "moe_act");
}

TEST(RecomputeModulesHandoff, TorchtitanAndJaxppRefuseThem) {
  const Plan plan = build_plan(moe_request(parse_recompute_modules("moe_act", "test")));
  EXPECT_NE(error_of([&] { torchtitan_toml(plan, "Std1F1B", "s.csv"); })
                .find("--format torchtitan: recompute modules moe_act"),
            std::string::npos);
  EXPECT_NE(error_of([&] { jaxpp_snippet(plan, "Std1F1B"); })
                .find("--format jaxpp: recompute modules moe_act"),
            std::string::npos);
}

}  // namespace
}  // namespace jaxpp
