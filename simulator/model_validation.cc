#include "simulator/model_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "graph/error.h"
#include "schedules/registry.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

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
    PlanRequest req;
    req.model = row.model;
    if (row.fp8) req.model.dtype = Dtype::kFp8;
    req.cluster =
        options.cluster_override ? *options.cluster_override : cluster_preset(row.cluster);
    req.config = row.config;
    req.partition = row.auto_partition ? PartitionMode::kAuto : PartitionMode::kEven;
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
  for (const CorpusRow& row : corpus.rows) report.rows.push_back(validate_row(row, options));
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

Corpus select_corpus_rows(const Corpus& corpus, const std::string& gpu, const std::string& split) {
  Corpus out = corpus;
  out.rows.clear();
  for (const CorpusRow& row : corpus.rows) {
    if (!gpu.empty() && row.cluster != gpu) continue;
    if (split != "all" && to_string(row.split) != split) continue;
    out.rows.push_back(row);
  }
  if (out.rows.empty()) {
    throw_input_error(corpus.path, "no row selected (--rows-on " + (gpu.empty() ? "any" : gpu) +
                                       ", --split " + split + ")");
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

}  // namespace jaxpp
