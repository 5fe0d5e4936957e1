// jaxpp-sim demo: the README's main job. Each step is one function so that later steps (explore,
// simulate, run, compare) slot in after the graph steps.
#include <iostream>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "cli/graph_report.h"

namespace jaxpp::cli {
namespace {

constexpr const char* kDemoModel = "gpt3-13b";
constexpr int kDemoPp = 4;
constexpr int kDemoMicrobatches = 8;

void step_model(std::ostream& out, const GraphReport& r) {
  out << "== 1. model\n";
  print_model_summary(out, r.model);
}

void step_partition(std::ostream& out, const GraphReport& r) {
  out << "\n== 2. partition (automatic, minimises the largest stage's F+B FLOPs) and placement\n";
  print_stage_table(out, r);
}

void step_task_graph(std::ostream& out, const GraphReport& r) {
  out << "\n== 3. task graph of one iteration\n";
  print_task_counts(out, r);
}

int run_demo(int argc, char** argv) {
  cxxopts::Options options("jaxpp-sim demo", "The end-to-end demonstration on a default model");
  options.add_options()("json", "print JSON instead of tables")("h,help", "show this help");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::cout << options.help() << "\n";
    return kExitOk;
  }
  GraphRequest req;
  req.model = kDemoModel;
  req.pp = kDemoPp;
  req.num_microbatches = kDemoMicrobatches;
  const GraphReport report = build_graph_report(req);
  if (args.count("json")) {
    std::cout << nlohmann::json{{"graph", graph_report_json(report)}}.dump(2) << "\n";
    return kExitOk;
  }
  step_model(std::cout, report);
  step_partition(std::cout, report);
  step_task_graph(std::cout, report);
  return kExitOk;
}

const CommandRegistration kReg{"demo", "End-to-end demonstration on a default model", run_demo};

}  // namespace
}  // namespace jaxpp::cli
