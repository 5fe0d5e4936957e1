// Plans on heterogeneous clusters (simulator/hetero_plan.h): the placement rule of the meshes,
// the per-kind balanced-time search against its own candidates and its memory limits, and the
// plan.json round trip of the meshes.
#include "simulator/hetero_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/plan.h"
#include "schedules/registry.h"

namespace jaxpp {
namespace {

HeteroCluster mixed_h100_a100() {
  return hetero_cluster_from_json(
      nlohmann::json::parse(R"({"name": "mixed", "kinds": [{"preset": "h100-sxm", "gpus": 8},
                                                          {"preset": "a100-80g", "gpus": 8}]})"),
      "mixed.json");
}

ParallelConfig hetero_config(int tp, int dp, int global_batch) {
  ParallelConfig c;
  c.tp = tp;
  c.dp = dp;
  c.pp = 0;
  c.gpus = 0;
  c.global_batch = global_batch;
  c.schedule = "1f1b";
  return c;
}

TEST(HeteroPlanTest, MeshesFollowTheKindsInFileOrder) {
  const HeteroCluster cluster = mixed_h100_a100();
  const std::vector<ActorMesh> m = resolve_meshes(cluster, hetero_config(1, 2, 64), {4, 2}, {});
  // H100: 8 / (4·2) = 1 actor; A100: 8 / (2·2) = 2 actors.
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0], (ActorMesh{"h100-sxm", 4}));
  EXPECT_EQ(m[1], (ActorMesh{"a100-80g", 2}));
  EXPECT_EQ(m[2], (ActorMesh{"a100-80g", 2}));
  const std::vector<ActorMesh> explicit_kinds = resolve_meshes(
      cluster, hetero_config(4, 1, 64), {}, {"a100-80g", "h100-sxm", "a100-80g", "h100-sxm"});
  EXPECT_EQ(explicit_kinds[0].kind, "a100-80g");
  EXPECT_EQ(explicit_kinds[3].kind, "h100-sxm");
  EXPECT_THROW(resolve_meshes(cluster, hetero_config(4, 1, 64), {}, {"a100-80g", "h100-sxm"}),
               InputError);  // 4 of the 8 GPUs of each kind
}

TEST(HeteroPlanTest, BalancedTimeGivesTheSlowerKindFewerLayersAndBeatsItsCandidates) {
  const HeteroCluster cluster = mixed_h100_a100();
  const ModelSpec model = load_model("megatron-39.1b");
  PlanRequest req;
  req.model = model;
  req.config = hetero_config(4, 1, 64);
  const std::vector<ActorMesh> meshes = resolve_meshes(cluster, req.config, {}, {});
  req.partition = PartitionMode::kBalancedTime;
  const Plan plan = build_hetero_plan(req, cluster, meshes);
  ASSERT_EQ(plan.partition.num_stages(), 4);
  EXPECT_LT(std::max(plan.partition.size(2), plan.partition.size(3)),
            std::min(plan.partition.size(0), plan.partition.size(1)));
  const Schedule schedule = generate_schedule("1f1b", {.num_actors = 4, .num_microbatches = 64});
  const double best =
      hetero_step_time_s(model, cluster, plan.config, schedule, meshes, plan.partition);
  // Never slower than a candidate that fits: even and FLOPs-balanced.
  for (const Partition& p : {even_partition(model, 4), auto_partition(model, {.num_stages = 4})}) {
    const std::vector<int64_t> peak =
        hetero_peak_memory(model, cluster, plan.config, schedule, meshes, p);
    if (*std::max_element(peak.begin(), peak.end()) > (int64_t{80} << 30)) continue;
    EXPECT_LT(best, hetero_step_time_s(model, cluster, plan.config, schedule, meshes, p));
  }
  // Every actor within its own kind's HBM.
  for (int64_t b :
       hetero_peak_memory(model, cluster, plan.config, schedule, meshes, plan.partition))
    EXPECT_LE(b, int64_t{80} << 30);
  // The simulated plan reports the meshes with their layer counts.
  const SimulatedPlan sim = simulate_plan(plan, {.record_trace = false});
  EXPECT_DOUBLE_EQ(sim.result.step_time_s, best);
  ASSERT_EQ(sim.metrics.at("meshes").size(), 4u);
  EXPECT_EQ(sim.metrics.at("meshes")[2].at("layers"), plan.partition.size(2));
}

TEST(HeteroPlanTest, ALimitNoSplitMeetsNamesTheActorAndItsKind) {
  const HeteroCluster cluster = mixed_h100_a100();
  PlanRequest req;
  req.model = load_model("llama3-70b");
  req.config = hetero_config(4, 1, 32);
  req.partition = PartitionMode::kBalancedTime;
  try {
    build_hetero_plan(req, cluster, resolve_meshes(cluster, req.config, {}, {}));
    FAIL() << "Llama 3 70B fitted on 16 GPUs without ZeRO or recompute";
  } catch (const PartitionDoesNotFit& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no partition fits the memory of each actor's device"), std::string::npos)
        << what;
    EXPECT_NE(what.find("on actor " + std::to_string(e.actor)), std::string::npos) << what;
    EXPECT_GT(e.least_peak_bytes, int64_t{80} << 30);
  }
}

TEST(HeteroPlanTest, PlanJsonRoundTripsTheMeshes) {
  const HeteroCluster cluster = mixed_h100_a100();
  PlanRequest req;
  req.model = load_model("gpt3-1.3b");
  req.config = hetero_config(1, 1, 16);
  const std::vector<ActorMesh> meshes = resolve_meshes(cluster, req.config, {4, 2}, {});
  const Plan plan = build_hetero_plan(req, cluster, meshes);
  ASSERT_EQ(plan.meshes, meshes);
  const nlohmann::json j = plan_to_json(plan);
  const Plan back = plan_from_json(j, "plan.json");
  EXPECT_EQ(back.meshes, meshes);
  EXPECT_EQ(plan_to_json(back), j);
  nlohmann::json bad = j;
  bad["meshes"][1]["tp"] = 0;
  EXPECT_THROW(plan_from_json(bad, "plan.json"), InputError);
  bad = j;
  bad["meshes"][1]["mesh"] = 1;
  EXPECT_THROW(plan_from_json(bad, "plan.json"), InputError);
  // A plan without meshes writes none (files of homogeneous plans are unchanged).
  Plan plain = back;
  plain.meshes.clear();
  EXPECT_FALSE(plan_to_json(plain).contains("meshes"));
}

}  // namespace
}  // namespace jaxpp
