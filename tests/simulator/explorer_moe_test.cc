// explore on mixture-of-experts models (issue 13, item 8): ep (and etp) are searched, ep values
// that do not fit the experts or a stage's devices are pruned with their reason, and the bound
// pruning (ExploreRequest::bound_prune) keeps the best configuration and the Pareto front of the
// full search while simulating fewer configurations.
#include <gtest/gtest.h>

#include <set>

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

TEST(ExplorerMoe, BoundPruningKeepsTheBestAndTheParetoFront) {
  ExploreRequest req = mixtral_request();
  const ExploreResult full = explore(req);
  req.bound_prune = true;
  req.bound_batch = 8;
  const ExploreResult bound = explore(req);
  ASSERT_FALSE(full.ranking.empty());
  EXPECT_EQ(bound.ranking.front(), full.ranking.front());
  EXPECT_EQ(bound.pareto, full.pareto);
  EXPECT_LT(bound.evaluated, full.evaluated);
  EXPECT_GT(bound.by_status[static_cast<size_t>(ConfigStatus::kBound)], 0);
  // Every bound-pruned configuration is really dominated: its simulated step time (from the full
  // search) is at least the bound, and the bound is at least the dominating one's step time.
  for (const ConfigRecord& r : bound.records) {
    if (r.status != ConfigStatus::kBound) continue;
    const ConfigRecord& same = full.records[r.id];
    ASSERT_TRUE(same.simulated()) << r.id;
    EXPECT_GE(same.step_time_s, r.lower_bound_s * (1 - 1e-12)) << r.id;
  }
  // Deterministic: another thread count gives the same records.
  req.threads = 1;
  const ExploreResult again = explore(req);
  EXPECT_EQ(again.ranking, bound.ranking);
  EXPECT_EQ(again.by_status, bound.by_status);
}

}  // namespace
}  // namespace jaxpp
