#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/plan.h"
#include "graph/program.h"
#include "graph/task.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

TaskRef t(TaskKind k, int mb, int stage) { return TaskRef{k, stage, mb}; }

Instruction compute(std::vector<TaskRef> tasks, std::vector<int> deps = {}) {
  Instruction i;
  i.op = OpKind::kCompute;
  i.stage = tasks[0].stage;
  i.tasks = std::move(tasks);
  i.deps = std::move(deps);
  return i;
}

Instruction comm(OpKind op, TaskRef task, int peer, int64_t bytes, int64_t tag,
                 std::vector<int> deps = {}) {
  Instruction i;
  i.op = op;
  i.tasks = {task};
  i.stage = task.stage;
  i.peer = peer;
  i.bytes = bytes;
  i.tag = tag;
  i.deps = std::move(deps);
  return i;
}

Instruction stage_op(OpKind op, int stage, int64_t bytes, std::vector<int> deps) {
  Instruction i;
  i.op = op;
  i.stage = stage;
  i.bytes = bytes;
  i.deps = std::move(deps);
  return i;
}

// Two stages on two actors, two microbatches, GPipe order.
Program two_stage_program() {
  Program p;
  p.num_actors = 2;
  p.num_stages = 2;
  p.num_microbatches = 2;
  p.stage_to_actor = {0, 1};
  p.actors = {
      {compute({t(TaskKind::kF, 0, 0)}), comm(OpKind::kSend, t(TaskKind::kF, 0, 0), 1, 64, 0, {0}),
       compute({t(TaskKind::kF, 1, 0)}), comm(OpKind::kSend, t(TaskKind::kF, 1, 0), 1, 64, 1, {2}),
       comm(OpKind::kRecv, t(TaskKind::kB, 0, 1), 1, 64, 2), compute({t(TaskKind::kB, 0, 0)}, {4}),
       comm(OpKind::kRecv, t(TaskKind::kB, 1, 1), 1, 64, 3), compute({t(TaskKind::kB, 1, 0)}, {6}),
       stage_op(OpKind::kAllReduce, 0, 400, {5, 7}), stage_op(OpKind::kOptimizer, 0, 0, {8})},
      {comm(OpKind::kRecv, t(TaskKind::kF, 0, 0), 0, 64, 0), compute({t(TaskKind::kF, 0, 1)}, {0}),
       comm(OpKind::kRecv, t(TaskKind::kF, 1, 0), 0, 64, 1),
       compute({t(TaskKind::kF, 1, 1), t(TaskKind::kB, 0, 1)}, {2}),
       comm(OpKind::kSend, t(TaskKind::kB, 0, 1), 0, 64, 2, {3}), compute({t(TaskKind::kB, 1, 1)}),
       comm(OpKind::kSend, t(TaskKind::kB, 1, 1), 0, 64, 3, {5}),
       stage_op(OpKind::kAllReduce, 1, 400, {5}), stage_op(OpKind::kOptimizer, 1, 0, {7})},
  };
  return p;
}

TEST(TaskTest, TaskRefsRoundTripThroughText) {
  const TaskRef r{TaskKind::kI, 2, 13};
  EXPECT_EQ(to_string(r), "I13@s2");
  EXPECT_EQ(parse_task_ref("I13@s2"), r);
  EXPECT_EQ(to_string(std::vector<TaskRef>{t(TaskKind::kF, 0, 3), t(TaskKind::kB, 0, 3)}),
            "F0@s3+B0@s3");
  EXPECT_EQ(parse_fused_tasks("F0@s3+B0@s3")->size(), 2u);
  for (const char* bad : {"", "X1@s2", "F@s2", "F1s2", "F1@s", "F1@s2x", "F-1@s2", "F1@s2+"})
    EXPECT_FALSE(parse_fused_tasks(bad).has_value()) << bad;
  for (TaskKind k : kAllTaskKinds) EXPECT_EQ(parse_task_kind(to_string(k)[0]), k);
}

TEST(ProgramTest, WellFormedProgramPassesTheCheck) {
  const Program p = two_stage_program();
  EXPECT_NO_THROW(check_program(p));
  EXPECT_EQ(p.num_instructions(), 19);
  EXPECT_EQ(to_string(p.actors[1][3]), "F1@s1+B0@s1");
  EXPECT_EQ(to_string(p.actors[0][1]), "send F0@s0 ->1");
  EXPECT_EQ(to_string(p.actors[0][4]), "recv B0@s1 <-1");
  EXPECT_EQ(to_string(p.actors[0][8]), "allreduce s0");
  EXPECT_EQ(to_string(stream_of(p.actors[0][1])), "send->1");
  EXPECT_EQ(to_string(stream_of(p.actors[0][4])), "recv<-1");
  EXPECT_EQ(stream_of(p.actors[0][8]).kind, StreamKind::kCollective);
  EXPECT_EQ(stream_of(p.actors[0][9]).kind, StreamKind::kCompute);
}

// The list of valid ops comes from kAllOpKinds: a hand-written one left out allgather.
TEST(ProgramTest, UnknownOpListsEveryOp) {
  nlohmann::json j = program_to_json(two_stage_program());
  ASSERT_TRUE(j.dump().find("\"op\":\"send\"") != std::string::npos) << j.dump().substr(0, 300);
  bool edited = false;
  std::function<void(nlohmann::json&)> edit = [&](nlohmann::json& v) {
    if (edited) return;
    if (v.is_object() && v.contains("op")) {
      v["op"] = "teleport";
      edited = true;
      return;
    }
    if (v.is_structured())
      for (auto& x : v) edit(x);
  };
  edit(j);
  ASSERT_TRUE(edited);
  const std::string msg = error_of([&] { program_from_json(j, "p.json"); });
  EXPECT_NE(msg.find("unknown op \"teleport\" (expected compute, send, recv, allreduce, optimizer "
                     "or allgather)"),
            std::string::npos)
      << msg;
}

TEST(ProgramTest, HasOpFindsAnInstructionKindOnAnyActor) {
  Program p = two_stage_program();
  EXPECT_TRUE(p.has_op(OpKind::kAllReduce));
  EXPECT_TRUE(p.has_op(OpKind::kOptimizer));
  EXPECT_FALSE(p.has_op(OpKind::kAllGather));
  p.actors[1].push_back(stage_op(OpKind::kAllGather, 1, 400, {}));
  EXPECT_TRUE(p.has_op(OpKind::kAllGather)) << "only the second actor holds it";
}

TEST(ProgramTest, CheckCatchesAnUnmatchedSend) {
  Program p = two_stage_program();
  p.actors[1][2].tag = 7;  // the recv meant for tag 1 now waits for a send that never comes
  const std::string msg = error_of([&] { check_program(p); });
  EXPECT_NE(msg.find("actor 0, instruction 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no matching recv"), std::string::npos) << msg;
}

TEST(ProgramTest, CheckCatchesAWrongTagOrder) {
  Program p = two_stage_program();
  std::swap(p.actors[1][0], p.actors[1][2]);  // receive microbatch 1 before microbatch 0
  p.actors[1][1].deps = {0};
  p.actors[1][3].deps = {2};
  const std::string msg = error_of([&] { check_program(p); });
  EXPECT_NE(msg.find("actor 1, instruction 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("different order"), std::string::npos) << msg;
}

TEST(ProgramTest, CheckCatchesAForwardDependency) {
  Program p = two_stage_program();
  p.actors[0][2].deps = {5};
  const std::string msg = error_of([&] { check_program(p); });
  EXPECT_NE(msg.find("actor 0, instruction 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("earlier instruction"), std::string::npos) << msg;
}

TEST(ProgramTest, CheckCatchesMismatchedBytesAndForeignTasks) {
  Program p = two_stage_program();
  p.actors[1][0].bytes = 65;
  EXPECT_NE(error_of([&] { check_program(p); }).find("bytes"), std::string::npos);
  p = two_stage_program();
  p.actors[0][0] = compute({t(TaskKind::kF, 0, 1)});
  EXPECT_NE(error_of([&] { check_program(p); }).find("belongs to actor 1"), std::string::npos);
}

TEST(ProgramTest, JsonRoundTripIsExactAndCompact) {
  const Program p = two_stage_program();
  const nlohmann::json j = program_to_json(p);
  EXPECT_EQ(j["format"], "jaxpp-sim-program");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["actors"][1][3]["tasks"], "F1@s1+B0@s1");
  EXPECT_EQ(program_from_json(j, "p"), p);
}

TEST(ProgramTest, JsonWithAMalformedTaskNamesTheField) {
  nlohmann::json j = program_to_json(two_stage_program());
  j["actors"][0][2]["tasks"] = "F1@x0";
  const std::string msg = error_of([&] { program_from_json(j, "prog.json"); });
  EXPECT_NE(msg.find("actors'[0][2]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'tasks'"), std::string::npos) << msg;
}

Plan small_plan() {
  Plan plan;
  plan.model = load_model("gpt3-1.3b");
  plan.cluster = {{"name", "test"}, {"gpus", 2}};
  plan.config.pp = 2;
  plan.config.gpus = 2;
  plan.config.num_microbatches = 2;
  plan.config.schedule = "gpipe";
  plan.config.recompute = Recompute::kSelective;
  plan.partition = partition_from_starts({0, 13}, plan.model.num_layers());
  plan.placement = make_placement(PlacementKind::kLinear, 2, 2);
  plan.program = two_stage_program();
  plan.predicted = {{"step_time_s", 1.5}};
  return plan;
}

TEST(PlanTest, SaveAndLoadRoundTrip) {
  const Plan plan = small_plan();
  const std::string dir =
      std::filesystem::temp_directory_path() / ("jaxpp-plan-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/plan.json";
  save_plan(plan, path);
  const Plan back = load_plan(path);
  EXPECT_EQ(back.config, plan.config);
  EXPECT_EQ(back.partition, plan.partition);
  EXPECT_EQ(back.placement, plan.placement);
  EXPECT_EQ(back.program, plan.program);
  EXPECT_EQ(back.cluster, plan.cluster);
  EXPECT_EQ(back.predicted, plan.predicted);
  EXPECT_EQ(model_to_json(back.model), model_to_json(plan.model));
  EXPECT_EQ(plan_to_json(back), plan_to_json(plan));
  std::filesystem::remove_all(dir);
}

TEST(PlanTest, OpRecomputeRoundTripsThroughPlanJson) {
  Plan plan = small_plan();
  plan.config.recompute = Recompute::kOp;
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("jaxpp-plan-op-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/plan.json";
  save_plan(plan, path);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"recompute\": \"op\""), std::string::npos);
  EXPECT_EQ(load_plan(path).config.recompute, Recompute::kOp);
  std::filesystem::remove_all(dir);
}

TEST(PlanTest, OtherFormatOrVersionIsRejected) {
  nlohmann::json j = plan_to_json(small_plan());
  j["version"] = 2;
  EXPECT_NE(error_of([&] { plan_from_json(j, "plan.json"); }).find("unsupported plan version 2"),
            std::string::npos);
  j["version"] = 1;
  j["format"] = "something-else";
  EXPECT_NE(error_of([&] { plan_from_json(j, "plan.json"); }).find("not a jaxpp-sim plan"),
            std::string::npos);
}

TEST(PlanTest, PartitionThatDoesNotFitTheModelIsRejected) {
  nlohmann::json j = plan_to_json(small_plan());
  j["partition"]["num_layers"] = 5;
  j["partition"]["stage_begin"] = {0, 3};
  EXPECT_NE(error_of([&] { plan_from_json(j, "plan.json"); }).find("'partition'"),
            std::string::npos);
}

TEST(PlanTest, APlanTooLongToBeReadBackIsNotWritten) {
  const Plan plan = small_plan();
  const std::string text = plan_to_text(plan);
  EXPECT_EQ(text, plan_to_json(plan).dump(2) + "\n");
  // The same plan under a limit one byte below its length: refused, naming the sizes.
  try {
    plan_to_text(plan, "out.json", static_cast<int64_t>(text.size()) - 1);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("out.json: the plan would be"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("a plan file may have to be read back"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(plan_to_text(plan, "out.json", static_cast<int64_t>(text.size())));
}

TEST(PlanTest, SaveToAMissingDirectoryIsAnInputError) {
  EXPECT_THROW(save_plan(small_plan(), "/nonexistent-dir/plan.json"), InputError);
}

TEST(PlanTest, ConfigRejectsUnknownKeys) {
  EXPECT_THROW(config_from_json(nlohmann::json::parse(R"({"pp":2,"ppp":3})"), "c"), InputError);
  EXPECT_EQ(config_from_json(config_to_json(small_plan().config), "c"), small_plan().config);
}

}  // namespace
}  // namespace jaxpp
