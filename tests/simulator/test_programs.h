// Test helpers: build small Programs by hand from per-actor task orders, independent of
// schedules/lower.h, so the engine is tested against hand-computed times.
//
// lower_for_test(stage_to_actor, actors, bytes): actors[r] = fused groups in order. For every task
// needing a tensor from another actor (F(s,k) from F(s-1,k); B/I(s,k) from B/I(s+1,k)) a recv is
// emitted right before the compute (which depends on it); for every output going to another
// actor a send is emitted right after the compute (depending on it). Tags are unique per tensor.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "graph/program.h"
#include "graph/task.h"

namespace jaxpp::testing {

inline int64_t tensor_tag(const TaskRef& producer, int num_stages) {
  const int kind = producer.kind == TaskKind::kF ? 0 : 1;
  return (static_cast<int64_t>(producer.microbatch) * num_stages + producer.stage) * 2 + kind;
}

inline Program lower_for_test(const std::vector<int>& stage_to_actor,
                              const std::vector<std::vector<std::vector<TaskRef>>>& actors,
                              int num_microbatches, int64_t bytes = 1000) {
  Program p;
  p.num_actors = static_cast<int>(actors.size());
  p.num_stages = static_cast<int>(stage_to_actor.size());
  p.num_microbatches = num_microbatches;
  p.stage_to_actor = stage_to_actor;
  p.actors.resize(actors.size());
  const int S = p.num_stages;
  for (int r = 0; r < p.num_actors; ++r) {
    auto& list = p.actors[r];
    for (const auto& group : actors[r]) {
      std::vector<int> deps;
      for (const TaskRef& t : group) {
        TaskRef producer = t;
        bool needs = false;
        if (t.kind == TaskKind::kF && t.stage > 0) {
          producer = {TaskKind::kF, t.stage - 1, t.microbatch};
          needs = stage_to_actor[t.stage - 1] != r;
        } else if ((t.kind == TaskKind::kB || t.kind == TaskKind::kI) && t.stage + 1 < S) {
          producer = {TaskKind::kB, t.stage + 1, t.microbatch};
          needs = stage_to_actor[t.stage + 1] != r;
        }
        if (!needs) continue;
        Instruction recv;
        recv.op = OpKind::kRecv;
        recv.tasks = {producer};
        recv.stage = producer.stage;
        recv.peer = stage_to_actor[producer.stage];
        recv.bytes = bytes;
        recv.tag = tensor_tag(producer, S);
        deps.push_back(static_cast<int>(list.size()));
        list.push_back(recv);
      }
      Instruction c;
      c.op = OpKind::kCompute;
      c.tasks = group;
      c.stage = group[0].stage;
      c.deps = deps;
      const int ci = static_cast<int>(list.size());
      list.push_back(c);
      for (const TaskRef& t : group) {
        int consumer_stage = -1;
        if (t.kind == TaskKind::kF && t.stage + 1 < S) consumer_stage = t.stage + 1;
        if ((t.kind == TaskKind::kB || t.kind == TaskKind::kI) && t.stage > 0)
          consumer_stage = t.stage - 1;
        if (consumer_stage < 0 || stage_to_actor[consumer_stage] == r) continue;
        Instruction send;
        send.op = OpKind::kSend;
        send.tasks = {t.kind == TaskKind::kI ? TaskRef{TaskKind::kB, t.stage, t.microbatch} : t};
        send.stage = t.stage;
        send.peer = stage_to_actor[consumer_stage];
        send.bytes = bytes;
        send.tag = tensor_tag(send.tasks[0], S);
        send.deps = {ci};
        list.push_back(send);
      }
    }
  }
  return p;
}

// Parses SCHEDULES.md's short form for a linear placement: one line per actor, tokens "F3",
// "B0", "I2", "W1", "B0*" (merged B); actor r = stage r.
inline std::vector<std::vector<std::vector<TaskRef>>> parse_short_grid(
    const std::vector<std::string>& lines) {
  std::vector<std::vector<std::vector<TaskRef>>> actors;
  for (size_t r = 0; r < lines.size(); ++r) {
    std::istringstream in(lines[r]);
    std::string tok;
    std::vector<std::vector<TaskRef>> list;
    while (in >> tok) {
      const auto kind = parse_task_kind(tok[0]);
      const int mb = std::stoi(tok.substr(1));
      list.push_back({TaskRef{*kind, static_cast<int>(r), mb}});
    }
    actors.push_back(list);
  }
  return actors;
}

}  // namespace jaxpp::testing
