#include "costmodel/alltoall_overlap.h"

#include <algorithm>

namespace jaxpp {

bool is_f_and_b_pair(const Instruction& ins) {
  bool fwd = false, bwd = false;
  for (const TaskRef& t : ins.tasks) (t.kind == TaskKind::kF ? fwd : bwd) = true;
  if (!fwd || !bwd) return false;
  for (const TaskRef& f : ins.tasks) {
    if (f.kind != TaskKind::kF) continue;
    for (const TaskRef& b : ins.tasks)
      if (b.kind != TaskKind::kF && b.stage == f.stage && b.microbatch == f.microbatch)
        return false;  // a backward of the same microbatch waits for its forward
  }
  return true;
}

AllToAllGroup alltoall_group(const Instruction& ins, bool overlap,
                             const std::function<double(const TaskRef&)>& total_s,
                             const std::function<double(const TaskRef&)>& a2a_s) {
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
