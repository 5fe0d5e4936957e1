// The time of a compute instruction holding MoE layers whose expert-parallel all-to-all runs on
// a communication stream of its own (docs/simulate.md, "Overlap of the all-to-all"). Shared by
// the two cost providers that price it: AnalyticCost (model mode, the all-to-all from the model
// and the cluster) and StageTimesCost (measured mode, the all-to-all given per stage).
//
// Per task t of the group: total(t) = its time with its all-to-all serialised, a2a(t) = that
// all-to-all (dispatch + combine of every MoE layer of the task). With C = the side's compute
// without its all-to-all and A = its all-to-all (F side: forward tasks; B side: I, W and B):
//   overlapped F&B pair   C_F + C_B + max(0, A_F − C_B) + max(0, A_B − C_F)
//   any other group       Σ total(t)           (every all-to-all serialised)
// An F&B pair is a group holding forward tasks and backward tasks that share no (stage,
// microbatch) (a backward of the same microbatch waits for its forward), and `overlap` on
// (MoeOverlap other than kNone). Units: seconds.
//
// Usage:
//   AllToAllGroup g = alltoall_group(ins, overlap,
//       [&](const TaskRef& t) { return task_s(t.kind, t.stage); },
//       [&](const TaskRef& t) { return a2a_s(t.kind, t.stage); });
//   double d = launch_overhead_s + g.compute_s;
#pragma once

#include <algorithm>

#include "graph/program.h"

namespace jaxpp {

struct AllToAllGroup {
  double compute_s = 0;  // the group's duration without launch overhead, exposed part included
  double busy_s = 0;     // the time the all-to-all stream is busy (A_F + A_B)
  double exposed_s = 0;  // the part of busy_s that lengthens the group
};

// Whether the forward and the backward tasks of `ins` can hide each other's all-to-all (above).
bool is_f_and_b_pair(const Instruction& ins);

// total_s(task) and a2a_s(task) are callables (a template, as the simulator asks for every
// compute instruction).
template <class TotalS, class A2aS>
AllToAllGroup alltoall_group(const Instruction& ins, bool overlap, const TotalS& total_s,
                             const A2aS& a2a_s) {
  double c_f = 0, c_b = 0, a_f = 0, a_b = 0;
  for (const TaskRef& t : ins.tasks) {
    const double total = total_s(t);
    const double a2a = a2a_s(t);
    (t.kind == TaskKind::kF ? c_f : c_b) += total - a2a;
    (t.kind == TaskKind::kF ? a_f : a_b) += a2a;
  }
  AllToAllGroup g;
  g.busy_s = a_f + a_b;
  g.exposed_s = g.busy_s;
  if (g.busy_s > 0 && overlap && is_f_and_b_pair(ins))
    g.exposed_s = std::max(0.0, a_f - c_b) + std::max(0.0, a_b - c_f);
  g.compute_s = c_f + c_b + g.exposed_s;
  return g;
}

}  // namespace jaxpp
