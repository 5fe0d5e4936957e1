// Shardy:MPMD's schedules: the documented examples, the equalities with JaxPP's schedules, the
// rules each order must satisfy, and the rule scheduler against Shardy's literal pairwise loop.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "graph/error.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/shardy.h"
#include "schedules/validate.h"

namespace jaxpp {
namespace {

Schedule shardy(ShardySchedule s, int p, int m, int stages = 0) {
  return make_shardy_schedule(s, {.num_actors = p, .num_stages = stages, .num_microbatches = m});
}

std::vector<std::string> grid_lines(const Schedule& s) {
  std::vector<std::string> lines;
  for (int r = 0; r < s.num_actors(); ++r) lines.push_back(actor_to_text(s, r));
  return lines;
}

// pipeline_schedule.cc, OneFOneBMustHappenBefore's example (4 meshes, 6 microbatches).
TEST(ShardySchedules, OneFOneBReproducesShardysExample) {
  EXPECT_EQ(grid_lines(shardy(ShardySchedule::k1F1B, 4, 6)),
            (std::vector<std::string>{
                "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5", "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5",
                "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5", "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5"}));
}

// GPipeBut1F1BLastMeshHappenBefore's example (3 meshes, 4 microbatches).
TEST(ShardySchedules, GPipeBut1F1BForLastMeshReproducesShardysExample) {
  EXPECT_EQ(grid_lines(shardy(ShardySchedule::kGPipeBut1F1BForLastMesh, 3, 4)),
            (std::vector<std::string>{"F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3",
                                      "F0 B0 F1 B1 F2 B2 F3 B3"}));
}

// ZeroBubbleH1MustHappenBefore's example (4 meshes, 5 microbatches; Bᵃ = I, Bʷ = W). Shardy
// draws mesh 0 as Bᵃ Bʷ pairs but leaves that backward unsplit (it sends nothing): one B here.
TEST(ShardySchedules, ZeroBubbleH1ReproducesShardysExample) {
  const Schedule s = shardy(ShardySchedule::kZeroBubbleH1, 4, 5);
  EXPECT_EQ(grid_lines(s),
            (std::vector<std::string>{"F0 F1 F2 F3 B0 F4 B1 B2 B3 B4",
                                      "F0 F1 F2 I0 F3 I1 W0 F4 I2 W1 I3 W2 I4 W3 W4",
                                      "F0 F1 I0 F2 I1 F3 I2 W0 F4 I3 W1 I4 W2 W3 W4",
                                      "F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 W2 W3 W4"}));
  EXPECT_EQ(s.split_backward, (std::vector<bool>{false, true, true, true}));
}

// CircularMustHappenBeforeBase's example: 2 meshes, 4 stages (A, C on mesh 0; B, D on mesh 1),
// 4 microbatches, forwards "A1 A2 C1 C2 A3 A4 C3 C4"; then the backwards in phases.
TEST(ShardySchedules, CircularReproducesShardysForwardExampleThenBackwardPhases) {
  const Schedule s = shardy(ShardySchedule::kCircular, 2, 4, 4);
  EXPECT_EQ(grid_lines(s),
            (std::vector<std::string>{"F0@s0 F1@s0 F0@s2 F1@s2 F2@s0 F3@s0 F2@s2 F3@s2 "
                                      "B0@s2 B1@s2 B0@s0 B1@s0 B2@s2 B3@s2 B2@s0 B3@s0",
                                      "F0@s1 F1@s1 F0@s3 F1@s3 F2@s1 F3@s1 F2@s3 F3@s3 "
                                      "B0@s3 B1@s3 B0@s1 B1@s1 B2@s3 B3@s3 B2@s1 B3@s1"}));
}

TEST(ShardySchedules, CircularWithReversedBackwardRunsBackwardsFromTheLastPhase) {
  const Schedule s = shardy(ShardySchedule::kCircularWithReversedBackward, 2, 4, 4);
  EXPECT_EQ(grid_lines(s),
            (std::vector<std::string>{"F0@s0 F1@s0 F0@s2 F1@s2 F2@s0 F3@s0 F2@s2 F3@s2 "
                                      "B3@s2 B2@s2 B3@s0 B2@s0 B1@s2 B0@s2 B1@s0 B0@s0",
                                      "F0@s1 F1@s1 F0@s3 F1@s3 F2@s1 F3@s1 F2@s3 F3@s3 "
                                      "B3@s3 B2@s3 B3@s1 B2@s1 B1@s3 B0@s3 B1@s1 B0@s1"}));
}

TEST(ShardySchedules, ZeroBubbleH2WarmUpFollowsShardysFormula) {
  // floor(2(n-r)-1 + 2(n-r-1)*fraction), n = 4.
  const std::map<float, std::vector<int>> expected = {
      {0.0f, {7, 5, 3, 1}}, {0.5f, {10, 7, 4, 1}}, {1.0f, {13, 9, 5, 1}}};
  for (const auto& [fraction, values] : expected) {
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(zero_bubble_h2_init_forwards(r, 4, fraction), values[r]) << fraction << " " << r;
    }
  }
}

// The forwards before the first backward on actor r are min(init_r, m): clause 1 puts F(i),
// i < init_r, before every backward, and clause 3 puts F(init_r - 1 + i) before Ba(i) only.
TEST(ShardySchedules, ZeroBubbleH2StreamsInitForwardsBeforeTheFirstBackward) {
  const std::map<ShardySchedule, float> variants = {
      {ShardySchedule::kZeroBubbleH2ZeroTxLatency, 0.0f},
      {ShardySchedule::kZeroBubbleH2HalfTxLatency, 0.5f},
      {ShardySchedule::kZeroBubbleH2FullTxLatency, 1.0f}};
  for (const auto& [variant, fraction] : variants) {
    for (int p : {2, 3, 4}) {
      for (int m : {1, 3, 8, 16}) {
        const Schedule s = shardy(variant, p, m);
        for (int r = 0; r < p; ++r) {
          int forwards = 0;
          for (const ScheduleItem& item : s.actors[r]) {
            if (item[0].kind != TaskKind::kF) break;
            ++forwards;
          }
          EXPECT_EQ(forwards, std::min(zero_bubble_h2_init_forwards(r, p, fraction), m))
              << to_string(variant) << " p=" << p << " m=" << m << " actor " << r;
        }
      }
    }
  }
}

// Hand derivation, ZeroBubbleH2ZeroTxLatency, p = 2, m = 4: actor 0 (init 3, complement 1,
// unsplit B): F0 F1 F2, then Ba(0) < F(3) < Ba(1), then B1 B2 B3 by program order. Actor 1
// (init 1, complement 3): F0 before every backward; Ba(i) < F(i+1) and F(i) < Ba(i) alternate
// I0 F1 I1 F2 I2 F3 I3; Ba(i+2) < Bw(i) puts W0 after I2 and W1 after I3; Bw(i) < Ba(i+3) puts
// W0 before I3; W2 W3 trail in program order.
TEST(ShardySchedules, ZeroBubbleH2ZeroTxLatencyMatchesAHandDerivation) {
  EXPECT_EQ(
      grid_lines(shardy(ShardySchedule::kZeroBubbleH2ZeroTxLatency, 2, 4)),
      (std::vector<std::string>{"F0 F1 F2 B0 F3 B1 B2 B3", "F0 I0 F1 I1 F2 I2 W0 F3 I3 W1 W2 W3"}));
}

// What the rules leave open is decided by the sort's sweeps in program order: on actor 2, I2
// waits for F5 (rule 3) and I5, later in the program, is visited after F5 in the same sweep.
TEST(ShardySchedules, ZeroBubbleH2HalfTxLatencyLeavesBackpropsToTheSweep) {
  const Schedule s = shardy(ShardySchedule::kZeroBubbleH2HalfTxLatency, 4, 8);
  EXPECT_EQ(actor_to_text(s, 2),
            "F0 F1 F2 F3 I0 F4 I1 F5 I5 I2 F6 I6 W0 I3 F7 I7 W1 W2 W3 I4 W4 W5 W6 W7");
  const RuleProgram program = shardy_program(ShardySchedule::kZeroBubbleH2HalfTxLatency,
                                             {.num_actors = 4, .num_microbatches = 8});
  EXPECT_EQ(
      schedule_by_rules_pairwise(program, shardy_rule(ShardySchedule::kZeroBubbleH2HalfTxLatency)),
      schedule_by_rules(program, shardy_rule(ShardySchedule::kZeroBubbleH2HalfTxLatency)));
}

TEST(ShardySchedules, OneFOneBAndGPipeEqualJaxppsOrderForOrder) {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 12; ++m) {
      const ScheduleParams params{.num_actors = p, .num_microbatches = m};
      EXPECT_EQ(shardy(ShardySchedule::k1F1B, p, m).actors, make_std_1f1b(params).actors)
          << "p=" << p << " m=" << m;
      EXPECT_EQ(shardy(ShardySchedule::kGPipe, p, m).actors, make_gpipe(params).actors)
          << "p=" << p << " m=" << m;
    }
  }
}

TEST(ShardySchedules, ZeroBubbleH1EqualsJaxppsZeroBubbleWhereBothApply) {
  for (int p = 2; p <= 6; ++p) {
    for (int m = p; m <= 14; ++m) {
      const Schedule jaxpp = make_zero_bubble({.num_actors = p, .num_microbatches = m});
      const Schedule ours = shardy(ShardySchedule::kZeroBubbleH1, p, m);
      EXPECT_EQ(ours.actors, jaxpp.actors) << "p=" << p << " m=" << m;
      EXPECT_EQ(ours.split_backward, jaxpp.split_backward);
    }
  }
}

TEST(ShardySchedules, CircularEqualsInterleavedGPipeWhenPhasesAreWholeRounds) {
  int compared = 0;
  for (int p = 1; p <= 4; ++p) {
    for (int v = 1; v <= 3; ++v) {
      for (int m = 1; m <= 12; ++m) {
        if (m % p != 0 && m > p) continue;  // JaxPP's rounds are then not Shardy's phases
        const ScheduleParams params{.num_actors = p, .num_stages = v * p, .num_microbatches = m};
        EXPECT_EQ(make_shardy_schedule(ShardySchedule::kCircular, params).actors,
                  make_interleaved_gpipe(params).actors)
            << "p=" << p << " v=" << v << " m=" << m;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 50);
}

TEST(ShardySchedules, CircularDiffersFromInterleavedGPipeWhenRoundsAreNotPhases) {
  // p = 4, m = 6: JaxPP runs one round of 6 microbatches per stage, Shardy phases of 4.
  const ScheduleParams params{.num_actors = 4, .num_stages = 8, .num_microbatches = 6};
  EXPECT_NE(make_shardy_schedule(ShardySchedule::kCircular, params).actors,
            make_interleaved_gpipe(params).actors);
}

TEST(ShardySchedules, CircularWithReversedBackwardEqualsLoopedBfsInOnePhase) {
  for (int p = 1; p <= 4; ++p) {
    for (int v = 1; v <= 3; ++v) {
      for (int m = 1; m <= p; ++m) {
        const ScheduleParams params{.num_actors = p, .num_stages = v * p, .num_microbatches = m};
        EXPECT_EQ(
            make_shardy_schedule(ShardySchedule::kCircularWithReversedBackward, params).actors,
            make_looped_bfs(params).actors)
            << "p=" << p << " v=" << v << " m=" << m;
      }
    }
  }
}

// Every ordered pair the rule fixes (rule true, and the two tasks not already data-dependent the
// other way round) appears in that order.
TEST(ShardySchedules, EveryOrderHonoursEveryPairItsRuleFixes) {
  for (ShardySchedule kind : kAllShardySchedules) {
    const MustHappenBefore rule = shardy_rule(kind);
    for (int p = 1; p <= 4; ++p) {
      for (int m = 1; m <= 9; m += 2) {
        const bool loop = kind == ShardySchedule::kCircular ||
                          kind == ShardySchedule::kCircularWithReversedBackward;
        const ScheduleParams params{
            .num_actors = p, .num_stages = loop ? 2 * p : p, .num_microbatches = m};
        const RuleProgram program = shardy_program(kind, params);
        const Schedule s = make_shardy_schedule(kind, params);
        for (int r = 0; r < p; ++r) {
          std::map<TaskRef, size_t> position;
          for (size_t i = 0; i < s.actors[r].size(); ++i) position[s.actors[r][i][0]] = i;
          for (const auto& [a, pa] : position) {
            for (const auto& [b, pb] : position) {
              if (a == b || !rule(a, b, r, p)) continue;
              EXPECT_LT(pa, pb) << to_string(kind) << " p=" << p << " m=" << m << " actor " << r
                                << ": " << to_string(a) << " before " << to_string(b);
            }
          }
        }
      }
    }
  }
}

TEST(ShardySchedules, RuleSchedulerEqualsShardysPairwiseLoop) {
  for (ShardySchedule kind : kAllShardySchedules) {
    const bool loop =
        kind == ShardySchedule::kCircular || kind == ShardySchedule::kCircularWithReversedBackward;
    for (int p = 1; p <= 4; ++p) {
      for (int m = 1; m <= 7; ++m) {
        const RuleProgram program = shardy_program(
            kind, {.num_actors = p, .num_stages = loop ? 2 * p : p, .num_microbatches = m});
        EXPECT_EQ(schedule_by_rules(program, shardy_rule(kind)),
                  schedule_by_rules_pairwise(program, shardy_rule(kind)))
            << to_string(kind) << " p=" << p << " m=" << m;
      }
    }
  }
}

TEST(ShardySchedules, EveryScheduleValidatesAndLowers) {
  for (ShardySchedule kind : kAllShardySchedules) {
    const bool loop =
        kind == ShardySchedule::kCircular || kind == ShardySchedule::kCircularWithReversedBackward;
    for (int p : {1, 2, 3, 5, 8}) {
      for (int m : {1, 2, 5, 8, 17}) {
        for (int v : {1, 2, 3}) {
          if (v > 1 && !loop) continue;
          const Schedule s = make_shardy_schedule(
              kind, {.num_actors = p, .num_stages = v * p, .num_microbatches = m});
          const std::string label = std::string(to_string(kind)) + " p=" + std::to_string(p) +
                                    " v=" + std::to_string(v) + " m=" + std::to_string(m);
          const ValidationReport report = validate_schedule(s);
          ASSERT_TRUE(report.ok()) << label << ": " << report.errors[0];
          EXPECT_NO_THROW(lower(s, {})) << label;
        }
      }
    }
  }
}

TEST(ShardySchedules, RegistryFindsShardysNamesCaseInsensitively) {
  EXPECT_EQ(find_schedule("zerobubbleh1")->name, "ZeroBubbleH1");
  EXPECT_EQ(find_schedule("GPIPEBUT1F1BFORLASTMESH")->name, "GPipeBut1F1BForLastMesh");
  EXPECT_EQ(find_schedule("ZeroBubbleH2HalfTxLatency")->name, "ZeroBubbleH2HalfTxLatency");
  EXPECT_EQ(find_schedule("circularwithreversedbackward")->name, "CircularWithReversedBackward");
  EXPECT_EQ(find_schedule("circular")->name, "Circular");
  // Shardy's 1F1B and GPipe are JaxPP's (equal order for order, tested above).
  EXPECT_EQ(find_schedule("1F1B")->name, "Std1F1B");
  EXPECT_EQ(find_schedule("gpipe")->name, "GPipe");
  EXPECT_FALSE(find_schedule("ZeroBubbleH1")->searched_by_default);
}

TEST(ShardySchedules, UnknownNameSuggestsTheNearest) {
  try {
    schedule_or_throw("ZeroBubbleH3");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean ZeroBubbleH1?"), std::string::npos)
        << e.what();
  }
}

TEST(ShardySchedules, ShapeErrorsNameTheScheduleAndValues) {
  try {
    make_shardy_schedule(ShardySchedule::kCircular,
                         {.num_actors = 3, .num_stages = 4, .num_microbatches = 2});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "Circular places stage s on actor s mod p: needs S divisible by p (got S=4, p=3)");
  }
  EXPECT_THROW(make_shardy_schedule(ShardySchedule::kZeroBubbleH1,
                                    {.num_actors = 2, .num_stages = 4, .num_microbatches = 2}),
               InputError);
  EXPECT_THROW(
      make_shardy_schedule(ShardySchedule::k1F1B, {.num_actors = 2, .num_microbatches = 100000}),
      InputError);  // too many pairs for the rule scheduler
}

// ParallelPipelinesWithWrapAroundMustHappenBefore's example (3 meshes, call counters 1..3 there,
// 0..2 here): "F1 F3 F2 / F2 F1 F3 / F3 F2 F1".
TEST(ShardySchedules, ParallelPipelinesWithWrapAroundReproducesShardysExample) {
  const ForwardOnlyOrders orders = make_parallel_pipelines_with_wrap_around(3, 3);
  std::vector<std::vector<std::string>> tokens;
  for (const auto& actor : orders.actors) {
    tokens.emplace_back();
    for (const TaskRef& t : actor) tokens.back().push_back(to_string(t));
  }
  EXPECT_EQ(tokens, (std::vector<std::vector<std::string>>{{"F0@s0", "F2@s1", "F1@s2"},
                                                           {"F1@s0", "F0@s1", "F2@s2"},
                                                           {"F2@s0", "F1@s1", "F0@s2"}}));
}

TEST(ShardySchedules, WrapAroundActorRRunsItsEntryThenDescendingAroundThePivot) {
  for (int p = 1; p <= 7; ++p) {
    const ForwardOnlyOrders orders = make_parallel_pipelines_with_wrap_around(p, p);
    EXPECT_EQ(orders.actors,
              schedule_by_rules_pairwise(make_wrap_around_program(p), shardy_wrap_around_rule));
    for (int r = 0; r < p; ++r) {
      ASSERT_EQ(orders.actors[r].size(), static_cast<size_t>(p));
      for (int k = 0; k < p; ++k) {
        const TaskRef& t = orders.actors[r][k];
        EXPECT_EQ(t.microbatch, ((r - k) % p + p) % p) << "p=" << p << " actor " << r;
        EXPECT_EQ(t.stage, k) << "hop k of the k-th microbatch to arrive";
      }
    }
  }
}

TEST(ShardySchedules, WrapAroundNeedsOneMicrobatchPerActorAndIsShowOnly) {
  try {
    make_parallel_pipelines_with_wrap_around(3, 4);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "ParallelPipelinesWithWrapAround runs one microbatch per actor: needs m = p (got "
              "m=4, p=3)");
  }
  try {
    schedule_or_throw("parallel-pipelines-with-wrap-around");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("only `jaxpp-sim show` prints it"), std::string::npos);
  }
}

TEST(RuleProgram, MicrobatchMajorOrderWithSplitBackwardAndAccumulation) {
  const RuleProgram prog = make_rule_program(make_placement(PlacementKind::kLinear, 2, 2), 2,
                                             {false, true}, ProgramOrder::kMicrobatchMajor);
  std::vector<std::string> tokens;
  for (const TaskRef& t : prog.tasks) tokens.push_back(to_string(t));
  EXPECT_EQ(tokens, (std::vector<std::string>{"F0@s0", "F0@s1", "I0@s1", "W0@s1", "B0@s0", "F1@s0",
                                              "F1@s1", "I1@s1", "W1@s1", "B1@s0"}));
  // W1@s1 accumulates onto W0@s1; B1@s0 onto B0@s0 and needs I1@s1's gradient.
  EXPECT_EQ(prog.preds[8], (std::vector<int>{7, 3}));
  EXPECT_EQ(prog.preds[9], (std::vector<int>{5, 7, 4}));
}

TEST(RuleProgram, ReversedBackwardRunsEveryForwardThenBackwardsFromTheLastMicrobatch) {
  const RuleProgram prog = make_rule_program(make_placement(PlacementKind::kLinear, 2, 2), 2,
                                             {false, false}, ProgramOrder::kReversedBackward);
  std::vector<std::string> tokens;
  for (const TaskRef& t : prog.tasks) tokens.push_back(to_string(t));
  EXPECT_EQ(tokens, (std::vector<std::string>{"F0@s0", "F0@s1", "F1@s0", "F1@s1", "B1@s1", "B1@s0",
                                              "B0@s1", "B0@s0"}));
}

TEST(RuleProgram, SplitOnlyWhereTheGradientIsSentToAnotherActor) {
  EXPECT_EQ(split_where_gradient_is_sent(make_placement(PlacementKind::kLinear, 3, 3)),
            (std::vector<bool>{false, true, true}));
  EXPECT_EQ(split_where_gradient_is_sent(make_placement(PlacementKind::kLinear, 1, 1)),
            (std::vector<bool>{false}));
}

TEST(RuleProgram, ACycleMakesTheSortForceTheFirstTaskLikeMlir) {
  // One actor, F0 then B0 in program order; a control edge B0 -> F0 closes a cycle.
  const RuleProgram prog = make_rule_program(make_placement(PlacementKind::kLinear, 1, 1), 1,
                                             {false}, ProgramOrder::kMicrobatchMajor);
  const ProgramSort sorted = sort_program(prog, {{1, 0, 0}});
  EXPECT_EQ(sorted.forced, (std::vector<int>{0}));
  EXPECT_EQ(sorted.order, (std::vector<int>{0, 1}));
  EXPECT_TRUE(sort_program(prog, {}).forced.empty());
}

TEST(RuleProgram, SortPlacesEachReadyTaskInProgramOrderSweeps) {
  // Two actors; an edge F1@s1 -> B0@s0 (later in the program). The first sweep places every task
  // that is ready when visited and skips B0@s0 and the B1@s0 that accumulates onto it; the
  // second sweep places them.
  const RuleProgram prog = make_rule_program(make_placement(PlacementKind::kLinear, 2, 2), 2,
                                             {false, false}, ProgramOrder::kMicrobatchMajor);
  const int f1 = prog.index_of({TaskKind::kF, 1, 1});
  const int b0 = prog.index_of({TaskKind::kB, 0, 0});
  const ProgramSort sorted = sort_program(prog, {{f1, b0, 0}});
  std::vector<std::string> tokens;
  for (int i : sorted.order) tokens.push_back(to_string(prog.tasks[i]));
  EXPECT_EQ(tokens, (std::vector<std::string>{"F0@s0", "F0@s1", "B0@s1", "F1@s0", "F1@s1", "B1@s1",
                                              "B0@s0", "B1@s0"}));
  EXPECT_TRUE(sorted.forced.empty());
}

}  // namespace
}  // namespace jaxpp
