#include "schedules/rule_scheduler.h"

#include <cassert>
#include <map>
#include <utility>

namespace jaxpp {
namespace {

// Successor lists over program indices: data dependencies plus control edges.
struct ProgramGraph {
  std::vector<std::vector<int>> succs;
  std::vector<std::vector<int>> preds;

  explicit ProgramGraph(const RuleProgram& program)
      : succs(program.tasks.size()), preds(program.tasks.size()) {
    for (size_t i = 0; i < program.tasks.size(); ++i) {
      for (int p : program.preds[i]) add(p, static_cast<int>(i));
    }
  }
  void add(int before, int after) {
    succs[before].push_back(after);
    preds[after].push_back(before);
  }
};

ProgramSort sort_graph(const ProgramGraph& graph) {
  const int n = static_cast<int>(graph.succs.size());
  std::vector<int> pending(n);
  for (int i = 0; i < n; ++i) pending[i] = static_cast<int>(graph.preds[i].size());
  std::vector<char> placed(n, 0);
  ProgramSort out;
  out.order.reserve(n);
  auto place = [&](int i) {
    placed[i] = 1;
    out.order.push_back(i);
    for (int s : graph.succs[i]) --pending[s];
  };
  std::vector<int> remaining(n);
  for (int i = 0; i < n; ++i) remaining[i] = i;
  std::vector<int> next;
  while (!remaining.empty()) {
    next.clear();
    bool progressed = false;
    for (int i : remaining) {
      if (pending[i] <= 0) {
        place(i);
        progressed = true;
      } else {
        next.push_back(i);
      }
    }
    if (!progressed) {
      // MLIR gives up on the first task not yet placed: it stays where it is.
      out.forced.push_back(next.front());
      place(next.front());
      next.erase(next.begin());
    }
    remaining.swap(next);
  }
  return out;
}

}  // namespace

std::string_view to_string(ProgramOrder order) {
  switch (order) {
    case ProgramOrder::kMicrobatchMajor:
      return "microbatch";
    case ProgramOrder::kReversedBackward:
      return "reversed-backward";
  }
  return "?";
}

int RuleProgram::index_of(const TaskRef& t) const {
  if (t.stage < 0 || t.stage >= num_stages || t.microbatch < 0 || t.microbatch >= num_microbatches)
    return -1;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i] == t) return static_cast<int>(i);
  }
  return -1;
}

std::vector<bool> split_where_gradient_is_sent(const Placement& placement) {
  std::vector<bool> split(placement.num_stages(), false);
  for (int s = 1; s < placement.num_stages(); ++s) {
    split[s] = placement.actor_of(s - 1) != placement.actor_of(s);
  }
  return split;
}

RuleProgram make_rule_program(const Placement& placement, int num_microbatches,
                              std::vector<bool> split_backward, ProgramOrder order) {
  RuleProgram prog;
  prog.num_actors = placement.num_actors;
  prog.placement = placement;
  prog.num_stages = placement.num_stages();
  prog.num_microbatches = num_microbatches;
  prog.split_backward = std::move(split_backward);
  prog.order = order;
  const int S = prog.num_stages;
  const int m = num_microbatches;
  assert(static_cast<int>(prog.split_backward.size()) == S && "one split flag per stage");
  // Index of each task, filled as tasks are appended: [kind][stage][microbatch].
  std::vector<std::vector<std::vector<int>>> at(
      4, std::vector<std::vector<int>>(S, std::vector<int>(m, -1)));
  auto append = [&](TaskKind kind, int stage, int k, std::vector<int> preds) {
    at[static_cast<int>(kind)][stage][k] = static_cast<int>(prog.tasks.size());
    prog.tasks.push_back(TaskRef{kind, stage, k});
    prog.actor.push_back(placement.actor_of(stage));
    prog.preds.push_back(std::move(preds));
  };
  auto idx = [&](TaskKind kind, int stage, int k) { return at[static_cast<int>(kind)][stage][k]; };
  auto forwards = [&](int k) {
    for (int s = 0; s < S; ++s) {
      std::vector<int> preds;
      if (s > 0) preds.push_back(idx(TaskKind::kF, s - 1, k));
      append(TaskKind::kF, s, k, std::move(preds));
    }
  };
  // `previous` is the microbatch whose backward came before in program order (-1 for none).
  auto backwards = [&](int k, int previous) {
    for (int s = S - 1; s >= 0; --s) {
      std::vector<int> preds{idx(TaskKind::kF, s, k)};
      if (s + 1 < S) {
        preds.push_back(idx(prog.split_backward[s + 1] ? TaskKind::kI : TaskKind::kB, s + 1, k));
      }
      if (prog.split_backward[s]) {
        append(TaskKind::kI, s, k, std::move(preds));
        std::vector<int> w_preds{idx(TaskKind::kI, s, k)};
        if (previous >= 0) w_preds.push_back(idx(TaskKind::kW, s, previous));
        append(TaskKind::kW, s, k, std::move(w_preds));
      } else {
        if (previous >= 0) preds.push_back(idx(TaskKind::kB, s, previous));
        append(TaskKind::kB, s, k, std::move(preds));
      }
    }
  };
  if (order == ProgramOrder::kMicrobatchMajor) {
    for (int k = 0; k < m; ++k) {
      forwards(k);
      backwards(k, k - 1);
    }
  } else {
    for (int k = 0; k < m; ++k) forwards(k);
    for (int k = m - 1; k >= 0; --k) backwards(k, k + 1 < m ? k + 1 : -1);
  }
  return prog;
}

RuleProgram make_wrap_around_program(int num_actors) {
  RuleProgram prog;
  prog.num_actors = num_actors;
  prog.placement.num_actors = num_actors;
  prog.num_stages = num_actors;
  prog.num_microbatches = num_actors;
  prog.split_backward.assign(num_actors, false);
  for (int c = 0; c < num_actors; ++c) {
    for (int j = 0; j < num_actors; ++j) {
      std::vector<int> preds;
      if (j > 0) preds.push_back(static_cast<int>(prog.tasks.size()) - 1);
      prog.tasks.push_back(TaskRef{TaskKind::kF, j, c});
      prog.actor.push_back((c + j) % num_actors);
      prog.preds.push_back(std::move(preds));
    }
  }
  return prog;
}

ProgramSort sort_program(const RuleProgram& program, const std::vector<ControlEdge>& edges) {
  ProgramGraph graph(program);
  for (const ControlEdge& e : edges) graph.add(e.before, e.after);
  return sort_graph(graph);
}

std::vector<std::vector<TaskRef>> per_actor_orders(const RuleProgram& program,
                                                   const std::vector<int>& order) {
  std::vector<std::vector<TaskRef>> out(program.num_actors);
  for (int i : order) out[program.actor[i]].push_back(program.tasks[i]);
  return out;
}

Schedule schedule_from_orders(std::string name, const RuleProgram& program,
                              const std::vector<std::vector<TaskRef>>& orders) {
  Schedule out;
  out.name = std::move(name);
  out.placement = program.placement;
  out.num_stages = program.num_stages;
  out.num_microbatches = program.num_microbatches;
  out.split_backward = program.split_backward;
  for (const std::vector<TaskRef>& tasks : orders) {
    std::vector<ScheduleItem> items;
    items.reserve(tasks.size());
    for (const TaskRef& t : tasks) items.push_back({t});
    out.actors.push_back(std::move(items));
  }
  return out;
}

namespace {

// Program indices of each actor's tasks, in program order.
std::vector<std::vector<int>> tasks_by_actor(const RuleProgram& program) {
  std::vector<std::vector<int>> by_actor(program.num_actors);
  for (size_t i = 0; i < program.tasks.size(); ++i) {
    by_actor[program.actor[i]].push_back(static_cast<int>(i));
  }
  return by_actor;
}

}  // namespace

std::vector<ControlEdge> rule_edges(const RuleProgram& program, const MustHappenBefore& rule) {
  std::vector<ControlEdge> edges;
  const int num_actors = program.num_actors;
  const std::vector<std::vector<int>> by_actor = tasks_by_actor(program);
  for (int r = 0; r < num_actors; ++r) {
    for (int a : by_actor[r]) {
      for (int b : by_actor[r]) {
        if (a != b && rule(program.tasks[a], program.tasks[b], r, num_actors)) {
          edges.push_back({a, b, 0});
        }
      }
    }
  }
  return edges;
}

std::vector<std::vector<TaskRef>> schedule_by_rules(const RuleProgram& program,
                                                    const MustHappenBefore& rule) {
  const ProgramSort sorted = sort_program(program, rule_edges(program, rule));
  if (sorted.forced.empty()) return per_actor_orders(program, sorted.order);
  return schedule_by_rules_pairwise(program, rule);
}

std::vector<std::vector<TaskRef>> schedule_by_rules_pairwise(const RuleProgram& program,
                                                             const MustHappenBefore& rule) {
  ProgramGraph graph(program);
  const int n = static_cast<int>(program.tasks.size());
  const int num_actors = program.num_actors;
  // Shardy's TargetDependsOnSourceOp: is `target` reachable from `source` along dependencies
  // without passing a task later in the program than `target`? Positions are program indices
  // (the program is not reordered until the sort).
  std::vector<int> seen(n, -1);
  std::vector<int> stack;
  int stamp = 0;
  auto depends = [&](int source, int target) {
    if (source > target) return false;
    ++stamp;
    stack.assign(1, source);
    seen[source] = stamp;
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      if (x == target) return true;
      for (int s : graph.succs[x]) {
        if (s <= target && seen[s] != stamp) {
          seen[s] = stamp;
          stack.push_back(s);
        }
      }
    }
    return false;
  };
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b || program.actor[a] != program.actor[b]) continue;
      // Shardy tests the dependencies first; both tests are free of side effects, so testing the
      // rule first gives the same edges.
      if (!rule(program.tasks[a], program.tasks[b], program.actor[a], num_actors)) continue;
      if (depends(a, b) || depends(b, a)) continue;
      graph.add(a, b);
    }
  }
  return per_actor_orders(program, sort_graph(graph).order);
}

}  // namespace jaxpp
