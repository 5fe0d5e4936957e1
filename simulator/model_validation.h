// Scoring the cost model against the validation corpus (costmodel/corpus.h): every row is built
// into a plan, simulated, and its predicted step time compared with the step time the source
// measured. `jaxpp-sim validate-model` prints the result; scripts/fit_costmodel.py minimises the
// fit rows' mean |error| over cluster constants; tests/validation/corpus_validation_test.cc holds
// the test rows to a band.
//
// Per row:
//   plan       PlanRequest{row.model (its seq_len applied), the row's cluster preset or the
//              caller's override, row.config}, PartitionMode::kEven (transformer layers split
//              evenly, embedding first, logits last: Megatron-LM's layout), build_plan +
//              simulate_plan without trace and without the memory check. An fp8 row sets the
//              model's dtype to fp8 (current scaling): costmodel/operator_cost.h prices its
//              transformer GEMMs in FP8 and its casts; activations and weights keep the sizes of
//              the model's own dtype, as Transformer Engine keeps bf16 activations and master
//              weights.
//   error      predicted_step_time_s / measured_step_time_s − 1 (positive = predicted slower)
//   in band    |error| <= band (default 0.10)
//   TFLOP/s, MFU  predicted, in the row's FLOP convention (flops / step / gpus, and over the
//              row's peak); for convention "none" the simulator's own counts (hardware FLOPs for
//              TFLOP/s, model FLOPs for MFU; plan_builder.h)
//   memory     the worst actor's predicted peak bytes per GPU against the cluster's HBM
//   status     pass (in band), fail (out of band), expected-fail (out of band and marked
//              expected_failure), unexpected-pass (in band although marked), error (the
//              simulator rejected the configuration; `message` says why)
// Summaries (fit rows, test rows, per source, per cluster): counts of rows, of scored rows (ran
// and not marked expected_failure), of scored rows in band, of expected failures and of errors;
// mean and max |error| over the scored rows, and the row of the max.
//
// Explaining a row (validate-model --explain): the same plan simulated again with the step
// breakdown (simulator/breakdown.h, what `simulate --breakdown` computes), the peak-memory split
// of the actor with the highest peak (costmodel/memory.h's terms), and the `jaxpp-sim simulate`
// arguments that reproduce the prediction. The row's model is named as a preset (or the row's
// model file) when it is that model exactly, with --a2a-dtype for the row's all-to-all types;
// otherwise (an inline model, a seq_len, fp8 or fp8_scaling of the row: simulate has no flag for
// them) the command names a model file, <id>.model.json in the explain directory, that the
// caller writes (RowExplanation::model_json). A configuration field with no
// simulate flag makes `complete` false and is named in `notes`.
//
// Usage:
//   Corpus corpus = load_corpus("tests/validation/corpus.json");
//   ModelValidationReport report = validate_corpus(corpus, {});
//   std::cout << validation_report_to_json(report).dump(2);
//   RowExplanation e = explain_row(corpus.rows[0], {}, {.model_dir = "out"});
//   std::cout << shell_command(e.simulate_args);   // jaxpp-sim simulate --model ... --json
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/corpus.h"
#include "graph/plan.h"

namespace jaxpp {

enum class CorpusRowStatus { kPass, kFail, kExpectedFail, kUnexpectedPass, kError };
std::string_view to_string(CorpusRowStatus s);  // "pass", "fail", "expected-fail", ...

struct ModelValidationOptions {
  double band = 0.10;  // |error| allowed, as a fraction
  // Replaces every row's cluster preset when set (a calibrated cluster, or constants under fit).
  std::optional<ClusterSpec> cluster_override;
  // Rows scored side by side (each row's plan is built and simulated on its own, as the explorer
  // does with configurations); 0 = one per hardware thread. The report is the same for any count.
  int threads = 0;
};

struct CorpusRowResult {
  const CorpusRow* row = nullptr;  // into the corpus passed to validate_corpus
  std::string cluster;             // the cluster simulated (the override's name when given)
  CorpusRowStatus status = CorpusRowStatus::kError;
  std::string message;  // kError: the simulator's reason
  double measured_step_time_s = 0;
  double predicted_step_time_s = 0;
  double error = 0;  // predicted / measured − 1
  double predicted_tflops_per_gpu = 0;
  double predicted_mfu = 0;
  // The prediction in the unit the source measured (row->measured_kind), to print beside it.
  double predicted_in_measured_unit = 0;
  int64_t peak_memory_bytes = 0;    // worst actor, per GPU
  int64_t device_memory_bytes = 0;  // the cluster's HBM per GPU
  // Activation offloading (row offload_layers > 0): the host bytes of the worst actor per GPU
  // (simulate's host_offload_bytes) and the cluster's host_memory_bytes_per_gpu (0 = not known,
  // not checked); host_message is simulate's refusal ("does not fit in host memory: actor r
  // offloads ...") when they exceed it, else "".
  int64_t host_offload_bytes = 0;
  int64_t host_memory_bytes = 0;
  std::string host_message;
  // The worst actor's peak fits the device's HBM and, with offloading, its offloaded
  // activations fit the host memory (simulate refuses either unless --no-memory-check).
  bool fits = false;
  bool ran() const { return status != CorpusRowStatus::kError; }
  bool scored() const { return ran() && !row->expected_failure; }
};

struct CorpusErrorSummary {
  int rows = 0;
  int scored = 0;   // ran, not expected failures
  int in_band = 0;  // of the scored
  int expected_failures = 0;
  int errors = 0;             // rejected by the simulator
  double mean_abs_error = 0;  // over the scored rows (0 when none)
  double max_abs_error = 0;
  std::string max_row;  // id of the row with max_abs_error
};

struct ModelValidationReport {
  std::string corpus;  // the corpus's path
  double band = 0.10;
  std::string cluster_override;       // its name, or empty
  std::vector<CorpusRowResult> rows;  // in corpus order
  CorpusErrorSummary fit;
  CorpusErrorSummary test;
  std::map<std::string, CorpusErrorSummary> by_source;
  std::map<std::string, CorpusErrorSummary> by_cluster;  // by the row's cluster preset
};

// One row, never throwing for a configuration the simulator rejects (status kError).
CorpusRowResult validate_row(const CorpusRow& row, const ModelValidationOptions& options);
// Every row of `corpus`, then the summaries.
ModelValidationReport validate_corpus(const Corpus& corpus, const ModelValidationOptions& options);

// The peak memory of one device of an actor, in bytes, split as costmodel/memory.h counts it:
// weights + gathered_weights + gradients + transient_gradients + optimizer_state is the actor's
// static memory, activations the stashed microbatches at the peak (peak - static).
struct MemoryBreakdown {
  int actor = 0;
  int64_t weights = 0;           // its stored weights (a shard with parameter sharding)
  int64_t gathered_weights = 0;  // parameter sharding: the two layers gathered whole
  int64_t gradients = 0;         // its gradients (a shard with gradient sharding)
  int64_t transient_gradients = 0;  // gradient sharding: the largest layer's full gradient
  int64_t optimizer_state = 0;
  int64_t activations = 0;  // activations in flight at the peak
  int64_t peak = 0;
  int64_t device = 0;  // the cluster's HBM per GPU
};

struct ExplainOptions {
  // The --cluster argument that gave ModelValidationOptions::cluster_override (a preset or a
  // file path), repeated in the command; empty without an override.
  std::string cluster_arg;
  // Where the model files the commands name are (validate-model --plan-out DIR); empty: the
  // command names <id>.model.json and a note says to write it with --plan-out.
  std::string model_dir;
};

struct RowExplanation {
  const CorpusRow* row = nullptr;
  // `jaxpp-sim` arguments from "simulate" on; shell_command() prints them.
  std::vector<std::string> simulate_args;
  bool complete = true;  // false: a row setting has no simulate flag (named in notes)
  // The model file the command names when the row's model is not a preset or the row's file
  // as is; empty otherwise. The caller writes model_json there.
  std::string model_file;
  ModelSpec model;  // the model simulated (the row's, FP8 when the row is)
  // `model` as a model file: its transformer form when that reads back to the same model (the
  // explicit form's per-layer limits refuse a 1M-token sequence's stash), else the explicit form.
  nlohmann::json model_json;
  std::vector<std::string> notes;
  bool ran = false;     // false: the simulator rejected the row (message)
  std::string message;
  double step_time_s = 0;
  nlohmann::json breakdown;  // per actor: simulate --breakdown's "breakdown", unchanged
  MemoryBreakdown memory;
  Plan plan;  // what was simulated, plan.predicted as `simulate --plan` writes it
};

// Never throws for a row the simulator rejects (ran false, the command still given).
RowExplanation explain_row(const CorpusRow& row, const ModelValidationOptions& options,
                           const ExplainOptions& explain);
// "jaxpp-sim <args...>", each argument quoted for a POSIX shell when it needs it.
std::string shell_command(const std::vector<std::string>& args);
// A row id as a file name: characters other than letters, digits, '.', '_' and '-' become '_'.
std::string explain_file_stem(const std::string& id);
// {"simulate_command", "simulate_args", "complete", "model_file", "notes", "step_time_s",
//  "breakdown": simulate --json's "breakdown", "memory": {"actor", "weights_bytes", ...}}; a
//  rejected row has "message" instead of the last three.
nlohmann::json explanation_to_json(const RowExplanation& e);

// InputError naming the row and field 'schedule' when a row's schedule is not in the registry.
void check_corpus_schedules(const Corpus& corpus);
// InputError naming the row and field 'schedule' (with the row's pp, virtual_stages and
// microbatches) when a row's schedule cannot run its configuration: the generator's own
// constraints (schedules/registry.h), e.g. "Std1F1B places stage r on actor r: needs S = p".
// For the rows a run predicts (after select_corpus_rows): checked before any output, where
// simulating the row would report it only with the table.
void check_corpus_schedule_constraints(const Corpus& corpus);

// The corpus text embedded in a binary (cli/CMakeLists.txt generates it from
// tests/validation/corpus.json), named "corpus.json (built in)"; InputError naming --corpus when
// the build had no corpus (`available` false).
Corpus builtin_corpus_from_text(bool available, const char* text);

// validate-model's --rows-on: a cluster preset name in any case, returned as rows name their
// cluster (lower case); anything else (a file, an unknown name) is InputError "--rows-on X:
// expected a cluster preset name, the "cluster" of the rows to keep (one of: ...)".
std::string rows_on_preset(const std::string& gpu);

// The rows of `corpus` on the cluster preset `gpu` (empty = all) in `split` ("all", "fit",
// "test") whose id is in `ids` (empty = any); InputError naming the corpus when none is left, and
// "<corpus>: unknown row 'x' (closest: a, b, c)" for an id that is in no row of the corpus.
Corpus select_corpus_rows(const Corpus& corpus, const std::string& gpu, const std::string& split,
                          const std::vector<std::string>& ids = {});

// validate-model's --split (fit, test or all) and --band (a fraction > 0) checked as the CLI does.
void check_validation_split(const std::string& split);
void check_validation_band(double band);
// --band as given: a decimal number > 0 (not nan, inf, hexadecimal or text), else InputError
// "--band: expected a fraction > 0, got <text>".
double parse_validation_band(const std::string& text);

// { "corpus", "band", "cluster_override", "rows": [...], "summaries": {"fit", "test",
//   "by_source": {...}, "by_cluster": {...}} }; docs/validation.md lists the fields.
nlohmann::json validation_report_to_json(const ModelValidationReport& report);

}  // namespace jaxpp
