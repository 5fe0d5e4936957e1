// Cost-aware partition search (simulator/partition_search.h, --partition balanced-time): valid
// partitions of layer counts not divisible by the stages, never slower than the FLOPs-balanced or
// the even partition, the memory limit respected (and named with the minimum when impossible),
// exact peak memory and the explorer (the Megatron-LM hand-off: tests/handoff).
#include "simulator/partition_search.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "costmodel/cluster.h"
#include "graph/model.h"
#include "simulator/explorer.h"
#include "simulator/plan_builder.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

PlanRequest partition_request(const std::string& model, int pp, int v, const std::string& schedule,
                              int global_batch, PartitionMode mode) {
  PlanRequest req;
  req.model = load_model(model);
  req.cluster = load_cluster("a100-80g");
  req.config.gpus = pp;
  req.config.pp = pp;
  req.config.virtual_stages = v;
  req.config.global_batch = global_batch;
  req.config.microbatch_size = 1;
  req.config.schedule = schedule;
  req.partition = mode;
  return req;
}

double step_of(const PlanRequest& req) {
  PlanSimOptions so;
  so.record_trace = false;
  so.check_memory = false;
  return simulate_plan(build_plan(req), so).result.step_time_s;
}

std::vector<int64_t> simulated_peaks(const Plan& plan) {
  PlanSimOptions so;
  so.record_trace = false;
  so.check_memory = false;
  std::vector<int64_t> peaks;
  for (const ActorStats& a : simulate_plan(plan, so).result.actors)
    peaks.push_back(a.peak_memory_bytes);
  return peaks;
}

bool valid_partition(const Partition& p, int stages, int layers) {
  if (p.num_stages() != stages || p.num_layers != layers || p.stage_begin.front() != 0)
    return false;
  for (int s = 0; s < stages; ++s)
    if (p.size(s) < 1) return false;
  return true;
}

TEST(PartitionSearch, LayerCountNotDivisibleByPpGetsAValidPartition) {
  // GPT-3 13B: 40 transformer layers + embedding + logits = 42 layers over 8 stages (pp 4, v 2).
  PlanRequest req =
      partition_request("gpt3-13b", 4, 2, "interleaved", 16, PartitionMode::kBalancedTime);
  const Plan plan = build_plan(req);
  EXPECT_TRUE(valid_partition(plan.partition, 8, 42)) << partition_to_json(plan.partition);
  // And 40 transformer layers over pp 6 (not a divisor).
  PlanRequest six = partition_request("gpt3-13b", 6, 1, "1f1b", 12, PartitionMode::kBalancedTime);
  six.cluster = load_cluster("h100-sxm");
  const Plan plan6 = build_plan(six);
  EXPECT_TRUE(valid_partition(plan6.partition, 6, 42)) << partition_to_json(plan6.partition);
}

TEST(PartitionSearch, NeverSlowerThanEvenOrFlopsBalancedOverAGrid) {
  struct Case {
    std::string model;
    int pp, v;
    std::string schedule;
  };
  const std::vector<Case> grid = {
      {"gpt3-1.3b", 4, 1, "1f1b"},        {"gpt3-1.3b", 4, 1, "zb-h1"},
      {"gpt3-1.3b", 4, 2, "interleaved"}, {"llama3-8b", 4, 1, "1f1b"},
      {"llama3-8b", 4, 2, "dualpipev"},   {"llama3-8b", 4, 2, "interleaved"},
      {"gpt3-1.3b", 2, 1, "gpipe"},       {"llama3-8b", 8, 1, "zb-h1"}};
  int strictly_better_than_flops = 0;
  for (const Case& c : grid) {
    SCOPED_TRACE(c.model + " pp " + std::to_string(c.pp) + " v " + std::to_string(c.v) + " " +
                 c.schedule);
    const int batch = 4 * c.pp * c.v;
    const double flops =
        step_of(partition_request(c.model, c.pp, c.v, c.schedule, batch, PartitionMode::kAuto));
    const double even =
        step_of(partition_request(c.model, c.pp, c.v, c.schedule, batch, PartitionMode::kEven));
    const double balanced = step_of(
        partition_request(c.model, c.pp, c.v, c.schedule, batch, PartitionMode::kBalancedTime));
    EXPECT_LE(balanced, flops);
    EXPECT_LE(balanced, even);
    if (balanced < flops * (1 - 1e-6)) ++strictly_better_than_flops;
  }
  // The LM head of a 128k vocabulary is far from its FLOPs share in time: the search gains.
  EXPECT_GE(strictly_better_than_flops, 3);
}

TEST(PartitionSearch, SearchResultIsTheSimulatedStepTimeOfItsPartition) {
  const PlanRequest req =
      partition_request("llama3-8b", 4, 1, "1f1b", 16, PartitionMode::kBalancedTime);
  const Plan plan = build_plan(req);
  const Schedule schedule = make_schedule("1f1b", "", 4, 0, 16, false);
  const PartitionSearchResult r =
      search_partition(req.model, req.cluster, plan.config, schedule, {});
  EXPECT_EQ(r.partition, plan.partition);
  EXPECT_DOUBLE_EQ(r.step_time_s, step_of(partition_request("llama3-8b", 4, 1, "1f1b", 16,
                                                            PartitionMode::kBalancedTime)));
  EXPECT_LE(r.step_time_s, r.start_step_time_s);
  EXPECT_LE(r.evaluations, 4 * 4 + 16);
  EXPECT_GE(r.evaluations, 1);
}

TEST(PartitionSearch, LocalSearchImprovesOnTheBottleneckOptimalStart) {
  // GPT-3 6.7B, pp 4, 1F1B: the min-max on layer weights is not the partition of least simulated
  // step time (the step is a critical path through the pipeline, not the busiest actor alone);
  // moving a boundary helps.
  const PlanRequest req = partition_request("gpt3-6.7b", 4, 1, "1f1b", 16, PartitionMode::kAuto);
  const Plan plan = build_plan(req);
  const Schedule schedule = make_schedule("1f1b", "", 4, 0, 16, false);
  const PartitionSearchResult r =
      search_partition(req.model, req.cluster, plan.config, schedule, {});
  EXPECT_EQ(r.start, "time");
  EXPECT_GE(r.improvements, 1);
  EXPECT_LT(r.step_time_s, r.start_step_time_s);
  // With no room for the local search (the starting candidates use up the budget), the result is
  // the start.
  const PartitionSearchResult start_only =
      search_partition(req.model, req.cluster, plan.config, schedule, {.max_evaluations = 1});
  EXPECT_EQ(start_only.improvements, 0);
  EXPECT_DOUBLE_EQ(start_only.step_time_s, r.start_step_time_s);
}

struct SearchSetup {
  PlanRequest req;
  Plan plan;
  Schedule schedule;
};

SearchSetup llama_pp4_1f1b(int global_batch) {
  PlanRequest req =
      partition_request("llama3-8b", 4, 1, "1f1b", global_batch, PartitionMode::kAuto);
  Plan plan = build_plan(req);
  return {req, plan, make_schedule("1f1b", "", 4, 0, global_batch, false)};
}

PartitionSearchResult search(const SearchSetup& s, const PartitionSearchOptions& o) {
  return search_partition(s.req.model, s.req.cluster, s.plan.config, s.schedule, o);
}

TEST(PartitionSearch, LongMovesLeaveAPlateauOfOneLayerMoves) {
  // Llama 3 8B, pp 4, 1F1B, started from 0,3,14,25 (where the one-layer search from 0,4,14,24
  // stops): no one-layer move lowers the step time (the one-layer search stops at its start, well
  // within its budget), while moving several layers at once (boundaries by 2 or more, to the
  // balance of two stages, a block shifted) does.
  const SearchSetup s = llama_pp4_1f1b(16);
  const Partition start = partition_from_starts({0, 3, 14, 25}, 34);
  const PartitionSearchResult one = search(s, {.start = start, .one_layer_moves = true});
  EXPECT_EQ(one.start, "given");
  EXPECT_EQ(one.improvements, 0);
  EXPECT_EQ(one.partition, start);
  EXPECT_LT(one.evaluations, 4 * 4 + 16) << "it stopped, not its budget";
  const PartitionSearchResult longer = search(s, {.start = start});
  EXPECT_GE(longer.long_moves, 1);
  EXPECT_LT(longer.step_time_s, one.step_time_s * (1 - 1e-3));
  EXPECT_DOUBLE_EQ(longer.step_time_s,
                   partition_step_time_s(s.req.model, s.req.cluster, s.plan.config, s.schedule,
                                         longer.partition));
  // From the usual starting candidates too: the one-layer search converges at 0,9,18,27 within
  // its budget; a long move finds a faster partition.
  const PartitionSearchResult plain_one = search(s, {.one_layer_moves = true});
  EXPECT_LT(plain_one.evaluations, 4 * 4 + 16);
  const PartitionSearchResult plain = search(s, {});
  EXPECT_GE(plain.long_moves, 1);
  EXPECT_LT(plain.step_time_s, plain_one.step_time_s);
}

TEST(PartitionSearch, LongMoveSearchIsDeterministic) {
  const SearchSetup s = llama_pp4_1f1b(16);
  const Partition start = partition_from_starts({0, 4, 14, 24}, 34);
  for (const PartitionSearchOptions& o :
       {PartitionSearchOptions{}, PartitionSearchOptions{.start = start}}) {
    const PartitionSearchResult a = search(s, o);
    const PartitionSearchResult b = search(s, o);
    EXPECT_EQ(a.partition, b.partition);
    EXPECT_EQ(a.step_time_s, b.step_time_s);
    EXPECT_EQ(a.evaluations, b.evaluations);
    EXPECT_EQ(a.improvements, b.improvements);
    EXPECT_EQ(a.long_moves, b.long_moves);
    EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes);
  }
}

TEST(PartitionSearch, EvaluationBudgetIsRespectedAndMoreBudgetIsNeverSlower) {
  // A larger budget continues the same search, which only keeps improvements.
  const SearchSetup s = llama_pp4_1f1b(16);
  const Partition start = partition_from_starts({0, 4, 14, 24}, 34);
  double previous = std::numeric_limits<double>::infinity();
  int previous_evaluations = 0;
  for (int budget : {1, 2, 5, 9, 17, 32, 64, 200}) {
    SCOPED_TRACE(budget);
    const PartitionSearchResult r = search(s, {.max_evaluations = budget, .start = start});
    EXPECT_LE(r.evaluations, budget);
    EXPECT_GE(r.evaluations, previous_evaluations);
    EXPECT_LE(r.step_time_s, previous);
    previous = r.step_time_s;
    previous_evaluations = r.evaluations;
  }
  // The default budget is 4·S + 16 simulations, the starting candidates included.
  const PlanRequest eight =
      partition_request("gpt3-6.7b", 8, 1, "1f1b", 16, PartitionMode::kAuto);
  const SearchSetup e{eight, build_plan(eight), make_schedule("1f1b", "", 8, 0, 16, false)};
  const PartitionSearchResult r = search(e, {});
  EXPECT_LE(r.evaluations, 4 * 8 + 16);
  EXPECT_LE(r.step_time_s, search(e, {.one_layer_moves = true}).step_time_s);
}

TEST(PartitionSearch, LongMovesAreNeverSlowerThanOneLayerMoves) {
  struct Case {
    std::string model;
    int pp, v;
    std::string schedule;
    int batch;
  };
  for (const Case& c : std::vector<Case>{{"llama3-8b", 4, 1, "1f1b", 32},
                                         {"llama3-8b", 8, 1, "1f1b", 16},
                                         {"gpt3-6.7b", 4, 1, "1f1b", 16},
                                         {"llama3-8b", 4, 2, "interleaved", 16},
                                         {"gpt3-1.3b", 4, 1, "zb-h1", 16}}) {
    SCOPED_TRACE(c.model + " pp " + std::to_string(c.pp) + " " + c.schedule);
    const PlanRequest req =
        partition_request(c.model, c.pp, c.v, c.schedule, c.batch, PartitionMode::kAuto);
    const SearchSetup s{req, build_plan(req),
                        make_schedule(c.schedule, "", c.pp, c.v > 1 ? c.pp * c.v : 0, c.batch,
                                      false)};
    const PartitionSearchResult one = search(s, {.one_layer_moves = true});
    const PartitionSearchResult longer = search(s, {});
    EXPECT_LE(longer.step_time_s, one.step_time_s);
    EXPECT_EQ(longer.start, one.start);
    EXPECT_DOUBLE_EQ(longer.start_step_time_s, one.start_step_time_s);
  }
}

TEST(PartitionSearch, GivenStartIsCheckedAndNamed) {
  const SearchSetup s = llama_pp4_1f1b(16);
  EXPECT_THAT(error_of([&] { search(s, {.start = partition_from_starts({0, 10, 20}, 34)}); }),
              HasSubstr("--partition balanced-time: the given start 0,10,20 is not 4 non-empty "
                        "stages over 34 layers"));
  EXPECT_THAT(
      error_of([&] { search(s, {.start = partition_from_starts({0, 10, 20, 30}, 33)}); }),
      HasSubstr("is not 4 non-empty stages over 34 layers"));
  // 20 layers on the first actor, which stashes 4 microbatches, do not fit in 80 GiB.
  EXPECT_THAT(
      error_of([&] { search(s, {.start = partition_from_starts({0, 20, 25, 30}, 34)}); }),
      HasSubstr("--partition balanced-time: the given start 0,20,25,30 does not fit in 80.00 GiB "
                "per device"));
}

// The search's memory is the memory model's (costmodel/memory.h stage_static_bytes): the same
// bytes for 16-bit and FP8 weights (with and without fp8_params), and with the weights sharded.
TEST(PartitionSearch, PeakMemoryIsTheSimulatorsPeak) {
  struct Case {
    std::string schedule;
    int v;
    bool zero1;
    bool fp8 = false;
    bool fp8_params = true;
    bool shard_params = false;
  };
  for (const Case& c : std::vector<Case>{{"1f1b", 1, false},
                                         {"interleaved", 2, true},
                                         {"zb-h1", 1, true},
                                         {"dualpipev", 2, false},
                                         {"1f1b", 1, true, true, false},
                                         {"interleaved", 2, true, true, true},
                                         {"1f1b", 1, true, false, true, true},
                                         {"interleaved", 2, true, true, true, true}}) {
    SCOPED_TRACE(c.schedule + (c.fp8 ? " fp8" : "") + (c.fp8_params ? "" : " 16-bit weights") +
                 (c.shard_params ? " shard-params" : ""));
    PlanRequest req = partition_request("llama3-8b", 4, c.v, c.schedule, 32, PartitionMode::kAuto);
    req.config.gpus = 8;
    req.config.dp = 2;
    req.config.zero1 = c.zero1;
    req.config.shard_parameters = c.shard_params;
    req.config.shard_gradients = c.shard_params;
    if (c.fp8) {
      req.cluster = load_cluster("h100-sxm");
      req.model.dtype = Dtype::kFp8;
      req.model.fp8_params = c.fp8_params;
    }
    const Plan plan = build_plan(req);
    const Schedule s = make_schedule(c.schedule, "", 4, c.v > 1 ? 4 * c.v : 0, 16, false);
    EXPECT_EQ(partition_peak_memory(req.model, req.cluster, plan.config, s, plan.partition),
              simulated_peaks(plan));
  }
}

// GPT-3 2.7B, pp 4, 1F1B, microbatches of 4 sequences: the first actor stashes 4 microbatches,
// the last 1, so the first actor's memory is the largest.
PlanRequest memory_bound_request() {
  PlanRequest req = partition_request("gpt3-2.7b", 4, 1, "1f1b", 64, PartitionMode::kBalancedTime);
  req.config.microbatch_size = 4;
  return req;
}

TEST(PartitionSearch, TightMemoryLimitMovesLayersOffTheFirstStage) {
  PlanRequest req = memory_bound_request();
  const Plan free = build_plan(req);
  const std::vector<int64_t> free_peaks = simulated_peaks(free);
  ASSERT_EQ(std::max_element(free_peaks.begin(), free_peaks.end()) - free_peaks.begin(), 0)
      << "the first actor holds the most";
  // A limit between the second-largest peak and the first actor's.
  const int64_t second = *std::max_element(free_peaks.begin() + 1, free_peaks.end());
  req.max_memory_bytes = second + (free_peaks[0] - second) / 3;
  const Plan tight = build_plan(req);
  EXPECT_LT(tight.partition.size(0), free.partition.size(0));
  const std::vector<int64_t> peaks = simulated_peaks(tight);
  EXPECT_LE(*std::max_element(peaks.begin(), peaks.end()), req.max_memory_bytes);
  // With the limit as the fit check, simulate_plan accepts it; the free partition does not fit.
  PlanSimOptions so;
  so.record_trace = false;
  so.max_memory_bytes = req.max_memory_bytes;
  EXPECT_NO_THROW(simulate_plan(tight, so));
  EXPECT_THAT(error_of([&] { simulate_plan(free, so); }), HasSubstr("does not fit"));
}

TEST(PartitionSearch, TightMemoryLimitWithVirtualStagesIsRespected) {
  PlanRequest req =
      partition_request("gpt3-2.7b", 4, 2, "interleaved", 64, PartitionMode::kBalancedTime);
  req.config.microbatch_size = 4;
  const Plan free = build_plan(req);
  const std::vector<int64_t> free_peaks = simulated_peaks(free);
  const int64_t worst = *std::max_element(free_peaks.begin(), free_peaks.end());
  req.max_memory_bytes = worst - worst / 50;
  const Plan tight = build_plan(req);
  EXPECT_NE(tight.partition, free.partition);
  const std::vector<int64_t> peaks = simulated_peaks(tight);
  EXPECT_LE(*std::max_element(peaks.begin(), peaks.end()), req.max_memory_bytes);
}

TEST(PartitionSearch, ImpossibleLimitNamesTheMinimum) {
  PlanRequest req = memory_bound_request();
  req.max_memory_bytes = int64_t{1} << 30;  // 1 GiB: not even the weights
  const std::string e = error_of([&] { build_plan(req); });
  EXPECT_THAT(e, MatchesRegex("--partition balanced-time: no partition fits in 1\\.00 GiB per "
                              "device; the least peak memory of any partition is [0-9.]+ GiB on "
                              "actor [0-9]+ \\(stage starts 0(,[0-9]+){3}\\)"));
  // The minimum is the minimum: a limit at it fits, just below it does not.
  const double least_gib = std::stod(e.substr(e.find("partition is ") + 13));
  req.max_memory_bytes = static_cast<int64_t>((least_gib + 0.01) * (1 << 30));
  EXPECT_NO_THROW(build_plan(req));
  req.max_memory_bytes = static_cast<int64_t>((least_gib - 0.01) * (1 << 30));
  EXPECT_THAT(error_of([&] { build_plan(req); }), HasSubstr("no partition fits"));
}

TEST(PartitionSearch, ImpossibleLimitWithVirtualStagesNamesTheSearchMinimum) {
  PlanRequest req =
      partition_request("llama3-8b", 4, 2, "interleaved", 32, PartitionMode::kBalancedTime);
  req.max_memory_bytes = int64_t{1} << 30;
  EXPECT_THAT(error_of([&] { build_plan(req); }),
              HasSubstr("no partition fits in 1.00 GiB per device; the least peak memory the "
                        "search found is "));
}

TEST(PartitionSearch, FlagParsesBalancedTimeAndNamesItInErrors) {
  PlanRequest req;
  parse_partition_flag("balanced-time", req);
  EXPECT_EQ(req.partition, PartitionMode::kBalancedTime);
  EXPECT_THAT(error_of([&] { parse_partition_flag("balanced", req); }),
              HasSubstr("expected auto, even, balanced-time or"));
}

TEST(PartitionSearch, ExplorePicksTheBalancedPartition) {
  ExploreRequest req;
  req.model = load_model("llama3-8b");
  req.cluster = load_cluster("a100-80g");
  req.gpus = 4;
  req.global_batch = 16;
  req.space.pp = {4};
  req.space.tp = {1};
  req.space.microbatch_sizes = {1};
  req.space.schedules = {"1f1b"};
  req.space.recompute = {Recompute::kNone};
  req.space.zero1 = {false};
  req.threads = 1;
  const ExploreResult flops = explore(req);
  req.partition = PartitionMode::kBalancedTime;
  const ExploreResult balanced = explore(req);
  ASSERT_EQ(balanced.ranking.size(), 1u);
  const ConfigRecord& best = balanced.records[balanced.ranking.front()];
  EXPECT_LT(best.step_time_s, flops.records[flops.ranking.front()].step_time_s);
  const Plan plan = build_config_plan(req, best.config);
  PlanRequest direct =
      partition_request("llama3-8b", 4, 1, "1f1b", 16, PartitionMode::kBalancedTime);
  EXPECT_EQ(plan.partition, build_plan(direct).partition);
  EXPECT_DOUBLE_EQ(plan.predicted["step_time_s"].get<double>(), best.step_time_s);
  EXPECT_EQ(explore_result_to_json(req, balanced, 1, false)["options"]["partition"],
            "balanced-time");
}

TEST(PartitionSearch, ExploreRefusesExplicitPartitionsAndBoundPruning) {
  ExploreRequest req;
  req.model = load_model("gpt3-1.3b");
  req.cluster = load_cluster("a100-80g");
  req.gpus = 4;
  req.global_batch = 8;
  req.partition = PartitionMode::kExplicit;
  EXPECT_THAT(error_of([&] { explore(req); }), HasSubstr("--partition: explore takes"));
  req.partition = PartitionMode::kBalancedTime;
  req.bound_prune = true;
  EXPECT_THAT(error_of([&] { explore(req); }), HasSubstr("--bound-prune"));
}

}  // namespace
}  // namespace jaxpp
