// Engine semantics on hand-built programs with hand-computed start/end times.
#include "simulator/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "costmodel/stage_times_cost.h"
#include "graph/error.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "tests/simulator/test_programs.h"

namespace jaxpp {
namespace {

using testing::lower_for_test;
using testing::parse_short_grid;

TaskRef T(TaskKind k, int s, int mb) { return TaskRef{k, s, mb}; }

// Fixed compute durations per instruction index, one link for everything.
class FakeCost : public CostProvider {
 public:
  double compute = 1.0;
  double latency = 0.0;
  double bandwidth = 100.0;
  double allreduce = 0.0;
  double collective_busy = 0.0;  // CostProvider::collective_busy_s
  double compute_s(int, const Instruction& ins) const override {
    return ins.op == OpKind::kCompute ? compute : 0.0;
  }
  double p2p_latency_s(int, int) const override { return latency; }
  double p2p_bandwidth_bytes_per_s(int, int) const override { return bandwidth; }
  int link_id(int, int) const override { return 0; }
  double allreduce_s(int, const Instruction&) const override { return allreduce; }
  double collective_busy_s(int, const Instruction&) const override { return collective_busy; }
};

Program two_stage_1f1b() {
  // actor0: F0 F1 B0 B1; actor1: F0 B0 F1 B1 (Std1F1B(2), m = 2).
  return lower_for_test({0, 1},
                        {{{T(TaskKind::kF, 0, 0)},
                          {T(TaskKind::kF, 0, 1)},
                          {T(TaskKind::kB, 0, 0)},
                          {T(TaskKind::kB, 0, 1)}},
                         {{T(TaskKind::kF, 1, 0)},
                          {T(TaskKind::kB, 1, 0)},
                          {T(TaskKind::kF, 1, 1)},
                          {T(TaskKind::kB, 1, 1)}}},
                        2);
}

std::map<std::string, std::pair<double, double>> times_by_name(const Program& p,
                                                               const SimResult& r) {
  std::map<std::string, std::pair<double, double>> out;
  for (int a = 0; a < p.num_actors; ++a) {
    for (size_t i = 0; i < p.actors[a].size(); ++i) {
      std::string key = "a";
      key += std::to_string(a);
      key += ' ';
      key += to_string(p.actors[a][i]);
      out[key] = {r.start_s[a][i], r.end_s[a][i]};
    }
  }
  return out;
}

TEST(Engine, MeasuredTimesMatchHandComputedOneFOneB) {
  // T_F = 1, T_B = 1, T_W = 1 (B = 2), T_comm = 0.5.
  const Program p = two_stage_1f1b();
  StageTimesCost cost(uniform_stage_times(2, 1.0, 1.0, 1.0, 0.5));
  const SimResult r = simulate(p, cost, {});
  auto t = times_by_name(p, r);
  using P = std::pair<double, double>;
  EXPECT_EQ(t["a0 F0@s0"], P(0, 1));
  EXPECT_EQ(t["a0 F1@s0"], P(1, 2));
  EXPECT_EQ(t["a1 F0@s1"], P(1.5, 2.5));
  EXPECT_EQ(t["a1 B0@s1"], P(2.5, 4.5));
  EXPECT_EQ(t["a1 F1@s1"], P(4.5, 5.5));  // its input arrived at 2.5; the stream was busy
  EXPECT_EQ(t["a0 B0@s0"], P(5, 7));
  EXPECT_EQ(t["a1 B1@s1"], P(5.5, 7.5));
  EXPECT_EQ(t["a0 B1@s0"], P(8, 10));
  EXPECT_DOUBLE_EQ(r.makespan_s, 10.0);
  EXPECT_EQ(r.num_instructions, p.num_instructions());
  // Actor 0: span 10, busy 6 -> the longest span, bubble 0.4.
  EXPECT_EQ(r.bubble_actor, 0);
  EXPECT_DOUBLE_EQ(r.bubble_rate, 0.4);
  EXPECT_DOUBLE_EQ(r.actors[1].busy_s, 6.0);
  EXPECT_DOUBLE_EQ(r.actors[1].span_s(), 6.0);
}

TEST(Engine, SendAndRecvStartAndEndTogether) {
  const Program p = two_stage_1f1b();
  StageTimesCost cost(uniform_stage_times(2, 1.0, 1.0, 1.0, 0.25));
  const SimResult r = simulate(p, cost, {});
  for (const TraceEvent& e : r.trace.events) {
    if (e.op != OpKind::kSend) continue;
    bool found = false;
    for (const TraceEvent& f : r.trace.events) {
      if (f.op == OpKind::kRecv && f.tag == e.tag) {
        EXPECT_DOUBLE_EQ(f.start_s, e.start_s);
        EXPECT_DOUBLE_EQ(f.end_s, e.end_s);
        EXPECT_DOUBLE_EQ(e.duration_s(), 0.25);
        found = true;
      }
    }
    EXPECT_TRUE(found) << e.name();
  }
}

TEST(Engine, UnitCostsGiveSchedulesMdMakespans) {
  // SCHEDULES.md: F=1, B=2, I=W=1: Std1F1B(4) m=8 -> 33, ZeroBubble(4) m=8 -> 27.
  StageTimesCost cost(uniform_stage_times(4, 1, 1, 1, 0));
  const auto std1f1b = parse_short_grid({
      "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
      "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
      "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
      "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7",
  });
  EXPECT_DOUBLE_EQ(simulate(lower_for_test({0, 1, 2, 3}, std1f1b, 8), cost, {}).makespan_s, 33);
  const auto zb = parse_short_grid({
      "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
      "F0 F1 F2 I0 F3 I1 W0 F4 I2 W1 F5 I3 W2 F6 I4 W3 F7 I5 W4 I6 W5 I7 W6 W7",
      "F0 F1 I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 F6 I5 W3 F7 I6 W4 I7 W5 W6 W7",
      "F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 W3 F7 I7 W4 W5 W6 W7",
  });
  EXPECT_DOUBLE_EQ(simulate(lower_for_test({0, 1, 2, 3}, zb, 8), cost, {}).makespan_s, 27);
}

TEST(Engine, StopAfterStepEndsTheRunOnceTheStepTimeIsKnownToBeLarger) {
  // Std1F1B(4), m = 8, F = 1, B = 2: makespan 33; with an iteration overhead of 0.5, 33.5.
  StageTimesCost cost(uniform_stage_times(4, 1, 1, 1, 0));
  const Program program = lower_for_test(
      {0, 1, 2, 3},
      parse_short_grid({"F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
                        "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
                        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
                        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"}),
      8);
  SimOptions so;
  so.record_trace = false;
  so.iteration_overhead_s = 0.5;
  const SimResult full = simulate(program, cost, so);
  EXPECT_FALSE(full.stopped);
  EXPECT_DOUBLE_EQ(full.step_time_s, 33.5);
  // A limit at or above the step time changes nothing.
  so.stop_after_step_s = 33.5;
  const SimResult same = simulate(program, cost, so);
  EXPECT_FALSE(same.stopped);
  EXPECT_EQ(same.step_time_s, full.step_time_s);
  EXPECT_EQ(same.num_instructions, full.num_instructions);
  // Below it: stopped at the first instruction end past the limit, no metrics.
  so.stop_after_step_s = 20;
  const SimResult stopped = simulate(program, cost, so);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_GT(stopped.stopped_at_step_s, 20);
  EXPECT_LE(stopped.stopped_at_step_s, 21.5);  // instructions end on a 1-unit grid: 21 + 0.5
  EXPECT_EQ(stopped.step_time_s, 0);
  EXPECT_TRUE(stopped.actors.empty());
}

TEST(Engine, ConcurrentTransfersOnOneLinkShareBandwidthEqually) {
  // Actor 0 computes once, then sends 100 bytes to actors 1 and 2 over one shared link of
  // 100 B/s: alone each would take 1 s; together both finish at 1 + 2 = 3.
  Program p;
  p.num_actors = 3;
  p.num_stages = 1;
  p.num_microbatches = 1;
  p.stage_to_actor = {0};
  Instruction c{OpKind::kCompute, {T(TaskKind::kF, 0, 0)}, 0, -1, 0, -1, {}};
  Instruction s1{OpKind::kSend, {T(TaskKind::kF, 0, 0)}, 0, 1, 100, 1, {0}};
  Instruction s2{OpKind::kSend, {T(TaskKind::kF, 0, 0)}, 0, 2, 100, 2, {0}};
  Instruction r1{OpKind::kRecv, {T(TaskKind::kF, 0, 0)}, 0, 0, 100, 1, {}};
  Instruction r2{OpKind::kRecv, {T(TaskKind::kF, 0, 0)}, 0, 0, 100, 2, {}};
  p.actors = {{c, s1, s2}, {r1}, {r2}};
  FakeCost cost;
  SimResult r = simulate(p, cost, {});
  EXPECT_DOUBLE_EQ(r.end_s[0][1], 3.0);
  EXPECT_DOUBLE_EQ(r.end_s[0][2], 3.0);
  EXPECT_DOUBLE_EQ(r.end_s[1][0], 3.0);
  // A smaller second transfer leaves early and the first speeds up again:
  // both share until the 50-byte one is done at 1 + 1 = 2, the rest (50 bytes) alone takes 0.5.
  p.actors[0][2].bytes = p.actors[2][0].bytes = 50;
  r = simulate(p, cost, {});
  EXPECT_DOUBLE_EQ(r.end_s[0][2], 2.0);
  EXPECT_DOUBLE_EQ(r.end_s[0][1], 2.5);
  EXPECT_EQ(r.p2p_bytes, 150);
}

TEST(Engine, LatencyIsPaidBeforeTheBandwidthPhase) {
  Program p;
  p.num_actors = 2;
  p.num_stages = 1;
  p.num_microbatches = 1;
  p.stage_to_actor = {0};
  p.actors = {{Instruction{OpKind::kSend, {T(TaskKind::kF, 0, 0)}, 0, 1, 200, 7, {}}},
              {Instruction{OpKind::kRecv, {T(TaskKind::kF, 0, 0)}, 0, 0, 200, 7, {}}}};
  FakeCost cost;
  cost.latency = 0.5;
  const SimResult r = simulate(p, cost, {});
  EXPECT_DOUBLE_EQ(r.end_s[1][0], 2.5);
}

TEST(Engine, DeadlockListsTheBlockedInstructionOfEveryActor) {
  // Each actor waits to receive before it sends: nobody can start.
  Program p;
  p.num_actors = 2;
  p.num_stages = 2;
  p.num_microbatches = 1;
  p.stage_to_actor = {0, 1};
  const TaskRef f0 = T(TaskKind::kF, 0, 0), f1 = T(TaskKind::kF, 1, 0);
  p.actors = {
      {Instruction{OpKind::kRecv, {f1}, 1, 1, 8, 1, {}},
       Instruction{OpKind::kCompute, {f0}, 0, -1, 0, -1, {0}},
       Instruction{OpKind::kSend, {f0}, 0, 1, 8, 2, {1}}},
      {Instruction{OpKind::kRecv, {f0}, 0, 0, 8, 3, {}},
       Instruction{OpKind::kCompute, {f1}, 1, -1, 0, -1, {0}},
       Instruction{OpKind::kSend, {f1}, 1, 0, 8, 4, {1}}},
  };
  // Tags 1 and 3 have no sender: fix them to pair recv(1) with send(4) etc.
  p.actors[0][0].tag = 4;
  p.actors[1][0].tag = 2;
  FakeCost cost;
  try {
    simulate(p, cost, {});
    FAIL() << "expected a deadlock";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("deadlock"), std::string::npos) << msg;
    EXPECT_NE(msg.find("actor 0: #0 recv"), std::string::npos) << msg;
    EXPECT_NE(msg.find("actor 1: #0 recv"), std::string::npos) << msg;
  }
}

TEST(Engine, UnmatchedSendIsAnInputError) {
  Program p;
  p.num_actors = 2;
  p.num_stages = 1;
  p.num_microbatches = 1;
  p.stage_to_actor = {0};
  p.actors = {{Instruction{OpKind::kSend, {T(TaskKind::kF, 0, 0)}, 0, 1, 8, 5, {}}}, {}};
  FakeCost cost;
  EXPECT_THROW(simulate(p, cost, {}), InputError);
}

TEST(Engine, GradientReductionWaitsForLastBackwardUnlessOverlapped) {
  // Actor 0: B0 (stage 0), allreduce s0 (dep on B0), B1 of another stage.
  Program p;
  p.num_actors = 1;
  p.num_stages = 2;
  p.num_microbatches = 1;
  p.stage_to_actor = {0, 0};
  p.actors = {{Instruction{OpKind::kCompute, {T(TaskKind::kB, 1, 0)}, 1, -1, 0, -1, {}},
               Instruction{OpKind::kAllReduce, {}, 1, -1, 64, -1, {0}},
               Instruction{OpKind::kCompute, {T(TaskKind::kB, 0, 0)}, 0, -1, 0, -1, {}}}};
  FakeCost cost;
  cost.allreduce = 0.5;
  SimResult r = simulate(p, cost, {});
  EXPECT_DOUBLE_EQ(r.start_s[0][1], 2.0);
  EXPECT_DOUBLE_EQ(r.makespan_s, 2.5);
  SimOptions overlap;
  overlap.overlap_grad_reduce = true;
  r = simulate(p, cost, overlap);
  EXPECT_DOUBLE_EQ(r.start_s[0][1], 1.0);
  EXPECT_DOUBLE_EQ(r.makespan_s, 2.0);
  EXPECT_EQ(r.collective_bytes, 64);
}

TEST(Engine, ACollectiveKeepsItsStreamBusyForItsBusyTimeAndReleasesItsDependentsAtItsEnd) {
  // Actor 0: all-gather G1, compute C1 (dep G1), all-gather G2, compute C2 (dep G2). A gather
  // lasts 0.5 s (its exposed part) but keeps the collective stream busy 2 s (its hidden blocks).
  Program p;
  p.num_actors = 1;
  p.num_stages = 1;
  p.num_microbatches = 2;
  p.stage_to_actor = {0};
  p.actors = {{Instruction{OpKind::kAllGather, {T(TaskKind::kF, 0, 0)}, 0, -1, 8, -1, {}},
               Instruction{OpKind::kCompute, {T(TaskKind::kF, 0, 0)}, 0, -1, 0, -1, {0}},
               Instruction{OpKind::kAllGather, {T(TaskKind::kF, 0, 1)}, 0, -1, 8, -1, {}},
               Instruction{OpKind::kCompute, {T(TaskKind::kF, 0, 1)}, 0, -1, 0, -1, {2}}}};
  FakeCost cost;
  cost.compute = 1.0;
  cost.allreduce = 0.5;
  cost.collective_busy = 2.0;
  SimResult r = simulate(p, cost, {});
  // C1 starts when G1 ends (0.5); G2 waits for the stream until 2.0 and ends at 2.5; C2 starts
  // then (C1 ended at 1.5).
  EXPECT_DOUBLE_EQ(r.start_s[0][1], 0.5);
  EXPECT_DOUBLE_EQ(r.start_s[0][2], 2.0);
  EXPECT_DOUBLE_EQ(r.start_s[0][3], 2.5);
  EXPECT_DOUBLE_EQ(r.makespan_s, 3.5);
  // A busy time not above the duration changes nothing: G2 follows G1 at 0.5.
  cost.collective_busy = 0.25;
  r = simulate(p, cost, {});
  EXPECT_DOUBLE_EQ(r.start_s[0][2], 0.5);
  EXPECT_DOUBLE_EQ(r.start_s[0][3], 1.5);
  EXPECT_DOUBLE_EQ(r.makespan_s, 2.5);
  // The hold past the last instruction's end does not count in the makespan.
  Program one = p;
  one.actors[0].resize(2);
  one.num_microbatches = 1;
  cost.collective_busy = 10.0;
  EXPECT_DOUBLE_EQ(simulate(one, cost, {}).makespan_s, 1.5);
}

TEST(Engine, MemoryGrowsAtForwardAndShrinksAtBackward) {
  const Program p = two_stage_1f1b();
  StageTimesCost cost(uniform_stage_times(2, 1.0, 1.0, 1.0, 0.5));
  SimOptions o;
  o.static_bytes_per_actor = {1000, 2000};
  o.stash_bytes_per_stage = {10, 20};
  const SimResult r = simulate(p, cost, o);
  EXPECT_EQ(r.actors[0].peak_memory_bytes, 1000 + 2 * 10);  // F0, F1 stashed together
  EXPECT_EQ(r.actors[1].peak_memory_bytes, 2000 + 20);      // one at a time
  EXPECT_EQ(r.peak_stashed_per_stage, (std::vector<int>{2, 1}));
  // The last memory sample of each actor is back at its static bytes.
  std::map<int, int64_t> last;
  for (const MemorySample& m : r.trace.memory) last[m.actor] = m.bytes;
  EXPECT_EQ(last[0], 1000);
  EXPECT_EQ(last[1], 2000);
}

TEST(Engine, StashBytesPerMicrobatchOverrideThePerStageOnes) {
  const Program p = two_stage_1f1b();
  StageTimesCost cost(uniform_stage_times(2, 1.0, 1.0, 1.0, 0.5));
  SimOptions o;
  o.static_bytes_per_actor = {1000, 2000};
  o.stash_bytes_per_stage = {10, 20};
  o.stash_bytes_per_stage_microbatch = {10, 300, 20, 400};  // [stage · m + microbatch]
  const SimResult r = simulate(p, cost, o);
  EXPECT_EQ(r.actors[0].peak_memory_bytes, 1000 + 10 + 300);  // F0, F1 stashed together
  EXPECT_EQ(r.actors[1].peak_memory_bytes, 2000 + 400);       // one at a time, the larger
  std::map<int, int64_t> last;
  for (const MemorySample& m : r.trace.memory) last[m.actor] = m.bytes;
  EXPECT_EQ(last[0], 1000);  // every stash freed by its own size
  EXPECT_EQ(last[1], 2000);
  o.stash_bytes_per_stage_microbatch = {10, 300, 20};
  EXPECT_THROW(simulate(p, cost, o), InputError);
}

TEST(Engine, CriticalPathEndsAtTheLastInstructionAndIsContiguous) {
  const Program p = two_stage_1f1b();
  StageTimesCost cost(uniform_stage_times(2, 1.0, 1.0, 1.0, 0.5));
  const SimResult r = simulate(p, cost, {});
  ASSERT_FALSE(r.critical_path.empty());
  EXPECT_DOUBLE_EQ(r.critical_path.back().end_s, r.makespan_s);
  EXPECT_DOUBLE_EQ(r.critical_path.front().start_s, 0.0);
  for (size_t i = 1; i < r.critical_path.size(); ++i) {
    EXPECT_LE(r.critical_path[i - 1].end_s, r.critical_path[i].start_s + 1e-12);
  }
}

// A lowered ZeroBubble program (tags 0, 1, 2, ...) with all-reduces and optimizers.
Program lowered_zero_bubble() {
  ScheduleParams params;
  params.num_actors = 4;
  params.num_microbatches = 8;
  return lower(generate_schedule("ZeroBubble", params), {});
}

TEST(Engine, TagsOutsideTheLoweredRangeGiveTheSameRun) {
  // Negative and large tags (a program from JSON may use any) pair sends with recvs as the dense
  // tags 0, 1, 2, ... of lower() do; enough of them to grow the engine's table of such tags.
  const Program dense = lowered_zero_bubble();
  Program sparse = dense;
  int64_t num_tags = 0;
  for (auto& list : sparse.actors) {
    for (Instruction& in : list) {
      if (in.op != OpKind::kSend && in.op != OpKind::kRecv) continue;
      in.tag = in.tag % 2 == 0 ? -1 - in.tag : in.tag * 1000003 + (int64_t{1} << 40);
      ++num_tags;
    }
  }
  ASSERT_GT(num_tags, 64);
  StageTimesCost cost(uniform_stage_times(4, 1.0, 2.0, 1.0, 0.25));
  const SimResult a = simulate(dense, cost, {});
  const SimResult b = simulate(sparse, cost, {});
  EXPECT_EQ(a.start_s, b.start_s);
  EXPECT_EQ(a.end_s, b.end_s);
  EXPECT_EQ(sim_result_to_json(a, dense), sim_result_to_json(b, sparse));
}

TEST(Engine, DuplicateAndUnmatchedTagsAreNamedForAnyTag) {
  for (const int64_t tag : {int64_t{3}, int64_t{-7}, int64_t{1} << 50}) {
    Program p;
    p.num_actors = 2;
    p.num_stages = 1;
    p.num_microbatches = 1;
    p.stage_to_actor = {0};
    const TaskRef f = T(TaskKind::kF, 0, 0);
    p.actors = {{Instruction{OpKind::kSend, {f}, 0, 1, 8, tag, {}},
                 Instruction{OpKind::kSend, {f}, 0, 1, 8, tag, {}}},
                {Instruction{OpKind::kRecv, {f}, 0, 0, 8, tag, {}}}};
    FakeCost cost;
    try {
      simulate(p, cost, {});
      FAIL() << "expected a duplicate tag error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("actor 0 instruction 1: duplicate tag " +
                                           std::to_string(tag)),
                std::string::npos)
          << e.what();
    }
    p.actors[0].pop_back();
    p.actors[1][0].tag = tag + 1;  // now neither end has a partner; the first one is named
    try {
      simulate(p, cost, {});
      FAIL() << "expected an unmatched send";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("actor 0 instruction 0: no matching recv with tag " +
                                           std::to_string(tag)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Engine, AnInvalidLinkNamesTheSenderThenTheReceiver) {
  // The transfer's two actors come from the nodes of its ends: sender first.
  for (const auto& [from, to] : {std::pair{0, 1}, std::pair{1, 0}}) {
    Program p;
    p.num_actors = 2;
    p.num_stages = 1;
    p.num_microbatches = 1;
    p.stage_to_actor = {0};
    p.actors.resize(2);
    p.actors[from] = {Instruction{OpKind::kSend, {T(TaskKind::kF, 0, 0)}, 0, to, 8, 0, {}}};
    p.actors[to] = {Instruction{OpKind::kRecv, {T(TaskKind::kF, 0, 0)}, 0, from, 8, 0, {}}};
    FakeCost cost;
    cost.bandwidth = 0;
    try {
      simulate(p, cost, {});
      FAIL() << "expected an invalid link";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("invalid link between actors " + std::to_string(from) +
                                           " and " + std::to_string(to)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Engine, ActorMetricsAgreeWithThePerInstructionTimes) {
  // busy_s, first_start_s and last_end_s are gathered as instructions end; they must equal the
  // same sums over the recorded times in program order (compute and optimizer instructions),
  // and the makespan the latest end.
  const Program p = lowered_zero_bubble();
  StageTimesCost cost(uniform_stage_times(4, 1.0, 2.0, 1.0, 0.25));
  const SimResult r = simulate(p, cost, {});
  double makespan = 0;
  for (int a = 0; a < p.num_actors; ++a) {
    double busy = 0, first = 0, last = 0;
    bool any = false;
    for (size_t i = 0; i < p.actors[a].size(); ++i) {
      makespan = std::max(makespan, r.end_s[a][i]);
      const OpKind op = p.actors[a][i].op;
      if (op != OpKind::kCompute && op != OpKind::kOptimizer) continue;
      busy += r.end_s[a][i] - r.start_s[a][i];
      first = any ? std::min(first, r.start_s[a][i]) : r.start_s[a][i];
      last = any ? std::max(last, r.end_s[a][i]) : r.end_s[a][i];
      any = true;
    }
    ASSERT_TRUE(any);
    EXPECT_EQ(r.actors[a].busy_s, busy) << "actor " << a;
    EXPECT_EQ(r.actors[a].first_start_s, first) << "actor " << a;
    EXPECT_EQ(r.actors[a].last_end_s, last) << "actor " << a;
    EXPECT_EQ(r.actors[a].idle_s, r.makespan_s - busy) << "actor " << a;
  }
  EXPECT_EQ(r.makespan_s, makespan);
  ASSERT_FALSE(r.critical_path.empty());
  EXPECT_EQ(r.critical_path.back().end_s, makespan);
}

TEST(Engine, ResultsAreDeterministic) {
  const Program p = two_stage_1f1b();
  StageTimesCost cost(uniform_stage_times(2, 1.0, 1.0, 1.0, 0.0));
  const SimResult a = simulate(p, cost, {});
  const SimResult b = simulate(p, cost, {});
  EXPECT_EQ(a.start_s, b.start_s);
  EXPECT_EQ(sim_result_to_json(a, p), sim_result_to_json(b, p));
}

}  // namespace
}  // namespace jaxpp
