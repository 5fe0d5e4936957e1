// The runtime on the threads backend: every built-in schedule (and its fused and virtual
// variants) and a custom CSV schedule trained with dp = 2 and checked against the independent
// reference, injected numerical faults that the check catches, emulated runs that respect the
// program's dependencies, and communication faults.
#include "runtime/run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>

#include <thread>
#include <tuple>

#include "costmodel/stage_times_cost.h"
#include "graph/error.h"
#include "runtime/moe_workload.h"
#include "runtime/threads_backend.h"
#include "schedules/custom.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "tests/testing/lowered.h"

namespace jaxpp {
namespace {

RunOptions small_real_run(int dp) {
  RunOptions o;
  o.steps = 2;
  o.warmup = 1;
  o.dp = dp;
  o.check = true;
  o.timeout_s = 20;
  o.mlp.hidden = 8;
  o.mlp.seq = 4;
  o.mlp.layers_per_stage = 2;
  return o;
}

struct ScheduleCase {
  std::string name;
  std::string schedule;  // built-in name, or a file under tests/data/schedules
  int p = 0, m = 0, stages = 0;
  bool fuse = false;
  int group_size = 0;
};

// ctest lists parameterised tests with their printed parameter: the case name suffices.
void PrintTo(const ScheduleCase& c, std::ostream* os) { *os << c.name; }

Program program_of(const ScheduleCase& c) {
  if (c.p == 0) {
    return lower(load_schedule_file(std::string(JAXPP_TEST_DATA_DIR) + "/schedules/" + c.schedule),
                 {});
  }
  ScheduleParams params;
  params.num_actors = c.p;
  params.num_microbatches = c.m;
  params.num_stages = c.stages;
  params.fuse_steady_state = c.fuse;
  params.group_size = c.group_size;
  return lower(generate_schedule(c.schedule, params), {});
}

// All twelve built-in schedules (docs/schedules.md), the fused and virtual variants of those that
// have them, and custom PyTorch CSV schedules.
const ScheduleCase kCases[] = {
    {"GPipe", "GPipe", 3, 4},
    {"Std1F1B", "Std1F1B", 4, 6},
    {"Eager1F1B", "Eager1F1B", 3, 4},
    {"ZeroBubble", "ZeroBubble", 3, 4},
    {"Interleaved1F1B", "Interleaved1F1B", 2, 4, 4},
    {"Interleaved1F1BV3", "Interleaved1F1B", 2, 4, 6},
    {"Interleaved1F1BFused", "Interleaved1F1B", 2, 4, 4, true},
    {"KimiK2", "KimiK2", 2, 4, 4},
    {"KimiK2Fused", "KimiK2", 2, 4, 4, true},
    {"InterleavedGPipe", "InterleavedGPipe", 2, 4, 4},
    {"DualPipeV", "DualPipeV", 2, 4},
    {"ZBH2", "ZB-H2", 3, 4},
    {"ZBV", "ZB-V", 2, 4},
    {"LoopedBFS", "LoopedBFS", 2, 3, 4},
    {"MegatronInterleaved", "MegatronInterleaved", 2, 4, 4},
    {"MegatronInterleavedGroup4", "MegatronInterleaved", 2, 4, 4, false, 4},
    {"ShardyCircular", "Circular", 2, 4, 4},
    {"ShardyCircularWithReversedBackward", "CircularWithReversedBackward", 2, 4, 4},
    {"ShardyGPipeBut1F1BForLastMesh", "GPipeBut1F1BForLastMesh", 3, 4},
    {"ShardyZeroBubbleH1", "ZeroBubbleH1", 3, 2},
    {"ShardyZeroBubbleH2ZeroTxLatency", "ZeroBubbleH2ZeroTxLatency", 3, 4},
    {"ShardyZeroBubbleH2HalfTxLatency", "ZeroBubbleH2HalfTxLatency", 3, 4},
    {"ShardyZeroBubbleH2FullTxLatency", "ZeroBubbleH2FullTxLatency", 3, 4},
    {"Custom1F1BCsv", "1f1b_p2_m4.csv"},
    {"CustomZeroBubbleCsv", "zero_bubble_p2_m2.csv"},
};

class EquivalenceTest : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(EquivalenceTest, PipelinedTrainingMatchesTheIndependentReferenceWithDp2) {
  Program prog = program_of(GetParam());
  RunResult r = run_program(prog, nullptr, small_real_run(2));
  ASSERT_TRUE(r.checked);
  ASSERT_EQ(r.losses.size(), 2u);
  EXPECT_TRUE(check_passed(r)) << r.reference.first_difference << r.orchestration.first_difference;
  EXPECT_LE(r.reference.max_rel_diff_loss, kCheckRelTolerance);
  EXPECT_LE(r.reference.max_rel_diff_weights, kCheckRelTolerance);
  RecordProperty("max_rel_diff_weights", std::to_string(r.reference.max_rel_diff_weights));
  // The orchestration check: the workload's own arithmetic, run sequentially, bit for bit.
  EXPECT_EQ(r.orchestration.rel_tolerance, 0);
  EXPECT_EQ(r.orchestration.max_abs_diff_loss, 0);
  EXPECT_EQ(r.orchestration.max_abs_diff_weights, 0);
  EXPECT_LT(r.losses.back(), r.losses.front()) << "training should lower the loss";
}

INSTANTIATE_TEST_SUITE_P(Schedules, EquivalenceTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

TEST(Run, EveryBuiltInScheduleIsInTheCheckedList) {
  std::set<std::string> checked;
  for (const ScheduleCase& c : kCases)
    if (c.p > 0) checked.insert(schedule_or_throw(c.schedule).name);
  for (const ScheduleInfo& info : all_schedules())
    EXPECT_TRUE(checked.count(info.name)) << info.name << " is not run with --check";
}

TEST(Run, RecvsCountFromWhenBothEndsWerePosted) {
  Trace t;
  t.num_actors = 2;
  t.num_steps = 2;
  auto event = [](int actor, int step, OpKind op, int64_t tag, double start, double end) {
    TraceEvent e;
    e.actor = actor;
    e.step = step;
    e.op = op;
    e.tag = tag;
    e.start_s = start;
    e.end_s = end;
    return e;
  };
  // Step 1: the recv was posted at 1.0 and waited for a send posted at 1.7; data at 1.75.
  t.events.push_back(event(1, 1, OpKind::kRecv, 3, 1.0, 1.75));
  t.events.push_back(event(0, 1, OpKind::kSend, 3, 1.7, 1.7001));
  // A send posted before its recv: the recv counts whole.
  t.events.push_back(event(1, 1, OpKind::kRecv, 4, 2.0, 2.25));
  t.events.push_back(event(0, 1, OpKind::kSend, 4, 1.9, 1.9001));
  // Step 0 is warm-up and must not count, nor match step 1's tags.
  t.events.push_back(event(1, 0, OpKind::kRecv, 3, 0.0, 0.9));
  const auto kinds = mean_durations_by_kind(t, /*first_step=*/1);
  EXPECT_NEAR(kinds.at("recv"), (0.05 + 0.25) / 2, 1e-12);
  // A recv without its send in the trace counts whole.
  Trace lone;
  lone.events.push_back(event(1, 0, OpKind::kRecv, 9, 0.5, 0.8));
  EXPECT_NEAR(mean_durations_by_kind(lone, 0).at("recv"), 0.3, 1e-12);
}

TEST(Run, AdamMatchesTheReference) {
  RunOptions o = small_real_run(2);
  o.mlp.optimizer = OptimizerKind::kAdam;
  RunResult r = run_program(lowered("ZeroBubble", 2, 4), nullptr, o);
  EXPECT_TRUE(check_passed(r)) << r.reference.first_difference;
  EXPECT_LE(r.reference.max_rel_diff_loss, kCheckRelTolerance);
  EXPECT_LE(r.reference.max_rel_diff_weights, kCheckRelTolerance);
  EXPECT_EQ(r.orchestration.max_abs_diff_weights, 0);
}

// One step of a 2-actor ZeroBubble with dp = 2 and a fault on replica 0: only step 0's update
// is wrong, so the first differing value is where the fault struck.
RunResult run_with_fault(MlpFault fault) {
  RunOptions o = small_real_run(2);
  o.steps = 1;
  o.warmup = 0;
  o.mlp.fault = fault;
  return run_program(lowered("ZeroBubble", 2, 4), nullptr, o);
}

void expect_check_fails_at(const RunResult& r, const std::string& where) {
  ASSERT_TRUE(r.checked);
  EXPECT_FALSE(check_passed(r));
  EXPECT_FALSE(r.reference.passed);
  EXPECT_GT(r.reference.max_rel_diff_weights, kCheckRelTolerance);
  EXPECT_EQ(r.reference.first_difference.rfind(where + ": run ", 0), 0u)
      << r.reference.first_difference;
  EXPECT_NE(r.reference.first_difference.find(", reference "), std::string::npos);
  // The same-code sequential run disagrees too, bit for bit.
  EXPECT_FALSE(r.orchestration.passed);
  EXPECT_EQ(r.orchestration.first_difference.rfind(where + ": run ", 0), 0u)
      << r.orchestration.first_difference;
}

TEST(Run, CorruptGradientFailsTheCheckAtTheCorruptedWeight) {
  // 1e-6 on one gradient element moves its weight by lr x 1e-6 = 5e-8, 1e-7 relative.
  RunResult r = run_with_fault(MlpFault::kCorruptGrad);
  expect_check_fails_at(r, "stage 1 (replica 0) layer 0 W1[0,0]");
  EXPECT_LT(r.reference.max_rel_diff_weights, 1e-6);
}

TEST(Run, SkippedAccumulationFailsTheCheck) {
  expect_check_fails_at(run_with_fault(MlpFault::kSkipAccumulate),
                        "stage 0 (replica 0) layer 0 W1[0,0]");
}

TEST(Run, StaleWeightFailsTheCheck) {
  RunResult r = run_with_fault(MlpFault::kStaleWeight);
  expect_check_fails_at(r, "stage 0 (replica 0) layer 0 W1[0,0]");
  // Only replica 0's stage 0 missed its update.
  EXPECT_EQ(r.reference.first_difference.find("replica 1"), std::string::npos);
}

TEST(Run, FaultsNeedRealComputeAndSkipAccumulateTwoMicrobatches) {
  RunOptions o = small_real_run(1);
  o.mlp.fault = MlpFault::kSkipAccumulate;
  EXPECT_THROW(run_program(lowered("GPipe", 2, 1), nullptr, o), InputError);
  StageTimesCost cost(uniform_stage_times(2, 0, 0, 0, 0));
  o.check = false;
  o.emulated = true;
  o.mlp.fault = MlpFault::kCorruptGrad;
  EXPECT_THROW(run_program(lowered("GPipe", 2, 2), &cost, o), InputError);
}

TEST(Run, TraceHasEveryInstructionOfEveryStepAndRespectsDeps) {
  Program prog = lowered("Std1F1B", 3, 5);
  StageTimesCost cost(uniform_stage_times(prog.num_stages, 1e-4, 2e-4, 1e-4, 5e-5));
  RunOptions o;
  o.emulated = true;
  o.steps = 2;
  o.warmup = 0;
  RunResult r = run_program(prog, &cost, o);
  ASSERT_EQ(static_cast<int64_t>(r.trace.events.size()), 2 * prog.num_instructions());
  std::map<std::tuple<int, int, int>, const TraceEvent*> by_key;
  for (const TraceEvent& e : r.trace.events) by_key[{e.step, e.actor, e.instruction}] = &e;
  const double slack = 1e-9;
  // Emulated computes pay back earlier sleep overshoot, so one task may be a little shorter than
  // predicted, but an actor's compute stream never runs for less than the model says in total.
  std::vector<double> measured_compute_s(prog.num_actors, 0.0);
  std::vector<double> predicted_compute_s(prog.num_actors, 0.0);
  for (const TraceEvent& e : r.trace.events) {
    const Instruction& ins = prog.actors[e.actor][e.instruction];
    for (int d : ins.deps)
      EXPECT_GE(e.start_s + slack, by_key.at({e.step, e.actor, d})->end_s) << e.name();
    if (ins.op == OpKind::kCompute) {
      EXPECT_GT(e.duration_s(), 0.0) << e.name();
      measured_compute_s[e.actor] += e.duration_s();
      predicted_compute_s[e.actor] += cost.compute_s(e.actor, ins);
    }
    if (ins.op == OpKind::kRecv) {
      // The message cannot arrive before its send was posted plus the emulated transfer time.
      for (const TraceEvent& s : r.trace.events)
        if (s.step == e.step && s.op == OpKind::kSend && s.tag == e.tag) {
          EXPECT_GE(e.end_s + slack, s.start_s + 5e-5) << e.name();
        }
    }
  }
  for (int a = 0; a < prog.num_actors; ++a) {
    EXPECT_GT(predicted_compute_s[a], 0.0);
    EXPECT_GE(measured_compute_s[a] + slack, predicted_compute_s[a]) << "actor " << a;
  }
  ASSERT_EQ(r.step_times_s.size(), 2u);
  EXPECT_GT(r.step_time_s, 0);
}

TEST(Run, DroppedMessageEndsTheRunWithAnErrorNamingActorAndInstruction) {
  Program prog = lowered("Std1F1B", 3, 3);
  RunOptions o = small_real_run(1);
  o.check = false;
  o.timeout_s = 1;
  o.drop_tag = 2;
  try {
    run_program(prog, nullptr, o);
    FAIL() << "expected a RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("timed out after 1 s"), std::string::npos) << msg;
    EXPECT_NE(msg.find("instruction"), std::string::npos) << msg;
    EXPECT_NE(msg.find("recv"), std::string::npos) << msg;
    EXPECT_NE(msg.find("waiting for tag"), std::string::npos) << msg;
  }
}

std::string run_error_of(const Program& prog, const CostProvider* cost, const RunOptions& o) {
  try {
    run_program(prog, cost, o);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Run, RealComputeTraceRecordsTheBytesTheWorkloadMovedAndItsFlags) {
  // A program with another model's bytes (a plan's): the run moves the MLP's tensors.
  Program prog = lowered("Std1F1B", 2, 2);
  for (auto& list : prog.actors)
    for (Instruction& ins : list) ins.bytes = 4096;
  RunOptions o = small_real_run(2);
  o.check = false;
  o.steps = 1;
  o.warmup = 0;
  const RunResult r = run_program(prog, nullptr, o);
  std::set<std::pair<std::string, int64_t>> seen;
  for (const TraceEvent& e : r.trace.events)
    if (e.op != OpKind::kCompute && e.op != OpKind::kOptimizer)
      seen.insert({std::string(to_string(e.op)), e.bytes});
  const int64_t transfer = int64_t{4} * 8 * 8;  // seq x hidden doubles
  const int64_t grads = o.mlp.params_per_stage() * 8;
  EXPECT_EQ(seen, (std::set<std::pair<std::string, int64_t>>{
                      {"send", transfer}, {"recv", transfer}, {"allreduce", grads}}));
  ASSERT_TRUE(r.trace.workload.has_value());
  EXPECT_EQ(
      *r.trace.workload,
      (TraceWorkload{
          .hidden = 8, .ffn = 0, .seq = 4, .layers_per_stage = 2, .optimizer = "sgd", .dp = 2, .experts = 0, .top_k = 0, .ep = 1, .router = ""}));
}

TEST(Run, EmulatedTraceKeepsTheProgramsBytesAndRecordsNoWorkload) {
  Program prog = lowered("Std1F1B", 2, 2);
  for (auto& list : prog.actors)
    for (Instruction& ins : list) ins.bytes = 4096;
  StageTimesCost cost(uniform_stage_times(2, 1e-4, 1e-4, 0, 0));
  RunOptions o;
  o.emulated = true;
  o.steps = 1;
  o.warmup = 0;
  const RunResult r = run_program(prog, &cost, o);
  for (const TraceEvent& e : r.trace.events) EXPECT_EQ(e.bytes, 4096) << e.name();
  EXPECT_FALSE(r.trace.workload.has_value());
}

TEST(Run, FaultInjectionsThatCannotTakeEffectAreRefused) {
  const Program prog = lowered("Std1F1B", 2, 2);
  int64_t max_send_tag = -1;
  for (const auto& list : prog.actors)
    for (const Instruction& ins : list)
      if (ins.op == OpKind::kSend) max_send_tag = std::max(max_send_tag, ins.tag);
  const std::string tags = "(tags 0.." + std::to_string(max_send_tag) + "; -1 = drop none)";
  RunOptions o = small_real_run(1);
  o.check = false;
  o.drop_tag = 999;
  EXPECT_EQ(run_error_of(prog, nullptr, o),
            "--inject-drop 999: no message of the program has tag 999 " + tags);
  o.drop_tag = -7;
  EXPECT_EQ(run_error_of(prog, nullptr, o),
            "--inject-drop -7: no message of the program has tag -7 " + tags);
  o.drop_tag = -1;
  o.kill_actor = 7;
  o.kill_at_instruction = 3;
  EXPECT_EQ(run_error_of(prog, nullptr, o),
            "--inject-kill 7:3: actor 7 is beyond the program's 2 actors (0..1)");
  o.kill_actor = 0;
  o.kill_at_instruction = 99999;
  const std::string n = std::to_string(prog.actors[0].size());
  EXPECT_EQ(run_error_of(prog, nullptr, o), "--inject-kill 0:99999: actor 0 has " + n +
                                                " instructions (0.." +
                                                std::to_string(prog.actors[0].size() - 1) + ")");
  o.kill_actor = -1;
  o.mlp.fault = MlpFault::kCorruptGrad;
  EXPECT_EQ(run_error_of(prog, nullptr, o),
            "--inject corrupt-grad: plants a numerical fault for --check to catch; give --check");
}

TEST(Run, EmulatedInstructionLongerThanTheTimeoutIsRefusedBeforeTheRun) {
  const Program prog = lowered("Std1F1B", 2, 2);
  StageTimesCost cost(uniform_stage_times(2, 2.0, 0.01, 0, 0));
  RunOptions o;
  o.emulated = true;
  o.steps = 1;
  o.warmup = 0;
  o.timeout_s = 1;
  // An InputError, before the run (a run would fail with a RuntimeFailure on the timeout).
  EXPECT_EQ(run_error_of(prog, &cost, o),
            "--timeout-s 1 is shorter than the emulated 'F0@s0' of actor 0 (2 s): a worker "
            "waiting for it would time out; give a --timeout-s above 2 s (or a smaller "
            "--time-scale)");
}

TEST(Run, EmulatedRunNeedsACostModelAndCheckNeedsRealCompute) {
  Program prog = lowered("GPipe", 2, 2);
  RunOptions o;
  o.emulated = true;
  EXPECT_THROW(run_program(prog, nullptr, o), InputError);
  StageTimesCost cost(uniform_stage_times(2, 0, 0, 0, 0));
  o.check = true;
  EXPECT_THROW(run_program(prog, &cost, o), InputError);
}

TEST(ThreadsBackend, AllreduceSumsInReplicaOrderOnEveryReplica) {
  ThreadsWorld world(1, 3);
  std::vector<std::vector<double>> data = {{1, 2}, {10, 20}, {100, 200}};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] { world.backend(0, r)->allreduce_sum(data[r], 5); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(data[r], (std::vector<double>{111, 222}));
}

TEST(ThreadsBackend, ReceiveTimesOutWithoutAMessageAndAbortWakesWaiters) {
  ThreadsWorld world(2, 1);
  auto b = world.backend(1, 0);
  std::vector<char> payload;
  int h = b->post_recv(0, 7);
  EXPECT_FALSE(b->wait_recv(h, b->now_s() + 0.05, &payload));
  world.backend(0, 0)->post_send(1, 7, {'x'});
  EXPECT_TRUE(b->wait_recv(h, b->now_s() + 1, &payload));
  EXPECT_EQ(payload, std::vector<char>{'x'});
  int h2 = b->post_recv(0, 8);
  std::thread aborter([&] { world.abort("test abort"); });
  EXPECT_FALSE(b->wait_recv(h2, b->now_s() + 30, &payload));
  aborter.join();
  EXPECT_EQ(b->abort_reason(), "test abort");
}

TEST(ThreadsBackend, AlltoallvMovesEveryBlockToItsMemberWithinEachGroup) {
  // 4 replicas in groups of 2: {0, 1} and {2, 3}. Replica r sends member i of its group
  // (i + 1) copies of 10 r + i; member 1 of group 1 sends nothing to member 0.
  ThreadsWorld world(1, 4);
  std::vector<std::vector<std::vector<double>>> got(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      std::vector<std::vector<double>> send(2);
      for (int i = 0; i < 2; ++i) send[i].assign(i + 1, 10.0 * r + i);
      if (r == 3) send[0].clear();
      got[r] = world.backend(0, r)->alltoallv(2, std::move(send), 5);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    const int first = r / 2 * 2, me = r % 2;
    ASSERT_EQ(got[r].size(), 2u);
    for (int i = 0; i < 2; ++i) {
      const int from = first + i;
      std::vector<double> expected(me + 1, 10.0 * from + me);
      if (from == 3 && me == 0) expected.clear();
      EXPECT_EQ(got[r][i], expected) << "replica " << r << " from " << from;
    }
  }
}

TEST(ThreadsBackend, AlltoallvTimesOutWithoutItsPeerAndAbortWakesIt) {
  ThreadsWorld world(1, 2);
  auto b = world.backend(0, 0);
  try {
    b->alltoallv(2, {{1.0}, {2.0}}, 0.05);
    ADD_FAILURE() << "expected a timeout";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("alltoall: timed out"), std::string::npos) << e.what();
  }
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    world.abort("peer died");
  });
  try {
    b->alltoallv(2, {{1.0}, {2.0}}, 30);
    ADD_FAILURE() << "expected the abort to end the wait";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("alltoall: aborted"), std::string::npos) << e.what();
  }
  aborter.join();
}

TEST(MoeRouting, TopKPicksTheLargestScoresAndBreaksTiesToTheLowerExpert) {
  const double scores[] = {0.5, 2.0, 0.5, 2.0, -1.0};
  EXPECT_EQ(moe_top_k(scores, 5, 2), (std::vector<int>{1, 3}));
  EXPECT_EQ(moe_top_k(scores, 5, 3), (std::vector<int>{1, 3, 0}));
}

TEST(MoeRouting, ExpertOwnerIsExpertOverExpertsPerEpRank) {
  MlpConfig c;
  c.experts = 8;
  c.ep = 2;
  EXPECT_EQ(moe_expert_owner(c, 3), 0);
  EXPECT_EQ(moe_expert_owner(c, 4), 1);
  c.ep = 4;
  EXPECT_EQ(moe_expert_owner(c, 7), 3);
}

TEST(MoeRun, EpOneAndEpTwoTrainTheSameModelAsTheIndependentReference) {
  // The same MoE model on dp 2 with its experts on every replica (ep 1) and sharded (ep 2):
  // both pass the check, and the weights they share agree with the reference.
  ScheduleParams params;
  params.num_actors = 2;
  params.num_microbatches = 2;
  const Program prog = lower(generate_schedule("1f1b", params), {});
  for (int ep : {1, 2}) {
    RunOptions o;
    o.dp = 2;
    o.steps = 2;
    o.check = true;
    o.mlp.hidden = 8;
    o.mlp.ffn = 16;
    o.mlp.seq = 3;
    o.mlp.layers_per_stage = 1;
    o.mlp.experts = 4;
    o.mlp.top_k = 2;
    o.mlp.ep = ep;
    const RunResult r = run_program(prog, nullptr, o);
    EXPECT_TRUE(r.reference.passed) << "ep " << ep << ": " << r.reference.first_difference;
    EXPECT_FALSE(r.orchestration.ran);
    EXPECT_LT(r.reference.max_rel_diff_weights, 1e-12);
  }
}

TEST(MoeRun, EpThatDoesNotDivideDpIsABadInput) {
  ScheduleParams params;
  params.num_actors = 2;
  params.num_microbatches = 2;
  const Program prog = lower(generate_schedule("1f1b", params), {});
  RunOptions o;
  o.dp = 3;
  o.mlp.experts = 4;
  o.mlp.top_k = 2;
  o.mlp.ep = 2;
  EXPECT_THROW(run_program(prog, nullptr, o), InputError);
}

}  // namespace
}  // namespace jaxpp
