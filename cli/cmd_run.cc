// jaxpp-sim run: execute a plan (or a named schedule, or a schedule file) on threads, MPI
// processes or CUDA GPUs and report losses, measured step time and, with --check, the
// differences to the independent reference and to the same-code orchestration reference (see
// docs/runtime.md; --inject makes the check fail on purpose). With --compare it also predicts
// the step time: with --cluster (a calibrated cluster, docs/calibrate.md) from the cost model of
// what actually runs, otherwise from the emulation cost or the task times the run measured.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <cxxopts.hpp>

#include "cli/cluster_arg.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "cli/report_output.h"
#include "costmodel/analytic_cost.h"
#include "costmodel/calibration.h"
#include "costmodel/cluster.h"
#include "costmodel/stage_times_cost.h"
#include "graph/error.h"
#include "graph/limits.h"
#include "costmodel/hetero_cost.h"
#include "graph/plan.h"
#include "runtime/microbench.h"
#include "runtime/run.h"
#include "schedules/custom.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "simulator/engine.h"
#include "simulator/plan_check.h"
#include "trace/export.h"
#include "trace/html_report.h"
#include "trace/trace.h"

namespace jaxpp::cli {
namespace {

struct Setup {
  Program program;
  std::optional<Plan> plan;
  std::unique_ptr<CostProvider> cost;  // emulation / prediction cost
};

Setup setup_from_args(const cxxopts::ParseResult& args, const MlpConfig& mlp) {
  Setup st;
  if (args.count("plan")) {
    if (args.count("schedule") || args.count("schedule-file"))
      throw_input_error("run", "give either PLAN.json or --schedule / --schedule-file, not both");
    refuse_flags(args, {"pp", "microbatches", "virtual", "fuse-steady-state", "group-size"},
                 "not used with PLAN.json (the plan fixes the program)");
    st.plan = load_plan(args["plan"].as<std::string>());
    // Refuse a file that contradicts itself before running anything (simulator/plan_check.h).
    check_plan_file(*st.plan, args["plan"].as<std::string>());
    st.program = st.plan->program;
    if (args.count("stage-times")) {
      st.cost = std::make_unique<StageTimesCost>(
          load_stage_times(args["stage-times"].as<std::string>(), st.program.num_stages));
    } else if (!st.plan->meshes.empty()) {  // heterogeneous cluster: each actor on its kind
      const std::string path = args["plan"].as<std::string>();
      const HeteroCluster cluster = hetero_cluster_from_json(st.plan->cluster, path);
      st.cost = std::make_unique<HeteroCost>(st.plan->model, st.plan->partition,
                                             st.plan->placement, st.plan->config, cluster,
                                             st.plan->meshes, path + ": field 'meshes'");
    } else {
      ClusterSpec cluster = cluster_from_json(st.plan->cluster, args["plan"].as<std::string>());
      st.cost = std::make_unique<AnalyticCost>(st.plan->model, st.plan->partition,
                                               st.plan->placement, st.plan->config, cluster);
    }
    return st;
  }
  Schedule schedule;
  if (args.count("schedule-file")) {
    if (args.count("schedule"))
      throw_input_error("run", "give either --schedule or --schedule-file, not both");
    refuse_flags(args, {"pp", "microbatches", "virtual", "fuse-steady-state", "group-size"},
                 "not used with --schedule-file (the file fixes the schedule)");
    const std::string path = args["schedule-file"].as<std::string>();
    schedule = load_schedule_file(path);
    validate_or_throw(schedule, path);
  } else {
    if (!args.count("schedule"))
      throw_input_error("run",
                        "expected PLAN.json, --schedule NAME --pp P --microbatches M or "
                        "--schedule-file FILE");
    if (!args.count("pp")) throw_input_error("--pp", "required with --schedule");
    ScheduleParams params;
    params.num_actors = args["pp"].as<int>();
    params.num_microbatches = args["microbatches"].as<int>();
    params.fuse_steady_state = args.count("fuse-steady-state") > 0;
    params.group_size = args["group-size"].as<int>();
    if (args.count("virtual")) {
      const int v = args["virtual"].as<int>();
      if (v < 1) throw_input_error("--virtual", "must be >= 1, got " + std::to_string(v));
      params.num_stages = checked_int_product(params.num_actors, v, kMaxStages, "--pp x --virtual");
    }
    schedule = generate_schedule(args["schedule"].as<std::string>(), params);
  }
  st.program = lower_mlp_program(schedule, mlp);
  if (args.count("stage-times")) {
    st.cost = std::make_unique<StageTimesCost>(
        load_stage_times(args["stage-times"].as<std::string>(), st.program.num_stages));
  } else {
    st.cost = std::make_unique<StageTimesCost>(
        uniform_stage_times(st.program.num_stages, 1e-3, 1e-3, 1e-3, 0));
  }
  return st;
}

// Replicas of a plan run: the plan's config.dp. An explicit --dp, or the world size under
// mpirun (actors x replicas processes), must agree with it.
int plan_dp(const Plan& plan, const std::string& path, const cxxopts::ParseResult& args,
            const std::optional<MpiWorld>& world) {
  const int dp = plan.config.dp;
  if (args.count("dp") && args["dp"].as<int>() != dp) {
    throw_input_error(path, "config.dp is " + std::to_string(dp) + ", but --dp is " +
                                std::to_string(args["dp"].as<int>()));
  }
  if (world) {
    const int actors = plan.program.num_actors;
    if (world->size != actors * dp) {
      throw_input_error(path, "config.dp is " + std::to_string(dp) + " (" + std::to_string(actors) +
                                  " actors x " + std::to_string(dp) + " replicas = " +
                                  std::to_string(actors * dp) + " processes), but mpirun started " +
                                  std::to_string(world->size) + " processes");
    }
  }
  return dp;
}

// StageTimesCost from the measured task durations of a run (per stage means).
StageTimesCost measured_stage_times(const Trace& trace, int num_stages, int first_step) {
  std::vector<double> sum(num_stages * 4, 0), n(num_stages * 4, 0);
  for (const TraceEvent& e : trace.events) {
    if (e.step < first_step || e.op != OpKind::kCompute || e.tasks.size() != 1) continue;
    int k = static_cast<int>(e.tasks[0].kind);
    sum[e.stage * 4 + k] += e.duration_s();
    n[e.stage * 4 + k] += 1;
  }
  auto mean = [&](int s, TaskKind k) {
    int i = s * 4 + static_cast<int>(k);
    return n[i] > 0 ? sum[i] / n[i] : 0.0;
  };
  StageTimes t = uniform_stage_times(num_stages, 0, 0, 0, 0);
  for (int s = 0; s < num_stages; ++s) {
    t.t_f_s[s] = mean(s, TaskKind::kF);
    bool split = n[s * 4 + static_cast<int>(TaskKind::kI)] > 0;
    t.t_b_s[s] = split ? mean(s, TaskKind::kI) : mean(s, TaskKind::kB);
    t.t_w_s[s] = split ? mean(s, TaskKind::kW) : 0;
  }
  return StageTimesCost(t);
}

// (measured - predicted) / predicted in percent; none where nothing was predicted (a kind the
// prediction gives no time, such as transfers predicted from measured task times).
std::optional<double> err_pct(double predicted, double measured) {
  if (!(predicted > 0)) return std::nullopt;
  return 100.0 * (measured - predicted) / predicted;
}

// "+12.3%", or "n/a" where nothing was predicted.
std::string err_pct_text(std::optional<double> pct) {
  if (!pct) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", *pct);
  return buf;
}

struct Prediction {
  SimResult sim;
  double step_time_s = 0;
  double time_scale = 1;  // sim times x time_scale = seconds of the run
  std::string from;
};

// Real compute with a calibrated cluster: the MLP's kernels through the cluster's fitted curves.
// Emulated compute with one: the emulation cost plus the backend's own costs. Otherwise the
// emulation cost alone, or the task times this run measured.
Prediction predict(const Setup& st, const RunOptions& ro, const RunResult& r,
                   const std::optional<ClusterSpec>& cluster, bool stage_times) {
  Prediction p;
  SimOptions so;
  if (cluster) so.iteration_overhead_s = cluster->iteration_overhead_s;
  const std::string base_from = st.plan && !stage_times ? "plan cost model" : "stage times";
  if (ro.emulated && cluster) {
    EmulationPredictionCost cost(*st.cost, ro.time_scale, *cluster, st.program.num_actors, ro.dp);
    p.sim = simulate(st.program, cost, so);
    p.from = base_from + " + calibrated backend '" + cluster->name + "'";
  } else if (ro.emulated) {
    p.sim = simulate(st.program, *st.cost, so);
    p.time_scale = ro.time_scale;
    p.from = base_from;
  } else if (cluster) {
    KernelCost cost(mlp_stage_kernels(ro.mlp, st.program.num_stages), st.program.num_actors,
                    *cluster, Dtype::kFp32, ro.dp);
    p.sim = simulate(mlp_sized_program(st.program, ro.mlp), cost, so);
    p.from = "calibrated cluster '" + cluster->name + "'";
  } else {
    StageTimesCost measured = measured_stage_times(r.trace, st.program.num_stages, ro.warmup);
    p.sim = simulate(st.program, measured, so);
    p.from = "measured task times";
  }
  p.step_time_s = p.sim.step_time_s * p.time_scale;
  return p;
}

nlohmann::json check_to_json(const CheckResult& c) {
  return {{"passed", c.passed},
          {"ran", c.ran},
          {"rel_tolerance", c.rel_tolerance},
          {"bit_exact", c.rel_tolerance == 0},
          {"max_abs_diff_loss", c.max_abs_diff_loss},
          {"max_abs_diff_weights", c.max_abs_diff_weights},
          {"max_rel_diff_loss", c.max_rel_diff_loss},
          {"max_rel_diff_weights", c.max_rel_diff_weights},
          {"first_difference", c.first_difference}};
}

// The measured step whose time is the median (the one the report shows).
int median_step(const RunResult& r, int warmup) {
  if (r.step_times_s.empty()) return warmup;
  std::vector<size_t> order(r.step_times_s.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return r.step_times_s[a] < r.step_times_s[b]; });
  return warmup + static_cast<int>(order[(order.size() - 1) / 2]);
}

int run_run(int argc, char** argv) {
  cxxopts::Options options("jaxpp-sim run",
                           "Execute a plan (or a named schedule) on threads, MPI processes or "
                           "CUDA GPUs; report losses and measured vs predicted step time");
  // clang-format off
  options.add_options()
      ("plan", "plan.json to run", cxxopts::value<std::string>())
      ("backend", "threads | mpi | cuda", cxxopts::value<std::string>()->default_value("threads"))
      ("compute", "real | emulated", cxxopts::value<std::string>()->default_value("real"))
      ("steps", "measured training steps", cxxopts::value<int>()->default_value("3"))
      ("warmup", "warm-up steps before the measured ones", cxxopts::value<int>()->default_value("1"))
      ("check", "compare losses and weights with the independent sequential reference (and, bit for bit, with the same-code orchestration reference)")
      ("inject", "numerical fault for --check to catch (needs --check): corrupt-grad | skip-accumulate | stale-weight | expert-swap (MoE plans)", cxxopts::value<std::string>())
      ("trace", "write the measured trace (trace JSON) to FILE", cxxopts::value<std::string>())
      ("compare", "print predicted vs measured step time and per-kind task durations")
      ("cluster", "calibrated cluster (JSON file or preset) that predicts the run (jaxpp-sim calibrate)", cxxopts::value<std::string>())
      ("report", "write a predicted-vs-measured HTML page (timelines, per-kind errors) to FILE", cxxopts::value<std::string>())
      ("timeline", "write the measured timeline to FILE (.svg, .png, .dot, .json, .txt)", cxxopts::value<std::string>())
      ("json", "print JSON")
      ("hidden", "features per token of the MLP blocks", cxxopts::value<int>()->default_value("32"))
      ("ffn", "inner size of the MLP blocks (0 = 4 x hidden)", cxxopts::value<int>()->default_value("0"))
      ("seq", "tokens per microbatch", cxxopts::value<int>()->default_value("8"))
      ("layers-per-stage", "MLP blocks per stage", cxxopts::value<int>()->default_value("2"))
      ("optimizer", "sgd | adam", cxxopts::value<std::string>()->default_value("sgd"))
      ("lr", "learning rate (0 = 0.05 for sgd, 1e-3 for adam)", cxxopts::value<double>()->default_value("0"))
      ("seed", "seed of weights and data", cxxopts::value<uint64_t>()->default_value("1234"))
      ("time-scale", "emulated durations are multiplied by this", cxxopts::value<double>()->default_value("1"))
      ("timeout-s", "give up on a receive or collective after this many seconds", cxxopts::value<double>()->default_value("30"))
      ("stage-times", "stage-times JSON (ms) for emulation/prediction instead of the plan's cost model", cxxopts::value<std::string>())
      ("schedule", "run a built-in schedule instead of a plan", cxxopts::value<std::string>())
      ("schedule-file", "run a custom schedule (JSON or PyTorch CSV, docs/schedules.md) instead of a plan", cxxopts::value<std::string>())
      ("pp", "with --schedule: pipeline actors", cxxopts::value<int>())
      ("microbatches", "with --schedule: microbatches", cxxopts::value<int>()->default_value("4"))
      ("virtual", "with --schedule: stages per actor", cxxopts::value<int>())
      ("fuse-steady-state", "with --schedule Interleaved1F1B / KimiK2: fuse the steady (F, B) pairs")
      ("group-size", "with --schedule MegatronInterleaved: microbatch group size (0 = p)", cxxopts::value<int>()->default_value("0"))
      ("dp", "data-parallel replicas of the pipeline (a plan's config.dp by default)", cxxopts::value<int>()->default_value("1"))
      ("inject-drop", "fault injection: drop every message with this tag (one of the program's; -1 = none)", cxxopts::value<int64_t>()->default_value("-1"))
      ("inject-kill", "fault injection: ACTOR:INSTRUCTION of replica 0 exits the process abruptly in step 0, exit code 3 (meant for mpi)", cxxopts::value<std::string>())
      ("h,help", "show this help");
  // clang-format on
  options.parse_positional({"plan"});
  options.positional_help("[PLAN.json]");
  const std::optional<cxxopts::ParseResult> parsed = parse_flags(options, argc, argv, "run");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;

  RunOptions ro;
  ro.backend = parse_backend_kind(args["backend"].as<std::string>(), "--backend");
  refuse_threads_backend_under_mpirun(ro.backend, "run");
  std::string compute = args["compute"].as<std::string>();
  if (compute != "real" && compute != "emulated")
    throw_input_error("--compute", "expected real or emulated, got '" + compute + "'");
  ro.emulated = compute == "emulated";
  // Every number within a physically meaningful range (graph/limits.h), so that no size product
  // below overflows and no sleep or deadline is absurd.
  ro.steps = int_flag_in(args, "steps", 1, kMaxSteps, "a number of steps");
  ro.warmup = int_flag_in(args, "warmup", 0, kMaxSteps, "a number of steps");
  if (ro.steps + ro.warmup > kMaxSteps) {
    throw_input_error("--steps", "--steps " + std::to_string(ro.steps) + " + --warmup " +
                                     std::to_string(ro.warmup) + " is more than the limit of " +
                                     std::to_string(kMaxSteps) + " steps");
  }
  ro.dp = int_flag_in(args, "dp", 1, kMaxStages, "a number of replicas");
  ro.check = args.count("check") > 0;
  ro.time_scale = double_flag_in(args, "time-scale", 0, 1000, "a factor");
  if (ro.time_scale == 0 && args.count("compare"))  // it printed "error +0.0%" against 0 s
    throw_input_error("--time-scale 0", "predicts 0 s for every instruction; --compare needs a "
                                        "factor > 0");
  ro.timeout_s = double_flag_in(args, "timeout-s", kMinTimeoutS, kMaxTimeoutS, "seconds");
  ro.mlp.hidden = int_flag_in(args, "hidden", 1, kMaxHidden, "a width");
  ro.mlp.ffn = int_flag_in(args, "ffn", 0, kMaxFfnHidden, "a width (0 = 4 x hidden)");
  ro.mlp.seq = int_flag_in(args, "seq", 1, kMaxSeqLen, "a number of tokens");
  ro.mlp.layers_per_stage = int_flag_in(args, "layers-per-stage", 1, kMaxLayers, "a layer count");
  ro.mlp.optimizer = parse_optimizer_kind(args["optimizer"].as<std::string>(), "--optimizer");
  ro.mlp.learning_rate = double_flag_in(args, "lr", 0, 100, "a learning rate (0 = the default)");
  ro.mlp.seed = args["seed"].as<uint64_t>();
  if (args.count("inject"))
    ro.mlp.fault = parse_mlp_fault(args["inject"].as<std::string>(), "--inject");
  ro.drop_tag = args["inject-drop"].as<int64_t>();
  if (args.count("inject-kill")) {
    const std::string v = args["inject-kill"].as<std::string>();
    const size_t colon = v.find(':');
    const auto parse = [](std::string_view text, int& out) {
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
      return ec == std::errc() && end == text.data() + text.size() && !text.empty() && out >= 0;
    };
    if (colon == std::string::npos || !parse(std::string_view(v).substr(0, colon), ro.kill_actor) ||
        !parse(std::string_view(v).substr(colon + 1), ro.kill_at_instruction)) {
      throw_input_error("--inject-kill",
                        "expected ACTOR:INSTRUCTION (two integers >= 0 that fit "
                        "in an int), got '" +
                            v + "'");
    }
  }

  // Flags the chosen compute cannot use are refused, not ignored (issue 16, class 5).
  if (ro.emulated)
    refuse_flags(args, {"hidden", "ffn", "seq", "layers-per-stage", "optimizer", "lr", "seed"},
                 kMlpFlagNeedsRealCompute);
  else
    refuse_flags(args, {"time-scale"}, kTimeScaleNeedsEmulatedCompute);

  // Outputs are checked before the run, so a bad path costs nothing, and written together at the
  // end (cli/report_output.h): never an input file, "-" is stdout (the report then on stderr).
  OutputFiles out("run");
  for (const char* flag : {"plan", "stage-times", "cluster", "schedule-file"})
    if (args.count(flag)) out.input(args[flag].as<std::string>(), std::string("--") + flag);
  std::optional<ClusterSpec> cluster;
  if (args.count("cluster")) cluster = load_cluster_arg(args["cluster"].as<std::string>());
  const std::string report_path = args.count("report") ? args["report"].as<std::string>() : "";
  const std::string timeline_path =
      args.count("timeline") ? args["timeline"].as<std::string>() : "";
  if (args.count("trace")) out.output(args["trace"].as<std::string>(), "--trace");
  std::optional<ExportFormat> timeline_format;
  if (args.count("timeline")) {
    timeline_format = timeline_format_flag(timeline_path);
    out.output(timeline_path, "--timeline", is_binary(*timeline_format));
  }
  if (args.count("report")) out.output(report_path, "--report");
  out.check_json_flag(args.count("json") > 0);

  Setup st = setup_from_args(args, ro.mlp);
  if (st.plan) {
    std::optional<MpiWorld> world;
    if (ro.backend == BackendKind::kMpi) world = mpi_world();
    try {
      ro.dp = plan_dp(*st.plan, args["plan"].as<std::string>(), args, world);
    } catch (const InputError&) {
      // Every rank finds the same mismatch; rank 0 alone reports it.
      if (world && world->rank != 0) return kExitBadInput;
      throw;
    }
    // An MoE plan runs the MoE workload: the plan's experts, top-k, router and ep.
    const MoeSpec& moe = st.plan->model.moe;
    if (moe.enabled()) {
      ro.mlp.experts = moe.experts;
      ro.mlp.top_k = moe.top_k;
      ro.mlp.ep = st.plan->config.ep;
      ro.mlp.router =
          moe.router == MoeRouter::kSigmoid ? RouterScoring::kSigmoid : RouterScoring::kSoftmax;
    }
  }
  RunResult r = run_program(st.program, st.cost.get(), ro);
  if (!r.root) return kExitOk;

  const Prediction prediction = predict(st, ro, r, cluster, args.count("stage-times") > 0);
  const SimResult& sim = prediction.sim;
  const std::string& predicted_from = prediction.from;
  const double predicted_s = prediction.step_time_s;
  const double pred_scale = prediction.time_scale;
  std::map<std::string, double> pred_kinds = mean_durations_by_kind(sim.trace, 0);
  std::map<std::string, double> meas_kinds = mean_durations_by_kind(r.trace, ro.warmup);

  const bool check_ok = check_passed(r);

  if (args.count("trace")) out.set("--trace", trace_to_json(r.trace).dump(1) + "\n");
  if (timeline_format) out.set("--timeline", export_trace(r.trace, *timeline_format, {}));
  if (!report_path.empty()) {
    ComparisonReport rep;
    const std::string what = st.plan ? "plan " + args["plan"].as<std::string>()
                             : args.count("schedule-file")
                                 ? "schedule file " + args["schedule-file"].as<std::string>()
                                 : "schedule " + args["schedule"].as<std::string>();
    rep.title = "jaxpp-sim run: " + what + ", predicted vs measured";
    char buf[64];
    auto sec = [&](double v) {
      std::snprintf(buf, sizeof buf, "%.6f s", v);
      return std::string(buf);
    };
    const std::string err = err_pct_text(err_pct(predicted_s, r.step_time_s));
    rep.summary = {
        {"backend", std::string(to_string(ro.backend)) + ", compute " + compute},
        {"actors x replicas",
         std::to_string(st.program.num_actors) + " x " + std::to_string(ro.dp)},
        {"stages, microbatches", std::to_string(st.program.num_stages) + ", " +
                                     std::to_string(st.program.num_microbatches)},
        {"predicted from", predicted_from},
        {"predicted step time", sec(predicted_s)},
        {"measured step time (median of " + std::to_string(ro.steps) + ")", sec(r.step_time_s)},
        {"error (measured - predicted) / predicted", err}};
    rep.predicted = scale_trace_times(sim.trace, pred_scale);
    rep.predicted.source = "predicted";
    rep.measured = trace_step(r.trace, median_step(r, ro.warmup));
    for (const auto& [k, m] : meas_kinds)
      rep.kinds.push_back({k, pred_kinds.count(k) ? pred_kinds[k] * pred_scale : 0.0, m});
    out.set("--report", comparison_report_html(rep));
  }
  out.write_all();

  if (args.count("json")) {
    nlohmann::json j;
    j["backend"] = to_string(ro.backend);
    j["compute"] = compute;
    j["num_actors"] = st.program.num_actors;
    j["num_stages"] = st.program.num_stages;
    j["num_microbatches"] = st.program.num_microbatches;
    j["dp"] = ro.dp;
    if (ro.mlp.moe())
      j["moe"] = {{"experts", ro.mlp.experts},
                  {"top_k", ro.mlp.top_k},
                  {"ep", ro.mlp.ep},
                  {"router", std::string(to_string(ro.mlp.router))}};
    if (ro.mlp.moe() && !ro.emulated)
      j["moe"]["grad_reduce_bytes_per_step"] = r.grad_reduce_bytes_per_step;
    j["steps"] = ro.steps;
    j["warmup"] = ro.warmup;
    j["losses"] = r.losses;
    j["step_times_s"] = r.step_times_s;
    j["step_time_s"] = r.step_time_s;
    j["predicted_step_time_s"] = predicted_s;
    j["predicted_from"] = predicted_from;
    // MoE: the all-to-all the prediction holds (Σ actors, busy and exposed; simulate's alltoall_s).
    if (sim.alltoall_s > 0) {
      j["predicted_alltoall_s"] = sim.alltoall_s * pred_scale;
      j["predicted_alltoall_exposed_s"] = sim.alltoall_exposed_s * pred_scale;
    }
    // Relative and signed: + means the run was slower than predicted.
    if (predicted_s > 0) j["prediction_error"] = (r.step_time_s - predicted_s) / predicted_s;
    if (cluster) j["cluster"] = cluster->name;
    if (r.checked) {
      j["reference_losses"] = r.reference_losses;
      j["max_abs_diff_loss"] = r.reference.max_abs_diff_loss;
      j["max_abs_diff_weights"] = r.reference.max_abs_diff_weights;
      j["check_passed"] = check_ok;
      j["check"] = {{"reference", check_to_json(r.reference)},
                    {"orchestration", check_to_json(r.orchestration)}};
    }
    if (ro.mlp.fault != MlpFault::kNone) j["inject"] = to_string(ro.mlp.fault);
    if (args.count("compare")) {
      nlohmann::json kinds = nlohmann::json::object();
      for (const auto& [k, m] : meas_kinds) {
        double p = pred_kinds.count(k) ? pred_kinds[k] * pred_scale : 0;
        const std::optional<double> pct = err_pct(p, m);
        kinds[k] = {{"predicted_s", p},
                    {"measured_s", m},
                    {"error_pct", pct ? nlohmann::json(*pct) : nlohmann::json(nullptr)}};
      }
      j["kinds"] = kinds;
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::ostream& text = out.report_stream();
    FILE* const file = out.to_stdout() ? stderr : stdout;
    text << "run: " << st.program.num_actors << " actors x " << ro.dp << " replicas, "
         << st.program.num_stages << " stages, " << st.program.num_microbatches
         << " microbatches, backend " << to_string(ro.backend) << ", compute " << compute << "\n"
         << std::flush;
    for (size_t i = 0; i < r.losses.size(); ++i)
      std::fprintf(file, "step %zu: loss %.10g  time %.6f s\n", i, r.losses[i], r.step_times_s[i]);
    if (r.losses.empty())
      for (size_t i = 0; i < r.step_times_s.size(); ++i)
        std::fprintf(file, "step %zu: time %.6f s\n", i, r.step_times_s[i]);
    std::fprintf(file, "step time (median): %.6f s\n", r.step_time_s);
    if (r.checked) {
      std::fprintf(file,
                   "check vs independent reference: max rel loss diff %.3g, max rel weight diff "
                   "%.3g (tolerance %.3g) -> %s\n",
                   r.reference.max_rel_diff_loss, r.reference.max_rel_diff_weights,
                   r.reference.rel_tolerance, r.reference.passed ? "PASS" : "FAIL");
      if (!r.orchestration.ran)
        std::fprintf(file,
                     "orchestration check: not run (MoE workload; the independent reference "
                     "checks it)\n");
      else
        std::fprintf(file,
                     "orchestration check vs same-code sequential run (%s): max |loss diff| %.3g, "
                     "max |weight diff| %.3g -> %s\n",
                     r.orchestration.rel_tolerance > 0 ? "relative tolerance" : "bit-exact",
                     r.orchestration.max_abs_diff_loss, r.orchestration.max_abs_diff_weights,
                     r.orchestration.passed ? "PASS" : "FAIL");
    }
    if (args.count("compare")) {
      std::fprintf(file, "predicted step time (%s): %.6f s, measured %.6f s, error %s\n",
                   predicted_from.c_str(), predicted_s, r.step_time_s,
                   err_pct_text(err_pct(predicted_s, r.step_time_s)).c_str());
      if (sim.alltoall_s > 0)
        std::fprintf(file, "predicted all-to-all (sum over actors): %.6f s, %.6f s exposed\n",
                     sim.alltoall_s * pred_scale, sim.alltoall_exposed_s * pred_scale);
      std::fprintf(file, "%-10s %14s %14s %8s\n", "kind", "predicted_s", "measured_s", "err%");
      for (const auto& [k, m] : meas_kinds) {
        double p = pred_kinds.count(k) ? pred_kinds[k] * pred_scale : 0;
        std::fprintf(file, "%-10s %14.6g %14.6g %8s\n", k.c_str(), p, m,
                     err_pct_text(err_pct(p, m)).c_str());
      }
    }
  }
  std::cout.flush();
  if (check_ok) return kExitOk;
  const CheckResult& failed = r.reference.passed ? r.orchestration : r.reference;
  std::cerr << "jaxpp-sim run: check failed ("
            << (r.reference.passed ? "orchestration check" : "independent reference")
            << "): " << failed.first_difference << "\n";
  return kExitFailure;
}

const CommandRegistration kRunCommand{"run",
                               "Execute a plan on threads, MPI processes or CUDA GPUs (real or "
                               "emulated compute)",
                               run_run};

}  // namespace
}  // namespace jaxpp::cli
