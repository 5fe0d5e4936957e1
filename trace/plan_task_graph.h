// The task graph of a plan (`jaxpp-sim export --plan P --view taskgraph`, the Python module's
// export(plan, fmt, view="taskgraph")): the plan's model, partition and placement with the
// backward split exactly where the plan's program has I tasks, drawn as Graphviz DOT, SVG or PNG.
#pragma once

#include <string>

#include "graph/plan.h"
#include "graph/task_graph.h"
#include "trace/export.h"

namespace jaxpp {

TaskGraph plan_task_graph(const Plan& plan);

// The most tasks a task graph rendered to SVG or PNG may have: Graphviz's layout time grows faster
// than the graph (968 tasks: 0.7 s; 3,872: 26 s; 15,488 did not finish in a minute). DOT has no limit.
inline constexpr int kMaxRenderedTaskGraphNodes = 2048;

// DOT text, or SVG / PNG bytes rendered by Graphviz's dot; InputError naming --view taskgraph for
// any other format, or for SVG / PNG of a graph over kMaxRenderedTaskGraphNodes.
std::string export_plan_task_graph(const Plan& plan, ExportFormat format);

}  // namespace jaxpp
