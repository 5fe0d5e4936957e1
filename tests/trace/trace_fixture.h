// A small hand-built trace shared by the trace/ tests: 2 actors, 2 stages (linear), 2
// microbatches of a 1F1B-like schedule with P2P transfers, an all-reduce and an optimizer step
// per stage, and memory samples. Times below are in milliseconds; the run ends at 11 ms.
#pragma once

#include "trace/trace.h"

namespace jaxpp::testing {

inline TraceEvent make_event(int actor, int instruction, OpKind op, std::vector<TaskRef> tasks,
                             int stage, int peer, int64_t bytes, int64_t tag, double start_ms,
                             double end_ms) {
  TraceEvent e;
  e.actor = actor;
  e.instruction = instruction;
  e.op = op;
  e.tasks = std::move(tasks);
  e.stage = stage;
  e.peer = peer;
  e.bytes = bytes;
  e.tag = tag;
  Instruction ins;
  ins.op = op;
  ins.peer = peer;
  e.stream = stream_of(ins);
  e.start_s = start_ms / 1000.0;
  e.end_s = end_ms / 1000.0;
  return e;
}

inline Trace small_trace() {
  using K = TaskKind;
  const auto t = [](K k, int s, int m) { return TaskRef{k, s, m}; };
  const int64_t act = 4 << 20;  // activation / gradient bytes
  const int64_t grad = 64 << 20;
  Trace tr;
  tr.source = "simulated";
  tr.num_actors = 2;
  tr.num_steps = 1;
  tr.events = {
      make_event(0, 0, OpKind::kCompute, {t(K::kF, 0, 0)}, 0, -1, 0, -1, 0, 1),
      make_event(0, 1, OpKind::kSend, {t(K::kF, 0, 0)}, 0, 1, act, 0, 1, 1.25),
      make_event(1, 0, OpKind::kRecv, {t(K::kF, 0, 0)}, 0, 0, act, 0, 1, 1.25),
      make_event(0, 2, OpKind::kCompute, {t(K::kF, 0, 1)}, 0, -1, 0, -1, 1, 2),
      make_event(1, 1, OpKind::kCompute, {t(K::kF, 1, 0)}, 1, -1, 0, -1, 1.25, 2.25),
      make_event(0, 3, OpKind::kSend, {t(K::kF, 0, 1)}, 0, 1, act, 1, 2, 2.25),
      make_event(1, 2, OpKind::kRecv, {t(K::kF, 0, 1)}, 0, 0, act, 1, 2, 2.25),
      make_event(1, 3, OpKind::kCompute, {t(K::kB, 1, 0)}, 1, -1, 0, -1, 2.25, 4.25),
      make_event(1, 4, OpKind::kSend, {t(K::kB, 1, 0)}, 1, 0, act, 2, 4.25, 4.5),
      make_event(0, 4, OpKind::kRecv, {t(K::kB, 1, 0)}, 1, 1, act, 2, 4.25, 4.5),
      make_event(1, 5, OpKind::kCompute, {t(K::kF, 1, 1)}, 1, -1, 0, -1, 4.25, 5.25),
      make_event(0, 5, OpKind::kCompute, {t(K::kB, 0, 0)}, 0, -1, 0, -1, 4.5, 6.5),
      make_event(1, 6, OpKind::kCompute, {t(K::kB, 1, 1)}, 1, -1, 0, -1, 5.25, 7.25),
      make_event(1, 7, OpKind::kSend, {t(K::kB, 1, 1)}, 1, 0, act, 3, 7.25, 7.5),
      make_event(0, 6, OpKind::kRecv, {t(K::kB, 1, 1)}, 1, 1, act, 3, 7.25, 7.5),
      make_event(1, 8, OpKind::kAllReduce, {}, 1, -1, grad, -1, 7.25, 8.25),
      make_event(0, 7, OpKind::kCompute, {t(K::kB, 0, 1)}, 0, -1, 0, -1, 7.5, 9.5),
      make_event(1, 9, OpKind::kOptimizer, {}, 1, -1, 0, -1, 8.25, 8.75),
      make_event(0, 8, OpKind::kAllReduce, {}, 0, -1, grad, -1, 9.5, 10.5),
      make_event(0, 9, OpKind::kOptimizer, {}, 0, -1, 0, -1, 10.5, 11),
  };
  const int64_t gib = int64_t{1} << 30;
  tr.memory = {{0, 0, gib}, {1, 0, gib}, {0, 1.0 / 1000, gib + act}, {0, 2.0 / 1000, gib + 2 * act},
               {1, 2.25 / 1000, gib + act}, {1, 4.25 / 1000, gib}, {0, 6.5 / 1000, gib + act},
               {0, 9.5 / 1000, gib}};
  sort_trace(tr);
  return tr;
}

}  // namespace jaxpp::testing
