// jaxpp-sim explore: search the parallel configurations of a model on a cluster, simulate the
// feasible ones, print the ranking and the Pareto front, write the best plan (docs/explore.md).
// Under mpirun the space is split across the ranks and gathered on rank 0 (runtime/explore_mpi.h).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <cxxopts.hpp>

#include "cli/cluster_arg.h"
#include "cli/command.h"
#include "cli/explore_report.h"
#include "cli/flags.h"
#include "cli/report_output.h"
#include "costmodel/cluster.h"
#include "costmodel/hetero_cluster.h"
#include "graph/assignment.h"
#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/plan.h"
#include "runtime/explore_mpi.h"
#include "simulator/explore_summary.h"
#include "simulator/explore_synthesize.h"
#include "simulator/explorer.h"
#include "simulator/hetero_plan.h"
#include "simulator/what_if.h"

namespace jaxpp::cli {
namespace {

enum class OutputFormat { kTable, kJson, kCsv };

OutputFormat parse_format(const std::string& text) {
  if (text == "table") return OutputFormat::kTable;
  if (text == "json") return OutputFormat::kJson;
  if (text == "csv") return OutputFormat::kCsv;
  throw_input_error("--format", "expected table, json or csv, got '" + text + "'");
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

std::vector<int> parse_int_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : split_list(text)) {
    try {
      size_t pos = 0;
      const int v = std::stoi(item, &pos);
      if (pos != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw_input_error(flag,
                        "expected a comma-separated list of positive integers, got '" + text + "'");
    }
  }
  if (out.empty()) throw_input_error(flag, "expected at least one value");
  return out;
}

std::vector<bool> parse_off_on_both(const std::string& text, const std::string& flag) {
  if (text == "off") return {false};
  if (text == "on") return {true};
  if (text == "both") return {false, true};
  throw_input_error(flag, "expected off, on or both, got '" + text + "'");
}

std::vector<bool> parse_zero1(const std::string& text) { return parse_off_on_both(text, "--zero1"); }

// A one-line progress bar on stderr, redrawn at most ten times a second.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled), start_(Clock::now()) {}
  ~ProgressBar() { clear(); }

  void update(int64_t done, int64_t total) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "\rexplore [%s%s] %lld/%lld configurations, %.1f s\033[K",
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                 static_cast<long long>(done), static_cast<long long>(total), elapsed);
    std::fflush(stderr);
    drawn_ = true;
  }

  void clear() {
    if (!drawn_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point start_;
  Clock::time_point last_{};
};

// Evaluates this process's share of the space; on rank 0 returns every record, evaluated.
// Other ranks return std::nullopt after sending theirs.
std::optional<std::vector<ConfigRecord>> evaluate_space(ExploreRequest& req,
                                                        const ExploreMpiWorld& world) {
  if (req.bound_prune && world.distributed())
    throw_input_error("--bound-prune",
                      "needs a single process (its order spans the whole space), not " +
                          std::to_string(world.size) + " mpirun processes");
  std::vector<ConfigRecord> records = enumerate_configs(req);
  req.shard_index = world.rank;
  req.shard_count = world.size;
  std::vector<int64_t> pending;
  for (const ConfigRecord& r : records) {
    if (r.status == ConfigStatus::kPending) pending.push_back(r.id);
  }
  if (!world.distributed()) {
    evaluate_configs(req, records);
    return records;
  }
  try {
    evaluate_configs(req, records);
  } catch (const std::exception& e) {
    // The other ranks would wait for this one's records forever: end the job.
    explore_mpi_abort(
        "jaxpp-sim explore: error: rank " + std::to_string(world.rank) + ": " + e.what(),
        dynamic_cast<const InputError*>(&e) != nullptr ? kExitBadInput : kExitFailure);
  }
  nlohmann::json mine = nlohmann::json::array();
  for (int64_t id : pending) {
    if (records[id].status != ConfigStatus::kPending)
      mine.push_back(config_record_to_json(records[id]));
  }
  const std::vector<std::string> parts = explore_mpi_gather(mine.dump());
  if (world.rank != 0) return std::nullopt;
  for (size_t k = 0; k < parts.size(); ++k) {
    const std::string where = "explore: records of rank " + std::to_string(k);
    for (const nlohmann::json& j : nlohmann::json::parse(parts[k])) {
      ConfigRecord rec = config_record_from_json(j, where);
      if (rec.id < 0 || rec.id >= static_cast<int64_t>(records.size())) {
        throw_input_error(where, "configuration id " + std::to_string(rec.id) + " out of range");
      }
      records[rec.id] = std::move(rec);
    }
  }
  return records;
}

// explore on a heterogeneous cluster (simulator/hetero_plan.h explore_hetero): dp, a tp per
// kind, schedules, microbatch sizes, recompute and ZeRO-1, one stage per actor; every
// configuration partitioned balanced-time (the per-kind split) and even (the baseline).
int run_explore_hetero(const cxxopts::ParseResult& args, const HeteroCluster& cluster,
                       const ExploreMpiWorld& world, OutputFormat format) {
  refuse_flags(args, {"pp", "ep", "etp", "moe-dispatcher", "moe-routing", "cp", "assign", "virtual", "partition", "synthesize",
                      "synthesize-top", "synthesize-time-s", "robust", "robust-jitter",
                      "bound-prune", "csv", "explain", "threads", "shard-grads", "shard-params",
                      "offload-layers"},
               "is not supported by explore on a heterogeneous --cluster (it searches dp, a tp per "
               "device kind, --schedules, --microbatch-sizes, --recompute and --zero1 with one "
               "stage per actor, each partitioned balanced-time and even; docs/explore.md)");
  if (world.distributed())
    throw_input_error("--cluster", "explore on a heterogeneous cluster runs in one process, not "
                                   "under mpirun");
  if (format == OutputFormat::kCsv)
    throw_input_error("--format", "csv is not supported on a heterogeneous --cluster (use table or json)");
  if (!args.count("global-batch")) throw_input_error("--global-batch", "required (sequences per iteration)");
  if (args.count("gpus") && args["gpus"].as<int>() != cluster.total_gpus())
    throw_input_error("--gpus", std::to_string(args["gpus"].as<int>()) + " but cluster " +
                                    cluster.name + " has " + std::to_string(cluster.total_gpus()) +
                                    " GPUs");
  const int top = args["top"].as<int>();
  if (top < 0) throw_input_error("--top", "must be >= 0, got " + std::to_string(top));
  const std::string plan_path = args.count("plan") ? args["plan"].as<std::string>() : "";
  OutputFiles out("explore");
  for (const char* flag : {"model", "cluster"})
    if (args.count(flag)) out.input(args[flag].as<std::string>(), std::string("--") + flag);
  add_kind_files(out, cluster);
  if (args.count("plan")) out.output(plan_path, "--plan");
  if (out.to_stdout() && format != OutputFormat::kTable)
    throw_input_error("--format", "json prints to stdout, which is already an output ('-')");

  const ModelSpec model = load_model(args["model"].as<std::string>());
  HeteroExploreOptions o;
  o.base.global_batch = args["global-batch"].as<int>();
  o.base.sequence_parallel = args.count("sequence-parallel") > 0;
  o.base.attention = parse_attention_kernel(args["attention"].as<std::string>(), "--attention");
  o.base.tp_comm_overlap = args.count("tp-comm-overlap") > 0;
  o.base.overlap_grad_reduce = args.count("overlap-grad-reduce") > 0;
  if (args.count("max-memory-gib"))
    o.max_memory_bytes = max_memory_bytes_from_gib(args["max-memory-gib"].as<double>());
  o.schedules = args.count("schedules") ? split_list(args["schedules"].as<std::string>())
                                        : std::vector<std::string>{"1f1b", "zb-h1", "gpipe"};
  if (o.schedules.empty()) throw_input_error("--schedules", "expected at least one name");
  o.tps = args.count("tp") ? parse_int_list("--tp", args["tp"].as<std::string>())
                           : std::vector<int>{1, 2, 4, 8};
  o.microbatch_sizes =
      args.count("microbatch-sizes")
          ? parse_int_list("--microbatch-sizes", args["microbatch-sizes"].as<std::string>())
          : std::vector<int>{1, 2, 4, 8};
  if (args.count("recompute")) {
    const std::vector<std::string> items = split_list(args["recompute"].as<std::string>());
    if (items.empty()) throw_input_error("--recompute", "expected at least one policy");
    for (const std::string& item : items) {
      if (item.rfind("selective:", 0) == 0)
        throw_input_error("--recompute", "'" + item + "': recompute modules (selective:a+b) are "
                                         "not supported on a heterogeneous --cluster");
      if (item.find(':') != std::string::npos)
        throw_input_error("--recompute", "'" + item + "': partial recompute (full:N) is not "
                                         "supported on a heterogeneous --cluster (its plans "
                                         "recompute every layer or none)");
      o.recomputes.push_back(parse_recompute(item, "--recompute"));
    }
  } else {
    o.recomputes.assign(kDefaultExploreRecompute.begin(), kDefaultExploreRecompute.end());
  }
  for (bool z : parse_zero1(args["zero1"].as<std::string>())) o.zero1.push_back(z);

  const HeteroExploreResult res = explore_hetero(model, cluster, o);
  if (res.rows.empty()) {
    std::string reason = res.pruned.empty() ? "no configuration to try" : res.pruned.front();
    throw InputError("explore: no configuration of " + model.name + " fits cluster " +
                     cluster.name + " (" + std::to_string(res.configurations) +
                     " tried; the first: " + reason + ")");
  }
  const HeteroExploreRow& best = res.rows.front();
  if (!plan_path.empty()) {
    PlanRequest req;
    req.model = model;
    req.config = best.config;
    req.config.pp = 0;
    req.partition = PartitionMode::kExplicit;
    req.partition_starts = best.partition.stage_begin;
    Plan plan = build_hetero_plan(req, cluster, best.meshes);
    PlanSimOptions so;
    so.record_trace = false;
    so.max_memory_bytes = o.max_memory_bytes;
    plan.predicted = simulate_hetero_plan(plan, so).metrics;
    out.set("--plan", plan_to_text(plan, "--plan"));
  }
  out.write_all();
  const size_t shown = std::min<size_t>(static_cast<size_t>(top), res.rows.size());
  if (format == OutputFormat::kJson) {
    nlohmann::json j = {{"model", model.name},
                        {"cluster", cluster.name},
                        {"gpus", cluster.total_gpus()},
                        {"configurations", res.configurations},
                        {"feasible", res.rows.size()},
                        {"best", hetero_row_to_json(best)}};
    j["best_even"] = res.even_rows.empty() ? nlohmann::json() : hetero_row_to_json(res.even_rows.front());
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < shown; ++i) rows.push_back(hetero_row_to_json(res.rows[i]));
    j["top"] = rows;
    j["pruned"] = res.pruned;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::ostream& report = out.report_stream();
  report << "explore " << model.name << " on " << cluster.name << " (" << cluster.total_gpus()
         << " GPUs: " << cluster.kind_names() << "): " << res.rows.size() << " of "
         << res.configurations << " configurations fit\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %4s  %12s  %12s  %s\n", "rank", "step_ms", "even_ms",
                "configuration / layers per actor");
  report << line;
  const auto ms = [](double t) {
    char b[32];
    if (std::isfinite(t)) std::snprintf(b, sizeof b, "%.3f", t * 1e3);
    else std::snprintf(b, sizeof b, "%s", "no fit");
    return std::string(b);
  };
  for (size_t i = 0; i < shown; ++i) {
    const HeteroExploreRow& r = res.rows[i];
    std::string layers;
    for (int l : r.layers_per_actor) layers += (layers.empty() ? "" : ",") + std::to_string(l);
    std::snprintf(line, sizeof line, "  %4zu  %12s  %12s  %s / %s\n", i + 1,
                  ms(r.step_time_s).c_str(), ms(r.even_step_time_s).c_str(),
                  describe_hetero_config(r).c_str(), layers.c_str());
    report << line;
  }
  if (!res.even_rows.empty()) {
    const HeteroExploreRow& e = res.even_rows.front();
    report << "  best even partition: " << ms(e.even_step_time_s) << " ms ("
           << describe_hetero_config(e) << "); best heterogeneous split: "
           << ms(best.step_time_s) << " ms\n";
  } else {
    report << "  no even partition fits; best heterogeneous split: " << ms(best.step_time_s)
           << " ms\n";
  }
  for (const std::string& path : out.written_files()) report << "wrote " << path << "\n";
  return kExitOk;
}

int run_explore_on(int argc, char** argv, const ExploreMpiWorld& world) {
  cxxopts::Options options(
      "jaxpp-sim explore",
      "Search pipeline/tensor/context/data-parallel configurations of a model on a cluster,\n"
      "simulate the feasible ones and rank them (docs/explore.md).\n"
      "  jaxpp-sim explore --model M --cluster C --gpus N --global-batch B [--max-memory-gib G]\n"
      "                    [--schedules a,b,c] [--top N] [--json] [--plan FILE]\n"
      "Under mpirun -n K the space is split across the K processes; rank 0 prints.");
  // clang-format off
  options.add_options()
      ("model", "model preset, model JSON file or Hugging Face config.json", cxxopts::value<std::string>())
      ("cluster", "cluster preset (" + cluster_preset_list() + ") or JSON file", cxxopts::value<std::string>()->default_value("a100-80g"))
      ("gpus", "total GPUs", cxxopts::value<int>())
      ("global-batch", "sequences per iteration", cxxopts::value<int>())
      ("max-memory-gib", "memory limit per GPU in GiB (default: the cluster's HBM)", cxxopts::value<double>())
      ("schedules", "comma-separated schedule names (default: all, see jaxpp-sim schedules)", cxxopts::value<std::string>())
      ("pp", "pipeline actors to try, e.g. 4,8 (default: divisors of --gpus)", cxxopts::value<std::string>())
      ("tp", "tensor parallelism to try (default: 1,2,4,... up to GPUs per node)", cxxopts::value<std::string>())
      ("ep", "MoE: expert parallelism to try (default: 1 and every power of two dividing the routed experts)", cxxopts::value<std::string>())
      ("etp", "MoE: expert tensor parallelism to try (default: tp)", cxxopts::value<std::string>())
      ("a2a-dtype", "MoE: all-to-all payload type, D or DISPATCH,COMBINE (bf16, fp16, fp32, fp8; default: the model's, deepseek-v3 fp8,bf16)", cxxopts::value<std::string>())
      ("moe-dispatcher", "MoE: alltoall (a token copy per routed expert, Megatron-LM's alltoall dispatcher) | deepep (a copy per destination rank and per destination node, DeepEP / Megatron-LM flex) in every configuration", cxxopts::value<std::string>()->default_value("alltoall"))
      ("moe-routing", "MoE: random (balanced random routing) | contiguous (token t to experts t*k..t*k+k-1, a benchmark fake gate) in every configuration", cxxopts::value<std::string>()->default_value("random"))
      ("cp", "context parallelism to try (default: 1, or 1,2,4,... up to GPUs per node when seq_len >= 16384)", cxxopts::value<std::string>())
      ("microbatch-sizes", "microbatch sizes to try (default: 1,2,4,8)", cxxopts::value<std::string>())
      ("assign", "a fixed name-to-actor assignment JSON file (or plan.json): its stages and actors, with --pp its number of actors; every schedule that fits it is evaluated", cxxopts::value<std::string>())
      ("virtual", "stages per actor to try (default: 2,4,8 for loop schedules; linear schedules use 1, V schedules 2)", cxxopts::value<std::string>())
      ("recompute", "recompute policies to try: none,selective,full,op, full:N (full recompute of the first N transformer layers of each stage, Megatron-LM --recompute-method block --recompute-num-layers N) and selective:a+b (selective recompute of Megatron-Core's recompute modules a and b: core_attn, layernorm, mla_up_proj, moe_act; --recompute-modules a b) (default: none,selective,full)", cxxopts::value<std::string>())
      ("offload-layers", "activation offloading to try in the pp-1, recompute-none configurations (Megatron Core --cpu-offloading-num-layers N): numbers of layers and auto (the fewest that fit the memory limit), e.g. 0,8,auto; the other configurations offload nothing (default: 0)", cxxopts::value<std::string>())
      ("zero1", "ZeRO-1: off, on or both", cxxopts::value<std::string>()->default_value("both"))
      ("shard-grads", "gradient sharding (ZeRO-2) of the ZeRO-1 configurations: off, on or both (on and both need --zero1 on or both)", cxxopts::value<std::string>()->default_value("off"))
      ("shard-params", "parameter sharding (ZeRO-3 / FSDP, implies gradient sharding) of the ZeRO-1 configurations: off, on or both (on and both need --zero1 on or both)", cxxopts::value<std::string>()->default_value("off"))
      ("sequence-parallel", "Megatron sequence parallelism in every configuration")
      ("attention", "attention kernel in every configuration: flash, flash2 or unfused", cxxopts::value<std::string>()->default_value("flash"))
      ("tp-comm-overlap", "overlap TP communication with the GEMMs where tp > 1 (needs --sequence-parallel)")
      ("overlap-grad-reduce", "overlap gradient all-reduce with remaining backward work (in every configuration and the plan)")
      ("grad-dtype", "gradient buffer and data-parallel reduction dtype in every configuration: cluster | fp32 | bf16 | fp16", cxxopts::value<std::string>()->default_value("cluster"))
      ("optimizer-state", "Adam state in every configuration: cluster | fp32 (12 bytes per parameter) | remainders (10: 16-bit master remainders) | bf16 (4: bf16 m, v, no master) | bf16-moments (8: fp32 master, bf16 m, v)", cxxopts::value<std::string>()->default_value("cluster"))
      ("partition", "how each configuration is partitioned: auto (forward+backward FLOPs balanced), even (Megatron-LM's split) or balanced-time (least simulated step time under the memory limit; up to 4·S+16 simulations per configuration, docs/partition.md)", cxxopts::value<std::string>()->default_value("auto"))
      ("top", "rows of the ranked table and of the JSON 'top' list", cxxopts::value<int>()->default_value("10"))
      ("format", "stdout format: table, json or csv", cxxopts::value<std::string>()->default_value("table"))
      ("json", "print JSON (same as --format json)")
      ("csv", "write every simulated configuration as CSV to FILE", cxxopts::value<std::string>())
      ("plan", "write the best configuration's plan.json to FILE", cxxopts::value<std::string>())
      ("explain", "list every pruned configuration and why (JSON: 'pruned_configs')")
      ("synthesize", "also synthesize a schedule under the memory limit for the best configurations with one stage per actor (docs/synthesize.md)")
      ("synthesize-top", "with --synthesize: configurations to synthesize for, best first", cxxopts::value<int>()->default_value("10"))
      ("synthesize-time-s", "with --synthesize: search time per configuration, seconds", cxxopts::value<double>()->default_value("0.1"))
      ("robust", "also rank the --top best configurations by their 90th-percentile step time over N runs with jittered task times (seeds 1..N)", cxxopts::value<int>())
      ("robust-jitter", "with --robust: jitter of every task time, a fraction in [0, 1)", cxxopts::value<double>()->default_value("0.1"))
      ("threads", "worker threads (default, and 0: hardware concurrency)", cxxopts::value<int>())
      ("bound-prune", "branch and bound: skip or stop the simulations of configurations that can be neither in the top --top nor on the Pareto front (a lower bound on their step time); single process only")
      ("quiet", "no progress bar")
      ("h,help", "show this help");
  // clang-format on
  const std::optional<cxxopts::ParseResult> parsed =
      parse_flags(options, argc, argv, "explore", /*print_help=*/world.rank == 0);
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  auto require = [&](const char* flag, const char* what) {
    if (!args.count(flag)) throw_input_error(std::string("--") + flag, what);
  };
  require("model", "required (a model preset or JSON file)");
  OutputFormat early_format = parse_format(args["format"].as<std::string>());
  if (args.count("json")) early_format = OutputFormat::kJson;
  if (const std::optional<HeteroCluster> hetero =
          load_hetero_cluster_arg(args["cluster"].as<std::string>()))
    return run_explore_hetero(args, *hetero, world, early_format);
  require("gpus", "required (total GPUs)");
  require("global-batch", "required (sequences per iteration)");
  OutputFormat format = parse_format(args["format"].as<std::string>());
  if (args.count("json")) {
    if (args.count("format") && format != OutputFormat::kJson) {
      throw_input_error("--json", "conflicts with --format " + args["format"].as<std::string>());
    }
    format = OutputFormat::kJson;
  }
  if (!args.count("synthesize"))
    refuse_flags(args, {"synthesize-top", "synthesize-time-s"}, "needs --synthesize");
  ExploreSynthesisOptions synth_options;
  synth_options.top_groups =
      int_flag_in(args, "synthesize-top", 1, 10000, "a number of configurations");
  synth_options.time_budget_s =
      double_flag_in(args, "synthesize-time-s", 0, 600, "a search time in seconds");
  if (!args.count("robust")) refuse_flags(args, {"robust-jitter"}, "needs --robust");
  const int robust_runs =
      args.count("robust") ? int_flag_in(args, "robust", 1, 10000, "a number of runs") : 0;
  const double robust_jitter =
      double_flag_in(args, "robust-jitter", 0, 0.999, "a jitter fraction");
  const int top = args["top"].as<int>();
  if (top < 0) throw_input_error("--top", "must be >= 0, got " + std::to_string(top));
  // --robust reranks the --top best: with 0 it printed an empty table.
  if (robust_runs > 0 && top == 0)
    throw_input_error("--top 0", "--robust reranks the --top best configurations: give --top >= 1");
  const std::string plan_path = args.count("plan") ? args["plan"].as<std::string>() : "";
  const std::string csv_path = args.count("csv") ? args["csv"].as<std::string>() : "";
  // Outputs checked before any work and written together at the end (cli/report_output.h):
  // never the model or cluster file, "-" is stdout (the table then goes to stderr).
  OutputFiles out("explore");
  for (const char* flag : {"model", "cluster", "assign"})
    if (args.count(flag)) out.input(args[flag].as<std::string>(), std::string("--") + flag);
  if (args.count("plan")) out.output(plan_path, "--plan");
  if (args.count("csv")) out.output(csv_path, "--csv");
  if (out.to_stdout() && format != OutputFormat::kTable)
    throw_input_error("--format", "json and csv print to stdout, which is already an output ('-')");

  ExploreRequest req;
  req.model = load_model(args["model"].as<std::string>());
  if (args.count("a2a-dtype"))
    set_alltoall_dtypes(req.model, args["a2a-dtype"].as<std::string>(), "--a2a-dtype");
  req.cluster = load_cluster_arg(args["cluster"].as<std::string>());
  req.gpus = args["gpus"].as<int>();
  req.global_batch = args["global-batch"].as<int>();
  if (args.count("max-memory-gib")) {
    req.max_memory_bytes = max_memory_bytes_from_gib(args["max-memory-gib"].as<double>());
  }
  ExploreSpace& space = req.space;
  if (args.count("schedules")) {
    space.schedules = split_list(args["schedules"].as<std::string>());
    if (space.schedules.empty()) throw_input_error("--schedules", "expected at least one name");
  }
  if (args.count("pp")) space.pp = parse_int_list("--pp", args["pp"].as<std::string>());
  if (args.count("assign"))
    req.assignment = explore_assignment(read_assignment_file(args["assign"].as<std::string>()),
                                        req.model, space.pp, args.count("virtual") > 0,
                                        args.count("synthesize") > 0);
  if (args.count("tp")) space.tp = parse_int_list("--tp", args["tp"].as<std::string>());
  if (args.count("ep")) space.ep = parse_int_list("--ep", args["ep"].as<std::string>());
  if (args.count("etp")) space.etp = parse_int_list("--etp", args["etp"].as<std::string>());
  if (args.count("cp")) space.cp = parse_int_list("--cp", args["cp"].as<std::string>());
  if (args.count("microbatch-sizes")) {
    space.microbatch_sizes =
        parse_int_list("--microbatch-sizes", args["microbatch-sizes"].as<std::string>());
  }
  if (args.count("virtual")) {
    space.virtual_stages = parse_int_list("--virtual", args["virtual"].as<std::string>());
  }
  if (args.count("recompute")) {  // "" would silently mean the default space
    const std::vector<std::string> items = split_list(args["recompute"].as<std::string>());
    if (items.empty()) throw_input_error("--recompute", "expected at least one policy");
    for (const std::string& item : items) add_recompute_choice(item, space, "--recompute");
  }
  if (args.count("offload-layers")) {
    const std::vector<std::string> items = split_list(args["offload-layers"].as<std::string>());
    if (items.empty()) throw_input_error("--offload-layers", "expected at least one choice");
    for (const std::string& item : items) add_offload_choice(item, space, "--offload-layers");
  }
  space.zero1 = parse_zero1(args["zero1"].as<std::string>());
  space.sequence_parallel = args.count("sequence-parallel") > 0;
  space.attention = parse_attention_kernel(args["attention"].as<std::string>(), "--attention");
  space.tp_comm_overlap = args.count("tp-comm-overlap") > 0;
  req.overlap_grad_reduce = args.count("overlap-grad-reduce") > 0;
  space.shard_gradients = parse_off_on_both(args["shard-grads"].as<std::string>(), "--shard-grads");
  space.shard_parameters =
      parse_off_on_both(args["shard-params"].as<std::string>(), "--shard-params");
  req.grad_dtype = parse_grad_dtype(args["grad-dtype"].as<std::string>(), "--grad-dtype");
  req.moe_dispatcher =
      parse_moe_dispatcher(args["moe-dispatcher"].as<std::string>(), "--moe-dispatcher");
  req.moe_routing = parse_moe_routing(args["moe-routing"].as<std::string>(), "--moe-routing");
  req.optimizer_state =
      parse_optimizer_state(args["optimizer-state"].as<std::string>(), "--optimizer-state");
  req.bound_prune = args.count("bound-prune") > 0;
  {
    PlanRequest partition;
    parse_partition_flag(args["partition"].as<std::string>(), partition);
    req.partition = partition.partition;
  }
  req.bound_top = std::max(1, top);
  // 0 = hardware concurrency, as demo's --threads.
  if (args.count("threads"))
    req.threads = int_flag_in(args, "threads", 0, 4096, "a number of threads (0 = all cores)");

  ProgressBar bar(world.rank == 0 && !args.count("quiet") && isatty(STDERR_FILENO));
  req.progress = [&bar](int64_t done, int64_t total) { bar.update(done, total); };
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::vector<ConfigRecord>> records = evaluate_space(req, world);
  bar.clear();
  if (!records) return kExitOk;  // not rank 0: rank 0 reports
  ExploreResult res = finish_exploration(req, std::move(*records));
  ExploreSynthesis synthesis;
  if (args.count("synthesize")) synthesis = add_synthesized_configs(req, res, synth_options);
  std::vector<RobustEntry> robust;
  if (robust_runs > 0) robust = robust_ranking(req, res, robust_runs, robust_jitter, top, synthesis.plans);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const bool explain = args.count("explain") > 0;
  if (res.ranking.empty()) {  // nothing fits: an error, so no output file is written
    if (format == OutputFormat::kJson) {
      std::cout << explore_result_to_json(req, res, top, explain).dump(2) << "\n";
    }
    if (explain && format == OutputFormat::kTable) print_explore_explain(std::cout, res);
    throw InputError(explain_empty(res));
  }
  const ConfigRecord& best = res.records[res.ranking.front()];
  // The best of a space can still be a plan nobody should run: say so (issue 16, class 9).
  for (const std::string& w : explore_warnings(res))
    std::cerr << "jaxpp-sim explore: warning: " << w << "\n";
  if (!csv_path.empty()) out.set("--csv", explore_result_to_csv(res));
  if (!plan_path.empty()) {
    const Plan* synthesized = synthesized_plan(synthesis, best.id);
    out.set("--plan", plan_to_text(synthesized ? *synthesized : build_config_plan(req, best.config),
                                   "--plan"));
  }
  out.write_all();
  switch (format) {
    case OutputFormat::kJson: {
      ExploreExtras extras;
      if (args.count("synthesize")) extras.synthesis = &synthesis;
      if (robust_runs > 0) {
        extras.robust = &robust;
        extras.robust_runs = robust_runs;
        extras.robust_jitter = robust_jitter;
      }
      const nlohmann::json summary = explore_summary_json(req, res, top, explain, extras);
      std::cout << summary.dump(2) << "\n";
      return kExitOk;
    }
    case OutputFormat::kCsv:
      std::cout << explore_result_to_csv(res);
      return kExitOk;
    case OutputFormat::kTable:
      break;
  }
  std::ostream& text = out.report_stream();
  print_explore_table(text, req, res, top, wall_s);
  text << "\nbest: " << describe_config(best.config) << ": step time "
       << fmt("%.2f", best.step_time_s * 1e3) << " ms, peak memory "
       << fmt("%.2f", static_cast<double>(best.peak_memory_bytes) / kGiB) << " GiB\n";
  if (args.count("synthesize"))
    text << "synthesize: " << synthesis.considered << " configurations, " << synthesis.improved
         << " faster with a synthesized schedule (" << fmt("%.2f", synthesis.seconds) << " s)\n";
  if (robust_runs > 0) {
    text << "\nRobust ranking: p90 step time over " << robust_runs << " runs, task times jittered by "
         << fmt("%.0f", robust_jitter * 100) << " %:\n";
    text << "  rank     id  nominal_ms   p50_ms      p90_ms      configuration\n";
    for (size_t i = 0; i < robust.size(); ++i) {
      const RobustEntry& e = robust[i];
      text << fmt("  %4.0f", static_cast<double>(i + 1)) << fmt("  %5.0f", static_cast<double>(e.id))
           << fmt("  %-10.2f", e.nominal_step_time_s * 1e3) << fmt("  %-10.2f", e.p50_step_time_s * 1e3)
           << fmt("  %-10.2f", e.p90_step_time_s * 1e3) << "  "
           << describe_config(res.records[e.id].config) << "\n";
    }
  }
  if (explain) print_explore_explain(text, res);
  for (const std::string& path : out.written_files()) text << "wrote " << path << "\n";
  return kExitOk;
}

int run_explore(int argc, char** argv) {
  const ExploreMpiWorld world = explore_mpi_world();
  try {
    return run_explore_on(argc, argv, world);
  } catch (const std::exception&) {
    // Bad input is detected alike on every rank; let rank 0 alone report it.
    if (world.rank != 0) return kExitBadInput;
    throw;
  }
}

const CommandRegistration kExploreCommand{
    "explore", "Search parallel configurations, rank them, write the best plan", run_explore};

}  // namespace
}  // namespace jaxpp::cli
