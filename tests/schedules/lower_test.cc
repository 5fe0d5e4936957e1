// Lowering Schedule -> Program: sends, recvs, gradient reduction, optimizer, check_program.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/error.h"
#include "schedules/custom.h"
#include "schedules/lower.h"
#include "schedules/registry.h"

namespace jaxpp {
namespace {

std::vector<std::string> listing(const Program& prog, int actor) {
  std::vector<std::string> out;
  for (const Instruction& ins : prog.actors[actor]) out.push_back(to_string(ins));
  return out;
}

TEST(LowerSchedule, OneFOneBOnTwoActorsHasSendsRecvsReduceAndOptimizer) {
  const Schedule s = generate_schedule("1f1b", {.num_actors = 2, .num_microbatches = 2});
  const Program prog = lower(s, {});
  ASSERT_EQ(prog.num_actors, 2);
  // actor 0: F0, send, F1, send, recv(grad 0), B0, recv(grad 1), B1, allreduce, optimizer.
  std::vector<OpKind> ops0;
  for (const Instruction& ins : prog.actors[0]) ops0.push_back(ins.op);
  EXPECT_EQ(ops0,
            (std::vector<OpKind>{OpKind::kCompute, OpKind::kSend, OpKind::kCompute, OpKind::kSend,
                                 OpKind::kRecv, OpKind::kCompute, OpKind::kRecv, OpKind::kCompute,
                                 OpKind::kAllReduce, OpKind::kOptimizer}));
  // The backward of microbatch 0 on actor 0 waits for the gradient recv and its own F.
  const Instruction& b0 = prog.actors[0][5];
  EXPECT_EQ(b0.tasks, (std::vector<TaskRef>{{TaskKind::kB, 0, 0}}));
  EXPECT_EQ(b0.deps, (std::vector<int>{0, 4}));
  EXPECT_EQ(prog.actors[0][8].deps, (std::vector<int>{7}));  // allreduce after the last B
  EXPECT_EQ(prog.actors[0][9].deps, (std::vector<int>{8}));  // optimizer after the allreduce
}

TEST(LowerSchedule, TagsAreUniqueAndBytesComeFromOptions) {
  const Schedule s = generate_schedule("zb-h1", {.num_actors = 3, .num_microbatches = 4});
  LoweringOptions opt;
  opt.activation_bytes = {100, 200, 300};
  opt.grad_bytes = {7, 8, 9};
  const Program prog = lower(s, opt);
  std::set<int64_t> tags;
  for (int r = 0; r < prog.num_actors; ++r) {
    for (const Instruction& ins : prog.actors[r]) {
      if (ins.op == OpKind::kSend) {
        EXPECT_TRUE(tags.insert(ins.tag).second) << "tag " << ins.tag;
        // F(s) sends stage s's output; B/I(s) sends the gradient of stage s-1's output.
        const int boundary = ins.tasks[0].kind == TaskKind::kF ? ins.stage : ins.stage - 1;
        EXPECT_EQ(ins.bytes, opt.activation_bytes[boundary]) << to_string(ins);
      }
      if (ins.op == OpKind::kAllReduce) {
        EXPECT_EQ(ins.bytes, opt.grad_bytes[ins.stage]);
      }
    }
  }
  EXPECT_EQ(tags.size(), 2u * 2u * 4u);  // 2 boundaries x (activation + gradient) x m
}

TEST(LowerSchedule, SplitStageReducesAfterItsLastW) {
  const Schedule s = generate_schedule("zb-h1", {.num_actors = 2, .num_microbatches = 2});
  const Program prog = lower(s, {});
  const std::vector<std::string> a1 = listing(prog, 1);
  ASSERT_GE(a1.size(), 3u);
  EXPECT_EQ(prog.actors[1].back().op, OpKind::kOptimizer);
  // The allreduce of stage 1 directly follows the compute of W1@s1.
  for (size_t i = 0; i < prog.actors[1].size(); ++i) {
    if (prog.actors[1][i].op == OpKind::kAllReduce) {
      const Instruction& before = prog.actors[1][prog.actors[1][i].deps[0]];
      EXPECT_EQ(before.tasks.back(), (TaskRef{TaskKind::kW, 1, 1}));
    }
  }
}

TEST(LowerSchedule, WithoutGradReduceTheOptimizerFollowsTheLastBackward) {
  const Schedule s = generate_schedule("gpipe", {.num_actors = 2, .num_microbatches = 2});
  LoweringOptions opt;
  opt.emit_grad_reduce = false;
  const Program prog = lower(s, opt);
  for (int r = 0; r < 2; ++r) {
    for (const Instruction& ins : prog.actors[r]) EXPECT_NE(ins.op, OpKind::kAllReduce);
    EXPECT_EQ(prog.actors[r].back().op, OpKind::kOptimizer);
  }
}

TEST(LowerSchedule, FusedGroupIsOneComputeInstruction) {
  const Schedule s =
      generate_schedule("interleaved", {.num_actors = 2, .num_stages = 4, .num_microbatches = 4});
  const Program prog = lower(s, {});
  int fused = 0;
  for (const Instruction& ins : prog.actors[1]) {
    if (ins.op == OpKind::kCompute && ins.tasks.size() == 2) ++fused;
  }
  EXPECT_EQ(fused, 4);
}

TEST(LowerSchedule, WrongByteVectorSizeIsAnInputError) {
  const Schedule s = generate_schedule("1f1b", {.num_actors = 2, .num_microbatches = 2});
  LoweringOptions opt;
  opt.activation_bytes = {1, 2, 3};
  EXPECT_THROW(lower(s, opt), InputError);
}

TEST(LowerSchedule, InvalidScheduleIsAnInputError) {
  const Schedule s = parse_schedule_json(
      R"({"actors": [["F0@s0", "B0@s0", "F1@s0", "B1@s0"], ["F1@s1", "B1@s1", "F0@s1", "B0@s1"]]})",
      "t.json");
  EXPECT_THROW(lower(s, {}), InputError);
}

}  // namespace
}  // namespace jaxpp
