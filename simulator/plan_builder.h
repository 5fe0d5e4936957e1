// Building a plan from a model, a cluster and a parallel configuration, and simulating it.
// Shared by `jaxpp-sim simulate`, the explorer and the runtime (which executes plan.program).
//
//   build_plan      validate the configuration (pp·tp·dp = gpus, global batch divisible by
//                   dp·microbatch_size, m = global_batch / (dp·microbatch_size)), generate the
//                   schedule (registry name or custom file) for p = pp actors and S = pp·v stages,
//                   partition the model into S stages (auto: cost-balanced; even: transformer
//                   layers split evenly, embedding on the first and logits on the last stage, as
//                   Megatron-LM does; or explicit stage starts), lower it with per-device
//                   activation bytes (stage output / tp) and gradient bytes (params / tp ·
//                   grad_bytes_per_param); the expert-parallel fields are checked against the
//                   model (check_moe_config) and, with --moe-overlap 1f1b and ep > 1, every
//                   backward is paired with the forward that follows it
//                   (schedules/moe_pairing.h).
//   simulate_plan   AnalyticCost + memory model + the engine; returns the SimResult and the
//                   metrics JSON (also stored as plan.predicted by the CLI):
//     step_time_s      makespan + cluster.iteration_overhead_s
//     tokens_per_s     global_batch · seq_len / step_time_s
//     tflops_per_gpu   hardware FLOPs (forward + backward + recompute of the chosen policy, the
//                      Megatron-LM convention) per iteration / step_time_s / gpus / 1e12
//     mfu              model FLOPs (forward + backward, no recompute; the 6N-style count of
//                      ModelSpec::model_flops_per_sequence) / step_time_s / (gpus · peak FLOP/s)
//     hfu              as mfu with hardware FLOPs
//     warnings         a list of sentences for results that are numbers but not a plan to run:
//                      a bubble rate of 90 % or more, an actor holding no transformer layer
//     assignment       with PlanRequest::assignment: its source, num_stages, stage_begin and
//                      placement
//     plus every schedule-level metric of sim_result_to_json (bubble_rate, tasks, peak memory
//     per actor, volumes, critical path).
//   simulate_stage_times  the measured-times mode: a schedule and T_F/T_B/T_W/T_comm (and the
//                   MoE all-to-all A_F/A_B, overlapped as `overlap` says: kNone serialises it,
//                   kAuto/kDualPipe overlap the schedule's F&B pairs, k1F1B also pairs every
//                   backward with the next forward first, as build_plan does), no model.
//
// Usage:
//   PlanRequest req{.model = load_model("gpt3-13b"), .cluster = load_cluster("a100-80g"), ...};
//   Plan plan = build_plan(req);
//   SimulatedPlan sim = simulate_plan(plan, {});
//   plan.predicted = sim.metrics;
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/perturbed_cost.h"
#include "costmodel/stage_times_cost.h"
#include "graph/model.h"
#include "graph/plan.h"
#include "schedules/schedule.h"
#include "simulator/engine.h"

namespace jaxpp {

// kAuto: forward + backward FLOPs balanced; kEven: Megatron-LM's split of the transformer layers;
// kExplicit: given stage starts; kBalancedTime: the cost-aware search of
// simulator/partition_search.h (least simulated step time under the memory limit).
enum class PartitionMode { kAuto, kEven, kExplicit, kBalancedTime };

struct PlanRequest {
  ModelSpec model;
  ClusterSpec cluster;
  // gpus, pp, tp, dp, virtual_stages, microbatch_size, global_batch, schedule, recompute,
  // sequence_parallel, zero1 are read; num_microbatches is derived.
  ParallelConfig config;
  std::string schedule_file;  // non-empty: a custom schedule file instead of config.schedule
  PartitionMode partition = PartitionMode::kAuto;
  std::vector<int> partition_starts;  // kExplicit: first layer of each stage
  // kBalancedTime: the memory limit per device (0 = the cluster's HBM) and the simulations the
  // search may run (0 = its default, partition_search.h).
  int64_t max_memory_bytes = 0;
  int partition_evaluations = 0;
  bool fuse_steady_state = false;
  // A name-to-actor assignment (graph/assignment.h) instead of `partition` and the schedule's
  // own placement: its stages and placement are used, config.schedule is generated on that
  // placement (schedules/assigned.h; InputError naming the assignment and the schedule when it
  // does not fit), config.virtual_stages becomes the most stages on one actor, and the plan keeps
  // the assignment. Needs partition kAuto, config.virtual_stages 1 and no schedule_file.
  std::optional<AssignmentSpec> assignment;
};

// InputError on pp·tp·dp != gpus, a batch not divisible by dp·microbatch_size, non-positive
// sizes. Returns the number of microbatches.
int check_parallel_config(const ParallelConfig& config);

// Parses "auto", "even", "balanced-time" or a comma-separated list of stage starts ("0,13,26").
void parse_partition_flag(const std::string& text, PlanRequest& request);

// The schedule for a request (registry or file), checked against pp and m; a file is also
// validated (InputError "<file>: invalid schedule: ..." naming the first problems, e.g. a
// deadlock).
Schedule make_schedule(const std::string& name, const std::string& file, int pp, int num_stages,
                       int num_microbatches, bool fuse_steady_state);

Plan build_plan(const PlanRequest& request);
// A V-placement schedule (zb-v, dualpipev) runs 2 stages per actor whatever was asked: an
// explicitly given `requested` virtual stage count the built plan does not have is an error
// ("--virtual 1: schedule zb-v runs 2 stages per actor; ..."), not silently replaced.
void check_virtual_kept(const Plan& plan, int requested);

// The transformer layers split evenly over the stages (stage s starts at transformer layer
// ⌊s·t/S⌋), embedding on the first and logits on the last stage, as Megatron-LM does.
// InputError naming --partition even when there are fewer transformer layers than stages.
Partition even_partition(const ModelSpec& model, int num_stages);

struct SimulatedPlan {
  Program program;  // what was simulated
  SimResult result;
  nlohmann::json metrics;
};

struct PlanSimOptions {
  bool record_trace = true;
  bool overlap_grad_reduce = false;
  bool check_memory = true;  // InputError "does not fit: ..." when a device is too small
  int64_t max_memory_bytes = 0;  // the limit of check_memory; 0 = the cluster's HBM
  // Model mode: metrics["breakdown"] (simulator/breakdown.h) and the cost model's parts on
  // every compute event of the trace; records the timeline (as record_trace) to measure it.
  bool breakdown = false;
  // What-if: durations changed by a PerturbedCost around the cost model (costmodel/
  // perturbed_cost.h); nullptr = none. Not combined with breakdown (which prices the model).
  const Perturbation* perturbation = nullptr;
};

SimulatedPlan simulate_plan(const Plan& plan, const PlanSimOptions& options);

// The measured mode of `jaxpp-sim simulate` and of the Python module's simulate(): a schedule
// name (or file) with pp actors, v stages per actor and m microbatches, and the stage times in
// milliseconds, uniform (t_f, t_b, t_w, t_comm), from a stage-times file or from a stage-times
// document (stage_times_from_json). Checked in the CLI's order with its messages (flag names):
// --pp, --microbatches, --schedule required; pp, m, v >= 1; one source of times.
struct MeasuredRequest {
  std::string schedule;       // registry name or alias; or
  std::string schedule_file;  // a custom schedule file
  std::optional<int> pp;
  std::optional<int> microbatches;
  int virtual_stages = 1;
  // virtual_stages was given (--virtual): a schedule that runs another count is refused, as in
  // model mode (check_virtual_kept), not silently replaced.
  bool virtual_given = false;
  bool fuse_steady_state = false;
  std::optional<double> t_f_ms, t_b_ms;
  double t_w_ms = 0, t_comm_ms = 0;
  // MoE all-to-all of a forward / an input-gradient backward (uniform; or the file's
  // t_a2a_f_ms / t_a2a_b_ms) and how it overlaps compute.
  double t_a2a_f_ms = 0, t_a2a_b_ms = 0;
  MoeOverlap moe_overlap = MoeOverlap::kAuto;
  std::string stage_times_file;                   // or
  std::optional<nlohmann::json> stage_times_doc;  // (source name: stage_times_source)
  std::string stage_times_source = "stage_times";
};
SimulatedPlan simulate_measured(const MeasuredRequest& request, const PlanSimOptions& options);

// Measured-times mode: simulate `schedule` (p actors, its own S and m) with StageTimesCost.
SimulatedPlan simulate_stage_times(const Schedule& schedule, const StageTimes& times,
                                   const PlanSimOptions& options,
                                   MoeOverlap overlap = MoeOverlap::kAuto);

}  // namespace jaxpp
