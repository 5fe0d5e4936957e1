// jaxpp-sim run: execute a plan (or a named schedule) on threads, MPI processes or CUDA GPUs
// and report losses, measured step time and, with --check, the difference to a sequential
// reference (see docs/runtime.md).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "costmodel/analytic_cost.h"
#include "costmodel/cluster.h"
#include "costmodel/stage_times_cost.h"
#include "graph/error.h"
#include "graph/plan.h"
#include "runtime/run.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "simulator/engine.h"

namespace jaxpp::cli {
namespace {

// fp64 numerics: pipelined and sequential results differ only by summation order.
constexpr double kCheckRelTolerance = 1e-9;

struct Setup {
  Program program;
  std::optional<Plan> plan;
  std::unique_ptr<CostProvider> cost;  // emulation / prediction cost
};

Setup setup_from_args(const cxxopts::ParseResult& args, const MlpConfig& mlp) {
  Setup st;
  if (args.count("plan")) {
    if (args.count("schedule"))
      throw_input_error("run", "give either PLAN.json or --schedule, not both");
    st.plan = load_plan(args["plan"].as<std::string>());
    st.program = st.plan->program;
    if (args.count("stage-times")) {
      st.cost = std::make_unique<StageTimesCost>(
          load_stage_times(args["stage-times"].as<std::string>(), st.program.num_stages));
    } else {
      ClusterSpec cluster = cluster_from_json(st.plan->cluster, args["plan"].as<std::string>());
      st.cost = std::make_unique<AnalyticCost>(st.plan->model, st.plan->partition,
                                               st.plan->placement, st.plan->config, cluster);
    }
    return st;
  }
  if (!args.count("schedule"))
    throw_input_error("run", "expected PLAN.json or --schedule NAME --pp P --microbatches M");
  if (!args.count("pp")) throw_input_error("--pp", "required with --schedule");
  ScheduleParams params;
  params.num_actors = args["pp"].as<int>();
  params.num_microbatches = args["microbatches"].as<int>();
  if (args.count("virtual")) params.num_stages = params.num_actors * args["virtual"].as<int>();
  Schedule schedule = generate_schedule(args["schedule"].as<std::string>(), params);
  LoweringOptions lo;
  int64_t act = static_cast<int64_t>(mlp.seq) * mlp.hidden * 8;
  lo.activation_bytes.assign(schedule.num_stages, act);
  lo.grad_bytes.assign(schedule.num_stages, mlp.params_per_stage() * 8);
  st.program = lower(schedule, lo);
  if (args.count("stage-times")) {
    st.cost = std::make_unique<StageTimesCost>(
        load_stage_times(args["stage-times"].as<std::string>(), st.program.num_stages));
  } else {
    st.cost = std::make_unique<StageTimesCost>(
        uniform_stage_times(st.program.num_stages, 1e-3, 1e-3, 1e-3, 0));
  }
  return st;
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

double err_pct(double predicted, double measured) {
  return predicted > 0 ? 100.0 * (measured - predicted) / predicted : 0.0;
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
      ("check", "compare losses and weights with a sequential single-actor reference")
      ("trace", "write the measured trace (trace JSON) to FILE", cxxopts::value<std::string>())
      ("compare", "print predicted vs measured step time and per-kind task durations")
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
      ("pp", "with --schedule: pipeline actors", cxxopts::value<int>())
      ("microbatches", "with --schedule: microbatches", cxxopts::value<int>()->default_value("4"))
      ("virtual", "with --schedule: stages per actor", cxxopts::value<int>())
      ("dp", "data-parallel replicas of the pipeline", cxxopts::value<int>()->default_value("1"))
      ("inject-drop", "fault injection: drop every message with this tag", cxxopts::value<int64_t>()->default_value("-1"))
      ("inject-kill", "fault injection: ACTOR:INSTRUCTION exits abruptly in step 0 (mpi)", cxxopts::value<std::string>())
      ("h,help", "show this help");
  // clang-format on
  options.parse_positional({"plan"});
  options.positional_help("[PLAN.json]");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::cout << options.help() << "\n";
    return kExitOk;
  }
  if (!args.unmatched().empty())
    throw_input_error("run", "unexpected argument '" + args.unmatched()[0] + "'");

  RunOptions ro;
  ro.backend = parse_backend_kind(args["backend"].as<std::string>(), "--backend");
  std::string compute = args["compute"].as<std::string>();
  if (compute != "real" && compute != "emulated")
    throw_input_error("--compute", "expected real or emulated, got '" + compute + "'");
  ro.emulated = compute == "emulated";
  ro.steps = args["steps"].as<int>();
  ro.warmup = args["warmup"].as<int>();
  ro.dp = args["dp"].as<int>();
  ro.check = args.count("check") > 0;
  ro.time_scale = args["time-scale"].as<double>();
  ro.timeout_s = args["timeout-s"].as<double>();
  ro.mlp.hidden = args["hidden"].as<int>();
  ro.mlp.ffn = args["ffn"].as<int>();
  ro.mlp.seq = args["seq"].as<int>();
  ro.mlp.layers_per_stage = args["layers-per-stage"].as<int>();
  ro.mlp.optimizer = parse_optimizer_kind(args["optimizer"].as<std::string>(), "--optimizer");
  ro.mlp.learning_rate = args["lr"].as<double>();
  ro.mlp.seed = args["seed"].as<uint64_t>();
  ro.drop_tag = args["inject-drop"].as<int64_t>();
  if (args.count("inject-kill")) {
    std::string v = args["inject-kill"].as<std::string>();
    if (std::sscanf(v.c_str(), "%d:%d", &ro.kill_actor, &ro.kill_at_instruction) != 2)
      throw_input_error("--inject-kill", "expected ACTOR:INSTRUCTION, got '" + v + "'");
  }
  if (ro.time_scale < 0) throw_input_error("--time-scale", "expected >= 0");

  Setup st = setup_from_args(args, ro.mlp);
  RunResult r = run_program(st.program, st.cost.get(), ro);
  if (!r.root) return kExitOk;

  // Prediction: the simulator on the emulation cost (scaled), or, for real compute, on the
  // stage times this run measured.
  std::string predicted_from;
  double predicted_s = 0;
  SimResult sim;
  SimOptions so;
  if (ro.emulated) {
    sim = simulate(st.program, *st.cost, so);
    predicted_s = sim.step_time_s * ro.time_scale;
    predicted_from = st.plan && !args.count("stage-times") ? "plan cost model" : "stage times";
  } else {
    StageTimesCost measured = measured_stage_times(r.trace, st.program.num_stages, ro.warmup);
    sim = simulate(st.program, measured, so);
    predicted_s = sim.step_time_s;
    predicted_from = "measured task times";
  }
  double pred_scale = ro.emulated ? ro.time_scale : 1.0;
  std::map<std::string, double> pred_kinds = mean_durations_by_kind(sim.trace, 0);
  std::map<std::string, double> meas_kinds = mean_durations_by_kind(r.trace, ro.warmup);

  bool check_ok = true;
  double loss_scale = 1;
  for (double l : r.reference_losses) loss_scale = std::max(loss_scale, std::abs(l));
  if (r.checked)
    check_ok = r.max_abs_diff_loss <= kCheckRelTolerance * loss_scale &&
               r.max_abs_diff_weights <= kCheckRelTolerance * std::max(1.0, r.max_abs_weight);

  if (args.count("trace")) save_trace(r.trace, args["trace"].as<std::string>());

  if (args.count("json")) {
    nlohmann::json j;
    j["backend"] = to_string(ro.backend);
    j["compute"] = compute;
    j["num_actors"] = st.program.num_actors;
    j["num_stages"] = st.program.num_stages;
    j["num_microbatches"] = st.program.num_microbatches;
    j["dp"] = ro.dp;
    j["steps"] = ro.steps;
    j["warmup"] = ro.warmup;
    j["losses"] = r.losses;
    j["step_times_s"] = r.step_times_s;
    j["step_time_s"] = r.step_time_s;
    j["predicted_step_time_s"] = predicted_s;
    j["predicted_from"] = predicted_from;
    if (r.checked) {
      j["reference_losses"] = r.reference_losses;
      j["max_abs_diff_loss"] = r.max_abs_diff_loss;
      j["max_abs_diff_weights"] = r.max_abs_diff_weights;
      j["check_passed"] = check_ok;
    }
    if (args.count("compare")) {
      nlohmann::json kinds = nlohmann::json::object();
      for (const auto& [k, m] : meas_kinds) {
        double p = pred_kinds.count(k) ? pred_kinds[k] * pred_scale : 0;
        kinds[k] = {{"predicted_s", p}, {"measured_s", m}, {"error_pct", err_pct(p, m)}};
      }
      j["kinds"] = kinds;
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "run: " << st.program.num_actors << " actors x " << ro.dp << " replicas, "
              << st.program.num_stages << " stages, " << st.program.num_microbatches
              << " microbatches, backend " << to_string(ro.backend) << ", compute " << compute
              << "\n";
    for (size_t i = 0; i < r.losses.size(); ++i)
      std::printf("step %zu: loss %.10g  time %.6f s\n", i, r.losses[i], r.step_times_s[i]);
    if (r.losses.empty())
      for (size_t i = 0; i < r.step_times_s.size(); ++i)
        std::printf("step %zu: time %.6f s\n", i, r.step_times_s[i]);
    std::printf("step time (median): %.6f s\n", r.step_time_s);
    if (r.checked)
      std::printf("check: max |loss diff| %.3g, max |weight diff| %.3g -> %s\n",
                  r.max_abs_diff_loss, r.max_abs_diff_weights, check_ok ? "PASS" : "FAIL");
    if (args.count("compare")) {
      std::printf("predicted step time (%s): %.6f s, measured %.6f s, error %+.1f%%\n",
                  predicted_from.c_str(), predicted_s, r.step_time_s,
                  err_pct(predicted_s, r.step_time_s));
      std::printf("%-10s %14s %14s %8s\n", "kind", "predicted_s", "measured_s", "err%");
      for (const auto& [k, m] : meas_kinds) {
        double p = pred_kinds.count(k) ? pred_kinds[k] * pred_scale : 0;
        std::printf("%-10s %14.6g %14.6g %+7.1f%%\n", k.c_str(), p, m, err_pct(p, m));
      }
    }
  }
  std::cout.flush();
  return check_ok ? kExitOk : kExitFailure;
}

const CommandRegistration kReg{"run",
                               "Execute a plan on threads, MPI processes or CUDA GPUs (real or "
                               "emulated compute)",
                               run_run};

}  // namespace
}  // namespace jaxpp::cli
