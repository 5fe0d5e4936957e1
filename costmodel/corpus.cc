#include "costmodel/corpus.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/json_util.h"
#include "graph/limits.h"
#include "graph/range_check.h"

namespace jaxpp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

template <typename T, size_t N>
std::string list_of(const std::array<T, N>& values) {
  std::string list;
  for (T v : values) list += (list.empty() ? "" : ", ") + std::string(to_string(v));
  return list;
}

const std::set<std::string> kTopKeys = {"format", "version", "split_rule", "sources", "rows"};
const std::set<std::string> kSourceKeys = {"citation", "url", "notes"};
const std::set<std::string> kRowKeys = {"id",
                                        "source",
                                        "where",
                                        "split",
                                        "cluster",
                                        "model",
                                        "gpus",
                                        "tp",
                                        "pp",
                                        "dp",
                                        "cp",
                                        "virtual_stages",
                                        "microbatch_size",
                                        "global_batch",
                                        "seq_len",
                                        "schedule",
                                        "recompute",
                                        "recompute_layers",
                                        "recompute_modules",
                                        "offload_layers",
                                        "sequence_parallel",
                                        "distributed_optimizer",
                                        "shard_gradients",
                                        "shard_parameters",
                                        "attention",
                                        "fp8",
                                        "fp8_scaling",
                                        "fp8_norm_fusion",
                                        "kernel_fusion",
                                        "cross_entropy",
                                        "tp_comm_overlap",
                                        "overlap_grad_reduce",
                                        "grad_dtype",
                                        "optimizer_state",
                                        "ep",
                                        "etp",
                                        "moe_overlap",
                                        "moe_dispatcher",
                                        "moe_routing",
                                        "moe_node_limit",
                                        "moe_device_limit",
                                        "a2a_dtype",
                                        "expert_gemm",
                                        "expert_gemm_streams",
                                        "partition",
                                        "measured",
                                        "flops_convention",
                                        "peak_tflops",
                                        "assumptions",
                                        "expected_failure"};
const std::set<std::string> kMeasuredKeys = {"tflops_per_gpu", "mfu", "step_time_s",
                                             "tokens_per_s_per_gpu"};
// CSV columns that are not row keys: the four measured_* columns replace "measured".
const std::string kMeasuredPrefix = "measured_";
const std::set<std::string> kCsvIntegerKeys = {
    "gpus",         "tp",         "pp",      "dp", "cp", "virtual_stages", "microbatch_size",
    "global_batch", "seq_len",    "ep",      "etp", "moe_node_limit", "moe_device_limit",
    "recompute_layers", "offload_layers"};
const std::set<std::string> kCsvBoolKeys = {"sequence_parallel", "distributed_optimizer",
                                            "shard_gradients",   "shard_parameters",
                                            "fp8",
                                            "tp_comm_overlap",   "overlap_grad_reduce"};

// The transformer shape a convention needs; InputError when the model has none.
void require_shape(const ModelSpec& m, FlopsConvention c, const std::string& where) {
  if (m.moe.enabled() || m.mla.enabled())
    throw_input_error(where, std::string(to_string(c)) +
                                 " is a dense-transformer formula; model '" + m.name +
                                 "' has experts or MLA attention");
  if (m.hidden > 0 && m.num_transformer_layers > 0) return;
  throw_input_error(where, std::string(to_string(c)) +
                               " needs a transformer model (layers, "
                               "hidden); model '" +
                               m.name + "' is given in explicit form (layers_list)");
}

// The model named or given by the row's "model" field. A model file's path is relative to the
// corpus file's directory (`base_dir`; "" = the working directory), never to the working
// directory first; an absolute path is taken as given. `file` gets the path loaded.
ModelSpec row_model(const JsonObject& row, const std::string& base_dir, std::string& file) {
  const json& value = row.at("model");
  const std::string where = row.field("model");
  if (value.is_object()) return model_from_json(value, where);
  if (!value.is_string()) {
    throw_input_error(where, "expected a model preset name, a model file or a model object, got " +
                                 value.dump().substr(0, 40));
  }
  const std::string name = value.get<std::string>();
  for (const std::string& preset : model_preset_names())
    if (lowercase(name) == preset) return load_model(preset);
  fs::path path(name);
  if (path.is_relative() && !base_dir.empty()) path = fs::path(base_dir) / path;
  if (!path_exists(path.string())) {  // anything else at the path: load_model says what it is
    const std::string looked =
        path.string() == name ? std::string()
                              : " " + path.string() +
                                    ": a model file is relative to the corpus file's directory";
    throw_input_error(where, "unknown model '" + name + "' (not a preset, and no such file" +
                                 looked + "; see jaxpp-sim graph --help for the presets)");
  }
  try {
    file = path.string();
    return load_model(path.string());
  } catch (const InputError& e) {
    throw_input_error(where, e.what());
  }
}

// `model` with another sequence length: rebuilt from its transformer shape.
ModelSpec with_seq_len(const ModelSpec& model, int seq_len, const std::string& where) {
  if (model.seq_len == seq_len) return model;
  if (model.hidden == 0 || model.num_transformer_layers == 0) {
    throw_input_error(where, "model '" + model.name +
                                 "' is given in explicit form (layers_list); its sequence length "
                                 "cannot be changed");
  }
  return model_from_json(model_shape_to_json(model, seq_len), where);
}

std::string cluster_name(const JsonObject& row) {
  const std::string name = lowercase(row.string("cluster"));
  const std::vector<std::string> presets = cluster_preset_names();
  if (std::find(presets.begin(), presets.end(), name) != presets.end()) return name;
  std::string list;
  for (const std::string& p : presets) list += (list.empty() ? "" : ", ") + p;
  throw_input_error(row.field("cluster"),
                    "unknown cluster preset '" + name + "' (presets: " + list + ")");
}

void read_measured(const JsonObject& row, CorpusRow& out) {
  const JsonObject measured = row.object("measured");
  measured.reject_unknown(kMeasuredKeys);
  std::vector<MeasuredKind> given;
  std::string names;
  for (MeasuredKind k : kAllMeasuredKinds) {
    if (!measured.has(std::string(to_string(k)))) continue;
    given.push_back(k);
    names += (names.empty() ? "" : ", ") + std::string(to_string(k));
  }
  if (given.size() != 1) {
    throw_input_error(row.field("measured"),
                      "expected exactly one of " + list_of(kAllMeasuredKinds) + ", got " +
                          (given.empty() ? std::string("none")
                                         : std::to_string(given.size()) + " (" + names + ")"));
  }
  out.measured_kind = given[0];
  const std::string key(to_string(out.measured_kind));
  out.measured_value = measured.positive_number(key);
  if (out.measured_kind == MeasuredKind::kMfu && out.measured_value > 1) {
    throw_input_error(measured.field(key), "expected a fraction in (0, 1] (0.55 for 55 %), got " +
                                               measured.at(key).dump());
  }
}

// A measured TFLOP/s per GPU above the peak of the row's GPU in the dtype it trains in (FP8 for
// an FP8 row) cannot have been measured, whatever FLOP count the source used (an MFU above 1 is
// refused by read_measured).
void check_measured_below_peak(const JsonObject& row, const CorpusRow& r) {
  if (r.measured_kind != MeasuredKind::kTflopsPerGpu) return;
  const ClusterSpec cluster = cluster_preset(r.cluster);
  const Dtype dtype = r.fp8 ? Dtype::kFp8 : r.model.dtype;
  const double peak = cluster.peak_flops_per_s[static_cast<size_t>(dtype)];
  if (!(peak > 0) || r.measured_value * 1e12 <= peak) return;
  char text[160];
  std::snprintf(text, sizeof text, "%g TFLOP/s per GPU is above the peak of %s in %s, %g TFLOP/s",
                r.measured_value, r.cluster.c_str(), std::string(to_string(dtype)).c_str(),
                peak / 1e12);
  throw_input_error(row.object("measured").field("tflops_per_gpu"), text);
}

FlopsConvention read_convention(const JsonObject& row, MeasuredKind kind) {
  const std::string text = row.string("flops_convention");
  const std::string where = row.field("flops_convention");
  for (FlopsConvention c : kAllFlopsConventions) {
    if (text != to_string(c)) continue;
    const bool needs_flops = kind == MeasuredKind::kTflopsPerGpu || kind == MeasuredKind::kMfu;
    if (needs_flops && c == FlopsConvention::kNone) {
      throw_input_error(where, "'none' cannot turn the measured " + std::string(to_string(kind)) +
                                   " into a step time: name the FLOP count the source used");
    }
    if (!needs_flops && c != FlopsConvention::kNone) {
      throw_input_error(where, "the measured " + std::string(to_string(kind)) +
                                   " needs no FLOP count: expected 'none', got '" + text + "'");
    }
    return c;
  }
  throw_input_error(where, "unknown convention '" + text + "' (expected one of " +
                               list_of(kAllFlopsConventions) + ")");
}

// The step time the source measured, in seconds.
double measured_step_time_s(const CorpusRow& r) {
  const double gpus = r.config.gpus;
  switch (r.measured_kind) {
    case MeasuredKind::kStepTime:
      return r.measured_value;
    case MeasuredKind::kTokensPerSPerGpu:
      return double(r.config.global_batch) * r.seq_len / (r.measured_value * gpus);
    case MeasuredKind::kTflopsPerGpu:
      return r.convention_flops / (r.measured_value * 1e12 * gpus);
    case MeasuredKind::kMfu:
      return r.convention_flops / (r.measured_value * r.peak_flops_per_s * gpus);
  }
  return 0;
}

// A name that tables and summaries print (a row id, a source id): non-empty, no control
// characters (a "\n" or an escape sequence would break or repaint the table).
std::string check_name(const JsonObject& row, const std::string& key) {
  if (trim(row.string(key)).empty())
    throw_input_error(row.field(key), "expected a non-empty string");
  return row.single_line_string(key, "it is printed in tables and messages");
}

// One row; `index_where` names it by position ("corpus.json: rows[3]") until its id is known.
CorpusRow parse_row(const json& value, const std::string& name, const std::string& index_where,
                    const std::string& base_dir) {
  const JsonObject by_index(value, index_where);
  const std::string id = check_name(by_index, "id");
  if (id.find(',') != std::string::npos)
    throw_input_error(by_index.field("id"),
                      "contains ',' (validate-model --row takes ids separated by commas, so it "
                      "could never select this row), got " + by_index.at("id").dump());
  const JsonObject row(value, name + ": row '" + id + "'");
  row.reject_unknown(kRowKeys);

  CorpusRow r;
  r.id = id;
  r.source = check_name(row, "source");
  r.where = row.string("where");
  if (trim(r.where).empty())
    throw_input_error(row.field("where"),
                      "expected where in the source the row is from (a table, a figure, a page), "
                      "got " + row.at("where").dump());
  const std::string split = row.string("split");
  if (split != "fit" && split != "test") {
    throw_input_error(row.field("split"), "expected \"fit\" or \"test\", got \"" + split + "\"");
  }
  r.split = split == "fit" ? CorpusSplit::kFit : CorpusSplit::kTest;
  r.cluster = cluster_name(row);
  r.model = row_model(row, base_dir, r.model_file);
  r.model_name = row.at("model").is_string() ? row.string("model") : r.model.name;
  r.model_inline = row.at("model").is_object();
  if (row.has("seq_len")) {
    const int s = row.positive_int("seq_len");
    if (s > kMaxSeqLen) {
      throw_input_error(row.field("seq_len"), "too large, got " + std::to_string(s));
    }
    r.model = with_seq_len(r.model, s, row.field("seq_len"));
  }
  r.seq_len = r.model.tokens_per_sequence();

  ParallelConfig& c = r.config;
  c.gpus = check_int_in(row.positive_int("gpus"), row.field("gpus"), 1, kMaxGpus, kGpuCountWhat);
  c.tp = row.positive_int("tp");
  c.pp = row.positive_int("pp");
  c.dp = row.positive_int("dp");
  c.cp = row.positive_int_or("cp", 1);
  c.virtual_stages = row.positive_int_or("virtual_stages", 1);
  c.microbatch_size = row.positive_int_or("microbatch_size", 1);
  c.global_batch = row.positive_int("global_batch");
  const int64_t product = int64_t{c.tp} * c.pp * c.dp * c.cp;
  if (product != c.gpus) {
    throw_input_error(row.field("tp"), "tp·pp·dp·cp = " + std::to_string(c.tp) + "·" +
                                           std::to_string(c.pp) + "·" + std::to_string(c.dp) + "·" +
                                           std::to_string(c.cp) + " = " + std::to_string(product) +
                                           " does not equal gpus " + std::to_string(c.gpus));
  }
  const int64_t per_step = int64_t{c.dp} * c.microbatch_size;
  if (c.global_batch % per_step != 0) {
    throw_input_error(row.field("global_batch"),
                      std::to_string(c.global_batch) +
                          " is not divisible by dp·microbatch_size = " + std::to_string(c.dp) +
                          "·" + std::to_string(c.microbatch_size) + " = " +
                          std::to_string(per_step));
  }
  c.num_microbatches = static_cast<int>(c.global_batch / per_step);
  c.schedule = row.string("schedule");
  if (c.schedule.empty()) throw_input_error(row.field("schedule"), "expected a schedule name");
  c.recompute = parse_recompute(row.string_or("recompute", "none"), row.field("recompute"));
  if (row.has("recompute_layers")) {
    c.recompute_layers = static_cast<int>(
        std::min<int64_t>(row.non_negative_integer("recompute_layers"), 1 << 20));
    check_recompute_layers(c, row.field("recompute_layers"));
  }
  if (row.has("recompute_modules")) {
    c.recompute_modules =
        recompute_modules_from_json(row.at("recompute_modules"), row.field("recompute_modules"));
    check_modules_need_selective(c.recompute, row.field("recompute_modules"));
    check_recompute_modules(c, row.field("recompute_modules"), &r.model);
  }
  c.sequence_parallel = row.boolean_or("sequence_parallel", false);
  c.zero1 = row.boolean_or("distributed_optimizer", false);
  c.shard_parameters = row.boolean_or("shard_parameters", false);
  c.shard_gradients = row.boolean_or("shard_gradients", c.shard_parameters);
  check_sharding(c, {row.field("shard_parameters"), row.field("shard_gradients"),
                     "\"distributed_optimizer\": true"});
  c.attention = parse_attention_kernel(row.string_or("attention", "flash"), row.field("attention"));
  c.tp_comm_overlap = row.boolean_or("tp_comm_overlap", false);
  c.overlap_grad_reduce = row.boolean_or("overlap_grad_reduce", false);
  c.grad_dtype =
      parse_grad_dtype(row.string_or("grad_dtype", "cluster"), row.field("grad_dtype"));
  c.optimizer_state = parse_optimizer_state(row.string_or("optimizer_state", "cluster"),
                                            row.field("optimizer_state"));
  const std::string partition = row.string_or("partition", "even");
  if (partition != "even" && partition != "auto")
    throw_input_error(row.field("partition"),
                      "expected \"even\" or \"auto\", got \"" + partition + "\"");
  r.auto_partition = partition == "auto";
  r.fp8 = row.boolean_or("fp8", false);
  // The FP8 recipe: the row's "fp8_scaling" sets the model's (an inline model may set it too).
  if (row.has("fp8_scaling")) {
    const std::string scaling = row.string("fp8_scaling");
    bool known = false;
    for (Fp8Scaling f : kAllFp8Scalings) {
      if (scaling == to_string(f)) {
        r.model.fp8_scaling = f;
        known = true;
      }
    }
    if (!known)
      throw_input_error(row.field("fp8_scaling"),
                        "expected \"current\", \"delayed\" or \"mxfp8\", got \"" + scaling + "\"");
    if (!r.fp8 && r.model.dtype != Dtype::kFp8)
      throw_input_error(row.field("fp8_scaling"), "only for FP8 rows (it needs \"fp8\": true)");
  }
  // Whether Transformer Engine fuses the GEMM-input quantization into its norm (ModelSpec::
  // fp8_norm_fusion): the row's key sets the model's.
  if (row.has("fp8_norm_fusion")) {
    if (!r.fp8 && r.model.dtype != Dtype::kFp8)
      throw_input_error(row.field("fp8_norm_fusion"), "only for FP8 rows (it needs \"fp8\": true)");
    r.model.fp8_norm_fusion = row.boolean_or("fp8_norm_fusion", true);
  }
  // The element-wise kernels of the row's framework (ModelSpec::kernel_fusion): the row's key
  // sets the model's; eager PyTorch only for 16-bit rows.
  if (row.has("kernel_fusion")) {
    const std::string where = row.field("kernel_fusion");
    r.model.kernel_fusion = parse_kernel_fusion(row.string_or("kernel_fusion", ""), where);
    check_kernel_fusion_precision(r.model.kernel_fusion, r.fp8 || r.model.dtype == Dtype::kFp8,
                                  where);
  }
  // What the loss keeps of the logits (ModelSpec::cross_entropy): the row's key sets the model's,
  // for rows that name a preset model (an inline model states it in its own object).
  if (row.has("cross_entropy"))
    r.model.cross_entropy =
        parse_cross_entropy(row.string("cross_entropy"), row.field("cross_entropy"));
  // FP8 on a GPU without FP8 tensor cores (A100, MI300X's preset): refused here, as mxfp8 below,
  // rather than scored as an error row after the table was printed and --out written.
  const bool fp8_cores =
      cluster_preset(r.cluster).peak_flops_per_s[static_cast<int>(Dtype::kFp8)] > 0;
  if ((r.fp8 || r.model.dtype == Dtype::kFp8) && !fp8_cores)
    throw_input_error(row.field(row.has("fp8") ? "fp8" : "model"),
                      "cluster '" + r.cluster + "' has no FP8 tensor cores (no peak FLOP/s for "
                      "fp8); give an FP8-capable GPU or drop \"fp8\"");
  if (r.model.fp8_scaling == Fp8Scaling::kMxfp8 && !cluster_preset(r.cluster).fp8_block_scaling)
    throw_input_error(row.field(row.has("fp8_scaling") ? "fp8_scaling" : "model"),
                      "mxfp8 needs block-scaled FP8 tensor cores (Blackwell: b200, gb200-nvl72, "
                      "gb300-nvl72); cluster '" + r.cluster + "' has none");
  // Expert parallelism (MoE models): the simulator's own checks (graph/plan.h check_moe_config),
  // naming the row's fields.
  c.ep = row.positive_int_or("ep", 1);
  c.etp = row.has("etp") ? row.positive_int("etp") : 0;
  c.moe_overlap =
      parse_moe_overlap(row.string_or("moe_overlap", "auto"), row.field("moe_overlap"));
  if (row.has("moe_overlap") && !r.model.moe.enabled()) {
    throw_input_error(row.field("moe_overlap"),
                      "model '" + r.model.name + "' has no routed experts (no all-to-all)");
  }
  c.moe_dispatcher = parse_moe_dispatcher(row.string_or("moe_dispatcher", "alltoall"),
                                          row.field("moe_dispatcher"));
  c.moe_routing =
      parse_moe_routing(row.string_or("moe_routing", "random"), row.field("moe_routing"));
  c.moe_node_limit = row.has("moe_node_limit") ? row.positive_int("moe_node_limit") : 0;
  c.moe_device_limit = row.has("moe_device_limit") ? row.positive_int("moe_device_limit") : 0;
  for (const char* key : {"moe_dispatcher", "moe_routing", "moe_node_limit", "moe_device_limit"})
    if (row.has(key) && !r.model.moe.enabled())
      throw_input_error(row.field(key),
                        "model '" + r.model.name + "' has no routed experts (no all-to-all)");
  // How the row's framework runs the local experts' GEMMs (ModelSpec MoeSpec::expert_gemm): the
  // row's keys set the model's.
  for (const char* key : {"expert_gemm", "expert_gemm_streams"})
    if (row.has(key) && !r.model.moe.enabled())
      throw_input_error(row.field(key), "model '" + r.model.name + "' has no routed experts");
  read_expert_gemm_keys(row, r.model.moe);
  if (row.has("a2a_dtype")) {
    r.a2a_dtype = row.string("a2a_dtype");
    set_alltoall_dtypes(r.model, r.a2a_dtype, row.field("a2a_dtype"));
  }
  check_moe_config(r.model, c, name + ": row '" + id + "'", /*flags=*/false, /*field_prefix=*/"");
  if (row.has("offload_layers")) {
    c.offload_layers = static_cast<int>(
        std::min<int64_t>(row.non_negative_integer("offload_layers"), 1 << 20));
    check_offload_layers(r.model, c, row.field("offload_layers"));
  }

  read_measured(row, r);
  check_measured_below_peak(row, r);
  r.convention = read_convention(row, r.measured_kind);
  // The peak only turns FLOPs into an MFU (the measured one, and the predicted one the table
  // prints); a row measured in seconds or tokens has no FLOP count to relate to it.
  if (row.has("peak_tflops") && r.convention == FlopsConvention::kNone)
    throw_input_error(row.field("peak_tflops"),
                      "unused: the row is measured as " + std::string(to_string(r.measured_kind)) +
                          " (flops_convention 'none'), and only an MFU is relative to a peak");
  if (row.has("peak_tflops")) {
    const double peak = row.positive_number("peak_tflops");
    if (!(peak >= kMinPeakTflops && peak <= kMaxPeakTflops)) {
      throw_input_error(row.field("peak_tflops"),
                        "expected 1e-06 to 1e+06 TFLOP/s (1 MFLOP/s to 1 EFLOP/s), got " +
                            row.at("peak_tflops").dump());
    }
    r.peak_flops_per_s = peak * 1e12;
  } else {
    r.peak_flops_per_s = cluster_preset(r.cluster).peak_flops(Dtype::kBf16);
  }
  r.convention_flops = flops_per_iteration(r.convention, r.model, c.global_batch, r.seq_len,
                                           row.field("flops_convention"));
  r.measured_step_time_s = measured_step_time_s(r);
  // Checked after the conversion: a denormal tokens/s or MFU passes "> 0" but gives an infinite
  // step time, a huge one a step time of 0.
  if (!(r.measured_step_time_s >= kMinMeasuredStepTimeS &&
        r.measured_step_time_s <= kMaxMeasuredStepTimeS)) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", r.measured_step_time_s);
    throw_input_error(row.field("measured"),
                      "gives a step time of " + std::string(text) + " s (" +
                          std::string(to_string(r.measured_kind)) + " " +
                          row.at("measured").at(std::string(to_string(r.measured_kind))).dump() +
                          "), expected 1e-06 to 1e+06 s");
  }
  r.assumptions = row.string_or("assumptions", "");
  if (row.has("expected_failure")) {
    r.expected_failure = row.string("expected_failure");
    if (r.expected_failure->empty()) {
      throw_input_error(row.field("expected_failure"), "expected the reason, got \"\"");
    }
  }
  return r;
}

// Corpus-wide checks: unique ids, known sources (when the corpus has a sources table).
// `positions[i]` names row i where it is in the file ("rows[3]", "line 5").
void check_rows(const Corpus& corpus, const std::vector<std::string>& positions,
                bool check_sources) {
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < corpus.rows.size(); ++i) {
    const CorpusRow& r = corpus.rows[i];
    const std::string where = corpus.path + ": row '" + r.id + "'";
    const auto [it, inserted] = first.emplace(r.id, i);
    if (!inserted) {
      throw_input_error(where + ": field 'id'", "duplicate id (" + positions[it->second] +
                                                    " and " + positions[i] + ")");
    }
    if (check_sources && !corpus.sources.count(r.source)) {
      throw_input_error(where + ": field 'source'",
                        "unknown source '" + r.source + "' (not in the corpus's 'sources')");
    }
  }
}

// ---- CSV. -----------------------------------------------------------------------------------


// The fields of one CSV line; InputError naming `where` and the field's position on an
// unterminated quote, a quote inside an unquoted field (ab"c) and text after a closing quote
// ("a"b): a field is either quoted as a whole (spaces around the quotes allowed) or has no quote.
std::vector<std::string> split_csv_line(const std::string& line, const std::string& where) {
  std::vector<std::string> fields;
  std::string field;
  enum { kStart, kBare, kQuoted, kClosed } state = kStart;
  const auto field_where = [&] { return where + ": field " + std::to_string(fields.size() + 1); };
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (state == kQuoted) {
      if (ch != '"') {
        field += ch;
      } else if (i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else {
        state = kClosed;
      }
    } else if (ch == ',') {
      fields.push_back(field);
      field.clear();
      state = kStart;
    } else if (state == kClosed) {
      if (ch != ' ' && ch != '\t')
        throw_input_error(field_where(), "text after the closing quote (quote the whole field)");
    } else if (ch == '"') {
      if (state == kBare || !trim(field).empty())
        throw_input_error(field_where(),
                          "a quote inside an unquoted field (quote the whole field, \"\" for a "
                          "quote inside it)");
      field.clear();
      state = kQuoted;
    } else {
      field += ch;
      if (ch != ' ' && ch != '\t') state = kBare;
    }
  }
  if (state == kQuoted) throw_input_error(field_where(), "unterminated quoted field");
  fields.push_back(field);
  return fields;
}

// A cell as JSON: a number when it reads as one, else the text (the row parser then says what
// type it expected).
json number_or_text(const std::string& cell) {
  if (!is_decimal_number(cell)) return cell;
  const double d = std::strtod(cell.c_str(), nullptr);
  if (std::isfinite(d)) return d;
  return cell;
}

// An integer cell: digits with an optional '-' only ("+4", " 4", "4.0" and "4e0" stay text, which
// the row parser refuses as not an integer), within int64.
json integer_or_text(const std::string& cell) {
  const size_t first = !cell.empty() && cell[0] == '-' ? 1 : 0;
  if (cell.size() == first || cell.size() - first > 18 ||
      !std::all_of(cell.begin() + static_cast<std::ptrdiff_t>(first), cell.end(),
                   [](unsigned char c) { return std::isdigit(c) != 0; }))
    return cell;
  return std::stoll(cell);
}

json csv_cell(const std::string& key, const std::string& cell) {
  if (kCsvIntegerKeys.count(key)) return integer_or_text(cell);
  if (key == "peak_tflops" || key.rfind(kMeasuredPrefix, 0) == 0) return number_or_text(cell);
  if (kCsvBoolKeys.count(key)) {
    if (lowercase(cell) == "true") return true;
    if (lowercase(cell) == "false") return false;
  }
  return cell;
}

}  // namespace

// ---- FLOP conventions. ----------------------------------------------------------------------

std::string_view to_string(FlopsConvention c) {
  switch (c) {
    case FlopsConvention::kNarayanan2021:
      return "narayanan2021";
    case FlopsConvention::kKorthikanti2022:
      return "korthikanti2022";
    case FlopsConvention::kMegatronLm:
      return "megatron_lm";
    case FlopsConvention::kSixN:
      return "six_n";
    case FlopsConvention::kSixNAttention:
      return "six_n_attention";
    case FlopsConvention::kNemoLlama:
      return "nemo_llama";
    case FlopsConvention::kNone:
      return "none";
  }
  return "?";
}

std::string_view to_string(MeasuredKind k) {
  switch (k) {
    case MeasuredKind::kTflopsPerGpu:
      return "tflops_per_gpu";
    case MeasuredKind::kMfu:
      return "mfu";
    case MeasuredKind::kStepTime:
      return "step_time_s";
    case MeasuredKind::kTokensPerSPerGpu:
      return "tokens_per_s_per_gpu";
  }
  return "?";
}

std::string_view to_string(CorpusSplit s) { return s == CorpusSplit::kFit ? "fit" : "test"; }

// Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM"), eq. (3): a GPT model with full activation recompute, 4 passes of every GEMM.
//   F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))
double narayanan2021_flops(const ModelSpec& m, double B, double s) {
  const double l = m.num_transformer_layers, h = m.hidden, V = m.vocab;
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models"),
// section 6: 3 passes of every GEMM (selective recompute counts no extra GEMMs).
//   F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))
double korthikanti2022_flops(const ModelSpec& m, double B, double s) {
  const double l = m.num_transformer_layers, h = m.hidden, V = m.vocab;
  return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

// Megatron-LM's num_floating_point_operations() for a dense transformer (transformer_flops() in
// megatron/training/training.py, NVIDIA/Megatron-LM commit 001b00c2734d, 2025): forward and both
// backward GEMMs (3 x 2 FLOPs per multiply-add), per token
//   attention  6·(h·(q + 2·kv) + q·s/2·2 + q·h)   q = heads·kv_channels = h,
//                                                  kv = kv_heads·kv_channels (GQA); s/2: causal
//   MLP        6·h·ffn·(3 if SwiGLU else 2)
//   logits     6·h·V
//   F = B·s·(l·(attention + MLP) + logits)
// V is the model's vocabulary (Megatron pads it to a multiple of 128·tp; the difference is well
// below 1 % of F). Megatron-LM releases before the causal halving (2024 and earlier) counted the
// full s² attention, 6·(2·q·s) per token; a source quoting those numbers is off by that term.
double megatron_lm_flops(const ModelSpec& m, double B, double s) {
  const double l = m.num_transformer_layers, h = m.hidden, V = m.vocab;
  const double q = h;
  const double kv = h * m.kv_heads / m.heads;
  const double attention = 6 * (h * (q + 2 * kv) + q * s / 2 * 2 + q * h);
  const double mlp = 6 * h * m.ffn_hidden * (m.gated_mlp ? 3 : 2);
  const double logits = 6 * h * V;
  return B * s * (l * (attention + mlp) + logits);
}

// Kaplan et al. 2020 / Hoffmann et al. 2022: 6 FLOPs per parameter per token (forward 2,
// backward 4), N = every parameter of the model (embeddings included).
//   F = 6·N·B·s
double six_n_flops(const ModelSpec& m, double B, double s) {
  return 6.0 * static_cast<double>(m.total_params()) * B * s;
}

// Chowdhery et al. 2022 (PaLM), appendix B: 6N plus the attention score and value products,
// 12·l·h·s FLOPs per token (h = heads · head dimension).
//   F = 6·N·B·s + 12·l·h·s·(B·s)
double six_n_attention_flops(const ModelSpec& m, double B, double s) {
  const double l = m.num_transformer_layers, h = m.hidden;
  return six_n_flops(m, B, s) + 12 * l * h * s * (B * s);
}

// NeMo's model FLOPs for the Llama family (nemo/utils/flops_formulas.py, llama2() and llama3(),
// what NeMo's FLOPs callback and its performance tables report): Megatron-LM's count with the
// full, non-causal s² attention (12·s/h instead of 6·s/h) and SwiGLU's 3 MLP matrices, per layer
//   F = B·s·l·h²·(12 + 12·kv_heads/heads + 18·ffn/h + 12·s/h + 6·V/(l·h))
double nemo_llama_flops(const ModelSpec& m, double B, double s) {
  const double l = m.num_transformer_layers, h = m.hidden, V = m.vocab;
  const double g = static_cast<double>(m.kv_heads) / m.heads;
  return B * s * l * h * h * (12 + 12 * g + 18 * m.ffn_hidden / h + 12 * s / h + 6 * V / (l * h));
}

double flops_per_iteration(FlopsConvention c, const ModelSpec& model, int64_t global_batch,
                           int seq_len, const std::string& where) {
  const double B = static_cast<double>(global_batch), s = seq_len;
  switch (c) {
    case FlopsConvention::kNone:
      return 0;
    case FlopsConvention::kSixN:
      return six_n_flops(model, B, s);
    case FlopsConvention::kNarayanan2021:
      require_shape(model, c, where);
      return narayanan2021_flops(model, B, s);
    case FlopsConvention::kKorthikanti2022:
      require_shape(model, c, where);
      return korthikanti2022_flops(model, B, s);
    case FlopsConvention::kMegatronLm:
      require_shape(model, c, where);
      return megatron_lm_flops(model, B, s);
    case FlopsConvention::kSixNAttention:
      require_shape(model, c, where);
      return six_n_attention_flops(model, B, s);
    case FlopsConvention::kNemoLlama:
      require_shape(model, c, where);
      return nemo_llama_flops(model, B, s);
  }
  return 0;
}

// ---- Loading. -------------------------------------------------------------------------------

Corpus corpus_from_json(const json& doc, const std::string& name, const std::string& base_dir) {
  const JsonObject top(doc, name);
  top.reject_unknown(kTopKeys);
  const std::string format = top.string("format");
  if (format != "jaxpp-sim-corpus") {
    throw_input_error(top.field("format"), "expected \"jaxpp-sim-corpus\", got \"" + format + "\"");
  }
  const int64_t version = top.integer("version");
  if (version != kCorpusVersion) {
    throw_input_error(top.field("version"), "unsupported corpus version " +
                                                std::to_string(version) + " (this build reads " +
                                                std::to_string(kCorpusVersion) + ")");
  }
  Corpus corpus;
  corpus.path = name;
  corpus.split_rule = top.string("split_rule");
  const JsonObject sources = top.object("sources");
  for (const auto& [id, value] : top.at("sources").items()) {
    const JsonObject s(value, sources.field(id));
    s.reject_unknown(kSourceKeys);
    corpus.sources[id] = {s.string("citation"), s.string("url"), s.string_or("notes", "")};
  }
  const json& rows = top.array("rows");
  if (rows.empty()) throw_input_error(top.field("rows"), "no rows (expected at least one)");
  std::vector<std::string> positions;
  for (size_t i = 0; i < rows.size(); ++i) {
    positions.push_back("rows[" + std::to_string(i) + "]");
    corpus.rows.push_back(parse_row(rows[i], name, name + ": " + positions.back(), base_dir));
  }
  check_rows(corpus, positions, /*check_sources=*/true);
  return corpus;
}

Corpus corpus_from_csv(const std::string& text, const std::string& name,
                       const std::string& base_dir) {
  check_utf8(name, text);  // cells become JSON strings, which must be UTF-8
  std::vector<std::pair<int, std::string>> lines;  // (1-based line number, text)
  // A UTF-8 byte order mark (spreadsheet programs write one) is not part of the first column.
  std::istringstream in(text.rfind("\xEF\xBB\xBF", 0) == 0 ? text.substr(3) : text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!trim(line).empty()) lines.emplace_back(n, line);
  }
  if (lines.empty()) throw_input_error(name, "empty CSV file (expected a header row)");
  const std::string header_where = name + ": line " + std::to_string(lines[0].first);
  std::vector<std::string> header = split_csv_line(lines[0].second, header_where);
  std::set<std::string> seen;
  for (std::string& column : header) {
    column = trim(column);
    const bool measured =
        kMeasuredKeys.count(column.substr(std::min(column.size(), kMeasuredPrefix.size()))) &&
        column.rfind(kMeasuredPrefix, 0) == 0;
    if ((!kRowKeys.count(column) || column == "measured") && !measured) {
      throw_input_error(header_where + ": column '" + column + "'",
                        "unknown field (expected a row key of the JSON form, with measured given "
                        "as measured_tflops_per_gpu, measured_mfu, measured_step_time_s or "
                        "measured_tokens_per_s_per_gpu)");
    }
    if (!seen.insert(column).second)
      throw_input_error(header_where + ": column '" + column + "'", "given twice");
  }
  if (lines.size() == 1) throw_input_error(header_where, "a header row but no data rows");
  Corpus corpus;
  corpus.path = name;
  std::vector<std::string> positions;
  for (size_t i = 1; i < lines.size(); ++i) {
    positions.push_back("line " + std::to_string(lines[i].first));
    const std::string where = name + ": " + positions.back();
    const std::vector<std::string> cells = split_csv_line(lines[i].second, where);
    if (cells.size() != header.size()) {
      throw_input_error(where, std::to_string(cells.size()) + " fields, the header has " +
                                   std::to_string(header.size()));
    }
    json row = json::object();
    json measured = json::object();
    for (size_t k = 0; k < header.size(); ++k) {
      const std::string cell = trim(cells[k]);
      if (cell.empty()) continue;
      if (header[k].rfind(kMeasuredPrefix, 0) == 0) {
        measured[header[k].substr(kMeasuredPrefix.size())] = csv_cell(header[k], cell);
      } else {
        row[header[k]] = csv_cell(header[k], cell);
      }
    }
    row["measured"] = measured;
    corpus.rows.push_back(parse_row(row, name, where, base_dir));
  }
  check_rows(corpus, positions, /*check_sources=*/false);
  return corpus;
}

Corpus load_corpus(const std::string& path) {
  const std::string text = read_input_text(path, kMaxCorpusFileBytes);
  const std::string base_dir = fs::path(path).parent_path().string();
  if (lowercase(fs::path(path).extension().string()) == ".csv")
    return corpus_from_csv(text, path, base_dir);
  return corpus_from_json(parse_json_text(text, path), path, base_dir);
}

}  // namespace jaxpp
