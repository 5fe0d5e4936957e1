// jaxpp-sim demo: the README's main job, the whole story on built-in defaults.
//   1. the model and its task graph (graph/)
//   2. explore the parallel configurations of the model on the cluster (simulator/explorer.h)
//   3. simulate the best plan with a trace; write plan.json, timeline.svg and trace.json
//      (Perfetto / Chrome trace-event JSON) to --out
//   4. run the best plan's program on the threads backend with emulated compute (every task
//      sleeps for its predicted duration, scaled so that a step takes about --emulated-step-s)
//      and print predicted vs measured step time
//   5. run the same program with real fp64 numerics (small MLP blocks) and check it against a
//      sequential single-actor reference
// Each step is one function; --json prints one object with a key per step.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/explore_report.h"
#include "graph/graph_report.h"
#include "cli/report_output.h"
#include "costmodel/analytic_cost.h"
#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/plan.h"
#include "runtime/run.h"
#include "simulator/engine.h"
#include "simulator/explorer.h"
#include "simulator/plan_builder.h"
#include "trace/export.h"

namespace jaxpp::cli {
namespace {

struct DemoSettings {
  std::string model = "gpt3-13b";
  std::string cluster = "h100-sxm";
  int gpus = 64;
  int global_batch = 128;
  std::string out_dir = "jaxpp-demo";
  double emulated_step_s = 0.5;
  int threads = 0;
  bool json = false;
};

// The explored space: the schedules users compare most, every pp/tp that fits the GPU count,
// microbatch sizes 1 and 2 (the full default space is `jaxpp-sim explore`).
ExploreRequest demo_request(const DemoSettings& s) {
  ExploreRequest req;
  req.model = load_model(s.model);
  req.cluster = load_cluster(s.cluster);
  req.gpus = s.gpus;
  req.global_batch = s.global_batch;
  req.space.schedules = {"GPipe", "Std1F1B", "ZeroBubble", "Interleaved1F1B", "DualPipeV", "ZB-V"};
  req.space.microbatch_sizes = {1, 2};
  req.space.virtual_stages = {2};
  req.threads = s.threads;
  return req;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double error_pct(double predicted_s, double measured_s) {
  return predicted_s > 0 ? 100.0 * (measured_s - predicted_s) / predicted_s : 0.0;
}

struct EmulatedRun {
  double time_scale = 1;
  double predicted_s = 0;
  double measured_s = 0;
};

// Step 4: the plan's program on threads, each task sleeping for its cost-model duration.
EmulatedRun run_emulated(const Plan& plan, const ClusterSpec& cluster, double target_step_s) {
  const AnalyticCost cost(plan.model, plan.partition, plan.placement, plan.config, cluster);
  SimOptions so;
  so.record_trace = false;
  const double simulated_s = simulate(plan.program, cost, so).makespan_s;
  EmulatedRun e;
  e.time_scale = simulated_s > 0 ? target_step_s / simulated_s : 1;
  e.predicted_s = simulated_s * e.time_scale;
  RunOptions ro;
  ro.emulated = true;
  ro.time_scale = e.time_scale;
  ro.steps = 3;
  ro.warmup = 1;
  e.measured_s = run_program(plan.program, &cost, ro).step_time_s;
  return e;
}

// Step 5: real numerics, scaled down to small MLP blocks, with the sequential reference.
RunResult run_real(const Plan& plan) {
  RunOptions ro;
  ro.steps = 2;
  ro.warmup = 0;
  ro.check = true;
  ro.mlp.hidden = 16;
  ro.mlp.seq = 4;
  ro.mlp.layers_per_stage = 1;
  return run_program(plan.program, nullptr, ro);
}

int run_demo(int argc, char** argv) {
  cxxopts::Options options(
      "jaxpp-sim demo",
      "The end-to-end demonstration: explore a model on a cluster, simulate the best plan, write\n"
      "its timeline, run it on threads (emulated and real compute) and compare with the\n"
      "prediction.");
  DemoSettings s;
  // clang-format off
  options.add_options()
      ("model", "model preset, model JSON file or Hugging Face config.json", cxxopts::value<std::string>()->default_value(s.model))
      ("cluster", "cluster preset or JSON file", cxxopts::value<std::string>()->default_value(s.cluster))
      ("gpus", "total GPUs", cxxopts::value<int>()->default_value(std::to_string(s.gpus)))
      ("global-batch", "sequences per iteration", cxxopts::value<int>()->default_value(std::to_string(s.global_batch)))
      ("out", "directory for plan.json, timeline.svg and trace.json", cxxopts::value<std::string>()->default_value(s.out_dir))
      ("emulated-step-s", "wall time of one emulated step (the plan's durations are scaled to it)", cxxopts::value<double>()->default_value("0.5"))
      ("threads", "explorer threads (default: hardware concurrency)", cxxopts::value<int>()->default_value("0"))
      ("json", "print JSON instead of tables")
      ("h,help", "show this help");
  // clang-format on
  const std::optional<cxxopts::ParseResult> parsed =
      parse_flags(options, argc, argv, "demo");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  s.model = args["model"].as<std::string>();
  s.cluster = args["cluster"].as<std::string>();
  s.gpus = args["gpus"].as<int>();
  s.global_batch = args["global-batch"].as<int>();
  s.out_dir = args["out"].as<std::string>();
  s.emulated_step_s = args["emulated-step-s"].as<double>();
  s.threads = args["threads"].as<int>();
  s.json = args.count("json") > 0;
  if (!(s.emulated_step_s > 0) || s.emulated_step_s > 60)
    throw_input_error("--emulated-step-s", "expected a value in (0, 60] seconds");
  if (s.threads < 0) throw_input_error("--threads", "must be >= 0");
  int_flag_in(args, "threads", 0, 4096, "a number of threads (0 = all cores)");
  // The directory is created, and the files written, only once every step has succeeded
  // (cli/report_output.h): bad input leaves no directory and no file behind.
  std::error_code ec;
  if (s.out_dir.empty() || s.out_dir == "-")
    throw_input_error("--out", "expected a directory name (the demo writes three files)");
  if (std::filesystem::exists(std::filesystem::symlink_status(s.out_dir, ec)) &&
      !std::filesystem::is_directory(s.out_dir, ec))
    throw_input_error("--out " + s.out_dir, "exists and is not a directory");
  // The nearest existing ancestor must be a writable directory: checked now, not after the
  // steps (they ran, PASS included, and then "cannot create the directory" came).
  {
    std::filesystem::path existing = std::filesystem::absolute(s.out_dir, ec).lexically_normal();
    while (existing.has_relative_path() &&
           !std::filesystem::exists(std::filesystem::symlink_status(existing, ec)))
      existing = existing.parent_path();
    if (!std::filesystem::is_directory(existing, ec))
      throw_input_error("--out " + s.out_dir, "cannot create the directory (" +
                                                  existing.string() + " is not a directory)");
    if (::access(existing.c_str(), W_OK) != 0)
      throw_input_error("--out " + s.out_dir, "cannot create the directory (" +
                                                  existing.string() + " is not writable)");
  }
  const std::filesystem::path out(s.out_dir);
  std::ostream& log = s.json ? std::cerr : std::cout;

  // 1. model
  const ExploreRequest req = demo_request(s);
  log << "== 1. model\n";
  print_model_summary(log, req.model);

  // 2. explore
  log << "\n== 2. explore " << req.model.name << " on " << req.gpus << " x " << req.cluster.name
      << " (schedules GPipe, Std1F1B, ZeroBubble, Interleaved1F1B, DualPipeV, ZB-V)\n";
  const auto start = std::chrono::steady_clock::now();
  const ExploreResult res = explore(req);
  const double explore_s = seconds_since(start);
  if (res.ranking.empty()) throw InputError(explain_empty(res));
  print_explore_table(log, req, res, 5, explore_s);
  const ConfigRecord& best = res.records[res.ranking.front()];

  // 3. simulate the best plan, write plan and timelines
  Plan plan = build_config_plan(req, best.config);
  PlanSimOptions pso;
  pso.check_memory = false;  // the explorer already checked it
  const SimulatedPlan sim = simulate_plan(plan, pso);
  plan.predicted = sim.metrics;
  const std::string plan_path = (out / "plan.json").string();
  const std::string svg_path = (out / "timeline.svg").string();
  const std::string trace_path = (out / "trace.json").string();
  std::vector<std::pair<std::string, std::string>> files = {  // (path, bytes), written at the end
      {plan_path, plan_to_text(plan, plan_path)},
      {svg_path, export_trace(sim.result.trace, ExportFormat::kSvg, {})},
      {trace_path, export_trace(sim.result.trace, ExportFormat::kPerfetto, {})}};
  log << "\n== 3. best plan: " << describe_config(best.config) << "\n"
      << "predicted step time " << fmt("%.3f", sim.result.step_time_s) << " s, bubble "
      << fmt("%.1f", 100 * sim.result.bubble_rate) << "%, MFU "
      << fmt("%.1f", 100 * sim.metrics.value("mfu", 0.0)) << "%, peak memory "
      << fmt("%.2f", static_cast<double>(best.peak_memory_bytes) / kGiB) << " GiB\n"
      << "writes " << plan_path << ", " << svg_path << ", " << trace_path
      << " at the end (open the trace in ui.perfetto.dev)\n";

  // 4. emulated run
  log << "\n== 4. run the best plan on threads, emulated compute (" << plan.program.num_actors
      << " actors, one replica; durations scaled to a " << fmt("%g", s.emulated_step_s)
      << " s step)\n";
  const EmulatedRun emu = run_emulated(plan, req.cluster, s.emulated_step_s);
  log << "predicted " << fmt("%.4f", emu.predicted_s) << " s, measured "
      << fmt("%.4f", emu.measured_s) << " s, error "
      << fmt("%+.1f", error_pct(emu.predicted_s, emu.measured_s)) << "%\n";

  // 5. real numerics
  log << "\n== 5. run the same program with real fp64 numerics (MLP blocks, hidden 16) and "
         "check it against an independent sequential reference\n";
  const RunResult real = run_real(plan);
  const bool pass = check_passed(real);
  log << "losses";
  for (double l : real.losses) log << " " << fmt("%.6f", l);
  log << "; max |loss diff| " << fmt("%.3g", real.reference.max_abs_diff_loss)
      << ", max |weight diff| " << fmt("%.3g", real.reference.max_abs_diff_weights) << " -> "
      << (pass ? "PASS" : "FAIL") << "\n";

  const bool created = !std::filesystem::exists(s.out_dir, ec);
  std::filesystem::create_directories(s.out_dir, ec);
  if (ec || !std::filesystem::is_directory(s.out_dir))
    throw_input_error("--out " + s.out_dir, "cannot create the directory (" + ec.message() + ")");
  try {
    OutputFiles outputs("demo");
    outputs.input(s.model, "--model");
    outputs.input(s.cluster, "--cluster");
    for (auto& [path, bytes] : files) {
      const std::string flag = "--out " + std::filesystem::path(path).filename().string();
      outputs.output(path, flag);
      outputs.set(flag, std::move(bytes));
    }
    outputs.write_all();
  } catch (...) {
    if (created) std::filesystem::remove(s.out_dir, ec);  // empty: nothing was written
    throw;
  }
  if (s.json) {
    nlohmann::json j;
    j["explore"] = explore_result_to_json(req, res, 5, false);
    j["explore"].erase("configs");
    j["best_plan"] = {{"config", describe_config(best.config)},
                      {"plan", plan_path},
                      {"timeline", svg_path},
                      {"trace", trace_path},
                      {"predicted", sim.metrics}};
    j["emulated_run"] = {
        {"time_scale", emu.time_scale},
        {"predicted_step_time_s", emu.predicted_s},
        {"step_time_s", emu.measured_s},
        {"prediction_error",
         emu.predicted_s > 0 ? (emu.measured_s - emu.predicted_s) / emu.predicted_s : 0.0}};
    j["real_run"] = {{"losses", real.losses},
                     {"max_abs_diff_loss", real.reference.max_abs_diff_loss},
                     {"max_abs_diff_weights", real.reference.max_abs_diff_weights},
                     {"check", pass ? "pass" : "fail"}};
    std::cout << j.dump(2) << "\n";
  }
  return pass ? kExitOk : kExitFailure;
}

const CommandRegistration kDemoCommand{
    "demo", "End-to-end: explore, simulate the best plan, write timelines, run it and compare",
    run_demo};

}  // namespace
}  // namespace jaxpp::cli
