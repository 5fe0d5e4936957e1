#include "simulator/plan_builder.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "costmodel/analytic_cost.h"
#include "costmodel/memory.h"
#include "graph/assignment.h"
#include "graph/error.h"
#include "graph/limits.h"
#include "graph/partition.h"
#include "graph/range_check.h"
#include "graph/release_at_exit.h"
#include "schedules/assigned.h"
#include "schedules/custom.h"
#include "schedules/lower.h"
#include "schedules/moe_pairing.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "simulator/breakdown.h"
#include "simulator/hetero_plan.h"
#include "simulator/partition_search.h"
#include "simulator/what_if.h"

namespace jaxpp {
namespace {

nlohmann::json model_metrics(const Plan& plan, const ClusterSpec& cluster, double step_s) {
  const ParallelConfig& c = plan.config;
  const double batch = c.global_batch;
  const double model_flops = plan.model.model_flops_per_sequence() * batch;
  const double hw_flops =
      hardware_flops_per_sequence(plan.model, plan.partition, c.recompute, c.recompute_layers,
                                  c.recompute_modules) *
      batch;
  const double peak = cluster.peak_flops(plan.model.dtype);
  const double tokens = batch * plan.model.tokens_per_sequence();
  return {{"tokens_per_s", tokens / step_s},
          {"tflops_per_gpu", hw_flops / step_s / c.gpus / 1e12},
          {"mfu", model_flops / step_s / (c.gpus * peak)},
          {"hfu", hw_flops / step_s / (c.gpus * peak)},
          {"model_flops_per_iteration", model_flops},
          {"hardware_flops_per_iteration", hw_flops},
          {"gpus", c.gpus}};
}

// Results that are numbers but not a plan anyone should run (issue 16, "plausible nonsense").
constexpr double kIdleBubbleRate = 0.9;

nlohmann::json plan_warnings(const Plan& plan, const SimResult& result) {
  nlohmann::json warnings = nlohmann::json::array();
  if (result.bubble_rate >= kIdleBubbleRate) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "bubble rate %.0f%% on actor %d: the pipeline is idle most of the step (too few "
                  "microbatches for the stages, or transfers far longer than the compute)",
                  result.bubble_rate * 100, result.bubble_actor);
    warnings.push_back(buf);
  }
  int transformer_layers = 0;
  for (const LayerWork& l : plan.model.layers)
    transformer_layers += l.kind == LayerKind::kTransformer ? 1 : 0;
  if (transformer_layers == 0) return warnings;
  std::vector<int> per_actor(plan.placement.num_actors, 0);
  for (int s = 0; s < plan.partition.num_stages(); ++s)
    for (int l = plan.partition.begin(s); l < plan.partition.end(s); ++l)
      per_actor[plan.placement.actor_of(s)] +=
          plan.model.layers[l].kind == LayerKind::kTransformer ? 1 : 0;
  for (size_t r = 0; r < per_actor.size(); ++r)
    if (per_actor[r] == 0)
      warnings.push_back("actor " + std::to_string(r) +
                         " holds no transformer layer (only the embedding or the logits): a "
                         "pipeline rank with almost no work");
  return warnings;
}

Assignment resolve_plan_assignment(const PlanRequest& req, const ParallelConfig& config) {
  const std::string where = req.assignment->where();
  if (!req.schedule_file.empty())
    throw_input_error(where, "a schedule file places its own stages; give a schedule name");
  if (req.partition != PartitionMode::kAuto)
    throw_input_error(where, "the assignment gives the partition; --partition is not used with it");
  if (config.virtual_stages != 1)
    throw_input_error(where, "the assignment gives the stages per actor; --virtual is not used "
                             "with it");
  return resolve_assignment(*req.assignment, req.model, config.pp);
}

}  // namespace

Partition even_partition(const ModelSpec& model, int num_stages) {
  int first = -1, count = 0;
  for (int i = 0; i < model.num_layers(); ++i) {
    if (model.layers[i].kind != LayerKind::kTransformer) continue;
    if (first < 0) first = i;
    ++count;
  }
  if (count < num_stages) {
    throw_input_error("--partition even", "the model has " + std::to_string(count) +
                                              " transformer layers, fewer than the " +
                                              std::to_string(num_stages) + " stages");
  }
  std::vector<int> starts = {0};
  for (int s = 1; s < num_stages; ++s) {
    starts.push_back(first + static_cast<int>(static_cast<int64_t>(s) * count / num_stages));
  }
  return partition_from_starts(starts, model.num_layers());
}

int check_parallel_config(const ParallelConfig& c) {
  // Each named by its flag (one line for all of them said which must be >= 1, not which was not).
  using Named = std::pair<int64_t, const char*>;
  for (const auto& [value, flag] :
       {Named{c.pp, "--pp"}, Named{c.tp, "--tp"}, Named{c.dp, "--dp"}, Named{c.cp, "--cp"},
        Named{c.virtual_stages, "--virtual"}, Named{c.global_batch, "--global-batch"},
        Named{c.microbatch_size, "--microbatch-size"}})
    if (value < 1)
      throw_input_error(flag, "expected at least 1, got " + std::to_string(value));
  check_int_in(c.gpus, "configuration: gpus", 1, kMaxGpus, kGpuCountWhat);
  // pp·virtual stages and pp·tp·dp·cp GPUs in 64 bits: each factor is an int, and a product that
  // wraps an int could equal --gpus by accident.
  if (int64_t{c.pp} * c.virtual_stages > kMaxStages) {
    throw_input_error("configuration", "pp " + std::to_string(c.pp) + " x virtual " +
                                           std::to_string(c.virtual_stages) +
                                           " stages is more than the limit of " +
                                           std::to_string(kMaxStages));
  }
  const int64_t product = int64_t{c.pp} * c.tp * c.dp * c.cp;
  if (product != c.gpus) {
    std::string factors = std::to_string(c.pp) + "·" + std::to_string(c.tp) + "·" +
                          std::to_string(c.dp);
    if (c.cp > 1) factors += "·" + std::to_string(c.cp);
    throw_input_error("configuration", std::string(c.cp > 1 ? "pp·tp·dp·cp" : "pp·tp·dp") +
                                           " = " + factors + " = " + std::to_string(product) +
                                           " does not equal --gpus " + std::to_string(c.gpus));
  }
  check_shard_gradients(c, "configuration", /*flags=*/false);
  if (c.tp_comm_overlap && !c.sequence_parallel && c.tp > 1) {
    throw_input_error("configuration",
                      "tp communication overlap needs sequence parallelism (as Megatron-LM's "
                      "--tp-comm-overlap)");
  }
  const int64_t per_step = static_cast<int64_t>(c.dp) * c.microbatch_size;
  if (c.global_batch % per_step != 0) {
    throw_input_error("configuration",
                      "global batch " + std::to_string(c.global_batch) +
                          " is not divisible by dp·microbatch_size = " + std::to_string(c.dp) +
                          "·" + std::to_string(c.microbatch_size) + " = " +
                          std::to_string(per_step));
  }
  return static_cast<int>(c.global_batch / per_step);
}

void parse_partition_flag(const std::string& text, PlanRequest& request) {
  if (text.empty())  // was read as auto
    throw_input_error("--partition", "expected auto, even, balanced-time or the first layer of "
                                     "each stage (e.g. 0,13,26), got ''");
  if (text == "auto") {
    request.partition = PartitionMode::kAuto;
    return;
  }
  if (text == "even") {
    request.partition = PartitionMode::kEven;
    return;
  }
  if (text == "balanced-time") {
    request.partition = PartitionMode::kBalancedTime;
    return;
  }
  request.partition = PartitionMode::kExplicit;
  request.partition_starts.clear();
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t pos = 0;
      const int v = std::stoi(item, &pos);
      if (pos != item.size()) throw std::invalid_argument(item);
      request.partition_starts.push_back(v);
    } catch (const std::exception&) {
      throw_input_error("--partition",
                        "expected auto, even, balanced-time or a comma-separated list of "
                        "stage start layers, got '" +
                            text + "'");
    }
  }
}

Schedule make_schedule(const std::string& name, const std::string& file, int pp, int num_stages,
                       int num_microbatches, bool fuse_steady_state) {
  if (!file.empty()) {
    Schedule s = load_schedule_file(file);
    if (s.num_actors() != pp) {
      throw_input_error(file, "the schedule has " + std::to_string(s.num_actors()) +
                                  " actors but --pp is " + std::to_string(pp));
    }
    if (num_stages > 0 && s.num_stages != num_stages) {
      throw_input_error(file, "the schedule has " + std::to_string(s.num_stages) +
                                  " stages but --pp x --virtual is " + std::to_string(num_stages));
    }
    if (num_microbatches > 0 && s.num_microbatches != num_microbatches) {
      throw_input_error(file, "the schedule has " + std::to_string(s.num_microbatches) +
                                  " microbatches but the configuration needs " +
                                  std::to_string(num_microbatches));
    }
    validate_or_throw(s, file);  // "<file>: invalid schedule: ..." (missing task, deadlock, ...)
    return s;
  }
  ScheduleParams params;
  params.num_actors = pp;
  params.num_stages = num_stages;
  params.num_microbatches = num_microbatches;
  params.fuse_steady_state = fuse_steady_state;
  return generate_schedule(name, params);
}

namespace {

// The refusal of an explicit --virtual `requested` the schedule does not run (it runs `runs`).
void check_virtual_runs(const std::string& schedule, int runs, int requested) {
  if (runs == requested) return;
  throw_input_error("--virtual " + std::to_string(requested),
                    "schedule " + schedule + " runs " + std::to_string(runs) +
                        " stages per actor; give --virtual " + std::to_string(runs) +
                        " or leave it out");
}

}  // namespace

void check_virtual_kept(const Plan& plan, int requested) {
  check_virtual_runs(plan.config.schedule, plan.config.virtual_stages, requested);
}

Plan build_plan(const PlanRequest& req) {
  ParallelConfig config = req.config;
  const int m = check_parallel_config(config);
  config.num_microbatches = m;
  if (config.etp == config.tp) config.etp = 0;  // the default, stored as 0
  check_moe_config(req.model, config, "configuration", /*flags=*/true);
  if (const std::string why = tp_heads_error(req.model, config.tp); !why.empty())
    throw_input_error("configuration", why);
  const int requested_stages = config.virtual_stages > 1 ? config.pp * config.virtual_stages : 0;
  std::optional<Assignment> assignment;
  if (req.assignment) assignment = resolve_plan_assignment(req, config);
  Schedule schedule =
      assignment ? schedule_on_placement(config.schedule, assignment->placement, m,
                                         req.fuse_steady_state, assignment->spec.where())
                 : make_schedule(config.schedule, req.schedule_file, config.pp, requested_stages,
                                 m, req.fuse_steady_state);
  // Megatron's combined 1F1B: each backward runs paired with the next forward (the order is
  // kept; only the grouping changes).
  if (config.moe_overlap == MoeOverlap::k1F1B && config.ep > 1)
    schedule = pair_backward_forward(schedule, "--moe-overlap 1f1b (" + schedule.name + ")");
  const int num_stages = schedule.num_stages;
  if (!assignment && num_stages % config.pp != 0) {
    throw_input_error("schedule", std::to_string(num_stages) + " stages on " +
                                      std::to_string(config.pp) + " actors");
  }
  config.virtual_stages =
      assignment ? max_stages_per_actor(schedule.placement) : num_stages / config.pp;
  if (!req.schedule_file.empty()) config.schedule = schedule.name;

  Plan plan;
  plan.model = req.model;
  plan.cluster = cluster_to_json(req.cluster);
  plan.placement = schedule.placement;
  if (assignment) {
    plan.partition = assignment->partition;
    plan.assignment = assignment->spec;
  }
  switch (assignment ? PartitionMode::kExplicit : req.partition) {
    case PartitionMode::kAuto: {
      AutoPartitionOptions o;
      o.num_stages = num_stages;
      plan.partition = auto_partition(req.model, o);
      break;
    }
    case PartitionMode::kEven:
      plan.partition = even_partition(req.model, num_stages);
      break;
    case PartitionMode::kExplicit:
      if (assignment) break;
      plan.partition = partition_from_starts(req.partition_starts, req.model.num_layers());
      if (plan.partition.num_stages() != num_stages) {
        throw_input_error("--partition", "gives " + std::to_string(plan.partition.num_stages()) +
                                             " stages but the schedule has " +
                                             std::to_string(num_stages));
      }
      break;
    case PartitionMode::kBalancedTime:
      plan.partition = search_partition(req.model, req.cluster, config, schedule,
                                        {.max_memory_bytes = req.max_memory_bytes,
                                         .max_evaluations = req.partition_evaluations})
                           .partition;
      break;
  }
  plan.config = config;
  const AnalyticCost cost(plan.model, plan.partition, plan.placement, config, req.cluster);
  plan.program = lower(schedule, lowering_options_of(cost, num_stages));
  return plan;
}

SimulatedPlan simulate_plan(const Plan& plan, const PlanSimOptions& options) {
  if (!plan.meshes.empty()) return simulate_hetero_plan(plan, options);
  const ClusterSpec cluster = cluster_from_json(plan.cluster, "plan: field 'cluster'");
  const AnalyticCost cost(plan.model, plan.partition, plan.placement, plan.config, cluster);
  const MemoryModel mem =
      build_memory_model(plan.model, plan.partition, plan.placement, plan.config, cluster);
  SimOptions so;
  so.record_trace = options.record_trace || options.breakdown;
  so.overlap_grad_reduce = options.overlap_grad_reduce || plan.config.overlap_grad_reduce;
  so.iteration_overhead_s = cluster.iteration_overhead_s;
  so.static_bytes_per_actor = mem.static_bytes_per_actor();
  so.stash_bytes_per_stage = mem.stash_bytes_per_stage;
  SimulatedPlan out;
  out.program = plan.program;
  std::optional<SequenceLengthCost> lengths;
  if (options.perturbation && !options.perturbation->seq_lens.empty()) {
    // Per-microbatch lengths: every task priced at its microbatch's length by the operator
    // model, the transfers carrying that length's activation bytes; the other items on top.
    check_perturbation(*options.perturbation, plan.placement.num_actors,
                       plan.program.num_microbatches, "--perturb");
    lengths.emplace(plan.model, plan.partition, plan.placement, plan.config, cluster,
                    options.perturbation->seq_lens, "--perturb");
    out.program = lengths->scale_program(plan.program);
    // Each microbatch stashes the activations of its own length.
    const size_t stages = static_cast<size_t>(plan.partition.num_stages());
    const size_t m = static_cast<size_t>(plan.program.num_microbatches);
    so.stash_bytes_per_stage_microbatch.assign(stages * m, 0);
    std::map<int, MemoryModel> memory_of_length;
    // The loss transient (costmodel/memory.h) of the longest loss each actor runs, one at a time.
    std::vector<int64_t> loss(mem.actors.size(), 0);
    for (size_t i = 0; i < m && i < options.perturbation->seq_lens.size(); ++i) {
      const int len = options.perturbation->seq_lens[i];
      auto it = memory_of_length.find(len);
      if (it == memory_of_length.end())
        it = memory_of_length
                 .emplace(len, build_memory_model(lengths->model_at(static_cast<int>(i)),
                                                  plan.partition, plan.placement, plan.config,
                                                  cluster))
                 .first;
      for (size_t s = 0; s < stages; ++s)
        so.stash_bytes_per_stage_microbatch[s * m + i] = it->second.stash_bytes_per_stage[s];
      for (size_t r = 0; r < loss.size(); ++r)
        loss[r] = std::max(loss[r], it->second.actors[r].loss_transient_bytes);
    }
    for (size_t r = 0; r < loss.size(); ++r)
      so.static_bytes_per_actor[r] += loss[r] - mem.actors[r].loss_transient_bytes;
    Perturbation rest = *options.perturbation;
    rest.seq_lens.clear();
    rest.nominal_seq_len = 0;
    const PerturbedCost perturbed(*lengths, rest);
    out.result = simulate(out.program, perturbed, so);
  } else if (options.perturbation) {
    const PerturbedCost perturbed(cost, *options.perturbation);
    out.result = simulate(plan.program, perturbed, so);
  } else {
    out.result = simulate(plan.program, cost, so);
  }
  out.metrics = sim_result_to_json(out.result, out.program);
  nlohmann::json extra = model_metrics(plan, cluster, out.result.step_time_s);
  if (lengths) {  // tokens and FLOPs of the lengths actually run
    const double replicas = static_cast<double>(plan.config.dp) * plan.config.microbatch_size;
    const double step = out.result.step_time_s;
    const double peak = cluster.peak_flops(plan.model.dtype);
    const double model_flops = lengths->model_flops_per_replica_sequence() * replicas;
    const double hw_flops = lengths->hardware_flops_per_replica_sequence() * replicas;
    extra["tokens_per_s"] = lengths->tokens_per_replica_sequence() * replicas / step;
    extra["tflops_per_gpu"] = hw_flops / step / plan.config.gpus / 1e12;
    extra["mfu"] = model_flops / step / (plan.config.gpus * peak);
    extra["hfu"] = hw_flops / step / (plan.config.gpus * peak);
    extra["model_flops_per_iteration"] = model_flops;
    extra["hardware_flops_per_iteration"] = hw_flops;
  }
  for (const auto& [key, value] : extra.items()) out.metrics[key] = value;
  out.metrics["cluster"] = cluster.name;
  out.metrics["model"] = plan.model.name;
  out.metrics["config"] = config_to_json(plan.config);
  out.metrics["warnings"] = plan_warnings(plan, out.result);
  // Activation offloading: the host bytes of each actor (memory.h), checked below.
  std::vector<int64_t> host_bytes;
  if (plan.config.offload_layers > 0) {
    host_bytes = host_offload_bytes_per_actor(mem, plan.placement, out.result.peak_stashed_per_stage);
    out.metrics["host_offload_bytes"] = host_bytes;
  }
  if (plan.assignment) {  // the stages the assignment gave (maximal runs on one actor)
    out.metrics["assignment"] = {{"source", plan.assignment->source},
                                 {"num_stages", plan.partition.num_stages()},
                                 {"stage_begin", plan.partition.stage_begin},
                                 {"placement", placement_to_json(plan.placement)}};
  }
  if (options.breakdown) {
    out.metrics["breakdown"] =
        breakdown_to_json(step_breakdown(out.program, cost, out.result));
    add_breakdown_parts(cost, out.program, out.result.trace);
  }
  if (options.check_memory) {
    std::vector<int64_t> peak;
    for (const ActorStats& a : out.result.actors) peak.push_back(a.peak_memory_bytes);
    if (options.max_memory_bytes > 0)
      check_memory_fits(peak, options.max_memory_bytes, "--max-memory-gib");
    else
      check_memory_fits(peak, cluster);
    check_host_memory_fits(host_bytes, cluster);
  }
  return out;
}

SimulatedPlan simulate_stage_times(const Schedule& schedule, const StageTimes& times,
                                   const PlanSimOptions& options, MoeOverlap overlap) {
  if (times.num_stages() != schedule.num_stages) {
    throw_input_error("stage times", "given for " + std::to_string(times.num_stages()) +
                                         " stages but the schedule has " +
                                         std::to_string(schedule.num_stages));
  }
  const bool moe = times.has_alltoall();
  LoweringOptions lo;
  lo.emit_grad_reduce = false;
  SimulatedPlan out;
  // Megatron's combined 1F1B, as build_plan does it for ep > 1.
  out.program =
      moe && overlap == MoeOverlap::k1F1B
          ? lower(pair_backward_forward(schedule, "--moe-overlap 1f1b (" + schedule.name + ")"),
                  lo)
          : lower(schedule, lo);
  const Program& program = out.program;
  const StageTimesCost cost(times, overlap != MoeOverlap::kNone);
  SimOptions so;
  so.record_trace = options.record_trace;
  so.overlap_grad_reduce = options.overlap_grad_reduce;
  if (options.perturbation) {
    const PerturbedCost perturbed(cost, *options.perturbation);
    out.result = simulate(program, perturbed, so);
  } else {
    out.result = simulate(program, cost, so);
  }
  out.metrics = sim_result_to_json(out.result, program);
  out.metrics["schedule"] = schedule.name;
  out.metrics["num_microbatches"] = schedule.num_microbatches;
  out.metrics["num_stages"] = schedule.num_stages;
  out.metrics["pp"] = schedule.num_actors();
  if (moe) out.metrics["moe_overlap"] = std::string(to_string(overlap));
  return out;
}

SimulatedPlan simulate_measured(const MeasuredRequest& request, const PlanSimOptions& options) {
  if (!request.pp) throw_input_error("--pp", "required (pipeline actors)");
  if (!request.microbatches) {
    throw_input_error("--microbatches",
                      "required in measured mode (or give --model for model mode)");
  }
  if (request.schedule.empty() && request.schedule_file.empty()) {
    throw_input_error("--schedule", "required (a schedule name or --schedule-file)");
  }
  const int pp = *request.pp;
  const int m = *request.microbatches;
  const int v = request.virtual_stages;
  if (pp < 1) throw_input_error("--pp", "must be >= 1, got " + std::to_string(pp));
  if (m < 1) throw_input_error("--microbatches", "must be >= 1, got " + std::to_string(m));
  if (v < 1) throw_input_error("--virtual", "must be >= 1, got " + std::to_string(v));
  Schedule schedule =
      make_schedule(request.schedule, request.schedule_file, pp,
                    v > 1 ? checked_int_product(pp, v, kMaxStages, "--pp x --virtual") : 0, m,
                    request.fuse_steady_state);
  if (request.virtual_given && request.schedule_file.empty())
    check_virtual_runs(schedule.name, schedule.num_stages / pp, v);
  StageTimes times;
  if (!request.stage_times_file.empty()) {
    times = load_stage_times(request.stage_times_file, schedule.num_stages);
  } else if (request.stage_times_doc) {
    times = stage_times_from_json(*request.stage_times_doc, request.stage_times_source,
                                  schedule.num_stages);
  } else {
    if (!request.t_f_ms)
      throw_input_error("--t-f", "required in measured mode (or --stage-times FILE)");
    if (!request.t_b_ms)
      throw_input_error("--t-b", "required in measured mode (or --stage-times FILE)");
    times = uniform_stage_times(schedule.num_stages,
                                stage_time_s_from_ms(*request.t_f_ms, false, "--t-f"),
                                stage_time_s_from_ms(*request.t_b_ms, false, "--t-b"),
                                stage_time_s_from_ms(request.t_w_ms, true, "--t-w"),
                                stage_time_s_from_ms(request.t_comm_ms, true, "--t-comm"));
    times = with_uniform_alltoall(times,
                                  stage_time_s_from_ms(request.t_a2a_f_ms, true, "--t-a2a-f"),
                                  stage_time_s_from_ms(request.t_a2a_b_ms, true, "--t-a2a-b"));
  }
  const MoeOverlap overlap = request.moe_overlap;
  // Exit 0 with the plain run before: the overlap of an all-to-all that no stage has.
  if (overlap != MoeOverlap::kAuto && !times.has_alltoall())
    throw_input_error("--moe-overlap", std::string(to_string(overlap)) +
                                           " overlaps the MoE all-to-all, but no stage has one "
                                           "(give --t-a2a-f/--t-a2a-b or a2a times in "
                                           "--stage-times)");
  if (!options.perturbation) {
    SimulatedPlan sim = simulate_stage_times(schedule, times, options, overlap);
    release_at_exit(std::move(schedule));  // the command-line tool does not free it
    return sim;
  }
  // What-if: the unperturbed run first, then the perturbed one with a report of the difference.
  check_perturbation(*options.perturbation, schedule.num_actors(), schedule.num_microbatches,
                     "--perturb");
  if (!options.perturbation->seq_lens.empty() && options.perturbation->nominal_seq_len <= 0)
    throw_input_error("--perturb", "seq-lens in measured mode needs nominal-seq-len=N (the "
                                   "sequence length the stage times were measured at)");
  PlanSimOptions base_options = options;
  base_options.record_trace = false;
  base_options.perturbation = nullptr;
  const SimulatedPlan base = simulate_stage_times(schedule, times, base_options, overlap);
  SimulatedPlan sim = simulate_stage_times(schedule, times, options, overlap);
  sim.metrics["perturbation"] =
      perturbation_report(base.result, sim.result, *options.perturbation);
  return sim;
}

}  // namespace jaxpp
