// Plan explorer: enumerate parallel configurations of a model on a cluster, prune the impossible
// ones, simulate the rest, rank them.
//
// The space, for a model, a cluster, a GPU count N and a global batch B (sequences):
//   pp                 pipeline actors: every divisor of N                                  (--pp)
//   tp                 tensor parallelism: 1, 2, 4, ... up to devices_per_node              (--tp)
//   cp                 context parallelism: 1 when the model's seq_len < kLongSequence (16384),
//                      else 1, 2, 4, ... up to devices_per_node                            (--cp)
//   dp                 N / (pp·tp·cp)
//   microbatch_size    b: 1, 2, 4, 8                                          (--microbatch-sizes)
//   num_microbatches   m = B / (dp·b)
//   schedule           every registry schedule (schedules/registry.h)                (--schedules)
//   virtual_stages     v: 1 for linear-placement schedules, 2 for V-placement ones, 2, 4, 8 for
//                      loop-placement ones (at v = 1 a loop schedule repeats, up to fusion and
//                      warm-up depth, a linear one: Interleaved1F1B is then Eager1F1B's order,
//                      InterleavedGPipe and LoopedBFS GPipe's). A --virtual list restricts all
//                      schedules: linear ones need 1 in it, V ones 2.                  (--virtual)
//   recompute          none, selective, full (op only when asked for)                (--recompute)
//                      and, when asked for, full:N: full recompute of the first N transformer
//                      layers of each stage chunk, the others keeping their activations
//                      (ParallelConfig::recompute_layers; Megatron-LM --recompute-method block
//                      --recompute-num-layers N); not with --partition balanced-time;
//                      and, when asked for, selective:a+b: selective recompute of
//                      Megatron-Core's recompute modules a and b (ParallelConfig::
//                      recompute_modules; --recompute-modules a b), after selective
//   offload_layers     0 unless asked for: activation offloading (ParallelConfig::offload_layers,
//                      Megatron Core --cpu-offloading-num-layers N) of the configurations
//                      Megatron allows it in (pp 1, recompute none); each listed N, and "auto":
//                      the fewest layers (0 to the transformer layers − 1) whose peak fits the
//                      memory limit, found per configuration by bisection over the memory
//                      model (the peak does not grow with N). The other configurations keep 0.
//                      A configuration whose offloaded activations exceed the cluster's host
//                      memory per GPU (ClusterSpec::host_memory_bytes_per_gpu, when known) is
//                      kMemory.                                                (--offload-layers)
//   zero1              off, on                                                           (--zero1)
//   shard_gradients    off (default), on: gradient sharding (ZeRO-2) of the zero1-on
//                      configurations (zero1 off never shards)                     (--shard-grads)
//   shard_parameters   off (default), on: parameter sharding (ZeRO-3 / FSDP, implies gradient
//                      sharding) of the zero1-on configurations                   (--shard-params)
//   ep                 MoE models: 1 and every power of two dividing the routed experts, up to N
//                      (expert parallelism, carved out of a stage's tp·cp·dp devices)    (--ep)
//   etp                MoE models: tp (Megatron's default) unless a list is given        (--etp)
//   partition          automatic (cost-balanced, as `simulate --partition auto`); with
//                      ExploreRequest::partition = kBalancedTime (--partition balanced-time)
//                      each configuration gets the partition of least simulated step time
//                      under the limit (simulator/partition_search.h, explore_partition.h),
//                      never slower than the automatic one; kEven: Megatron-LM's split
// Options applied to every configuration (not dimensions): sequence parallelism, the attention
// kernel (flash by default), TP communication overlap (set only where sp is on and tp > 1) and
// the overlapped gradient reduction (ParallelConfig::overlap_grad_reduce, so plans carry it).
// The layout (linear, loop, V) of a schedule is read from the schedule itself (a small instance
// is generated once), so new registry entries need no change here.
//
// Enumeration order is the loop nest (pp, tp, cp, b, schedule, v, recompute (selective:a+b after
// selective, in the order of their module bits; full:N after full, N ascending), offload_layers (N ascending, then auto), zero1 and
// shard_gradients, ep, etp, each
// ascending / in the order given); a configuration's `id` is its position in that order and is
// the stable key of every sorted output.
//
// Pruning, cheapest first; every pruned configuration keeps its reason:
//   kDivisibility  pp·tp·cp does not divide N; dp·b does not divide B; tp does not divide the
//                  attention heads; seq_len is not divisible by 2·cp (ring attention's
//                  load-balanced chunks); cp > 1 with unfused attention (ring attention needs
//                  flash); ep not dividing the routed experts, ep·etp not dividing tp·cp·dp, etp
//                  not dividing the expert FFN width; S = pp·v stages exceed the model's layers
//   kDuplicate     ZeRO-1 with dp = 1 (identical to ZeRO-1 off); v > 1 with pp = 1 (one actor
//                  running its layers in v pieces: no pipeline to interleave)
//   kDominated     ZeRO-1 off with dp > 1 when ZeRO-1 on is in the space: the same program with
//                  a shorter optimizer step (params / dp) and less optimizer state, and nothing
//                  waits for the optimizer (the last compute of each actor), so its twin is at
//                  least as fast and strictly smaller; it can be neither the best nor on the
//                  Pareto front. (--zero1 off keeps ZeRO-1 off configurations in the ranking;
//                  so does --shard-grads on or --shard-params on, whose ZeRO-1 configurations
//                  run another program.)
//   kSchedule      the schedule's generator rejects (p, S, m) (its message, e.g. "ZeroBubble
//                  needs m >= S (got m=2, S=4)")
//   kBound         (--bound-prune only) dominated by a simulated configuration: see
//                  ExploreRequest::bound_prune
//   kMemory        the peak memory is above the limit. The peak per actor is computed before
//                  simulating, exactly as the simulator accounts it: the memory model's static
//                  bytes (costmodel/memory.h) plus the largest sum of stashed microbatches along
//                  the actor's compute order (an F adds its stage's stash when it starts, the B or
//                  I of that stage frees it when it ends; compute runs in order on one stream).
// What survives is simulated (record_trace = false) and is feasible when its simulated peak
// memory fits the limit (it always does when the pre-check is exact, which the tests verify).
//
// Work is split into units sharing one schedule and one lowered program: (pp, schedule, v, m).
// The program is lowered once per unit with stage markers as byte sizes, and the real sizes of
// each (tp, cp, b) are substituted in place (lowering only copies sizes, see schedules/lower.h;
// activation bytes shrink with tp·cp); the recompute and ZeRO-1 variants only change durations
// and memory. Units run on `threads` worker threads, largest first; results do not depend on the
// thread count or the finishing order.
//
// Distributed use: the same enumeration runs everywhere; shard k of K evaluates the units that a
// deterministic longest-first assignment of units gives it (assign_units); the caller gathers each
// shard's records (config_record_to_json / config_record_from_json round-trip exactly) and calls
// finish_exploration on the union. simulator/ knows nothing of MPI.
//
// Units of measure: seconds (_s), bytes (_bytes).
//
// Usage:
//   ExploreRequest req{.model = load_model("gpt3-13b"), .cluster = load_cluster("a100-80g"),
//                      .gpus = 64, .global_batch = 512};
//   ExploreResult res = explore(req);
//   const ConfigRecord& best = res.records[res.ranking.front()];
//   Plan plan = build_config_plan(req, best.config);  // predicted filled, as simulate --plan
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "graph/assignment.h"
#include "graph/model.h"
#include "graph/plan.h"
#include "simulator/plan_builder.h"

namespace jaxpp {

// Sequence length from which the default cp domain goes beyond 1.
inline constexpr int kLongSequence = 16384;

// Restrictions of the space; an empty list means the default domain described above.
struct ExploreSpace {
  std::vector<int> pp;
  std::vector<int> tp;
  std::vector<int> cp;
  std::vector<int> microbatch_sizes;
  std::vector<int> virtual_stages;     // loop-placement schedules only
  std::vector<std::string> schedules;  // registry names or aliases
  std::vector<Recompute> recompute;
  // Partial recompute: each N adds the policy "full:N" (recompute full with recompute_layers N)
  // beside those of `recompute`; empty = none (the default space has none).
  std::vector<int> recompute_layers;
  // Megatron-Core's recompute modules: each set (graph/plan.h RecomputeModule bits, never 0 =
  // core_attn alone, which is plain selective) adds the policy "selective:a+b" (recompute
  // selective with ParallelConfig::recompute_modules) beside those of `recompute`; empty = none
  // (the default space has none).
  std::vector<uint32_t> recompute_modules;
  // Activation offloading of the pp-1, recompute-none configurations: N >= 0 or kOffloadAuto;
  // empty = {0} (the default space offloads nothing).
  std::vector<int> offload_layers;
  std::vector<bool> zero1;
  // Gradient sharding (ZeRO-2) of the zero1-on configurations: empty = {off}.
  std::vector<bool> shard_gradients;
  // Parameter sharding (ZeRO-3 / FSDP) of the zero1-on configurations (implies gradient
  // sharding): empty = {off}.
  std::vector<bool> shard_parameters;
  std::vector<int> ep;   // MoE only; empty = 1 and every power of two dividing the experts
  std::vector<int> etp;  // MoE only; empty = tp (Megatron's default)
  // Applied to every configuration.
  bool sequence_parallel = false;
  AttentionKernel attention = AttentionKernel::kFlash;
  bool tp_comm_overlap = false;  // needs sequence_parallel; set where tp > 1
};

// One item of explore's --recompute list into `space`: none, selective, full, op
// (space.recompute), full:N with N >= 0 (space.recompute_layers), or selective:a+b with
// Megatron-Core's recompute module names joined by '+' (space.recompute_modules;
// selective:core_attn is plain selective). InputError naming `where`; the model's own rules
// (check_recompute_modules) are checked by explore().
void add_recompute_choice(const std::string& item, ExploreSpace& space, const std::string& where);
// The recompute policy of a configuration as explore lists it: "none", "selective", "full", "op",
// "full:N" when recompute_layers is set, or "selective:a+b" when recompute_modules is.
std::string recompute_choice_name(const ParallelConfig& config);

// ExploreSpace::offload_layers' "auto": the fewest offloaded layers that fit.
inline constexpr int kOffloadAuto = -1;
// One item of explore's --offload-layers list into `space`: a number of layers N >= 0 or "auto".
// InputError naming `where`.
void add_offload_choice(const std::string& item, ExploreSpace& space, const std::string& where);
// Some record offloads or was searched with "auto": the table and the CSV then carry the
// offloading columns (absent otherwise, so outputs without offloading are unchanged).
struct ExploreResult;
bool explore_searched_offload(const ExploreResult& result);
// A record's offloaded layers as explore lists them: "N", or "auto:N" when "auto" chose N.
struct ConfigRecord;
std::string offload_choice_name(const ConfigRecord& record);
// Some record names recompute modules (selective:a+b): the CSV then has a recompute_modules
// column and the table a recompute column wide enough for the names (unchanged otherwise).
bool explore_searched_recompute_modules(const ExploreResult& result);

// --max-memory-gib (and the Python module's max_memory_gib): GiB to bytes, checked after the
// conversion: > 0 and 1 MiB to 1 PiB (a denormal would become 0 bytes, which means "the
// cluster's memory"; 1e300 would overflow the int64 cast). InputError naming --max-memory-gib.
int64_t max_memory_bytes_from_gib(double gib);

struct ExploreRequest {
  ModelSpec model;
  ClusterSpec cluster;
  int gpus = 0;
  int global_batch = 0;
  int64_t max_memory_bytes = 0;  // 0 = cluster.hbm_bytes
  ExploreSpace space;
  // A fixed name-to-actor assignment (graph/assignment.h, resolved for its actors): pp is its
  // number of actors, the partition and placement are its own, v the most stages on one actor;
  // every schedule (or those of space.schedules) is tried on it and those that do not fit it
  // (schedules/assigned.h) are pruned as "schedule" with the reason.
  std::optional<Assignment> assignment;
  // Sets ParallelConfig::overlap_grad_reduce of every configuration (Megatron-LM
  // --overlap-grad-reduce: the simulator overlaps the DP reduction with the backward).
  bool overlap_grad_reduce = false;
  // Sets ParallelConfig::grad_dtype of every configuration (graph/plan.h).
  GradDtype grad_dtype = GradDtype::kCluster;
  // Set ParallelConfig::moe_dispatcher and moe_routing of every configuration (MoE models only;
  // not dimensions of the search).
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  MoeRouting moe_routing = MoeRouting::kRandom;
  // Sets ParallelConfig::optimizer_state of every configuration (graph/plan.h).
  OptimizerState optimizer_state = OptimizerState::kCluster;
  int threads = 0;  // 0 = std::thread::hardware_concurrency()
  // How each configuration is partitioned: kAuto (default), kEven or kBalancedTime
  // (explore_partition.h); not combined with bound_prune. kExplicit is refused.
  PartitionMode partition = PartitionMode::kAuto;
  // Branch and bound (explore --bound-prune; single process only). Every configuration that
  // passes the memory pre-check gets a lower bound on its step time, LB = max over actors of the
  // sum of its compute-stream durations + iteration overhead (the compute stream runs one
  // instruction at a time, so no schedule beats it). The configurations are then taken in
  // ascending (LB, id) order, each against the simulated, fitting configurations before it (the
  // incumbents). A configuration X is pruned (kBound) when, for every step time s >= LB(X):
  //   (a) at least bound_top incumbents Y rank before X: (step(Y), id(Y)) < (s, id(X)), and
  //   (b) some incumbent Y with peak(Y) <= peak(X) (the pre-check's peak is exact) comes before
  //       X in the Pareto order (step, peak, id),
  // so X can be neither among the first bound_top of the ranking nor on the Pareto front. Else X
  // is simulated, and its simulation stops (kBound too) as soon as its step time is known to
  // exceed the step from which (a) and (b) hold (SimOptions::stop_after_step_s). The first
  // bound_top entries of the ranking, their metrics, and the Pareto front are therefore those of
  // the full search; the ranking lists only simulated configurations after them. The sequence
  // is decided in that order alone, whatever the threads do (they simulate ahead and discard
  // what the order prunes), so the result does not depend on the thread count or timing.
  bool bound_prune = false;
  int bound_top = 10;  // >= 1: the leading ranking entries kept exact (explore --top)
  // Evaluate only the units assign_units gives shard `shard_index` of `shard_count`.
  int shard_index = 0;
  int shard_count = 1;
  // Called from worker threads (serialised by the explorer) after each unit with the number of
  // configurations done and the total to evaluate in this shard.
  std::function<void(int64_t done, int64_t total)> progress;
};

// kFailed: the simulator rejected the program (a deadlock); never expected of registry schedules,
// kept as a record rather than aborting the whole exploration.
enum class ConfigStatus {
  kPending,
  kSimulated,
  kDivisibility,
  kDuplicate,
  kDominated,
  kSchedule,
  kMemory,
  kFailed,
  kBound
};
inline constexpr std::array kAllConfigStatuses = {
    ConfigStatus::kPending,   ConfigStatus::kSimulated, ConfigStatus::kDivisibility,
    ConfigStatus::kDuplicate, ConfigStatus::kDominated, ConfigStatus::kSchedule,
    ConfigStatus::kMemory,    ConfigStatus::kFailed,    ConfigStatus::kBound};
// "pending", "simulated", "divisibility", "duplicate", "dominated", "schedule", "memory",
// "failed", "bound"
std::string_view to_string(ConfigStatus s);
ConfigStatus parse_config_status(std::string_view s, const std::string& where);

// One point of the space and what became of it.
struct ConfigRecord {
  int64_t id = 0;         // position in enumeration order
  ParallelConfig config;  // num_microbatches and virtual_stages resolved
  ConfigStatus status = ConfigStatus::kPending;
  // config.offload_layers was chosen by "auto" (ExploreSpace::offload_layers): the fewest
  // layers that fit, resolved by the memory pre-check (0 until then).
  bool offload_auto = false;
  std::string reason;  // why it was pruned (empty when simulated)
  // Peak memory of the worst actor, per device: from the pre-check (memory pruned or simulated
  // configurations), then from the simulation (simulated ones).
  int64_t peak_memory_bytes = 0;
  int peak_memory_actor = 0;
  // ExploreRequest::bound_prune: a lower bound on the step time (the busiest actor's compute
  // alone, plus the iteration overhead), 0 when not computed.
  double lower_bound_s = 0;
  // Simulated metrics (kSimulated only), as simulate_plan computes them.
  double step_time_s = 0;
  double bubble_rate = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  bool fits = false;  // simulated and peak_memory_bytes <= the limit

  bool simulated() const { return status == ConfigStatus::kSimulated; }
};

nlohmann::json config_record_to_json(const ConfigRecord& record);
ConfigRecord config_record_from_json(const nlohmann::json& j, const std::string& where);

// Wall time spent per phase, summed over threads (not part of any deterministic output).
struct ExploreTimings {
  double schedule_s = 0;  // generating schedules
  double memory_s = 0;    // partition + memory pre-check
  double lower_s = 0;     // lowering to programs
  double simulate_s = 0;  // the engine
  int64_t simulated_instructions = 0;
  int64_t programs_lowered = 0;
};

struct ExploreResult {
  int64_t max_memory_bytes = 0;       // the limit used
  std::vector<ConfigRecord> records;  // every enumerated configuration, by id
  std::vector<int64_t> ranking;       // feasible ids, by (step_time_s, id)
  std::vector<int64_t> pareto;        // feasible ids on the step time / peak memory front, by
                                      // ascending step time (strictly decreasing memory)
  int64_t evaluated = 0;              // simulated
  int64_t feasible = 0;               // simulated and fitting
  std::array<int64_t, kAllConfigStatuses.size()> by_status{};  // indexed by ConfigStatus
  ExploreTimings timings;
};

// Checks the request (gpus, batch, limits, schedule names: InputError naming the flag) and
// enumerates the space; every record is kPending or pruned by divisibility / duplicate.
std::vector<ConfigRecord> enumerate_configs(const ExploreRequest& request);

// The fixed assignment of `explore --assign` (ExploreRequest::assignment), resolved on its actors
// 0 .. pp-1. InputError (naming the flags) when virtual stages or synthesis are asked for beside
// it, or when pp is not one number.
Assignment explore_assignment(const AssignmentSpec& spec, const ModelSpec& model,
                              const std::vector<int>& pp, bool virtual_given, bool synthesize);

// Units of pending records that share a schedule and a program (pp, schedule, v, m), each a
// list of ids ascending; units in ascending order of their first id.
std::vector<std::vector<int64_t>> unit_configs(const std::vector<ConfigRecord>& records);

// Deterministic longest-first assignment of units to `shard_count` shards: result[u] = shard.
std::vector<int> assign_units(const std::vector<ConfigRecord>& records,
                              const std::vector<std::vector<int64_t>>& units, int shard_count);

// Evaluates this shard's units in place (schedule check, memory check, simulation). Records of
// other shards stay kPending. An exception from a unit (e.g. InputError from the cost model) is
// rethrown once every thread has finished, the one of the lowest configuration id.
void evaluate_configs(const ExploreRequest& request, std::vector<ConfigRecord>& records,
                      ExploreTimings* timings = nullptr);

// Ranking, Pareto front and counts from fully evaluated records (no kPending left).
ExploreResult finish_exploration(const ExploreRequest& request, std::vector<ConfigRecord> records);

// enumerate + evaluate (all shards when shard_count == 1) + finish.
ExploreResult explore(const ExploreRequest& request);

// When nothing is feasible: one line saying why, e.g. "no configuration fits in 80 GiB; the
// smallest needs 97.3 GiB (pp 8, tp 8, dp 16, b 1, m 12, Std1F1B, v 1, recompute full,
// zero1)".
std::string explain_empty(const ExploreResult& result);

// The plan of one simulated configuration, built with build_plan and simulated with
// simulate_plan (record_trace off, no memory check); plan.predicted holds the metrics.
Plan build_config_plan(const ExploreRequest& request, const ParallelConfig& config);

// "pp 8, tp 8, cp 2, dp 16, b 1, m 12, Std1F1B, v 1, recompute full, zero1" (cp only when > 1,
// zero1, shard-params or shard-grads, sp, unfused attention, tp-comm-overlap and overlap-grad-reduce only when
// on).
std::string describe_config(const ParallelConfig& config);

// The explorer's result as JSON: request summary, counts, best, top `top` configurations,
// Pareto front, every simulated configuration ("configs", in ranking order then by id) and, with
// `include_pruned`, every pruned one with its reason ("pruned", by id). Deterministic.
nlohmann::json explore_result_to_json(const ExploreRequest& request, const ExploreResult& result,
                                      int top, bool include_pruned);

// CSV: a header and one row per simulated configuration, in the order of "configs".
std::string explore_result_to_csv(const ExploreResult& result);

}  // namespace jaxpp
