#include "schedules/rule_schedule.h"

#include <algorithm>

#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/limits.h"

namespace jaxpp {
namespace {

// Offsets beyond this cannot relate two microbatches of any allowed pipeline.
constexpr int kMaxRuleOffset = kMaxMicrobatches;
// Work bound of the expansion: (pairs of tasks on one actor) x rules.
constexpr int64_t kMaxRulePairChecks = int64_t{1} << 22;

std::vector<TaskKind> parse_kinds(const nlohmann::json& v, const std::string& where) {
  auto one = [&](const nlohmann::json& k) {
    const std::string text = k.is_string() ? k.get<std::string>() : "";
    const auto kind = text.size() == 1 ? parse_task_kind(text[0]) : std::nullopt;
    if (!kind) {
      throw_input_error(where,
                        "expected a task kind F, B, I or W (or a list of them), got " + k.dump());
    }
    return *kind;
  };
  std::vector<TaskKind> kinds;
  if (v.is_array()) {
    if (v.empty()) throw_input_error(where, "expected at least one task kind");
    for (const nlohmann::json& k : v) kinds.push_back(one(k));
  } else {
    kinds.push_back(one(v));
  }
  std::sort(kinds.begin(), kinds.end());
  kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
  return kinds;
}

int bounded_int(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < -kMaxRuleOffset ||
      v.get<int64_t>() > kMaxRuleOffset) {
    throw_input_error(where, "expected an integer between " + std::to_string(-kMaxRuleOffset) +
                                 " and " + std::to_string(kMaxRuleOffset) + ", got " + v.dump());
  }
  return static_cast<int>(v.get<int64_t>());
}

ScheduleRule parse_rule(const nlohmann::json& v, const std::string& where, int num_actors) {
  if (!v.is_object()) throw_input_error(where, "expected a rule object");
  JsonObject obj(v, where);
  obj.reject_unknown({"name", "before", "after", "offset", "relation", "actors"});
  ScheduleRule rule;
  rule.name = obj.single_line_string_or("name", "", "it is printed in messages");
  rule.before = parse_kinds(obj.at("before"), obj.field("before"));
  rule.after = parse_kinds(obj.at("after"), obj.field("after"));
  if (obj.has("offset")) {
    const nlohmann::json& off = obj.at("offset");
    if (off.is_object()) {
      JsonObject o(off, obj.field("offset"));
      o.reject_unknown({"const", "mesh", "meshes"});
      if (o.has("const")) rule.offset_const = bounded_int(o.at("const"), o.field("const"));
      if (o.has("mesh")) rule.offset_mesh = bounded_int(o.at("mesh"), o.field("mesh"));
      if (o.has("meshes")) rule.offset_meshes = bounded_int(o.at("meshes"), o.field("meshes"));
    } else {
      rule.offset_const = bounded_int(off, obj.field("offset"));
    }
  }
  const std::string relation = obj.string_or("relation", "equal");
  if (relation == "equal") {
    rule.relation = RuleRelation::kEqual;
  } else if (relation == "at-least") {
    rule.relation = RuleRelation::kAtLeast;
  } else if (relation == "any") {
    rule.relation = RuleRelation::kAny;
  } else {
    throw_input_error(obj.field("relation"),
                      "expected \"equal\", \"at-least\" or \"any\", got \"" + relation + "\"");
  }
  if (obj.has("actors")) {
    const nlohmann::json& actors = obj.array("actors");
    if (actors.empty()) throw_input_error(obj.field("actors"), "expected at least one actor");
    for (const nlohmann::json& a : actors) {
      if (!a.is_number_integer() || a.get<int64_t>() < -num_actors ||
          a.get<int64_t>() >= num_actors) {
        throw_input_error(obj.field("actors"),
                          "expected actor indices from " + std::to_string(-num_actors) + " to " +
                              std::to_string(num_actors - 1) + " (negative counts from the " +
                              "last), got " + a.dump());
      }
      rule.actors.push_back(static_cast<int>(a.get<int64_t>()));
    }
  }
  return rule;
}

std::string rule_label(const RuleSchedule& rs, int q) {
  std::string label = "rules[" + std::to_string(q) + "]";
  if (!rs.rules[q].name.empty()) label += " (\"" + rs.rules[q].name + "\")";
  return label;
}

bool has_kind(const std::vector<TaskKind>& kinds, TaskKind k) {
  return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
}

// A dependency edge of the expanded program; rule -1 = data dependency.
struct RuleEdge {
  int to = 0;
  int rule = -1;
};

// A cycle through the graph (program indices, first == last), found by depth-first search.
std::vector<std::pair<int, int>> find_cycle(const std::vector<std::vector<RuleEdge>>& succs) {
  const int n = static_cast<int>(succs.size());
  std::vector<char> color(n, 0);  // 0 new, 1 on the stack, 2 done
  struct Frame {
    int node;
    size_t next;
    int via_rule;  // rule of the edge that led here
  };
  for (int root = 0; root < n; ++root) {
    if (color[root] != 0) continue;
    std::vector<Frame> stack{{root, 0, -1}};
    color[root] = 1;
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next == succs[f.node].size()) {
        color[f.node] = 2;
        stack.pop_back();
        continue;
      }
      const RuleEdge e = succs[f.node][f.next++];
      if (color[e.to] == 1) {
        // The cycle: from e.to along the stack to f.node, then the edge back to e.to.
        std::vector<std::pair<int, int>> cycle;  // (node, rule of the edge into the next node)
        size_t start = 0;
        while (stack[start].node != e.to) ++start;
        for (size_t i = start; i < stack.size(); ++i) {
          const int rule_out = i + 1 < stack.size() ? stack[i + 1].via_rule : e.rule;
          cycle.emplace_back(stack[i].node, rule_out);
        }
        return cycle;
      }
      if (color[e.to] == 0) {
        color[e.to] = 1;
        stack.push_back({e.to, 0, e.rule});
      }
    }
  }
  return {};
}

}  // namespace

bool ScheduleRule::applies_to(int actor, int num_actors) const {
  if (actors.empty()) return true;
  for (int a : actors) {
    if ((a < 0 ? a + num_actors : a) == actor) return true;
  }
  return false;
}

bool ScheduleRule::holds(const TaskRef& a, const TaskRef& b, int actor, int num_actors) const {
  if (!has_kind(before, a.kind) || !has_kind(after, b.kind)) return false;
  const int64_t d =
      int64_t{offset_const} + int64_t{offset_mesh} * actor + int64_t{offset_meshes} * num_actors;
  switch (relation) {
    case RuleRelation::kEqual:
      return b.microbatch == a.microbatch + d;
    case RuleRelation::kAtLeast:
      return b.microbatch >= a.microbatch + d;
    case RuleRelation::kAny:
      return true;
  }
  return false;
}

RuleSchedule rule_schedule_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw_input_error(where, "expected a JSON object with a 'rules' list");
  JsonObject obj(j, where);
  obj.reject_unknown({"schedule", "num_actors", "num_stages", "num_microbatches", "placement",
                      "split_backward", "program_order", "unordered", "rules", "format"});
  RuleSchedule rs;
  rs.name = obj.single_line_string_or("schedule", "custom", "it is printed in reports and plans");
  if (obj.has("placement")) {
    rs.placement = placement_from_json(obj.at("placement"), obj.field("placement"));
    if (obj.has("num_actors") && obj.positive_int("num_actors") != rs.placement.num_actors) {
      throw_input_error(obj.field("num_actors"),
                        "says " + std::to_string(obj.positive_int("num_actors")) +
                            " but the placement has " + std::to_string(rs.placement.num_actors));
    }
    if (obj.has("num_stages") && obj.positive_int("num_stages") != rs.placement.num_stages()) {
      throw_input_error(obj.field("num_stages"),
                        "says " + std::to_string(obj.positive_int("num_stages")) +
                            " but the placement has " + std::to_string(rs.placement.num_stages()));
    }
  } else {
    if (!obj.has("num_actors")) {
      throw_input_error(where, "a rule-based schedule needs 'num_actors' or a 'placement'");
    }
    const int p = obj.positive_int("num_actors");
    const int S = obj.positive_int_or("num_stages", p);
    check_pipeline_size(std::max(p, S), 1, where);
    if (S % p != 0) {
      throw_input_error(obj.field("num_stages"),
                        "must be a multiple of num_actors (stage s on actor s mod p), or give a "
                        "'placement' (got " +
                            std::to_string(S) + " stages, " + std::to_string(p) + " actors)");
    }
    rs.placement = make_placement(S == p ? PlacementKind::kLinear : PlacementKind::kLoop, S, p);
  }
  const int S = rs.placement.num_stages();
  const int p = rs.placement.num_actors;
  rs.num_microbatches = obj.positive_int("num_microbatches");
  check_pipeline_size(S, rs.num_microbatches, where);

  rs.split_backward.assign(S, false);
  if (obj.has("split_backward")) {
    const nlohmann::json& split = obj.at("split_backward");
    if (split.is_array()) {
      if (split.size() != static_cast<size_t>(S)) {
        throw_input_error(obj.field("split_backward"), "expected one flag per stage (" +
                                                           std::to_string(S) + "), got " +
                                                           std::to_string(split.size()));
      }
      for (int s = 0; s < S; ++s) {
        if (!split[s].is_boolean()) {
          throw_input_error(obj.field("split_backward"),
                            "expected true or false per stage, got " + split[s].dump());
        }
        rs.split_backward[s] = split[s].get<bool>();
      }
    } else if (split == "where-sent") {
      rs.split_backward = split_where_gradient_is_sent(rs.placement);
    } else if (split != "none") {
      throw_input_error(
          obj.field("split_backward"),
          "expected \"none\", \"where-sent\" or a list of one flag per stage, got " + split.dump());
    }
  }
  const std::string order = obj.string_or("program_order", "microbatch");
  if (order == to_string(ProgramOrder::kMicrobatchMajor)) {
    rs.order = ProgramOrder::kMicrobatchMajor;
  } else if (order == to_string(ProgramOrder::kReversedBackward)) {
    rs.order = ProgramOrder::kReversedBackward;
  } else {
    throw_input_error(obj.field("program_order"),
                      "expected \"microbatch\" or \"reversed-backward\", got \"" + order + "\"");
  }
  const std::string unordered = obj.string_or("unordered", "error");
  if (unordered != "error" && unordered != "program-order") {
    throw_input_error(obj.field("unordered"),
                      "expected \"error\" or \"program-order\", got \"" + unordered + "\"");
  }
  rs.unordered_is_error = unordered == "error";
  const nlohmann::json& rules = obj.array("rules");
  if (rules.empty()) throw_input_error(obj.field("rules"), "expected at least one rule");
  for (size_t q = 0; q < rules.size(); ++q) {
    rs.rules.push_back(parse_rule(rules[q], where + ": rules[" + std::to_string(q) + "]", p));
  }
  return rs;
}

Schedule expand_rule_schedule(const RuleSchedule& rs, const std::string& where) {
  const int n = rs.placement.num_actors;
  // The work bound, checked before the program is built: tasks per actor, squared, per rule.
  std::vector<int64_t> per_actor(n, 0);
  for (int s = 0; s < rs.placement.num_stages(); ++s) {
    per_actor[rs.placement.actor_of(s)] +=
        int64_t{rs.num_microbatches} * (rs.split_backward[s] ? 3 : 2);
  }
  int64_t checks = 0;
  for (int64_t tasks : per_actor) checks += tasks * tasks;
  checks *= static_cast<int64_t>(rs.rules.size());
  if (checks > kMaxRulePairChecks) {
    throw_input_error(where, "the rules would test " + std::to_string(checks) +
                                 " (task pair, rule) combinations; at most " +
                                 std::to_string(kMaxRulePairChecks) +
                                 " (fewer microbatches, stages or rules)");
  }
  const RuleProgram program =
      make_rule_program(rs.placement, rs.num_microbatches, rs.split_backward, rs.order);
  const int num_tasks = static_cast<int>(program.tasks.size());
  std::vector<std::vector<int>> by_actor(n);
  for (int i = 0; i < num_tasks; ++i) by_actor[program.actor[i]].push_back(i);

  // A missing task: a rule kind that no task of the rule's actors has.
  for (size_t q = 0; q < rs.rules.size(); ++q) {
    const ScheduleRule& rule = rs.rules[q];
    for (const std::vector<TaskKind>* kinds : {&rule.before, &rule.after}) {
      for (TaskKind k : *kinds) {
        bool found = false;
        for (int r = 0; r < n && !found; ++r) {
          if (!rule.applies_to(r, n)) continue;
          for (int i : by_actor[r]) {
            if (program.tasks[i].kind == k) {
              found = true;
              break;
            }
          }
        }
        if (!found) {
          const std::string why = k == TaskKind::kB   ? "every stage there has a split backward"
                                  : k == TaskKind::kF ? "no stage there"
                                                      : "no stage there has a split backward";
          throw_input_error(where, rule_label(rs, static_cast<int>(q)) + ": names " +
                                       std::string(to_string(k)) +
                                       " tasks, but its actors have none (" + why + ")");
        }
      }
    }
  }

  std::vector<std::vector<RuleEdge>> succs(num_tasks);
  for (int i = 0; i < num_tasks; ++i) {
    for (int pred : program.preds[i]) succs[pred].push_back({i, -1});
  }
  std::vector<ControlEdge> edges;
  for (int r = 0; r < n; ++r) {
    for (size_t q = 0; q < rs.rules.size(); ++q) {
      const ScheduleRule& rule = rs.rules[q];
      if (!rule.applies_to(r, n)) continue;
      for (int a : by_actor[r]) {
        for (int b : by_actor[r]) {
          if (a == b || !rule.holds(program.tasks[a], program.tasks[b], r, n)) continue;
          edges.push_back({a, b, static_cast<int>(q)});
          succs[a].push_back({b, static_cast<int>(q)});
        }
      }
    }
  }

  const ProgramSort sorted = sort_program(program, edges);
  if (!sorted.forced.empty()) {
    const std::vector<std::pair<int, int>> cycle = find_cycle(succs);
    if (cycle.empty()) throw_input_error(where, "the rules form a cycle");  // not reached
    // The data dependencies alone are acyclic, so the cycle has a rule edge: name the last rule
    // of the file on it, and print the cycle from that edge.
    size_t at = 0;
    for (size_t i = 0; i < cycle.size(); ++i) {
      if (cycle[i].second > cycle[at].second) at = i;
    }
    const int q = cycle.empty() ? 0 : cycle[at].second;
    std::string path;
    constexpr size_t kMaxShown = 12;
    for (size_t k = 0; k <= cycle.size() && k <= kMaxShown; ++k) {
      if (!path.empty()) path += " -> ";
      path += k == kMaxShown && k < cycle.size()
                  ? "..."
                  : to_string(program.tasks[cycle[(at + k) % cycle.size()].first]);
    }
    const TaskRef& a = program.tasks[cycle[at].first];
    const TaskRef& b = program.tasks[cycle[(at + 1) % cycle.size()].first];
    throw_input_error(where, rule_label(rs, q) + ": puts " + to_string(a) + " before " +
                                 to_string(b) + ", which closes a cycle with the data flow " +
                                 "and the other rules: " + path);
  }

  if (rs.unordered_is_error) {
    std::vector<int> position(num_tasks);
    for (int k = 0; k < num_tasks; ++k) position[sorted.order[k]] = k;
    std::vector<int> seen(num_tasks, -1);
    std::vector<int> stack;
    int stamp = 0;
    auto reaches = [&](int from, int to) {
      ++stamp;
      stack.assign(1, from);
      seen[from] = stamp;
      while (!stack.empty()) {
        const int x = stack.back();
        stack.pop_back();
        for (const RuleEdge& e : succs[x]) {
          if (e.to == to) return true;
          if (position[e.to] < position[to] && seen[e.to] != stamp) {
            seen[e.to] = stamp;
            stack.push_back(e.to);
          }
        }
      }
      return false;
    };
    std::vector<int> actor_tasks;
    for (int r = 0; r < n; ++r) {
      actor_tasks.clear();
      for (int i : sorted.order) {
        if (program.actor[i] == r) actor_tasks.push_back(i);
      }
      for (size_t k = 1; k < actor_tasks.size(); ++k) {
        if (reaches(actor_tasks[k - 1], actor_tasks[k])) continue;
        throw_input_error(
            where, "the rules leave " + to_string(program.tasks[actor_tasks[k - 1]]) + " and " +
                       to_string(program.tasks[actor_tasks[k]]) + " on actor " + std::to_string(r) +
                       " unordered (no rule or data dependency orders them); add a rule, or set "
                       "\"unordered\": \"program-order\" to take the program's order");
      }
    }
  }

  return schedule_from_orders(rs.name, program, per_actor_orders(program, sorted.order));
}

}  // namespace jaxpp
