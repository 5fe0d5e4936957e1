// jaxpp-sim graph: a model's pipeline stages and task graph (see docs/graph.md).
// --partition even and balanced-time are resolved with the planner simulate uses
// (simulator/graph_partition.h), so that graph shows the layer ranges simulate would run.
#include <iostream>
#include <string>

#include <cxxopts.hpp>

#include "cli/cluster_arg.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "graph/graph_report.h"
#include "cli/report_output.h"
#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/plan.h"
#include "simulator/explorer.h"
#include "simulator/graph_partition.h"

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
      ("partition", "auto (FLOPs balanced) | even (Megatron-LM) | balanced-time (least simulated step time, as simulate; needs --schedule) | the first layer of each stage: 0,12,24", cxxopts::value<std::string>()->default_value("auto"))
      ("first-stage-fewer", "auto partition: transformer layers fewer on the first stage", cxxopts::value<int>()->default_value("0"))
      ("last-stage-fewer", "auto partition: transformer layers fewer on the last stage", cxxopts::value<int>()->default_value("0"))
      ("placement", "linear | loop | v (default: linear, or loop when --virtual > 1)", cxxopts::value<std::string>()->default_value(""))
      ("split-backward", "split every backward into I and W tasks")
      ("schedule", "balanced-time: the schedule the partition is searched for (its placement is used)", cxxopts::value<std::string>())
      ("cluster", "balanced-time: cluster preset or JSON file", cxxopts::value<std::string>()->default_value("a100-80g"))
      ("tp", "balanced-time: tensor parallelism", cxxopts::value<int>()->default_value("1"))
      ("dp", "balanced-time: data parallelism (global batch = microbatches x microbatch size x dp)", cxxopts::value<int>()->default_value("1"))
      ("cp", "balanced-time: context parallelism", cxxopts::value<int>()->default_value("1"))
      ("sequence-parallel", "balanced-time: Megatron sequence parallelism")
      ("zero1", "balanced-time: distributed optimizer (ZeRO-1)")
      ("shard-grads", "balanced-time: gradient sharding (ZeRO-2, needs --zero1)")
      ("shard-params", "balanced-time: parameter sharding (ZeRO-3 / FSDP, needs --zero1, implies --shard-grads)")
      ("max-memory-gib", "balanced-time: memory limit per GPU in GiB (default: the cluster's HBM)", cxxopts::value<double>())
      ("recompute", "none | selective | full | op", cxxopts::value<std::string>()->default_value("none"))
      ("recompute-layers", "with --recompute full: fully recompute only the first N transformer layers of each stage, the others keep their activations (Megatron-LM --recompute-method block --recompute-num-layers N; default: all)", cxxopts::value<int>())
      ("recompute-modules", "with --recompute selective: Megatron-Core's recompute modules, comma-separated (core_attn, layernorm, mla_up_proj, moe_act; default core_attn): the stash column drops what they free, the B column adds what they run again (as simulate --recompute-modules)", cxxopts::value<std::string>())
      ("offload-layers", "activation offloading: the first N transformer layers keep their activations in host memory; the stash column keeps the other layers and the two largest offloaded ones in flight, the host MiB column the offloaded stash (Megatron Core --cpu-offloading-num-layers N; needs pp 1 and recompute none)", cxxopts::value<int>())
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
  const std::string partition = args["partition"].as<std::string>();
  if (partition != "auto") {
    refuse_flags(args, {"first-stage-fewer", "last-stage-fewer"},
                 "shapes the auto partition, but --partition gives the stages' first layers");
  }
  const bool balanced_time = partition == "balanced-time";
  if (!balanced_time) {
    refuse_flags(args,
                 {"schedule", "cluster", "tp", "dp", "cp", "sequence-parallel", "zero1",
                  "shard-grads", "shard-params", "max-memory-gib"},
                 "prices the --partition balanced-time search, but --partition is " + partition);
  } else {
    if (!args.count("schedule"))
      throw_input_error("--schedule",
                        "required with --partition balanced-time (the schedule the partition "
                        "is searched for)");
    refuse_flags(args, {"placement"},
                 "with --partition balanced-time the schedule gives the placement");
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
  if (args.count("recompute-layers"))
    set_graph_recompute_layers(req, args["recompute-layers"].as<int>());
  // The model's rules are checked by build_graph_report (and below, before the partition planner
  // prices anything).
  if (args.count("recompute-modules"))
    set_graph_recompute_modules(req, args["recompute-modules"].as<std::string>());
  // Checked by build_graph_report with simulate's rules (check_offload_layers).
  if (args.count("offload-layers")) req.offload_layers = args["offload-layers"].as<int>();
  if (partition == "even" || balanced_time) {
    // The planner simulate runs (simulator/graph_partition.h).
    GraphPartitionRequest g;
    g.model = load_model(req.model);
    req.model_spec = g.model;
    // simulate's rules, before the planner prices anything
    check_graph_settings(g.model, req.pp, req.recompute, req.offload_layers, req.recompute_modules);
    g.partition = partition;
    g.pp = req.pp;
    g.virtual_stages = req.virtual_stages;
    g.num_microbatches = req.num_microbatches;
    g.microbatch_size = req.microbatch_size;
    g.recompute = req.recompute;
    g.recompute_layers = req.recompute_layers;
    g.offload_layers = req.offload_layers;
    g.recompute_modules = req.recompute_modules;
    if (balanced_time) {
      g.cluster = load_cluster_arg(args["cluster"].as<std::string>());
      g.schedule = args["schedule"].as<std::string>();
      g.tp = args["tp"].as<int>();
      g.dp = args["dp"].as<int>();
      g.cp = args["cp"].as<int>();
      g.sequence_parallel = args.count("sequence-parallel") > 0;
      g.zero1 = args.count("zero1") > 0;
      g.shard_parameters = args.count("shard-params") > 0;
      g.shard_gradients = args.count("shard-grads") > 0 || g.shard_parameters;
      if (args.count("max-memory-gib"))
        g.max_memory_bytes = max_memory_bytes_from_gib(args["max-memory-gib"].as<double>());
    }
    const GraphPartition resolved = resolve_graph_partition(g);
    req.partition = stage_starts_text(resolved.stage_begin);
    req.virtual_stages = resolved.virtual_stages;
    if (!resolved.placement.empty()) req.placement = resolved.placement;
  }

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
