// What-if studies (simulator/what_if.h): a slow actor delays the step and the actors after it,
// jittered runs are reproducible, the quantile is the nearest rank, and the robust ranking is
// ordered by p90.
#include "simulator/what_if.h"

#include <gtest/gtest.h>

#include "costmodel/cluster.h"
#include "graph/model.h"
#include "schedules/registry.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

SimulatedPlan what_if_sim(const Perturbation* p) {
  const Schedule s = generate_schedule("1f1b", {.num_actors = 4, .num_microbatches = 8});
  PlanSimOptions o;
  o.record_trace = false;
  o.perturbation = p;
  return simulate_stage_times(s, uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 1e-4), o);
}

TEST(WhatIf, SlowActorDelaysTheStepAndPropagatesToTheOtherActors) {
  const Perturbation p = parse_perturbation("slow-actor=1:2", "--perturb");
  const SimulatedPlan base = what_if_sim(nullptr);
  const SimulatedPlan slow = what_if_sim(&p);
  const nlohmann::json r = perturbation_report(base.result, slow.result, p);
  EXPECT_GT(r.at("slowdown").get<double>(), 1.3);
  EXPECT_EQ(r.at("spec"), "slow-actor=1:2");
  // The actors that do not run slower still end later, and idle more: the bubble propagates.
  for (int a : {0, 2, 3}) {
    EXPECT_GT(r.at("actors")[a].at("end_delay_s").get<double>(), 1e-3) << a;
    EXPECT_GT(r.at("actors")[a].at("idle_delta_s").get<double>(), 0) << a;
  }
  EXPECT_DOUBLE_EQ(r.at("actors")[1].at("busy_s").get<double>(),
                   2 * r.at("actors")[1].at("baseline_busy_s").get<double>());
}

TEST(WhatIf, JitteredRunsAreReproducibleAndSeedsDiffer) {
  const Perturbation a = parse_perturbation("jitter=0.2,seed=3", "x");
  const Perturbation b = parse_perturbation("jitter=0.2,seed=4", "x");
  EXPECT_EQ(what_if_sim(&a).result.step_time_s, what_if_sim(&a).result.step_time_s);
  EXPECT_NE(what_if_sim(&a).result.step_time_s, what_if_sim(&b).result.step_time_s);
}

TEST(WhatIf, NearestRankQuantile) {
  EXPECT_EQ(nearest_rank_quantile({5, 1, 4, 2, 3, 6, 7, 8, 9, 10}, 0.9), 9);
  EXPECT_EQ(nearest_rank_quantile({5, 1, 4, 2, 3}, 0.5), 3);
  EXPECT_EQ(nearest_rank_quantile({7}, 0.9), 7);
}

TEST(WhatIf, RobustRankingIsOrderedByP90AndReproducible) {
  ExploreRequest req;
  req.model = load_model("gpt3-1.3b");
  req.cluster = load_cluster("a100-80g");
  req.gpus = 8;
  req.global_batch = 64;
  req.threads = 1;
  req.space.pp = {4};
  req.space.tp = {1};
  req.space.schedules = {"1f1b", "zb-h1", "gpipe"};
  req.space.recompute = {Recompute::kNone};
  req.space.zero1 = {true};
  const ExploreResult res = explore(req);
  const std::vector<RobustEntry> r = robust_ranking(req, res, 8, 0.2, 5);
  ASSERT_EQ(r.size(), 5u);
  for (size_t i = 1; i < r.size(); ++i) EXPECT_LE(r[i - 1].p90_step_time_s, r[i].p90_step_time_s);
  for (const RobustEntry& e : r) {
    EXPECT_LE(e.p50_step_time_s, e.p90_step_time_s);
    EXPECT_LE(e.p90_step_time_s, e.max_step_time_s);
  }
  const std::vector<RobustEntry> again = robust_ranking(req, res, 8, 0.2, 5);
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].id, again[i].id);
    EXPECT_EQ(r[i].p90_step_time_s, again[i].p90_step_time_s);
  }
}

}  // namespace
}  // namespace jaxpp
