// _jaxpp_sim: the compiled part of the Python package jaxpp_sim (python/jaxpp_sim/__init__.py
// wraps it in Python's conventions; docs/python.md). Every function calls the same library code
// as the matching jaxpp-sim command. Structured values cross the boundary as JSON text (the
// formats the CLI prints with --json), which the Python side parses once.
//
// Errors: jaxpp::InputError -> jaxpp_sim.InputError (a ValueError) with the CLI's one-line
// message; any other std::exception -> RuntimeError. Every call that simulates, explores or runs
// releases the GIL while the C++ code works.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/report_output.h"
#include "costmodel/analytic_cost.h"
#include "costmodel/calibration.h"
#include "costmodel/cluster.h"
#include "costmodel/stage_times_cost.h"
#include "graph/assignment.h"
#include "graph/error.h"
#include "graph/graph_report.h"
#include "graph/hf_config.h"
#include "graph/input_file.h"
#include "graph/json_util.h"
#include "graph/limits.h"
#include "graph/model.h"
#include "graph/plan.h"
#include "graph/range_check.h"
#include "handoff/handoff.h"
#include "runtime/backend.h"
#include "runtime/calibrate_request.h"
#include "runtime/microbench.h"
#include "runtime/run.h"
#include "schedules/custom.h"
#include "schedules/registry.h"
#include "schedules/schedule.h"
#include "schedules/shardy.h"
#include "schedules/summary.h"
#include "schedules/timeline.h"
#include "schedules/validate.h"
#include "simulator/explore_summary.h"
#include "simulator/explore_synthesize.h"
#include "simulator/explorer.h"
#include "simulator/graph_partition.h"
#include "simulator/model_validation.h"
#include "simulator/plan_builder.h"
#include "simulator/plan_check.h"
#include "simulator/synthesis_request.h"
#include "simulator/what_if.h"
#include "trace/export.h"
#include "trace/plan_task_graph.h"
#include "trace/trace.h"

#include "cli/builtin_corpus.h"  // generated: the validation corpus, as in jaxpp-sim

namespace py = pybind11;

namespace jaxpp::python {
namespace {

using json = nlohmann::json;

json parse(const std::string& text, const std::string& where) {
  return parse_json_text(text, where);
}

// --- catalogues --------------------------------------------------------------------------------

std::string schedules_json() {
  json out = json::array();
  for (const ScheduleInfo& info : all_schedules()) {
    out.push_back({{"name", info.name},
                   {"aliases", info.aliases},
                   {"description", info.description},
                   {"constraints", info.constraints}});
  }
  return out.dump();
}

// --- models and clusters -----------------------------------------------------------------------

std::string load_model_json(const std::string& name_or_path) {
  return model_to_json(load_model(name_or_path)).dump();
}
// A dict in the model JSON format or a Hugging Face config (as load_model tells them apart).
std::string model_from_json_text(const std::string& text, const std::string& source) {
  const json doc = parse(text, source);
  if (is_hf_config(doc)) return model_to_json(hf_model_from_json(doc, source)).dump();
  return model_to_json(model_from_json(doc, source)).dump();
}
std::string model_shape_json(const std::string& model_text) {
  // The shape and the totals `graph --json` reports (Model.shape()'s promise).
  const ModelSpec m = model_from_json(parse(model_text, "model"), "model");
  json j = model_shape_to_json(m);
  j["params"] = m.total_params();
  j["active_params"] = m.active_params();
  j["mtp_params"] = m.mtp_params();
  return j.dump();
}
std::string load_cluster_json(const std::string& name_or_path) {
  return cluster_to_json(load_cluster_arg(name_or_path)).dump();
}
std::string cluster_from_json_text(const std::string& text, const std::string& source) {
  return cluster_to_json(cluster_from_json(parse(text, source), source)).dump();
}

// --- simulate ----------------------------------------------------------------------------------

struct SimOut {
  std::string metrics;
  std::string trace;
  std::string plan;
};

SimOut sim_out(const SimulatedPlan& sim, bool with_trace) {
  SimOut out;
  out.metrics = sim.metrics.dump();
  if (with_trace) out.trace = trace_to_json(sim.result.trace).dump();
  return out;
}

PlanSimOptions sim_options(bool record_trace, bool breakdown, bool check_memory,
                           bool overlap_grad_reduce) {
  PlanSimOptions o;
  o.record_trace = record_trace;
  o.breakdown = breakdown;
  o.check_memory = check_memory;
  o.overlap_grad_reduce = overlap_grad_reduce;
  return o;
}

// The assignment argument of simulate/explore (--assign): a file path, or the JSON text of a
// dict ({"assignment": {...}} or the entries themselves). nullopt when neither is given.
std::optional<AssignmentSpec> assignment_arg(const std::string& path, const std::string& text) {
  if (!path.empty()) return read_assignment_file(path);
  if (text.empty()) return std::nullopt;
  const nlohmann::json j = parse(text, "assign");
  const bool wrapped = j.is_object() && j.contains("assignment");
  return assignment_spec_from_json(wrapped ? j.at("assignment") : j, "assign");
}

// The model with --a2a-dtype applied (its all-to-all payload types), as its JSON text.
std::string model_with_a2a_dtype(const std::string& model_text, const std::string& a2a_dtype) {
  ModelSpec model = model_from_json(parse(model_text, "model"), "model");
  set_alltoall_dtypes(model, a2a_dtype, "--a2a-dtype");
  return model_to_json(model).dump();
}

SimOut simulate_model_mode(const std::string& model_text, const std::string& cluster_text, int gpus,
                           int pp, int tp, int dp, int cp, std::optional<int> virtual_stages,
                           int global_batch,
                           int microbatch_size, const std::string& schedule,
                           const std::string& schedule_file, bool fuse_steady_state,
                           const std::string& recompute, bool sequence_parallel, bool zero1,
                           bool overlap_grad_reduce, bool tp_comm_overlap,
                           const std::string& attention, const std::string& partition,
                           std::optional<double> max_memory_gib, int ep, std::optional<int> etp,
                           double moe_imbalance, const std::string& moe_overlap,
                           const std::string& perturb, bool breakdown, bool check_memory,
                           bool record_trace, const std::string& assign_path,
                           const std::string& assign_text, const std::string& grad_dtype,
                           bool shard_grads, bool shard_params,
                           const std::string& optimizer_state, const std::string& moe_dispatcher,
                           const std::string& moe_routing, std::optional<int> recompute_layers,
                           int offload_layers, const std::string& recompute_modules,
                           int moe_node_limit, int moe_device_limit) {
  // In the CLI's order: --perturb is checked before the model is read.
  std::optional<Perturbation> perturbation;
  if (!perturb.empty()) {
    if (breakdown)
      throw_input_error("--perturb and --breakdown",
                        "the breakdown prices the unperturbed cost model; run them separately");
    perturbation = parse_perturbation(perturb, "--perturb");
  }
  PlanRequest req;
  req.model = model_from_json(parse(model_text, "model"), "model");
  req.cluster = cluster_from_json(parse(cluster_text, "cluster"), "cluster");
  if (schedule.empty() && schedule_file.empty())
    throw_input_error("--schedule", "required (a schedule name or --schedule-file)");
  if (!schedule.empty() && !schedule_file.empty())
    throw_input_error("--schedule and --schedule-file",
                      "give a schedule name or a schedule file, not both");
  ParallelConfig& c = req.config;
  c.gpus = gpus;
  c.pp = pp;
  c.tp = tp;
  c.dp = dp;
  c.cp = cp;
  c.virtual_stages = virtual_stages.value_or(1);
  c.global_batch = global_batch;
  c.microbatch_size = microbatch_size;
  c.schedule = schedule.empty() ? "custom" : schedule;
  c.recompute = parse_recompute(recompute, "--recompute");
  if (recompute_layers) {
    c.recompute_layers = *recompute_layers;
    if (c.recompute_layers < 0)
      throw_input_error("--recompute-layers",
                        "expected a number of layers >= 0, got " + std::to_string(c.recompute_layers));
    check_recompute_layers(c, "--recompute-layers");
  }
  if (!recompute_modules.empty()) {
    c.recompute_modules =
        recompute_modules_flag(recompute_modules, c.recompute, "--recompute-modules");
    check_recompute_modules(c, "--recompute-modules");
  }
  c.offload_layers = offload_layers;
  c.sequence_parallel = sequence_parallel;
  c.zero1 = zero1;
  c.shard_parameters = shard_params;
  c.shard_gradients = shard_grads || shard_params;
  check_shard_gradients(c, "configuration", /*flags=*/true);
  c.overlap_grad_reduce = overlap_grad_reduce;
  c.tp_comm_overlap = tp_comm_overlap;
  c.attention = parse_attention_kernel(attention, "--attention");
  c.ep = ep;
  c.etp = etp.value_or(0);
  if (etp && c.etp < 1) throw_input_error("--etp", "must be >= 1, got " + std::to_string(c.etp));
  if (etp) check_etp_flag(req.model);
  c.moe_imbalance = moe_imbalance;
  c.moe_overlap = parse_moe_overlap(moe_overlap, "--moe-overlap");
  c.moe_dispatcher = parse_moe_dispatcher(moe_dispatcher, "--moe-dispatcher");
  c.moe_routing = parse_moe_routing(moe_routing, "--moe-routing");
  c.moe_node_limit = moe_node_limit;
  c.moe_device_limit = moe_device_limit;
  c.grad_dtype = parse_grad_dtype(grad_dtype, "--grad-dtype");
  c.optimizer_state = parse_optimizer_state(optimizer_state, "--optimizer-state");
  req.schedule_file = schedule_file;
  req.fuse_steady_state = fuse_steady_state;
  parse_partition_flag(partition, req);
  req.assignment = assignment_arg(assign_path, assign_text);
  check_offload_layers(req.model, c, "--offload-layers");
  check_recompute_modules(c, "--recompute-modules", &req.model);
  PlanSimOptions options = sim_options(record_trace, breakdown, check_memory, overlap_grad_reduce);
  // --max-memory-gib: the limit of the balanced-time search and of the fit check alike.
  if (max_memory_gib) {
    req.max_memory_bytes = max_memory_bytes_from_gib(*max_memory_gib);
    options.max_memory_bytes = req.max_memory_bytes;
  }
  SimOut out;
  {
    py::gil_scoped_release release;
    Plan plan = build_plan(req);
    if (virtual_stages) check_virtual_kept(plan, *virtual_stages);
    SimulatedPlan sim = perturbation ? simulate_plan_perturbed(plan, options, *perturbation)
                                     : simulate_plan(plan, options);
    // As simulate --json: the searched partition's stage starts (also in the plan's prediction).
    if (req.partition == PartitionMode::kBalancedTime)
      sim.metrics["stage_begin"] = plan.partition.stage_begin;
    out = sim_out(sim, record_trace || breakdown);
    // A plan holds the unperturbed prediction (simulate refuses --perturb with --plan).
    if (!perturbation) {
      plan.predicted = sim.metrics;
      out.plan = plan_to_json(plan).dump();
    }
  }
  return out;
}

SimOut simulate_measured_mode(const std::string& schedule, const std::string& schedule_file,
                              std::optional<int> pp, std::optional<int> microbatches,
                              std::optional<int> virtual_stages, bool fuse_steady_state,
                              std::optional<double> t_f,
                              std::optional<double> t_b, double t_w, double t_comm,
                              double t_a2a_f, double t_a2a_b, const std::string& moe_overlap,
                              const std::string& stage_times_file,
                              const std::string& stage_times_text, const std::string& perturb,
                              bool record_trace) {
  std::optional<Perturbation> perturbation;
  if (!perturb.empty()) perturbation = parse_perturbation(perturb, "--perturb");
  MeasuredRequest req;
  req.schedule = schedule;
  req.schedule_file = schedule_file;
  req.pp = pp;
  req.microbatches = microbatches;
  req.virtual_stages = virtual_stages.value_or(1);
  req.virtual_given = virtual_stages.has_value();
  req.fuse_steady_state = fuse_steady_state;
  req.t_f_ms = t_f;
  req.t_b_ms = t_b;
  req.t_w_ms = t_w;
  req.t_comm_ms = t_comm;
  req.t_a2a_f_ms = t_a2a_f;
  req.t_a2a_b_ms = t_a2a_b;
  req.moe_overlap = parse_moe_overlap(moe_overlap, "--moe-overlap");
  req.stage_times_file = stage_times_file;
  if (!stage_times_text.empty()) req.stage_times_doc = parse(stage_times_text, "stage_times");
  SimOut out;
  {
    py::gil_scoped_release release;
    PlanSimOptions options = sim_options(record_trace, false, true, false);
    if (perturbation) options.perturbation = &*perturbation;
    const SimulatedPlan sim = simulate_measured(req, options);
    out = sim_out(sim, record_trace);
  }
  return out;
}

// --- explore -----------------------------------------------------------------------------------

std::vector<bool> off_on_both_domain(const std::string& text, const std::string& flag) {
  if (text == "off") return {false};
  if (text == "on") return {true};
  if (text == "both") return {false, true};
  throw_input_error(flag, "expected off, on or both, got '" + text + "'");
}

std::vector<bool> zero1_domain(const std::string& text) {
  return off_on_both_domain(text, "--zero1");
}

struct ExploreOut {
  std::string summary;    // explore --json
  double explore_s = 0;   // wall time of the exploration itself (enumerate, evaluate, rank)
  std::string best_plan;  // the best plan when it is a synthesized one (explore --plan), else ""
  std::string csv;        // explore --csv, when asked for
};

// explore --json and the wall time of the exploration itself, which the overhead benchmark
// compares with the whole Python call. The what-if additions run as in the CLI: the synthesis
// (--synthesize) on the ranked result, then the robust ranking (--robust) of the --top best.
ExploreOut explore_json(const std::string& model_text, const std::string& cluster_text, int gpus,
                        int global_batch, std::optional<double> max_memory_gib,
                        const std::vector<std::string>& schedules, const std::vector<int>& pp,
                        const std::vector<int>& tp, const std::vector<int>& ep,
                        const std::vector<int>& etp, const std::vector<int>& cp,
                        const std::vector<int>& microbatch_sizes,
                        const std::vector<int>& virtual_stages,
                        const std::vector<std::string>& recompute, const std::string& zero1,
                        bool sequence_parallel, const std::string& attention, bool tp_comm_overlap,
                        bool overlap_grad_reduce, bool bound_prune, const std::string& partition,
                        int threads, int top, bool explain, bool csv, bool synthesize,
                        std::optional<int> synthesize_top, std::optional<double> synthesize_time_s,
                        std::optional<int> robust, std::optional<double> robust_jitter,
                        std::optional<py::function> progress, const std::string& assign_path,
                        const std::string& assign_text, const std::string& grad_dtype,
                        const std::string& shard_grads, const std::string& shard_params,
                        const std::string& optimizer_state, const std::string& moe_dispatcher,
                        const std::string& moe_routing,
                        const std::vector<std::string>& offload_layers) {
  // The CLI's checks of the what-if flags, in its order.
  if (!synthesize) {
    if (synthesize_top) throw_input_error("--synthesize-top", "needs --synthesize");
    if (synthesize_time_s) throw_input_error("--synthesize-time-s", "needs --synthesize");
  }
  ExploreSynthesisOptions synth_options;
  synth_options.top_groups = check_int_in(synthesize_top.value_or(10), "--synthesize-top", 1, 10000,
                                          "a number of configurations");
  synth_options.time_budget_s = check_double_in(
      synthesize_time_s.value_or(0.1), "--synthesize-time-s", 0, 600, "a search time in seconds");
  if (!robust && robust_jitter) throw_input_error("--robust-jitter", "needs --robust");
  const int robust_runs =
      robust ? check_int_in(*robust, "--robust", 1, 10000, "a number of runs") : 0;
  const double jitter = check_double_in(robust_jitter.value_or(0.1), "--robust-jitter", 0, 0.999,
                                        "a jitter fraction");
  if (top < 0) throw_input_error("--top", "must be >= 0, got " + std::to_string(top));
  ExploreRequest req;
  req.model = model_from_json(parse(model_text, "model"), "model");
  req.cluster = cluster_from_json(parse(cluster_text, "cluster"), "cluster");
  req.gpus = gpus;
  req.global_batch = global_batch;
  if (max_memory_gib) req.max_memory_bytes = max_memory_bytes_from_gib(*max_memory_gib);
  ExploreSpace& space = req.space;
  space.schedules = schedules;
  space.pp = pp;
  space.tp = tp;
  space.ep = ep;
  space.etp = etp;
  space.cp = cp;
  space.microbatch_sizes = microbatch_sizes;
  space.virtual_stages = virtual_stages;
  // none, selective, full, op, full:N (partial recompute) or selective:a+b (recompute modules),
  // as explore's --recompute list.
  for (const std::string& r : recompute) add_recompute_choice(r, space, "--recompute");
  // Activation offloading choices, as explore's --offload-layers list (numbers and "auto").
  for (const std::string& o : offload_layers) add_offload_choice(o, space, "--offload-layers");
  space.zero1 = zero1_domain(zero1);
  space.shard_gradients = off_on_both_domain(shard_grads, "--shard-grads");
  space.shard_parameters = off_on_both_domain(shard_params, "--shard-params");
  space.sequence_parallel = sequence_parallel;
  space.attention = parse_attention_kernel(attention, "--attention");
  space.tp_comm_overlap = tp_comm_overlap;
  if (std::optional<AssignmentSpec> spec = assignment_arg(assign_path, assign_text))
    req.assignment =
        explore_assignment(*spec, req.model, pp, !virtual_stages.empty(), synthesize);
  req.overlap_grad_reduce = overlap_grad_reduce;
  req.grad_dtype = parse_grad_dtype(grad_dtype, "--grad-dtype");
  req.optimizer_state = parse_optimizer_state(optimizer_state, "--optimizer-state");
  req.moe_dispatcher = parse_moe_dispatcher(moe_dispatcher, "--moe-dispatcher");
  req.moe_routing = parse_moe_routing(moe_routing, "--moe-routing");
  req.bound_prune = bound_prune;
  req.bound_top = std::max(1, top);  // as the CLI: --bound-prune keeps the first --top exact
  {  // as explore --partition: parsed as simulate's flag; explore() refuses what it cannot take
    PlanRequest parsed;
    parse_partition_flag(partition, parsed);
    req.partition = parsed.partition;
  }
  // 0 (or None) = hardware concurrency, as the CLI's --threads 0.
  check_int_in(threads, "--threads", 0, 4096, "a number of threads (0 = all cores)");
  req.threads = threads;
  // The callback runs on the explorer's worker threads (serialised by it): it takes the GIL, and
  // the first Python exception it raises is kept and raised once the exploration has ended.
  std::optional<py::error_already_set> callback_error;
  if (progress) {
    req.progress = [&progress, &callback_error](int64_t done, int64_t total) {
      py::gil_scoped_acquire gil;
      if (callback_error) return;
      try {
        (*progress)(done, total);
      } catch (py::error_already_set& e) {
        callback_error = std::move(e);
      }
    };
  }
  ExploreOut out;
  std::string empty_reason;
  {
    py::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    ExploreResult res = explore(req);
    ExploreSynthesis synthesis;
    if (synthesize && !res.ranking.empty())
      synthesis = add_synthesized_configs(req, res, synth_options);
    std::vector<RobustEntry> robust_entries;
    if (robust_runs > 0 && !res.ranking.empty())
      robust_entries = robust_ranking(req, res, robust_runs, jitter, top, synthesis.plans);
    out.explore_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (res.ranking.empty()) {
      empty_reason = explain_empty(res);
    } else {
      ExploreExtras extras;
      if (synthesize) extras.synthesis = &synthesis;
      if (robust_runs > 0) {
        extras.robust = &robust_entries;
        extras.robust_runs = robust_runs;
        extras.robust_jitter = jitter;
      }
      out.summary = explore_summary_json(req, res, top, explain, extras).dump();
      if (const Plan* plan = synthesized_plan(synthesis, res.ranking.front()))
        out.best_plan = plan_to_json(*plan).dump();
      if (csv) out.csv = explore_result_to_csv(res);
    }
  }
  if (callback_error) throw std::move(*callback_error);
  if (!empty_reason.empty()) throw InputError(empty_reason);
  return out;
}

// explore --plan for any configuration of an exploration: the request's partition mode and
// memory limit (the balanced-time search's) rebuild the partition the explorer simulated.
std::string explore_best_plan(const std::string& model_text, const std::string& cluster_text,
                              int gpus, int global_batch, const std::string& config_text,
                              bool overlap_grad_reduce, const std::string& partition,
                              std::optional<double> max_memory_gib,
                              const std::string& assign_path, const std::string& assign_text) {
  ExploreRequest req;
  req.model = model_from_json(parse(model_text, "model"), "model");
  req.cluster = cluster_from_json(parse(cluster_text, "cluster"), "cluster");
  req.gpus = gpus;
  req.global_batch = global_batch;
  req.overlap_grad_reduce = overlap_grad_reduce;
  if (max_memory_gib) req.max_memory_bytes = max_memory_bytes_from_gib(*max_memory_gib);
  {
    PlanRequest parsed;
    parse_partition_flag(partition, parsed);
    req.partition = parsed.partition;
  }
  const ParallelConfig config = config_from_json(parse(config_text, "config"), "config");
  if (std::optional<AssignmentSpec> spec = assignment_arg(assign_path, assign_text))
    req.assignment = resolve_assignment(*spec, req.model, config.pp);
  py::gil_scoped_release release;
  return plan_to_json(build_config_plan(req, config)).dump();
}

// --- synthesize --------------------------------------------------------------------------------

struct SynthOut {
  std::string report;    // synthesize --json
  std::string schedule;  // the schedule as a custom schedule file (synthesize --out)
  std::string csv;       // as PyTorch pipelining CSV (synthesize --csv)
  std::string plan;      // plan mode: the plan with the schedule (synthesize --plan-out), else ""
};

SynthOut synthesize_json(const std::string& plan_text, const std::string& plan_source,
                         std::optional<int> pp, std::optional<int> microbatches,
                         std::optional<double> t_f, std::optional<double> t_b, double t_w,
                         double t_comm, const std::string& stage_times_file,
                         const std::string& stage_times_text,
                         std::optional<int> memory_limit_microbatches,
                         std::optional<int64_t> memory_limit_bytes, double time_budget_s,
                         int64_t max_evaluations) {
  check_synthesis_budgets(time_budget_s, max_evaluations);
  SynthesisRequest req;
  if (!plan_text.empty()) {
    req.plan = plan_from_json(parse(plan_text, plan_source), plan_source);
    req.plan_source = plan_source;
  }
  req.memory_limit_bytes = memory_limit_bytes;
  req.pp = pp;
  req.microbatches = microbatches;
  req.t_f_ms = t_f;
  req.t_b_ms = t_b;
  req.t_w_ms = t_w;
  req.t_comm_ms = t_comm;
  req.stage_times_file = stage_times_file;
  if (!stage_times_text.empty()) req.stage_times_doc = parse(stage_times_text, "stage_times");
  req.memory_limit_microbatches = memory_limit_microbatches;
  SynthesisOptions options;
  options.time_budget_s = time_budget_s;
  options.max_evaluations = max_evaluations;
  SynthOut out;
  py::gil_scoped_release release;
  const SynthesisRun run = run_synthesis(req, options);
  out.report = run.report.dump();
  out.schedule = schedule_to_json_text(run.result.schedule);
  out.csv = schedule_to_csv(run.result.schedule);
  if (run.plan) out.plan = plan_to_json(*run.plan).dump();
  return out;
}

// --- graph -------------------------------------------------------------------------------------

std::pair<std::string, std::string> graph_json(const std::string& model_text, int pp,
                                               int virtual_stages, int microbatches,
                                               int microbatch_size, const std::string& partition,
                                               std::optional<int> first_stage_fewer,
                                               std::optional<int> last_stage_fewer,
                                               const std::string& placement, bool split_backward,
                                               const std::string& recompute, bool dot,
                                               const std::string& schedule,
                                               const std::string& cluster_text,
                                               std::optional<int> tp, std::optional<int> dp,
                                               std::optional<int> cp, bool sequence_parallel,
                                               bool zero1, std::optional<double> max_memory_gib,
                                               bool shard_grads, bool shard_params,
                                               std::optional<int> recompute_layers,
                                               int offload_layers,
                                               const std::string& recompute_modules) {
  if (partition != "auto") {
    const char* why = "shapes the auto partition, but --partition gives the stages' first layers";
    if (first_stage_fewer) throw_input_error("--first-stage-fewer", why);
    if (last_stage_fewer) throw_input_error("--last-stage-fewer", why);
  }
  // In the CLI's order (cli/cmd_graph.cc).
  const bool balanced_time = partition == "balanced-time";
  if (!balanced_time) {
    const std::string why =
        "prices the --partition balanced-time search, but --partition is " + partition;
    const std::pair<const char*, bool> given[] = {
        {"--schedule", !schedule.empty()}, {"--cluster", !cluster_text.empty()},
        {"--tp", tp.has_value()},          {"--dp", dp.has_value()},
        {"--cp", cp.has_value()},          {"--sequence-parallel", sequence_parallel},
        {"--zero1", zero1},                {"--shard-grads", shard_grads},
        {"--shard-params", shard_params},  {"--max-memory-gib", max_memory_gib.has_value()}};
    for (const auto& [flag, is_given] : given)
      if (is_given) throw_input_error(flag, why);
  } else {
    if (schedule.empty())
      throw_input_error("--schedule",
                        "required with --partition balanced-time (the schedule the partition "
                        "is searched for)");
    if (!placement.empty())
      throw_input_error("--placement",
                        "with --partition balanced-time the schedule gives the placement");
  }
  GraphRequest req;
  req.model_spec = model_from_json(parse(model_text, "model"), "model");
  req.pp = pp;
  req.virtual_stages = virtual_stages;
  req.num_microbatches = microbatches;
  req.microbatch_size = microbatch_size;
  req.partition = partition;
  req.first_stage_fewer = first_stage_fewer.value_or(0);
  req.last_stage_fewer = last_stage_fewer.value_or(0);
  req.placement = placement;
  req.split_backward = split_backward;
  req.recompute = parse_recompute(recompute, "--recompute");
  // The CLI's rules and messages (cli/cmd_graph.cc).
  if (recompute_layers) set_graph_recompute_layers(req, *recompute_layers);
  if (!recompute_modules.empty()) set_graph_recompute_modules(req, recompute_modules);
  req.offload_layers = offload_layers;
  py::gil_scoped_release release;
  if (partition == "even" || balanced_time) {
    GraphPartitionRequest g;
    g.model = *req.model_spec;
    // simulate's rules, before the planner prices anything
    check_graph_settings(g.model, req.pp, req.recompute, req.offload_layers, req.recompute_modules);
    g.partition = partition;
    g.pp = pp;
    g.virtual_stages = virtual_stages;
    g.num_microbatches = microbatches;
    g.microbatch_size = microbatch_size;
    g.recompute = req.recompute;
    g.recompute_layers = req.recompute_layers;
    g.offload_layers = req.offload_layers;
    g.recompute_modules = req.recompute_modules;
    if (balanced_time) {
      g.cluster = cluster_from_json(parse(cluster_text, "cluster"), "cluster");
      g.schedule = schedule;
      g.tp = tp.value_or(1);
      g.dp = dp.value_or(1);
      g.cp = cp.value_or(1);
      g.sequence_parallel = sequence_parallel;
      g.zero1 = zero1;
      g.shard_parameters = shard_params;
      g.shard_gradients = shard_grads || shard_params;
      if (max_memory_gib) g.max_memory_bytes = max_memory_bytes_from_gib(*max_memory_gib);
    }
    const GraphPartition resolved = resolve_graph_partition(g);
    req.partition = stage_starts_text(resolved.stage_begin);
    req.virtual_stages = resolved.virtual_stages;
    if (!resolved.placement.empty()) req.placement = resolved.placement;
  }
  const GraphReport report = build_graph_report(req);
  return {graph_report_json(report).dump(), dot ? report.graph.to_dot() : std::string()};
}

// --- validate-model ----------------------------------------------------------------------------

std::string validate_model_json(const std::string& corpus_path, const std::string& cluster_text,
                                const std::string& rows_on, const std::string& split, double band) {
  check_validation_split(split);
  ModelValidationOptions vo;
  vo.band = band;
  check_validation_band(vo.band);
  const std::string gpu = rows_on.empty() ? "" : rows_on_preset(rows_on);
  if (!cluster_text.empty())
    vo.cluster_override = cluster_from_json(parse(cluster_text, "cluster"), "cluster");
  py::gil_scoped_release release;
  const Corpus corpus = corpus_path.empty()
                            ? builtin_corpus_from_text(cli::kHasBuiltinCorpus, cli::kBuiltinCorpus)
                            : load_corpus(corpus_path);
  check_corpus_schedules(corpus);
  const Corpus selected = select_corpus_rows(corpus, gpu, split);
  check_corpus_schedule_constraints(selected);
  return validation_report_to_json(validate_corpus(selected, vo)).dump();
}

// --- calibrate (threads backend) ---------------------------------------------------------------

// calibrate --json of a microbenchmark calibration on the threads backend, and the fitted
// cluster (calibrate -o). The CLI's checks and messages, in its order
// (runtime/calibrate_request.h).
std::pair<std::string, std::string> calibrate_json(bool quick, bool hot, std::optional<int> repeats,
                                                   int warmup, std::optional<int> rounds,
                                                   std::optional<double> repetition_ms, int ranks,
                                                   double timeout_s, const std::string& base_text,
                                                   const std::string& name) {
  MicrobenchFlags flags;
  flags.backend = BackendKind::kThreads;
  flags.quick = quick;
  flags.hot = hot;
  flags.repeats = repeats;
  flags.warmup = warmup;
  flags.rounds = rounds;
  flags.repetition_ms = repetition_ms;
  flags.ranks = ranks;
  flags.timeout_s = timeout_s;
  const MicrobenchOptions mo = microbench_options(flags);
  const ClusterSpec base = base_text.empty() ? cluster_preset("a100-80g")
                                             : cluster_from_json(parse(base_text, "base"), "base");
  const std::string cluster_name = name.empty() ? "calibrated-threads" : name;
  py::gil_scoped_release release;
  const MicrobenchResult r = run_microbenchmarks(mo, nullptr);
  const Calibration cal = calibrate(r.measurements, base, cluster_name);
  json j = calibration_to_json(cal);
  j["backend"] = r.measurements.backend;
  j["ranks"] = r.measurements.ranks;
  return {j.dump(), cluster_to_json(cal.cluster).dump()};
}

// calibrate --from-trace --json and the fitted cluster.
// A run flag left None is the trace's recorded one, else the run's default (TraceRunFlags).
std::pair<std::string, std::string> calibrate_trace_json(
    const std::string& path, std::optional<int> hidden, std::optional<int> ffn,
    std::optional<int> seq, std::optional<int> layers_per_stage,
    std::optional<std::string> optimizer, std::optional<int> dp, std::optional<int> skip_steps,
    const std::string& base_text, const std::string& name) {
  TraceRunFlags run;
  run.hidden = hidden;
  run.ffn = ffn;
  run.seq = seq;
  run.layers_per_stage = layers_per_stage;
  run.optimizer = optimizer;
  run.dp = dp;
  run.skip_steps = skip_steps;
  py::gil_scoped_release release;
  const CheckedTrace checked = check_trace_run(path, run);
  const ClusterSpec base = base_text.empty() ? reference_host_cluster()
                                             : cluster_from_json(parse(base_text, "base"), "base");
  const TraceCalibration cal =
      calibrate_checked_trace(checked, base, name.empty() ? "fitted-from-trace" : name);
  json j = trace_calibration_to_json(cal);
  j["trace"] = path;
  return {j.dump(), cluster_to_json(cal.cluster).dump()};
}

// --- export of a plan --------------------------------------------------------------------------

// A plan's timeline (export --plan: simulated with the cost model, memory not checked) in a
// timeline format.
py::object export_plan_json(const std::string& plan_text, const std::string& source,
                            const std::string& format, const std::string& view,
                            std::optional<int> width, bool per_stream,
                            const std::optional<std::string>& title) {
  const ExportFormat f = parse_export_format(format, "--format");
  if (view != "timeline" && view != "taskgraph")
    throw_input_error("--view", "unknown view '" + view + "' (expected timeline or taskgraph)");
  const ExportOptions o = checked_export_options(f, view == "taskgraph", width, per_stream, title);
  const Plan plan = plan_from_json(parse(plan_text, source), source);
  check_plan_file(plan, source);
  std::string out;
  if (view == "taskgraph") {
    py::gil_scoped_release release;
    out = export_plan_task_graph(plan, f);
  } else {
    py::gil_scoped_release release;
    PlanSimOptions sim;
    sim.record_trace = true;
    sim.check_memory = false;  // a timeline of a plan that does not fit is still useful
    out = export_trace(simulate_plan(plan, sim).result.trace, f, o);
  }
  if (is_binary(f)) return py::bytes(out);
  return py::str(out);
}

// export --format torchtitan --csv: the CLI's checks of the CSV output (cli/report_output.h),
// before anything is read or computed: a file that can be written, and not the plan file itself
// (`plan_path` empty for a plan given as a dict).
void check_handoff_csv(const std::string& csv_path, const std::string& plan_path) {
  jaxpp::cli::OutputFiles out("export");
  if (!plan_path.empty()) out.input(plan_path, "--plan");
  out.output(csv_path, "--csv");
}

// export --format megatron|torchtitan|jaxpp: the plan as text for a trainer, and for torchtitan
// the schedule CSV its TOML loads from csv_path. Returns (text, csv, schedule name).
std::tuple<std::string, std::string, std::string> handoff_json(const std::string& plan_text,
                                                               const std::string& source,
                                                               const std::string& format,
                                                               const std::string& csv_path) {
  HandoffTarget target;
  if (!parse_handoff_target(format, target))
    throw_input_error("--format", "expected megatron, torchtitan or jaxpp, got '" + format + "'");
  if (target == HandoffTarget::kTorchtitan && csv_path.empty())
    throw_input_error("--csv",
                      "required with --format torchtitan (the schedule CSV the TOML loads)");
  if (target != HandoffTarget::kTorchtitan && !csv_path.empty())
    throw_input_error("--csv", "only --format torchtitan writes a schedule CSV");
  const Plan plan = plan_from_json(parse(plan_text, source), source);
  check_program(plan.program);
  check_plan(plan, source);
  const ScheduleInfo* info = find_schedule(plan.config.schedule);
  const std::string schedule = info ? info->name : plan.config.schedule;
  std::string text, csv;
  switch (target) {
    case HandoffTarget::kMegatron:
      text = megatron_arguments(plan, schedule);
      break;
    case HandoffTarget::kTorchtitan:
      text = torchtitan_toml(plan, schedule, csv_path);
      csv = schedule_to_csv(plan_schedule(plan));
      break;
    case HandoffTarget::kJaxpp:
      text = jaxpp_snippet(plan, schedule);
      break;
  }
  return {text, csv, schedule};
}

// --- show and validate -------------------------------------------------------------------------

// show --json's summary (schedules/summary.h) plus the texts show prints or exports.
std::string schedule_summary(const Schedule& schedule, const ValidationReport& report) {
  const int64_t makespan = report.ok() ? unit_cost_timeline(schedule).makespan : -1;
  nlohmann::ordered_json out = schedule_summary_json(schedule, report, makespan);
  out["ok"] = report.ok();
  out["errors"] = report.errors;
  if (report.ok()) {
    out["text"] = to_text(schedule);
    out["timeline_text"] = timeline_to_text(schedule, unit_cost_timeline(schedule));
    out["json_text"] = schedule_to_json_text(schedule);
    out["csv_text"] = schedule_to_csv(schedule);
  }
  return out.dump();
}

// pp and microbatches: None when not given ("required"); a given 0 reaches the generator and gets
// the CLI's message (it said "required" for microbatches=0).
std::string show_json(const std::string& name, const std::string& schedule_file,
                      std::optional<int> pp, std::optional<int> microbatches,
                      std::optional<int> stages, bool fuse_steady_state,
                      std::optional<int> group_size) {
  if (name.empty() == schedule_file.empty())
    throw_input_error("show", "give exactly one of --schedule NAME or --schedule-file FILE");
  if (!name.empty() && is_wrap_around_name(name)) {
    throw_input_error("--schedule", std::string(kParallelPipelinesWithWrapAround) +
                                        " is forward only: show it with the CLI (jaxpp-sim show)");
  }
  Schedule schedule;
  if (!schedule_file.empty()) {
    // The CLI's refusals (cli/cmd_show.cc): the file fixes what these would set.
    const char* why = "not used with --schedule-file (the file fixes the schedule)";
    if (pp) throw_input_error("--pp", why);
    if (microbatches) throw_input_error("--microbatches", why);
    if (stages) throw_input_error("--stages", why);
    if (fuse_steady_state) throw_input_error("--fuse-steady-state", why);
    if (group_size) throw_input_error("--group-size", why);
    schedule = load_schedule_file(schedule_file);
  } else {
    if (!pp) throw_input_error("--pp", "required (number of pipeline actors)");
    if (!microbatches) throw_input_error("--microbatches", "required");
    ScheduleParams params;
    params.num_actors = *pp;
    params.num_microbatches = *microbatches;
    params.num_stages = stages.value_or(0);
    params.fuse_steady_state = fuse_steady_state;
    params.group_size = group_size.value_or(0);
    schedule = generate_schedule(name, params);
  }
  return schedule_summary(schedule, validate_schedule(schedule));
}

std::string validate_json(const std::string& path) {
  const std::string text = read_input_text(path);
  const bool csv = detect_schedule_format(path, text) == ScheduleFileFormat::kCsv;
  const json doc = csv ? json() : parse_json_text(text, path);
  if (is_plan_document(doc)) return plan_file_report_json(doc, path).dump();
  const Schedule schedule =
      csv ? parse_schedule_csv(text, path) : custom_schedule_from_json(doc, path);
  return schedule_file_report_json(path, schedule, validate_schedule(schedule)).dump();
}

// --- export ------------------------------------------------------------------------------------

py::object export_json(const std::string& trace_text, const std::string& format,
                       std::optional<int> width, bool per_stream,
                       const std::optional<std::string>& title) {
  const ExportFormat f = parse_export_format(format, "--format");
  const ExportOptions o = checked_export_options(f, /*taskgraph_view=*/false, width, per_stream,
                                                 title);
  const Trace trace = trace_from_json(parse(trace_text, "trace"), "trace");
  std::string out;
  {
    py::gil_scoped_release release;
    out = export_trace(trace, f, o);
  }
  if (is_binary(f)) return py::bytes(out);
  return py::str(out);
}

// --- run ---------------------------------------------------------------------------------------

std::string run_json(const std::string& schedule, const std::string& schedule_file, int pp,
                     int microbatches, int virtual_stages, bool fuse_steady_state,
                     const std::string& plan_text, const std::string& plan_source,
                     const std::string& compute, double time_scale,
                     int steps, int warmup, int dp, double timeout_s, bool check, int hidden,
                     int seq, int layers_per_stage, const std::string& optimizer, uint64_t seed,
                     int64_t inject_drop, const std::vector<std::string>& given) {
  if (compute != "real" && compute != "emulated")
    throw_input_error("--compute", "expected real or emulated, got '" + compute + "'");
  // The CLI's ranges and messages (cli/cmd_run.cc, graph/limits.h).
  check_int_in(steps, "--steps", 1, kMaxSteps, "a number of steps");
  check_int_in(warmup, "--warmup", 0, kMaxSteps, "a number of steps");
  if (steps + warmup > kMaxSteps) {
    throw_input_error("--steps", "--steps " + std::to_string(steps) + " + --warmup " +
                                     std::to_string(warmup) + " is more than the limit of " +
                                     std::to_string(kMaxSteps) + " steps");
  }
  check_int_in(dp, "--dp", 1, kMaxStages, "a number of replicas");
  check_double_in(time_scale, "--time-scale", 0, 1000, "a factor");
  check_double_in(timeout_s, "--timeout-s", kMinTimeoutS, kMaxTimeoutS, "seconds");
  check_int_in(hidden, "--hidden", 1, kMaxHidden, "a width");
  check_int_in(seq, "--seq", 1, kMaxSeqLen, "a number of tokens");
  check_int_in(layers_per_stage, "--layers-per-stage", 1, kMaxLayers, "a layer count");
  // `given`: the flags the caller set (the others are the CLI's defaults), refused as the CLI
  // refuses them where the chosen compute cannot use them.
  const auto is_given = [&](const std::string& flag) {
    return std::find(given.begin(), given.end(), flag) != given.end();
  };
  if (compute == "emulated") {
    for (const char* flag : {"hidden", "seq", "layers-per-stage", "optimizer", "seed"})
      if (is_given(flag)) throw_input_error(std::string("--") + flag, kMlpFlagNeedsRealCompute);
  } else if (is_given("time-scale")) {
    throw_input_error("--time-scale", kTimeScaleNeedsEmulatedCompute);
  }
  RunOptions ro;
  ro.backend = BackendKind::kThreads;
  ro.emulated = compute == "emulated";
  ro.time_scale = time_scale;
  ro.steps = steps;
  ro.warmup = warmup;
  ro.dp = dp;
  ro.timeout_s = timeout_s;
  ro.check = check;
  ro.mlp.hidden = hidden;
  ro.mlp.seq = seq;
  ro.mlp.layers_per_stage = layers_per_stage;
  ro.mlp.optimizer = parse_optimizer_kind(optimizer, "--optimizer");
  ro.mlp.seed = seed;
  ro.drop_tag = inject_drop;
  Program program;
  std::unique_ptr<CostProvider> cost;
  if (!plan_text.empty()) {
    if (!schedule.empty() || !schedule_file.empty())
      throw_input_error("run", "give either PLAN.json or --schedule / --schedule-file, not both");
    for (const char* flag : {"pp", "microbatches", "virtual", "fuse-steady-state"})
      if (is_given(flag))
        throw_input_error(std::string("--") + flag,
                          "not used with PLAN.json (the plan fixes the program)");
    // Errors name the plan's file as the CLI's (`p.json:1:1: ...`), or "plan" for a dict.
    const Plan plan = plan_from_json(parse(plan_text, plan_source), plan_source);
    check_plan_file(plan, plan_source);
    if (is_given("dp") && dp != plan.config.dp)
      throw_input_error(plan_source, "config.dp is " + std::to_string(plan.config.dp) +
                                         ", but --dp is " + std::to_string(dp));
    program = plan.program;
    ro.dp = plan.config.dp;
    cost = std::make_unique<AnalyticCost>(plan.model, plan.partition, plan.placement, plan.config,
                                          cluster_from_json(plan.cluster, "plan"));
  } else {
    Schedule s;
    if (!schedule_file.empty()) {
      if (!schedule.empty())
        throw_input_error("run", "give either --schedule or --schedule-file, not both");
      for (const char* flag : {"pp", "microbatches", "virtual", "fuse-steady-state"})
        if (is_given(flag))
          throw_input_error(std::string("--") + flag,
                            "not used with --schedule-file (the file fixes the schedule)");
      s = load_schedule_file(schedule_file);
      validate_or_throw(s, schedule_file);
    } else {
      if (schedule.empty())
        throw_input_error("run",
                          "expected PLAN.json, --schedule NAME --pp P --microbatches M or "
                          "--schedule-file FILE");
      if (!is_given("pp")) throw_input_error("--pp", "required with --schedule");
      ScheduleParams params;
      params.num_actors = pp;
      params.num_microbatches = is_given("microbatches") ? microbatches : 4;  // the CLI's default
      params.fuse_steady_state = fuse_steady_state;
      if (is_given("virtual")) {
        if (virtual_stages < 1)
          throw_input_error("--virtual", "must be >= 1, got " + std::to_string(virtual_stages));
        params.num_stages = checked_int_product(pp, virtual_stages, kMaxStages, "--pp x --virtual");
      }
      s = generate_schedule(schedule, params);
    }
    program = lower_mlp_program(s, ro.mlp);
    cost = std::make_unique<StageTimesCost>(
        uniform_stage_times(program.num_stages, 1e-3, 1e-3, 1e-3, 0));
  }
  RunResult r;
  {
    py::gil_scoped_release release;
    r = run_program(program, cost.get(), ro);
  }
  json j;
  j["backend"] = "threads";
  j["compute"] = compute;
  j["num_actors"] = program.num_actors;
  j["num_stages"] = program.num_stages;
  j["num_microbatches"] = program.num_microbatches;
  j["dp"] = ro.dp;
  j["steps"] = ro.steps;
  j["warmup"] = ro.warmup;
  j["losses"] = r.losses;
  j["step_times_s"] = r.step_times_s;
  j["step_time_s"] = r.step_time_s;
  j["checked"] = r.checked;
  if (r.checked) {
    auto check_json = [](const CheckResult& c) {
      return json{{"passed", c.passed},
                  {"max_rel_diff_loss", c.max_rel_diff_loss},
                  {"max_rel_diff_weights", c.max_rel_diff_weights},
                  {"rel_tolerance", c.rel_tolerance},
                  {"first_difference", c.first_difference}};
    };
    j["reference"] = check_json(r.reference);
    j["orchestration"] = check_json(r.orchestration);
    j["reference_losses"] = r.reference_losses;
  }
  j["check_passed"] = check_passed(r);
  j["trace"] = trace_to_json(r.trace);
  return j.dump();
}

}  // namespace
}  // namespace jaxpp::python

PYBIND11_MODULE(_jaxpp_sim, m) {
  using namespace jaxpp::python;
  namespace jp = jaxpp;
  m.doc() = "Compiled core of jaxpp_sim (use the jaxpp_sim package, not this module).";
  m.attr("__version__") = JAXPP_VERSION;
  py::register_exception<jp::InputError>(m, "InputError", PyExc_ValueError);

  m.def("model_presets", &jp::model_preset_names);
  m.def("cluster_presets", &jp::cluster_preset_names);
  m.def("schedules_json", &schedules_json);
  m.def("load_model", &load_model_json, py::arg("name_or_path"));
  m.def("model_with_a2a_dtype", &model_with_a2a_dtype, py::arg("model"), py::arg("a2a_dtype"));
  m.def("model_from_json", &model_from_json_text, py::arg("text"), py::arg("source"));
  m.def("model_shape", &model_shape_json, py::arg("model"));
  m.def("load_cluster", &load_cluster_json, py::arg("name_or_path"));
  m.def("cluster_from_json", &cluster_from_json_text, py::arg("text"), py::arg("source"));

  py::class_<SimOut>(m, "SimOut")
      .def_readonly("metrics", &SimOut::metrics)
      .def_readonly("trace", &SimOut::trace)
      .def_readonly("plan", &SimOut::plan);
  m.def("simulate_model", &simulate_model_mode, py::arg("model"), py::arg("cluster"),
        py::arg("gpus"), py::arg("pp"), py::arg("tp"), py::arg("dp"), py::arg("cp"),
        py::arg("virtual_stages"), py::arg("global_batch"), py::arg("microbatch_size"),
        py::arg("schedule"), py::arg("schedule_file"), py::arg("fuse_steady_state"),
        py::arg("recompute"), py::arg("sequence_parallel"), py::arg("zero1"),
        py::arg("overlap_grad_reduce"), py::arg("tp_comm_overlap"), py::arg("attention"),
        py::arg("partition"), py::arg("max_memory_gib"), py::arg("ep"), py::arg("etp"),
        py::arg("moe_imbalance"), py::arg("moe_overlap"), py::arg("perturb"), py::arg("breakdown"),
        py::arg("check_memory"), py::arg("record_trace"), py::arg("assign_path"),
        py::arg("assign_text"), py::arg("grad_dtype"), py::arg("shard_grads"),
        py::arg("shard_params"), py::arg("optimizer_state"), py::arg("moe_dispatcher"),
        py::arg("moe_routing"), py::arg("recompute_layers"), py::arg("offload_layers"),
        py::arg("recompute_modules"), py::arg("moe_node_limit"), py::arg("moe_device_limit"));
  m.def("simulate_measured", &simulate_measured_mode, py::arg("schedule"), py::arg("schedule_file"),
        py::arg("pp"), py::arg("microbatches"), py::arg("virtual_stages"),
        py::arg("fuse_steady_state"), py::arg("t_f"), py::arg("t_b"), py::arg("t_w"),
        py::arg("t_comm"), py::arg("t_a2a_f"), py::arg("t_a2a_b"), py::arg("moe_overlap"),
        py::arg("stage_times_file"), py::arg("stage_times"), py::arg("perturb"),
        py::arg("record_trace"));
  py::class_<ExploreOut>(m, "ExploreOut")
      .def_readonly("summary", &ExploreOut::summary)
      .def_readonly("explore_s", &ExploreOut::explore_s)
      .def_readonly("best_plan", &ExploreOut::best_plan)
      .def_readonly("csv", &ExploreOut::csv);
  m.def("explore", &explore_json, py::arg("model"), py::arg("cluster"), py::arg("gpus"),
        py::arg("global_batch"), py::arg("max_memory_gib"), py::arg("schedules"), py::arg("pp"),
        py::arg("tp"), py::arg("ep"), py::arg("etp"), py::arg("cp"), py::arg("microbatch_sizes"),
        py::arg("virtual_stages"), py::arg("recompute"), py::arg("zero1"),
        py::arg("sequence_parallel"), py::arg("attention"), py::arg("tp_comm_overlap"),
        py::arg("overlap_grad_reduce"), py::arg("bound_prune"), py::arg("partition"),
        py::arg("threads"), py::arg("top"), py::arg("explain"), py::arg("csv"),
        py::arg("synthesize"), py::arg("synthesize_top"), py::arg("synthesize_time_s"),
        py::arg("robust"), py::arg("robust_jitter"), py::arg("progress"), py::arg("assign_path"),
        py::arg("assign_text"), py::arg("grad_dtype"), py::arg("shard_grads"),
        py::arg("shard_params"), py::arg("optimizer_state"), py::arg("moe_dispatcher"),
        py::arg("moe_routing"), py::arg("offload_layers"));
  m.def("explore_plan", &explore_best_plan, py::arg("model"), py::arg("cluster"), py::arg("gpus"),
        py::arg("global_batch"), py::arg("config"), py::arg("overlap_grad_reduce"),
        py::arg("partition"), py::arg("max_memory_gib"), py::arg("assign_path"),
        py::arg("assign_text"));
  m.def("show", &show_json, py::arg("schedule"), py::arg("schedule_file"), py::arg("pp"),
        py::arg("microbatches"), py::arg("stages"), py::arg("fuse_steady_state"),
        py::arg("group_size"));
  m.def("validate", &validate_json, py::arg("path"));
  m.def("export_trace", &export_json, py::arg("trace"), py::arg("format"), py::arg("width"),
        py::arg("per_stream"), py::arg("title"));
  m.def("run", &run_json, py::arg("schedule"), py::arg("schedule_file"), py::arg("pp"),
        py::arg("microbatches"), py::arg("virtual_stages"), py::arg("fuse_steady_state"),
        py::arg("plan"), py::arg("plan_source"), py::arg("compute"), py::arg("time_scale"),
        py::arg("steps"),
        py::arg("warmup"), py::arg("dp"), py::arg("timeout_s"), py::arg("check"), py::arg("hidden"),
        py::arg("seq"), py::arg("layers_per_stage"), py::arg("optimizer"), py::arg("seed"),
        py::arg("inject_drop"), py::arg("given"));

  py::class_<SynthOut>(m, "SynthOut")
      .def_readonly("report", &SynthOut::report)
      .def_readonly("schedule", &SynthOut::schedule)
      .def_readonly("csv", &SynthOut::csv)
      .def_readonly("plan", &SynthOut::plan);
  m.def("synthesize", &synthesize_json, py::arg("plan"), py::arg("plan_source"), py::arg("pp"),
        py::arg("microbatches"), py::arg("t_f"), py::arg("t_b"), py::arg("t_w"), py::arg("t_comm"),
        py::arg("stage_times_file"), py::arg("stage_times"), py::arg("memory_limit_microbatches"),
        py::arg("memory_limit_bytes"), py::arg("time_budget_s"), py::arg("max_evaluations"));
  m.def("graph", &graph_json, py::arg("model"), py::arg("pp"), py::arg("virtual_stages"),
        py::arg("microbatches"), py::arg("microbatch_size"), py::arg("partition"),
        py::arg("first_stage_fewer"), py::arg("last_stage_fewer"), py::arg("placement"),
        py::arg("split_backward"), py::arg("recompute"), py::arg("dot"), py::arg("schedule"),
        py::arg("cluster"), py::arg("tp"), py::arg("dp"), py::arg("cp"),
        py::arg("sequence_parallel"), py::arg("zero1"), py::arg("max_memory_gib"),
        py::arg("shard_grads"), py::arg("shard_params"), py::arg("recompute_layers"),
        py::arg("offload_layers"), py::arg("recompute_modules"));
  m.def("validate_model", &validate_model_json, py::arg("corpus"), py::arg("cluster"),
        py::arg("rows_on"), py::arg("split"), py::arg("band"));
  m.def("calibrate", &calibrate_json, py::arg("quick"), py::arg("hot"), py::arg("repeats"),
        py::arg("warmup"), py::arg("rounds"), py::arg("repetition_ms"), py::arg("ranks"),
        py::arg("timeout_s"), py::arg("base"), py::arg("name"));
  m.def("calibrate_trace", &calibrate_trace_json, py::arg("path"), py::arg("hidden"),
        py::arg("ffn"), py::arg("seq"), py::arg("layers_per_stage"), py::arg("optimizer"),
        py::arg("dp"), py::arg("skip_steps"), py::arg("base"), py::arg("name"));
  m.def("export_plan", &export_plan_json, py::arg("plan"), py::arg("source"), py::arg("format"),
        py::arg("view"), py::arg("width"), py::arg("per_stream"), py::arg("title"));
  m.def("check_handoff_csv", &check_handoff_csv, py::arg("csv_path"), py::arg("plan_path"));
  m.def("checked_cluster_name", &jaxpp::checked_cluster_name, py::arg("name"));
  // A number's text that a flag cannot take (NaN, an overflow): the CLI's message (always raises).
  m.def("unreadable_number", &jaxpp::throw_unreadable_number, py::arg("where"), py::arg("text"));
  // The core's file reader (graph/input_file.h), for the files the Python layer reads itself.
  m.def(
      "read_input_text",
      [](const std::string& path) {
        const py::gil_scoped_release release;
        return jaxpp::read_input_text(path);
      },
      py::arg("path"));
  m.def("handoff", &handoff_json, py::arg("plan"), py::arg("source"), py::arg("format"),
        py::arg("csv_path"));
}
