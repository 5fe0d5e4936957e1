// Activation offloading (ParallelConfig::offload_layers; Megatron Core --cpu-offloading-num-layers
// N through Transformer Engine's offload handler): the first N transformer layers' stash leaves
// the device but for the two in flight, and its copy over the host link is exposed only where it
// is longer than the pass it runs beside. Megatron's rules are refused with their reasons.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/corpus.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/plan.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;

constexpr int kOffloadFirstBlock = 1;  // gpt3-1.3b: layer 0 the embedding, 1..24 transformer, 25 the logits
constexpr int kOffloadBlocks = 24;

struct OffloadFixture {
  ModelSpec model = load_model("gpt3-1.3b");
  ClusterSpec cluster = cluster_preset("h100-sxm");
  ParallelConfig config(int offload) const {
    ParallelConfig c;
    c.microbatch_size = 4;
    c.offload_layers = offload;
    return c;
  }
  OperatorCost op(int offload) const { return OperatorCost(model, config(offload), cluster); }
  std::string error(const ParallelConfig& c) const {
    try {
      OperatorCost(model, c, cluster);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
};

TEST(OffloadLayers, TheOffloadedLayersLeaveTheDeviceButForTwoInFlight) {
  OffloadFixture f;
  const OperatorCost none = f.op(0);
  const double layer = none.stash_bytes(kOffloadFirstBlock);
  ASSERT_GT(layer, 0);
  for (int l = kOffloadFirstBlock; l < kOffloadFirstBlock + kOffloadBlocks; ++l) ASSERT_EQ(none.stash_bytes(l), layer);
  const int all = f.model.num_layers();
  const double kept = none.stage_stash_bytes(0, all);
  EXPECT_EQ(none.offloaded_stash_bytes(0, all), 0);
  for (const int n : {1, 2, 10, 23}) {
    const OperatorCost off = f.op(n);
    // A layer's own stash does not change; the stage keeps N − 2 (at least 0) fewer.
    EXPECT_EQ(off.stash_bytes(kOffloadFirstBlock), layer);
    EXPECT_DOUBLE_EQ(off.offloaded_stash_bytes(0, all), n * layer) << n;
    EXPECT_DOUBLE_EQ(off.stage_stash_bytes(0, all), kept - std::max(0, n - 2) * layer) << n;
    // The first N transformer layers: a range after them offloads nothing.
    EXPECT_EQ(off.offloaded_stash_bytes(kOffloadFirstBlock + n, all - kOffloadFirstBlock - n), 0) << n;
  }
}

TEST(OffloadLayers, TheCopyIsExposedOnlyWhereItOutlastsThePass) {
  OffloadFixture f;
  const int all = f.model.num_layers();
  const StageBreakdown base = f.op(0).stage(0, all, 0);
  const double forward = base.at(Pass::kForward).total_s();
  const double backward =
      base.at(Pass::kBackwardInput).total_s() + base.at(Pass::kBackwardWeight).total_s();
  const double bytes = 10 * f.op(0).stash_bytes(kOffloadFirstBlock);
  // H100's PCIe Gen5 link (64 GB/s): 2 layers' activations cross beside the passes (10 would
  // not: 89 ms against a 49 ms forward).
  const StageBreakdown hidden = f.op(2).stage(0, all, 0);
  ASSERT_LT(bytes / 5 / f.cluster.host_link_bandwidth_bytes_per_s, forward);
  ASSERT_GT(bytes / f.cluster.host_link_bandwidth_bytes_per_s, forward);
  EXPECT_EQ(hidden.at(Pass::kForward).total_s(), forward);
  EXPECT_EQ(hidden.at(Pass::kBackwardInput).other_s, base.at(Pass::kBackwardInput).other_s);
  // A link slower than both passes: each exposes the copy less its compute, as other work.
  f.cluster.host_link_bandwidth_bytes_per_s = bytes / (3 * backward);
  const StageBreakdown slow = f.op(10).stage(0, all, 0);
  EXPECT_NEAR(slow.at(Pass::kForward).other_s - base.at(Pass::kForward).other_s,
              3 * backward - forward, 1e-12);
  EXPECT_NEAR(slow.at(Pass::kBackwardInput).other_s - base.at(Pass::kBackwardInput).other_s,
              2 * backward, 1e-12);
  EXPECT_EQ(slow.at(Pass::kForward).gemm_s, base.at(Pass::kForward).gemm_s);
  // Between them: only the forward (shorter than the backward) exposes it.
  f.cluster.host_link_bandwidth_bytes_per_s = bytes / ((forward + backward) / 2);
  const StageBreakdown middle = f.op(10).stage(0, all, 0);
  EXPECT_NEAR(middle.at(Pass::kForward).other_s - base.at(Pass::kForward).other_s,
              (backward - forward) / 2, 1e-12);
  EXPECT_EQ(middle.at(Pass::kBackwardInput).other_s, base.at(Pass::kBackwardInput).other_s);
}

TEST(OffloadLayers, MegatronsRulesAndAMissingHostLinkAreRefused) {
  OffloadFixture f;
  ParallelConfig c = f.config(24);
  EXPECT_EQ(f.error(c),
            "configuration: offload_layers: offloads 24 layers but model 'gpt3-1.3b' has 24 "
            "transformer layers (Megatron offloads fewer than all of them)");
  c = f.config(4);
  c.pp = 2;
  EXPECT_EQ(f.error(c),
            "configuration: offload_layers: activation offloading needs pp 1 (Megatron Core has "
            "no support for pipeline parallelism with CPU offloading), got pp 2");
  c = f.config(4);
  c.recompute = Recompute::kSelective;
  EXPECT_THAT(f.error(c), HasSubstr("needs recompute none (Megatron Core: CPU offloading does not "
                                    "work when activation recomputation is enabled), got "
                                    "recompute selective"));
  c = f.config(-1);
  EXPECT_THAT(f.error(c), HasSubstr("expected a number of layers >= 0, got -1"));
  c = f.config(4);
  f.cluster.host_link_bandwidth_bytes_per_s = 0;
  EXPECT_EQ(f.error(c),
            "configuration: offload_layers: activation offloading copies over the host link, "
            "but cluster 'h100-sxm' has no host_link_gb_per_s");
  EXPECT_EQ(f.error(f.config(0)), "no error");  // off needs no host link
}

TEST(OffloadLayers, PlanJsonCarriesItAndRefusesNegatives) {
  ParallelConfig c;
  c.offload_layers = 3;
  const nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j.at("offload_layers"), 3);
  EXPECT_EQ(config_from_json(j, "plan.json: field 'config'"), c);
  EXPECT_FALSE(config_to_json(ParallelConfig{}).contains("offload_layers"));
  nlohmann::json bad = j;
  bad["offload_layers"] = -2;
  EXPECT_THROW(config_from_json(bad, "plan.json: field 'config'"), InputError);
}

TEST(OffloadLayers, TheHostLinkRoundTripsAndIsCitedInEveryPreset) {
  for (const std::string& name : cluster_preset_names()) {
    const ClusterSpec c = cluster_preset(name);
    EXPECT_GT(c.host_link_bandwidth_bytes_per_s, 0) << name;
    EXPECT_EQ(cluster_from_json(cluster_to_json(c), "test"), c) << name;
  }
  EXPECT_EQ(cluster_preset("h100-sxm").host_link_bandwidth_bytes_per_s, 64e9);
  EXPECT_EQ(cluster_preset("a100-80g").host_link_bandwidth_bytes_per_s, 32e9);
  EXPECT_EQ(cluster_preset("gb200-nvl72").host_link_bandwidth_bytes_per_s, 225e9);
  const nlohmann::json j = {{"base", "h100-sxm"}, {"host_link_gb_per_s", 25}};
  EXPECT_EQ(cluster_from_json(j, "my.json").host_link_bandwidth_bytes_per_s, 25e9);
  try {
    cluster_from_json({{"base", "h100-sxm"}, {"host_link_gb_per_s", -1}}, "my.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("host_link_gb_per_s"));
  }
}

TEST(OffloadLayers, ACorpusRowNamesItsFieldWhenTheRuleBreaks) {
  const auto row = [](int pp, int offload) {
    return nlohmann::json{
        {"format", "jaxpp-sim-corpus"},
        {"version", kCorpusVersion},
        {"split_rule", "r"},
        {"sources", {{"src", {{"citation", "c"}, {"url", "u"}}}}},
        {"rows",
         {{{"id", "r1"},          {"source", "src"},       {"where", "w"},
           {"split", "test"},     {"cluster", "h100-sxm"}, {"model", "gpt3-1.3b"},
           {"gpus", 8 * pp},      {"tp", 1},               {"pp", pp},
           {"dp", 8},             {"cp", 1},               {"microbatch_size", 1},
           {"global_batch", 64},  {"seq_len", 2048},       {"schedule", "1f1b"},
           {"recompute", "none"}, {"offload_layers", offload},
           {"measured", {{"step_time_s", 1.0}}},
           {"flops_convention", "none"}, {"assumptions", "a"}}}}};
  };
  const Corpus ok = corpus_from_json(row(1, 4), "c.json", "");
  ASSERT_EQ(ok.rows.size(), 1u);
  EXPECT_EQ(ok.rows[0].config.offload_layers, 4);
  try {
    corpus_from_json(row(2, 4), "c.json", "");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("c.json: row 'r1': field 'offload_layers'"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("needs pp 1"));
  }
}

}  // namespace
}  // namespace jaxpp
