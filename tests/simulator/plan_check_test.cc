// check_plan (simulator/plan_check.h): a plan as build_plan makes it passes; each contradiction
// between its parts is an InputError naming the file and the field.
#include "simulator/plan_check.h"

#include <string>

#include <gtest/gtest.h>

#include "costmodel/cluster.h"
#include "graph/model.h"
#include "simulator/plan_builder.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

Plan built_plan(const std::string& schedule = "1f1b", int virtual_stages = 1) {
  PlanRequest req;
  req.model = load_model(std::string(JAXPP_TEST_DATA_DIR) + "/graph/tiny_transformer.json");
  req.cluster = load_cluster("a100-80g");
  req.config.gpus = 2;
  req.config.pp = 2;
  req.config.virtual_stages = virtual_stages;
  req.config.global_batch = 4;
  req.config.schedule = schedule;
  req.partition = PartitionMode::kEven;
  return build_plan(req);
}

std::string check_error(const Plan& plan) {
  return error_of([&] { check_plan(plan, "p.json"); });
}

TEST(CheckPlan, PlansAsBuiltPass) {
  for (const char* schedule : {"1f1b", "gpipe", "zb-h1"})
    EXPECT_EQ(check_error(built_plan(schedule)), "<no error>") << schedule;
  EXPECT_EQ(check_error(built_plan("interleaved-1f1b", 2)), "<no error>");
}

TEST(CheckPlan, GpusMustBeTheProductOfTheParallelDegrees) {
  Plan plan = built_plan();
  plan.config.gpus = 3;
  EXPECT_EQ(check_error(plan), "p.json: field 'config': gpus 3 is not pp·tp·dp·cp = 2·1·1·1 = 2");
}

TEST(CheckPlan, GlobalBatchMustMatchTheMicrobatches) {
  Plan plan = built_plan();
  plan.config.global_batch = 5;
  EXPECT_EQ(check_error(plan),
            "p.json: field 'config': global_batch 5 is not dp·microbatch_size·num_microbatches = "
            "1·1·4 = 4");
}

TEST(CheckPlan, VirtualStagesMustMatchThePartition) {
  Plan plan = built_plan();
  plan.config.virtual_stages = 3;
  EXPECT_EQ(check_error(plan),
            "p.json: field 'config': pp·virtual_stages = 2·3 = 6 stages, but the partition has 2");
}

TEST(CheckPlan, ARegistryScheduleNameMustBeTheProgramsOrder) {
  Plan plan = built_plan("1f1b");
  plan.config.schedule = "gpipe";
  EXPECT_EQ(check_error(plan),
            "p.json: field 'config': schedule 'gpipe' for pp 2, 2 stages and 4 microbatches is "
            "not the program's compute order");
  plan.config.schedule = "custom";  // not a registry name: the program is its own schedule
  EXPECT_EQ(check_error(plan), "<no error>");
}

TEST(CheckPlan, InvalidClusterIsNamed) {
  Plan plan = built_plan();
  plan.cluster["devices_per_node"] = 0;
  EXPECT_NE(check_error(plan).find("p.json: field 'cluster': field 'devices_per_node'"),
            std::string::npos)
      << check_error(plan);
}

TEST(CheckPlan, TransferOfTheWrongSizeNamesTheInstructionAndTheExpectedSize) {
  Plan plan = built_plan();
  for (auto& actor : plan.program.actors)
    for (Instruction& ins : actor)
      if (ins.tag == 0) ins.bytes = 1;  // the send and its recv: a well-formed program
  const std::string e = check_error(plan);
  EXPECT_EQ(e.rfind("p.json: field 'program': actor 0, instruction 1 (send F0@s0 ->1): 1 bytes, "
                    "but the model and configuration give ",
                    0),
            0u)
      << e;
  EXPECT_NE(e.find("(the activation of stage 0)"), std::string::npos) << e;
}

TEST(CheckPlan, ChangedDependencyIsNotTheLowering) {
  Plan plan = built_plan();
  for (Instruction& ins : plan.program.actors[0])
    if (ins.op == OpKind::kOptimizer) ins.deps.clear();
  EXPECT_NE(check_error(plan).find("the lowering of the program's own compute order has"),
            std::string::npos)
      << check_error(plan);
}

TEST(CheckPlan, PredictedMustBeAnObjectOfNumbers) {
  Plan plan = built_plan();
  plan.predicted = "fast";
  EXPECT_EQ(check_error(plan).rfind("p.json: field 'predicted': expected an object", 0), 0u);
  plan.predicted = {{"step_time_s", "1 s"}};
  EXPECT_EQ(check_error(plan),
            "p.json: field 'predicted': field 'step_time_s': expected a number >= 0, got \"1 s\"");
  plan.predicted = {{"step_time_s", 1.5}, {"warnings", nlohmann::json::array()}};
  EXPECT_EQ(check_error(plan), "<no error>");
  plan.predicted = nullptr;
  EXPECT_EQ(check_error(plan), "<no error>");
}

}  // namespace
}  // namespace jaxpp
