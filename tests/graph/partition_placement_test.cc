#include <algorithm>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "graph/error.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

double max_stage_cost(const std::vector<double>& costs, const Partition& p) {
  double worst = 0;
  for (int s = 0; s < p.num_stages(); ++s) {
    double sum = 0;
    for (int i = p.begin(s); i < p.end(s); ++i) sum += costs[i];
    worst = std::max(worst, sum);
  }
  return worst;
}

// Tries every placement of the k-1 boundaries.
double brute_force_min_max(const std::vector<double>& costs, int k) {
  const int n = static_cast<int>(costs.size());
  double best = 1e300;
  std::function<void(int, int, double, double)> go = [&](int start, int left, double worst,
                                                         double) {
    if (left == 1) {
      double sum = 0;
      for (int i = start; i < n; ++i) sum += costs[i];
      best = std::min(best, std::max(worst, sum));
      return;
    }
    double sum = 0;
    for (int end = start + 1; end <= n - (left - 1); ++end) {
      sum += costs[end - 1];
      go(end, left - 1, std::max(worst, sum), 0);
    }
  };
  go(0, k, 0, 0);
  return best;
}

TEST(PartitionTest, AutoPartitionMatchesBruteForceOnRandomInputs) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 10)(rng);
    const int k = std::uniform_int_distribution<int>(1, std::min(n, 5))(rng);
    std::vector<double> costs(n);
    for (double& c : costs) c = std::uniform_int_distribution<int>(0, 20)(rng);
    const Partition p = auto_partition(costs, k);
    ASSERT_EQ(p.num_stages(), k);
    ASSERT_EQ(p.num_layers, n);
    for (int s = 0; s < k; ++s) ASSERT_GE(p.size(s), 1);
    EXPECT_EQ(max_stage_cost(costs, p), brute_force_min_max(costs, k)) << "trial " << trial;
  }
}

// The O(k·n²) dynamic programme auto_partition used before the bisection: the exact optimum and,
// among optimal partitions, the lexicographically smallest boundaries.
std::vector<int> reference_partition(const std::vector<double>& costs, int k) {
  const int n = static_cast<int>(costs.size());
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  const auto seg = [&](int i, int j) { return prefix[j] - prefix[i]; };
  const double inf = 1e308;
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, inf));
  best[0][n] = 0;
  for (int p = 1; p <= k; ++p)
    for (int i = n - p; i >= 0; --i)
      for (int j = i + 1; j <= n - (p - 1); ++j)
        best[p][i] = std::min(best[p][i], std::max(seg(i, j), best[p - 1][j]));
  std::vector<int> starts = {0};
  for (int p = k, i = 0; p > 1; --p) {
    int j = i + 1;
    while (!(seg(i, j) <= best[k][0] && best[p - 1][j] <= best[k][0])) ++j;
    starts.push_back(j);
    i = j;
  }
  return starts;
}

TEST(PartitionTest, AutoPartitionGivesTheSameBoundariesAsTheDynamicProgramme) {
  std::mt19937 rng(777);
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 60)(rng);
    const int k = std::uniform_int_distribution<int>(1, n)(rng);
    std::vector<double> costs(n);
    const int kind = trial % 3;  // integers with ties, zeros included; reals; a few heavy layers
    for (double& c : costs) {
      if (kind == 0) c = std::uniform_int_distribution<int>(0, 5)(rng);
      if (kind == 1) c = std::uniform_real_distribution<double>(0, 1e12)(rng);
      if (kind == 2) c = std::uniform_int_distribution<int>(0, 9)(rng) == 0 ? 1e15 : 3e9;
    }
    ASSERT_EQ(auto_partition(costs, k).stage_begin, reference_partition(costs, k))
        << "trial " << trial << ", n " << n << ", k " << k;
  }
}

TEST(PartitionTest, AutoPartitionOfManyLayersOnManyStagesIsBalanced) {
  // Far beyond what the dynamic programme could do in a test (20k layers on 4096 stages).
  const int n = 20000, k = 4096;
  std::vector<double> costs(n, 1.0);
  costs[0] = 5;  // an embedding-like heavy first layer
  const Partition p = auto_partition(costs, k);
  ASSERT_EQ(p.num_stages(), k);
  EXPECT_EQ(max_stage_cost(costs, p), 5.0);  // ceil(20004 / 4096) = 5: the heavy layer alone
  for (int s = 0; s < k; ++s) ASSERT_GE(p.size(s), 1);
}

TEST(PartitionTest, AutoPartitionIsDeterministicAndPrefersEarlierBoundaries) {
  const std::vector<double> costs(10, 1.0);
  const Partition p = auto_partition(costs, 3);
  EXPECT_EQ(p, auto_partition(costs, 3));
  EXPECT_EQ(max_stage_cost(costs, p), 4.0);
  EXPECT_EQ(p.stage_begin, (std::vector<int>{0, 2, 6}));
}

TEST(PartitionTest, AutoPartitionRejectsMoreStagesThanLayers) {
  const std::string msg = error_of([] { auto_partition(std::vector<double>(3, 1.0), 4); });
  EXPECT_NE(msg.find("4 stages"), std::string::npos) << msg;
  EXPECT_THROW(auto_partition(std::vector<double>(3, 1.0), 0), InputError);
}

TEST(PartitionTest, FromStartsNamesTheOffendingEntry) {
  EXPECT_EQ(partition_from_starts({0, 3, 5}, 8).size(2), 3);
  EXPECT_NE(error_of([] { partition_from_starts({1, 3}, 8); }).find("entry 0"), std::string::npos);
  EXPECT_NE(error_of([] {
              partition_from_starts({0, 5, 3}, 8);
            }).find("entry 2"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              partition_from_starts({0, 3, 8}, 8);
            }).find("entry 2"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              partition_from_starts({0, 3, 3}, 8);
            }).find("strictly increasing"),
            std::string::npos);
}

TEST(PartitionTest, ModelPartitionBalancesTransformerLayers) {
  const ModelSpec m = load_model("megatron-7.5b");  // 36 transformer layers + embedding + logits
  const Partition p = auto_partition(m, {.num_stages = 4});
  ASSERT_EQ(p.num_stages(), 4);
  // The embedding has no FLOPs, so stage 0 takes 9 transformer layers + the embedding; the
  // logits layer costs less than one transformer layer and sits with 9 layers on the last stage.
  EXPECT_EQ(p.size(0), 10);
  EXPECT_EQ(p.size(3), 10);
}

TEST(PartitionTest, Llama405bStyleFirstAndLastStageGetOneLayerFewer) {
  const ModelSpec m = load_model("llama3-405b");
  const Partition p =
      auto_partition(m, {.num_stages = 16, .first_stage_fewer = 1, .last_stage_fewer = 1});
  ASSERT_EQ(p.num_stages(), 16);
  EXPECT_EQ(p.size(0), 1 + 7);   // embedding + 7 layers
  EXPECT_EQ(p.size(15), 7 + 1);  // 7 layers + logits
  for (int s = 1; s < 15; ++s) EXPECT_EQ(p.size(s), 8) << s;
}

TEST(PartitionTest, FewerLayersOnTwoStagesAndImpossibleRequests) {
  const ModelSpec m = load_model("gpt3-1.3b");  // 24 transformer layers
  const Partition p = auto_partition(m, {.num_stages = 2, .first_stage_fewer = 2});
  EXPECT_EQ(p.size(0), 1 + 11);  // embedding + 11 layers
  EXPECT_EQ(p.size(1), 13 + 1);  // 13 layers + logits
  EXPECT_NE(error_of([&] {
              auto_partition(m, {.num_stages = 4, .first_stage_fewer = 7});
            }).find("stage 0 would get"),
            std::string::npos);
  EXPECT_THROW(auto_partition(m, {.num_stages = 1, .last_stage_fewer = 1}), InputError);
}

TEST(PartitionTest, JsonRoundTripAndValidation) {
  const Partition p = partition_from_starts({0, 4, 9}, 12);
  EXPECT_EQ(partition_from_json(partition_to_json(p), "p"), p);
  const auto bad = nlohmann::json::parse(R"({"stage_begin":[0,4,4],"num_layers":12})");
  EXPECT_NE(error_of([&] { partition_from_json(bad, "plan.json"); }).find("plan.json"),
            std::string::npos);
}

TEST(PlacementTest, LinearLoopAndVShapes) {
  EXPECT_EQ(make_placement(PlacementKind::kLinear, 4, 4).stage_to_actor,
            (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(make_placement(PlacementKind::kLoop, 6, 3).stage_to_actor,
            (std::vector<int>{0, 1, 2, 0, 1, 2}));
  const Placement v = make_placement(PlacementKind::kV, 6, 3);
  EXPECT_EQ(v.stage_to_actor, (std::vector<int>{0, 1, 2, 2, 1, 0}));
  EXPECT_EQ(v.stages_of(0), (std::vector<int>{0, 5}));
  EXPECT_EQ(v.stages_of(2), (std::vector<int>{2, 3}));
}

TEST(PlacementTest, ImpossibleShapesAreRejected) {
  EXPECT_NE(error_of([] { make_placement(PlacementKind::kLinear, 4, 2); }).find("4 stages on 2"),
            std::string::npos);
  EXPECT_THROW(make_placement(PlacementKind::kLoop, 5, 2), InputError);
  EXPECT_THROW(make_placement(PlacementKind::kV, 6, 2), InputError);
  EXPECT_THROW(make_placement(PlacementKind::kLinear, 2, 0), InputError);
}

TEST(PlacementTest, ExplicitPlacementChecksRangeAndCoverage) {
  EXPECT_EQ(explicit_placement({1, 0, 1}, 2).stages_of(1), (std::vector<int>{0, 2}));
  EXPECT_NE(error_of([] { explicit_placement({0, 2}, 2); }).find("entry 1"), std::string::npos);
  EXPECT_NE(error_of([] {
              explicit_placement({0, 0}, 2);
            }).find("actor 1 owns no stage"),
            std::string::npos);
}

TEST(PlacementTest, JsonRoundTripAndKindParsing) {
  for (const Placement& p :
       {make_placement(PlacementKind::kV, 4, 2), explicit_placement({1, 0}, 2)})
    EXPECT_EQ(placement_from_json(placement_to_json(p), "x"), p);
  const auto lie =
      nlohmann::json::parse(R"({"kind":"loop","num_actors":2,"stage_to_actor":[0,1,1,0]})");
  EXPECT_THROW(placement_from_json(lie, "x"), InputError);
  EXPECT_EQ(parse_placement_kind("V", "x"), PlacementKind::kV);
  EXPECT_THROW(parse_placement_kind("zigzag", "x"), InputError);
}

}  // namespace
}  // namespace jaxpp
