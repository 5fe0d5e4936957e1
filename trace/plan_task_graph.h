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

// DOT text, or SVG / PNG bytes rendered by Graphviz's dot; InputError naming --view taskgraph for
// any other format.
std::string export_plan_task_graph(const Plan& plan, ExportFormat format);

}  // namespace jaxpp
