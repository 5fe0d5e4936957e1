// Schedule synthesis: the per-actor order that minimises the step time of a pipeline with given
// per-stage task times, under a memory budget per actor.
//
// Scope: p actors, one stage per actor (linear placement, stage s on actor s), m microbatches,
// split backward on every stage (F, I = backward for inputs, W = backward for weights; the Zero
// Bubble paper's F, B, W). Stage times may differ per stage (costmodel/stage_times_cost.h; T_comm
// of the producing stage is added on every F->F and I->I transfer, one transfer at a time per
// directed link, as the engine's FIFO send/recv streams do).
//
// Memory budget: max_stashed[r] = the most microbatches actor r may hold stashed at once (an F
// stashes its activations, the END of its I frees them; W holds nothing, as in the engine and
// schedules/validate.h). Every budget must be >= 1 (one stashed microbatch per stage is the
// minimum any schedule needs); InputError names the actor and the minimum otherwise.
//
// Algorithm (deterministic; no randomness, ties broken by actor and position):
//   1. Greedy construction in the spirit of the Zero Bubble paper's automatic scheduler (ZB-1p /
//      ZB-2p, Qi et al. 2024, section 3): a list scheduler that simulates time and, whenever an
//      actor is free, runs (a) a forward while in its warm-up (up to w_r forwards before its
//      first I), (b) else an I whose gradient has arrived, (c) else a forward while fewer than
//      cap_r microbatches are stashed, (d) else a pending W to fill the bubble (or, gap-aware,
//      only when the next F/I is known to arrive at least T_W later), (e) else it waits. Several
//      parameter sets are constructed (warm-up w_r = min(K_r, m, a·(p-r)+b) for a few (a, b) —
//      (1,0) is 1F1B's and ZB-H1's warm-up, (2,-1) ZB-H2's —, cap_r = w_r or K_r, eager or
//      gap-aware or lazy W, with or without "I first": the first I runs as soon as its gradient
//      arrives and no warm-up forward starts that would delay it); every built-in schedule with
//      one stage per actor that fits the budget is a candidate too (its B split into I then W).
//   2. Local search from the best candidate: first-improvement hill climbing over moves that keep
//      the budget and the local order (a W moved up to 4 positions earlier or later; adjacent F
//      and I swapped), objective (makespan, Σ actors' last end) evaluated by an O(N) replay
//      (evaluate_orders) whose makespan equals the engine's (tested), until no move improves
//      (a local optimum), the time budget or the evaluation budget runs out.
//   3. The result and every fitting built-in schedule are simulated by the engine
//      (simulate_stage_times); the best is returned, so the result is never slower than a
//      built-in schedule that fits the same budget.
// The output depends only on the inputs and on where the search stopped: with a search that ends
// in a local optimum or at max_evaluations it is identical on every machine; a time budget that
// runs out first makes it depend on the machine's speed (SynthesisResult::stopped_by says which).
//
// Usage:
//   SynthesisOptions o;
//   o.max_stashed = std::vector<int>(8, 8);   // K = p
//   SynthesisResult r = synthesize_schedule(8, 24, uniform_stage_times(8, 1e-3, 1e-3, 1e-3, 0), o);
//   r.schedule  // validated, ready to lower; r.step_time_s from the engine
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "costmodel/stage_times_cost.h"
#include "graph/plan.h"
#include "schedules/schedule.h"

namespace jaxpp {

struct SynthesisProgress {
  double elapsed_s = 0;
  int64_t evaluations = 0;
  double best_step_time_s = 0;
};

struct SynthesisOptions {
  std::vector<int> max_stashed;  // per actor, >= 1
  double time_budget_s = 2.0;    // wall clock for the local search (construction is not bounded)
  int64_t max_evaluations = 0;   // 0 = no bound besides the time budget
  // Called about twice a second during the search.
  std::function<void(const SynthesisProgress&)> progress;
};

// One built-in schedule considered as a candidate.
struct NamedCandidate {
  std::string name;
  bool applicable = false;  // the generator accepts (p, S = p, m)
  bool fits = false;        // its peak stash is within the budget on every actor
  double step_time_s = 0;   // engine, when applicable
  double bubble_rate = 0;   // engine, when applicable
  std::vector<int> peak_stashed;
};

// Greedy constructions synthesize_schedule tries (5 warm-ups x 2 caps x 3 W policies x 2 orders).
inline constexpr int kSynthesisConstructions = 60;

struct SynthesisResult {
  Schedule schedule;              // name "synthesized"; the best order found
  std::string origin;             // "search from greedy(...)", "search from ZeroBubble", ...
  double step_time_s = 0;         // engine (simulate_stage_times)
  double bubble_rate = 0;         // engine
  std::vector<int> peak_stashed;  // per actor (engine)
  double greedy_step_time_s = 0;  // best construction, before the search (replay)
  int constructions = 0;  // greedy constructions tried: all, or fewer when the budget ran out
  int64_t evaluations = 0;        // replays run by the search
  std::string stopped_by;         // "local-optimum", "time-budget" or "evaluation-budget"
  double search_s = 0;            // wall-clock seconds of the search
  std::vector<NamedCandidate> named;
};

// InputError when p < 1, m < 1, the stage times are not for p stages, or a budget is < 1.
SynthesisResult synthesize_schedule(int num_actors, int num_microbatches, const StageTimes& times,
                                    const SynthesisOptions& options);

// The O(N) replay used as the search objective: the makespan of `schedule` (one stage per actor,
// any mix of F, B, I, W single-task items) under `times`, with the engine's measured-mode
// semantics. +infinity when the orders deadlock. Exposed for tests (it must equal the engine).
double replay_makespan_s(const Schedule& schedule, const StageTimes& times);

// ---- Plans (model + cluster through the cost model) ----
// Per-stage times of a plan's stages under its cost model (AnalyticCost): T_F, T_B (= I), T_W of
// one microbatch with the launch overhead of one instruction, T_comm = the latency plus the
// activation bytes over the link bandwidth to the next stage's actor (a lone transfer). InputError
// unless the plan has one stage per actor (virtual stages 1).
StageTimes plan_stage_times(const Plan& plan);
// InputError "<where>: synthesize needs one stage per actor (linear placement); ..." unless the
// plan has one stage per actor.
void require_one_stage_per_actor(const Plan& plan, const std::string& where = "plan");
// Stashed microbatches each actor may hold within `memory_limit_bytes` per device:
// floor((limit - static bytes of the actor) / stash bytes of its stage). InputError naming the
// actor and the minimum (static + one stash) when the limit is below it.
std::vector<int> stash_budget_for_bytes(const Plan& plan, int64_t memory_limit_bytes);
// The plan with `schedule` lowered as build_plan lowers (activation and gradient bytes of the
// cost model, gradient reduction), config.schedule = schedule.name, predicted metrics cleared.
Plan plan_with_schedule(const Plan& plan, const Schedule& schedule);

// Synthesis for a plan: synthesize_schedule on plan_stage_times(plan), then the result and every
// fitting built-in schedule are lowered into the plan and simulated with the cost model
// (simulate_plan: bandwidth sharing, gradient reduction, memory); the fastest is kept, so the
// plan's schedule is never slower than a built-in one within the same budget.
struct PlanSynthesis {
  SynthesisResult synthesis;  // schedule, step_time_s, bubble_rate and peak_stashed: cost model
  Plan plan;                  // plan_with_schedule(input, synthesis.schedule), predicted filled
  nlohmann::json metrics;     // simulate_plan's metrics of `plan`
};
PlanSynthesis synthesize_for_plan(const Plan& plan, const SynthesisOptions& options);

}  // namespace jaxpp
