// jaxpp-sim export: turn a trace (or a plan, simulated first) into a timeline file:
// Chrome/Perfetto JSON, Graphviz SVG/PNG/DOT, or a text Gantt; or a plan's task graph as
// DOT/SVG/PNG. See docs/export.md.
#include <iostream>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/report_output.h"
#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/json_util.h"
#include "graph/plan.h"
#include "graph/program.h"
#include "handoff/handoff.h"
#include "schedules/custom.h"
#include "schedules/registry.h"
#include "simulator/plan_builder.h"
#include "simulator/plan_check.h"
#include "trace/export.h"
#include "trace/plan_task_graph.h"
#include "trace/trace.h"

namespace jaxpp::cli {
namespace {

// A plan file that contradicts itself is refused before anything is drawn from it, as in
// `validate` and `run` (simulator/plan_check.h).
Plan load_checked_plan(const std::string& path) {
  Plan plan = load_plan(path);
  check_plan_file(plan, path);
  return plan;
}

// --format megatron|torchtitan|jaxpp: the plan as text for a trainer (handoff/handoff.h).
int run_handoff(const cxxopts::ParseResult& args, HandoffTarget target) {
  const std::string format(to_string(target));
  if (!args.count("plan")) throw_input_error("--format " + format, "needs --plan FILE");
  refuse_flags(args, {"trace"}, "--format " + format + " hands a plan to a trainer (give --plan)");
  refuse_flags(args, {"width", "per-stream", "title", "view"},
               "a timeline option; --format " + format + " writes text for a trainer");
  if (!args.count("output")) throw_input_error("-o", "required (output file, or '-' for stdout)");
  const std::string output = args["output"].as<std::string>();
  if (output.empty()) throw_input_error("-o", "empty output path");
  if (target == HandoffTarget::kTorchtitan && !args.count("csv"))
    throw_input_error("--csv", "required with --format torchtitan (the schedule CSV the TOML loads)");
  if (target != HandoffTarget::kTorchtitan)
    refuse_flags(args, {"csv"}, "only --format torchtitan writes a schedule CSV");
  OutputFiles out("export");
  out.input(args["plan"].as<std::string>(), "--plan");
  out.output(output, "-o");
  const std::string csv_path = args.count("csv") ? args["csv"].as<std::string>() : "";
  if (!csv_path.empty()) out.output(csv_path, "--csv");
  out.check_json_flag(args.count("json") > 0);
  const Plan plan = load_checked_plan(args["plan"].as<std::string>());
  if (!plan.meshes.empty())
    throw_input_error("--format " + format,
                      "the plan runs on a heterogeneous cluster (a mesh per actor); the trainer "
                      "takes one tensor parallelism for every stage");
  const ScheduleInfo* info = find_schedule(plan.config.schedule);
  const std::string schedule = info ? info->name : plan.config.schedule;
  std::string text;
  switch (target) {
    case HandoffTarget::kMegatron: text = megatron_arguments(plan, schedule); break;
    case HandoffTarget::kTorchtitan:
      text = torchtitan_toml(plan, schedule, csv_path);
      out.set("--csv", schedule_to_csv(plan_schedule(plan)));
      break;
    case HandoffTarget::kJaxpp: text = jaxpp_snippet(plan, schedule); break;
  }
  out.set("-o", text);
  out.write_all();
  if (output == "-") return kExitOk;
  if (args.count("json")) {
    nlohmann::json summary = {{"output", output}, {"format", format}, {"bytes", text.size()},
                              {"schedule", schedule}};
    if (!csv_path.empty()) summary["csv"] = csv_path;
    std::cout << summary.dump(2) << "\n";
    return kExitOk;
  }
  for (const std::string& path : out.written_files()) std::cout << "wrote " << path << "\n";
  return kExitOk;
}

int run_export(int argc, char** argv) {
  cxxopts::Options options(
      "jaxpp-sim export",
      "Export a timeline of a trace or of a simulated plan.\n"
      "  jaxpp-sim export --trace trace.json --format perfetto -o trace.perfetto.json\n"
      "  jaxpp-sim export --plan plan.json --format svg -o timeline.svg\n"
      "  jaxpp-sim export --plan plan.json --format text -o -          (Gantt on stdout)\n"
      "  jaxpp-sim export --plan plan.json --view taskgraph --format svg -o graph.svg\n"
      "  jaxpp-sim export --plan plan.json --format megatron -o args.txt   (also torchtitan\n"
      "  with --csv schedule.csv, jaxpp; docs/export.md)\n"
      "Formats: perfetto, chrome (Chrome trace-event JSON), svg, png (Graphviz timeline),\n"
      "dot (its DOT text), text (Gantt chart), json (the trace itself).");
  // clang-format off
  options.add_options()
      ("trace", "trace JSON file (from simulate --trace or run)", cxxopts::value<std::string>())
      ("plan", "plan JSON file: simulated first (analytic cost model)", cxxopts::value<std::string>())
      ("format", "perfetto | chrome | svg | png | dot | text | json | megatron | torchtitan | jaxpp (default: from the -o extension; the last three: the plan for a trainer)", cxxopts::value<std::string>())
      ("csv", "--format torchtitan: write the schedule CSV the TOML loads to FILE", cxxopts::value<std::string>())
      ("o,output", "output file ('-' = stdout, text formats only)", cxxopts::value<std::string>())
      ("width", "text: columns (100); svg/png/dot: points (1000)", cxxopts::value<int>())
      ("per-stream", "one row per (actor, stream) instead of per actor")
      ("title", "picture title (svg/png/dot)", cxxopts::value<std::string>())
      ("view", "timeline | taskgraph (taskgraph needs --plan; dot, svg or png)", cxxopts::value<std::string>()->default_value("timeline"))
      ("json", "print a JSON summary of what was written")
      ("h,help", "show this help");
  // clang-format on
  const std::optional<cxxopts::ParseResult> parsed =
      parse_flags(options, argc, argv, "export");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  HandoffTarget target;
  if (args.count("format") && parse_handoff_target(args["format"].as<std::string>(), target))
    return run_handoff(args, target);
  refuse_flags(args, {"csv"}, "only --format torchtitan writes a schedule CSV");
  if (args.count("trace") == args.count("plan")) {
    throw_input_error("export", "give exactly one input: --trace FILE or --plan FILE");
  }
  if (!args.count("output")) throw_input_error("-o", "required (output file, or '-' for stdout)");
  const std::string output = args["output"].as<std::string>();
  if (output.empty()) throw_input_error("-o", "empty output path");
  const ExportFormat format = args.count("format")
                                  ? parse_export_format(args["format"].as<std::string>(), "--format")
                                  : export_format_from_path(output);
  if (output == "-" && is_binary(format)) {
    throw_input_error("-o", "cannot write " + std::string(to_string(format)) +
                                " to stdout; give a file name");
  }
  OutputFiles out("export");  // cli/report_output.h: never an input, "-" is stdout
  for (const char* flag : {"trace", "plan"})
    if (args.count(flag)) out.input(args[flag].as<std::string>(), std::string("--") + flag);
  out.output(output, "-o", is_binary(format));
  out.check_json_flag(args.count("json") > 0);
  const std::string view = args["view"].as<std::string>();
  if (view != "timeline" && view != "taskgraph") {
    throw_input_error("--view", "unknown view '" + view + "' (expected timeline or taskgraph)");
  }
  // Flags that would be ignored are refused (issue 16, class 5).
  const ExportOptions export_options = checked_export_options(
      format, view == "taskgraph",
      args.count("width") ? std::optional<int>(args["width"].as<int>()) : std::nullopt,
      args.count("per-stream") > 0,
      args.count("title") ? std::optional<std::string>(args["title"].as<std::string>())
                          : std::nullopt);

  // Input -> bytes, all in memory.
  std::string bytes;
  std::string source;
  size_t num_events = 0;
  if (view == "taskgraph") {
    if (!args.count("plan")) throw_input_error("--view taskgraph", "needs --plan FILE");
    const Plan plan = load_checked_plan(args["plan"].as<std::string>());
    bytes = export_plan_task_graph(plan, format);
    source = "plan task graph";
  } else {
    Trace trace;
    if (args.count("trace")) {
      const std::string path = args["trace"].as<std::string>();
      trace = load_trace(path);
      // A timeline of nothing drew a made-up 0 to 1 s axis; the JSON formats carry the (empty)
      // trace as it is.
      const bool picture = format == ExportFormat::kText || format == ExportFormat::kSvg ||
                           format == ExportFormat::kPng || format == ExportFormat::kDot;
      if (picture && trace.events.empty())
        throw_input_error(path, "the trace has no events: no timeline to draw");
    } else {
      const Plan plan = load_checked_plan(args["plan"].as<std::string>());
      PlanSimOptions sim_options;
      sim_options.record_trace = true;
      sim_options.check_memory = false;  // a timeline of a plan that does not fit is still useful
      trace = simulate_plan(plan, sim_options).result.trace;
    }
    bytes = export_trace(trace, format, export_options);
    source = trace.source;
    num_events = trace.events.size();
  }

  out.set("-o", bytes);
  out.write_all();
  if (output == "-") return kExitOk;
  if (args.count("json")) {
    nlohmann::json summary = {{"output", output},
                              {"format", std::string(to_string(format))},
                              {"view", view},
                              {"bytes", bytes.size()},
                              {"events", num_events},
                              {"source", source}};
    std::cout << summary.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "wrote " << output << " (" << to_string(format) << ", " << bytes.size()
            << " bytes";
  if (view == "timeline") std::cout << ", " << num_events << " events";
  std::cout << ")\n";
  return kExitOk;
}

const CommandRegistration kExportCommand{"export",
                               "Export a trace or simulated plan: Perfetto/Chrome JSON, SVG, PNG, "
                               "DOT, text Gantt",
                               run_export};

}  // namespace
}  // namespace jaxpp::cli
