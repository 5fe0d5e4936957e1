// Shardy:MPMD's pipeline schedules (openxla/shardy, dialect/mpmd/transforms/optimize/
// pipeline_schedule.cc), as "must happen before" predicates turned into per-actor orders by the
// rule scheduler (rule_scheduler.h, which follows Shardy's scheduler.cc).
//
// Shardy's words map onto this project's as follows: a mesh is an actor; a fragment's call
// counter is the microbatch; transpose count 0 is a forward F, 1 a backward (B, I or W); a split
// backward's "transferred" half Bᵃ is I and its weight-gradient half Bʷ ("split, drop
// transferred") is W. The mesh index is the actor index and the number of meshes the number of
// actors. docs/schedules.md states every rule.
//
// Each predicate is a pure function of the two tasks (same actor), the actor and the number of
// actors. The generators (make_shardy_*) build the program (rule_scheduler.h) with Shardy's
// placement and split policy for that schedule and return an ordinary Schedule.
#pragma once

#include <array>
#include <string_view>

#include "schedules/registry.h"
#include "schedules/rule_scheduler.h"

namespace jaxpp {

enum class ShardySchedule {
  k1F1B,
  kGPipe,
  kCircular,
  kCircularWithReversedBackward,
  kGPipeBut1F1BForLastMesh,
  kZeroBubbleH1,
  kZeroBubbleH2ZeroTxLatency,
  kZeroBubbleH2HalfTxLatency,
  kZeroBubbleH2FullTxLatency,
};
inline constexpr std::array kAllShardySchedules = {
    ShardySchedule::k1F1B,
    ShardySchedule::kGPipe,
    ShardySchedule::kCircular,
    ShardySchedule::kCircularWithReversedBackward,
    ShardySchedule::kGPipeBut1F1BForLastMesh,
    ShardySchedule::kZeroBubbleH1,
    ShardySchedule::kZeroBubbleH2ZeroTxLatency,
    ShardySchedule::kZeroBubbleH2HalfTxLatency,
    ShardySchedule::kZeroBubbleH2FullTxLatency,
};
std::string_view to_string(ShardySchedule s);  // Shardy's spelling, e.g. "ZeroBubbleH1"

// The predicate of a schedule.
MustHappenBefore shardy_rule(ShardySchedule s);

// The latency-hiding ZeroBubbleH2 warm-up: forwards streamed before the first backward on
// `actor`, floor(2(n - actor) - 1 + 2(n - actor - 1) * latency_stage_fraction) with Shardy's
// single-precision arithmetic (fraction 0, 0.5 or 1 for the three built-ins).
int zero_bubble_h2_init_forwards(int actor, int num_actors, float latency_stage_fraction);

// Whether the schedule splits backwards (the ZeroBubble ones) and which program it assumes
// (kReversedBackward for CircularWithReversedBackward, else kMicrobatchMajor).
bool shardy_splits_backward(ShardySchedule s);
ProgramOrder shardy_program_order(ShardySchedule s);

// The program Shardy would schedule: placement linear (S = p) or, for the Circular ones, loop
// (stage s on actor s mod p, S divisible by p); split per shardy_splits_backward. InputError
// (naming the schedule and the values) when the shape does not fit.
RuleProgram shardy_program(ShardySchedule s, const ScheduleParams& params);
// The same program on any placement (an assignment of layers to actors, graph/assignment.h):
// Shardy applies its rules to whatever assignment of computations to meshes the program has, so
// the rules need no particular placement. params.num_actors and num_stages are not read (the
// placement's count); the other checks are shardy_program's.
RuleProgram shardy_program_on(ShardySchedule s, const Placement& placement,
                              const ScheduleParams& params);

// The schedule Shardy's rules and scheduler produce, named by Shardy's spelling.
Schedule make_shardy_schedule(ShardySchedule s, const ScheduleParams& params);

// ParallelPipelinesWithWrapAround: forward only, m = p microbatches, microbatch c entering at
// actor c (rule_scheduler.h, make_wrap_around_program). It is not a Schedule: the actor of a
// stage depends on the microbatch and there is no backward, so it is shown, never simulated,
// lowered or run. Shardy's rule on actor r (the pivot): F(r) first; two microbatches on the same
// side of r in descending order, on different sides in ascending order; so actor r runs
// r, r-1, ..., 0, p-1, ..., r+1. Tasks are F<c>@s<hop>.
inline constexpr std::string_view kParallelPipelinesWithWrapAround =
    "ParallelPipelinesWithWrapAround";
bool is_wrap_around_name(std::string_view name);  // as registry names: case, '-', '_' ignored
bool shardy_wrap_around_rule(const TaskRef& a, const TaskRef& b, int actor, int num_actors);
struct ForwardOnlyOrders {
  int num_actors = 0;
  int num_microbatches = 0;
  std::vector<std::vector<TaskRef>> actors;
};
// InputError unless p >= 1 and m = p.
ForwardOnlyOrders make_parallel_pipelines_with_wrap_around(int num_actors, int num_microbatches);

}  // namespace jaxpp
