// Discrete-event simulation of one training iteration of a Program.
//
// Semantics (../shared/DESIGN.md "Simulator semantics"):
//   * Every actor has a compute stream (kCompute, kOptimizer), one send stream per destination,
//     one recv stream per source and a collective stream (kAllReduce). Instructions of one stream
//     run in program order, one at a time; different streams overlap.
//   * An instruction starts as soon as (1) the previous instruction of its stream has finished,
//     (2) all its `deps` have finished and, for kSend/kRecv, (3) the matching instruction (same
//     tag) on the peer is posted, i.e. satisfies (1) and (2) itself (rendezvous). A send and its
//     recv start together and end together.
//   * Durations come from a CostProvider. A transfer first waits its latency
//     (CostProvider::transfer_latency_s), then moves its bytes over the link
//     CostProvider::link_id(from, to). Sharing policy: the transfers in their bandwidth phase on
//     one link progress simultaneously, each at bandwidth/n, where n is the number of such
//     transfers (processor sharing, recomputed whenever one joins or leaves). An infinite
//     bandwidth or 0 bytes makes a transfer last exactly its latency.
//   * Gradient all-reduces (kAllReduce) take CostProvider::allreduce_s on the collective stream.
//     Unless SimOptions::overlap_grad_reduce, every all-reduce of an actor also waits for the
//     end of that actor's last kCompute instruction (no overlap with remaining backward work),
//     except on an actor that holds parameter all-gathers (kAllGather, parameter sharding): they
//     also take allreduce_s on the collective stream, and precede computes, so that actor's
//     reductions always overlap.
//   * Data-parallel replicas are identical, so one pipeline is simulated; the dp collectives are
//     in the all-reduce durations. A 16384-GPU configuration costs what its pipeline costs.
//   * Memory: an actor holds static_bytes_per_actor[r]; the start of an F of stage s adds
//     stash_bytes_per_stage[s] (one stashed microbatch), the END of that stage's backward for
//     inputs (B, or I when split) frees it. W keeps nothing extra (its inputs are not modelled).
//     With stash_bytes_per_stage_microbatch (per-microbatch sequence lengths, what-if) the stash
//     of stage s and microbatch i is that table's entry [s · m + i] instead.
//   * Expert-parallel all-to-all (MoE layers): CostProvider::alltoall gives, per compute
//     instruction, the time its all-to-all stream is busy and the part compute_s already holds
//     (exposed). The all-to-all is a stream of its own in the trace (StreamKind::kAllToAll, one
//     event per instruction: from its start where paired compute hides it, at its end where it
//     is serialised) and in the metrics (alltoall_s, alltoall_exposed_s); it changes no timing
//     beyond compute_s, so the cost provider's overlap rule (costmodel/analytic_cost.h) is the
//     whole model.
//   * Deterministic: events at equal times are processed in the order they were created (a
//     stable sequence number), never by address. Cost O(E log E) for E instructions; memory
//     about 80 bytes per instruction without a trace, about 200 with one (TraceEvent and
//     per-instruction times). Every instruction's cost is asked of the CostProvider once, before
//     the run; a provider that throws is asked again when the instruction starts, so errors
//     surface as they would if costs were asked lazily. benchmarks/simulator_bench.cc measures
//     the throughput (docs/simulate.md has the figures).
//   * Deadlock (no event left, instructions unfinished): InputError listing, for every actor, its
//     first unfinished instruction and what it waits for.
//
// Metrics (SimResult): makespan_s = end of the last instruction; step_time_s = makespan_s +
// SimOptions::iteration_overhead_s. Per actor: busy_s = Σ compute-stream durations; span_s = first
// start to last end of its compute stream; bubble_rate = (span − busy)/span of the actor with the
// longest span (lowest index on ties). critical_path: the chain of instructions that determined the
// end, each step being the instruction whose completion (or, for a rendezvous, whose posting)
// released the next.
//
// Usage:
//   StageTimesCost cost(uniform_stage_times(4, 1, 1, 1, 0));
//   SimResult r = simulate(program, cost, {});
//   double t = r.makespan_s;
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cost_provider.h"
#include "graph/program.h"
#include "trace/trace.h"

namespace jaxpp {

struct SimOptions {
  bool record_trace = true;                     // fill SimResult::trace and per-instruction times
  bool overlap_grad_reduce = false;             // all-reduce may overlap remaining backward work
  double iteration_overhead_s = 0;              // added to step_time_s
  std::vector<int64_t> static_bytes_per_actor;  // empty = 0 for all
  std::vector<int64_t> stash_bytes_per_stage;   // empty = 0 for all
  // Non-empty: num_stages · num_microbatches entries, [s · m + i] = the stash of stage s for
  // microbatch i (overrides stash_bytes_per_stage).
  std::vector<int64_t> stash_bytes_per_stage_microbatch;
  // Stop as soon as the step time is known to exceed this: when an instruction ends at t with
  // t + iteration_overhead_s > stop_after_step_s (the makespan is at least t). The result then
  // has stopped = true and stopped_at_step_s = t + iteration_overhead_s, and no other metric.
  // The explorer uses it to drop configurations that cannot make its ranking. Infinity = never.
  double stop_after_step_s = std::numeric_limits<double>::infinity();
};

struct ActorStats {
  double busy_s = 0;         // compute stream busy time
  double first_start_s = 0;  // first compute-stream start
  double last_end_s = 0;     // last compute-stream end
  double span_s() const { return last_end_s - first_start_s; }
  double idle_s = 0;  // step makespan − busy_s
  int64_t static_bytes = 0;
  int64_t peak_memory_bytes = 0;
  int peak_stashed_microbatches = 0;  // max over time of stashed (stage, microbatch) pairs
  int64_t p2p_send_bytes = 0;
  int64_t collective_bytes = 0;
  int64_t instructions = 0;
  // Expert-parallel all-to-all inside this actor's compute instructions (MoE, ep > 1): the time
  // its all-to-all stream is busy, and the part of it that lengthens the compute stream.
  double alltoall_s = 0;
  double alltoall_exposed_s = 0;
};

struct CriticalStep {
  int actor = 0;
  int instruction = 0;
  double start_s = 0;
  double end_s = 0;
};

struct SimResult {
  // SimOptions::stop_after_step_s was passed: the step time is > stopped_at_step_s, and every
  // other field is unset.
  bool stopped = false;
  double stopped_at_step_s = 0;
  double makespan_s = 0;
  double step_time_s = 0;
  int64_t num_instructions = 0;
  std::vector<ActorStats> actors;
  std::vector<int> peak_stashed_per_stage;  // max over time of stashed microbatches of stage s
  int bubble_actor = 0;
  double bubble_rate = 0;
  int64_t p2p_bytes = 0;         // Σ send payloads (per device)
  int64_t collective_bytes = 0;  // Σ all-reduce payloads (per device)
  double alltoall_s = 0;         // Σ over actors of ActorStats::alltoall_s
  double alltoall_exposed_s = 0;  // Σ over actors of ActorStats::alltoall_exposed_s
  std::vector<CriticalStep> critical_path;
  // Per actor, per instruction (only with record_trace).
  std::vector<std::vector<double>> start_s;
  std::vector<std::vector<double>> end_s;
  Trace trace;  // only with record_trace
};

// InputError on a malformed program (unmatched send/recv, bad deps) or a deadlock.
SimResult simulate(const Program& program, const CostProvider& cost, const SimOptions& options);

// Schedule-level metrics as JSON: step_time_s, makespan_s, bubble_rate, tasks, per-actor lists
// (busy_s, idle_s, span_s, peak_memory_bytes, peak_stashed_microbatches), p2p_bytes,
// collective_bytes, critical_path (instruction names).
nlohmann::json sim_result_to_json(const SimResult& result, const Program& program);

}  // namespace jaxpp
