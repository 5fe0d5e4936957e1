// Schedule validator.
//
// Checks, in this order (later checks run only when the earlier ones pass, so that one mistake
// gives one clear message rather than a cascade):
//   1. shape: actors.size() == placement.num_actors, placement covers num_stages stages,
//      split_backward has one entry per stage;
//   2. every token in range (stage < S, microbatch < m) and on the actor its stage is placed on;
//   3. every task exactly once: per (stage, microbatch) F once, and B once when the stage uses
//      a full backward (split_backward[s] == false) or I once and W once when it is split; a
//      stage never mixes B with I/W; missing and duplicated tasks are named;
//   4. local order: W after its I, B/I after its F (same actor);
//   5. dependency replay (replay.h) with unit costs: the orders complete without deadlock; a
//      deadlock lists the blocked task on every actor and what it waits for.
// Every error names actor, position (index in the actor's list), task and reason, e.g.
//   actor 1, position 5: W0@s1 runs before its I0@s1 (position 7)
//
// Peak in-flight activations (always computed from the per-actor order, even when invalid):
// walking an actor's list, +1 at every F(s,k) and -1 when the activations of (s,k) are freed,
// i.e. at B(s,k) or at I(s,k) (the input-gradient backward consumes the stash; the weights'
// backward W keeps only what it needs, which this count ignores). The unit is one microbatch's
// activations of one stage; the peak is the maximum after each task. 1F1B gives p on actor 0,
// GPipe m, ZB-H2 2p-1.
#pragma once

#include <string>
#include <vector>

#include "schedules/replay.h"
#include "schedules/schedule.h"

namespace jaxpp {

struct ValidationReport {
  std::vector<std::string> errors;  // empty when valid
  std::vector<int> peak_in_flight;  // per actor, in stage-microbatch activation units
  bool ok() const { return errors.empty(); }
};

// At most `max_errors` errors are listed (a final line says how many were left out).
ValidationReport validate_schedule(const Schedule& schedule, int max_errors = 20);

// InputError "<where>: invalid schedule: <first error>[; <second error> ...]" when invalid.
void validate_or_throw(const Schedule& schedule, const std::string& where = "schedule");

// As validate_or_throw, and returns the unit-cost dependency replay (replay.h, UnitCosts) that
// check 5 ran, so a caller that needs the issue order (lower.h) does not replay again.
ReplayResult validate_and_replay_or_throw(const Schedule& schedule,
                                          const std::string& where = "schedule");

// Peak in-flight activations per actor (see above); tolerant of invalid schedules.
std::vector<int> peak_in_flight(const Schedule& schedule);

}  // namespace jaxpp
