// The validation corpus: published training runs (model, cluster, parallel configuration and the
// throughput the source measured) that the cost model is scored against, with a fit/test split.
// The corpus lives in tests/validation/corpus.json; `jaxpp-sim validate-model` and
// scripts/fit_costmodel.py read it through load_corpus(). docs/validation.md has the format.
//
// JSON form:
//   { "format": "jaxpp-sim-corpus", "version": 1, "split_rule": "...",
//     "sources": { "<source_id>": {"citation": "...", "url": "...", "notes": "..."} },
//     "rows": [ { "id": "...", "source": "<source_id>", "where": "Table 1, row 1.7B",
//                 "split": "fit" | "test", "cluster": "<cluster preset>",
//                 "model": "<model preset or file>" | {inline model JSON},
//                 "gpus": N, "tp": t, "pp": p, "dp": d, "cp": c, "virtual_stages": v,
//                 "microbatch_size": b, "global_batch": B, "seq_len": s, "schedule": "1f1b",
//                 "recompute": "none", "recompute_layers": N (with recompute "full" only: the
//                 first N transformer layers of each stage chunk recomputed, simulate's
//                 --recompute-layers; default all), "recompute_modules": ["layernorm",
//                 "mla_up_proj"] (with recompute "selective" only: Megatron-Core's
//                 --recompute-modules, simulate's --recompute-modules; default core_attn),
//                 "sequence_parallel": false,
//                 "distributed_optimizer": false,
//                 "shard_gradients": false (ZeRO-2 / FSDP gradient sharding; needs
//                 distributed_optimizer), "shard_parameters": false (ZeRO-3 / FSDP parameter
//                 sharding; needs distributed_optimizer, implies shard_gradients: a row with
//                 "shard_gradients": false is refused), "attention": "flash", "fp8": false,
//                 "tp_comm_overlap": false, "overlap_grad_reduce": false, "grad_dtype": "cluster",
//                 "optimizer_state": "cluster", "partition": "even",
//                 "ep": 1, "etp": t, "moe_overlap": "auto", "a2a_dtype": "bf16" | "fp8,bf16",
//                 "moe_dispatcher": "alltoall" | "deepep", "moe_routing": "random" | "contiguous",
//                 "moe_node_limit": M, "moe_device_limit": M,
//                 "expert_gemm": "grouped" | "per_expert", "expert_gemm_streams": N (the
//                 model's MoeSpec::expert_gemm and expert_gemm_streams; MoE models only),
//                 "measured": {"tflops_per_gpu": x} | {"mfu": x} | {"step_time_s": x}
//                             | {"tokens_per_s_per_gpu": x},
//                 "flops_convention": "narayanan2021" | ... | "none", "peak_tflops": 989,
//                 "assumptions": "...", "expected_failure": "reason" } ] }
//   Required row keys: id, source, where, split, cluster, model, gpus, tp, pp, dp, global_batch,
//   schedule, measured, flops_convention. The others default to cp 1, virtual_stages 1,
//   microbatch_size 1, the model's seq_len, recompute "none", attention "flash", false flags,
//   the cluster's bf16 peak, no assumptions, no expected failure; MoE models: ep 1, etp = tp,
//   moe_overlap "auto", moe_dispatcher "alltoall", moe_routing "random", the model's all-to-all
//   types, no routing limit (ep, etp, moe_overlap, moe_dispatcher, moe_routing, moe_node_limit,
//   moe_device_limit and a2a_dtype mean what simulate's --ep, --etp, --moe-overlap,
//   --moe-dispatcher, --moe-routing, --moe-node-limit, --moe-device-limit and --a2a-dtype mean,
//   and are
//   checked as they are: ep must divide the routed experts, ep·etp the tp·cp·dp devices of a
//   stage; ep > 1, etp != tp, moe_overlap, moe_dispatcher, moe_routing or a2a_dtype on a dense
//   model is an error).
// CSV form: a header row naming the same keys, one row per line (fields may be double-quoted,
//   "" inside quotes is a quote; no line breaks inside a field), an empty cell = key absent;
//   "model" is a preset name or a file; "measured" is four columns measured_tflops_per_gpu,
//   measured_mfu, measured_step_time_s, measured_tokens_per_s_per_gpu of which exactly one is
//   non-empty; no sources (source ids are then not checked).
//
// Validation is strict and complete at load time: unknown keys, missing or mistyped fields,
// duplicate ids, unknown cluster presets or models, tp·pp·dp·cp != gpus, expert-parallel fields
// that do not fit the model or the devices, a global batch not
// divisible by dp·microbatch_size, a measured value that is not exactly one positive number, an
// MFU above 1, a TFLOP/s per GPU above the peak of the row's GPU in its dtype (FP8 for an FP8
// row), a FLOP convention that does not fit the measured kind, unknown sources, bad splits.
// A model file named by a row is relative to the corpus file's directory (an absolute path as
// given), whatever the working directory. Every error
// is one InputError line naming the file, the row (its id, or rows[i] / line n without one) and
// the field:
//   corpus.json: row 'bloom-176b': field 'tp': tp·pp·dp·cp = 4·12·8·1 = 384 does not equal gpus 380
//
// FLOP conventions (flops_per_iteration below; B = global batch in sequences, s = sequence
// length, l = transformer layers, h = hidden, V = vocabulary, N = total parameters): the FLOP
// count a source divided by its step time to quote TFLOP/s per GPU or MFU. Each is one
// documented function in corpus.cc.
//   narayanan2021    96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))   (Megatron-LM paper, full recompute)
//   korthikanti2022  72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))   (sequence parallelism paper)
//   megatron_lm      Megatron-LM's num_floating_point_operations() (GQA and SwiGLU aware)
//   six_n            6·N·B·s
//   six_n_attention  6·N·B·s + 12·l·h·s·(B·s)                (PaLM, appendix B)
//   none             no FLOP count: the source measured a time or tokens/s
//
// The measured step time of a row (seconds per iteration):
//   step_time_s            as given
//   tokens_per_s_per_gpu   B·s / (x · gpus)
//   tflops_per_gpu         flops / (x · 1e12 · gpus)
//   mfu                    flops / (x · peak · gpus), peak = peak_tflops or the cluster's bf16 peak
//
// Usage:
//   Corpus corpus = load_corpus("tests/validation/corpus.json");   // or a .csv file
//   for (const CorpusRow& row : corpus.rows) use(row.measured_step_time_s);
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/model.h"
#include "graph/plan.h"

namespace jaxpp {

inline constexpr int kCorpusVersion = 1;
// Largest corpus file accepted, in bytes (a corpus of thousands of rows is well below).
inline constexpr int64_t kMaxCorpusFileBytes = int64_t{16} << 20;
// The measured step time of a row (after converting tokens/s, TFLOP/s or MFU) must lie in
// [1 µs, 1e6 s], and a row's peak_tflops in [1e-6, 1e6] (1 MFLOP/s to 1 EFLOP/s, as a cluster's).
inline constexpr double kMinMeasuredStepTimeS = 1e-6;
inline constexpr double kMaxMeasuredStepTimeS = 1e6;
inline constexpr double kMinPeakTflops = 1e-6;
inline constexpr double kMaxPeakTflops = 1e6;

enum class FlopsConvention {
  kNarayanan2021,
  kKorthikanti2022,
  kMegatronLm,
  kSixN,
  kSixNAttention,
  kNemoLlama,
  kNone
};
inline constexpr std::array kAllFlopsConventions = {
    FlopsConvention::kNarayanan2021, FlopsConvention::kKorthikanti2022,
    FlopsConvention::kMegatronLm,    FlopsConvention::kSixN,
    FlopsConvention::kSixNAttention, FlopsConvention::kNemoLlama,
    FlopsConvention::kNone};
std::string_view to_string(FlopsConvention c);  // "narayanan2021", ..., "none"

// What the source measured.
enum class MeasuredKind { kTflopsPerGpu, kMfu, kStepTime, kTokensPerSPerGpu };
inline constexpr std::array kAllMeasuredKinds = {MeasuredKind::kTflopsPerGpu, MeasuredKind::kMfu,
                                                 MeasuredKind::kStepTime,
                                                 MeasuredKind::kTokensPerSPerGpu};
// The JSON key: "tflops_per_gpu", "mfu", "step_time_s", "tokens_per_s_per_gpu".
std::string_view to_string(MeasuredKind k);

enum class CorpusSplit { kFit, kTest };
std::string_view to_string(CorpusSplit s);  // "fit", "test"

// The FLOPs of one training iteration of `global_batch` sequences of `seq_len` tokens under a
// convention. InputError (naming `where`) when the convention needs the transformer shape and the
// model was given in explicit form; kNone returns 0.
double flops_per_iteration(FlopsConvention c, const ModelSpec& model, int64_t global_batch,
                           int seq_len, const std::string& where);
// The single conventions (transformer shape from `model`, its seq_len ignored).
double narayanan2021_flops(const ModelSpec& model, double global_batch, double seq_len);
double korthikanti2022_flops(const ModelSpec& model, double global_batch, double seq_len);
double megatron_lm_flops(const ModelSpec& model, double global_batch, double seq_len);
double six_n_flops(const ModelSpec& model, double global_batch, double seq_len);
double six_n_attention_flops(const ModelSpec& model, double global_batch, double seq_len);
double nemo_llama_flops(const ModelSpec& model, double global_batch, double seq_len);

struct CorpusSource {
  std::string citation;
  std::string url;
  std::string notes;
};

struct CorpusRow {
  std::string id;
  std::string source;
  std::string where;  // where in the source, e.g. "Table 1, row 1.7B"
  CorpusSplit split = CorpusSplit::kFit;
  std::string cluster;     // a cluster preset name (lower case)
  std::string model_name;  // the preset or file named in the row, or the inline model's name
  // The path loaded when the row names a model file (relative to the corpus file's directory,
  // absolute as given); empty for a preset or an inline model.
  std::string model_file;
  bool model_inline = false;  // the row gives the model as a JSON object
  std::string a2a_dtype;  // the row's "a2a_dtype" as given (empty: the model's)
  // The model with the row's seq_len applied (rebuilt from its transformer shape).
  ModelSpec model;
  int seq_len = 0;
  // gpus, tp, pp, dp, cp, virtual_stages, microbatch_size, global_batch, schedule, recompute,
  // sequence_parallel, zero1 (= distributed_optimizer), shard_gradients, shard_parameters,
  // attention, tp_comm_overlap, overlap_grad_reduce, grad_dtype, optimizer_state, ep, etp and
  // moe_overlap; num_microbatches = global_batch / (dp · microbatch_size).
  ParallelConfig config;
  bool fp8 = false;
  // "partition": "even" (default: transformer layers split evenly, embedding on the first stage,
  // logits on the last, as Megatron-LM) or "auto" (cost-balanced; one layer per stage when there
  // are as many stages as layers).
  bool auto_partition = false;
  MeasuredKind measured_kind = MeasuredKind::kStepTime;
  double measured_value = 0;  // in the unit of measured_kind (mfu as a fraction)
  FlopsConvention convention = FlopsConvention::kNone;
  double peak_flops_per_s = 0;  // the peak an MFU is relative to (row's or the cluster's bf16)
  double convention_flops = 0;  // flops_per_iteration under `convention` (0 for none)
  double measured_step_time_s = 0;
  std::string assumptions;
  std::optional<std::string> expected_failure;  // the reason, when the row is known to miss
};

struct Corpus {
  std::string path;        // as given to load_corpus (names the corpus in messages)
  std::string split_rule;  // empty for CSV
  std::map<std::string, CorpusSource> sources;  // empty for CSV
  std::vector<CorpusRow> rows;
};


// A .csv file (by extension) or a JSON file. InputError on any problem (see above).
Corpus load_corpus(const std::string& path);
// The JSON form from a parsed document; `name` names it in messages, `base_dir` is the directory
// relative model file paths are in (load_corpus: the corpus file's; "" = the working directory).
Corpus corpus_from_json(const nlohmann::json& doc, const std::string& name,
                        const std::string& base_dir);
// The CSV form from its text.
Corpus corpus_from_csv(const std::string& text, const std::string& name,
                       const std::string& base_dir);

}  // namespace jaxpp
