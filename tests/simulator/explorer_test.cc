// Explorer: ranking equal to a brute-force loop over build_plan + simulate_plan, exact memory
// pre-check, pruning reasons, Pareto front, determinism across threads and shards, best plan,
// context parallelism and the options applied to every configuration.
#include "simulator/explorer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/model.h"
#include "graph/plan.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

// GPT-3 13B on 8 A100-80GB: small enough to simulate everything quickly, large enough that
// some configurations do not fit (pp·tp = 1 holds ~97 GB of weights, gradients and ZeRO-1
// optimizer state, whatever the activations).
ExploreRequest small_request() {
  ExploreRequest req;
  req.model = load_model("gpt3-13b");
  req.cluster = load_cluster("a100-80g");
  req.gpus = 8;
  req.global_batch = 16;
  req.space.pp = {1, 2, 4};
  req.space.tp = {1, 2};
  req.space.microbatch_sizes = {1, 2};
  req.space.schedules = {"1f1b", "zb-h1", "interleaved", "dualpipev"};
  req.space.virtual_stages = {1, 2};
  req.threads = 2;
  return req;
}

// The same space written out by hand: (schedule, v) pairs as their placements allow.
std::vector<ParallelConfig> brute_force_space(const ExploreRequest& req) {
  const std::vector<std::pair<std::string, int>> schedules = {{"Std1F1B", 1},
                                                              {"ZeroBubble", 1},
                                                              {"Interleaved1F1B", 1},
                                                              {"Interleaved1F1B", 2},
                                                              {"DualPipeV", 2}};
  std::vector<ParallelConfig> out;
  for (int pp : req.space.pp) {
    for (int tp : req.space.tp) {
      for (int b : req.space.microbatch_sizes) {
        for (const auto& [name, v] : schedules) {
          for (Recompute rc : kDefaultExploreRecompute) {  // explore's default space
            for (bool z : {false, true}) {
              ParallelConfig c;
              c.gpus = req.gpus;
              c.pp = pp;
              c.tp = tp;
              c.dp = req.gpus / (pp * tp);
              c.microbatch_size = b;
              c.global_batch = req.global_batch;
              c.virtual_stages = v;
              c.schedule = name;
              c.recompute = rc;
              c.zero1 = z;
              // The explorer's documented duplicates (ZeRO-1 with dp = 1, v > 1 with pp = 1)
              // and dominated configurations (ZeRO-1 off with dp > 1).
              if (z && c.dp == 1) continue;
              if (!z && c.dp > 1) continue;
              if (pp == 1 && v > 1) continue;
              out.push_back(c);
            }
          }
        }
      }
    }
  }
  return out;
}

struct Simulated {
  ParallelConfig config;
  double step_time_s = 0;
  int64_t peak_memory_bytes = 0;
};

// Every configuration through build_plan + simulate_plan (with its memory check), as a user
// looping over `jaxpp-sim simulate` would.
std::vector<Simulated> brute_force(const ExploreRequest& req) {
  std::vector<Simulated> out;
  for (const ParallelConfig& c : brute_force_space(req)) {
    PlanRequest pr;
    pr.model = req.model;
    pr.cluster = req.cluster;
    pr.config = c;
    try {
      const Plan plan = build_plan(pr);
      const SimulatedPlan sim = simulate_plan(plan, {.record_trace = false});
      int64_t peak = 0;
      for (const ActorStats& a : sim.result.actors) peak = std::max(peak, a.peak_memory_bytes);
      out.push_back({plan.config, sim.result.step_time_s, peak});
    } catch (const InputError&) {
      // Invalid for the schedule, or does not fit.
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Simulated& a, const Simulated& b) {
    return a.step_time_s < b.step_time_s;
  });
  return out;
}

// Exploring once per test binary keeps the suite fast.
const ExploreResult& small_result() {
  static const ExploreResult result = explore(small_request());
  return result;
}

TEST(Explorer, RankingEqualsBruteForceLoopOverSimulate) {
  const ExploreResult& res = small_result();
  const std::vector<Simulated> expected = brute_force(small_request());
  ASSERT_GT(expected.size(), 20u);
  ASSERT_EQ(res.ranking.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const ConfigRecord& got = res.records[res.ranking[i]];
    SCOPED_TRACE("rank " + std::to_string(i + 1) + ": " + describe_config(expected[i].config));
    EXPECT_EQ(got.config, expected[i].config);
    EXPECT_EQ(got.step_time_s, expected[i].step_time_s);
    EXPECT_EQ(got.peak_memory_bytes, expected[i].peak_memory_bytes);
  }
}

// The lower bound of ExploreRequest::bound_prune never exceeds the simulated step time, for
// every schedule of the registry, with and without the overlapped gradient reduction. With
// bound_top above the space's size nothing can be pruned, so every configuration is simulated.
TEST(Explorer, BoundIsBelowTheStepTimeOfEverySchedule) {
  ExploreRequest req;
  req.model = load_model("gpt3-1.3b");
  req.cluster = load_cluster("a100-80g");
  req.gpus = 8;
  req.global_batch = 32;
  req.space.tp = {1, 2};
  req.space.microbatch_sizes = {1, 4};
  req.threads = 2;
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap_grad_reduce" : "no overlap");
    req.overlap_grad_reduce = overlap;
    req.bound_prune = false;
    const ExploreResult full = explore(req);
    req.bound_prune = true;
    req.bound_top = 1000000;
    const ExploreResult bound = explore(req);
    EXPECT_EQ(bound.by_status[static_cast<size_t>(ConfigStatus::kBound)], 0);
    EXPECT_EQ(bound.ranking, full.ranking);
    std::set<std::string> schedules;
    double tightest = 2;
    for (const ConfigRecord& r : bound.records) {
      if (!r.simulated()) continue;
      schedules.insert(r.config.schedule);
      EXPECT_GT(r.lower_bound_s, 0) << r.id;
      EXPECT_GE(r.step_time_s, r.lower_bound_s * (1 - 1e-9)) << describe_config(r.config);
      tightest = std::min(tightest, r.step_time_s / r.lower_bound_s);
    }
    EXPECT_GE(schedules.size(), 8u);  // linear, loop and V placements, split backwards
    EXPECT_LT(tightest, 1.05);        // the bound is not trivially low
  }
}

TEST(Explorer, ZeroOneOffIsNeverFasterNorSmallerThanZeroOneOn) {
  ExploreRequest off = small_request();
  off.space.zero1 = {false};
  ExploreRequest on = small_request();
  on.space.zero1 = {true};
  const ExploreResult a = explore(off);
  const ExploreResult b = explore(on);
  ASSERT_EQ(a.records.size(), b.records.size());
  int compared = 0;
  for (size_t i = 0; i < a.records.size(); ++i) {
    const ConfigRecord& x = a.records[i];
    const ConfigRecord& y = b.records[i];
    if (!x.simulated() || !y.simulated() || x.config.dp == 1) continue;
    ++compared;
    EXPECT_LE(y.step_time_s, x.step_time_s) << describe_config(x.config);
    EXPECT_LT(y.peak_memory_bytes, x.peak_memory_bytes) << describe_config(x.config);
  }
  EXPECT_GT(compared, 20);
  EXPECT_EQ(a.by_status[static_cast<size_t>(ConfigStatus::kDominated)], 0);
  EXPECT_GT(small_result().by_status[static_cast<size_t>(ConfigStatus::kDominated)], 0);
}

TEST(Explorer, SomeConfigurationsArePrunedForMemoryAndSomeForTheSchedule) {
  const ExploreResult& res = small_result();
  EXPECT_GT(res.by_status[static_cast<size_t>(ConfigStatus::kMemory)], 0);
  EXPECT_GT(res.by_status[static_cast<size_t>(ConfigStatus::kSchedule)], 0);
  EXPECT_EQ(res.by_status[static_cast<size_t>(ConfigStatus::kFailed)], 0);
  EXPECT_EQ(res.by_status[static_cast<size_t>(ConfigStatus::kPending)], 0);
  EXPECT_EQ(res.evaluated, res.feasible);
}

TEST(Explorer, MemoryPreCheckEqualsTheSimulatedPeak) {
  const ExploreRequest req = small_request();
  const ExploreResult& res = small_result();
  int checked = 0;
  for (const ConfigRecord& r : res.records) {
    if (r.status != ConfigStatus::kMemory || ++checked > 12) continue;
    PlanRequest pr;
    pr.model = req.model;
    pr.cluster = req.cluster;
    pr.config = r.config;
    const SimulatedPlan sim =
        simulate_plan(build_plan(pr), {.record_trace = false, .check_memory = false});
    int64_t peak = 0;
    for (const ActorStats& a : sim.result.actors) peak = std::max(peak, a.peak_memory_bytes);
    EXPECT_EQ(r.peak_memory_bytes, peak) << describe_config(r.config);
    EXPECT_GT(peak, req.cluster.hbm_bytes) << describe_config(r.config);
  }
  EXPECT_GT(checked, 0);
}

TEST(Explorer, PrunedConfigurationsSayWhy) {
  const ExploreResult& res = small_result();
  for (const ConfigRecord& r : res.records) {
    if (r.simulated()) {
      EXPECT_TRUE(r.reason.empty()) << r.reason;
      continue;
    }
    EXPECT_FALSE(r.reason.empty()) << describe_config(r.config);
    if (r.status == ConfigStatus::kMemory) {
      EXPECT_THAT(r.reason, MatchesRegex("needs [0-9.]+ GiB on actor [0-9]+ .*limit 80.00 GiB"));
    }
    if (r.status == ConfigStatus::kSchedule && r.config.schedule == "DualPipeV") {
      EXPECT_THAT(r.reason, HasSubstr("DualPipeV needs m >= 2p"));
    }
  }
}

TEST(Explorer, DivisibilityAndStageCountArePrunedBeforeSimulating) {
  ExploreRequest req = small_request();
  req.space.pp = {3};
  for (const ConfigRecord& r : enumerate_configs(req)) {
    EXPECT_EQ(r.status, ConfigStatus::kDivisibility);
    EXPECT_THAT(r.reason, HasSubstr("does not divide 8 GPUs"));
  }
  req = small_request();
  req.space.pp = {2};
  req.global_batch = 9;  // dp = 4 or 2
  for (const ConfigRecord& r : enumerate_configs(req)) {
    EXPECT_EQ(r.status, ConfigStatus::kDivisibility);
    EXPECT_THAT(r.reason, HasSubstr("global batch 9 is not divisible by dp·b"));
  }
  req = small_request();
  req.space.pp = {8};
  req.space.tp = {1};
  req.space.schedules = {"interleaved"};
  req.space.virtual_stages = {8};  // 64 stages, the model has 42 layers
  const std::vector<ConfigRecord> records = enumerate_configs(req);
  ASSERT_FALSE(records.empty());
  for (const ConfigRecord& r : records) {
    EXPECT_EQ(r.status, ConfigStatus::kDivisibility);
    EXPECT_THAT(r.reason, HasSubstr("64 stages (pp·v) exceed the model's 42 layers"));
  }
}

TEST(Explorer, LinearSchedulesUseOneStagePerActorAndVSchedulesTwo) {
  ExploreRequest req = small_request();
  req.space.virtual_stages.clear();  // default domain
  std::set<std::pair<std::string, int>> seen;
  for (const ConfigRecord& r : enumerate_configs(req))
    seen.insert({r.config.schedule, r.config.virtual_stages});
  const std::set<std::pair<std::string, int>> expected = {
      {"Std1F1B", 1},         {"ZeroBubble", 1},      {"DualPipeV", 2},
      {"Interleaved1F1B", 2}, {"Interleaved1F1B", 4}, {"Interleaved1F1B", 8}};
  EXPECT_EQ(seen, expected);
}

TEST(Explorer, RankingIsSortedAndParetoFrontIsNotDominated) {
  const ExploreResult& res = small_result();
  const auto& recs = res.records;
  for (size_t i = 1; i < res.ranking.size(); ++i) {
    const ConfigRecord& a = recs[res.ranking[i - 1]];
    const ConfigRecord& b = recs[res.ranking[i]];
    EXPECT_TRUE(a.step_time_s < b.step_time_s || (a.step_time_s == b.step_time_s && a.id < b.id));
  }
  ASSERT_FALSE(res.pareto.empty());
  EXPECT_EQ(res.pareto.front(), res.ranking.front());
  const std::set<int64_t> front(res.pareto.begin(), res.pareto.end());
  for (int64_t id : res.ranking) {
    const ConfigRecord& c = recs[id];
    bool dominated = false, covered = false;
    for (int64_t f : res.pareto) {
      const ConfigRecord& p = recs[f];
      if (p.step_time_s <= c.step_time_s && p.peak_memory_bytes <= c.peak_memory_bytes) {
        covered = true;
        if (f != id && (p.step_time_s < c.step_time_s || p.peak_memory_bytes < c.peak_memory_bytes))
          dominated = true;
      }
    }
    EXPECT_TRUE(covered) << describe_config(c.config);
    if (front.count(id)) {
      EXPECT_FALSE(dominated) << describe_config(c.config);
    }
  }
}

TEST(Explorer, JsonIsIdenticalAcrossThreadCounts) {
  const std::string reference =
      explore_result_to_json(small_request(), small_result(), 10, true).dump();
  for (int threads : {1, 3}) {
    ExploreRequest req = small_request();
    req.threads = threads;
    EXPECT_EQ(explore_result_to_json(req, explore(req), 10, true).dump(), reference)
        << threads << " threads";
  }
}

TEST(Explorer, ShardsMergedThroughJsonGiveTheSameResult) {
  const ExploreRequest base = small_request();
  std::vector<ConfigRecord> merged = enumerate_configs(base);
  const int shards = 3;
  std::vector<int> evaluated_by(merged.size(), 0);
  for (int k = 0; k < shards; ++k) {
    ExploreRequest req = base;
    req.shard_index = k;
    req.shard_count = shards;
    std::vector<ConfigRecord> mine = enumerate_configs(req);
    const std::vector<ConfigRecord> before = mine;
    evaluate_configs(req, mine);
    for (size_t i = 0; i < mine.size(); ++i) {
      if (before[i].status != ConfigStatus::kPending || mine[i].status == ConfigStatus::kPending)
        continue;
      ++evaluated_by[i];
      merged[i] = config_record_from_json(
          nlohmann::json::parse(config_record_to_json(mine[i]).dump()), "shard");
    }
  }
  // Every configuration left pending by the enumeration is evaluated by exactly one shard.
  const std::vector<ConfigRecord> enumerated = enumerate_configs(base);
  for (size_t i = 0; i < merged.size(); ++i) {
    EXPECT_EQ(evaluated_by[i], enumerated[i].status == ConfigStatus::kPending ? 1 : 0)
        << "configuration " << i;
  }
  const ExploreResult res = finish_exploration(base, merged);
  EXPECT_EQ(explore_result_to_json(base, res, 10, true).dump(),
            explore_result_to_json(base, small_result(), 10, true).dump());
}

TEST(Explorer, UnitsAreSplitAcrossShardsByWork) {
  const ExploreRequest req = small_request();
  const std::vector<ConfigRecord> records = enumerate_configs(req);
  const auto units = unit_configs(records);
  const std::vector<int> shard = assign_units(records, units, 2);
  ASSERT_EQ(shard.size(), units.size());
  EXPECT_EQ(std::count(shard.begin(), shard.end(), 0) > 0, true);
  EXPECT_EQ(std::count(shard.begin(), shard.end(), 1) > 0, true);
  for (const auto& ids : units) {
    for (int64_t id : ids) {
      const ParallelConfig& a = records[ids.front()].config;
      const ParallelConfig& b = records[id].config;
      EXPECT_EQ(std::tie(a.pp, a.schedule, a.virtual_stages, a.num_microbatches),
                std::tie(b.pp, b.schedule, b.virtual_stages, b.num_microbatches));
    }
  }
}

TEST(Explorer, RecordJsonRoundTrips) {
  for (const ConfigRecord& r : small_result().records) {
    const ConfigRecord back =
        config_record_from_json(nlohmann::json::parse(config_record_to_json(r).dump()), "test");
    EXPECT_EQ(config_record_to_json(back).dump(), config_record_to_json(r).dump());
  }
}

TEST(Explorer, BestPlanPredictsTheExploredStepTime) {
  const ExploreResult& res = small_result();
  const ConfigRecord& best = res.records[res.ranking.front()];
  const Plan plan = build_config_plan(small_request(), best.config);
  EXPECT_EQ(plan.config, best.config);
  EXPECT_EQ(plan.predicted.at("step_time_s").get<double>(), best.step_time_s);
  EXPECT_EQ(plan.predicted.at("mfu").get<double>(), best.mfu);
}

TEST(Explorer, JsonCarriesCountsBestTopParetoAndConfigs) {
  const nlohmann::json j = explore_result_to_json(small_request(), small_result(), 5, false);
  EXPECT_EQ(j.at("evaluated").get<int64_t>(), small_result().evaluated);
  EXPECT_EQ(j.at("feasible").get<int64_t>(), small_result().feasible);
  EXPECT_EQ(j.at("configs").size(), static_cast<size_t>(small_result().evaluated));
  EXPECT_EQ(j.at("top").size(), 5u);
  EXPECT_EQ(j.at("best").at("rank"), 1);
  EXPECT_EQ(j.at("best"), j.at("top").at(0));
  EXPECT_EQ(j.at("best").at("step_time_s").get<double>(),
            small_result().records[small_result().ranking.front()].step_time_s);
  EXPECT_FALSE(j.contains("pruned_configs"));
}

// --recompute full:N: each N is a policy after full (N ascending, a repeated N kept once); the
// configurations carry recompute_layers, explore's names say full:N, and the parser refuses a
// count on another policy or one that is not a number >= 0.
TEST(Explorer, PartialRecomputeChoicesFollowFullInEnumerationOrder) {
  ExploreRequest req;
  req.model = load_model("gpt3-1.3b");
  req.cluster = load_cluster("a100-80g");
  req.gpus = 2;
  req.global_batch = 8;
  req.space.pp = {2};
  req.space.tp = {1};
  req.space.microbatch_sizes = {1};
  req.space.schedules = {"1f1b"};
  req.space.zero1 = {false};
  for (const char* item : {"full:4", "none", "full", "full:2", "full:4"})
    add_recompute_choice(item, req.space, "--recompute");
  EXPECT_EQ(req.space.recompute, (std::vector<Recompute>{Recompute::kNone, Recompute::kFull}));
  EXPECT_EQ(req.space.recompute_layers, (std::vector<int>{4, 2, 4}));
  const std::vector<ConfigRecord> records = enumerate_configs(req);
  ASSERT_EQ(records.size(), 4u);
  std::vector<std::string> names;
  for (const ConfigRecord& r : records) names.push_back(recompute_choice_name(r.config));
  EXPECT_EQ(names, (std::vector<std::string>{"none", "full", "full:2", "full:4"}));
  EXPECT_EQ(records[2].config.recompute_layers, 2);
  EXPECT_EQ(records[1].config.recompute_layers, -1);
  EXPECT_THAT(describe_config(records[3].config), HasSubstr(", recompute full:4"));
  ExploreSpace space;
  for (const char* bad : {"selective:2", "full:", "full:x", "full:-3", "full:2x"}) {
    try {
      add_recompute_choice(bad, space, "--recompute");
      ADD_FAILURE() << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("--recompute: '" + std::string(bad) + "'")) << bad;
    }
  }
  EXPECT_TRUE(space.recompute_layers.empty());
  req.partition = PartitionMode::kBalancedTime;
  try {
    enumerate_configs(req);
    ADD_FAILURE() << "full:N with balanced-time accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--recompute: full:4 with --partition balanced-time"));
  }
}

TEST(Explorer, CsvHasOneRowPerSimulatedConfiguration) {
  const std::string csv = explore_result_to_csv(small_result());
  EXPECT_THAT(csv, StartsWith("rank,id,pp,tp,cp,dp,"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), small_result().evaluated + 1);
}

TEST(Explorer, EmptySpaceSaysWhatTheSmallestConfigurationNeeds) {
  ExploreRequest req;
  req.model = load_model("gpt3-175b");
  req.cluster = load_cluster("a100-80g");
  req.gpus = 8;
  req.global_batch = 8;
  req.space.microbatch_sizes = {1};
  req.space.schedules = {"1f1b"};
  const ExploreResult res = explore(req);
  EXPECT_EQ(res.feasible, 0);
  EXPECT_THAT(explain_empty(res),
              MatchesRegex("no configuration fits in 80 GiB; the smallest needs [0-9]+\\.[0-9] GiB "
                           "\\(pp [0-9]+, .*\\)"));
}

TEST(Explorer, EmptySpaceWithoutMemoryPruningNamesTheFirstReason) {
  ExploreRequest req = small_request();
  req.space.pp = {3};
  const ExploreResult res = explore(req);
  EXPECT_THAT(explain_empty(res), StartsWith("no valid configuration among "));
  EXPECT_THAT(explain_empty(res), HasSubstr("does not divide 8 GPUs"));
}

TEST(Explorer, EmptySpaceNamesAReasonThatHoldsWithoutATwin) {
  ExploreRequest req = small_request();
  req.space.pp = {1};
  req.space.schedules = {"zb-h1"};  // needs S >= 2
  const ExploreResult res = explore(req);
  ASSERT_EQ(res.feasible, 0);
  EXPECT_GT(res.by_status[static_cast<size_t>(ConfigStatus::kDominated)], 0);
  EXPECT_THAT(explain_empty(res), HasSubstr("first: ZeroBubble needs S >= 2"));
}

TEST(Explorer, ATwinOutsideTheSpaceDoesNotPruneAConfiguration) {
  // One GPU with --virtual 2 holds no v = 1 configuration, and --zero1 on no ZeRO-1-off one: the
  // configurations that stand for them were pruned as duplicates and the space came back empty.
  ExploreRequest req;
  req.model = load_model("gpt3-1.3b");
  req.cluster = load_cluster("h100-sxm");
  req.gpus = 1;
  req.global_batch = 8;
  req.space.schedules = {"interleaved"};
  req.space.virtual_stages = {2};
  req.space.microbatch_sizes = {1};
  req.space.zero1 = {false};
  req.threads = 1;
  ExploreResult res = explore(req);
  ASSERT_GT(res.feasible, 0) << explain_empty(res);
  EXPECT_EQ(res.by_status[static_cast<size_t>(ConfigStatus::kDuplicate)], 0);
  EXPECT_EQ(res.records[res.ranking.front()].config.virtual_stages, 2);

  req.space.schedules = {"1f1b"};
  req.space.virtual_stages = {};
  req.space.zero1 = {true};
  res = explore(req);
  ASSERT_GT(res.feasible, 0) << explain_empty(res);
  EXPECT_TRUE(res.records[res.ranking.front()].config.zero1);

  req.space.zero1 = {false, true};  // with the twin in the space, ZeRO-1 at dp 1 is a duplicate
  res = explore(req);
  EXPECT_GT(res.by_status[static_cast<size_t>(ConfigStatus::kDuplicate)], 0);
  EXPECT_FALSE(res.records[res.ranking.front()].config.zero1);
}

TEST(Explorer, BadRequestsNameTheFlag) {
  ExploreRequest req = small_request();
  req.space.schedules = {"1f1b", "nope"};
  try {
    enumerate_configs(req);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), StartsWith("--schedules: unknown schedule 'nope'"));
  }
  req = small_request();
  req.space.pp = {0};
  EXPECT_THROW(enumerate_configs(req), InputError);
  req = small_request();
  req.gpus = 0;
  EXPECT_THROW(enumerate_configs(req), InputError);
  req = small_request();
  req.global_batch = -1;
  EXPECT_THROW(enumerate_configs(req), InputError);
}

TEST(Explorer, ModelDtypeTheClusterLacksIsBadInputBeforeExploring) {
  ExploreRequest req = small_request();
  req.model.dtype = Dtype::kFp8;  // the A100 preset has no FP8 peak
  EXPECT_THROW(enumerate_configs(req), InputError);
  EXPECT_THROW(explore(req), InputError);
}

TEST(Explorer, MemoryLimitBelowTheDeviceTightensPruning) {
  ExploreRequest req = small_request();
  req.max_memory_bytes = int64_t{40} << 30;
  const ExploreResult res = explore(req);
  EXPECT_LT(res.feasible, small_result().feasible);
  EXPECT_GT(res.feasible, 0);
  for (int64_t id : res.ranking) EXPECT_LE(res.records[id].peak_memory_bytes, req.max_memory_bytes);
}

// ---- Context parallelism and per-configuration options. -------------------------------------

// Llama 3 8B trained on 32k-token sequences (the long-context phase of Llama 3), inline.
ModelSpec long_sequence_model() {
  return model_from_json(nlohmann::json::parse(R"({
    "name": "llama3-8b-32k", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
    "ffn_hidden": 14336, "seq_len": 32768, "vocab": 128256, "tied_embeddings": false,
    "mlp": "swiglu"})"),
                         "llama3-8b-32k");
}

// 16 A100-80GB, 16 sequences of 32k tokens: without cp the activations of one sequence do not
// fit unless recomputed; cp shares them (and the attention) between devices.
ExploreRequest long_request() {
  ExploreRequest req;
  req.model = long_sequence_model();
  req.cluster = load_cluster("a100-80g");
  req.gpus = 16;
  req.global_batch = 16;
  req.space.pp = {1, 2, 4};
  req.space.tp = {2, 4, 8};
  req.space.microbatch_sizes = {1};
  req.space.schedules = {"1f1b", "zb-h1"};
  req.space.recompute = {Recompute::kNone, Recompute::kSelective};
  req.space.zero1 = {true};
  req.space.sequence_parallel = true;
  req.threads = 2;
  return req;
}

const ExploreResult& long_result() {
  static const ExploreResult result = explore(long_request());
  return result;
}

std::set<int> cp_values(const std::vector<ConfigRecord>& records) {
  std::set<int> out;
  for (const ConfigRecord& r : records) out.insert(r.config.cp);
  return out;
}

TEST(ExplorerCp, DefaultDomainIsOneBelowSixteenThousandTokens) {
  EXPECT_EQ(cp_values(enumerate_configs(small_request())), std::set<int>{1});
}

TEST(ExplorerCp, DefaultDomainForLongSequencesIsPowersOfTwoUpToANode) {
  ExploreRequest req = long_request();
  req.space.cp.clear();
  EXPECT_EQ(cp_values(enumerate_configs(req)), (std::set<int>{1, 2, 4, 8}));
  req.space.cp = {4, 2, 4};
  EXPECT_EQ(cp_values(enumerate_configs(req)), (std::set<int>{2, 4}));
}

TEST(ExplorerCp, LoopNestPutsCpBetweenTpAndMicrobatchSize) {
  ExploreRequest req = long_request();
  req.space.cp = {1, 2};
  req.space.microbatch_sizes = {1, 2};
  const std::vector<ConfigRecord> records = enumerate_configs(req);
  ASSERT_FALSE(records.empty());
  for (size_t i = 1; i < records.size(); ++i) {
    const ParallelConfig& a = records[i - 1].config;
    const ParallelConfig& b = records[i].config;
    EXPECT_EQ(records[i].id, static_cast<int64_t>(i));
    EXPECT_LE(std::tie(a.pp, a.tp, a.cp, a.microbatch_size),
              std::tie(b.pp, b.tp, b.cp, b.microbatch_size))
        << describe_config(a) << " before " << describe_config(b);
  }
}

TEST(ExplorerCp, DpIsGpusOverPpTpCp) {
  for (const ConfigRecord& r : long_result().records) {
    if (r.status == ConfigStatus::kDivisibility) continue;
    EXPECT_EQ(r.config.pp * r.config.tp * r.config.cp * r.config.dp, 16)
        << describe_config(r.config);
  }
}

TEST(ExplorerCp, GpuCountNotDividedByPpTpCpIsPrunedWithItsReason) {
  ExploreRequest req = long_request();
  req.space.pp = {1};
  req.space.tp = {2};
  req.space.cp = {3};
  const std::vector<ConfigRecord> records = enumerate_configs(req);
  ASSERT_FALSE(records.empty());
  for (const ConfigRecord& r : records) {
    EXPECT_EQ(r.status, ConfigStatus::kDivisibility);
    EXPECT_EQ(r.reason, "pp·tp·cp = 6 does not divide 16 GPUs");
  }
}

TEST(ExplorerCp, SequenceNotSplittingIntoTwoCpChunksIsPrunedWithItsReason) {
  ExploreRequest req = long_request();
  req.gpus = 24;
  req.global_batch = 24;
  req.space.pp = {1};
  req.space.tp = {8};
  req.space.cp = {3};  // 32768 is not a multiple of 6
  const std::vector<ConfigRecord> records = enumerate_configs(req);
  ASSERT_FALSE(records.empty());
  for (const ConfigRecord& r : records) {
    EXPECT_EQ(r.status, ConfigStatus::kDivisibility);
    EXPECT_THAT(r.reason,
                HasSubstr("cp 3 does not split seq_len 32768 into 2·cp = 6 equal chunks"));
  }
}

TEST(ExplorerCp, UnfusedAttentionIsPrunedOnlyWithCp) {
  ExploreRequest req = long_request();
  req.space.pp = {1};
  req.space.tp = {2};
  req.space.cp = {1, 2};
  req.space.zero1 = {false};  // dp = 8 or 4: neither duplicate nor dominated
  req.space.attention = AttentionKernel::kUnfused;
  int with_cp = 0, without_cp = 0;
  for (const ConfigRecord& r : enumerate_configs(req)) {
    EXPECT_EQ(r.config.attention, AttentionKernel::kUnfused);
    if (r.config.cp == 1) {
      ++without_cp;
      EXPECT_EQ(r.status, ConfigStatus::kPending) << describe_config(r.config) << ": " << r.reason;
      continue;
    }
    ++with_cp;
    EXPECT_EQ(r.status, ConfigStatus::kDivisibility);
    EXPECT_THAT(r.reason, HasSubstr("cp 2 needs flash attention"));
  }
  EXPECT_GT(with_cp, 0);
  EXPECT_GT(without_cp, 0);
}

TEST(ExplorerCp, LongSequenceModelSimulatesAndRanksContextParallelConfigurations) {
  const ExploreResult& res = long_result();
  int ranked_with_cp = 0;
  for (int64_t id : res.ranking) {
    const ConfigRecord& r = res.records[id];
    if (r.config.cp == 1) continue;
    ++ranked_with_cp;
    EXPECT_THAT(describe_config(r.config), HasSubstr(", cp " + std::to_string(r.config.cp) + ", "));
  }
  EXPECT_GT(ranked_with_cp, 3);
}

// At 32k tokens the stashed activations of tp 2 alone exceed the device; cp 2 halves them.
TEST(ExplorerCp, CpMakesALongSequenceFitWhereTpAloneDoesNot) {
  const ExploreResult& res = long_result();
  int rescued = 0;
  for (const ConfigRecord& r : res.records) {
    if (r.status != ConfigStatus::kMemory || r.config.cp != 1) continue;
    for (const ConfigRecord& twin : res.records) {
      const ParallelConfig& a = r.config;
      const ParallelConfig& b = twin.config;
      if (b.cp != 2 || std::tie(a.pp, a.tp, a.schedule, a.recompute, a.microbatch_size) !=
                           std::tie(b.pp, b.tp, b.schedule, b.recompute, b.microbatch_size))
        continue;
      EXPECT_TRUE(twin.simulated() && twin.fits) << describe_config(b) << ": " << twin.reason;
      EXPECT_LT(twin.peak_memory_bytes, r.peak_memory_bytes) << describe_config(b);
      ++rescued;
    }
  }
  EXPECT_GT(rescued, 0);
}

// Every simulated configuration, cp or not, equals build_plan + simulate_plan of its
// configuration: the per-(tp, cp, b) byte substitution into the shared program is right.
TEST(ExplorerCp, EverySimulatedConfigurationEqualsSimulatePlan) {
  const ExploreRequest req = long_request();
  const ExploreResult& res = long_result();
  int checked_cp = 0;
  for (const ConfigRecord& r : res.records) {
    if (!r.simulated()) continue;
    checked_cp += r.config.cp > 1;
    const Plan plan = build_config_plan(req, r.config);
    EXPECT_EQ(plan.config, r.config);
    EXPECT_EQ(plan.predicted.at("step_time_s").get<double>(), r.step_time_s)
        << describe_config(r.config);
  }
  EXPECT_GT(checked_cp, 3);
}

TEST(ExplorerCp, JsonIsIdenticalAcrossThreadCounts) {
  const std::string reference =
      explore_result_to_json(long_request(), long_result(), 10, true).dump();
  ExploreRequest req = long_request();
  req.threads = 1;
  EXPECT_EQ(explore_result_to_json(req, explore(req), 10, true).dump(), reference);
}

TEST(ExplorerCp, RecordJsonRoundTripsCpExactly) {
  int with_cp = 0;
  for (const ConfigRecord& r : long_result().records) {
    if (r.config.dp == 0) continue;  // pp·tp·cp does not divide the GPUs: never sent as a shard
    const ConfigRecord back =
        config_record_from_json(nlohmann::json::parse(config_record_to_json(r).dump()), "test");
    with_cp += back.config.cp > 1;
    EXPECT_EQ(back.config, r.config);
    EXPECT_EQ(config_record_to_json(back).dump(), config_record_to_json(r).dump());
  }
  EXPECT_GT(with_cp, 0);
}

TEST(ExplorerCp, CsvHasACpColumn) {
  const std::string csv = explore_result_to_csv(long_result());
  EXPECT_THAT(csv, StartsWith("rank,id,pp,tp,cp,dp,"));
  const ConfigRecord& best = long_result().records[long_result().ranking.front()];
  EXPECT_THAT(
      csv, HasSubstr("\n1," + std::to_string(best.id) + "," + std::to_string(best.config.pp) + "," +
                     std::to_string(best.config.tp) + "," + std::to_string(best.config.cp) + "," +
                     std::to_string(best.config.dp) + ","));
}

TEST(ExplorerCp, PlanWithCpTwoReloadsAndSimulatesToTheSameStepTime) {
  const ExploreResult& res = long_result();
  const ConfigRecord* cp2 = nullptr;
  for (int64_t id : res.ranking) {
    if (res.records[id].config.cp == 2) {
      cp2 = &res.records[id];
      break;
    }
  }
  ASSERT_NE(cp2, nullptr);
  const Plan plan = build_config_plan(long_request(), cp2->config);
  const Plan back = plan_from_json(nlohmann::json::parse(plan_to_json(plan).dump()), "plan.json");
  EXPECT_EQ(back.config.cp, 2);
  EXPECT_EQ(back.config, cp2->config);
  const SimulatedPlan sim = simulate_plan(back, {.record_trace = false});
  EXPECT_EQ(sim.result.step_time_s, cp2->step_time_s);
  EXPECT_EQ(sim.metrics.at("mfu").get<double>(), cp2->mfu);
}

TEST(ExplorerCp, OptionsReachEveryConfiguration) {
  ExploreRequest req = small_request();
  req.space.sequence_parallel = true;
  req.space.tp_comm_overlap = true;
  req.space.attention = AttentionKernel::kUnfused;
  req.overlap_grad_reduce = true;
  for (const ConfigRecord& r : enumerate_configs(req)) {
    EXPECT_TRUE(r.config.sequence_parallel);
    EXPECT_EQ(r.config.tp_comm_overlap, r.config.tp > 1) << describe_config(r.config);
    EXPECT_EQ(r.config.attention, AttentionKernel::kUnfused);
    EXPECT_TRUE(r.config.overlap_grad_reduce);
  }
}

TEST(ExplorerCp, TpCommOverlapWithoutSequenceParallelismIsBadInput) {
  ExploreRequest req = small_request();
  req.space.tp_comm_overlap = true;
  try {
    enumerate_configs(req);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), StartsWith("--tp-comm-overlap: needs --sequence-parallel"));
  }
  req.space.cp = {0};
  req.space.sequence_parallel = true;
  EXPECT_THROW(enumerate_configs(req), InputError);
}

// The plan carries overlap_grad_reduce: built from a request without the flag, it still
// simulates to the explored step time, which differs from the one without overlap.
TEST(ExplorerCp, OverlapGradReduceIsPartOfTheConfigurationAndThePlan) {
  ExploreRequest req = small_request();
  req.overlap_grad_reduce = true;
  const ExploreResult res = explore(req);
  ASSERT_FALSE(res.ranking.empty());
  int faster = 0;
  for (int64_t id : res.ranking) {
    const ConfigRecord& r = res.records[id];
    ASSERT_TRUE(r.config.overlap_grad_reduce);
    const ConfigRecord& plain = small_result().records[id];
    ASSERT_EQ(plain.config.pp, r.config.pp);
    if (plain.simulated()) {
      EXPECT_LE(r.step_time_s, plain.step_time_s) << describe_config(r.config);
      faster += r.step_time_s < plain.step_time_s;
    }
  }
  EXPECT_GT(faster, 0);
  const ConfigRecord& best = res.records[res.ranking.front()];
  const Plan plan = build_config_plan(small_request(), best.config);  // no request flag
  EXPECT_TRUE(plan.config.overlap_grad_reduce);
  EXPECT_EQ(plan.predicted.at("step_time_s").get<double>(), best.step_time_s);
}

}  // namespace
}  // namespace jaxpp
