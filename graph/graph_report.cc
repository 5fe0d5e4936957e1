#include "graph/graph_report.h"

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "graph/limits.h"
#include "graph/plan.h"

namespace jaxpp {
namespace {

std::vector<int> parse_starts(const std::string& text) {
  std::vector<int> starts;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int value = -1;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw_input_error("--partition", "entry '" + item +
                                           "' is not an integer (expected 'auto' or a list of "
                                           "stage start layers like 0,12,24)");
    starts.push_back(value);
  }
  if (!text.empty() && text.back() == ',')
    throw_input_error("--partition", "trailing ',' in '" + text + "'");
  return starts;
}

// 12.85B style counts (K, M, B = 1e9, T = 1e12).
std::string human(double value, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "B", "T", "P", "E"};
  int i = 0;
  while (value >= 1000 && i < 6) {
    value /= 1000;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f%s%s", value, prefixes[i], unit);
  return buf;
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string gflop(double flops) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", flops / 1e9);
  return buf;
}

std::map<std::string, int> count_tasks(const TaskGraph& g) {
  std::map<std::string, int> counts = {{"F", 0},        {"B", 0},        {"I", 0},
                                       {"W", 0},        {"transfer", 0}, {"grad_reduce", 0},
                                       {"optimizer", 0}};
  for (int id = 0; id < g.num_nodes(); ++id) {
    const TaskNode& n = g.node(id);
    if (n.kind == NodeKind::kCompute)
      ++counts[std::string(to_string(n.task.kind))];
    else
      ++counts[std::string(to_string(n.kind))];
  }
  return counts;
}

bool any_split(const GraphReport& r) {
  for (int s = 0; s < r.graph.num_stages(); ++s)
    if (r.graph.is_split(s)) return true;
  return false;
}

}  // namespace

void check_graph_sizes(int pp, int virtual_stages, int num_microbatches, int microbatch_size) {
  for (const auto& [flag, value] : {std::pair<const char*, int>{"--pp", pp},
                                    {"--virtual", virtual_stages},
                                    {"--microbatches", num_microbatches},
                                    {"--microbatch-size", microbatch_size}})
    if (value < 1) throw_input_error(flag, "expected at least 1, got " + std::to_string(value));
}

void set_graph_recompute_layers(GraphRequest& req, int layers) {
  // simulate's rule and messages (cli/cmd_simulate.cc, graph/plan.h check_recompute_layers).
  ParallelConfig c;
  c.recompute = req.recompute;
  c.recompute_layers = layers;
  if (c.recompute_layers < 0)
    throw_input_error("--recompute-layers",
                      "expected a number of layers >= 0, got " + std::to_string(c.recompute_layers));
  check_recompute_layers(c, "--recompute-layers");
  req.recompute_layers = c.recompute_layers;
}

void set_graph_recompute_modules(GraphRequest& req, const std::string& modules) {
  // simulate's parse and policy rule (cli/cmd_simulate.cc).
  ParallelConfig c;
  c.recompute = req.recompute;
  c.recompute_modules = recompute_modules_flag(modules, req.recompute, "--recompute-modules");
  check_recompute_modules(c, "--recompute-modules");
  req.recompute_modules = c.recompute_modules;
}

GraphReport build_graph_report(const GraphRequest& req) {
  check_graph_sizes(req.pp, req.virtual_stages, req.num_microbatches, req.microbatch_size);
  ParallelConfig recompute;  // simulate's rule for --recompute-layers
  recompute.recompute = req.recompute;
  recompute.recompute_layers = req.recompute_layers;
  check_recompute_layers(recompute, "--recompute-layers");
  ModelSpec model = req.model_spec ? *req.model_spec : load_model(req.model);
  // simulate's rules for --offload-layers and --recompute-modules
  check_graph_settings(model, req.pp, req.recompute, req.offload_layers, req.recompute_modules);
  const int stages =
      checked_int_product(req.pp, req.virtual_stages, kMaxStages, "--pp x --virtual");
  if (stages > model.num_layers())
    throw_input_error(req.virtual_stages > 1 ? "--pp x --virtual" : "--pp",
                      std::to_string(stages) + " stages (pp " + std::to_string(req.pp) +
                                  " x virtual " + std::to_string(req.virtual_stages) +
                                  ") but model '" + model.name + "' has only " +
                                  std::to_string(model.num_layers()) + " layers");
  Partition partition;
  if (req.partition == "auto") {
    // Errors name the flags that shaped the partition ("partition: stage 0 would get -38 layers"
    // named none).
    try {
      partition = auto_partition(model, {stages, req.first_stage_fewer, req.last_stage_fewer});
    } catch (const InputError& e) {
      if (req.first_stage_fewer == 0 && req.last_stage_fewer == 0) throw;
      throw_input_error(req.first_stage_fewer != 0 && req.last_stage_fewer != 0
                            ? "--first-stage-fewer / --last-stage-fewer"
                        : req.first_stage_fewer != 0 ? "--first-stage-fewer " +
                                                           std::to_string(req.first_stage_fewer)
                                                     : "--last-stage-fewer " +
                                                           std::to_string(req.last_stage_fewer),
                        e.what());
    }
  } else {
    const std::vector<int> starts = parse_starts(req.partition);
    if (static_cast<int>(starts.size()) != stages)
      throw_input_error("--partition", std::to_string(starts.size()) +
                                           " stage starts given but pp x virtual = " +
                                           std::to_string(stages) + " stages");
    try {
      partition = partition_from_starts(starts, model.num_layers());
    } catch (const InputError& e) {
      throw_input_error("--partition " + req.partition, e.what());
    }
  }
  PlacementKind kind = req.virtual_stages == 1 ? PlacementKind::kLinear : PlacementKind::kLoop;
  if (!req.placement.empty()) kind = parse_placement_kind(req.placement, "--placement");
  if (kind == PlacementKind::kExplicit)
    throw_input_error("--placement", "explicit placements are read from plan files, not flags");
  Placement placement = make_placement(kind, stages, req.pp);
  TaskGraphOptions options;
  options.num_microbatches = req.num_microbatches;
  options.microbatch_size = req.microbatch_size;
  options.recompute = req.recompute;
  options.recompute_layers = req.recompute_layers;
  options.recompute_modules = req.recompute_modules;
  options.offload_layers = req.offload_layers;
  if (req.split_backward) options.split_backward.assign(stages, true);
  TaskGraph graph = TaskGraph::build(model, partition, placement, options);
  return GraphReport{std::move(model), std::move(partition), std::move(placement),
                     std::move(graph)};
}

void print_model_summary(std::ostream& out, const ModelSpec& m) {
  out << "model " << m.name << ": " << m.num_layers() << " layers (" << m.num_transformer_layers
      << " transformer), " << human(static_cast<double>(m.total_params()), "") << " params";
  if (m.moe.enabled())
    out << " (" << human(static_cast<double>(m.active_params()), "") << " active per token)";
  if (m.mtp_modules > 0)
    out << " + " << human(static_cast<double>(m.mtp_params()), "") << " in " << m.mtp_modules
        << " MTP module(s)";
  out << ", " << to_string(m.dtype);
  if (m.hidden > 0)
    out << ", hidden " << m.hidden << ", heads " << m.heads << " (kv " << m.kv_heads << "), ffn "
        << m.ffn_hidden << (m.gated_mlp ? " swiglu" : " gelu") << ", seq " << m.seq_len
        << ", vocab " << m.vocab << (m.tied_embeddings ? ", tied" : ", untied");
  if (m.mla.enabled())
    out << ", MLA (q rank " << m.mla.q_lora_rank << ", kv rank " << m.mla.kv_lora_rank
        << ", qk " << m.mla.qk_nope_head_dim << "+" << m.mla.qk_rope_head_dim << ", v "
        << m.mla.v_head_dim << ")";
  if (m.moe.enabled()) {
    out << ", " << m.moe.experts << " experts (top " << m.moe.top_k << ", ffn "
        << m.moe.expert_ffn_hidden << ")";
    if (m.moe.shared_experts > 0)
      out << " + " << m.moe.shared_experts << " shared (ffn " << m.moe.shared_ffn_hidden << ")";
    if (m.moe.first_dense_layers > 0)
      out << ", first " << m.moe.first_dense_layers << " layers dense";
  }
  out << "\n";
}

void print_stage_table(std::ostream& out, const GraphReport& r) {
  const TaskGraphOptions& o = r.graph.options();
  out << "pp " << r.placement.num_actors << ", " << r.partition.num_stages()
      << " stages, placement " << to_string(r.placement.kind) << ", " << o.num_microbatches
      << " microbatches of " << o.microbatch_size << " sequence(s), recompute "
      << to_string(o.recompute);
  if (o.recompute_layers >= 0)
    out << " (first " << o.recompute_layers << " transformer layer(s) of each stage)";
  if (o.recompute_modules != 0)
    out << " (modules " << recompute_modules_to_string(o.recompute_modules) << ")";
  if (o.offload_layers > 0)
    out << ", offload " << o.offload_layers << " transformer layer(s) to host memory";
  out << "\n";
  // With split backwards the B column becomes I (incl. recompute) and W.
  const bool split = any_split(r);
  std::vector<std::string> header = {"stage", "actor", "layers", "params", "F GFLOP"};
  if (split) {
    header.insert(header.end(), {"I GFLOP", "W GFLOP"});
  } else {
    header.push_back("B GFLOP");
  }
  header.insert(header.end(), {"act MiB", "stash MiB"});
  if (o.offload_layers > 0) header.push_back("host MiB");
  std::vector<std::vector<std::string>> rows = {header};
  for (int s = 0; s < r.partition.num_stages(); ++s) {
    const StageWork& w = r.graph.stage_work()[s];
    std::string layers = "[";
    layers.append(std::to_string(w.first_layer)).append(", ");
    layers.append(std::to_string(w.first_layer + w.num_layers)).append(")");
    std::vector<std::string> row = {std::to_string(s), std::to_string(r.placement.actor_of(s)),
                                    layers, human(static_cast<double>(w.params), ""),
                                    gflop(w.fwd_flops)};
    if (split) {
      const bool stage_split = r.graph.is_split(s);
      row.push_back(
          gflop(w.bwd_input_flops + w.recompute_flops + (stage_split ? 0.0 : w.bwd_weight_flops)));
      row.push_back(stage_split ? gflop(w.bwd_weight_flops) : "-");
    } else {
      row.push_back(gflop(w.bwd_input_flops + w.bwd_weight_flops + w.recompute_flops));
    }
    row.insert(row.end(), {mib(w.output_bytes), mib(w.stash_bytes)});
    if (o.offload_layers > 0) row.push_back(mib(w.offloaded_stash_bytes));
    rows.push_back(std::move(row));
  }
  const std::vector<int> min_width = {5, 5, 11};  // then 10 for the numeric columns
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const size_t width = c < min_width.size() ? min_width[c] : 10;
      if (c > 0) line += ' ';
      if (row[c].size() < width) line.append(width - row[c].size(), ' ');
      line += row[c];
    }
    out << line << "\n";
  }
}

void print_task_counts(std::ostream& out, const GraphReport& r) {
  const auto c = count_tasks(r.graph);
  out << "tasks: " << r.graph.num_nodes() << " (F " << c.at("F");
  if (c.at("B") > 0) out << ", B " << c.at("B");
  if (c.at("I") > 0) out << ", I " << c.at("I") << ", W " << c.at("W");
  out << ", transfer " << c.at("transfer") << ", grad_reduce " << c.at("grad_reduce")
      << ", optimizer " << c.at("optimizer") << "), edges " << r.graph.num_edges() << "\n";
}

nlohmann::json graph_report_json(const GraphReport& r) {
  const TaskGraphOptions& o = r.graph.options();
  nlohmann::json stages = nlohmann::json::array();
  for (int s = 0; s < r.partition.num_stages(); ++s) {
    const StageWork& w = r.graph.stage_work()[s];
    stages.push_back({{"stage", s},
                      {"actor", r.placement.actor_of(s)},
                      {"layers", {w.first_layer, w.first_layer + w.num_layers}},
                      {"num_layers", w.num_layers},
                      {"params", w.params},
                      {"fwd_flops", w.fwd_flops},
                      {"bwd_flops", w.bwd_input_flops + w.bwd_weight_flops + w.recompute_flops},
                      {"bwd_input_flops", w.bwd_input_flops},
                      {"bwd_weight_flops", w.bwd_weight_flops},
                      {"recompute_flops", w.recompute_flops},
                      {"split_backward", r.graph.is_split(s)},
                      {"output_bytes", w.output_bytes},
                      {"stash_bytes", w.stash_bytes},
                      {"tp_allreduce_bytes", w.tp_allreduce_bytes}});
    if (o.offload_layers > 0) stages.back()["offloaded_stash_bytes"] = w.offloaded_stash_bytes;
  }
  const auto counts = count_tasks(r.graph);
  nlohmann::json j = {{"model", r.model.name},
          {"params", r.model.total_params()},
          {"active_params", r.model.active_params()},
          {"mtp_params", r.model.mtp_params()},
          {"num_layers", r.model.num_layers()},
          {"pp", r.placement.num_actors},
          {"num_stages", r.partition.num_stages()},
          {"placement", std::string(to_string(r.placement.kind))},
          {"microbatches", o.num_microbatches},
          {"microbatch_size", o.microbatch_size},
          {"recompute", std::string(to_string(o.recompute))},
          {"model_flops_per_iteration",
           r.model.model_flops_per_sequence() * o.microbatch_size * o.num_microbatches},
          {"partition", r.partition.stage_begin},
          {"stages", std::move(stages)},
          {"tasks", r.graph.num_nodes()},
          {"edges", r.graph.num_edges()},
          {"task_counts", counts}};
  if (o.recompute_layers >= 0) j["recompute_layers"] = o.recompute_layers;
  if (o.recompute_modules != 0)
    j["recompute_modules"] = recompute_modules_to_json(o.recompute_modules);
  if (o.offload_layers > 0) j["offload_layers"] = o.offload_layers;
  return j;
}

}  // namespace jaxpp
