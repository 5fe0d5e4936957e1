#include "costmodel/alltoall_overlap.h"

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

}  // namespace jaxpp
