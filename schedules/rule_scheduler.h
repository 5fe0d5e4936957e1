// Rule-based scheduling: per-actor orders from pairwise "must happen before" rules, the way
// Shardy:MPMD (openxla/shardy, dialect/mpmd/transforms/optimize) turns its pipeline schedules
// into per-mesh orders.
//
// Shardy does not emit an order directly. It starts from the *program*: every task of one
// training iteration in the order the traced training loop produces them, with their data
// dependencies. For every ordered pair (a, b) of tasks on one actor that do not already depend
// on each other, a predicate `must_happen_before(a, b)` may add a control dependency a -> b. A
// topological sort then reorders the program (MLIR's sortTopologically): it sweeps the tasks not
// yet placed in their program order, again and again, and places every task whose dependencies
// are all placed at the moment it is visited. Whatever the rules leave open is therefore decided
// by data flow across actors and then by program order. The per-actor orders are the projection
// of that one global order, so they never deadlock.
//
// The program model (docs/schedules.md, "Shardy:MPMD's schedules"):
//   kMicrobatchMajor   microbatch k = 0, 1, ...: F(0,k) ... F(S-1,k), then the backward of
//                      stage S-1 ... 0 of microbatch k (a training loop that runs forward and
//                      backward of one microbatch, then the next);
//   kReversedBackward  every forward as above, then the backwards from the last microbatch
//                      down to microbatch 0 (the backward of a scan over microbatches).
// A backward of stage s is one task B(s,k), or when split_backward[s] the pair I(s,k) W(s,k) in
// that order (Shardy's split of a backward fragment into the part whose results are transferred
// and the part that keeps the rest, the weight gradient). Data dependencies: those of replay.h,
// plus gradient accumulation: the backward that holds the weight gradient (B, or W when split)
// of stage s depends on the one of the previous microbatch in program order.
//
// A predicate sees two tasks of the same actor `actor` out of `num_actors`; the pair is ordered
// (a before b?). It must be a pure function.
//
// Usage:
//   RuleProgram prog = make_rule_program(make_placement(PlacementKind::kLinear, 4, 4), 6,
//                                        std::vector<bool>(4, false),
//                                        ProgramOrder::kMicrobatchMajor);
//   std::vector<std::vector<TaskRef>> orders = schedule_by_rules(prog, my_rule);
#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/placement.h"
#include "graph/task.h"
#include "schedules/schedule.h"

namespace jaxpp {

enum class ProgramOrder { kMicrobatchMajor, kReversedBackward };
inline constexpr std::array kAllProgramOrders = {ProgramOrder::kMicrobatchMajor,
                                                 ProgramOrder::kReversedBackward};
std::string_view to_string(ProgramOrder order);  // "microbatch", "reversed-backward"

struct RuleProgram {
  int num_actors = 0;
  Placement placement;  // stage -> actor (empty stage_to_actor for a wrap-around program)
  int num_stages = 0;
  int num_microbatches = 0;
  std::vector<bool> split_backward;  // per stage
  ProgramOrder order = ProgramOrder::kMicrobatchMajor;
  std::vector<TaskRef> tasks;            // program order
  std::vector<int> actor;                // actor of tasks[i]
  std::vector<std::vector<int>> preds;   // data dependencies of tasks[i] (indices, all < i)
  int index_of(const TaskRef& t) const;  // -1 when the program has no such task
};

RuleProgram make_rule_program(const Placement& placement, int num_microbatches,
                              std::vector<bool> split_backward, ProgramOrder order);

// Shardy's ParallelPipelinesWithWrapAround program: forward only, p microbatches; microbatch c
// enters at actor c and visits actors c, c+1, ..., c+p-1 (mod p), one forward per hop. Task
// F(j, c) has stage = hop j (the j-th block of layers), lives on actor (c + j) mod p and depends
// on F(j-1, c); program order microbatch-major. `placement` is empty (the actor of a stage depends
// on the microbatch), split_backward all false.
RuleProgram make_wrap_around_program(int num_actors);

// Shardy's backward split policy: a backward is split into I and W only when it sends a result
// to another actor and keeps one (the weight gradient), i.e. stage s > 0 whose stage s-1 lives on
// another actor. Stage 0 sends nothing, so it keeps a full B.
std::vector<bool> split_where_gradient_is_sent(const Placement& placement);

using MustHappenBefore =
    std::function<bool(const TaskRef& a, const TaskRef& b, int actor, int num_actors)>;

// A control dependency `before` -> `after` (program indices) and the rule that asked for it.
struct ControlEdge {
  int before = 0;
  int after = 0;
  int rule = 0;
};

// MLIR's sortTopologically over the program with its data dependencies and `edges`: the program
// order of the result. When the dependencies form a cycle the sort gets stuck; like MLIR it then
// takes the first task not yet placed as placed and goes on, and `forced` lists those tasks.
struct ProgramSort {
  std::vector<int> order;
  std::vector<int> forced;
};
ProgramSort sort_program(const RuleProgram& program, const std::vector<ControlEdge>& edges);

// Every pair (a, b) on one actor with rule(a, b) true, as edges (rule index 0).
std::vector<ControlEdge> rule_edges(const RuleProgram& program, const MustHappenBefore& rule);

// The per-actor orders Shardy's scheduler produces for `rule`. Adding every rule edge and sorting
// gives the same orders as Shardy's pairwise loop whenever the edges are acyclic (an edge between
// tasks that already depend on each other in its own direction does not change the sort); when
// they are not, this runs the pairwise loop itself (schedule_by_rules_pairwise).
std::vector<std::vector<TaskRef>> schedule_by_rules(const RuleProgram& program,
                                                    const MustHappenBefore& rule);

// Shardy's scheduler literally: for every ordered pair of tasks on one actor, in program order,
// skip it when either already depends on the other (Shardy's TargetDependsOnSourceOp: a search
// along data and control dependencies added so far that never passes a task later in the program
// than the target), else add a control dependency when rule(a, b); then sort_program. Quadratic
// in tasks per actor times the search; tests use it to check schedule_by_rules.
std::vector<std::vector<TaskRef>> schedule_by_rules_pairwise(const RuleProgram& program,
                                                             const MustHappenBefore& rule);

// Projects a program order onto the actors.
std::vector<std::vector<TaskRef>> per_actor_orders(const RuleProgram& program,
                                                   const std::vector<int>& order);

// The Schedule named `name` of a (placed) program run in the per-actor `orders`: one task per
// item, the program's placement, sizes and split.
Schedule schedule_from_orders(std::string name, const RuleProgram& program,
                              const std::vector<std::vector<TaskRef>>& orders);

}  // namespace jaxpp
