// Lowering: Schedule -> Program (graph/program.h), the per-actor instruction streams that the
// simulator and the runtime execute.
//
// Rules:
//   - each schedule item becomes one kCompute instruction (a fused group = one instruction);
//   - every cross-actor data dependency (F(s,k) -> F(s+1,k) when stage s+1 lives on another
//     actor; B|I(s+1,k) -> B|I(s,k), the input gradient, likewise) becomes a kSend on the
//     producer right after the producing compute (deps = that compute) and a kRecv on the
//     consumer; the consuming compute lists the recv in its deps;
//   - deadlock freedom with FIFO streams: the items are visited in ONE global order (the unit-cost
//     dependency replay of replay.h, sorted by start time), each actor's list is the projection of
//     that order, and a recv is appended to the consumer's list at the moment the producer emits
//     the send. So every actor posts the sends and the recvs of a (sender, receiver) pair in the
//     same order, and a recv always precedes the compute that needs it (recvs have their own
//     stream, so posting them early costs nothing);
//   - tags: a running counter over that global order, unique in the program;
//   - after the compute holding a stage's last backward (its last B, or its last W when the stage
//     is split) comes kAllReduce(stage) on the collective stream (deps = that compute); a
//     kOptimizer(stage) (deps = the allreduce) is appended at the end of the actor's list, on the
//     compute stream. With emit_grad_reduce = false the allreduce is left out and the optimizer
//     depends on the compute directly;
//   - with reduce_each_microbatch (gradient sharding, ParallelConfig::shard_gradients), every
//     other backward that completes a microbatch's weight gradient of a stage (its B, or its W when
//     the stage is split) is followed by a kAllReduce(stage) whose `tasks` holds that task (the
//     reduce-scatter of that microbatch's gradient; deps = that compute), so a stage has m
//     reductions: m − 1 per-microbatch ones and the final one above (tasks empty) that the
//     optimizer waits for. All of them share the actor's collective stream, in program order;
//   - with gather_params (parameter sharding, ParallelConfig::shard_parameters), every item's F, B
//     and I tasks are preceded by a kAllGather of their stage's weights (one per stage of the
//     item; `tasks` = that task, bytes = param_bytes[stage]; a W needs no weights), which the
//     item's compute lists in its deps. The all-gathers of an actor's first item come right before
//     it (no deps); those of item i + 1 come right after item i's compute and sends, before its
//     reductions, and wait for item i − 1's compute: one item is prefetched while the one before
//     it computes, so the gathered weights of at most two items are alive;
//   - the result passes check_program (graph/program.h); debug builds check it in lower().
// lower() validates the schedule (validate.h) and takes the global order from the validator's own
// unit-cost replay, so a schedule is replayed once. The time per instruction is measured by
// benchmarks/schedules_bench.cc (BM_LowerPerInstruction); most of it goes to allocating the
// instructions' task and dependency lists.
// Bytes: activation_bytes[s] is stage s's output for one microbatch, in bytes, and also the size
// of the gradient sent back from stage s+1 to stage s; grad_bytes[s] is stage s's gradient for
// the allreduce. Empty vectors mean 1 byte everywhere (unit mode).
//
// Usage:
//   Program prog = lower(generate_schedule("1f1b", {.num_actors = 4, .num_microbatches = 8}), {});
#pragma once

#include <cstdint>
#include <vector>

#include "graph/program.h"
#include "schedules/schedule.h"

namespace jaxpp {

struct LoweringOptions {
  std::vector<int64_t> activation_bytes;  // per stage; empty = 1 byte each
  std::vector<int64_t> grad_bytes;        // per stage; empty = 1 byte each
  bool emit_grad_reduce = true;
  bool reduce_each_microbatch = false;  // one reduction per microbatch and stage (see above)
  bool gather_params = false;           // an all-gather before every F, B and I (see above)
  std::vector<int64_t> param_bytes;     // per stage, with gather_params; empty = 1 byte each
};

// The byte sizes of a cost model (anything with activation_bytes(stage), grad_bytes(stage) and
// reduces_each_microbatch(), gathers_params() and param_bytes(stage): costmodel's AnalyticCost,
// HeteroCost) for `num_stages` stages, gradient reductions emitted (one per microbatch where the
// cost model shards gradients), parameter all-gathers where it shards parameters.
template <typename Cost>
LoweringOptions lowering_options_of(const Cost& cost, int num_stages) {
  LoweringOptions lo;
  lo.emit_grad_reduce = true;
  lo.reduce_each_microbatch = cost.reduces_each_microbatch();
  lo.gather_params = cost.gathers_params();
  for (int s = 0; s < num_stages; ++s) {
    lo.activation_bytes.push_back(cost.activation_bytes(s));
    lo.grad_bytes.push_back(cost.grad_bytes(s));
    if (lo.gather_params) lo.param_bytes.push_back(cost.param_bytes(s));
  }
  return lo;
}

// InputError when the schedule is invalid (validate.h) or the byte vectors have the wrong size.
Program lower(const Schedule& schedule, const LoweringOptions& options = {});

}  // namespace jaxpp
