// Builds and reports the task graph of one pipeline configuration; shared by `jaxpp-sim graph`,
// `jaxpp-sim demo` and the Python module's graph().
//
// GraphRequest holds what the flags say (model name or file, pp, virtual stages, partition and
// placement choice, ...); build_graph_report() resolves it into a model, partition, placement and
// TaskGraph, throwing jaxpp::InputError with a one-line message for impossible requests (more
// stages than layers, a malformed --partition list, pp < 1, ...). The printers write the
// human-readable stage table or the JSON object documented in docs/graph.md.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/task_graph.h"

namespace jaxpp {

struct GraphRequest {
  std::string model = "gpt3-13b";       // a preset name, model JSON or HF config.json; or
  std::optional<ModelSpec> model_spec;  // the model itself (used when set)
  int pp = 4;
  int virtual_stages = 1;
  int num_microbatches = 8;
  int microbatch_size = 1;
  std::string partition = "auto";  // "auto" or stage starts "0,12,24"
  std::string placement;           // "" = linear for v = 1, loop otherwise
  bool split_backward = false;
  Recompute recompute = Recompute::kNone;
  // With recompute full: only the first N transformer layers of each stage are recomputed, the
  // others keep their activations (ParallelConfig::recompute_layers; -1 = every layer).
  int recompute_layers = -1;
  // With recompute selective: Megatron-Core's recompute modules (ParallelConfig::
  // recompute_modules, graph/plan.h RecomputeModule bits; 0 = core_attn); simulate's rules
  // (check_recompute_modules).
  uint32_t recompute_modules = 0;
  // Activation offloading (ParallelConfig::offload_layers): the model's first N transformer
  // layers keep their activations in host memory; simulate's rules (check_offload_layers).
  int offload_layers = 0;
  int first_stage_fewer = 0;
  int last_stage_fewer = 0;
};

struct GraphReport {
  ModelSpec model;
  Partition partition;
  Placement placement;
  TaskGraph graph;
};

GraphReport build_graph_report(const GraphRequest& request);
// graph's --recompute-layers N and --recompute-modules a,b (the CLI and Python graph()), with
// simulate's parse, rules and messages: set request.recompute first. InputError naming the flag.
// The model's own rules (check_graph_settings) are checked by build_graph_report.
void set_graph_recompute_layers(GraphRequest& request, int layers);
void set_graph_recompute_modules(GraphRequest& request, const std::string& modules);
// InputError naming the flag (--pp, --virtual, --microbatches, --microbatch-size) below 1;
// build_graph_report and graph's partition planner (simulator/graph_partition.h) both check so.
void check_graph_sizes(int pp, int virtual_stages, int num_microbatches, int microbatch_size);

// One line about the model: name, layers, parameters, shape.
void print_model_summary(std::ostream& out, const ModelSpec& model);
// The stage table (stage, actor, layers, params, GFLOPs per task kind, activation/stash bytes).
void print_stage_table(std::ostream& out, const GraphReport& report);
// Node counts by kind and the edge count.
void print_task_counts(std::ostream& out, const GraphReport& report);
nlohmann::json graph_report_json(const GraphReport& report);

}  // namespace jaxpp
