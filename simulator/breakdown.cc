#include "simulator/breakdown.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace jaxpp {
namespace {

// Length of the part of [lo, hi] covered by the union of `intervals` (sorted by start).
double covered(const std::vector<std::pair<double, double>>& intervals, double lo, double hi) {
  double total = 0, reach = lo;
  for (const auto& [a, b] : intervals) {
    if (a >= hi) break;
    const double from = std::max(a, reach), to = std::min(b, hi);
    if (to > from) {
      total += to - from;
      reach = to;
    }
  }
  return total;
}

}  // namespace

PassBreakdown instruction_breakdown(const AnalyticCost& cost, const Instruction& ins) {
  PassBreakdown out;
  if (ins.op != OpKind::kCompute) return out;
  for (const TaskRef& t : ins.tasks) {
    const StageBreakdown& b = cost.breakdown(t.stage);
    switch (t.kind) {
      case TaskKind::kF:
        out += b.at(Pass::kForward);
        break;
      case TaskKind::kI:
        out += b.at(Pass::kBackwardInput);
        out += b.at(Pass::kRecompute);
        break;
      case TaskKind::kW:
        out += b.at(Pass::kBackwardWeight);
        break;
      case TaskKind::kB:
        out += b.at(Pass::kBackwardInput);
        out += b.at(Pass::kRecompute);
        out += b.at(Pass::kBackwardWeight);
        out.tp_comm_s -= b.fused_backward_hidden_s;
        break;
    }
  }
  // The all-to-all the group exposes (less than the tasks' sum when an F&B pair hides it).
  out.ep_comm_s = cost.alltoall(0, ins).exposed_s;
  out.other_s += cost.compute_s(0, ins) - out.total_s();  // launch overhead (and rounding)
  return out;
}

std::vector<ActorBreakdown> step_breakdown(const Program& program, const AnalyticCost& cost,
                                           const SimResult& result) {
  std::vector<ActorBreakdown> out(program.num_actors);
  const bool timed = result.start_s.size() == program.actors.size();
  for (int r = 0; r < program.num_actors; ++r) {
    ActorBreakdown& a = out[r];
    a.actor = r;
    const std::vector<Instruction>& list = program.actors[r];
    std::vector<std::pair<double, double>> recvs, reductions;
    // (start, end, the end of the parameter all-gathers it waits for, or 0) of every compute-
    // stream instruction.
    std::vector<std::tuple<double, double, double>> compute;
    for (size_t i = 0; i < list.size(); ++i) {
      const Instruction& ins = list[i];
      if (ins.op == OpKind::kOptimizer) a.optimizer_s += cost.compute_s(r, ins);
      if (ins.op == OpKind::kCompute) {
        const PassBreakdown p = instruction_breakdown(cost, ins);
        a.gemm_s += p.gemm_s;
        a.attention_s += p.attention_s;
        a.elementwise_s += p.elementwise_s;
        a.tp_comm_s += p.tp_comm_s;
        a.cp_comm_s += p.cp_comm_s;
        a.ep_comm_s += p.ep_comm_s;
        a.other_s += p.other_s;
      }
      if (!timed) continue;
      const std::pair<double, double> span{result.start_s[r][i], result.end_s[r][i]};
      if (ins.op == OpKind::kCompute || ins.op == OpKind::kOptimizer) {
        double gathered = 0;
        for (int d : ins.deps)
          if (list[d].op == OpKind::kAllGather)
            gathered = std::max(gathered, result.end_s[r][d]);
        compute.emplace_back(span.first, span.second, gathered);
      }
      if (ins.op == OpKind::kRecv) recvs.push_back(span);
      if (ins.op == OpKind::kAllReduce) reductions.push_back(span);
    }
    const double busy = a.gemm_s + a.attention_s + a.elementwise_s + a.tp_comm_s + a.cp_comm_s +
                        a.ep_comm_s + a.other_s + a.optimizer_s;
    if (timed) {
      std::sort(compute.begin(), compute.end());
      std::sort(recvs.begin(), recvs.end());
      std::sort(reductions.begin(), reductions.end());
      // Idle gaps of the compute stream: until the parameter all-gathers the next compute waits
      // for end they are exposed DP (parameter sharding), then while a transfer to r is in flight
      // they are exposed P2P; after r's last task (only optimizer steps follow) they are exposed
      // DP reduction.
      double last_task_end = 0;
      for (size_t i = 0; i < list.size(); ++i)
        if (list[i].op == OpKind::kCompute)
          last_task_end = std::max(last_task_end, result.end_s[r][i]);
      double cursor = 0;
      const auto gap = [&](double from, double to, double gathered) {
        if (to <= from) return;
        if (gathered > from && from < last_task_end) {
          const double until = std::min({to, gathered, last_task_end});
          a.dp_exposed_s += until - from;
          from = until;
          if (to <= from) return;
        }
        if (from >= last_task_end) {
          a.dp_exposed_s += covered(reductions, from, to);
        } else {
          a.p2p_exposed_s += covered(recvs, from, std::min(to, last_task_end));
          if (to > last_task_end) a.dp_exposed_s += covered(reductions, last_task_end, to);
        }
      };
      for (const auto& [start, end, gathered] : compute) {
        gap(cursor, start, gathered);
        cursor = std::max(cursor, end);
      }
      gap(cursor, result.makespan_s, 0);
    }
    a.bubble_s = std::max(0.0, result.step_time_s - busy - a.p2p_exposed_s - a.dp_exposed_s);
  }
  return out;
}

void add_breakdown_parts(const AnalyticCost& cost, const Program& program, Trace& trace) {
  for (TraceEvent& e : trace.events) {
    if (e.op != OpKind::kCompute || e.stream.kind == StreamKind::kAllToAll) continue;
    const PassBreakdown p = instruction_breakdown(cost, program.actors[e.actor][e.instruction]);
    e.parts.clear();
    const std::pair<const char*, double> parts[] = {
        {"gemm", p.gemm_s},       {"attention", p.attention_s}, {"elementwise", p.elementwise_s},
        {"tp_comm", p.tp_comm_s}, {"cp_comm", p.cp_comm_s},     {"ep_comm", p.ep_comm_s},
        {"other", p.other_s}};
    for (const auto& [name, s] : parts)
      if (s > 0) e.parts.push_back({name, s});
  }
}

nlohmann::json breakdown_to_json(const std::vector<ActorBreakdown>& actors) {
  nlohmann::json out = nlohmann::json::array();
  for (const ActorBreakdown& a : actors) {
    out.push_back({{"actor", a.actor},
                   {"gemm_s", a.gemm_s},
                   {"attention_s", a.attention_s},
                   {"elementwise_s", a.elementwise_s},
                   {"tp_comm_s", a.tp_comm_s},
                   {"cp_comm_s", a.cp_comm_s},
                   {"ep_comm_s", a.ep_comm_s},
                   {"other_s", a.other_s},
                   {"optimizer_s", a.optimizer_s},
                   {"p2p_exposed_s", a.p2p_exposed_s},
                   {"dp_exposed_s", a.dp_exposed_s},
                   {"bubble_s", a.bubble_s}});
  }
  return out;
}

}  // namespace jaxpp
