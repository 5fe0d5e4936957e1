// jaxpp-sim show: a schedule's per-actor order and its unit-cost timeline (docs/schedules.md).
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/report_output.h"
#include "graph/assignment.h"
#include "graph/error.h"
#include "graph/model.h"
#include "graph/json_util.h"
#include "schedules/assigned.h"
#include "schedules/custom.h"
#include "schedules/registry.h"
#include "schedules/shardy.h"
#include "schedules/summary.h"
#include "schedules/timeline.h"
#include "schedules/validate.h"

namespace jaxpp::cli {
namespace {

// Shardy's ParallelPipelinesWithWrapAround: forward-only orders, not a Schedule (shardy.h).
int show_wrap_around(const cxxopts::ParseResult& args) {
  refuse_flags(
      args,
      {"stages", "fuse-steady-state", "group-size", "no-timeline", "export-csv", "export-json",
       "assign", "model"},
      "not used with ParallelPipelinesWithWrapAround (forward only: one stage per hop, "
      "no timeline, no export)");
  if (!args.count("pp")) throw_input_error("--pp", "required (number of pipeline actors)");
  const int p = args["pp"].as<int>();
  const int m = args.count("microbatches") ? args["microbatches"].as<int>() : p;
  const ForwardOnlyOrders orders = make_parallel_pipelines_with_wrap_around(p, m);
  if (args.count("json")) {
    nlohmann::json actors = nlohmann::json::array();
    for (const auto& tasks : orders.actors) {
      nlohmann::json list = nlohmann::json::array();
      for (const TaskRef& t : tasks) list.push_back(to_string(t));
      actors.push_back(std::move(list));
    }
    const nlohmann::ordered_json summary = {{"schedule", kParallelPipelinesWithWrapAround},
                                            {"num_actors", orders.num_actors},
                                            {"num_microbatches", orders.num_microbatches},
                                            {"forward_only", true},
                                            {"actors", std::move(actors)}};
    std::cout << summary.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << kParallelPipelinesWithWrapAround << ": p=" << p << " actors, m=" << m
            << " microbatches, forward only; microbatch c enters at actor c and visits actors c, "
               "c+1, ... (mod p); F<c>@s<j> is its j-th hop\n\n";
  for (int r = 0; r < p; ++r) {
    std::cout << "actor" << r << ":";
    for (const TaskRef& t : orders.actors[r]) std::cout << " " << to_string(t);
    std::cout << "\n";
  }
  return kExitOk;
}

// "layer0-layer3" (or "logits") for each stage of an assignment.
std::vector<std::string> assignment_stage_layers(const ModelSpec& model, const Assignment& a) {
  std::vector<std::string> out;
  for (int st = 0; st < a.partition.num_stages(); ++st) {
    const std::string& first = model.layers[a.partition.begin(st)].name;
    const std::string& last = model.layers[a.partition.end(st) - 1].name;
    out.push_back(a.partition.size(st) == 1 ? first : first + "-" + last);
  }
  return out;
}

int run_show(int argc, char** argv) {
  cxxopts::Options options("jaxpp-sim show",
                           "Print a schedule's per-actor order (built-in or from a file) and "
                           "its timeline under unit costs F=1, B=2, I=W=1");
  // clang-format off
  options.add_options()
      ("schedule", "built-in schedule name (see jaxpp-sim schedules)", cxxopts::value<std::string>())
      ("schedule-file", "custom schedule file (JSON or PyTorch pipelining CSV)", cxxopts::value<std::string>())
      ("pp", "pipeline actors p", cxxopts::value<int>())
      ("microbatches", "microbatches m", cxxopts::value<int>())
      ("stages", "stages S (default p, or 2p for DualPipeV / ZB-V)", cxxopts::value<int>()->default_value("0"))
      ("fuse-steady-state", "Interleaved1F1B / KimiK2: fuse the steady (F, B) pairs")
      ("group-size", "MegatronInterleaved: microbatch group size g (default p)", cxxopts::value<int>()->default_value("0"))
      ("assign", "name-to-actor assignment JSON file (or a plan.json) giving the stages and their actors; needs --model", cxxopts::value<std::string>())
      ("model", "with --assign: the model whose layer names the assignment uses", cxxopts::value<std::string>())
      ("no-timeline", "do not print the unit-cost timeline")
      ("export-csv", "also write the schedule as PyTorch pipelining CSV to FILE", cxxopts::value<std::string>())
      ("export-json", "also write the schedule as JSON to FILE", cxxopts::value<std::string>())
      ("json", "print JSON instead of text")
      ("h,help", "show this help");
  // clang-format on
  const std::optional<cxxopts::ParseResult> parsed = parse_flags(options, argc, argv, "show");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  const bool from_file = args.count("schedule-file") > 0;
  if (from_file == (args.count("schedule") > 0)) {
    throw_input_error("show", "give exactly one of --schedule NAME or --schedule-file FILE");
  }

  // Outputs checked before any work (cli/report_output.h): never the schedule file, "-" is stdout
  // (the text report then goes to stderr).
  OutputFiles out("show");
  if (from_file) out.input(args["schedule-file"].as<std::string>(), "--schedule-file");
  for (const char* flag : {"assign", "model"})
    if (args.count(flag)) out.input(args[flag].as<std::string>(), std::string("--") + flag);
  for (const char* flag : {"export-csv", "export-json"})
    if (args.count(flag)) out.output(args[flag].as<std::string>(), std::string("--") + flag);
  out.check_json_flag(args.count("json") > 0);

  if (!from_file && is_wrap_around_name(args["schedule"].as<std::string>())) {
    return show_wrap_around(args);
  }

  if (!args.count("assign")) refuse_flags(args, {"model"}, "only used with --assign");
  std::optional<Assignment> assignment;
  std::vector<std::string> stage_layers;
  Schedule schedule;
  if (args.count("assign")) {
    refuse_flags(args, {"schedule-file", "stages", "group-size"},
                 "not used with --assign (the assignment gives the stages and their actors)");
    if (!args.count("model")) throw_input_error("--model", "required with --assign (the layer names)");
    if (!args.count("pp")) throw_input_error("--pp", "required (number of pipeline actors)");
    if (!args.count("microbatches")) throw_input_error("--microbatches", "required");
    const ModelSpec model = load_model(args["model"].as<std::string>());
    assignment = resolve_assignment(read_assignment_file(args["assign"].as<std::string>()), model,
                                    args["pp"].as<int>());
    schedule = schedule_on_placement(args["schedule"].as<std::string>(), assignment->placement,
                                     args["microbatches"].as<int>(),
                                     args.count("fuse-steady-state") > 0,
                                     assignment->spec.where());
    stage_layers = assignment_stage_layers(model, *assignment);
  } else if (from_file) {
    refuse_flags(args, {"pp", "microbatches", "stages", "fuse-steady-state", "group-size"},
                 "not used with --schedule-file (the file fixes the schedule)");
    schedule = load_schedule_file(args["schedule-file"].as<std::string>());
  } else {
    if (!args.count("pp")) throw_input_error("--pp", "required (number of pipeline actors)");
    if (!args.count("microbatches")) throw_input_error("--microbatches", "required");
    ScheduleParams params;
    params.num_actors = args["pp"].as<int>();
    params.num_microbatches = args["microbatches"].as<int>();
    params.num_stages = args["stages"].as<int>();
    params.fuse_steady_state = args.count("fuse-steady-state") > 0;
    params.group_size = args["group-size"].as<int>();
    schedule = generate_schedule(args["schedule"].as<std::string>(), params);
  }

  const ValidationReport report = validate_schedule(schedule);
  if (!report.ok()) {
    std::cerr << "jaxpp-sim show: " << schedule.name << " is not a valid schedule:\n";
    for (const std::string& e : report.errors) std::cerr << "  " << e << "\n";
    return kExitFailure;
  }
  if (args.count("export-csv")) out.set("--export-csv", schedule_to_csv(schedule));
  if (args.count("export-json")) out.set("--export-json", schedule_to_json_text(schedule));
  out.write_all();
  const Timeline timeline = unit_cost_timeline(schedule);

  if (args.count("json")) {
    nlohmann::ordered_json summary = schedule_summary_json(schedule, report, timeline.makespan);
    if (assignment)
      summary["assignment"] = {{"source", assignment->spec.source},
                               {"stage_layers", stage_layers},
                               {"stage_to_actor", assignment->placement.stage_to_actor}};
    std::cout << summary.dump(2) << "\n";
    return kExitOk;
  }

  std::ostream& text = out.report_stream();
  text << schedule.name << ": p=" << schedule.num_actors() << " actors, S=" << schedule.num_stages
       << " stages (" << to_string(schedule.placement.kind)
       << " placement), m=" << schedule.num_microbatches << " microbatches\n";
  if (assignment) {
    text << "assignment " << assignment->spec.source << ":";
    for (size_t st = 0; st < stage_layers.size(); ++st)
      text << " s" << st << "=" << stage_layers[st] << "@actor"
           << assignment->placement.stage_to_actor[st];
    text << "\n";
  }
  text << "\n";
  text << to_text(schedule);
  text << "\npeak in-flight activations per actor (stage-microbatches):";
  for (int v : report.peak_in_flight) text << " " << v;
  text << "\n";
  if (!args.count("no-timeline")) text << "\n" << timeline_to_text(schedule, timeline);
  for (const std::string& path : out.written_files()) text << "wrote " << path << "\n";
  return kExitOk;
}

const CommandRegistration kShowCommand{
    "show", "Print a schedule's per-actor order and unit-cost timeline", run_show};

}  // namespace
}  // namespace jaxpp::cli
