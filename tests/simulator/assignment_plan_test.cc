// build_plan and check_plan with a name-to-actor assignment (graph/assignment.h).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "graph/assignment.h"
#include "graph/model.h"
#include "graph/plan.h"
#include "simulator/plan_builder.h"
#include "simulator/plan_check.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

PlanRequest assigned_request() {
  PlanRequest req;
  req.model = load_model("gpt3-1.3b");  // 24 blocks: embedding, layer0 ... layer23, logits
  req.cluster = load_cluster("a100-80g");
  req.config.gpus = 4;
  req.config.pp = 4;
  req.config.global_batch = 8;
  req.config.schedule = "interleaved";
  req.assignment = assignment_spec_from_json(
      nlohmann::json{{"embedding", 0}, {"layer{i}", "i mod 4"}, {"logits", 3}}, "a.json");
  return req;
}

TEST(AssignmentPlan, TheAssignmentGivesPartitionPlacementAndVirtualStages) {
  const Plan plan = build_plan(assigned_request());
  EXPECT_EQ(plan.partition.num_stages(), 24);
  EXPECT_EQ(plan.partition.stage_begin.front(), 0);
  EXPECT_EQ(plan.partition.stage_begin[1], 2);  // embedding + layer0
  EXPECT_EQ(plan.placement, make_placement(PlacementKind::kLoop, 24, 4));
  EXPECT_EQ(plan.config.virtual_stages, 6);
  ASSERT_TRUE(plan.assignment.has_value());
  EXPECT_EQ(plan.assignment->source, "a.json");
  EXPECT_NO_THROW(check_plan(plan, "plan.json"));
  // The JSON round trip keeps it, and check_plan accepts what comes back.
  const Plan back = plan_from_json(plan_to_json(plan), "plan.json");
  ASSERT_TRUE(back.assignment.has_value());
  EXPECT_EQ(back.assignment->entries, plan.assignment->entries);
  EXPECT_NO_THROW(check_plan(back, "plan.json"));
}

TEST(AssignmentPlan, AssignmentWithPartitionVirtualOrAScheduleFileIsRefused) {
  PlanRequest even = assigned_request();
  even.partition = PartitionMode::kEven;
  EXPECT_EQ(error_of([&] { build_plan(even); }),
            "a.json: field 'assignment': the assignment gives the partition; --partition is not "
            "used with it");
  PlanRequest virt = assigned_request();
  virt.config.virtual_stages = 2;
  EXPECT_EQ(error_of([&] { build_plan(virt); }),
            "a.json: field 'assignment': the assignment gives the stages per actor; --virtual is "
            "not used with it");
  PlanRequest file = assigned_request();
  file.schedule_file = "s.json";
  EXPECT_EQ(error_of([&] { build_plan(file); }),
            "a.json: field 'assignment': a schedule file places its own stages; give a schedule "
            "name");
}

TEST(AssignmentPlan, CheckPlanRefusesVirtualStagesThatAreNotTheAssignments) {
  Plan plan = build_plan(assigned_request());
  plan.config.virtual_stages = 5;
  EXPECT_EQ(error_of([&] { check_plan(plan, "plan.json"); }),
            "plan.json: field 'config': virtual_stages 5 is not the most stages one actor holds "
            "in the assignment's placement (6)");
}

TEST(AssignmentPlan, CheckPlanRegeneratesTheScheduleOnTheAssignedPlacement) {
  // 1F1B on the loop placement is Shardy's 1F1B rule there, not Std1F1B's linear order.
  PlanRequest req = assigned_request();
  req.config.schedule = "1f1b";
  Plan plan = build_plan(req);
  EXPECT_NO_THROW(check_plan(plan, "plan.json"));
  plan.assignment.reset();  // without the assignment, 1f1b cannot describe the program
  EXPECT_NE(error_of([&] { check_plan(plan, "plan.json"); }).find("plan.json: field 'config'"),
            std::string::npos);
}

}  // namespace
}  // namespace jaxpp
