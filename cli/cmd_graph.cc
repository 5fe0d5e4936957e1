// jaxpp-sim graph: a model's pipeline stages and task graph (see docs/graph.md).
#include <iostream>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "graph/graph_report.h"
#include "cli/report_output.h"
#include "graph/error.h"
#include "graph/json_util.h"

namespace jaxpp::cli {
namespace {

int run_graph(int argc, char** argv) {
  cxxopts::Options options("jaxpp-sim graph",
                           "Partition a model into pipeline stages, place them on actors and "
                           "summarise the task graph of one iteration");
  GraphRequest req;
  // clang-format off
  options.add_options()
      ("model", "model preset, model JSON file or Hugging Face config.json", cxxopts::value<std::string>())
      ("pp", "pipeline actors (ranks)", cxxopts::value<int>())
      ("virtual", "stages per actor (S = pp x virtual)", cxxopts::value<int>()->default_value("1"))
      ("microbatches", "microbatches per iteration", cxxopts::value<int>()->default_value("8"))
      ("microbatch-size", "sequences per microbatch", cxxopts::value<int>()->default_value("1"))
      ("partition", "auto, or the first layer of each stage: 0,12,24", cxxopts::value<std::string>()->default_value("auto"))
      ("first-stage-fewer", "auto partition: transformer layers fewer on the first stage", cxxopts::value<int>()->default_value("0"))
      ("last-stage-fewer", "auto partition: transformer layers fewer on the last stage", cxxopts::value<int>()->default_value("0"))
      ("placement", "linear | loop | v (default: linear, or loop when --virtual > 1)", cxxopts::value<std::string>()->default_value(""))
      ("split-backward", "split every backward into I and W tasks")
      ("recompute", "none | selective | full", cxxopts::value<std::string>()->default_value("none"))
      ("dot", "write the task graph as Graphviz DOT to FILE", cxxopts::value<std::string>())
      ("json", "print JSON instead of tables")
      ("h,help", "show this help");
  // clang-format on
  const std::optional<cxxopts::ParseResult> parsed =
      parse_flags(options, argc, argv, "graph");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("model")) throw_input_error("--model", "required (a preset name or a JSON file)");
  if (!args.count("pp")) throw_input_error("--pp", "required (number of pipeline actors)");
  if (args["partition"].as<std::string>() != "auto") {
    refuse_flags(args, {"first-stage-fewer", "last-stage-fewer"},
                 "shapes the auto partition, but --partition gives the stages' first layers");
  }
  req.model = args["model"].as<std::string>();
  req.pp = args["pp"].as<int>();
  req.virtual_stages = args["virtual"].as<int>();
  req.num_microbatches = args["microbatches"].as<int>();
  req.microbatch_size = args["microbatch-size"].as<int>();
  req.partition = args["partition"].as<std::string>();
  req.first_stage_fewer = args["first-stage-fewer"].as<int>();
  req.last_stage_fewer = args["last-stage-fewer"].as<int>();
  req.placement = args["placement"].as<std::string>();
  req.split_backward = args.count("split-backward") > 0;
  req.recompute = parse_recompute(args["recompute"].as<std::string>(), "--recompute");

  // The output is checked before any work (cli/report_output.h): never the model file, "-" is
  // stdout (the tables then go to stderr).
  OutputFiles out("graph");
  out.input(req.model, "--model");
  if (args.count("dot")) out.output(args["dot"].as<std::string>(), "--dot");
  out.check_json_flag(args.count("json") > 0);
  const GraphReport report = build_graph_report(req);
  if (args.count("dot")) out.set("--dot", report.graph.to_dot());
  out.write_all();
  if (args.count("json")) {
    std::cout << graph_report_json(report).dump(2) << "\n";
    return kExitOk;
  }
  std::ostream& text = out.report_stream();
  print_model_summary(text, report.model);
  print_stage_table(text, report);
  print_task_counts(text, report);
  for (const std::string& path : out.written_files()) text << "wrote " << path << "\n";
  return kExitOk;
}

const CommandRegistration kGraphCommand{"graph", "Summarise a model's pipeline stages and task graph",
                               run_graph};

}  // namespace
}  // namespace jaxpp::cli
