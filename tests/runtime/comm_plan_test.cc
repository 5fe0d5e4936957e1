// CommPlan: the communicators, device choice, launcher detection and wire-header checks of the
// cuda backend, all computed on the CPU.
#include "runtime/comm_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "runtime/backend.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "tests/testing/lowered.h"

namespace jaxpp {
namespace {

TEST(CommPlan, HasOneLinkPerDirectionPerReplicaAndOneReplicaGroupPerActor) {
  CommPlan plan = make_comm_plan(lowered("Std1F1B", 3, 4), /*num_replicas=*/2);
  // 0->1, 1->0, 1->2, 2->1 in each of two replicas, then one group per actor.
  ASSERT_EQ(plan.comms.size(), 2u * 4 + 3);
  EXPECT_EQ(plan.comms[0].name(), "link 0->1 of replica 0");
  EXPECT_EQ(plan.comms[3].name(), "link 2->1 of replica 0");
  EXPECT_EQ(plan.comms[4].name(), "link 0->1 of replica 1");
  EXPECT_EQ(plan.comms[8].name(), "replicas of actor 0");
  const CommSpec& l = plan.comms[plan.link(1, 1, 2)];
  EXPECT_EQ(l.workers, (std::vector<int>{4, 5}));  // sender first: rank 0 sends, rank 1 receives
  EXPECT_EQ(plan.comms[plan.replica_group(2)].workers, (std::vector<int>{2, 5}));
  EXPECT_EQ(plan.link(0, 0, 2), -1) << "no link the program never sends on";
}

TEST(CommPlan, EveryWorkerJoinsItsLinksAndItsReplicaGroup) {
  CommPlan plan = make_comm_plan(lowered("Std1F1B", 3, 4), 2);
  EXPECT_EQ(plan.comms_of(plan.worker(0, 1)).size(), 2u + 1);  // 0->1, 1->0, group of actor 0
  EXPECT_EQ(plan.comms_of(plan.worker(1, 0)).size(), 4u + 1);
  for (size_t c = 0; c < plan.comms.size(); ++c) {
    int members = 0;
    for (int w = 0; w < 6; ++w)
      for (int i : plan.comms_of(w)) members += i == static_cast<int>(c);
    EXPECT_EQ(members, static_cast<int>(plan.comms[c].workers.size())) << plan.comms[c].name();
  }
}

TEST(CommPlan, WithoutDataParallelismHasNoReplicaGroups) {
  CommPlan plan = make_comm_plan(lowered("Interleaved1F1B", 2, 4, 4), 1);
  ASSERT_EQ(plan.comms.size(), 2u);  // 0->1 and the wrap-around 1->0
  EXPECT_EQ(plan.replica_group(0), -1);
  EXPECT_GE(plan.link(0, 1, 0), 0);
}

TEST(AssignDevice, NamesBothCountsWhenAHostHasTooFewGpus) {
  EXPECT_EQ(assign_device(5, 8, 8), 5);
  EXPECT_EQ(assign_device(3, 2, 4), 3);
  try {
    assign_device(0, 8, 4);
    FAIL() << "expected a RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("8 workers on this host need 8 GPUs, found 4"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceOfRank, UsesTheLocalRankWhenTheRankSeesEveryGpuOfItsHost) {
  EXPECT_EQ(device_of_rank(5, 8, 8), 5);
  EXPECT_EQ(device_of_rank(1, 2, 4), 1);
}

TEST(DeviceOfRank, UsesGpuZeroWhenTheRankSeesExactlyOne) {
  // CUDA_VISIBLE_DEVICES per rank or Slurm --gpus-per-task=1: 8 ranks, each with its own GPU.
  EXPECT_EQ(device_of_rank(0, 8, 1), 0);
  EXPECT_EQ(device_of_rank(7, 8, 1), 0);
  EXPECT_EQ(device_of_rank(0, 1, 1), 0);
}

TEST(DeviceOfRank, RefusesARankThatSeesSomeButTooFewGpus) {
  try {
    device_of_rank(3, 8, 4);
    FAIL() << "expected a RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3 of 8 MPI ranks on this host sees 4 GPUs"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("CUDA_VISIBLE_DEVICES"), std::string::npos) << e.what();
  }
  EXPECT_THROW(device_of_rank(0, 2, 0), RuntimeFailure);
}

TEST(LaunchedByMpiLauncher, LooksAtTheLaunchersEnvironment) {
  std::map<std::string, const char*> env;
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second;
  };
  EXPECT_FALSE(launched_by_mpi_launcher(get));
  env["OMPI_COMM_WORLD_SIZE"] = "8";
  EXPECT_TRUE(launched_by_mpi_launcher(get));
  env.clear();
  env["PMI_SIZE"] = "2";
  EXPECT_TRUE(launched_by_mpi_launcher(get));
}

TEST(MpiLauncherWorldSize, ReadsTheLaunchersProcessCount) {
  std::map<std::string, const char*> env;
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second;
  };
  EXPECT_EQ(mpi_launcher_world_size(get), 0);
  env["OMPI_COMM_WORLD_SIZE"] = "4";
  EXPECT_EQ(mpi_launcher_world_size(get), 4);
  env.clear();
  env["PMI_SIZE"] = "2";
  EXPECT_EQ(mpi_launcher_world_size(get), 2);
  env["PMI_SIZE"] = "two";  // not a count: unknown
  EXPECT_EQ(mpi_launcher_world_size(get), 0);
  env.clear();
  env["PMIX_RANK"] = "0";  // launched, size not said
  EXPECT_EQ(mpi_launcher_world_size(get), 0);
}

TEST(LinkHeader, AcceptsTheExpectedMessageAndNamesAMismatch) {
  EXPECT_NO_THROW(check_link_header({0.5, 42, 32}, 42, 1, 1000));
  EXPECT_NO_THROW(check_link_header({0, 7, 0}, 7, 1, 1000));
  try {
    check_link_header({0, 43, 32}, 42, 1, 1000);
    FAIL() << "expected a RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("from actor 1 out of order: expected key 42, got 43"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_link_header({0, 42, -1}, 42, 1, 1000), RuntimeFailure);
  EXPECT_THROW(check_link_header({0, 42, 1001}, 42, 1, 1000), RuntimeFailure);
}

}  // namespace
}  // namespace jaxpp
