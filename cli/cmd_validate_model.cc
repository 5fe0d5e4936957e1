// jaxpp-sim validate-model: scores the cost model against the validation corpus (published
// training runs; costmodel/corpus.h, simulator/model_validation.h, docs/validation.md). Prints a
// row table and the error summaries, or JSON; with --explain, per selected row the `simulate`
// command that reproduces its prediction, its step breakdown and its peak memory (--plan-out
// DIR: each row's plan.json and, where the command needs one, its model file). Exit 0 when it
// ran; 1 when a selected row not marked expected_failure was rejected by the simulator (one
// stderr line per row, after the report) or, with --strict, when a test row not marked
// expected_failure is out of band or rejected. A bad corpus or flag is one line, exit 2, and no
// output file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include "cli/builtin_corpus.h"
#include "cli/cluster_arg.h"
#include "cli/command.h"
#include "cli/explore_report.h"
#include "cli/flags.h"
#include "cli/report_output.h"
#include "costmodel/cluster.h"
#include "costmodel/corpus.h"
#include "costmodel/gemm_corpus.h"
#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/plan.h"
#include "simulator/model_validation.h"

namespace jaxpp::cli {
namespace {

std::string format(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

std::string config_summary(const CorpusRow& row) {
  const ParallelConfig& c = row.config;
  std::string s =
      "tp" + std::to_string(c.tp) + " pp" + std::to_string(c.pp) + " dp" + std::to_string(c.dp);
  if (c.cp > 1) s += " cp" + std::to_string(c.cp);
  if (c.virtual_stages > 1) s += " v" + std::to_string(c.virtual_stages);
  s += " mb" + std::to_string(c.microbatch_size) + " gb" + std::to_string(c.global_batch) + " s" +
       std::to_string(row.seq_len) + " " + c.schedule;
  if (c.recompute != Recompute::kNone) s += " rc:" + std::string(to_string(c.recompute));
  if (c.recompute_layers >= 0) s += "/" + std::to_string(c.recompute_layers);
  if (c.recompute_modules != 0) s += "/" + recompute_modules_to_string(c.recompute_modules, "+");
  if (c.offload_layers > 0) s += " offload:" + std::to_string(c.offload_layers);
  if (c.sequence_parallel) s += " sp";
  if (c.zero1) s += " dopt";
  if (c.shard_parameters)
    s += " sparam";
  else if (c.shard_gradients)
    s += " sgrad";
  if (c.grad_dtype != GradDtype::kCluster) s += " grad:" + std::string(to_string(c.grad_dtype));
  if (c.optimizer_state != OptimizerState::kCluster)
    s += " opt:" + std::string(to_string(c.optimizer_state));
  if (c.attention != AttentionKernel::kFlash) s += " " + std::string(to_string(c.attention));
  if (row.fp8) s += row.model.fp8_scaling == Fp8Scaling::kMxfp8 ? " mxfp8" : " fp8";
  return s;
}

// A value in the unit the source measured, with that unit.
std::string in_unit(MeasuredKind kind, double v) {
  switch (kind) {
    case MeasuredKind::kTflopsPerGpu:
      return format("%.1f TF/s", v);
    case MeasuredKind::kMfu:
      return format("%.1f%% MFU", v * 100);
    case MeasuredKind::kStepTime:
      return format("%.3f s", v);
    case MeasuredKind::kTokensPerSPerGpu:
      return format("%.0f tok/s", v);
  }
  return "?";
}

// A band as a percentage; one too wide for that (above 1e306, whose percentage overflows) as the
// fraction itself.
std::string band_text(double band) {
  return std::isfinite(band * 100) ? format("%g", band * 100) + "%" : format("%g (fraction)", band);
}

std::string summary_line(const CorpusErrorSummary& s, double band) {
  std::string line = std::to_string(s.rows) + " rows, " + std::to_string(s.scored) + " scored, " +
                     std::to_string(s.in_band) + " within ±" + band_text(band);
  if (s.scored > 0) {
    line += ", mean |error| " + format("%.1f%%", s.mean_abs_error * 100) + ", max " +
            format("%.1f%%", s.max_abs_error * 100) + " (" + s.max_row + ")";
  }
  if (s.expected_failures > 0)
    line += ", " + std::to_string(s.expected_failures) + " expected failures";
  if (s.errors > 0) line += ", " + std::to_string(s.errors) + " errors";
  return line;
}

void print_table(std::ostream& out, const ModelValidationReport& report) {
  size_t id_w = 2, cfg_w = 6;
  for (const CorpusRowResult& r : report.rows) {
    id_w = std::max(id_w, r.row->id.size());
    cfg_w = std::max(cfg_w, config_summary(*r.row).size());
  }
  char line[1024];
  std::snprintf(line, sizeof line, "%-*s  %-5s  %-9s  %-*s  %14s  %14s  %8s  %8s  %7s  %-15s  %s\n",
                int(id_w), "id", "split", "gpu", int(cfg_w), "config", "measured", "predicted",
                "meas_s", "pred_s", "error", "memory GiB", "status");
  out << line;
  for (const CorpusRowResult& r : report.rows) {
    const CorpusRow& row = *r.row;
    const std::string measured = in_unit(row.measured_kind, row.measured_value);
    std::string predicted = "-", pred_s = "-", error = "-", memory = "-";
    if (r.ran()) {
      predicted = in_unit(row.measured_kind, r.predicted_in_measured_unit);
      pred_s = format("%.3f", r.predicted_step_time_s);
      error = format("%+.1f%%", r.error * 100);
      const bool device_fits = r.peak_memory_bytes <= r.device_memory_bytes;
      memory = format("%.1f", r.peak_memory_bytes / kGiB) + "/" +
               format("%.0f", r.device_memory_bytes / kGiB) + (device_fits ? "" : " OOM") +
               (r.host_message.empty() ? "" : " host OOM");
    }
    std::snprintf(line, sizeof line,
                  "%-*s  %-5s  %-9s  %-*s  %14s  %14s  %8.3f  %8s  %7s  %-15s  %s\n", int(id_w),
                  row.id.c_str(), std::string(to_string(row.split)).c_str(), row.cluster.c_str(),
                  int(cfg_w), config_summary(row).c_str(), measured.c_str(), predicted.c_str(),
                  r.measured_step_time_s, pred_s.c_str(), error.c_str(), memory.c_str(),
                  std::string(to_string(r.status)).c_str());
    out << line;
  }
  for (const CorpusRowResult& r : report.rows) {
    if (!r.ran()) out << "error in row '" << r.row->id << "': " << r.message << "\n";
  }
  for (const CorpusRowResult& r : report.rows) {  // predicted, but simulate would refuse it
    if (r.ran() && !r.host_message.empty())
      out << "row '" << r.row->id << "' " << r.host_message << "\n";
  }
  out << "\nerror = predicted / measured step time - 1 (positive: predicted slower)";
  if (!report.cluster_override.empty())
    out << "; cluster " << report.cluster_override << " for every row";
  out << "\n";
  out << "fit:  " << summary_line(report.fit, report.band) << "\n";
  out << "test: " << summary_line(report.test, report.band) << "\n";
  out << "by source:\n";
  for (const auto& [name, s] : report.by_source)
    out << "  " << name << ": " << summary_line(s, report.band) << "\n";
  out << "by gpu:\n";
  for (const auto& [name, s] : report.by_cluster)
    out << "  " << name << ": " << summary_line(s, report.band) << "\n";
}

// --strict: a test row, not marked expected_failure, out of band or rejected.
bool strict_failure(const ModelValidationReport& report) {
  for (const CorpusRowResult& r : report.rows) {
    if (r.row->split != CorpusSplit::kTest) continue;
    if (r.status == CorpusRowStatus::kFail ||
        (r.status == CorpusRowStatus::kError && !r.row->expected_failure))
      return true;
  }
  return false;
}

// --row given several times: one --row with the values joined by commas (parse_flags refuses a
// flag given twice; --row is the one validate-model flag that may repeat).
std::vector<std::string> join_row_flags(int argc, char** argv) {
  std::vector<std::string> args, rows;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (i > 0 && a == "--row" && i + 1 < argc) {
      rows.push_back(argv[++i]);
    } else if (i > 0 && a.rfind("--row=", 0) == 0) {
      rows.push_back(a.substr(6));
    } else {
      args.push_back(a);
    }
  }
  if (!rows.empty()) {
    std::string joined;
    for (const std::string& r : rows) joined += (joined.empty() ? "" : ",") + r;
    args.push_back("--row");
    args.push_back(joined);
  }
  return args;
}

// The row ids of --row: comma-separated, none empty.
std::vector<std::string> row_ids(const cxxopts::ParseResult& args) {
  if (!args.count("row")) return {};
  const std::string text = args["row"].as<std::string>();
  std::vector<std::string> ids;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    ids.push_back(text.substr(start, comma == std::string::npos ? comma : comma - start));
    if (ids.back().empty())
      throw_input_error("--row", "expected row ids (repeat --row or separate them by commas), "
                                 "got '" + text + "'");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

std::string gib(int64_t bytes) { return format("%.2f", static_cast<double>(bytes) / kGiB); }

// The explanation of one row, after the table: the simulate command, the step breakdown per actor
// (simulate --breakdown's categories, ms and % of the step) and the worst actor's peak memory.
void print_explanation(std::ostream& out, const CorpusRowResult& r, const RowExplanation& e) {
  const CorpusRow& row = *r.row;
  out << "\nexplain " << row.id << " (" << to_string(row.split) << ", " << r.cluster;
  if (r.ran())
    out << ": predicted " << format("%.3f", r.predicted_step_time_s) << " s, measured "
        << format("%.3f", r.measured_step_time_s) << " s, error "
        << format("%+.1f%%", r.error * 100);
  out << ")\n";
  out << "  " << (e.complete ? "reproduce" : "INCOMPLETE, does not reproduce the row")
      << ": " << shell_command(e.simulate_args) << "\n";
  for (const std::string& note : e.notes) out << "  note: " << note << "\n";
  if (!e.ran) {
    out << "  rejected by the simulator: " << e.message << "\n";
    return;
  }
  const double step = e.step_time_s;
  out << "  step breakdown (ms and % of the " << format("%.3f", step * 1e3)
      << " ms step, per actor, as simulate --breakdown):\n";
  static const std::vector<std::pair<const char*, const char*>> kColumns = {
      {"gemm_s", "gemm"},           {"attention_s", "attention"},  {"elementwise_s", "elementw."},
      {"tp_comm_s", "tp_exp."},     {"cp_comm_s", "cp_exp."},      {"ep_comm_s", "ep_exp."},
      {"p2p_exposed_s", "p2p_exp."}, {"dp_exposed_s", "dp_exp."},  {"optimizer_s", "optimizer"},
      {"other_s", "other"},         {"bubble_s", "bubble"}};
  char cell[64];
  std::string line = "    actor";
  for (const auto& column : kColumns) {
    std::snprintf(cell, sizeof cell, "  %15s", column.second);
    line += cell;
  }
  out << line << "\n";
  for (const nlohmann::json& a : e.breakdown) {
    std::snprintf(cell, sizeof cell, "    %5d", a.at("actor").get<int>());
    line = cell;
    for (const auto& column : kColumns) {
      const double v = a.at(column.first).get<double>();
      std::snprintf(cell, sizeof cell, "  %8.2f %5.1f%%", v * 1e3, step > 0 ? v / step * 100 : 0);
      line += cell;
    }
    out << line << "\n";
  }
  const MemoryBreakdown& m = e.memory;
  out << "  peak memory of actor " << m.actor << ": " << gib(m.peak) << " GiB of "
      << gib(m.device) << " GiB (" << format("%.1f%%", 100.0 * m.peak / m.device)
      << (m.peak > m.device ? ", does not fit" : "") << "), in GiB: weights " << gib(m.weights)
      << ", gradients " << gib(m.gradients) << ", optimizer state " << gib(m.optimizer_state)
      << ", gathered weights " << gib(m.gathered_weights) << ", activations in flight "
      << gib(m.activations) << ", transient gradients " << gib(m.transient_gradients) << "\n";
}

// The outputs, checked before any work (cli/report_output.h): --out is never one of the input
// files, "-" is stdout (the table then goes to stderr).
OutputFiles checked_outputs(const cxxopts::ParseResult& args) {
  OutputFiles out("validate-model");
  for (const char* flag : {"corpus", "gemms", "cluster"})
    if (args.count(flag)) out.input(args[flag].as<std::string>(), std::string("--") + flag);
  if (args.count("out")) out.output(args["out"].as<std::string>(), "--out");
  out.check_json_flag(args.count("json") > 0);
  return out;
}

// --gemms FILE: the GEMM model against measured kernels (costmodel/gemm_corpus.h).
// --band counts the GEMMs within it (after the common scale); --strict is refused: the GEMM file
// marks no expected failures and its errors are relative to a scale fitted on the same rows, so
// there is no pass rule to enforce.
int run_gemm_validation(const cxxopts::ParseResult& args, const std::string& split, double band) {
  refuse_flags(args, {"corpus", "rows-on", "row", "explain", "plan-out"},
               "selects rows of the end-to-end corpus, but --gemms scores measured GEMMs");
  refuse_flags(args, {"strict"},
               "judges end-to-end corpus rows; --gemms has no pass rule (its errors are after a "
               "scale fitted on the same rows; --band counts the GEMMs within it)");
  OutputFiles out = checked_outputs(args);
  const GemmCorpus corpus = load_gemm_corpus(args["gemms"].as<std::string>());
  const ClusterSpec cluster = args.count("cluster")
                                  ? load_cluster_arg(args["cluster"].as<std::string>())
                                  : cluster_preset(corpus.cluster);
  std::vector<GemmScore> scores;
  for (const char* s : {"fit", "test"})
    if (split == "all" || split == s) scores.push_back(score_gemms(corpus, cluster, s, band));
  nlohmann::json json = {{"gemms", corpus.path}, {"cluster", cluster.name}, {"band", band}};
  for (const GemmScore& s : scores) json[s.split] = gemm_score_to_json(s);
  if (args.count("out")) out.set("--out", json.dump(2) + "\n");
  out.write_all();
  if (args.count("json")) {
    std::cout << json.dump(2) << "\n";
    return kExitOk;
  }
  std::ostream& o = out.report_stream();
  o << corpus.path << " on " << cluster.name << " (" << to_string(corpus.dtype)
    << "): measured / predicted, errors after one common scale\n";
  for (const GemmScore& s : scores) {
    o << s.split << ": " << s.rows << " GEMMs (" << s.skipped << " under "
      << format("%g", corpus.min_time_s * 1e6) << " us not scored), scale "
      << format("%.3f", s.scale) << ", mean |error| " << format("%.1f%%", s.mean_abs_error * 100)
      << ", max " << format("%.1f%%", s.max_abs_error * 100) << ", " << s.in_band << " within ±"
      << band_text(band) << ", unscaled mean |error| "
      << format("%.1f%%", s.mean_abs_unscaled * 100) << "\n";
  }
  for (const std::string& p : out.written_files()) o << "wrote " << p << "\n";
  return kExitOk;
}

int run_validate_model(int argc, char** argv) {
  cxxopts::Options options(
      "jaxpp-sim validate-model",
      "Score the cost model against the validation corpus of published training runs: predicted\n"
      "vs measured step time per row, and the mean and max |error| of the fit and test rows\n"
      "(docs/validation.md).");
  // clang-format off
  options.add_options()
      ("corpus", "corpus file (JSON or CSV; default: the built-in tests/validation/corpus.json)", cxxopts::value<std::string>())
      ("gemms", "score the GEMM model on measured GEMMs instead (e.g. tests/data/kernels/h200_gemm_bf16.json)", cxxopts::value<std::string>())
      ("cluster", "a cluster preset or JSON file replacing every selected row's cluster", cxxopts::value<std::string>())
      ("rows-on", "keep the rows whose cluster preset is GPU (e.g. h100-sxm)", cxxopts::value<std::string>())
      ("row", "keep only the row ID (repeat the flag or separate ids by commas; with --rows-on and --split)", cxxopts::value<std::string>())
      ("split", "fit | test | all", cxxopts::value<std::string>()->default_value("all"))
      ("band", "allowed |error| as a fraction (with --gemms: counts the GEMMs within it)", cxxopts::value<std::string>()->default_value("0.10"))
      ("explain", "after the table, per selected row (at most 8 unless --row names them): the simulate command that reproduces its prediction, its step breakdown and the peak memory of its worst actor; in --json each row's \"explain\"")
      ("plan-out", "with --explain: write each row's plan.json to DIR/<id>.plan.json (and the model file a command names, DIR/<id>.model.json)", cxxopts::value<std::string>())
      ("strict", "exit 1 when a test row not marked expected_failure is out of band (not with --gemms or --split fit)")
      ("json", "print the report as JSON")
      ("out", "also write the JSON report to FILE", cxxopts::value<std::string>())
      ("h,help", "show this help");
  // clang-format on
  std::vector<std::string> joined = join_row_flags(argc, argv);
  std::vector<char*> joined_argv;
  for (std::string& a : joined) joined_argv.push_back(a.data());
  const std::optional<cxxopts::ParseResult> parsed = parse_flags(
      options, static_cast<int>(joined_argv.size()), joined_argv.data(), "validate-model");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  const std::string split = args["split"].as<std::string>();
  check_validation_split(split);
  ModelValidationOptions vo;
  vo.band = parse_validation_band(args["band"].as<std::string>());
  if (args.count("gemms")) return run_gemm_validation(args, split, vo.band);
  if (!args.count("explain"))
    refuse_flags(args, {"plan-out"}, "writes the plans of the explained rows: give --explain");
  const std::vector<std::string> ids = row_ids(args);
  const std::string plan_dir = args.count("plan-out") ? args["plan-out"].as<std::string>() : "";
  if (args.count("plan-out") && !std::filesystem::is_directory(plan_dir))
    throw_input_error("--plan-out " + plan_dir, "not an existing directory (create it first)");
  // --strict judges test rows only: with --split fit it could never fail.
  if (split == "fit")
    refuse_flags(args, {"strict"}, "judges the test rows, but --split fit keeps none");
  OutputFiles out = checked_outputs(args);
  std::string gpu;
  if (args.count("rows-on")) {
    gpu = rows_on_preset(args["rows-on"].as<std::string>());
  }
  if (args.count("cluster"))
    vo.cluster_override = load_cluster_arg(args["cluster"].as<std::string>());

  const Corpus corpus = args.count("corpus")
                            ? load_corpus(args["corpus"].as<std::string>())
                            : builtin_corpus_from_text(kHasBuiltinCorpus, kBuiltinCorpus);
  // The rows' model files are inputs too: --out or a --plan-out model file on one of them
  // would replace the model the row (and every later run) reads.
  for (const CorpusRow& row : corpus.rows)
    if (!row.model_file.empty()) out.input(row.model_file, "(the model of row '" + row.id + "')");
  check_corpus_schedules(corpus);
  const Corpus selected = select_corpus_rows(corpus, gpu, split, ids);
  check_corpus_schedule_constraints(selected);
  const bool explain = args.count("explain") > 0;
  constexpr size_t kMaxExplainedRows = 8;
  if (explain && ids.empty() && selected.rows.size() > kMaxExplainedRows) {
    throw_input_error("--explain", std::to_string(selected.rows.size()) +
                                       " rows selected; it explains at most " +
                                       std::to_string(kMaxExplainedRows) +
                                       " unless --row names them (or narrow with --rows-on, "
                                       "--split)");
  }
  // --plan-out files, checked before the work as every output.
  const auto plan_flag = [](const CorpusRow& row) { return "--plan-out (row '" + row.id + "')"; };
  const auto model_flag = [](const CorpusRow& row) {
    return "--plan-out (row '" + row.id + "', model)";
  };
  if (!plan_dir.empty()) {
    for (const CorpusRow& row : selected.rows) {
      const std::string stem = plan_dir + "/" + explain_file_stem(row.id);
      out.output(stem + ".plan.json", plan_flag(row));
      out.output(stem + ".model.json", model_flag(row));
    }
  }
  const ModelValidationReport report = validate_corpus(selected, vo);
  nlohmann::json json = validation_report_to_json(report);
  std::vector<RowExplanation> explanations;
  if (explain) {
    ExplainOptions eo;
    if (args.count("cluster")) eo.cluster_arg = args["cluster"].as<std::string>();
    eo.model_dir = plan_dir;
    for (size_t i = 0; i < report.rows.size(); ++i) {
      explanations.push_back(explain_row(*report.rows[i].row, vo, eo));
      const RowExplanation& e = explanations.back();
      json["rows"][i]["explain"] = explanation_to_json(e);
      if (plan_dir.empty()) continue;
      if (e.ran) out.set(plan_flag(*e.row), plan_to_text(e.plan, plan_flag(*e.row)));
      if (!e.model_file.empty())
        out.set(model_flag(*e.row), e.model_json.dump(1) + "\n");
    }
  }
  if (args.count("out")) out.set("--out", json.dump(2) + "\n");
  out.write_all();
  if (args.count("json")) {
    std::cout << json.dump(2) << "\n";
  } else {
    print_table(out.report_stream(), report);
    for (size_t i = 0; i < explanations.size(); ++i)
      print_explanation(out.report_stream(), report.rows[i], explanations[i]);
    for (const std::string& p : out.written_files()) out.report_stream() << "wrote " << p << "\n";
  }
  // Rows the simulator rejected: a corpus the simulator cannot score is a failed run (rows marked
  // expected_failure excepted, as --strict excepts them).
  bool rejected = false;
  for (const CorpusRowResult& r : report.rows) {
    if (r.ran() || r.row->expected_failure) continue;
    std::cerr << report.corpus << ": row '" << r.row->id << "': " << r.message << "\n";
    rejected = true;
  }
  if (rejected) return kExitFailure;
  return args.count("strict") && strict_failure(report) ? kExitFailure : kExitOk;
}

const CommandRegistration kValidateModelCommand{
    "validate-model", "Score the cost model against published training runs", run_validate_model};

}  // namespace
}  // namespace jaxpp::cli
