#include "simulator/model_validation.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/range_check.h"
#include "schedules/registry.h"
#include "simulator/parallel_for.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

// The plan request of a row: its model (FP8 when the row is), its cluster preset or the
// override, its configuration and partition.
PlanRequest row_plan_request(const CorpusRow& row, const ModelValidationOptions& options) {
  PlanRequest req;
  req.model = row.model;
  if (row.fp8) req.model.dtype = Dtype::kFp8;
  req.cluster = options.cluster_override ? *options.cluster_override : cluster_preset(row.cluster);
  req.config = row.config;
  req.partition = row.auto_partition ? PartitionMode::kAuto : PartitionMode::kEven;
  return req;
}


size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Up to three ids of `corpus` nearest to `id` (edit distance, then corpus order).
std::string closest_ids(const Corpus& corpus, const std::string& id) {
  std::vector<std::pair<size_t, size_t>> by_distance;  // (distance, row index)
  for (size_t i = 0; i < corpus.rows.size(); ++i)
    by_distance.emplace_back(edit_distance(id, corpus.rows[i].id), i);
  std::stable_sort(by_distance.begin(), by_distance.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string list;
  for (size_t k = 0; k < by_distance.size() && k < 3; ++k)
    list += (list.empty() ? "" : ", ") + corpus.rows[by_distance[k].second].id;
  return list;
}

// The prediction expressed in the unit the source measured.
double in_measured_unit(const CorpusRow& row, const CorpusRowResult& r) {
  switch (row.measured_kind) {
    case MeasuredKind::kStepTime:
      return r.predicted_step_time_s;
    case MeasuredKind::kTokensPerSPerGpu:
      return double(row.config.global_batch) * row.seq_len /
             (r.predicted_step_time_s * row.config.gpus);
    case MeasuredKind::kTflopsPerGpu:
      return r.predicted_tflops_per_gpu;
    case MeasuredKind::kMfu:
      return r.predicted_mfu;
  }
  return 0;
}

void add(CorpusErrorSummary& s, const CorpusRowResult& r, double band) {
  ++s.rows;
  if (!r.ran()) {
    ++s.errors;
    return;
  }
  if (r.row->expected_failure) {
    ++s.expected_failures;
    return;
  }
  const double e = std::fabs(r.error);
  s.mean_abs_error = (s.mean_abs_error * s.scored + e) / (s.scored + 1);
  ++s.scored;
  if (e <= band) ++s.in_band;
  if (s.max_row.empty() || e > s.max_abs_error) {
    s.max_abs_error = e;
    s.max_row = r.row->id;
  }
}

nlohmann::json summary_to_json(const CorpusErrorSummary& s) {
  return {{"rows", s.rows},
          {"scored", s.scored},
          {"in_band", s.in_band},
          {"expected_failures", s.expected_failures},
          {"errors", s.errors},
          {"mean_abs_error", s.mean_abs_error},
          {"max_abs_error", s.max_abs_error},
          {"max_row", s.max_row.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.max_row)}};
}

}  // namespace

std::string_view to_string(CorpusRowStatus s) {
  switch (s) {
    case CorpusRowStatus::kPass:
      return "pass";
    case CorpusRowStatus::kFail:
      return "fail";
    case CorpusRowStatus::kExpectedFail:
      return "expected-fail";
    case CorpusRowStatus::kUnexpectedPass:
      return "unexpected-pass";
    case CorpusRowStatus::kError:
      return "error";
  }
  return "?";
}

CorpusRowResult validate_row(const CorpusRow& row, const ModelValidationOptions& options) {
  CorpusRowResult r;
  r.row = &row;
  r.measured_step_time_s = row.measured_step_time_s;
  try {
    const PlanRequest req = row_plan_request(row, options);
    r.cluster = req.cluster.name;
    const Plan plan = build_plan(req);
    PlanSimOptions so;
    so.record_trace = false;
    so.check_memory = false;
    const SimulatedPlan sim = simulate_plan(plan, so);
    const double step_s = sim.result.step_time_s;
    const double gpus = row.config.gpus;
    r.predicted_step_time_s = step_s;
    if (row.convention == FlopsConvention::kNone) {
      r.predicted_tflops_per_gpu = sim.metrics["tflops_per_gpu"].get<double>();
      r.predicted_mfu = sim.metrics["mfu"].get<double>();
    } else {
      r.predicted_tflops_per_gpu = row.convention_flops / step_s / gpus / 1e12;
      r.predicted_mfu = row.convention_flops / (step_s * gpus * row.peak_flops_per_s);
    }
    for (const ActorStats& a : sim.result.actors)
      r.peak_memory_bytes = std::max(r.peak_memory_bytes, a.peak_memory_bytes);
    r.device_memory_bytes = req.cluster.hbm_bytes;
    r.fits = r.peak_memory_bytes <= r.device_memory_bytes;
    if (row.config.offload_layers > 0) {
      // Activation offloading: simulate's host-memory check (plan_builder.cc, memory.h).
      const std::vector<int64_t> host =
          sim.metrics.at("host_offload_bytes").get<std::vector<int64_t>>();
      for (int64_t h : host) r.host_offload_bytes = std::max(r.host_offload_bytes, h);
      r.host_memory_bytes = req.cluster.host_memory_bytes_per_gpu;
      const std::string excess = host_memory_excess(host, req.cluster);
      if (!excess.empty()) {
        r.host_message = "does not fit in host memory: " + excess;
        r.fits = false;
      }
    }
    r.error = step_s / row.measured_step_time_s - 1;
    r.predicted_in_measured_unit = in_measured_unit(row, r);
    const bool in_band = std::fabs(r.error) <= options.band;
    if (row.expected_failure) {
      r.status = in_band ? CorpusRowStatus::kUnexpectedPass : CorpusRowStatus::kExpectedFail;
    } else {
      r.status = in_band ? CorpusRowStatus::kPass : CorpusRowStatus::kFail;
    }
  } catch (const InputError& e) {
    r.status = CorpusRowStatus::kError;
    r.message = e.what();
  }
  return r;
}

ModelValidationReport validate_corpus(const Corpus& corpus, const ModelValidationOptions& options) {
  ModelValidationReport report;
  report.corpus = corpus.path;
  report.band = options.band;
  if (options.cluster_override) report.cluster_override = options.cluster_override->name;
  // Rows in parallel, each result in its row's place (the same report for any thread count): the
  // built-in corpus's 193 rows took 60 s of one core under ASan, the other idle.
  const size_t n = corpus.rows.size();
  report.rows.resize(n);
  // validate_row keeps a row's InputError in its result; anything else is rethrown.
  parallel_for(n, options.threads,
               [&](size_t i) { report.rows[i] = validate_row(corpus.rows[i], options); });
  for (const CorpusRowResult& r : report.rows) {
    add(r.row->split == CorpusSplit::kFit ? report.fit : report.test, r, options.band);
    add(report.by_source[r.row->source], r, options.band);
    add(report.by_cluster[r.row->cluster], r, options.band);
  }
  return report;
}

void check_corpus_schedules(const Corpus& corpus) {
  for (const CorpusRow& row : corpus.rows) {
    if (find_schedule(row.config.schedule)) continue;
    std::string names;
    for (const ScheduleInfo& s : all_schedules()) names += (names.empty() ? "" : ", ") + s.name;
    throw_input_error(corpus.path + ": row '" + row.id + "': field 'schedule'",
                      "unknown schedule '" + row.config.schedule + "' (known: " + names + ")");
  }
}

void check_corpus_schedule_constraints(const Corpus& corpus) {
  for (const CorpusRow& row : corpus.rows) {
    const ParallelConfig& c = row.config;
    // As build_plan asks for the schedule (simulator/plan_builder.cc make_schedule).
    ScheduleParams params;
    params.num_actors = c.pp;
    params.num_stages = c.virtual_stages > 1 ? c.pp * c.virtual_stages : 0;
    params.num_microbatches = c.num_microbatches;
    try {
      (void)generate_schedule(c.schedule, params);
    } catch (const InputError& e) {
      throw_input_error(corpus.path + ": row '" + row.id + "': field 'schedule'",
                        std::string(e.what()) + " (the row's pp " + std::to_string(c.pp) +
                            ", virtual_stages " + std::to_string(c.virtual_stages) + ", " +
                            std::to_string(c.num_microbatches) + " microbatches)");
    }
  }
}

nlohmann::json validation_report_to_json(const ModelValidationReport& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (const CorpusRowResult& r : report.rows) {
    const CorpusRow& row = *r.row;
    const ParallelConfig& c = row.config;
    nlohmann::json j = {
        {"id", row.id},
        {"source", row.source},
        {"where", row.where},
        {"split", std::string(to_string(row.split))},
        {"gpu", row.cluster},
        {"cluster", r.cluster},
        {"model", row.model_name},
        {"moe", row.model.moe.enabled()},
        {"config",
         {{"gpus", c.gpus},
          {"tp", c.tp},
          {"pp", c.pp},
          {"dp", c.dp},
          {"cp", c.cp},
          {"virtual_stages", c.virtual_stages},
          {"microbatch_size", c.microbatch_size},
          {"global_batch", c.global_batch},
          {"num_microbatches", c.num_microbatches},
          {"seq_len", row.seq_len},
          {"schedule", c.schedule},
          {"recompute", std::string(to_string(c.recompute))},
          {"sequence_parallel", c.sequence_parallel},
          {"distributed_optimizer", c.zero1},
          {"shard_gradients", c.shard_gradients},
          {"shard_parameters", c.shard_parameters},
          {"attention", std::string(to_string(c.attention))},
          {"tp_comm_overlap", c.tp_comm_overlap},
          {"overlap_grad_reduce", c.overlap_grad_reduce},
          {"grad_dtype", std::string(to_string(c.grad_dtype))},
          {"optimizer_state", std::string(to_string(c.optimizer_state))},
          {"ep", c.ep},
          {"etp", c.expert_tp()},
          {"moe_overlap", std::string(to_string(c.moe_overlap))},
          {"moe_dispatcher", std::string(to_string(c.moe_dispatcher))},
          {"moe_routing", std::string(to_string(c.moe_routing))},
          {"fp8", row.fp8}}},
        {"measured", {{std::string(to_string(row.measured_kind)), row.measured_value}}},
        {"flops_convention", std::string(to_string(row.convention))},
        {"measured_step_time_s", r.measured_step_time_s},
        {"status", std::string(to_string(r.status))},
        {"expected_failure",
         row.expected_failure ? nlohmann::json(*row.expected_failure) : nlohmann::json(nullptr)}};
    // Written only where set, so rows without them keep their JSON.
    if (c.recompute_layers >= 0) j["config"]["recompute_layers"] = c.recompute_layers;
    if (c.recompute_modules != 0)
      j["config"]["recompute_modules"] = recompute_modules_to_json(c.recompute_modules);
    if (c.offload_layers > 0) j["config"]["offload_layers"] = c.offload_layers;
    if (r.ran()) {
      j["predicted_step_time_s"] = r.predicted_step_time_s;
      j["error"] = r.error;
      j["in_band"] = std::fabs(r.error) <= report.band;
      j["predicted"] = {{std::string(to_string(row.measured_kind)), r.predicted_in_measured_unit}};
      j["predicted_tflops_per_gpu"] = r.predicted_tflops_per_gpu;
      j["predicted_mfu"] = r.predicted_mfu;
      j["peak_memory_bytes"] = r.peak_memory_bytes;
      j["device_memory_bytes"] = r.device_memory_bytes;
      j["fits"] = r.fits;
      if (c.offload_layers > 0) {  // activation offloading: the host side of `fits`
        j["host_offload_bytes"] = r.host_offload_bytes;
        j["host_memory_bytes"] = r.host_memory_bytes;
        j["fits_host"] = r.host_message.empty();
        if (!r.host_message.empty()) j["host_message"] = r.host_message;
      }
    } else {
      j["message"] = r.message;
    }
    rows.push_back(std::move(j));
  }
  nlohmann::json by_source = nlohmann::json::object(), by_cluster = nlohmann::json::object();
  for (const auto& [k, s] : report.by_source) by_source[k] = summary_to_json(s);
  for (const auto& [k, s] : report.by_cluster) by_cluster[k] = summary_to_json(s);
  return {{"corpus", report.corpus},
          {"band", report.band},
          {"cluster_override", report.cluster_override.empty()
                                   ? nlohmann::json(nullptr)
                                   : nlohmann::json(report.cluster_override)},
          {"rows", std::move(rows)},
          {"summaries",
           {{"fit", summary_to_json(report.fit)},
            {"test", summary_to_json(report.test)},
            {"by_source", std::move(by_source)},
            {"by_cluster", std::move(by_cluster)}}}};
}

Corpus builtin_corpus_from_text(bool available, const char* text) {
  const char* name = "corpus.json (built in)";
  if (!available) {
    throw_input_error("--corpus",
                      "this binary was built without tests/validation/corpus.json; "
                      "give --corpus FILE");
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(name, std::string("malformed JSON (") + e.what() + ")");
  }
  return corpus_from_json(doc, name, "");
}

std::string rows_on_preset(const std::string& gpu) {
  try {
    return cluster_preset(gpu).name;
  } catch (const InputError&) {
    throw_input_error("--rows-on " + gpu, "expected a cluster preset name, the \"cluster\" of "
                                          "the rows to keep (one of: " +
                                              cluster_preset_list() + ")");
  }
}

Corpus select_corpus_rows(const Corpus& corpus, const std::string& gpu, const std::string& split,
                          const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    const bool known = std::any_of(corpus.rows.begin(), corpus.rows.end(),
                                   [&id](const CorpusRow& row) { return row.id == id; });
    if (!known)
      throw_input_error(corpus.path, "unknown row '" + id + "' (--row; closest: " +
                                         closest_ids(corpus, id) + ")");
  }
  Corpus out = corpus;
  out.rows.clear();
  for (const CorpusRow& row : corpus.rows) {
    if (!gpu.empty() && row.cluster != gpu) continue;
    if (split != "all" && to_string(row.split) != split) continue;
    if (!ids.empty() && std::find(ids.begin(), ids.end(), row.id) == ids.end()) continue;
    out.rows.push_back(row);
  }
  if (out.rows.empty()) {
    std::string selected;
    for (const std::string& id : ids) selected += (selected.empty() ? "" : ",") + id;
    throw_input_error(corpus.path, "no row selected (--rows-on " + (gpu.empty() ? "any" : gpu) +
                                       ", --split " + split +
                                       (ids.empty() ? "" : ", --row " + selected) + ")");
  }
  return out;
}

void check_validation_split(const std::string& split) {
  if (split != "fit" && split != "test" && split != "all")
    throw_input_error("--split", "expected fit, test or all, got '" + split + "'");
}

void check_validation_band(double band) {
  if (!(band > 0) || !std::isfinite(band)) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", band);
    throw_input_error("--band", std::string("expected a fraction > 0, got ") + text);
  }
}

double parse_validation_band(const std::string& text) {
  const double band = is_decimal_number(text) ? std::strtod(text.c_str(), nullptr) : 0;
  if (!(band > 0) || !std::isfinite(band))
    throw_input_error("--band", "expected a fraction > 0, got " + text);
  return band;
}

// ---- --explain. -----------------------------------------------------------------------------

namespace {

bool same_model(const ModelSpec& a, const ModelSpec& b) {
  return model_to_json(a) == model_to_json(b);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

nlohmann::json model_file_json(const ModelSpec& model) {
  if (model.hidden > 0 && model.num_transformer_layers > 0) {
    try {
      nlohmann::json shape = model_shape_to_json(model);
      if (same_model(model_from_json(shape, "model"), model)) return shape;
    } catch (const InputError&) {
      // not expressible in the transformer form: the explicit form below
    }
  }
  return model_to_json(model);
}

// --model (and --a2a-dtype) for the row's model: the preset or the row's model file when the
// simulated model is exactly it, else a model file the caller writes.
void add_model_args(const CorpusRow& row, const ExplainOptions& explain, RowExplanation& e) {
  std::vector<std::string>& args = e.simulate_args;
  std::vector<std::string> reasons;
  const std::string base = !row.model_file.empty() ? row.model_file
                           : row.model_inline      ? std::string()
                                                   : lower(row.model_name);
  if (base.empty()) {
    reasons.push_back("the row's model is inline (a JSON object in the corpus)");
  } else {
    ModelSpec m = load_model(base);
    if (same_model(m, e.model)) {
      args.insert(args.end(), {"--model", base});
      return;
    }
    if (!row.a2a_dtype.empty()) {
      ModelSpec with_a2a = m;
      set_alltoall_dtypes(with_a2a, row.a2a_dtype, "a2a_dtype");
      if (same_model(with_a2a, e.model)) {
        args.insert(args.end(), {"--model", base, "--a2a-dtype", row.a2a_dtype});
        return;
      }
      reasons.push_back("a2a_dtype " + row.a2a_dtype);
    }
    if (m.seq_len != e.model.seq_len)
      reasons.push_back("seq_len " + std::to_string(e.model.seq_len) + " (" + base + " has " +
                        std::to_string(m.seq_len) + "; simulate has no sequence-length flag)");
    if (e.model.dtype != m.dtype)
      reasons.push_back("dtype " + std::string(to_string(e.model.dtype)) +
                        (row.fp8 ? " (\"fp8\": true; simulate has no FP8 flag)" : ""));
    if (e.model.fp8_scaling != m.fp8_scaling)
      reasons.push_back("fp8_scaling " + std::string(to_string(e.model.fp8_scaling)));
    if (e.model.kernel_fusion != m.kernel_fusion)
      reasons.push_back("kernel_fusion " + std::string(to_string(e.model.kernel_fusion)) +
                        " (simulate has no kernel-fusion flag)");
    if (e.model.moe.expert_gemm != m.moe.expert_gemm)
      reasons.push_back("expert_gemm " + std::string(to_string(e.model.moe.expert_gemm)) +
                        " (simulate has no expert-GEMM flag)");
    if (reasons.empty()) reasons.push_back("the row's model differs from " + base);
  }
  e.model_json = model_file_json(e.model);
  const std::string name = explain_file_stem(row.id) + ".model.json";
  e.model_file = explain.model_dir.empty() ? name : explain.model_dir + "/" + name;
  args.insert(args.end(), {"--model", e.model_file});
  std::string why;
  for (const std::string& r : reasons) why += (why.empty() ? "" : ", ") + r;
  e.notes.push_back("--model " + e.model_file + ": the model simulated as a file, for " + why +
                    (explain.model_dir.empty() ? "; --plan-out DIR writes it as DIR/" + name
                                               : "; written by --plan-out"));
}

// The configuration's flags. Each field given is set back to its default in `rest`: a field left
// differing has no simulate flag, and the command is incomplete.
void add_config_args(const CorpusRow& row, const ExplainOptions& explain, bool fits,
                     RowExplanation& e) {
  std::vector<std::string>& args = e.simulate_args;
  const ParallelConfig& c = row.config;
  const ParallelConfig d;
  ParallelConfig rest = c;
  const auto flag = [&args](const char* name, const std::string& value) {
    args.push_back(std::string("--") + name);
    if (!value.empty()) args.push_back(value);
  };
  const auto number = [&flag](const char* name, int value) { flag(name, std::to_string(value)); };
  flag("cluster", explain.cluster_arg.empty() ? row.cluster : explain.cluster_arg);
  number("gpus", c.gpus);
  number("pp", c.pp);
  number("tp", c.tp);
  number("dp", c.dp);
  if (c.cp != d.cp) number("cp", c.cp);
  if (c.virtual_stages != d.virtual_stages) number("virtual", c.virtual_stages);
  number("global-batch", c.global_batch);
  number("microbatch-size", c.microbatch_size);
  flag("schedule", c.schedule);
  flag("partition", row.auto_partition ? "auto" : "even");
  if (c.recompute != d.recompute) flag("recompute", std::string(to_string(c.recompute)));
  if (c.recompute_layers != d.recompute_layers) number("recompute-layers", c.recompute_layers);
  if (c.recompute_modules != d.recompute_modules)
    flag("recompute-modules", recompute_modules_to_string(c.recompute_modules));
  if (c.offload_layers != d.offload_layers) number("offload-layers", c.offload_layers);
  if (c.sequence_parallel) flag("sequence-parallel", "");
  if (c.zero1) flag("zero1", "");
  if (c.shard_parameters)
    flag("shard-params", "");  // implies --shard-grads
  else if (c.shard_gradients)
    flag("shard-grads", "");
  if (c.overlap_grad_reduce) flag("overlap-grad-reduce", "");
  if (c.tp_comm_overlap) flag("tp-comm-overlap", "");
  if (c.grad_dtype != d.grad_dtype) flag("grad-dtype", std::string(to_string(c.grad_dtype)));
  if (c.optimizer_state != d.optimizer_state)
    flag("optimizer-state", std::string(to_string(c.optimizer_state)));
  if (c.attention != d.attention) flag("attention", std::string(to_string(c.attention)));
  if (c.ep != d.ep) number("ep", c.ep);
  if (c.etp != d.etp) number("etp", c.etp);
  if (c.moe_imbalance != d.moe_imbalance) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", c.moe_imbalance);
    flag("moe-imbalance", text);
  }
  if (c.moe_overlap != d.moe_overlap) flag("moe-overlap", std::string(to_string(c.moe_overlap)));
  if (c.moe_dispatcher != d.moe_dispatcher)
    flag("moe-dispatcher", std::string(to_string(c.moe_dispatcher)));
  if (c.moe_routing != d.moe_routing) flag("moe-routing", std::string(to_string(c.moe_routing)));
  if (c.moe_node_limit != d.moe_node_limit) number("moe-node-limit", c.moe_node_limit);
  if (c.moe_device_limit != d.moe_device_limit) number("moe-device-limit", c.moe_device_limit);
  if (!fits) flag("no-memory-check", "");  // validate-model scores rows that do not fit
  // Every field above, and num_microbatches (global_batch / (dp · microbatch_size) in both).
  for (int ParallelConfig::*f :
       {&ParallelConfig::gpus, &ParallelConfig::pp, &ParallelConfig::tp, &ParallelConfig::dp,
        &ParallelConfig::cp, &ParallelConfig::virtual_stages, &ParallelConfig::global_batch,
        &ParallelConfig::microbatch_size, &ParallelConfig::num_microbatches,
        &ParallelConfig::recompute_layers, &ParallelConfig::offload_layers, &ParallelConfig::ep,
        &ParallelConfig::etp,
        &ParallelConfig::moe_node_limit, &ParallelConfig::moe_device_limit})
    rest.*f = d.*f;
  for (bool ParallelConfig::*f :
       {&ParallelConfig::sequence_parallel, &ParallelConfig::zero1,
        &ParallelConfig::shard_gradients, &ParallelConfig::shard_parameters,
        &ParallelConfig::overlap_grad_reduce, &ParallelConfig::tp_comm_overlap})
    rest.*f = d.*f;
  rest.schedule = d.schedule;
  rest.recompute = d.recompute;
  rest.recompute_modules = d.recompute_modules;
  rest.grad_dtype = d.grad_dtype;
  rest.optimizer_state = d.optimizer_state;
  rest.attention = d.attention;
  rest.moe_imbalance = d.moe_imbalance;
  rest.moe_overlap = d.moe_overlap;
  rest.moe_dispatcher = d.moe_dispatcher;
  rest.moe_routing = d.moe_routing;
  if (rest == d) return;
  e.complete = false;
  const nlohmann::json given = config_to_json(rest), defaults = config_to_json(d);
  std::string fields;
  for (const auto& [key, value] : given.items())
    if (!defaults.contains(key) || defaults.at(key) != value)
      fields += (fields.empty() ? "" : ", ") + key;
  e.notes.push_back("the row sets configuration fields simulate has no flag for (" + fields +
                    "): the command does not reproduce the row");
}

// The peak-memory split of the actor with the highest peak (costmodel/memory.h's terms).
MemoryBreakdown memory_breakdown(const Plan& plan, const ClusterSpec& cluster,
                                 const SimResult& result) {
  MemoryBreakdown m;
  for (size_t r = 0; r < result.actors.size(); ++r)
    if (result.actors[r].peak_memory_bytes > result.actors[m.actor].peak_memory_bytes)
      m.actor = static_cast<int>(r);
  const MemoryModel mem =
      build_memory_model(plan.model, plan.partition, plan.placement, plan.config, cluster);
  const OperatorCost op(plan.model, plan.config, cluster);
  double transient = 0, gathered = 0;  // the per-actor maxima build_memory_model adds
  for (int s = 0; s < plan.partition.num_stages(); ++s) {
    if (plan.placement.actor_of(s) != m.actor) continue;
    const StageStaticBytes b =
        stage_static_bytes(op, plan.partition.begin(s), plan.partition.size(s));
    transient = std::max(transient, b.transient_grad_bytes);
    gathered = std::max(gathered, b.gathered_bytes);
  }
  const ActorMemory& a = mem.actors[static_cast<size_t>(m.actor)];
  m.transient_gradients = std::llround(transient);
  m.gathered_weights = std::llround(2 * gathered);  // the layer computed and the one prefetched
  m.weights = a.weight_bytes - m.gathered_weights;
  m.gradients = a.grad_bytes - m.transient_gradients;
  m.optimizer_state = a.optimizer_bytes;
  const ActorStats& stats = result.actors[static_cast<size_t>(m.actor)];
  m.peak = stats.peak_memory_bytes;
  // The loss transient is an activation (costmodel/memory.h), counted with the static bytes.
  m.activations = stats.peak_memory_bytes - stats.static_bytes + a.loss_transient_bytes;
  m.device = cluster.hbm_bytes;
  return m;
}

}  // namespace

RowExplanation explain_row(const CorpusRow& row, const ModelValidationOptions& options,
                           const ExplainOptions& explain) {
  RowExplanation e;
  e.row = &row;
  e.model = row.model;
  if (row.fp8) e.model.dtype = Dtype::kFp8;
  bool fits = true;
  try {
    const PlanRequest req = row_plan_request(row, options);
    e.plan = build_plan(req);
    PlanSimOptions so;
    so.record_trace = false;
    so.check_memory = false;
    so.breakdown = true;  // records the timeline to measure it; the step is the same
    const SimulatedPlan sim = simulate_plan(e.plan, so);
    e.step_time_s = sim.result.step_time_s;
    e.breakdown = sim.metrics.at("breakdown");
    e.memory = memory_breakdown(e.plan, req.cluster, sim.result);
    e.plan.predicted = sim.metrics;  // as simulate --breakdown --plan writes it
    fits = e.memory.peak <= e.memory.device;
    if (sim.metrics.contains("host_offload_bytes") &&
        !host_memory_excess(sim.metrics.at("host_offload_bytes").get<std::vector<int64_t>>(),
                            req.cluster)
             .empty())
      fits = false;  // simulate would refuse the host memory too
    e.ran = true;
  } catch (const InputError& err) {
    e.message = err.what();
  }
  e.simulate_args = {"simulate"};
  add_model_args(row, explain, e);
  add_config_args(row, explain, fits, e);
  e.simulate_args.push_back("--breakdown");
  return e;
}

std::string shell_command(const std::vector<std::string>& args) {
  std::string out = "jaxpp-sim";
  for (const std::string& a : args) {
    const bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](unsigned char ch) {
      return std::isalnum(ch) || std::string_view("@%_+=:,./-").find(static_cast<char>(ch)) !=
                                     std::string_view::npos;
    });
    if (plain) {
      out += " " + a;
      continue;
    }
    out += " '";
    for (const char ch : a) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    out += "'";
  }
  return out;
}

std::string explain_file_stem(const std::string& id) {
  std::string out = id;
  for (char& ch : out) {
    const auto c = static_cast<unsigned char>(ch);
    if (!std::isalnum(c) && ch != '.' && ch != '_' && ch != '-') ch = '_';
  }
  if (out.find_first_not_of('.') == std::string::npos) out = "_" + out;  // never "." or ".."
  return out;
}

nlohmann::json explanation_to_json(const RowExplanation& e) {
  nlohmann::json j = {
      {"simulate_command", shell_command(e.simulate_args)},
      {"simulate_args", e.simulate_args},
      {"complete", e.complete},
      {"model_file", e.model_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.model_file)},
      {"notes", e.notes}};
  if (!e.ran) {
    j["message"] = e.message;
    return j;
  }
  const MemoryBreakdown& m = e.memory;
  j["step_time_s"] = e.step_time_s;
  j["breakdown"] = e.breakdown;
  j["memory"] = {{"actor", m.actor},
                 {"weights_bytes", m.weights},
                 {"gathered_weights_bytes", m.gathered_weights},
                 {"gradients_bytes", m.gradients},
                 {"transient_gradients_bytes", m.transient_gradients},
                 {"optimizer_state_bytes", m.optimizer_state},
                 {"activations_bytes", m.activations},
                 {"peak_bytes", m.peak},
                 {"device_bytes", m.device}};
  return j;
}

}  // namespace jaxpp
