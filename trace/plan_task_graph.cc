#include "trace/plan_task_graph.h"

#include "graph/error.h"
#include "trace/graphviz_render.h"

namespace jaxpp {

TaskGraph plan_task_graph(const Plan& plan) {
  TaskGraphOptions options;
  options.num_microbatches = plan.config.num_microbatches;
  options.microbatch_size = plan.config.microbatch_size;
  options.recompute = plan.config.recompute;
  options.recompute_layers = plan.config.recompute_layers;
  options.recompute_modules = plan.config.recompute_modules;
  options.split_backward.assign(plan.partition.num_stages(), false);
  for (const auto& actor : plan.program.actors) {
    for (const Instruction& ins : actor) {
      for (const TaskRef& t : ins.tasks) {
        if (t.kind == TaskKind::kI && t.stage >= 0 && t.stage < plan.partition.num_stages()) {
          options.split_backward[t.stage] = true;
        }
      }
    }
  }
  return TaskGraph::build(plan.model, plan.partition, plan.placement, options);
}

std::string export_plan_task_graph(const Plan& plan, ExportFormat format) {
  const TaskGraph graph = plan_task_graph(plan);
  const bool rendered = format == ExportFormat::kSvg || format == ExportFormat::kPng;
  if (rendered && graph.num_nodes() > kMaxRenderedTaskGraphNodes)
    throw_input_error(
        "--view taskgraph",
        "the plan's task graph has " + std::to_string(graph.num_nodes()) +
            " tasks; Graphviz lays out at most " + std::to_string(kMaxRenderedTaskGraphNodes) +
            " here (its layout time grows faster than the graph: 3,872 tasks took 26 s) -- write "
            "--format dot and render it with Graphviz, or export a plan with fewer microbatches");
  const std::string dot = graph.to_dot();
  switch (format) {
    case ExportFormat::kDot:
      return dot;
    case ExportFormat::kSvg:
      return render_dot(dot, "svg", "dot");
    case ExportFormat::kPng:
      return render_dot(dot, "png", "dot");
    default:
      throw_input_error("--view taskgraph", "supports --format dot, svg or png, not '" +
                                                std::string(to_string(format)) + "'");
  }
}

}  // namespace jaxpp
