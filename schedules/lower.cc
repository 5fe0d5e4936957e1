#include "schedules/lower.h"

#include <algorithm>
#include <cassert>
#include <cstdint>

#include "graph/error.h"
#include "schedules/replay.h"
#include "schedules/validate.h"

namespace jaxpp {
namespace {

std::vector<int64_t> per_stage_bytes(const std::vector<int64_t>& bytes, int num_stages,
                                     const char* field) {
  if (bytes.empty()) return std::vector<int64_t>(num_stages, 1);
  if (static_cast<int>(bytes.size()) != num_stages) {
    throw_input_error(std::string("lowering option '") + field + "'",
                      "expected one entry per stage (" + std::to_string(num_stages) + "), got " +
                          std::to_string(bytes.size()));
  }
  for (size_t s = 0; s < bytes.size(); ++s) {
    if (bytes[s] < 0) {
      throw_input_error(
          std::string("lowering option '") + field + "'",
          "stage " + std::to_string(s) + ": bytes must be >= 0, got " + std::to_string(bytes[s]));
    }
  }
  return bytes;
}

// How many items ahead of the one being lowered lower() prefetches.
constexpr size_t kItemPrefetchDistance = 16;

// Fetches, for writing, the slots of `list` two to four instructions past its end: a list is
// appended to about once per num_actors items, so they are written on a later visit, and a first
// write to a line would otherwise wait for it. Integer arithmetic: the slots may lie past the
// allocation (a prefetch never faults).
void prefetch_next_slots(const std::vector<Instruction>& list) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(list.data()) + list.size() * sizeof(Instruction);
  for (uintptr_t a = end + 2 * sizeof(Instruction); a < end + 4 * sizeof(Instruction); a += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(a), 1);
}

// The stage whose actor receives what `t` produces (F: the next stage's input, B/I: the previous
// stage's input gradient), or -1 when nothing is sent.
int consumer_stage(const TaskRef& t, int num_stages) {
  if (t.kind == TaskKind::kF && t.stage + 1 < num_stages) return t.stage + 1;
  if ((t.kind == TaskKind::kB || t.kind == TaskKind::kI) && t.stage > 0) return t.stage - 1;
  return -1;
}

// Parameter sharding: the tasks of `item` that need their stage's weights gathered (F, B, I; a W
// needs none), one per stage, in item order.
void gather_tasks(const ScheduleItem& item, std::vector<TaskRef>& out) {
  out.clear();
  for (const TaskRef& t : item) {
    if (t.kind == TaskKind::kW) continue;
    if (std::none_of(out.begin(), out.end(), [&](const TaskRef& g) { return g.stage == t.stage; }))
      out.push_back(t);
  }
}

}  // namespace

Program lower(const Schedule& schedule, const LoweringOptions& options) {
  const ReplayResult replay = validate_and_replay_or_throw(schedule, schedule.name);
  const int p = schedule.num_actors();
  const int S = schedule.num_stages;
  const int m = schedule.num_microbatches;
  const std::vector<int>& stage_to_actor = schedule.placement.stage_to_actor;
  const std::vector<int64_t> act_bytes =
      per_stage_bytes(options.activation_bytes, S, "activation_bytes");
  const std::vector<int64_t> grad_bytes = per_stage_bytes(options.grad_bytes, S, "grad_bytes");
  const bool gather = options.gather_params;
  const std::vector<int64_t> param_bytes =
      gather ? per_stage_bytes(options.param_bytes, S, "param_bytes") : std::vector<int64_t>{};
  std::vector<TaskRef> to_gather;  // one item's tasks that need an all-gather

  // Per actor, the stages whose last backward (B or W) sits in each item, as (item, stage) sorted
  // by item then stage; the items of an actor are visited in list order, so a cursor suffices.
  std::vector<int> last_backward_item(S, -1);
  std::vector<size_t> list_size(p, 0);  // instructions per actor, to reserve
  for (int r = 0; r < p; ++r) {
    const auto& items = schedule.actors[r];
    list_size[r] += items.size();
    for (int i = 0; i < static_cast<int>(items.size()); ++i) {
      if (gather) {
        gather_tasks(items[i], to_gather);
        list_size[r] += to_gather.size();
      }
      for (const TaskRef& t : items[i]) {
        if (t.kind == TaskKind::kB || t.kind == TaskKind::kW) last_backward_item[t.stage] = i;
        const int cs = consumer_stage(t, S);
        if (cs >= 0 && stage_to_actor[cs] != r) {
          ++list_size[r];
          ++list_size[stage_to_actor[cs]];
        }
      }
    }
  }
  std::vector<std::vector<std::pair<int, int>>> reduce_at(p);  // (item, stage)
  const bool each_microbatch = options.emit_grad_reduce && options.reduce_each_microbatch;
  for (int s = 0; s < S; ++s) {
    const int r = stage_to_actor[s];
    reduce_at[r].emplace_back(last_backward_item[s], s);
    list_size[r] += 2 + (each_microbatch ? static_cast<size_t>(std::max(0, m - 1)) : 0);
  }
  // With reduce_each_microbatch: per stage, the weight-gradient tasks (B or W) not yet lowered;
  // the last one is reduced by the stage's final reduction.
  std::vector<int> weight_grads_left(each_microbatch ? S : 0, 0);
  if (each_microbatch)
    for (const auto& items : schedule.actors)
      for (const ScheduleItem& item : items)
        for (const TaskRef& t : item)
          if (t.kind == TaskKind::kB || t.kind == TaskKind::kW) ++weight_grads_left[t.stage];
  for (auto& list : reduce_at) std::stable_sort(list.begin(), list.end());
  std::vector<size_t> next_reduce(p, 0);

  Program prog;
  prog.num_actors = p;
  prog.num_stages = S;
  prog.num_microbatches = m;
  prog.stage_to_actor = stage_to_actor;
  prog.actors.resize(p);
  for (int r = 0; r < p; ++r) prog.actors[r].reserve(list_size[r]);
  // Where each task's result is available, as an instruction index: on the actor that ran it
  // (the compute) and on the actor it is sent to (the recv). Indexed by task slot, microbatch-
  // major, so that the slots looked up for one item (its microbatch's neighbouring stages) are
  // close together.
  auto slot = [&](const TaskRef& t) {
    return (static_cast<size_t>(t.microbatch) * static_cast<size_t>(S) +
            static_cast<size_t>(t.stage)) *
               kAllTaskKinds.size() +
           static_cast<size_t>(t.kind);
  };
  const size_t num_slots = static_cast<size_t>(S) * static_cast<size_t>(m) * kAllTaskKinds.size();
  std::vector<int> computed_at(num_slots, -1);
  std::vector<int> received_at(num_slots, -1);
  std::vector<std::vector<std::pair<int, int>>> pending_optimizers(p);  // (stage, dep)
  int64_t next_tag = 0;
  std::vector<int> compute_deps;  // one compute's dependencies, collected before being stored
  // Parameter sharding, per actor: the all-gathers emitted for its next item, and its previous
  // compute (the one before the compute being lowered), which the next item's all-gathers wait
  // for: a gather prefetches one item ahead, while the item before it computes.
  std::vector<std::vector<int>> next_gathers(gather ? p : 0);
  std::vector<int> previous_compute(gather ? p : 0, -1);
  const auto emit_gathers = [&](std::vector<Instruction>& list, const ScheduleItem& item,
                                int after, std::vector<int>& indices) {
    gather_tasks(item, to_gather);
    indices.clear();
    for (const TaskRef& t : to_gather) {
      indices.push_back(static_cast<int>(list.size()));
      Instruction& g = list.emplace_back();
      g.op = OpKind::kAllGather;
      g.tasks.push_back(t);
      g.stage = t.stage;
      g.bytes = param_bytes[t.stage];
      if (after >= 0) g.deps.push_back(after);
    }
  };

  const std::vector<ItemPosition>& order = replay.order;
  for (size_t n = 0; n < order.size(); ++n) {
    // The items are visited across all actors, each in its own heap block: fetch the item's
    // vector kItemPrefetchDistance items ahead and its tasks half as far ahead.
    if (n + kItemPrefetchDistance < order.size()) {
      const ItemPosition& far = order[n + kItemPrefetchDistance];
      __builtin_prefetch(&schedule.actors[far.actor][far.item]);
    }
    if (n + kItemPrefetchDistance / 2 < order.size()) {
      const ItemPosition& near = order[n + kItemPrefetchDistance / 2];
      __builtin_prefetch(schedule.actors[near.actor][near.item].data());
    }
    const ItemPosition& pos = order[n];
    const int r = pos.actor;
    const ScheduleItem& item = schedule.actors[r][pos.item];
    std::vector<Instruction>& list = prog.actors[r];
    prefetch_next_slots(list);
    compute_deps.clear();
    if (gather) {
      if (pos.item == 0) emit_gathers(list, item, -1, next_gathers[r]);
      compute_deps.assign(next_gathers[r].begin(), next_gathers[r].end());
    }
    const int compute_index = static_cast<int>(list.size());
    Instruction& compute = list.emplace_back();
    compute.op = OpKind::kCompute;
    compute.tasks.assign(item.begin(), item.end());
    compute.stage = item[0].stage;
    for (const TaskRef& t : item) {
      TaskRef deps[kMaxTaskDependencies];
      const int num_deps = task_dependencies(t, S, schedule.split_backward, deps);
      for (int d = 0; d < num_deps; ++d) {
        const TaskRef& dep = deps[d];
        if (item.size() > 1 && std::find(item.begin(), item.end(), dep) != item.end()) continue;
        const int index =
            stage_to_actor[dep.stage] == r ? computed_at[slot(dep)] : received_at[slot(dep)];
        assert(index >= 0 && "lower: a dependency is neither computed nor received earlier");
        compute_deps.push_back(index);
      }
    }
    if (compute_deps.size() > 1) {
      std::sort(compute_deps.begin(), compute_deps.end());
      compute_deps.erase(std::unique(compute_deps.begin(), compute_deps.end()), compute_deps.end());
    }
    compute.deps.assign(compute_deps.begin(), compute_deps.end());  // one exact allocation
    for (const TaskRef& t : item) computed_at[slot(t)] = compute_index;

    for (const TaskRef& t : item) {
      const int cs = consumer_stage(t, S);
      if (cs < 0) continue;
      const int consumer = stage_to_actor[cs];
      if (consumer == r) continue;
      const int64_t bytes = act_bytes[std::min(t.stage, cs)];
      const int64_t tag = next_tag++;
      // New instructions get their one task and dependency by push_back into their empty inline
      // lists (assigning a braced list would build a temporary and move it in).
      Instruction& send = list.emplace_back();
      send.op = OpKind::kSend;
      send.tasks.push_back(t);
      send.stage = t.stage;
      send.peer = consumer;
      send.bytes = bytes;
      send.tag = tag;
      send.deps.push_back(compute_index);
      std::vector<Instruction>& consumer_list = prog.actors[consumer];
      prefetch_next_slots(consumer_list);
      received_at[slot(t)] = static_cast<int>(consumer_list.size());
      Instruction& recv = consumer_list.emplace_back();
      recv.op = OpKind::kRecv;
      recv.tasks.push_back(t);
      recv.stage = t.stage;
      recv.peer = r;
      recv.bytes = bytes;
      recv.tag = tag;
    }

    // The next item's all-gathers, ahead of this item's reductions on the collective stream.
    if (gather) {
      if (pos.item + 1 < static_cast<int>(schedule.actors[r].size()))
        emit_gathers(list, schedule.actors[r][pos.item + 1], previous_compute[r], next_gathers[r]);
      previous_compute[r] = compute_index;
    }

    if (each_microbatch) {
      for (const TaskRef& t : item) {
        if (t.kind != TaskKind::kB && t.kind != TaskKind::kW) continue;
        if (--weight_grads_left[t.stage] == 0) continue;  // the final reduction below
        Instruction& reduce = list.emplace_back();
        reduce.op = OpKind::kAllReduce;
        reduce.tasks.push_back(t);
        reduce.stage = t.stage;
        reduce.bytes = grad_bytes[t.stage];
        reduce.deps.push_back(compute_index);
      }
    }

    const auto& reduces = reduce_at[r];
    for (size_t& k = next_reduce[r]; k < reduces.size() && reduces[k].first == pos.item; ++k) {
      const int s = reduces[k].second;
      int optimizer_dep = compute_index;
      if (options.emit_grad_reduce) {
        optimizer_dep = static_cast<int>(list.size());
        Instruction& reduce = list.emplace_back();
        reduce.op = OpKind::kAllReduce;
        reduce.stage = s;
        reduce.bytes = grad_bytes[s];
        reduce.deps.push_back(compute_index);
      }
      pending_optimizers[r].emplace_back(s, optimizer_dep);
    }
  }

  for (int r = 0; r < p; ++r) {
    for (const auto& [stage, dep] : pending_optimizers[r]) {
      Instruction& opt = prog.actors[r].emplace_back();
      opt.op = OpKind::kOptimizer;
      opt.stage = stage;
      opt.deps.push_back(dep);
    }
  }
  // Correct by construction (the schedule was validated above); checking the result costs as much
  // as a quarter of lowering, so only debug builds do it. Tests check lowered programs
  // explicitly (tests/schedules/lowered_program_check_test.cc, property_test.cc).
  assert((check_program(prog), true) && "lower: the lowered program fails check_program");
  return prog;
}

}  // namespace jaxpp
