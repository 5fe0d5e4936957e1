// Schedules on a given placement: what `--assign` (graph/assignment.h) runs.
//
// An assignment fixes the stages and their actors; a schedule is then accepted when
//   1. its generator, asked for the assignment's p actors, S stages and m microbatches, places
//      the stages exactly as the assignment does: the linear-placement schedules (GPipe, Std1F1B,
//      ZeroBubble, ...) when every actor holds one stage in order, the loop ones
//      (Interleaved1F1B, KimiK2, InterleavedGPipe, LoopedBFS, MegatronInterleaved, Circular, ...)
//      when stage s is on actor s mod p, the V ones (DualPipeV, ZB-V) when actor r holds stages
//      r and 2p-1-r; the generator's own order is used, so the result equals the schedule
//      without an assignment; or
//   2. it is defined for any placement: Shardy:MPMD's schedules are "must happen before" rules
//      over (microbatch, forward/backward, weight-gradient split, mesh index) applied by its
//      scheduler to whatever assignment of computations to meshes the program has. So GPipe and
//      Std1F1B (which are Shardy's GPipe and 1F1B order for order on the linear placement),
//      Circular, CircularWithReversedBackward, GPipeBut1F1BForLastMesh, ZeroBubbleH1 and the
//      three ZeroBubbleH2 variants are ordered by their Shardy rule on the assignment's placement
//      (rule_scheduler.h, shardy.h: program model, split where a gradient is sent). The orders
//      are projections of one topological order of the program, so they never deadlock.
// Anything else is an InputError, one line naming `where` (the assignment), the schedule and
// the reason, with the schedules that would fit.
//
// Usage:
//   Schedule s = schedule_on_placement("Circular", assignment.placement, 8, false, "a.json");
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/placement.h"
#include "schedules/schedule.h"

namespace jaxpp {

Schedule schedule_on_placement(std::string_view name, const Placement& placement,
                               int num_microbatches, bool fuse_steady_state,
                               const std::string& where);

// Canonical names of the schedules defined for any placement (case 2 above), in registry order.
std::vector<std::string> placement_free_schedules();

// Whether `name` (any alias) is one of them.
bool is_placement_free_schedule(std::string_view name);

}  // namespace jaxpp
