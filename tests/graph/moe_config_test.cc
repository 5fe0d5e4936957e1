// The expert-parallel fields of ParallelConfig (graph/plan.h): plan.json round trip and the
// checks against the model (issue 13, item 4).
#include <gtest/gtest.h>

#include <string>

#include "graph/error.h"
#include "graph/plan.h"

namespace jaxpp {
namespace {

ParallelConfig moe_config() {
  ParallelConfig c;
  c.gpus = 64;
  c.pp = 4;
  c.tp = 2;
  c.dp = 8;
  c.ep = 4;
  c.etp = 1;
  c.moe_imbalance = 1.25;
  c.moe_overlap = MoeOverlap::k1F1B;
  return c;
}

std::string moe_error(const ModelSpec& m, const ParallelConfig& c, bool flags) {
  try {
    check_moe_config(m, c, "plan.json", flags);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(MoeConfig, ExpertFieldsRoundTripThroughJson) {
  const ParallelConfig c = moe_config();
  const nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j["ep"], 4);
  EXPECT_EQ(j["etp"], 1);
  EXPECT_EQ(j["moe_overlap"], "1f1b");
  EXPECT_EQ(config_from_json(j, "config"), c);
}

TEST(MoeConfig, DefaultsAreNotWrittenAndAnEtpEqualToTpReadsAsTheDefault) {
  ParallelConfig c = moe_config();
  c.etp = 0;
  nlohmann::json j = config_to_json(c);
  EXPECT_FALSE(j.contains("etp"));
  EXPECT_FALSE(config_to_json(ParallelConfig{}).contains("ep"));
  EXPECT_FALSE(config_to_json(ParallelConfig{}).contains("moe_overlap"));
  j["etp"] = 2;  // = tp
  EXPECT_EQ(config_from_json(j, "config").etp, 0);
  EXPECT_EQ(c.expert_tp(), 2);
  EXPECT_EQ(c.expert_dp(), 2 * 8 / (4 * 2));
}

TEST(MoeConfig, OlderPlansWithoutExpertFieldsReadAsNoExpertParallelism) {
  nlohmann::json j = config_to_json(moe_config());
  for (const char* k : {"ep", "etp", "moe_imbalance", "moe_overlap"}) j.erase(k);
  const ParallelConfig c = config_from_json(j, "config");
  EXPECT_EQ(c.ep, 1);
  EXPECT_EQ(c.etp, 0);
  EXPECT_EQ(c.moe_imbalance, 1.0);
  EXPECT_EQ(c.moe_overlap, MoeOverlap::kAuto);
}

TEST(MoeConfig, BadOverlapAndImbalanceFieldsAreNamed) {
  nlohmann::json j = config_to_json(moe_config());
  j["moe_overlap"] = "sometimes";
  EXPECT_THROW(config_from_json(j, "config"), InputError);
  j["moe_overlap"] = "none";
  j["moe_imbalance"] = "high";
  EXPECT_THROW(config_from_json(j, "config"), InputError);
}

TEST(MoeConfig, DispatcherAndRoutingRoundTripAndDefaultsAreNotWritten) {
  ParallelConfig c = moe_config();
  EXPECT_FALSE(config_to_json(c).contains("moe_dispatcher"));
  EXPECT_FALSE(config_to_json(c).contains("moe_routing"));
  c.moe_dispatcher = MoeDispatcher::kDeepEP;
  c.moe_routing = MoeRouting::kContiguous;
  const nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j["moe_dispatcher"], "deepep");
  EXPECT_EQ(j["moe_routing"], "contiguous");
  EXPECT_EQ(config_from_json(j, "config"), c);
  nlohmann::json bad = j;
  bad["moe_dispatcher"] = "flex";
  try {
    config_from_json(bad, "plan.json: field 'config'");
    ADD_FAILURE() << "an unknown dispatcher was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("moe_dispatcher"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected alltoall or deepep"), std::string::npos);
  }
  bad = j;
  bad["moe_routing"] = "skewed";
  EXPECT_THROW(config_from_json(bad, "config"), InputError);
}

TEST(MoeConfig, DispatcherOrRoutingOnADenseModelIsRefused) {
  const ModelSpec dense = load_model("gpt3-1.3b");
  ParallelConfig c;
  c.moe_dispatcher = MoeDispatcher::kDeepEP;
  EXPECT_NE(moe_error(dense, c, true).find("--moe-dispatcher"), std::string::npos);
  EXPECT_NE(moe_error(dense, c, false).find("plan.json: field 'config.moe_dispatcher'"),
            std::string::npos);
  c.moe_dispatcher = MoeDispatcher::kAllToAll;
  c.moe_routing = MoeRouting::kContiguous;
  EXPECT_NE(moe_error(dense, c, true).find("--moe-routing"), std::string::npos);
  c.moe_routing = MoeRouting::kRandom;
  EXPECT_EQ(moe_error(dense, c, true), "");
}

// DeepSeek's group-limited routing: written only when set, read back; refused on a dense model,
// below 0, with contiguous routing, both at once, or when M devices cannot hold top_k experts.
TEST(MoeConfig, RoutingLimitsRoundTripAndAreChecked) {
  const ModelSpec mixtral = load_model("mixtral-8x7b");  // 8 experts, top 2
  ParallelConfig c = moe_config();                       // ep 4: 2 experts per rank
  EXPECT_FALSE(config_to_json(c).contains("moe_node_limit"));
  EXPECT_FALSE(config_to_json(c).contains("moe_device_limit"));
  c.moe_node_limit = 2;
  nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j["moe_node_limit"], 2);
  EXPECT_EQ(config_from_json(j, "plan.json").moe_node_limit, 2);
  EXPECT_EQ(moe_error(mixtral, c, true), "");
  c.moe_device_limit = 1;
  EXPECT_NE(moe_error(mixtral, c, true).find("not both"), std::string::npos);
  c.moe_node_limit = 0;
  EXPECT_EQ(moe_error(mixtral, c, true), "") << "1 rank holds 2 experts = top 2";
  j = config_to_json(c);
  EXPECT_EQ(config_from_json(j, "plan.json").moe_device_limit, 1);
  ModelSpec top3 = mixtral;
  top3.moe.top_k = 3;
  EXPECT_NE(moe_error(top3, c, false)
                .find("field 'config.moe_device_limit': 1 devices of 2 experts each cannot hold"),
            std::string::npos)
      << moe_error(top3, c, false);
  c.moe_device_limit = -1;
  EXPECT_NE(moe_error(mixtral, c, true).find("--moe-device-limit: must be >= 1"),
            std::string::npos);
  c.moe_device_limit = 0;
  c.moe_node_limit = 2;
  c.moe_routing = MoeRouting::kContiguous;
  EXPECT_NE(moe_error(mixtral, c, true).find("--moe-node-limit: limits random routing only"),
            std::string::npos);
  ParallelConfig dense_c;
  dense_c.moe_node_limit = 4;
  EXPECT_NE(moe_error(load_model("gpt3-1.3b"), dense_c, true).find("--moe-node-limit"),
            std::string::npos);
}

TEST(MoeConfig, ChecksNameTheFieldOrTheFlag) {
  const ModelSpec mixtral = load_model("mixtral-8x7b");
  ParallelConfig c = moe_config();
  EXPECT_EQ(moe_error(mixtral, c, false), "");
  c.ep = 3;
  EXPECT_NE(moe_error(mixtral, c, false).find("plan.json: field 'config.ep'"), std::string::npos);
  EXPECT_NE(moe_error(mixtral, c, true).find("--ep"), std::string::npos);
  c.ep = 8;
  c.etp = 4;  // 8·4 = 32 does not divide tp·cp·dp = 16
  EXPECT_NE(moe_error(mixtral, c, true).find("--etp: ep·etp = 8·4"), std::string::npos);
  c = moe_config();
  c.moe_imbalance = 0.9;
  EXPECT_NE(moe_error(mixtral, c, true).find("--moe-imbalance"), std::string::npos);
  c.moe_imbalance = 5;  // above ep = 4
  EXPECT_NE(moe_error(mixtral, c, true).find("larger than ep"), std::string::npos);
  const ModelSpec dense = load_model("gpt3-1.3b");
  c = moe_config();
  EXPECT_NE(moe_error(dense, c, true).find("no routed experts"), std::string::npos);
  c.ep = 1;
  c.etp = 0;
  c.moe_imbalance = 1;
  // An overlap mode of an all-to-all the model does not have (it was written into the plan).
  EXPECT_NE(moe_error(dense, c, true).find("--moe-overlap: overlaps the all-to-all of gpt3-1.3b"),
            std::string::npos);
  c.moe_overlap = MoeOverlap::kAuto;
  EXPECT_EQ(moe_error(dense, c, true), "");
}

}  // namespace
}  // namespace jaxpp
