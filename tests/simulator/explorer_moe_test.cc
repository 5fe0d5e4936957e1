// explore on mixture-of-experts models (issue 13, item 8): ep (and etp) are searched, ep values
// that do not fit the experts or a stage's devices are pruned with their reason, and the bound
// pruning (ExploreRequest::bound_prune) keeps the first bound_top configurations of the ranking
// and the Pareto front of the full search while simulating fewer configurations.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "simulator/explorer.h"

namespace jaxpp {
namespace {

ExploreRequest mixtral_request() {
  ExploreRequest req;
  req.model = load_model("mixtral-8x7b");
  req.cluster = cluster_preset("h100-sxm");
  req.gpus = 64;
  req.global_batch = 256;
  req.threads = 2;
  req.space.schedules = {"1f1b", "dualpipev", "zb-h1"};
  req.space.microbatch_sizes = {1, 2};
  req.space.recompute = {Recompute::kSelective, Recompute::kFull};
  return req;
}

TEST(ExplorerMoe, ExpertParallelismIsSearchedForMoeModels) {
  const ExploreResult res = explore(mixtral_request());
  std::set<int> eps;
  for (const ConfigRecord& r : res.records) eps.insert(r.config.ep);
  EXPECT_EQ(eps, (std::set<int>{1, 2, 4, 8}));  // the powers of two dividing 8 experts
  // ep·etp that does not divide tp·cp·dp is pruned with its reason.
  bool pruned = false;
  for (const ConfigRecord& r : res.records)
    if (r.status == ConfigStatus::kDivisibility &&
        r.reason.find("does not divide the tp·cp·dp") != std::string::npos)
      pruned = true;
  EXPECT_TRUE(pruned);
  ASSERT_FALSE(res.ranking.empty());
  // Some feasible configuration uses expert parallelism.
  bool with_ep = false;
  for (int64_t id : res.ranking) with_ep = with_ep || res.records[id].config.ep > 1;
  EXPECT_TRUE(with_ep);
}

TEST(ExplorerMoe, DenseModelsSearchNoExpertParallelism) {
  ExploreRequest req = mixtral_request();
  req.model = load_model("gpt3-1.3b");
  const ExploreResult res = explore(req);
  for (const ConfigRecord& r : res.records) EXPECT_EQ(r.config.ep, 1);
  req.space.ep = {2};
  EXPECT_THROW(explore(req), InputError);
}

// The full search is the reference: the bound must give its first bound_top ranking entries,
// with the same metrics, and its Pareto front, for several bound_top values and thread counts.
void expect_same_leaders(const ExploreResult& full, const ExploreResult& bound, int top) {
  ASSERT_GE(full.ranking.size(), static_cast<size_t>(top));
  ASSERT_GE(bound.ranking.size(), static_cast<size_t>(top));
  for (int i = 0; i < top; ++i) {
    const ConfigRecord& a = full.records[full.ranking[i]];
    const ConfigRecord& b = bound.records[bound.ranking[i]];
    EXPECT_EQ(config_record_to_json(a), config_record_to_json(b)) << "rank " << i + 1;
  }
  EXPECT_EQ(bound.pareto, full.pareto);
  for (int64_t id : full.pareto)
    EXPECT_EQ(config_record_to_json(full.records[id]), config_record_to_json(bound.records[id]));
}

TEST(ExplorerMoe, BoundPruningKeepsTheTopOfTheRankingAndTheParetoFront) {
  ExploreRequest req = mixtral_request();
  const ExploreResult full = explore(req);
  req.bound_prune = true;
  for (int top : {1, 3, 10}) {
    SCOPED_TRACE("bound_top " + std::to_string(top));
    req.bound_top = top;
    req.threads = 2;
    const ExploreResult bound = explore(req);
    expect_same_leaders(full, bound, top);
    // The JSON report's best and top lists are the full search's.
    const nlohmann::json a = explore_result_to_json(req, full, top, false);
    const nlohmann::json b = explore_result_to_json(req, bound, top, false);
    EXPECT_EQ(a["best"], b["best"]);
    for (int i = 0; i < top; ++i) {
      EXPECT_EQ(a["top"][i]["id"], b["top"][i]["id"]);
      EXPECT_EQ(a["top"][i]["step_time_s"], b["top"][i]["step_time_s"]);
    }
    EXPECT_LT(bound.evaluated, full.evaluated);
    EXPECT_GT(bound.by_status[static_cast<size_t>(ConfigStatus::kBound)], 0);
    // Every pruned configuration is really dominated: its simulated step time (from the full
    // search) is at least its bound and it is neither in the top nor on the front.
    // Both ways of pruning happen: by the bound before simulating, and by stopping a simulation.
    int by_bound = 0, stopped = 0;
    for (const ConfigRecord& r : bound.records) {
      if (r.status != ConfigStatus::kBound) continue;
      by_bound += r.reason.rfind("takes at least", 0) == 0;
      stopped += r.reason.rfind("takes more than", 0) == 0;
    }
    EXPECT_GT(by_bound, 0);
    EXPECT_GT(stopped, 0);
    std::set<int64_t> leaders(full.ranking.begin(), full.ranking.begin() + top);
    leaders.insert(full.pareto.begin(), full.pareto.end());
    for (const ConfigRecord& r : bound.records) {
      if (r.status == ConfigStatus::kBound) {
        const ConfigRecord& same = full.records[r.id];
        ASSERT_TRUE(same.simulated()) << r.id;
        EXPECT_GE(same.step_time_s, r.lower_bound_s * (1 - 1e-9)) << r.id;
        EXPECT_EQ(leaders.count(r.id), 0u) << r.id;
        EXPECT_NE(r.reason.find("simulated configurations rank before it"), std::string::npos)
            << r.reason;
      } else if (r.simulated()) {
        // Simulated configurations carry the full search's metrics.
        EXPECT_EQ(config_record_to_json(r), config_record_to_json(full.records[r.id])) << r.id;
      } else {
        EXPECT_EQ(r.status, full.records[r.id].status) << r.id;
      }
    }
    // Deterministic: another thread count gives the same records.
    req.threads = 1;
    const ExploreResult again = explore(req);
    EXPECT_EQ(again.ranking, bound.ranking);
    EXPECT_EQ(again.by_status, bound.by_status);
    for (size_t id = 0; id < bound.records.size(); ++id)
      EXPECT_EQ(config_record_to_json(again.records[id]), config_record_to_json(bound.records[id]));
  }
}

}  // namespace
}  // namespace jaxpp
