// jaxpp-sim synthesize: the schedule with the shortest simulated step for given stage times under
// a memory budget per actor (simulator/synthesize.h; docs/synthesize.md). Measured mode takes
// the stage times as simulate does (--t-f/--t-b/--t-w/--t-comm or --stage-times); plan mode
// (--plan PLAN.json) prices the plan's stages with the cost model. Outputs (--out JSON schedule,
// --csv PyTorch CSV, --plan-out plan) are written atomically once all are ready.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/report_output.h"
#include "costmodel/cluster.h"
#include "costmodel/stage_times_cost.h"
#include "graph/error.h"
#include "graph/limits.h"
#include "graph/plan.h"
#include "schedules/custom.h"
#include "simulator/synthesis_request.h"
#include "simulator/synthesize.h"

namespace jaxpp::cli {
namespace {

void print_synthesis(std::ostream& out, const nlohmann::ordered_json& j) {
  char line[256];
  std::snprintf(line, sizeof line, "  %-20s pp %d, m %d\n", "synthesized", j["pp"].get<int>(),
                j["num_microbatches"].get<int>());
  out << line;
  std::snprintf(line, sizeof line, "  %-20s %.6f ms\n", "step time",
                j["step_time_s"].get<double>() * 1e3);
  out << line;
  std::snprintf(line, sizeof line, "  %-20s %.2f %%\n", "bubble rate",
                j["bubble_rate"].get<double>() * 100);
  out << line;
  std::string peaks, limits;
  for (const auto& v : j["peak_stashed"]) peaks += (peaks.empty() ? "" : " ") + v.dump();
  for (const auto& v : j["memory_limit_microbatches"])
    limits += (limits.empty() ? "" : " ") + v.dump();
  out << "  peak stashed         " << peaks << "  (limit " << limits << ")\n";
  out << "  found by             " << j["origin"].get<std::string>() << "\n";
  std::snprintf(line, sizeof line, "  %-20s %lld evaluations in %.2f s, stopped by %s\n", "search",
                static_cast<long long>(j["search"]["evaluations"].get<int64_t>()),
                j["search"]["seconds"].get<double>(),
                j["search"]["stopped_by"].get<std::string>().c_str());
  out << line;
  const int constructions = j["search"]["constructions"].get<int>();
  if (constructions < kSynthesisConstructions) {
    std::snprintf(line, sizeof line, "  %-20s %d of %d (the time budget ran out)\n",
                  "constructions", constructions, kSynthesisConstructions);
    out << line;
  }
  out << "  built-in schedules (one stage per actor):\n";
  for (const auto& c : j["named"]) {
    std::string p;
    for (const auto& v : c["peak_stashed"]) p += (p.empty() ? "" : " ") + v.dump();
    // The peaks after the fixed-width part: at p 256 they overran the line buffer, which cut the
    // newline and ran the schedules' lines together.
    std::snprintf(line, sizeof line, "    %-20s %12.6f ms  bubble %6.2f %%  %s  peak stashed ",
                  c["name"].get<std::string>().c_str(), c["step_time_s"].get<double>() * 1e3,
                  c["bubble_rate"].get<double>() * 100,
                  c["fits"].get<bool>() ? "fits       " : "over budget");
    out << line << p << "\n";
  }
}

int run_synthesize(int argc, char** argv) {
  cxxopts::Options options(
      "jaxpp-sim synthesize",
      "Synthesize the pipeline schedule with the shortest simulated step under a memory budget.\n"
      "  measured mode: --pp P --microbatches M --t-f .. --t-b .. [--t-w ..] [--t-comm ..]\n"
      "                 | --stage-times FILE   (milliseconds, as simulate)\n"
      "                 --memory-limit-microbatches K\n"
      "  plan mode:     --plan PLAN.json [--memory-limit-bytes N | --memory-limit-microbatches K]\n"
      "  One stage per actor; every backward split into I and W (docs/synthesize.md).");
  // clang-format off
  options.add_options()
      ("pp", "measured mode: pipeline actors (one stage each)", cxxopts::value<int>())
      ("microbatches", "measured mode: microbatches", cxxopts::value<int>())
      ("t-f", "measured mode: forward time per stage, ms", cxxopts::value<double>())
      ("t-b", "measured mode: input-gradient backward time, ms", cxxopts::value<double>())
      ("t-w", "measured mode: weight-gradient backward time, ms", cxxopts::value<double>()->default_value("0"))
      ("t-comm", "measured mode: P2P transfer time, ms", cxxopts::value<double>()->default_value("0"))
      ("stage-times", "measured mode: per-stage times JSON file", cxxopts::value<std::string>())
      ("plan", "plan mode: a plan.json (one stage per actor) priced by its cost model", cxxopts::value<std::string>())
      ("memory-limit-microbatches", "most stashed microbatches per actor (default: the number of actors, ZB-H1's budget)", cxxopts::value<int>())
      ("memory-limit-bytes", "plan mode: memory per device in bytes (default: the cluster's device memory)", cxxopts::value<int64_t>())
      ("time-budget-s", "wall-clock bound of the synthesis, seconds: the constructions after the first and the local search (the built-in schedules are always simulated)", cxxopts::value<double>()->default_value("2"))
      ("max-evaluations", "bound of the local search in replays (0 = none); the same bound gives the same schedule on every machine", cxxopts::value<int64_t>()->default_value("0"))
      ("out", "write the schedule as JSON (schedules/custom.h) to FILE", cxxopts::value<std::string>())
      ("csv", "write the schedule as PyTorch pipelining CSV to FILE", cxxopts::value<std::string>())
      ("plan-out", "plan mode: write the plan with the synthesized schedule (and predicted metrics) to FILE", cxxopts::value<std::string>())
      ("quiet", "no progress on stderr")
      ("json", "print the result as JSON")
      ("h,help", "show this help");
  // clang-format on
  const std::optional<cxxopts::ParseResult> parsed = parse_flags(options, argc, argv, "synthesize");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  const bool plan_mode = args.count("plan") > 0;
  for (const char* flag : {"t-f", "t-b", "t-w", "t-comm"})
    refuse_together(args, "stage-times", flag,
                    "give per-stage times in a file or uniform times, not both");
  refuse_together(args, "memory-limit-bytes", "memory-limit-microbatches",
                  "give the budget in bytes or in stashed microbatches, not both");
  if (plan_mode) {
    refuse_flags(args, {"pp", "microbatches", "t-f", "t-b", "t-w", "t-comm", "stage-times"},
                 "a measured-mode flag, but --plan gives the stages, microbatches and times");
  } else {
    refuse_flags(args, {"memory-limit-bytes", "plan-out"},
                 "a plan-mode flag, but without --plan synthesize runs in measured mode");
  }
  const double time_budget_s = args["time-budget-s"].as<double>();
  const int64_t max_evaluations = args["max-evaluations"].as<int64_t>();
  check_synthesis_budgets(time_budget_s, max_evaluations);

  OutputFiles out("synthesize");
  for (const char* flag : {"stage-times", "plan"})
    if (args.count(flag)) out.input(args[flag].as<std::string>(), std::string("--") + flag);
  for (const char* flag : {"out", "csv", "plan-out"})
    if (args.count(flag)) out.output(args[flag].as<std::string>(), std::string("--") + flag);
  const bool json = args.count("json") > 0;
  out.check_json_flag(json);

  SynthesisOptions so;
  so.time_budget_s = time_budget_s;
  so.max_evaluations = max_evaluations;
  if (!args.count("quiet") && isatty(STDERR_FILENO)) {
    so.progress = [](const SynthesisProgress& p) {
      std::fprintf(stderr, "\rsynthesize: %.1f s, %lld evaluations, best %.6f ms   ", p.elapsed_s,
                   static_cast<long long>(p.evaluations), p.best_step_time_s * 1e3);
      std::fflush(stderr);
    };
  }
  SynthesisRequest req;
  if (plan_mode) {
    req.plan = load_plan(args["plan"].as<std::string>());
    req.plan_source = args["plan"].as<std::string>();
    if (args.count("memory-limit-bytes"))
      req.memory_limit_bytes = args["memory-limit-bytes"].as<int64_t>();
  } else {
    if (args.count("pp")) req.pp = args["pp"].as<int>();
    if (args.count("microbatches")) req.microbatches = args["microbatches"].as<int>();
    if (args.count("stage-times")) req.stage_times_file = args["stage-times"].as<std::string>();
    if (args.count("t-f")) req.t_f_ms = args["t-f"].as<double>();
    if (args.count("t-b")) req.t_b_ms = args["t-b"].as<double>();
    req.t_w_ms = args["t-w"].as<double>();
    req.t_comm_ms = args["t-comm"].as<double>();
  }
  if (args.count("memory-limit-microbatches"))
    req.memory_limit_microbatches = args["memory-limit-microbatches"].as<int>();
  const SynthesisRun run = run_synthesis(req, so);
  const SynthesisResult& result = run.result;
  const nlohmann::ordered_json& report = run.report;
  if (run.plan && args.count("plan-out"))
    out.set("--plan-out", plan_to_text(*run.plan, "--plan-out"));
  if (so.progress && result.search_s >= 0.5) std::fputs("\n", stderr);
  if (args.count("out")) out.set("--out", schedule_to_json_text(result.schedule));
  if (args.count("csv")) out.set("--csv", schedule_to_csv(result.schedule));
  out.write_all();
  if (json) {
    std::cout << report.dump(2) << "\n";
    return kExitOk;
  }
  std::ostream& stream = out.report_stream();
  print_synthesis(stream, report);
  for (const std::string& path : out.written_files()) stream << "wrote " << path << "\n";
  return kExitOk;
}

const CommandRegistration kSynthesizeCommand{
    "synthesize", "Synthesize a schedule for stage times under a memory budget", run_synthesize};

}  // namespace
}  // namespace jaxpp::cli
