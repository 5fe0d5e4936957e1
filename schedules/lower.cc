#include "schedules/lower.h"

#include <algorithm>
#include <map>

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

int append(std::vector<Instruction>& list, Instruction ins) {
  list.push_back(std::move(ins));
  return static_cast<int>(list.size()) - 1;
}

}  // namespace

Program lower(const Schedule& schedule, const LoweringOptions& options) {
  validate_or_throw(schedule, schedule.name);
  const int p = schedule.num_actors();
  const int S = schedule.num_stages;
  const std::vector<int64_t> act_bytes =
      per_stage_bytes(options.activation_bytes, S, "activation_bytes");
  const std::vector<int64_t> grad_bytes = per_stage_bytes(options.grad_bytes, S, "grad_bytes");

  // Item holding each stage's last backward (B or W) in its actor's list.
  std::vector<int> last_backward_item(S, -1);
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < static_cast<int>(schedule.actors[r].size()); ++i) {
      for (const TaskRef& t : schedule.actors[r][i]) {
        if (t.kind == TaskKind::kB || t.kind == TaskKind::kW) last_backward_item[t.stage] = i;
      }
    }
  }

  const UnitCosts unit;
  const ReplayResult replay =
      replay_schedule(schedule, [&](const ScheduleItem& item) { return unit.of(item); });

  Program prog;
  prog.num_actors = p;
  prog.num_stages = S;
  prog.num_microbatches = schedule.num_microbatches;
  prog.stage_to_actor = schedule.placement.stage_to_actor;
  prog.actors.resize(p);
  // Where each task's result is available on each actor: the compute that produced it (same
  // actor) or the recv that brought it (consumer actor).
  std::map<std::pair<TaskRef, int>, int> available;
  std::vector<std::vector<std::pair<int, int>>> pending_optimizers(p);  // (stage, dep)
  int64_t next_tag = 0;

  for (const ItemPosition& pos : replay.order) {
    const int r = pos.actor;
    const ScheduleItem& item = schedule.actors[r][pos.item];
    std::vector<Instruction>& list = prog.actors[r];

    Instruction compute;
    compute.op = OpKind::kCompute;
    compute.tasks = item;
    compute.stage = item[0].stage;
    for (const TaskRef& t : item) {
      for (const TaskRef& dep : task_dependencies(t, S, schedule.split_backward)) {
        if (std::find(item.begin(), item.end(), dep) != item.end()) continue;
        compute.deps.push_back(available.at({dep, r}));
      }
    }
    std::sort(compute.deps.begin(), compute.deps.end());
    compute.deps.erase(std::unique(compute.deps.begin(), compute.deps.end()), compute.deps.end());
    const int compute_index = append(list, std::move(compute));
    for (const TaskRef& t : item) available[{t, r}] = compute_index;

    for (const TaskRef& t : item) {
      int consumer_stage = -1;
      int64_t bytes = 0;
      if (t.kind == TaskKind::kF && t.stage + 1 < S) {
        consumer_stage = t.stage + 1;
        bytes = act_bytes[t.stage];
      } else if ((t.kind == TaskKind::kB || t.kind == TaskKind::kI) && t.stage > 0) {
        consumer_stage = t.stage - 1;
        bytes = act_bytes[t.stage - 1];
      }
      if (consumer_stage < 0) continue;
      const int consumer = schedule.placement.actor_of(consumer_stage);
      if (consumer == r) continue;
      const int64_t tag = next_tag++;
      Instruction send;
      send.op = OpKind::kSend;
      send.tasks = {t};
      send.stage = t.stage;
      send.peer = consumer;
      send.bytes = bytes;
      send.tag = tag;
      send.deps = {compute_index};
      append(list, std::move(send));
      Instruction recv;
      recv.op = OpKind::kRecv;
      recv.tasks = {t};
      recv.stage = t.stage;
      recv.peer = r;
      recv.bytes = bytes;
      recv.tag = tag;
      available[{t, consumer}] = append(prog.actors[consumer], std::move(recv));
    }

    for (int s : schedule.placement.stages_of(r)) {
      if (last_backward_item[s] != pos.item) continue;
      int optimizer_dep = compute_index;
      if (options.emit_grad_reduce) {
        Instruction reduce;
        reduce.op = OpKind::kAllReduce;
        reduce.stage = s;
        reduce.bytes = grad_bytes[s];
        reduce.deps = {compute_index};
        optimizer_dep = append(list, std::move(reduce));
      }
      pending_optimizers[r].emplace_back(s, optimizer_dep);
    }
  }

  for (int r = 0; r < p; ++r) {
    for (const auto& [stage, dep] : pending_optimizers[r]) {
      Instruction opt;
      opt.op = OpKind::kOptimizer;
      opt.stage = stage;
      opt.deps = {dep};
      append(prog.actors[r], std::move(opt));
    }
  }
  check_program(prog);
  return prog;
}

}  // namespace jaxpp
