// The bad-input catalogue: every subcommand fed malformed, truncated, mistyped, out-of-range and
// impossible input must fail cleanly. One case = command-line arguments, the files to create, the
// expected exit code and a substring the error must contain. Every case also checks that the
// process was neither killed by a signal nor stopped by the timeout (a hang), that a bad-input
// error is exactly one line on stderr, and that no output file (complete or partial) was left in
// the case's directory.
//
// To add a case, append a row to kCases below; "{dir}" in the arguments is the case's own empty
// directory (where its files are created and where outputs go), "{data}" is tests/data.
#include <sys/stat.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kTimeoutS = 120;  // generous: the sanitizer builds run these too

// What the command prints when it fails.
enum class Report {
  kOneLine,  // exit 2 or 1 with exactly one line "jaxpp-sim <command>: error: ..." on stderr
  kList,     // validate / show of an invalid schedule or plan: a list of errors, one per line
  kMpirun,   // under mpirun: one error line per rank plus mpirun's own summary
};

struct File {
  std::string name;
  std::function<std::string()> content;
  // Instead of `content`: makes something other than a text file at the path (a FIFO, a sparse
  // file of a given size), at test time, so that no large file is kept in the repository.
  std::function<void(const std::string& path)> make = nullptr;
};

struct BadInputCase {
  std::string name;
  std::string args;
  std::vector<File> files = {};
  int exit_code = 2;
  std::string message;
  Report report = Report::kOneLine;
  int mpi_processes = 0;  // > 0: run under `mpirun -n <mpi_processes>`
};

// gtest prints parameters in test listings (and ctest in test names): the case name suffices.
void PrintTo(const BadInputCase& c, std::ostream* os) { *os << c.name; }

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

// A plan and a trace of a small model, produced once per process by `simulate`, and a measured
// trace of a small run.
struct Baseline {
  json plan;
  json trace;
  json measured_trace;
};

const Baseline& baseline() {
  static Baseline b;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string dir = make_temp_dir();
    const CliResult r = run_cli("simulate --model " + std::string(JAXPP_TEST_DATA_DIR) +
                                "/graph/tiny_transformer.json --gpus 2 --pp 2 --global-batch 4 "
                                "--schedule 1f1b --plan " +
                                dir + "/plan.json --trace " + dir + "/trace.json");
    if (r.exit_code != 0) throw std::runtime_error("baseline simulate failed: " + r.err);
    const CliResult m = run_cli(
        "run --schedule 1f1b --pp 2 --microbatches 2 --hidden 8 --seq 4 --layers-per-stage 1 "
        "--steps 2 --warmup 0 --trace " +
        dir + "/measured.json");
    if (m.exit_code != 0) throw std::runtime_error("baseline run failed: " + m.err);
    b.plan = json::parse(read_file(dir + "/plan.json"));
    b.trace = json::parse(read_file(dir + "/trace.json"));
    b.measured_trace = json::parse(read_file(dir + "/measured.json"));
    fs::remove_all(dir);
  });
  return b;
}

std::function<std::string()> text(std::string s) {
  return [s] { return s; };
}
std::function<std::string()> plan_with(std::function<void(json&)> edit) {
  return [edit] {
    json p = baseline().plan;
    edit(p);
    return p.dump(1);
  };
}
std::function<std::string()> trace_with(std::function<void(json&)> edit) {
  return [edit] {
    json t = baseline().trace;
    edit(t);
    return t.dump(1);
  };
}
std::function<std::string()> measured_trace_with(std::function<void(json&)> edit) {
  return [edit] {
    json t = baseline().measured_trace;
    edit(t);
    return t.dump(1);
  };
}
// Index of the `nth` (0-based) event of `actor` with op `op` in a trace's JSON (file order).
size_t event_index(const json& t, int actor, const std::string& op, int nth = 0) {
  for (size_t i = 0; i < t["events"].size(); ++i) {
    const json& e = t["events"][i];
    if (e["actor"] == actor && e["op"] == op && nth-- == 0) return i;
  }
  throw std::runtime_error("the baseline trace has no such event");
}
// Moves the second compute of actor 0 to start with its first: two computes at once on one stream.
void overlap_two_computes(json& t) {
  t["events"][event_index(t, 0, "compute", 1)]["start_s"] =
      t["events"][event_index(t, 0, "compute", 0)]["start_s"];
}
std::function<std::string()> truncated(std::function<std::string()> whole) {
  return [whole] {
    const std::string s = whole();
    return s.substr(0, s.size() / 2);
  };
}

const char* kTinyModel =
    R"({"name": "m", "layers": 4, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 100})";
std::string tiny_model_with(const std::string& key, const std::string& value) {
  json j = json::parse(kTinyModel);
  j[key] = json::parse(value);
  return j.dump();
}
// tests/data/hf/<name>.json (a published Hugging Face config) with `key` set to the JSON text
// `value`, or removed when `value` is empty.
std::function<std::string()> hf_config_with(const std::string& name, const std::string& key,
                                             const std::string& value) {
  return [=] {
    std::ifstream in(std::string(JAXPP_TEST_DATA_DIR) + "/hf/" + name + ".json");
    json j = json::parse(in);
    if (value.empty())
      j.erase(key);
    else
      j[key] = json::parse(value);
    return j.dump(2);
  };
}
std::string explicit_layer_with(const std::string& key, const std::string& value) {
  json layer = {{"name", "a"},           {"fwd_flops", 1}, {"bwd_input_flops", 1},
                {"bwd_weight_flops", 1}, {"params", 10},   {"output_bytes", 4},
                {"stash_bytes", 4}};
  layer[key] = json::parse(value);
  return json{{"name", "x"}, {"layers_list", {layer, layer}}}.dump();
}
std::string cluster_with(const std::string& key, const std::string& value) {
  json j = {{"name", "c"}, {"base", "a100-80g"}};
  j[key] = json::parse(value);
  return j.dump();
}

// The fixture corpus (tests/data/corpus/small.json) with an edit; its file-model row names a
// preset instead, so the copy loads from any directory.
std::function<std::string()> corpus_with(std::function<void(json&)> edit) {
  return [edit] {
    json c = json::parse(read_file(std::string(JAXPP_TEST_DATA_DIR) + "/corpus/small.json"));
    c["rows"][2]["model"] = "gpt3-1.3b";
    edit(c);
    return c.dump(1);
  };
}

// Issue 16, classes 1 and 2: JSON nested `depth` arrays deep, and things that are not text files.
std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }
json nested_json(int depth) { return json::parse(nested(depth)); }
File fifo(std::string name) {
  return {std::move(name), nullptr, [](const std::string& path) {
            if (::mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + path);
          }};
}
File sparse(std::string name, uintmax_t bytes) {  // a hole: no disk space used
  return {std::move(name), nullptr, [bytes](const std::string& path) {
            std::ofstream(path).close();
            fs::resize_file(path, bytes);
          }};
}
File subdirectory(std::string name) {
  return {std::move(name), nullptr, [](const std::string& path) { fs::create_directory(path); }};
}
constexpr uintmax_t kGiB = uintmax_t{1} << 30;
File symlink_to(std::string name, std::string target) {  // issue 16, class 6
  return {std::move(name), nullptr, [target](const std::string& path) {
            fs::create_symlink(target, path);
          }};
}

// Issue 16, class 4: files that contradict themselves. Sets the bytes of the send and the recv of
// `tag` in a plan (both, so that the program stays well-formed and only its sizes are wrong).
void set_transfer_bytes(json& plan, int64_t tag, int64_t bytes) {
  for (json& actor : plan["program"]["actors"])
    for (json& ins : actor)
      if (ins.contains("tag") && ins["tag"] == tag) ins["bytes"] = bytes;
}
// `whole` with `"<key>": <value>, ` inserted after its first '{': a duplicate top-level key.
std::function<std::string()> with_leading_key(std::function<std::string()> whole,
                                              std::string key, std::string value) {
  return [=] { return whole().insert(1, "\"" + key + "\": " + value + ", "); };
}
// `whole` with `<extra>` inserted before the first occurrence of `before` (after `after`).
std::function<std::string()> inserted(std::function<std::string()> whole, std::string before,
                                      std::string extra, std::string after = "") {
  return [=] {
    std::string t = whole();
    return t.insert(t.find(before, t.find(after)), extra);
  };
}
// `whole`, then a NUL byte, then `tail`.
std::function<std::string()> nul_then(std::function<std::string()> whole, std::string tail) {
  return [=] { return whole() + std::string(1, '\0') + tail; };
}

const std::string kSim = "simulate --model gpt3-1.3b --schedule 1f1b ";
const std::string kMeasured = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 ";
const std::string kRun =
    "run --schedule 1f1b --pp 2 --microbatches 2 --hidden 8 --seq 4 --layers-per-stage 1 "
    "--steps 1 --warmup 0 ";
// kRun without --hidden, for the cases that give their own (a flag is given once).
const std::string kRunNoHidden =
    "run --schedule 1f1b --pp 2 --microbatches 2 --seq 4 --layers-per-stage 1 --steps 1 --warmup 0 ";
const std::string kTinyFile = "{data}/graph/tiny_transformer.json";
const std::string kExplore = "explore --model gpt3-1.3b --gpus 8 --global-batch 8 --quiet ";

// clang-format off
const std::vector<BadInputCase> kCases = {
    // ---- Any command: flags. ----------------------------------------------------------------
    {.name = "UnknownCommand", .args = "frobnicate", .message = "unknown command 'frobnicate'"},
    {.name = "UnknownFlag", .args = "graph --model gpt3-1.3b --pp 2 --bogus", .message = "bogus"},
    {.name = "FlagOfWrongType", .args = "graph --model gpt3-1.3b --pp two", .message = "two"},
    {.name = "FlagWithoutItsValue", .args = "simulate --pp", .message = "pp"},
    // A decimal flag is read whole: cxxopts' stream would keep the number before the junk.
    {.name = "DecimalFlagWithTrailingText", .args = kMeasured + "--t-w 1e3junk",
     .message = "--t-w: expected a number, got '1e3junk'"},
    {.name = "DecimalFlagGivenAsAList",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 5,1 --t-b 1",
     .message = "--t-f: expected a number, got '5,1'"},
    {.name = "DecimalFlagWithAUnit", .args = kExplore + "--max-memory-gib 8GiB",
     .message = "--max-memory-gib: expected a number, got '8GiB'"},

    // ---- Expert parallelism (issue 13): one line naming the flag, nothing written. ---------
    {.name = "SimulateEpOnADenseModel",
     .args = kSim + "--gpus 4 --pp 2 --dp 2 --global-batch 8 --ep 2 --plan {dir}/p.json",
     .message = "--ep: ep 2 on gpt3-1.3b, which has no routed experts"},
    {.name = "SimulateEpNotDividingTheExperts",
     .args = "simulate --model mixtral-8x7b --schedule 1f1b --gpus 24 --pp 4 --dp 6 "
             "--global-batch 48 --ep 3 --timeline {dir}/t.svg",
     .message = "--ep: ep 3 does not divide the 8 routed experts"},
    {.name = "SimulateEpNotDividingTheStageDevices",
     .args = "simulate --model qwen3-30b-a3b --schedule 1f1b --gpus 24 --pp 4 --dp 6 "
             "--global-batch 48 --ep 4 --trace {dir}/t.json",
     .message = "does not divide the tp·cp·dp = 6 devices"},
    {.name = "SimulateMoeImbalanceBelowOne",
     .args = "simulate --model mixtral-8x7b --schedule 1f1b --gpus 32 --pp 4 --dp 8 "
             "--global-batch 64 --ep 8 --moe-imbalance 0.5",
     .message = "--moe-imbalance: must be a number >= 1"},
    {.name = "SimulateMoeTopKAboveExperts",
     .args = "simulate --model {dir}/m.json --schedule 1f1b --gpus 2 --pp 2 --global-batch 4",
     .files = {{"m.json", text(R"({"name": "m", "layers": 4, "hidden": 256, "heads": 4,
                                    "seq_len": 128, "vocab": 1000, "experts": 4, "top_k": 6,
                                    "expert_ffn_hidden": 512})")}},
     .message = "field 'top_k': top_k (6) is larger than experts (4)"},
    {.name = "ExploreEpOnADenseModel",
     .args = "explore --model gpt3-1.3b --gpus 8 --global-batch 16 --ep 2 --plan {dir}/p.json",
     .message = "--ep: gpt3-1.3b has no routed experts"},
    {.name = "SimulateUnknownMoeDispatcher",
     .args = "simulate --model mixtral-8x7b --schedule 1f1b --gpus 32 --pp 4 --dp 8 "
             "--global-batch 64 --ep 8 --moe-dispatcher nccl --plan {dir}/p.json",
     .message = "--moe-dispatcher: expected alltoall or deepep, got \"nccl\""},
    {.name = "SimulateUnknownMoeRouting",
     .args = "simulate --model mixtral-8x7b --schedule 1f1b --gpus 32 --pp 4 --dp 8 "
             "--global-batch 64 --ep 8 --moe-routing skewed --trace {dir}/t.json",
     .message = "--moe-routing: expected random or contiguous, got \"skewed\""},
    {.name = "SimulateMoeDispatcherOnADenseModel",
     .args = kSim + "--gpus 4 --pp 2 --dp 2 --global-batch 8 --moe-dispatcher deepep "
                    "--plan {dir}/p.json",
     .message = "--moe-dispatcher: an expert-parallel dispatcher on gpt3-1.3b, which has no "
                "routed experts"},
    {.name = "ExploreMoeRoutingOnADenseModel",
     .args = "explore --model gpt3-1.3b --gpus 8 --global-batch 16 --moe-routing contiguous "
             "--plan {dir}/p.json",
     .message = "--moe-routing: an expert routing pattern on gpt3-1.3b, which has no routed "
                "experts"},

    // ---- Name-to-actor assignments (--assign; issue 18): file, key and reason, nothing written.
    {.name = "AssignMissingLayer",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --assign {dir}/a.json --plan {dir}/p.json",
     .files = {{"a.json", text(R"({"assignment": {"embedding-layer23": 0, "layer24": 1,
                                                  "logits": 1}})")}},
     .message = "{dir}/a.json: field 'assignment.layer24': no layer named 'layer24' in gpt3-1.3b"},
    {.name = "AssignLayerTwice",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --assign {dir}/a.json --plan {dir}/p.json",
     .files = {{"a.json", text(R"({"assignment": {"embedding-layer11": 0, "layer11-logits": 1}})")}},
     .message = "field 'assignment.layer11-logits': layer11 is also assigned by 'embedding-layer11'"},
    {.name = "AssignLayerNotAssigned",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --assign {dir}/a.json --timeline {dir}/t.svg",
     .files = {{"a.json", text(R"({"assignment": {"embedding-layer11": 0, "layer12-layer23": 1}})")}},
     .message = "{dir}/a.json: field 'assignment': layer 'logits' is not assigned"},
    {.name = "AssignActorOutOfRange",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --assign {dir}/a.json --trace {dir}/t.json",
     .files = {{"a.json", text(R"({"assignment": {"embedding": 0, "layer{i}": "i mod 3",
                                                  "logits": 1}})")}},
     .message = "field 'assignment.layer{i}': 'i mod 3' gives actor 2 for layer2, out of range"},
    {.name = "AssignActorWithNothing",
     .args = kSim + "--gpus 3 --pp 3 --global-batch 3 --assign {dir}/a.json --plan {dir}/p.json",
     .files = {{"a.json", text(R"({"assignment": {"embedding-layer11": 0, "layer12-logits": 2}})")}},
     .message = "{dir}/a.json: field 'assignment': actor 1 gets no layer (3 actors)"},
    {.name = "AssignScheduleThatDoesNotFit",
     .args = "simulate --model gpt3-1.3b --schedule zb-h1 --gpus 4 --pp 4 --global-batch 8 "
             "--assign {dir}/a.json --plan {dir}/p.json",
     .files = {{"a.json", text(R"({"assignment": {"embedding": 0, "layer{i}": "i mod 4",
                                                  "logits": 3}})")}},
     .message = "schedule 'ZeroBubble' does not fit the assignment (24 stages on 4 actors, loop "
                "placement)"},
    {.name = "AssignRuleNestedTooDeep",  // was a stack overflow (SIGSEGV) in the rule parser
     .args = "simulate --model gpt3-1.3b --schedule Circular --gpus 4 --pp 4 --global-batch 8 "
             "--assign {dir}/a.json --plan {dir}/p.json",
     .files = {{"a.json",
                [] {
                  return R"({"assignment": {"embedding": 0, "layer{i}": ")" +
                         std::string(20000, '(') + "i" + std::string(20000, ')') +
                         R"(", "logits": 3}})";
                }}},
     .message = "{dir}/a.json: field 'assignment.layer{i}': rule '" + std::string(40, '(') +
                "...': nests deeper than 64 levels"},
    {.name = "ShowAssignMissingLayer",
     .args = "show --schedule 1f1b --pp 2 --microbatches 4 --model gpt3-1.3b --assign {dir}/a.json "
             "--export-json {dir}/s.json",
     .files = {{"a.json", text(R"({"assignment": {"embedding-layer23": 0, "head": 1}})")}},
     .message = "field 'assignment.head': no layer named 'head' in gpt3-1.3b"},
    {.name = "ExploreAssignActorOutOfRange",
     .args = "explore --model gpt3-1.3b --gpus 2 --global-batch 4 --pp 2 --quiet "
             "--assign {dir}/a.json --plan {dir}/p.json",
     .files = {{"a.json", text(R"({"assignment": {"embedding-layer11": 0, "layer12-logits": 5}})")}},
     .message = "field 'assignment.layer12-logits': actor 5 is out of range 0..1 (2 actors)"},
    {.name = "ExploreAssignWithBalancedTimePartition",
     .args = "explore --model gpt3-1.3b --gpus 2 --global-batch 4 --pp 2 --quiet "
             "--assign {dir}/a.json --partition balanced-time --plan {dir}/p.json",
     .files = {{"a.json", text(R"({"assignment": {"embedding-layer11": 0, "layer12-logits": 1}})")}},
     .message = "--partition: the assignment (--assign) gives the partition; not with --partition "
                "balanced-time"},

    // ---- graph: model files and shapes. -----------------------------------------------------
    {.name = "GraphMalformedModelJson", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(R"({"name": "m", "layers": 2,, })")}}, .message = "malformed JSON"},
    {.name = "GraphTruncatedModelJson", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", truncated(text(kTinyModel))}}, .message = "malformed JSON"},
    {.name = "GraphEmptyModelFile", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text("")}}, .message = "malformed JSON"},
    {.name = "GraphModelIsAnArray", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text("[1, 2]")}}, .message = "expected a JSON object"},
    {.name = "GraphLayersOfWrongType", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("layers", R"("four")"))}},
     .message = "field 'layers': expected an integer"},
    // Sweep 6: MTP modules past their limit ran in quadratic time (99,999 past a minute); a model
    // whose layers with the embedding, the logits and the MTP modules pass kMaxLayers was written
    // as a plan its readers refuse; 1.3e18 parameters overflowed the memory's int64 bytes.
    {.name = "GraphTooManyMtpModules", .args = "graph --model {dir}/m.json --pp 1",
     .files = {{"m.json", text(R"({"name": "m", "layers": 2, "hidden": 64, "heads": 4, "seq_len": 16,
                                   "vocab": 100, "mlp": "swiglu", "mtp_modules": 99999})")}},
     .message = "m.json: field 'mtp_modules'"},
    {.name = "GraphLayersAndMtpModulesBeyondTheLayerLimit", .args = "graph --model {dir}/m.json --pp 1",
     .files = {{"m.json", text(R"({"name": "m", "layers": 99998, "hidden": 64, "heads": 4,
                                   "seq_len": 16, "vocab": 100, "mlp": "swiglu", "mtp_modules": 1})")}},
     .message = "m.json: field 'mtp_modules': too many layers: 99998 transformer layers and 1 MTP "
                "modules, with the embedding and the logits 100001 (the limit is 100000)"},
    {.name = "GraphLayersBeyondTheLayerLimitWithTheEmbeddingAndLogits",
     .args = "graph --model {dir}/m.json --pp 1",
     .files = {{"m.json", text(tiny_model_with("layers", "100000"))}},
     .message = "m.json: field 'layers': too many layers: 100000 transformer layers, with the "
                "embedding and the logits 100002 (the limit is 100000)"},
    {.name = "GraphModelWithTooManyParameters", .args = "graph --model {dir}/m.json --pp 1",
     .files = {{"m.json", text(R"({"name": "big", "layers": 99000, "hidden": 1048576, "heads": 16384,
                                   "seq_len": 4194304, "vocab": 16777216, "ffn_hidden": 4194304})")}},
     .message = "m.json: model 'big': 1.31e+18 parameters (the limit is 1.13e+15)"},
    {.name = "GraphNegativeLayers", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("layers", "-3"))}},
     .message = "field 'layers': expected a positive integer, got -3"},
    {.name = "GraphUnknownFp8Scaling", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text([] {
                  json j = json::parse(kTinyModel);
                  j["dtype"] = "fp8";
                  j["fp8_scaling"] = "nvfp4";
                  return j.dump();
                }())}},
     .message = "field 'fp8_scaling': expected \"current\", \"delayed\" or \"mxfp8\", got \"nvfp4\""},
    {.name = "GraphUnknownKernelFusion", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text([] {
                  json j = json::parse(kTinyModel);
                  j["kernel_fusion"] = "compiled";
                  return j.dump();
                }())}},
     .message = "field 'kernel_fusion': expected \"fused\", \"eager\" or \"eager_fp32_params\", "
                "got \"compiled\""},
    {.name = "GraphEagerKernelsOfAnFp8Model", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text([] {
                  json j = json::parse(kTinyModel);
                  j["dtype"] = "fp8";
                  j["kernel_fusion"] = "eager";
                  return j.dump();
                }())}},
     .message = "field 'kernel_fusion': the eager kernels are for 16-bit models"},
    {.name = "SimulateMxfp8OnHopper",
     .args = "simulate --model {dir}/m.json --schedule 1f1b --cluster h100-sxm --gpus 2 --pp 2 "
             "--global-batch 4",
     .files = {{"m.json", text([] {
                  json j = json::parse(kTinyModel);
                  j["dtype"] = "fp8";
                  j["fp8_scaling"] = "mxfp8";
                  return j.dump();
                }())}},
     .message = "model 'm': field 'fp8_scaling': mxfp8 needs block-scaled FP8 tensor cores "
                "(Blackwell: b200, gb200-nvl72, gb300-nvl72); cluster 'h100-sxm' has none"},
    {.name = "ExploreMxfp8OnHopper",
     .args = "explore --model {dir}/m.json --cluster h100-sxm --gpus 8 --global-batch 8 --quiet "
             "--plan {dir}/best.json",
     .files = {{"m.json", text([] {
                  json j = json::parse(kTinyModel);
                  j["dtype"] = "fp8";
                  j["fp8_scaling"] = "mxfp8";
                  return j.dump();
                }())}},
     .message = "field 'fp8_scaling': mxfp8 needs block-scaled FP8 tensor cores"},
    {.name = "GraphZeroHidden", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("hidden", "0"))}}, .message = "field 'hidden'"},
    {.name = "GraphFractionalHeads", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("heads", "2.5"))}}, .message = "field 'heads'"},
    // Sweep 5: the name went raw into the first comment line of the hand-off files.
    {.name = "GraphModelNameWithANewline", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("name", R"("tiny\nimport os")"))}},
     .message = "m.json: field 'name': contains a control character (it is printed in reports "
                "and written into the comments of the hand-off files), got \"tiny\\nimport os\""},
    {.name = "GraphHugeLayerCount", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("layers", "2147483647"))}},
     .message = "field 'layers': too large"},
    {.name = "GraphLayerCountBeyondInt", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("layers", "1e12"))}},
     .message = "field 'layers': too large"},
    {.name = "GraphHugeHidden", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("hidden", "2147483600"))}},
     .message = "field 'hidden': too large"},
    {.name = "GraphHeadsDoNotDivideHidden", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("heads", "5"))}},
     .message = "must be a multiple of heads"},
    {.name = "GraphUnknownModelField", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("layerz", "4"))}},
     .message = "field 'layerz': unknown field"},
    {.name = "GraphEmptyLayersList", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(R"({"name": "x", "layers_list": []})")}},
     .message = "expected at least one layer"},
    {.name = "GraphHugeLayerParams", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(explicit_layer_with("params", "9000000000000000000"))}},
     .message = "field 'params': too large"},
    {.name = "GraphNegativeStashBytes", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(explicit_layer_with("stash_bytes", "-1"))}},
     .message = "field 'stash_bytes'"},
    {.name = "GraphInfiniteFlops", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(R"({"name": "x", "layers_list": [{"name": "a", "fwd_flops": 1e999}]})")}},
     .message = "malformed JSON"},
    {.name = "GraphModelIsADirectory", .args = "graph --model {dir} --pp 2",
     .message = "is a directory"},
    {.name = "GraphUnknownPreset", .args = "graph --model gpt5-10t --pp 2",
     .message = "unknown model"},
    {.name = "GraphZeroPp", .args = "graph --model gpt3-1.3b --pp 0", .message = "--pp"},
    {.name = "GraphMoreStagesThanLayers", .args = "graph --model " + kTinyFile + " --pp 7",
     .message = "7 stages"},
    // ---- graph: mixture-of-experts and MLA fields, Hugging Face configs (issue 13). --------
    {.name = "GraphMoeTopKAboveExperts", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(R"({"name": "m", "layers": 4, "hidden": 64, "heads": 4,
         "seq_len": 32, "vocab": 100, "mlp": "swiglu", "experts": 4, "top_k": 6,
         "expert_ffn_hidden": 32})")}},
     .message = "m.json: field 'top_k': top_k (6) is larger than experts (4)"},
    {.name = "GraphMlaFieldOnAModelWithoutMla", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(tiny_model_with("kv_lora_rank", "16"))}},
     .message = "m.json: field 'kv_lora_rank': an MLA field"},
    {.name = "HfConfigUnknownArchitecture", .args = "graph --model {dir}/config.json --pp 2",
     .files = {{"config.json", text(R"({"architectures": ["FalconForCausalLM"],
         "model_type": "falcon", "hidden_size": 4544})")}},
     .message = "config.json: field 'model_type': unsupported architecture 'falcon'"},
    {.name = "HfConfigMissingField", .args = "graph --model {dir}/config.json --pp 2",
     .files = {{"config.json", hf_config_with("llama3-8b", "num_hidden_layers", "")}},
     .message = "config.json: field 'num_hidden_layers': missing (required)"},
    {.name = "HfConfigTopKAboveExperts", .args = "graph --model {dir}/config.json --pp 2",
     .files = {{"config.json", hf_config_with("mixtral-8x7b", "num_experts_per_tok", "9")}},
     .message = "field 'num_experts_per_tok': 9 experts per token, more than num_local_experts (8)"},
    {.name = "HfConfigMlaFieldOnALlama", .args = "graph --model {dir}/config.json --pp 2",
     .files = {{"config.json", hf_config_with("llama3-8b", "kv_lora_rank", "512")}},
     .message = "field 'kv_lora_rank': an MLA attention field, but llama models have none"},
    {.name = "SimulateHfConfigTopKAboveExperts",
     .args = "simulate --model {dir}/config.json --schedule 1f1b --pp 2 --gpus 2 --global-batch 4",
     .files = {{"config.json", hf_config_with("qwen3-30b-a3b", "num_experts_per_tok", "129")}},
     .message = "field 'num_experts_per_tok'"},
    {.name = "GraphZeroMicrobatches", .args = "graph --model gpt3-1.3b --pp 2 --microbatches 0",
     .message = "--microbatches"},
    {.name = "GraphHugeMicrobatchCount",
     .args = "graph --model gpt3-1.3b --pp 2 --microbatches 2000000000",
     .message = "microbatches is more than the limit"},
    {.name = "GraphUnsortedPartition", .args = "graph --model gpt3-1.3b --pp 3 --partition 0,9,5",
     .message = "strictly increasing"},
    {.name = "GraphVPlacementOfThreeVirtualStages",
     .args = "graph --model gpt3-1.3b --pp 2 --virtual 3 --placement v",
     .message = "6 stages on 2 actors"},
    {.name = "GraphDotIntoMissingDirectory",
     .args = "graph --model gpt3-1.3b --pp 2 --dot {dir}/missing/g.dot",
     .message = "does not exist"},
    {.name = "GraphDotOntoADirectory", .args = "graph --model gpt3-1.3b --pp 2 --dot {dir}",
     .message = "is a directory"},

    // ---- schedules, show. -------------------------------------------------------------------
    {.name = "SchedulesUnexpectedArgument", .args = "schedules extra",
     .message = "unexpected argument 'extra'"},
    {.name = "ShowUnknownSchedule", .args = "show --schedule fancy --pp 4 --microbatches 8",
     .message = "unknown schedule 'fancy'"},
    {.name = "ShowZeroActors", .args = "show --schedule 1f1b --pp 0 --microbatches 4",
     .message = "p >= 1"},
    {.name = "ShowTooFewMicrobatches", .args = "show --schedule zb-h1 --pp 4 --microbatches 2",
     .message = "needs m >= S"},
    {.name = "ShowHugeMicrobatchCount",
     .args = "show --schedule 1f1b --pp 4 --microbatches 2000000000",
     .message = "microbatches is more than the limit"},
    {.name = "ShowHugeActorCount", .args = "show --schedule gpipe --pp 2000000 --microbatches 1",
     .message = "stages is more than the limit"},
    {.name = "ShowBothScheduleSources",
     .args = "show --schedule 1f1b --schedule-file {data}/schedules/deadlock.json",
     .message = "give exactly one of"},
    {.name = "ShowDeadlockingSchedule", .args = "show --schedule-file {data}/schedules/deadlock.json",
     .exit_code = 1, .message = "deadlock: no actor can make progress", .report = Report::kList},
    {.name = "ShowExportIntoMissingDirectory",
     .args = "show --schedule 1f1b --pp 2 --microbatches 2 --export-csv {dir}/missing/s.csv",
     .message = "does not exist"},

    // ---- validate: schedule files. ----------------------------------------------------------
    {.name = "ValidateMissingFile", .args = "validate {dir}/none.json", .message = "cannot read"},
    {.name = "ValidateMalformedCsv", .args = "validate {data}/schedules/malformed.csv",
     .message = "bad action '1X1'"},
    {.name = "ValidateMalformedScheduleJson", .args = "validate {data}/schedules/malformed.json",
     .message = "malformed JSON"},
    {.name = "ValidateTruncatedScheduleJson", .args = "validate {dir}/s.json",
     .files = {{"s.json", truncated(text(R"({"actors": [["F0@s0", "B0@s0"], ["F0@s1", "B0@s1"]]})"))}},
     .message = "malformed JSON"},
    {.name = "ValidateDeadlockingSchedule", .args = "validate {data}/schedules/deadlock.json",
     .exit_code = 1, .message = "deadlock: no actor can make progress", .report = Report::kList},
    {.name = "ValidateScheduleMissingATask", .args = "validate {data}/schedules/missing_task.json",
     .exit_code = 1, .message = "B1@s1 is missing", .report = Report::kList},
    {.name = "ValidateScheduleWithADuplicateTask",
     .args = "validate {data}/schedules/duplicate_task.json", .exit_code = 1,
     .message = "B1@s1", .report = Report::kList},
    {.name = "ValidateCsvWithAnEmptyLine", .args = "validate {dir}/s.csv",  // named no file
     .files = {{"s.csv", text("0F0,0B0\n\n1F1,1B1\n")}},
     .message = "{dir}/s.csv: actor 1 runs no task of any stage"},
    {.name = "ValidateJsonWithAnEmptyActor", .args = "validate {dir}/s.json",
     .files = {{"s.json", text(R"({"actors": [["F0@s0", "B0@s0"], [], ["F0@s1", "B0@s1"]]})")}},
     .message = "{dir}/s.json: actor 1 runs no task of any stage"},
    // ["core_attn"] is stored as the default: beside recompute none it was accepted and ignored.
    {.name = "ValidatePlanCoreAttnModuleWithoutSelective",
     .args = "validate {dir}/p.json",
     .files = {{"p.json", plan_with([](json& p) {
                  p["config"]["recompute"] = "none";
                  p["config"]["recompute_modules"] = json::array({"core_attn"});
                })}},
     .message = "field 'recompute_modules': names the modules of selective recompute and needs "
                "recompute selective (recompute is none)"},
    {.name = "ValidateModelCorpusCoreAttnModuleWithoutSelective",
     .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) {
                  c["rows"][0]["recompute_modules"] = json::array({"core_attn"});
                })}},
     .message = "row 'a-1.3b-pp2': field 'recompute_modules': names the modules of selective "
                "recompute and needs recompute selective (recompute is none)"},
    {.name = "ValidatePlanWithAWrongFormat",  // was read as a schedule: "field 'cluster'"
     .args = "validate {dir}/p.json",
     .files = {{"p.json", plan_with([](json& p) { p["format"] = "jaxpp-sim-plan2"; })}},
     .message = "{dir}/p.json: field 'format': not a jaxpp-sim plan (expected \"format\": "
                "\"jaxpp-sim-plan\", got \"jaxpp-sim-plan2\")"},
    // cxxopts' "Argument 'X' failed to parse" named no flag.
    {.name = "MeasuredDecimalMicrobatches",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 2.5 --t-f 1 --t-b 1",
     .message = "--microbatches: expected a whole number within the flag's range, got '2.5'"},
    {.name = "MeasuredNanStageTime",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f nan --t-b 1",
     .message = "--t-f: expected a number, got 'nan'"},
    {.name = "CalibrateRanksBeyondInt", .args = "calibrate --ranks=2147483648 -o {dir}/c.json",
     .message = "--ranks: expected a whole number within the flag's range, got '2147483648'"},
    {.name = "SimulatePerturbNegativeSeed",  // stoull wrapped -1 to 2^64 - 1
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --perturb jitter=0.1,seed=-1",
     .message = "--perturb: 'seed=-1': expected a non-negative integer seed"},
    {.name = "SimulatePerturbSeedWithoutJitter",  // printed an empty label, perturbed nothing
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --perturb seed=3",
     .message = "--perturb: seed needs jitter=J > 0 (it seeds the jitter's draws)"},
    {.name = "ClusterBaseIsAFile",  // the error offered "or a path to a JSON file"
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(R"({"base": "h100.json"})")}},
     .message = "{dir}/c.json: field 'base': unknown preset 'h100.json' (expected one of: "
                "a100-40g, a100-80g, h100-sxm, h200, h800, b200, gb200-nvl72, gb300-nvl72, "
                "mi300x; \"base\" takes a preset name, not a file)"},
    {.name = "ValidateCsvWithHugeStage", .args = "validate {dir}/s.csv",
     .files = {{"s.csv", text("0F0,999999999F0\n")}},
     .message = "stages is more than the limit"},
    {.name = "ValidateJsonTokenWithLargestIntStage", .args = "validate {dir}/s.json",
     .files = {{"s.json", text(R"({"actors": [["F0@s2147483647"]]})")}},
     .message = "stages is more than the limit"},
    {.name = "ValidateJsonWithHugeMicrobatchCount", .args = "validate {dir}/s.json",
     .files = {{"s.json", text(R"({"num_microbatches": 2000000000, "actors": [["F0@s0", "B0@s0"]]})")}},
     .message = "microbatches is more than the limit"},
    {.name = "ValidateJsonTaskOfWrongType", .args = "validate {dir}/s.json",
     .files = {{"s.json", text(R"({"actors": [["F0@s0", 7]]})")}},
     .message = "expected a task string"},
    {.name = "ValidateJsonBadToken", .args = "validate {dir}/s.json",
     .files = {{"s.json", text(R"({"actors": [["F0@s0", "X0@s0"]]})")}},
     .message = "bad task token 'X0@s0'"},
    {.name = "ValidateJsonStageOnTwoActors", .args = "validate {dir}/s.json",
     .files = {{"s.json", text(R"({"actors": [["F0@s0", "B0@s0"], ["F1@s0", "B1@s0"]]})")}},
     .message = "s0"},
    {.name = "ValidateEmptyCsv", .args = "validate {dir}/s.csv", .files = {{"s.csv", text("\n\n")}},
     .message = "no actions"},

    // ---- validate: plan files. --------------------------------------------------------------
    // Names printed in reports and written into plans and hand-offs: no control characters.
    {.name = "ValidatePlanScheduleNameWithANewline", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["schedule"] = "1f1b\nimport os"; })}},
     .message = "field 'schedule': contains a control character (it is printed in reports and "
                "written into the hand-off files), got \"1f1b\\nimport os\""},
    {.name = "ValidateScheduleFileNameWithANewline", .args = "validate {dir}/s.json",
     .files = {{"s.json", text(R"({"schedule": "a\nb", "actors": [["F0@s0", "B0@s0"], ["F0@s1", "B0@s1"]]})")}},
     .message = "s.json: field 'schedule': contains a control character"},
    {.name = "SimulateClusterNameWithANewline",
     .args = kSim + "--cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("name", R"("c\u001b[2J")"))}},
     .message = "c.json: field 'name': contains a control character (it is printed in reports and "
                "written into plans)"},
    {.name = "ExportCsvPathWithANewline",
     .args = "export --plan {dir}/plan.json --format torchtitan -o {dir}/t.toml --csv \"$(printf '{dir}/a\\nb.csv')\"",
     .files = {{"plan.json", plan_with([](json&) {})}},
     .message = "--csv: the file name contains a control character, got \"{dir}/a\\nb.csv\""},
    // A plan's model header edited away from its layers (sweep 6): the operator model times the
    // header, so validate refuses what the layers contradict.
    {.name = "ValidatePlanWithAnEditedVocab", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["model"]["vocab"] = 1000; })}},
     .message = "layers_list[0]: field 'params': 6400, but the model's header (vocab 1000, hidden "
                "64) gives 64000"},
    {.name = "ValidatePlanWithAnEditedDtype", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["model"]["dtype"] = "fp32"; })}},
     .message = "layers_list[1]: field 'output_bytes': 4096, but the model's header (dtype fp32, "
                "hidden 64, seq_len 32) gives 8192"},
    {.name = "ValidatePlanWithEmbeddingFlops", .args = "validate {dir}/plan.json",
     .files = {{"plan.json",
                plan_with([](json& p) { p["model"]["layers_list"][0]["fwd_flops"] = 1e15; })}},
     .message = "layers_list[0]: field 'fwd_flops': 1e+15, but the model's header (vocab 100, "
                "hidden 64) gives 0"},
    {.name = "ValidatePlanWithAnEditedLogitsLayer", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) {
                  p["model"]["layers_list"].back()["fwd_flops"] = 4096000.0;
                })}},
     .message = "field 'fwd_flops': 4.096e+06, but the model's header (vocab 100, hidden 64, "
                "seq_len 32) gives 409600"},
    {.name = "ValidatePlanOfAnotherVersion", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["version"] = 2; })}},
     .message = "unsupported plan version 2"},
    {.name = "ValidateTruncatedPlan", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", truncated(plan_with([](json&) {}))}}, .message = "malformed JSON"},
    {.name = "ValidatePlanWithNegativePp", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["pp"] = -2; })}},
     .message = "field 'pp': expected a positive integer, got -2"},
    {.name = "ValidatePlanWithStringMicrobatches", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["num_microbatches"] = "4"; })}},
     .message = "field 'num_microbatches'"},
    {.name = "ValidatePlanProgramDisagreesWithConfig", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["program"]["num_microbatches"] = 2000000000; })}},
     .message = "microbatches but config.num_microbatches is 4"},
    {.name = "ValidatePlanPartitionForAnotherModel", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["partition"]["num_layers"] = 99; })}},
     .message = "covers 99 layers"},
    {.name = "ValidatePlanShardParamsWithoutZeroOne", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["shard_parameters"] = true; })}},
     .message = "field 'shard_parameters': parameter sharding (ZeRO-3 / FSDP) needs the distributed optimizer (\"zero1\": true)"},
    {.name = "ValidatePlanShardParamsWithShardGradientsOff", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) {
        p["config"]["zero1"] = true;
        p["config"]["shard_parameters"] = true;
        p["config"]["shard_gradients"] = false;
      })}},
     .message = "field 'shard_gradients': off, but parameter sharding (ZeRO-3 / FSDP) implies gradient sharding"},
    {.name = "ValidatePlanOptimizerStateUnknown", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["optimizer_state"] = "int8"; })}},
     .message = "field 'optimizer_state': expected cluster, fp32, remainders, bf16 or bf16-moments, got \"int8\""},
    {.name = "ValidatePlanShardParamsNotABoolean", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["shard_parameters"] = "yes"; })}},
     .message = "field 'shard_parameters'"},
    {.name = "ValidatePlanWithAMissingInstruction", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["program"]["actors"][1].erase(0); })}},
     .exit_code = 1, .message = "INVALID", .report = Report::kList},

    // ---- simulate: configurations, clusters, stage times, schedule files, outputs. ----------
    {.name = "SimulateMissingGpus", .args = kSim + "--pp 2 --global-batch 8", .message = "--gpus"},
    {.name = "SimulateShardParamsWithoutZeroOne",
     .args = kSim + "--gpus 16 --pp 2 --dp 8 --global-batch 64 --shard-params --plan {dir}/p.json",
     .message = "--shard-params: parameter sharding (ZeRO-3 / FSDP) needs the distributed optimizer (--zero1)"},
    {.name = "SimulateOptimizerStateUnknown",
     .args = kSim + "--gpus 16 --pp 2 --dp 8 --global-batch 64 --optimizer-state int8 --plan {dir}/p.json",
     .message = "--optimizer-state: expected cluster, fp32, remainders, bf16 or bf16-moments, got \"int8\""},
    {.name = "SimulateOptimizerStateInMeasuredMode", .args = kMeasured + "--optimizer-state bf16",
     .message = "--optimizer-state: a model-mode flag"},
    {.name = "ExploreOptimizerStateUnknown", .args = kExplore + "--optimizer-state fp64",
     .message = "--optimizer-state: expected cluster, fp32, remainders, bf16 or bf16-moments, got \"fp64\""},
    {.name = "SimulateShardParamsInMeasuredMode", .args = kMeasured + "--shard-params",
     .message = "--shard-params: a model-mode flag"},
    {.name = "GraphShardParamsWithoutBalancedTime", .args = "graph --model gpt3-1.3b --pp 2 --shard-params",
     .message = "--shard-params"},
    {.name = "ExploreShardParamsWithZeroOneOff", .args = kExplore + "--zero1 off --shard-params on",
     .message = "--shard-params: parameter sharding (ZeRO-3 / FSDP) needs the distributed optimizer"},
    {.name = "SimulateGpusNotPpTpDp", .args = kSim + "--gpus 8 --pp 4 --tp 4 --global-batch 16",
     .message = "does not equal --gpus 8"},
    {.name = "SimulateExplicitModelWithHeadsNotDividingHidden",  // export handed it on
     .args = "simulate --schedule 1f1b --gpus 2 --pp 2 --global-batch 4 --model {dir}/m.json",
     .files = {{"m.json",
                [] {
                  json m = baseline().plan["model"];
                  m["heads"] = 3;
                  return m.dump(1);
                }}},
     .message = "{dir}/m.json: field 'heads': hidden (64) must be a multiple of heads (3)"},
    // graph: the flag that caused it (these named --pp, nothing, or "partition").
    {.name = "GraphVirtualStagesBeyondTheLayers",
     .args = "graph --model gpt3-1.3b --pp 2 --virtual 14",
     .message = "--pp x --virtual: 28 stages (pp 2 x virtual 14) but model 'gpt3-1.3b' has only "
                "26 layers"},
    {.name = "GraphPartitionStartsNotIncreasing",
     .args = "graph --model gpt3-1.3b --pp 2 --partition 0,0",
     .message = "--partition 0,0: partition entry 1: stage starts must be strictly increasing"},
    {.name = "GraphFirstStageFewerThanItHas",
     .args = "graph --model gpt3-1.3b --pp 2 --first-stage-fewer 100",
     .message = "--first-stage-fewer 100: partition: stage 0 would get -38 transformer layers"},
    {.name = "SimulateGpusBeyondTheLimit",  // a 32-bit node count wrapped: it ran as dp 8
     .args = kSim + "--gpus 2147483647 --pp 1 --dp 2147483647 --global-batch 2147483647",
     .message = "configuration: gpus: expected a number of GPUs in [1, 16777216], got 2147483647"},
    {.name = "CalibrateEmptyName",  // wrote "name": "" and later messages quoted "()"
     .args = "calibrate --quick --name '' -o {dir}/c.json",
     .message = "--name: expected a cluster name, got ''"},
    {.name = "CalibrateTooManyThreadsRanks",  // 1024 accepted: ranks² buffers, then an abort
     .args = "calibrate --quick --ranks 1000 -o {dir}/c.json",
     .message = "--ranks: expected a number of workers in [2, 128], got 1000"},
    {.name = "ExportTitleNotUtf8",  // written into the DOT file as it was
     .args = "export --trace {dir}/t.json --format dot -o {dir}/t.dot --title \"$(printf 'ab\\377\\376cd')\"",
     .files = {{"t.json", trace_with([](json&) {})}},
     .message = "--title:1:3: is not valid UTF-8 (byte 0xff at byte offset 2)"},
    {.name = "ExportTimelineOfAnEmptyTrace",  // drew a 0 to 1 s axis under "0 .. 0 s"
     .args = "export --trace {dir}/t.json --format svg -o {dir}/t.svg",
     .files = {{"t.json", trace_with([](json& t) {
                  t["events"] = json::array();
                  t["memory"] = json::array();
                })}},
     .message = "{dir}/t.json: the trace has no events: no timeline to draw"},
    {.name = "ExploreEmptyRecomputeList",  // ran the default policies
     .args = kExplore + "--recompute ''", .message = "--recompute: expected at least one policy"},
    {.name = "ExploreGpusBeyondTheLimit",
     .args = "explore --model gpt3-1.3b --gpus 2147483647 --global-batch 8 --quiet",
     .message = "--gpus: expected a number of GPUs in [1, 16777216], got 2147483647"},
    {.name = "SimulateTpNotDividingHeads", .args = kSim + "--gpus 6 --pp 2 --tp 3 --global-batch 16",
     .message = "tp 3 does not divide the 16 attention heads"},
    {.name = "SimulateZeroTp", .args = kSim + "--gpus 2 --pp 2 --tp 0 --global-batch 16",
     .message = "--tp: expected at least 1, got 0"},
    // These said "configuration: gpus, pp, tp, dp, cp, virtual stages, ... must all be >= 1".
    {.name = "SimulateEmptyPartition",  // was read as auto
     .args = kSim + "--gpus 2 --pp 2 --global-batch 16 --partition ''",
     .message = "--partition: expected auto, even, balanced-time or the first layer of each "
                "stage (e.g. 0,13,26), got ''"},
    {.name = "SimulateZeroVirtual", .args = kSim + "--gpus 2 --pp 2 --virtual 0 --global-batch 16",
     .message = "--virtual: expected at least 1, got 0"},
    {.name = "SimulateZeroMicrobatchSize",
     .args = kSim + "--gpus 2 --pp 2 --microbatch-size 0 --global-batch 16",
     .message = "--microbatch-size: expected at least 1, got 0"},
    {.name = "SimulateBatchNotDivisible", .args = kSim + "--gpus 4 --pp 2 --dp 2 --global-batch 3",
     .message = "not divisible"},
    {.name = "SimulateHugeGlobalBatch", .args = kSim + "--gpus 2 --pp 2 --global-batch 2000000000",
     .message = "microbatches is more than the limit"},
    {.name = "SimulatePlanThatDoesNotFit",
     .args = "simulate --model gpt3-175b --schedule 1f1b --gpus 8 --pp 8 --global-batch 16",
     .message = "does not fit"},
    {.name = "SimulateMalformedCluster", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(R"({"name": "c", "base": )")}}, .message = "malformed JSON"},
    {.name = "SimulateClusterFieldOfWrongType", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("hbm_gib", R"("lots")"))}},
     .message = "field 'hbm_gib': expected a number"},
    {.name = "SimulateClusterNegativeBandwidth", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("intra_node", R"({"bandwidth_gb_per_s": -5})"))}},
     .message = "field 'bandwidth_gb_per_s': expected a number > 0, got -5"},
    {.name = "SimulateClusterHugeMemory", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("hbm_gib", "1e300"))}},
     .message = "field 'hbm_gib': out of range"},
    {.name = "SimulateClusterZeroDevicesPerNode", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("devices_per_node", "0"))}},
     .message = "field 'devices_per_node'"},
    {.name = "SimulateClusterEfficiencyAboveOne", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("allreduce_bus_efficiency", "1.5"))}},
     .message = "expected a fraction in (0, 1]"},
    {.name = "SimulateClusterWithoutNameOrBase", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(R"({"hbm_gib": 80})")}}, .message = "missing (required)"},
    {.name = "SimulateUnknownCluster", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster h900",
     .message = "unknown cluster: not a preset and no such file"},
    {.name = "SimulateNegativeStageTime", .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f -1 --t-b 1",
     .message = "--t-f"},
    {.name = "SimulateZeroMicrobatches", .args = "simulate --schedule 1f1b --pp 2 --microbatches 0 --t-f 1 --t-b 1",
     .message = "must be >= 1"},
    {.name = "SimulateStageTimesForTooFewStages",
     .args = "simulate --schedule 1f1b --pp 4 --microbatches 4 --stage-times {dir}/t.json",
     .files = {{"t.json", text(R"({"stages": [{"t_f_ms": 1, "t_b_ms": 1, "t_w_ms": 0, "t_comm_ms": 0}]})")}},
     .message = "expected 4 entries (one per stage), got 1"},
    {.name = "SimulateStageTimesNegative",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times {dir}/t.json",
     .files = {{"t.json", text(R"({"t_f_ms": -1, "t_b_ms": 1, "t_w_ms": 1, "t_comm_ms": 0})")}},
     .message = "field 't_f_ms'"},
    {.name = "SimulateStageTimesTruncated",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times {dir}/t.json",
     .files = {{"t.json", truncated(text(R"({"t_f_ms": 1, "t_b_ms": 1, "t_w_ms": 1, "t_comm_ms": 0})"))}},
     .message = "malformed JSON"},
    {.name = "SimulateDeadlockingScheduleFile",
     .args = "simulate --schedule-file {data}/schedules/deadlock.json --pp 2 --microbatches 2 --t-f 1 --t-b 1",
     .message = "deadlock: no actor can make progress"},
    {.name = "SimulateScheduleFileMissingATask",
     .args = "simulate --schedule-file {data}/schedules/missing_task.json --pp 2 --microbatches 2 --t-f 1 --t-b 1",
     .message = "B1@s1 is missing"},
    {.name = "SimulateScheduleFileWithADuplicateTask",
     .args = "simulate --schedule-file {data}/schedules/duplicate_task.json --pp 2 --microbatches 2 --t-f 1 --t-b 1",
     .message = "B1@s1"},
    {.name = "SimulateScheduleFileForAnotherPp",
     .args = "simulate --schedule-file {data}/schedules/1f1b_p2_m4.csv --pp 3 --microbatches 4 --t-f 1 --t-b 1",
     .message = "the schedule has 2 actors but --pp is 3"},
    {.name = "SimulateScheduleFileForAnotherBatch",
     .args = "simulate --model gpt3-1.3b --gpus 2 --pp 2 --global-batch 8 --schedule-file {data}/schedules/1f1b_p2_m4.csv",
     .message = "the schedule has 4 microbatches but the configuration needs 8"},
    {.name = "SimulateTraceIntoMissingDirectory", .args = kMeasured + "--trace {dir}/missing/t.json",
     .message = "does not exist"},
    {.name = "SimulatePlanOntoADirectory", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --plan {dir}",
     .message = "is a directory"},
    {.name = "SimulatePlanWithoutAModel", .args = kMeasured + "--plan {dir}/plan.json",
     .message = "needs --model"},
    {.name = "SimulateSeqLensOfTheWrongCount",
     .args = kMeasured + "--perturb seq-lens=512*3,nominal-seq-len=512 --trace {dir}/t.json",
     .message = "--perturb: seq-lens gives 3 lengths but there are 4 microbatches"},
    {.name = "SimulateSeqLensFileWithAZero",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --perturb seq-lens=@{dir}/lens.txt "
             "--timeline {dir}/t.svg",
     .files = {{"lens.txt", text("2048\n2048\n0\n2048\n")}},
     .message = "the length of microbatch 2 in {dir}/lens.txt must be in [1, 4194304] tokens"},
    {.name = "SimulateSeqLensFileMissing",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --perturb seq-lens=@{dir}/none.txt",
     .message = "--perturb: 'seq-lens=@{dir}/none.txt': "},
    {.name = "SimulateSeqLensTooLongForTheModel",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --perturb seq-lens=2048:2048:2048:4194305",
     .message = "the length of microbatch 3 must be in [1, 4194304] tokens, got 4194305"},
    {.name = "GraphBalancedTimeWithoutSchedule",
     .args = "graph --model gpt3-1.3b --pp 2 --partition balanced-time --dot {dir}/g.dot",
     .message = "--schedule: required with --partition balanced-time"},

    // ---- export. ----------------------------------------------------------------------------
    {.name = "ExportWithoutOutput", .args = "export --trace {dir}/t.json",
     .files = {{"t.json", trace_with([](json&) {})}}, .message = "-o: required"},
    {.name = "ExportUnknownExtension", .args = "export --trace {dir}/t.json -o {dir}/x.bogus",
     .files = {{"t.json", trace_with([](json&) {})}}, .message = "cannot tell the format"},
    {.name = "ExportUnknownFormat", .args = "export --trace {dir}/t.json -o {dir}/x.txt --format bmp",
     .files = {{"t.json", trace_with([](json&) {})}}, .message = "unknown format 'bmp'"},
    {.name = "ExportPngToStdout", .args = "export --trace {dir}/t.json -o - --format png",
     .files = {{"t.json", trace_with([](json&) {})}}, .message = "cannot write png to stdout"},
    {.name = "ExportIntoMissingDirectory", .args = "export --trace {dir}/t.json -o {dir}/missing/x.svg",
     .files = {{"t.json", trace_with([](json&) {})}}, .message = "does not exist"},
    {.name = "ExportBothInputs", .args = "export --trace {dir}/t.json --plan {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json&) {})}}, .message = "give exactly one input"},
    {.name = "ExportTaskGraphOfATrace", .args = "export --trace {dir}/t.json --view taskgraph -o {dir}/x.dot",
     .files = {{"t.json", trace_with([](json&) {})}}, .message = "needs --plan"},
    {.name = "ExportNarrowWidth", .args = "export --trace {dir}/t.json -o {dir}/x.txt --width 5",
     .files = {{"t.json", trace_with([](json&) {})}}, .message = "--width: must be >= 10"},
    {.name = "ExportTraceOfAnotherVersion", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["version"] = 2; })}},
     .message = "unsupported trace version 2"},
    {.name = "ExportTraceOfAnotherFormat", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", plan_with([](json&) {})}}, .message = "field 'format'"},
    {.name = "ExportTraceActorOutOfRange", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"][3]["actor"] = 7; })}},
     .message = "events[3]: field 'actor'"},
    {.name = "ExportTraceEndBeforeStart", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"][3]["end_s"] = -1; })}},
     .message = "events[3]: field 'end_s'"},
    {.name = "ExportTraceHugeActorCount", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["num_actors"] = 2000000000; })}},
     .message = "field 'num_actors': too large"},
    {.name = "ExportTruncatedTrace", .args = "export --trace {dir}/t.json -o {dir}/x.svg",
     .files = {{"t.json", truncated(trace_with([](json&) {}))}}, .message = "malformed JSON"},
    {.name = "ExportPlanOfAnotherVersion", .args = "export --plan {dir}/plan.json -o {dir}/x.txt",
     .files = {{"plan.json", plan_with([](json& p) { p["version"] = 0; })}},
     .message = "unsupported plan version 0"},

    // ---- numbers at their edges (issue 16, class 3): checked after the unit conversion. ------
    {.name = "SimulateDenormalStageTimeFlag",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1e-320 --t-b 1",
     .message = "--t-f: expected a time in milliseconds from 1e-06 (1 ns) to 3.6e+06 (1 h)"},
    {.name = "SimulateHugeStageTimeFlag",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1e300",
     .message = "--t-b: expected a time in milliseconds from 1e-06 (1 ns) to 3.6e+06 (1 h), got 1e+300"},
    {.name = "SimulateStageTimesFileDenormal",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times {dir}/t.json",
     .files = {{"t.json", text(R"({"t_f_ms": 1e-320, "t_b_ms": 1})")}},
     .message = "t.json: field 't_f_ms': expected a time in milliseconds"},
    {.name = "SimulateStageTimesFileHugeComm",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times {dir}/t.json",
     .files = {{"t.json", text(R"({"t_f_ms": 1, "t_b_ms": 1, "t_comm_ms": 1e300})")}},
     .message = "field 't_comm_ms': expected a time in milliseconds of 0 or from 1e-06"},
    {.name = "SimulatePpTimesVirtualBeyondInt",
     .args = "simulate --schedule interleaved-1f1b --pp 65536 --virtual 65536 --microbatches 4 --t-f 1 --t-b 1",
     .message = "--pp x --virtual: 65536 x 65536 = 4294967296 is more than the limit of 16384"},
    {.name = "SimulateModelPpTimesVirtualBeyondInt",
     .args = kSim + "--gpus 2 --pp 2 --virtual 1073741824 --global-batch 4",
     .message = "pp 2 x virtual 1073741824 stages is more than the limit of 16384"},
    {.name = "SimulateClusterDenormalLatency", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("intra_node", R"({"latency_us": 1e-320})"))}},
     .message = "field 'latency_us': out of range: expected 0, or 1 ps to 1 s, got 1e-320"},
    {.name = "SimulateClusterDenormalBandwidth", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("inter_node", R"({"bandwidth_gb_per_s": 1e-320})"))}},
     .message = "field 'bandwidth_gb_per_s': out of range: expected 1 kB/s to 100 TB/s"},
    {.name = "SimulateClusterHugeHbmBandwidth", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("hbm_bandwidth_gb_per_s", "1e300"))}},
     .message = "field 'hbm_bandwidth_gb_per_s': out of range: expected 1 kB/s to 100 TB/s"},
    {.name = "SimulateClusterHugeBytesPerParam", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("weight_bytes_per_param", "1e300"))}},
     .message = "field 'weight_bytes_per_param': out of range: expected 0.5 to 64 bytes per parameter"},
    {.name = "SimulateClusterZeroGradBytesPerParam", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("grad_bytes_per_param", "0"))}},
     .message = "field 'grad_bytes_per_param': expected a number > 0"},
    {.name = "SimulateClusterDenormalPeak", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("peak_tflops", R"({"bf16": 1e-300})"))}},
     .message = "field 'bf16': out of range: expected 0 (unsupported), or 1 MFLOP/s to 1 EFLOP/s"},
    {.name = "SimulateClusterHugePeak", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("peak_tflops", R"({"bf16": 1e10})"))}},
     .message = "field 'bf16': out of range"},
    {.name = "SimulateClusterSmsThatWrapAnInt", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("kernels", R"({"sms": 4294967297})"))}},
     .message = "field 'sms': too large (the limit is 100000)"},
    {.name = "SimulateClusterDenormalEfficiency", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("allreduce_bus_efficiency", "1e-320"))}},
     .message = "field 'allreduce_bus_efficiency': out of range: expected a fraction in [0.0001, 1]"},
    {.name = "SimulateClusterHugeIterationOverhead", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("iteration_overhead_ms", "1e300"))}},
     .message = "field 'iteration_overhead_ms': out of range: expected 0, or 1 ps to 1 h"},
    {.name = "GraphPpTimesVirtualBeyondInt", .args = "graph --model gpt3-1.3b --pp 65536 --virtual 65536",
     .message = "--pp x --virtual: 65536 x 65536 = 4294967296 is more than the limit"},
    {.name = "GraphExplicitLayerHugeFlops", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", text(explicit_layer_with("fwd_flops", "1e300"))}},
     .message = "field 'fwd_flops': too large: 1e+300 (the limit is 1e21 FLOPs per layer pass)"},
    {.name = "GraphExplicitModelHiddenBeyondTheLimit", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", [] {
        json m = json::parse(explicit_layer_with("params", "10"));
        m["hidden"] = 2147483647;
        return m.dump(); }}},
     .message = "field 'hidden': too large: 2147483647"},
    {.name = "RunPpTimesVirtualBeyondInt", .args = kRun + "--virtual 1073741824",
     .message = "--pp x --virtual: 2 x 1073741824 = 2147483648 is more than the limit"},
    {.name = "RunHugeTimeout", .args = kRun + "--timeout-s 1e300",
     .message = "--timeout-s: expected seconds in [0.001, 86400], got 1e+300"},
    {.name = "RunDenormalTimeout", .args = kRun + "--timeout-s 1e-320",
     .message = "--timeout-s: expected seconds in [0.001, 86400]"},
    {.name = "RunHugeTimeScale", .args = kRun + "--time-scale 1e300",
     .message = "--time-scale: expected a factor in [0, 1000], got 1e+300"},
    {.name = "RunStepsPlusWarmupBeyondTheLimit",
     .args = "run --schedule 1f1b --pp 2 --microbatches 2 --steps 100000 --warmup 100000",
     .message = "--steps 100000 + --warmup 100000 is more than the limit of 100000 steps"},
    {.name = "RunHugeStepCount", .args = "run --schedule 1f1b --pp 2 --microbatches 2 --steps 2000000000",
     .message = "--steps: expected a number of steps in [1, 100000], got 2000000000"},
    {.name = "RunHiddenBeyondTheLimit", .args = kRunNoHidden + "--hidden 2147483647",
     .message = "--hidden: expected a width in [1, 1048576], got 2147483647"},
    {.name = "RunInjectKillBeyondInt", .args = kRun + "--inject-kill 1:99999999999",
     .message = "--inject-kill: expected ACTOR:INSTRUCTION (two integers >= 0 that fit in an int)"},
    // Fault injections that cannot take effect (sweep 5): they ran and exited 0.
    {.name = "RunInjectDropOfATagNoMessageHas", .args = kRun + "--inject-drop 999",
     .message = "--inject-drop 999: no message of the program has tag 999 (tags 0.."},
    {.name = "RunInjectDropOfANegativeTag", .args = kRun + "--inject-drop -7",
     .message = "--inject-drop -7: no message of the program has tag -7 (tags 0.."},
    {.name = "RunInjectKillOfAnActorBeyondTheProgram", .args = kRun + "--inject-kill 7:3",
     .message = "--inject-kill 7:3: actor 7 is beyond the program's 2 actors (0..1)"},
    {.name = "RunInjectKillOfAnInstructionBeyondTheActor", .args = kRun + "--inject-kill 0:99999",
     .message = "--inject-kill 0:99999: actor 0 has "},
    {.name = "RunInjectWithoutCheck", .args = kRun + "--inject corrupt-grad",
     .message = "--inject corrupt-grad: plants a numerical fault for --check to catch; give "
                "--check"},
    {.name = "RunTimelineOfAnUnknownExtension", .args = kRun + "--timeline {dir}/out.TXT",
     .message = "--timeline {dir}/out.TXT: unknown extension '.TXT' (expected .svg, .png, .dot"},
    {.name = "RunTimeoutShorterThanAnEmulatedCompute",
     .args = "run --schedule 1f1b --pp 2 --microbatches 2 --compute emulated --stage-times "
             "{dir}/st.json --timeout-s 1 --steps 1 --warmup 0",
     .files = {{"st.json", text(R"({"t_f_ms": 2000, "t_b_ms": 10})")}},
     .message = "--timeout-s 1 is shorter than the emulated 'F0@s0' of actor 0 (2 s)"},
    {.name = "ExportHugeWidth", .args = "export --trace {dir}/t.json -o {dir}/x.txt --width 2000000000",
     .files = {{"t.json", trace_with([](json&) {})}},
     .message = "--width: expected a number of columns in [10, 10000], got 2000000000"},
    {.name = "ExportHugePictureWidth", .args = "export --trace {dir}/t.json -o {dir}/x.svg --width 1000000",
     .files = {{"t.json", trace_with([](json&) {})}},
     .message = "--width: expected a width in points in [10, 20000], got 1000000"},
    {.name = "ExploreDenormalMemoryLimit", .args = kExplore + "--max-memory-gib 1e-320",
     .message = "--max-memory-gib: expected 1 MiB to 1 PiB"},
    {.name = "ExploreHugeMemoryLimit", .args = kExplore + "--max-memory-gib 1e300",
     .message = "--max-memory-gib: expected 1 MiB to 1 PiB (0.0009765625 to 1048576), got 1e+300"},
    {.name = "CalibrateHugeTimeout", .args = "calibrate --quick --timeout-s 1e300",
     .message = "--timeout-s: expected seconds in [0.001, 86400], got 1e+300"},

    // ---- outputs (issue 16, class 6): never an input, never twice, all or none. ------------
    {.name = "SimulatePlanOntoTheModelFile",
     .args = "simulate --model {dir}/m.json --gpus 2 --pp 2 --global-batch 4 --schedule 1f1b --plan {dir}/m.json",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--plan {dir}/m.json: is also the input --model; refusing to overwrite an input"},
    {.name = "SimulateTraceOntoTheClusterFileByAnotherName",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json --trace {dir}/./c.json",
     .files = {{"c.json", text(cluster_with("hbm_gib", "80"))}},
     .message = "is also the input --cluster; refusing to overwrite an input"},
    {.name = "SimulateTimelineOntoTheStageTimes",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times {dir}/t.json --timeline {dir}/t.json",
     .files = {{"t.json", text(R"({"t_f_ms": 1, "t_b_ms": 1})")}},
     .message = "--timeline {dir}/t.json: is also the input --stage-times"},
    {.name = "SimulateTwoOutputsToOneFile",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --plan {dir}/out.json --trace {dir}/out.json",
     .message = "is also the output of --trace (two outputs cannot share a file)"},
    {.name = "SimulateOutputThroughASymlink",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --plan {dir}/link.json",
     .files = {{"target.json", text("{}")}, symlink_to("link.json", "target.json")},
     .message = "--plan {dir}/link.json: is a symbolic link; refusing to replace it"},
    {.name = "SimulateOutputOntoADevice", .args = kMeasured + "--trace /dev/null",
     .message = "--trace /dev/null: is not a regular file (a device, FIFO or socket)"},
    {.name = "SimulateOutputOntoAFifo", .args = kMeasured + "--trace {dir}/fifo",
     .files = {fifo("fifo")}, .message = "is not a regular file (a device, FIFO or socket)"},
    {.name = "SimulateTwoOutputsOnStdout", .args = kMeasured + "--trace - --plan -",
     .message = "--plan -: stdout is already the output of --trace (at most one output may be '-')"},
    {.name = "SimulateJsonAndAnOutputOnStdout", .args = kMeasured + "--trace - --json",
     .message = "--json: cannot share stdout with --trace -"},
    {.name = "SimulateTimelineOnStdoutHasNoFormat", .args = kMeasured + "--timeline -",
     .message = "--timeline -: unknown extension"},
    {.name = "SimulateThatDoesNotFitWritesNoOutput",
     .args = "simulate --model gpt3-175b --schedule 1f1b --gpus 8 --pp 8 --global-batch 16 "
             "--trace {dir}/t.json --plan {dir}/p.json --timeline {dir}/t.txt",
     .message = "does not fit"},
    {.name = "ExportOutputOntoItsTrace", .args = "export --trace {dir}/t.json -o {dir}/t.json",
     .files = {{"t.json", trace_with([](json&) {})}},
     .message = "-o {dir}/t.json: is also the input --trace; refusing to overwrite an input"},
    {.name = "ExportOutputOntoItsPlan", .args = "export --plan {dir}/p.json --format text -o {dir}/p.json",
     .files = {{"p.json", plan_with([](json&) {})}},
     .message = "is also the input --plan"},
    {.name = "ExportJsonSummaryWithStdoutOutput", .args = "export --trace {dir}/t.json -o - --format text --json",
     .files = {{"t.json", trace_with([](json&) {})}},
     .message = "--json: cannot share stdout with -o -"},
    {.name = "GraphDotOntoTheModelFile", .args = "graph --model {dir}/m.json --pp 2 --dot {dir}/m.json",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--dot {dir}/m.json: is also the input --model"},
    {.name = "GraphDotOnStdoutWithJson", .args = "graph --model gpt3-1.3b --pp 2 --dot - --json",
     .message = "--json: cannot share stdout with --dot -"},
    {.name = "ShowExportOntoTheScheduleFile",
     .args = "show --schedule-file {dir}/s.csv --export-csv {dir}/s.csv",
     .files = {{"s.csv", text("0F0,0B0\n1F0,1B0\n")}},
     .message = "--export-csv {dir}/s.csv: is also the input --schedule-file"},
    {.name = "ShowTwoExportsToOneFile",
     .args = "show --schedule 1f1b --pp 2 --microbatches 2 --export-csv {dir}/s.txt --export-json {dir}/s.txt",
     .message = "is also the output of --export-csv"},
    {.name = "RunTraceOntoThePlan", .args = "run {dir}/plan.json --steps 1 --warmup 0 --trace {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json&) {})}},
     .message = "--trace {dir}/plan.json: is also the input --plan"},
    {.name = "RunReportAndTimelineToOneFile",
     .args = kRun + "--report {dir}/r.txt --timeline {dir}/r.txt",
     .message = "--report {dir}/r.txt: is also the output of --timeline"},
    {.name = "ExplorePlanOntoTheClusterFile",
     .args = kExplore + "--cluster {dir}/c.json --plan {dir}/c.json",
     .files = {{"c.json", text(cluster_with("hbm_gib", "80"))}},
     .message = "--plan {dir}/c.json: is also the input --cluster"},
    {.name = "ExploreCsvAndPlanToOneFile", .args = kExplore + "--csv {dir}/x --plan {dir}/x",
     .message = "is also the output of --plan"},
    {.name = "ExploreNothingFitsWritesNoCsv",
     .args = "explore --model gpt3-175b --gpus 8 --global-batch 8 --max-memory-gib 1 --quiet --csv {dir}/all.csv",
     .message = "no configuration fits in 1 GiB"},
    {.name = "CalibrateOutputOntoItsTrace", .args = "calibrate --from-trace {dir}/t.json -o {dir}/t.json",
     .files = {{"t.json", measured_trace_with([](json&) {})}},
     .message = "-o {dir}/t.json: is also the input --from-trace"},
    {.name = "ValidateModelOutOntoTheCorpus", .args = "validate-model --corpus {dir}/c.json --out {dir}/c.json",
     .files = {{"c.json", corpus_with([](json&) {})}},
     .message = "--out {dir}/c.json: is also the input --corpus"},
    // A row's model file is an input: neither the report nor an explained row's model copy may
    // replace it (the row is b-tiny, whose model is the file m.json beside the corpus).
    {.name = "ValidateModelOutOntoARowsModelFile",
     .args = "validate-model --corpus {dir}/c.json --out {dir}/m.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][2]["model"] = "m.json"; })},
               {"m.json", [] { return read_file(std::string(JAXPP_TEST_DATA_DIR) +
                                                "/corpus/tiny_transformer.json"); }}},
     .message = "--out {dir}/m.json: is also the input (the model of row 'b-tiny')"},
    {.name = "ValidateModelPlanOutOntoARowsModelFile",
     .args = "validate-model --corpus {dir}/c.json --row b-tiny --explain --plan-out {dir}",
     .files = {{"c.json", corpus_with([](json& c) {
                  c["rows"][2]["model"] = "b-tiny.model.json";
                  c["rows"][2]["seq_len"] = 64;  // differs from the file's: a model copy is written
                })},
               {"b-tiny.model.json", [] { return read_file(std::string(JAXPP_TEST_DATA_DIR) +
                                                           "/corpus/tiny_transformer.json"); }}},
     .message = "--plan-out (row 'b-tiny', model) {dir}/b-tiny.model.json: is also the input (the "
                "model of row 'b-tiny')"},
    {.name = "DemoBadInputCreatesNoDirectory", .args = "demo --out {dir}/demo --gpus 0",
     .message = "--gpus"},
    {.name = "DemoOutIsAFile", .args = "demo --out {dir}/f", .files = {{"f", text("x")}},
     .message = "--out {dir}/f: exists and is not a directory"},
    // Every step ran (PASS printed) before this was found.
    {.name = "DemoOutUnderAFile", .args = "demo --out {dir}/f/sub", .files = {{"f", text("x")}},
     .message = "--out {dir}/f/sub: cannot create the directory ({dir}/f is not a directory)"},

    // ---- export: physically impossible traces (issue 16, class 7). --------------------------
    {.name = "ExportTraceOverlappingComputes", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with(overlap_two_computes)}},
     .message = "field 'start_s': overlaps events[0] on stream compute of actor 0"},
    {.name = "ExportTraceOverlappingSends", .args = "export --trace {dir}/t.json -o {dir}/x.svg",
     .files = {{"t.json", trace_with([](json& t) {
        t["events"][event_index(t, 0, "send", 1)]["start_s"] =
            t["events"][event_index(t, 0, "send", 0)]["start_s"]; })}},
     .message = "on stream send->1 of actor 0"},
    {.name = "ExportTraceNegativeDuration", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) {
        json& e = t["events"][event_index(t, 1, "compute", 0)];
        e["end_s"] = e["start_s"].get<double>() / 2; })}},
     .message = "field 'end_s': expected a number >= start_s"},
    {.name = "ExportTraceInstructionThatWrapsAnInt", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"][2]["instruction"] = 4294967296LL; })}},
     .message = "events[2]: field 'instruction': expected an integer in [0, 2147483647]"},
    {.name = "ExportTracePeerThatWrapsAnInt", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"][1]["peer"] = 4294967297LL; })}},
     .message = "events[1]: field 'peer': expected an integer in [-1, 1]"},
    {.name = "ExportTraceStageThatWrapsAnInt", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"][0]["stage"] = 4294967296LL; })}},
     .message = "events[0]: field 'stage': expected an integer in [-1,"},
    {.name = "ExportTraceStepBeyondNumSteps", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"][4]["step"] = 3; })}},
     .message = "events[4]: field 'step': expected an integer in [0, 0], got 3"},
    {.name = "ExportTraceInstructionRecordedTwice", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"][2]["instruction"] = 0; })}},
     .message = "events[2]: field 'instruction': actor 0, step 0, instruction 0 is recorded twice"},
    {.name = "ExportTraceStreamContradictsOp", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"][0]["stream"] = "collective"; })}},
     .message = "events[0]: field 'stream': a compute with peer -1 runs on stream \"compute\""},
    {.name = "ExportTraceSendToItself", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) {
        json& e = t["events"][event_index(t, 0, "send", 0)];
        e["peer"] = 0;
        e.erase("stream"); })}},
     .message = "field 'peer': a send needs a peer actor other than its own (0), got 0"},
    {.name = "ExportTraceEndAtTheEndOfTime", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"].back()["end_s"] = 1e302; })}},
     .message = "field 'end_s': expected a time in seconds <= 1e9"},
    {.name = "ExportTraceMemorySampleAtTheEndOfTime", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["memory"][0]["time_s"] = 1e300; })}},
     .message = "memory[0]: field 'time_s': expected a time in seconds <= 1e9"},
    {.name = "ExportTraceNegativeTag", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"][1]["tag"] = -5; })}},
     .message = "events[1]: field 'tag': expected -1 or a tag >= 0, got -5"},

    // ---- run. -------------------------------------------------------------------------------
    {.name = "RunUnknownBackend", .args = kRun + "--backend gpu", .message = "gpu"},
    {.name = "RunCheckWithEmulatedCompute",
     .args = "run --schedule 1f1b --pp 2 --microbatches 2 --steps 1 --warmup 0 --compute emulated "
             "--check",
     .message = "--check needs --compute real"},
    {.name = "RunMissingPlanFile", .args = "run {dir}/plan.json", .message = "plan.json"},
    {.name = "RunPlanOfAnotherVersion", .args = "run {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["version"] = 2; })}},
     .message = "unsupported plan version 2"},
    {.name = "RunPlanOfAnotherFormat", .args = "run {dir}/plan.json",
     .files = {{"plan.json", trace_with([](json&) {})}}, .message = "not a jaxpp-sim plan"},
    {.name = "RunPlanWithAMissingInstruction", .args = "run {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["program"]["actors"][1].erase(0); })}},
     .message = "{dir}/plan.json: program: actor 1"},  // named no file
    {.name = "ExportPlanWithAStageOutOfRange", .args = "export --plan {dir}/plan.json -o {dir}/t.txt",
     .files = {{"plan.json", plan_with([](json& p) { p["program"]["actors"][0][0]["stage"] = 5; })}},
     .message = "{dir}/plan.json: program: actor 0, instruction 0"},
    {.name = "RunCompareWithTimeScaleZero",  // printed "error +0.0%" against a 0 s prediction
     .args = kRun + "--compute emulated --time-scale 0 --compare",
     .message = "--time-scale 0: predicts 0 s for every instruction; --compare needs a factor > 0"},
    {.name = "RunZeroSteps", .args = kRun + "--steps 0", .message = "--steps"},
    // Sweep 6.
    {.name = "SimulateVScheduleWithAVirtualItCannotRun",
     .args = "simulate --model gpt3-1.3b --gpus 4 --pp 2 --dp 2 --global-batch 16 --schedule zb-v "
             "--virtual 1",
     .message = "--virtual 1: schedule zb-v runs 2 stages per actor; give --virtual 2 or leave it "
                "out"},
    {.name = "SimulateMeasuredVScheduleWithAVirtualItCannotRun",
     .args = "simulate --schedule zb-v --pp 2 --microbatches 4 --t-f 1 --t-b 1 --virtual 1",
     .message = "--virtual 1: schedule ZB-V runs 2 stages per actor; give --virtual 2 or leave it "
                "out"},
    {.name = "SimulateTraceOverTheSequenceLengthsFile",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --perturb seq-lens=@{dir}/lens.txt "
                    "--trace {dir}/lens.txt",
     .files = {{"lens.txt", text("2048\n2048\n2048\n2048\n")}},
     .message = "--trace {dir}/lens.txt: is also the input --perturb seq-lens=@; refusing to "
                "overwrite an input"},
    {.name = "SimulatePerturbALinkToItself", .args = kMeasured + "--perturb slow-link=0-0:2",
     .message = "--perturb: 'slow-link=0-0:2': a link joins two different actors"},
    {.name = "SimulatePerturbAnActorTwice",
     .args = kMeasured + "--perturb slow-actor=0:2,slow-actor=0:3",
     .message = "--perturb: 'slow-actor=0:3': actor 0 is slowed twice (give one factor per actor)"},
    {.name = "SimulatePerturbALinkTwiceInBothDirections",
     .args = kMeasured + "--perturb slow-link=0-1:2,slow-link=1-0:3",
     .message = "the link 1-0 is slowed twice"},
    {.name = "SimulatePlanOverAHeterogeneousKindsFile",
     .args = "simulate --model gpt3-1.3b --cluster {dir}/het.json --global-batch 4 --schedule 1f1b "
             "--plan {dir}/k1.json",
     .files = {{"k1.json", text(R"({"base": "h100-sxm"})")},
               {"het.json", text(R"({"name": "mix", "kinds": [{"file": "k1.json", "gpus": 2},
                                      {"preset": "a100-80g", "gpus": 2}]})")}},
     .message = "--plan {dir}/k1.json: is also the input --cluster kind 'h100-sxm'; refusing to "
                "overwrite an input"},
    {.name = "SimulateTraceOfAStepPastWhatATraceHolds",
     .args = "simulate --model gpt3-175b --cluster {dir}/slow.json --gpus 8 --pp 8 --global-batch 8 "
             "--schedule 1f1b --no-memory-check --trace {dir}/t.json",
     .files = {{"slow.json",
                text(R"({"base": "a100-80g", "name": "slow", "peak_tflops": {"bf16": 1e-6}})")}},
     .message = "--trace: the simulated step lasts"},
    {.name = "CalibrateNameWithANewline",
     .args = "calibrate --from-trace {dir}/t.json --name \"$(printf 'a\\nb')\" -o {dir}/c.json",
     .files = {{"t.json", measured_trace_with([](json&) {})}},
     .message = "--name: contains a control character (it is printed in reports and written into "
                "plans), got \"a\\nb\""},
    {.name = "CalibrateNameThatIsNotUtf8",
     .args = "calibrate --from-trace {dir}/t.json --name \"$(printf '\\377')\" -o {dir}/c.json",
     .files = {{"t.json", measured_trace_with([](json&) {})}},
     .message = "--name:1:1: is not valid UTF-8 (byte 0xff at byte offset 0)"},
    // Flags the chosen compute cannot use (they were ignored, exit 0).
    {.name = "RunEmulatedWithTheMlpWorkloadsLearningRate",
     .args = "run --schedule 1f1b --pp 2 --microbatches 2 --steps 1 --warmup 0 --compute emulated "
             "--lr 5",
     .message = "--lr: sets the MLP workload, which only --compute real runs"},
    {.name = "RunRealComputeWithATimeScale", .args = kRun + "--time-scale 1000",
     .message = "--time-scale: scales the emulated durations: it needs --compute emulated"},
    {.name = "RunNegativeWarmup", .args = kRun + "--warmup -1", .message = "--warmup"},
    {.name = "RunZeroDp", .args = kRun + "--dp 0", .message = "--dp"},
    {.name = "RunZeroHidden", .args = kRun + "--hidden 0", .message = "--hidden"},
    {.name = "RunHiddenBeyondHostMemory", .args = kRunNoHidden + "--hidden 1000000",
     .message = "needs about"},
    {.name = "RunNegativeLearningRate", .args = kRun + "--lr -1", .message = "--lr"},
    {.name = "RunNegativeFfn", .args = kRun + "--ffn -4", .message = "--ffn"},
    {.name = "RunHugeMicrobatchCount", .args = "run --schedule 1f1b --pp 2 --hidden 8 --seq 4 --layers-per-stage 1 --steps 1 --warmup 0 --microbatches 2000000000",
     .message = "microbatches is more than the limit"},
    {.name = "RunMalformedInjectKill", .args = kRun + "--inject-kill x",
     .message = "expected ACTOR:INSTRUCTION"},
    {.name = "RunNegativeTimeout", .args = kRun + "--timeout-s -1", .message = "--timeout-s"},
    {.name = "RunUnknownOptimizer", .args = kRun + "--optimizer lamb", .message = "lamb"},
    {.name = "RunStageTimesOfAnotherKind", .args = kRun + "--stage-times {dir}/t.json",
     .files = {{"t.json", plan_with([](json&) {})}}, .message = "unknown field"},
    {.name = "RunTraceIntoMissingDirectory", .args = kRun + "--trace {dir}/missing/t.json",
     .message = "does not exist"},
    {.name = "RunDroppedMessageTimesOut", .args = kRun + "--timeout-s 1 --inject-drop 0",
     .exit_code = 1, .message = "timed out after 1 s waiting for tag"},
    {.name = "RunUnderMpirunWithARankKilledMidStep",
     .args = "run --backend mpi --schedule 1f1b --pp 3 --microbatches 3 --hidden 8 --seq 4 "
             "--layers-per-stage 1 --steps 2 --warmup 1 --timeout-s 2 --inject-kill 1:2",
     .exit_code = 3, .message = "injected fault: actor 1 (replica 0), step 0, instruction 2",
     .report = Report::kMpirun, .mpi_processes = 3},
    {.name = "RunUnderMpirunWithTooFewRanks",
     .args = "run --backend mpi --schedule 1f1b --pp 3 --microbatches 3 --hidden 8 --seq 4 "
             "--layers-per-stage 1 --steps 1 --warmup 0",
     .message = "needs 3 actors x 1 replicas = 3 processes, but mpirun started 2",
     .report = Report::kMpirun, .mpi_processes = 2},
    {.name = "RunUnderMpirunWithTooManyRanks",
     .args = "run --backend mpi --schedule 1f1b --pp 2 --microbatches 2 --hidden 8 --seq 4 "
             "--layers-per-stage 1 --steps 1 --warmup 0",
     .message = "but mpirun started 3", .report = Report::kMpirun, .mpi_processes = 3},
    {.name = "RunThreadsBackendUnderMpirun",  // issue 16, class 5: would run twice
     .args = "run --schedule 1f1b --pp 2 --microbatches 2 --hidden 8 --seq 4 "
             "--layers-per-stage 1 --steps 1 --warmup 0",
     .message = "--backend threads: this process is one of 2 that an MPI launcher started",
     .report = Report::kMpirun, .mpi_processes = 2},

    // ---- demo. ------------------------------------------------------------------------------
    {.name = "DemoUnknownFlag", .args = "demo --bogus", .message = "bogus"},

    // ---- explore. ---------------------------------------------------------------------------
    {.name = "ExploreWithoutGlobalBatch", .args = "explore --model gpt3-1.3b --gpus 8",
     .message = "--global-batch: required"},
    {.name = "ExploreZeroGpus", .args = "explore --model gpt3-1.3b --global-batch 8 --quiet --gpus 0", .message = "--gpus: expected a number of GPUs in [1, 16777216], got 0"},
    {.name = "ExploreUnknownSchedule", .args = kExplore + "--schedules 1f1b,fancy",
     .message = "unknown schedule 'fancy'"},
    {.name = "ExplorePpThatDoesNotDivideTheGpus", .args = kExplore + "--pp 3",
     .message = "does not divide 8 GPUs"},
    {.name = "ExploreMalformedTpList", .args = kExplore + "--tp 2,x",
     .message = "--tp: expected a comma-separated list of positive integers"},
    {.name = "ExploreRobustWithTopZero",  // printed an empty "Robust ranking" table
     .args = kExplore + "--robust 2 --top 0",
     .message = "--top 0: --robust reranks the --top best configurations: give --top >= 1"},
    {.name = "ExploreNegativeThreads", .args = kExplore + "--threads -1", .message = "--threads"},
    {.name = "ExploreNegativeMemoryLimit", .args = kExplore + "--max-memory-gib -1",
     .message = "--max-memory-gib: must be > 0"},
    {.name = "ExploreNothingFits",
     .args = "explore --model gpt3-175b --gpus 8 --global-batch 8 --max-memory-gib 1 --quiet",
     .message = "no configuration fits in 1 GiB"},
    {.name = "ExplorePartitionStageList", .args = kExplore + "--partition 0,5",
     .message = "--partition: explore takes auto, even or balanced-time"},
    {.name = "ExploreBalancedTimeWithBoundPrune",
     .args = kExplore + "--partition balanced-time --bound-prune",
     .message = "--bound-prune: bounds the automatic partition only"},
    {.name = "SimulateBalancedTimeNothingFits",
     .args = kSim + "--gpus 4 --pp 4 --global-batch 8 --partition balanced-time "
                    "--max-memory-gib 0.01 --plan {dir}/p.json",
     .message = "--partition balanced-time: no partition fits in 0.01 GiB per device; the least "
                "peak memory of any partition is "},
    {.name = "SimulateUnknownPartitionMode",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --partition fastest",
     .message = "--partition: expected auto, even, balanced-time or"},
    {.name = "SimulateNegativeMemoryLimit",
     .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --max-memory-gib -1",
     .message = "--max-memory-gib: must be > 0"},
    {.name = "SimulateMemoryLimitInMeasuredMode",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 --max-memory-gib 8",
     .message = "--max-memory-gib"},
    {.name = "ExploreUnknownZero1Mode", .args = kExplore + "--zero1 maybe",
     .message = "--zero1: expected off, on or both"},
    {.name = "ExploreUnknownFormat", .args = kExplore + "--format xml", .message = "--format"},
    {.name = "ExploreHugeGlobalBatch",
     .args = "explore --model gpt3-1.3b --gpus 8 --global-batch 2000000000 --quiet",
     .message = "microbatches is more than the limit"},
    {.name = "ExploreTruncatedModel",
     .args = "explore --model {dir}/m.json --gpus 8 --global-batch 8 --quiet",
     .files = {{"m.json", truncated(text(kTinyModel))}}, .message = "malformed JSON"},
    {.name = "ExploreClusterWithHugeMemory", .args = kExplore + "--cluster {dir}/c.json",
     .files = {{"c.json", text(cluster_with("hbm_gib", "1e300"))}},
     .message = "field 'hbm_gib': out of range"},
    {.name = "ExplorePlanIntoMissingDirectory", .args = kExplore + "--plan {dir}/missing/p.json",
     .message = "does not exist"},
    {.name = "ExploreCsvOntoADirectory", .args = kExplore + "--csv {dir}",
     .message = "is a directory"},

    // ---- calibrate. -------------------------------------------------------------------------
    {.name = "CalibrateUnknownBackend", .args = "calibrate --backend gpu",
     .message = "--backend: expected threads, mpi or cuda"},
    {.name = "CalibrateZeroRounds", .args = "calibrate --rounds 0", .message = "--rounds"},
    // A trace without a recorded workload (older runs): its transfer sizes tell.
    {.name = "CalibrateTraceOfAnotherSize",
     .args = "calibrate --from-trace {dir}/t.json --hidden 64 --seq 4 --layers-per-stage 1",
     .files = {{"t.json", measured_trace_with([](json& t) { t.erase("workload"); })}},
     .message = "--hidden/--seq"},
    {.name = "CalibrateTraceOfAnotherRecordedWorkload",
     .args = "calibrate --from-trace {dir}/t.json --hidden 64",
     .files = {{"t.json", measured_trace_with([](json&) {})}},
     .message = "--hidden 64: {dir}/t.json was recorded by a run with --hidden 8 (its field "
                "'workload')"},
    {.name = "CalibrateTraceOfAnotherRecordedOptimizer",
     .args = "calibrate --from-trace {dir}/t.json --optimizer adam",
     .files = {{"t.json", measured_trace_with([](json&) {})}},
     .message = "--optimizer adam: {dir}/t.json was recorded by a run with --optimizer sgd"},
    {.name = "CalibrateTraceWithAnUnknownRecordedOptimizer",
     .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", measured_trace_with([](json& t) { t["workload"]["optimizer"] = "lamb"; })}},
     .message = "field 'workload': field 'optimizer': expected \"sgd\" or \"adam\""},
    // Sweep 6: a trace header that disagrees with its events.
    {.name = "ExportTraceWithMoreActorsThanItsEvents",
     .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["num_actors"] = 5; })}},
     .message = "t.json: field 'num_actors': 5 actors, but actor 2 has no event"},
    {.name = "CalibrateTraceWithMoreStepsThanItsEvents", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", measured_trace_with([](json& t) { t["num_steps"] = 3; })}},
     .message = "t.json: field 'num_steps': 3 steps, but step 2 has no event"},
    {.name = "CalibrateTraceWithAHugeStepCount", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", measured_trace_with([](json& t) { t["num_steps"] = 2000000000; })}},
     .message = "t.json: field 'num_steps': 2000000000 steps, but the trace has"},
    {.name = "CalibrateTraceOfAnUnknownSource", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", measured_trace_with([](json& t) { t["source"] = "measured:foo"; })}},
     .message = "t.json: field 'source': expected \"simulated\" or \"measured:BACKEND\""},
    {.name = "CalibrateMissingTrace", .args = "calibrate --from-trace {dir}/t.json",
     .message = "cannot read"},
    {.name = "CalibrateFromASimulatedTrace", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", trace_with([](json&) {})}}, .message = "expected a measured trace"},
    {.name = "CalibrateTraceOfAnotherVersion", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", measured_trace_with([](json& t) { t["version"] = 2; })}},
     .message = "unsupported trace version 2"},
    {.name = "CalibrateTruncatedTrace", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", truncated(measured_trace_with([](json&) {}))}},
     .message = "malformed JSON"},
    {.name = "CalibrateTraceWithZeroHidden",
     .args = "calibrate --from-trace {dir}/t.json --hidden 0",
     .files = {{"t.json", measured_trace_with([](json&) {})}}, .message = "must be >= 1"},
    {.name = "CalibrateTraceOutputOntoADirectory", .args = "calibrate --from-trace {dir}/t.json -o {dir}",
     .files = {{"t.json", measured_trace_with([](json&) {})}}, .message = "is a directory"},
    {.name = "CalibrateTraceOverlappingComputes", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", measured_trace_with(overlap_two_computes)}},
     .message = "overlaps events["},
    {.name = "CalibrateTraceNegativeDuration", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", measured_trace_with([](json& t) {
        json& e = t["events"][event_index(t, 1, "compute", 1)];
        e["end_s"] = e["start_s"].get<double>() - 1e-3; })}},
     .message = "field 'end_s': expected a number >= start_s"},
    {.name = "CalibrateTraceStepThatWrapsAnInt", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", measured_trace_with([](json& t) { t["events"][0]["step"] = 4294967296LL; })}},
     .message = "events[0]: field 'step': expected an integer in [0, 1]"},
    {.name = "CalibrateTraceInstructionRecordedTwice", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", measured_trace_with([](json& t) { t["events"].push_back(t["events"][0]); })}},
     .message = "is recorded twice (also events[0])"},
    {.name = "CalibrateZeroRepeats", .args = "calibrate --quick --repeats 0",
     .message = "--repeats: expected >= 1"},
    {.name = "CalibrateOneRank", .args = "calibrate --quick --ranks 1", .message = "--ranks"},
    {.name = "CalibrateNegativeTimeout", .args = "calibrate --quick --timeout-s -1",
     .message = "--timeout-s: expected > 0"},
    {.name = "CalibrateOutputIntoMissingDirectory",
     .args = "calibrate --quick -o {dir}/missing/c.json", .message = "does not exist"},
    // ---- validate-model: corpus files. ------------------------------------------------------
    {.name = "ValidateModelMissingCorpus", .args = "validate-model --corpus {dir}/none.json",
     .message = "cannot read file"},
    {.name = "ValidateModelCorpusIsADirectory", .args = "validate-model --corpus {dir}",
     .message = "is a directory"},
    {.name = "ValidateModelTruncatedCorpus", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", truncated(corpus_with([](json&) {}))}}, .message = "malformed JSON"},
    {.name = "ValidateModelCorpusOfAnotherVersion", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["version"] = 2; })}},
     .message = "unsupported corpus version 2"},
    {.name = "ValidateModelCorpusGpusNotTheProduct", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["gpus"] = 5; })}},
     .message = "row 'a-1.3b-pp2': field 'tp': tp·pp·dp·cp = 1·2·2·1 = 4 does not equal gpus 5"},
    // Recompute policies: none, selective, full, op (torchtitan's op-level checkpointing).
    {.name = "SimulateUnknownRecompute",
     .args = "simulate --model gpt3-1.3b --schedule 1f1b --cluster a100-80g --gpus 2 --pp 2 "
             "--global-batch 4 --recompute opp --plan {dir}/p.json",
     .message = "--recompute: unknown recompute policy \"opp\" (expected none, selective, full or "
                "op)"},
    {.name = "ValidateModelCorpusUnknownRecompute", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["recompute"] = "layer"; })}},
     .message = "unknown recompute policy \"layer\" (expected none, selective, full or op)"},
    // MXFP8 needs block-scaled FP8 tensor cores: a row on H100, an unknown recipe, a BF16 row.
    {.name = "ValidateModelCorpusMxfp8OnHopper", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][3]["fp8_scaling"] = "mxfp8"; })}},
     .message = "row 'b-1.3b-mfu': field 'fp8_scaling': mxfp8 needs block-scaled FP8 tensor cores "
                "(Blackwell: b200, gb200-nvl72, gb300-nvl72); cluster 'h100-sxm' has none"},
    {.name = "ValidateModelCsvCorpusIntegerWithASign",  // "+4", "4.0", "4e0" were read as 4
     .args = "validate-model --corpus {dir}/c.csv",
     .files = {{"c.csv",
                [] {
                  std::string t = read_file(std::string(JAXPP_TEST_DATA_DIR) + "/corpus/small.csv");
                  const std::string row = "fit,a100-80g,gpt3-1.3b,4,";
                  return t.replace(t.find(row), row.size(), "fit,a100-80g,gpt3-1.3b,4.0,");
                }}},
     .message = "row 'a-1.3b-pp2': field 'gpus'"},
    {.name = "ValidateModelCorpusFp8OnAmpere",  // was scored as an error row, --out written
     .args = "validate-model --corpus {dir}/c.json --out {dir}/o.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["fp8"] = true; })}},
     .message = "row 'a-1.3b-pp2': field 'fp8': cluster 'a100-80g' has no FP8 tensor cores (no peak "
                "FLOP/s for fp8); give an FP8-capable GPU or drop \"fp8\""},
    {.name = "ValidateModelCorpusUnknownFp8Scaling", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][3]["fp8_scaling"] = "nvfp4"; })}},
     .message = "row 'b-1.3b-mfu': field 'fp8_scaling': expected \"current\", \"delayed\" or "
                "\"mxfp8\", got \"nvfp4\""},
    {.name = "ValidateModelCorpusFp8ScalingOfA16BitRow", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["fp8_scaling"] = "mxfp8"; })}},
     .message = "row 'a-1.3b-pp2': field 'fp8_scaling': only for FP8 rows"},
    {.name = "ValidateModelCorpusUnknownKernelFusion", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["kernel_fusion"] = "eagre"; })}},
     .message = "row 'a-1.3b-pp2': field 'kernel_fusion': expected \"fused\", \"eager\" or "
                "\"eager_fp32_params\", got \"eagre\""},
    // A schedule that cannot run the row's configuration: refused before the table is printed
    // (it was a row error in the table, exit 1).
    {.name = "ValidateModelCorpusScheduleCannotRunTheRow",
     .args = "validate-model --corpus {dir}/c.json --out {dir}/report.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["virtual_stages"] = 3; })}},
     .message = "row 'a-1.3b-pp2': field 'schedule': Std1F1B places stage r on actor r: needs "
                "S = p (got S=6, p=2) (the row's pp 2, virtual_stages 3, 8 microbatches)"},
    {.name = "ValidateModelCorpusUnknownCluster", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["cluster"] = "b300"; })}},
     .message = "field 'cluster': unknown cluster preset 'b300'"},
    {.name = "ValidateModelCorpusTwoMeasuredValues", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["measured"]["mfu"] = 0.5; })}},
     .message = "field 'measured': expected exactly one of"},
    {.name = "ValidateModelCorpusDuplicateId", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][1]["id"] = "a-1.3b-pp2"; })}},
     .message = "field 'id': duplicate id"},
    {.name = "ValidateModelCorpusUnknownSource", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["sources"].erase("paper-b"); })}},
     .message = "unknown source 'paper-b'"},
    {.name = "ValidateModelCorpusShardParamsWithoutTheDistributedOptimizer",
     .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["shard_parameters"] = true; })}},
     .message = "field 'shard_parameters': parameter sharding (ZeRO-3 / FSDP) needs the distributed optimizer (\"distributed_optimizer\": true)"},
    {.name = "ValidateModelCorpusShardParamsWithShardGradientsOff",
     .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) {
        c["rows"][0]["distributed_optimizer"] = true;
        c["rows"][0]["shard_parameters"] = true;
        c["rows"][0]["shard_gradients"] = false;
      })}},
     .message = "implies gradient sharding"},
    {.name = "ValidateModelCorpusOptimizerStateUnknown", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["optimizer_state"] = "adam"; })}},
     .message = "field 'optimizer_state': expected cluster, fp32, remainders, bf16 or bf16-moments, got \"adam\""},
    {.name = "ValidateModelCorpusHugeTp", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["tp"] = 9000000000; })}},
     .message = "field 'tp': too large"},
    {.name = "ValidateModelCorpusEpOnADenseModel", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["ep"] = 2; })}},
     .message = "row 'a-1.3b-pp2': field 'ep': ep 2 on gpt3-1.3b, which has no routed experts"},
    {.name = "ValidateModelCorpusEpNotDividingTheExperts",
     .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) {
                  c["rows"][0]["model"] = "qwen3-30b-a3b";
                  c["rows"][0]["ep"] = 3;
                })}},
     .message = "row 'a-1.3b-pp2': field 'ep': ep 3 does not divide the 128 routed experts"},
    {.name = "ValidateModelCorpusBadA2aDtype", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) {
                  c["rows"][0]["model"] = "qwen3-30b-a3b";
                  c["rows"][0]["a2a_dtype"] = "int4";
                })}},
     .message = "row 'a-1.3b-pp2': field 'a2a_dtype': "},
    {.name = "ValidateModelCsvLineOfTheWrongLength", .args = "validate-model --corpus {dir}/c.csv",
     .files = {{"c.csv", text("id,source\nr1\n")}}, .message = "line 2: 1 fields, the header has 2"},
    // The corpus readers' fuzz and adversarial findings (docs/hardening.md): empty corpora, values
    // that pass "> 0" but give an infinite or zero step time, control characters echoed into the
    // error, CSV cells strtod reads but a person would not.
    {.name = "ValidateModelCorpusEmptyRows", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"] = json::array(); })}},
     .message = "c.json: field 'rows': no rows (expected at least one)"},
    {.name = "ValidateModelCsvHeaderOnly", .args = "validate-model --corpus {dir}/c.csv",
     .files = {{"c.csv", text("id,source,where\r\n\r\n")}},
     .message = "c.csv: line 1: a header row but no data rows"},
    {.name = "ValidateModelCsvEmpty", .args = "validate-model --corpus {dir}/c.csv",
     .files = {{"c.csv", text("\n \n")}}, .message = "empty CSV file (expected a header row)"},
    {.name = "ValidateModelCorpusIdWithANewline", .args = "validate-model --corpus {dir}/c.json --out {dir}/r.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][1]["id"] = "a\nb"; })}},
     .message = "c.json: rows[1]: field 'id': contains a control character (it is printed in "
                "tables and messages), got \"a\\nb\""},
    {.name = "ValidateModelCorpusIdWithAComma", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][1]["id"] = "a,b"; })}},
     .message = "c.json: rows[1]: field 'id': contains ',' (validate-model --row takes ids "
                "separated by commas, so it could never select this row), got \"a,b\""},
    {.name = "ValidateModelCorpusClusterWithANewline", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["cluster"] = "h100\n-sxm\x1b[2J"; })}},
     .message = "field 'cluster': unknown cluster preset 'h100\\n-sxm\\x1b[2j'"},  // lower-cased
    {.name = "ValidateModelCorpusDenormalTokensPerSecond", .args = "validate-model --corpus {dir}/c.json --json",
     .files = {{"c.json", corpus_with([](json& c) {
                  c["rows"][2]["measured"] = {{"tokens_per_s_per_gpu", 1e-320}};
                })}},
     .message = "row 'b-tiny': field 'measured': gives a step time of inf s (tokens_per_s_per_gpu "},
    {.name = "ValidateModelCorpusTinyStepTime", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) {
                  c["rows"][0]["measured"] = {{"step_time_s", 1e-300}};
                })}},
     .message = "row 'a-1.3b-pp2': field 'measured': gives a step time of 1e-300 s"},
    {.name = "ValidateModelCorpusNegativeStepTime", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) {
                  c["rows"][0]["measured"] = {{"step_time_s", -1}};
                })}},
     .message = "row 'a-1.3b-pp2': field 'measured': field 'step_time_s': expected a number > 0, got -1"},
    {.name = "ValidateModelCorpusHugePeakTflops", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][3]["peak_tflops"] = 1e300; })}},
     .message = "row 'b-1.3b-mfu': field 'peak_tflops': expected 1e-06 to 1e+06 TFLOP/s"},
    // Accepted and unused: a step-time row has no FLOP count to relate to a peak.
    {.name = "ValidateModelCorpusPeakTflopsOnAStepTimeRow",
     .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["peak_tflops"] = 989; })}},
     .message = "row 'a-1.3b-pp2': field 'peak_tflops': unused: the row is measured as "
                "step_time_s (flops_convention 'none'), and only an MFU is relative to a peak"},
    {.name = "ValidateModelCorpusGpusAsAString", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["gpus"] = "4"; })}},
     .message = "row 'a-1.3b-pp2': field 'gpus': expected an integer, got \"4\""},
    {.name = "ValidateModelCorpusFractionalGpus", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["gpus"] = 4.5; })}},
     .message = "row 'a-1.3b-pp2': field 'gpus': expected an integer, got 4.5"},
    {.name = "ValidateModelCorpusMisspelledKey", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["micro_batch_size"] = 2; })}},
     .message = "row 'a-1.3b-pp2': field 'micro_batch_size': unknown field"},
    {.name = "ValidateModelCorpusMisspelledTopKey", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["source"] = c["sources"]; })}},
     .message = "field 'source': unknown field"},
    {.name = "ValidateModelCorpusUnknownModel", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["model"] = "gpt5"; })}},
     .message = "row 'a-1.3b-pp2': field 'model': unknown model 'gpt5'"},
    {.name = "ValidateModelCorpusUnknownSchedule", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["schedule"] = "2f2b"; })}},
     .message = "row 'a-1.3b-pp2': field 'schedule': unknown schedule '2f2b'"},
    {.name = "ValidateModelCsvHexadecimalGpus", .args = "validate-model --corpus {dir}/c.csv",
     .files = {{"c.csv", text("id,source,where,split,cluster,model,gpus,tp,pp,dp,global_batch,"
                              "schedule,measured_step_time_s,flops_convention\n"
                              "r1,s,T1,fit,a100-80g,gpt3-1.3b,0x4,1,2,2,16,1f1b,2,none\n")}},
     .message = "row 'r1': field 'gpus': expected an integer, got \"0x4\""},
    {.name = "ValidateModelCsvNanMeasured", .args = "validate-model --corpus {dir}/c.csv",
     .files = {{"c.csv", text("id,source,where,split,cluster,model,gpus,tp,pp,dp,global_batch,"
                              "schedule,measured_step_time_s,flops_convention\n"
                              "r1,s,T1,fit,a100-80g,gpt3-1.3b,4,1,2,2,16,1f1b,nan,none\n")}},
     .message = "field 'step_time_s': expected a number, got \"nan\""},
    {.name = "ValidateModelCsvLatin1Cell", .args = "validate-model --corpus {dir}/c.csv --json",
     .files = {{"c.csv", text("id,source,where,split,cluster,model,gpus,tp,pp,dp,global_batch,"
                              "schedule,measured_step_time_s,flops_convention\n"
                              "r1,s,T1,fit,a100-80g,gpt3-1.3b,4,1,2,2,1\xe9" "6,1f1b,2,none\n")}},
     .message = "c.csv:2:41: is not valid UTF-8 (byte 0xe9 at byte offset 150)"},
    {.name = "ValidateModelCsvQuoteInsideAField", .args = "validate-model --corpus {dir}/c.csv",
     .files = {{"c.csv", text("id,source,where\nr1,s,Table \"1, row 2\"\n")}},
     .message = "c.csv: line 2: field 3: a quote inside an unquoted field"},
    {.name = "ValidateModelCsvDuplicateIdNamesTheLines", .args = "validate-model --corpus {dir}/c.csv",
     .files = {{"c.csv", text("id,source,where,split,cluster,model,gpus,tp,pp,dp,global_batch,"
                              "schedule,measured_step_time_s,flops_convention\n"
                              "r1,s,T1,fit,a100-80g,gpt3-1.3b,4,1,2,2,16,1f1b,2,none\n"
                              "r1,s,T2,fit,a100-80g,gpt3-1.3b,4,1,2,2,16,1f1b,3,none\n")}},
     .message = "row 'r1': field 'id': duplicate id (line 2 and line 3)"},
    {.name = "ValidateModelEmptyCorpusPath", .args = "validate-model --corpus \"\" --out {dir}/r.json",
     .message = "\"\" (an empty file name): cannot read file"},
    {.name = "ValidateModelUnknownClusterOverride",
     .args = "validate-model --corpus {data}/corpus/small.json --cluster b300 --out {dir}/r.json",
     .message = "b300"},
    {.name = "ValidateModelUnknownRowsOn",
     .args = "validate-model --corpus {data}/corpus/small.json --rows-on b300",
     .message = "--rows-on b300: expected a cluster preset name"},
    {.name = "ValidateModelRowsOnAClusterFile",
     .args = "validate-model --corpus {data}/corpus/small.json --rows-on {dir}/c.json",
     .files = {{"c.json", text(cluster_with("hbm_gib", "80"))}},
     .message = "--rows-on {dir}/c.json: expected a cluster preset name, the \"cluster\" of the "
                "rows to keep"},
    {.name = "ValidateModelRowsOnSelectingNothing",
     .args = "validate-model --corpus {data}/corpus/small.json --rows-on h200 --out {dir}/r.json",
     .message = "no row selected (--rows-on h200, --split all)"},
    {.name = "ValidateModelGemmsMinTimeTooLarge", .args = "validate-model --gemms {dir}/g.json",
     .files = {{"g.json", text(R"({"cluster": "h200", "min_time_s": 1e300,
                  "fit": [[4096, 4096, 4096, "NN", 0.0012]], "test": [[64, 64, 64, "NN", 0.001]]})")}},
     .message = "g.json: field 'min_time_s': expected seconds in [0, 1e4), got 1e+300"},
    {.name = "ValidateModelGemmsNegativeSeconds", .args = "validate-model --gemms {dir}/g.json --out {dir}/r.json",
     .files = {{"g.json", text(R"({"cluster": "h200",
                  "fit": [[4096, 4096, 4096, "NN", -1]], "test": [[64, 64, 64, "NN", 0.001]]})")}},
     .message = "field 'fit[0]': seconds must be in (0, 1e4)"},
    {.name = "ValidateModelUnknownSplit", .args = "validate-model --split train",
     .message = "--split: expected fit, test or all"},
    {.name = "ValidateModelOutIntoMissingDirectory",
     .args = "validate-model --corpus {data}/corpus/small.json --out {dir}/missing/r.json",
     .message = "does not exist"},
    {.name = "ValidateModelMalformedClusterOverride",
     .args = "validate-model --corpus {data}/corpus/small.json --cluster {dir}/c.json",
     .files = {{"c.json", text(R"({"name": "c", "base": )")}}, .message = "malformed JSON"},

    // ---- Any JSON input: nesting depth (issue 16, class 1; kMaxJsonDepth = 64). -------------
    {.name = "GraphDeeplyNestedModel", .args = "graph --model {dir}/deep.json --pp 2",
     .files = {{"deep.json", text(R"({"name": "x", "layers_list": )" + nested(100) + "}")}},
     .message = "deep.json: nesting deeper than 64 levels"},
    {.name = "GraphModelNestedAMillionLevels", .args = "graph --model {dir}/deep.json --pp 2",
     .files = {{"deep.json", text(std::string(1'000'000, '['))}},
     .message = "deep.json: nesting deeper than 64 levels"},
    {.name = "GraphModelNestedObjects", .args = "graph --model {dir}/deep.json --pp 2",
     .files = {{"deep.json", [] {
        std::string s;
        for (int i = 0; i < 65; ++i) s += R"({"layers_list": )";
        return s + "[]" + std::string(65, '}'); }}},
     .message = "deep.json: nesting deeper than 64 levels"},
    {.name = "ExploreDeeplyNestedModel", .args = "explore --model {dir}/deep.json --gpus 8 --global-batch 8 --quiet",
     .files = {{"deep.json", text(R"({"name": "x", "layers_list": )" + nested(65) + "}")}},
     .message = "deep.json: nesting deeper than 64 levels"},
    {.name = "SimulateDeeplyNestedCluster", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/deep.json",
     .files = {{"deep.json", text(R"({"name": "c", "base": "a100-80g", "intra_node": )" + nested(80) + "}")}},
     .message = "deep.json: nesting deeper than 64 levels"},
    {.name = "SimulateDeeplyNestedStageTimes",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times {dir}/deep.json",
     .files = {{"deep.json", text(R"({"stages": )" + nested(100000) + "}")}},
     .message = "deep.json: nesting deeper than 64 levels"},
    {.name = "ShowDeeplyNestedScheduleFile", .args = "show --schedule-file {dir}/deep.json",
     .files = {{"deep.json", text(R"({"actors": )" + nested(70) + "}")}},
     .message = "deep.json: nesting deeper than 64 levels"},
    {.name = "ValidateDeeplyNestedScheduleJson", .args = "validate {dir}/deep.json",
     .files = {{"deep.json", text(R"({"actors": )" + nested(70) + "}")}},
     .message = "deep.json: nesting deeper than 64 levels"},
    {.name = "ValidateDeeplyNestedPlan", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["predicted"] = nested_json(200); })}},
     .message = "plan.json: nesting deeper than 64 levels"},
    {.name = "RunDeeplyNestedPlan", .args = "run {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["cluster"]["intra_node"] = nested_json(70); })}},
     .message = "plan.json: nesting deeper than 64 levels"},
    {.name = "RunDeeplyNestedStageTimes", .args = kRun + "--stage-times {dir}/deep.json",
     .files = {{"deep.json", text(nested(65))}}, .message = "deep.json: nesting deeper than 64 levels"},
    {.name = "ExportDeeplyNestedTrace", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", trace_with([](json& t) { t["events"][0]["parts"] = nested_json(100); })}},
     .message = "t.json: nesting deeper than 64 levels"},
    {.name = "ExportDeeplyNestedPlan", .args = "export --plan {dir}/plan.json -o {dir}/x.txt",
     .files = {{"plan.json", plan_with([](json& p) { p["program"]["actors"][0] = nested_json(90); })}},
     .message = "plan.json: nesting deeper than 64 levels"},
    {.name = "CalibrateDeeplyNestedTrace", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", measured_trace_with([](json& t) { t["events"] = nested_json(65); })}},
     .message = "t.json: nesting deeper than 64 levels"},
    {.name = "ValidateModelDeeplyNestedCorpus", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["measured"] = nested_json(65); })}},
     .message = "c.json: nesting deeper than 64 levels"},
    {.name = "ValidateModelDeeplyNestedRowModelFile", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["model"] = "deep.json"; })},
               {"deep.json", text(R"({"name": "x", "layers_list": )" + nested(65) + "}")}},
     .message = "deep.json: nesting deeper than 64 levels"},
    {.name = "ValidateModelDeeplyNestedClusterOverride",
     .args = "validate-model --corpus {data}/corpus/small.json --cluster {dir}/deep.json",
     .files = {{"deep.json", text(nested(64) + " ")}}, .message = "expected a JSON object"},

    // ---- Any input path: what a file is (issue 16, class 2; kMaxInputFileBytes = 256 MiB). ---
    {.name = "GraphModelIsAFifo", .args = "graph --model {dir}/m.json --pp 2", .files = {fifo("m.json")},
     .message = "m.json: is not a regular file (a FIFO)"},
    {.name = "GraphModelIsDevZero", .args = "graph --model /dev/zero --pp 2",
     .message = "/dev/zero: is not a regular file (a character device)"},
    {.name = "GraphModelOfTwelveGiB", .args = "graph --model {dir}/m.json --pp 2",
     .files = {sparse("m.json", 12 * kGiB)}, .message = "m.json: is 12 GiB, the limit is 256 MiB"},
    {.name = "GraphModelJustAboveTheSizeLimit", .args = "graph --model {dir}/m.json --pp 2",
     .files = {sparse("m.json", (uintmax_t{256} << 20) + 1)},
     .message = "m.json: is 256.0 MiB (268435457 bytes), the limit is 256 MiB"},
    {.name = "GraphModelDanglingSymlink", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", nullptr, [](const std::string& path) { fs::create_symlink(path + ".gone", path); }}},
     .message = "m.json: cannot read file: No such file or directory"},
    {.name = "ExploreModelIsAFifo", .args = "explore --model {dir}/m.json --gpus 8 --global-batch 8 --quiet",
     .files = {fifo("m.json")}, .message = "m.json: is not a regular file (a FIFO)"},
    {.name = "SimulateClusterIsADirectory", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}",
     .message = "is a directory, not a file"},
    {.name = "SimulateClusterIsAFifo", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {fifo("c.json")}, .message = "c.json: is not a regular file (a FIFO)"},
    {.name = "SimulateClusterIsDevZero", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster /dev/zero",
     .message = "/dev/zero: is not a regular file (a character device)"},
    {.name = "SimulateStageTimesIsAFifo",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times {dir}/t.json",
     .files = {fifo("t.json")}, .message = "t.json: is not a regular file (a FIFO)"},
    {.name = "SimulateStageTimesIsADirectory",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times {dir}",
     .message = "is a directory, not a file"},
    {.name = "SimulateScheduleFileIsADirectory",
     .args = "simulate --schedule-file {dir}/s.csv --pp 2 --microbatches 2 --t-f 1 --t-b 1",
     .files = {subdirectory("s.csv")}, .message = "s.csv: is a directory, not a file"},
    {.name = "ShowScheduleFileIsAFifo", .args = "show --schedule-file {dir}/s.csv",
     .files = {fifo("s.csv")}, .message = "s.csv: is not a regular file (a FIFO)"},
    {.name = "ValidateFifo", .args = "validate {dir}/s.json", .files = {fifo("s.json")},
     .message = "s.json: is not a regular file (a FIFO)"},
    {.name = "ValidateDirectoryNamedLikeACsv", .args = "validate {dir}/s.csv",
     .files = {subdirectory("s.csv")}, .message = "s.csv: is a directory, not a file"},
    {.name = "ValidateDevZero", .args = "validate /dev/zero",
     .message = "/dev/zero: is not a regular file (a character device)"},
    {.name = "ValidateCsvOf300MiB", .args = "validate {dir}/s.csv",
     .files = {sparse("s.csv", uintmax_t{300} << 20)}, .message = "s.csv: is 300 MiB, the limit is 256 MiB"},
    {.name = "RunPlanIsAFifo", .args = "run {dir}/plan.json", .files = {fifo("plan.json")},
     .message = "plan.json: is not a regular file (a FIFO)"},
    {.name = "RunPlanIsADirectory", .args = "run {dir}", .message = "is a directory, not a file"},
    {.name = "RunStageTimesIsDevZero", .args = kRun + "--stage-times /dev/zero",
     .message = "/dev/zero: is not a regular file (a character device)"},
    {.name = "RunClusterIsADirectory", .args = kRun + "--compare --cluster {dir}",
     .message = "is a directory, not a file"},
    {.name = "ExportTraceIsAFifo", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {fifo("t.json")}, .message = "t.json: is not a regular file (a FIFO)"},
    {.name = "ExportPlanOfOneTiB", .args = "export --plan {dir}/plan.json -o {dir}/x.txt",
     .files = {sparse("plan.json", 1024 * kGiB)}, .message = "plan.json: is 1024 GiB, the limit is 256 MiB"},
    {.name = "CalibrateTraceIsADirectory", .args = "calibrate --from-trace {dir}",
     .message = "is a directory, not a file"},
    {.name = "CalibrateBaseClusterIsAFifo",
     .args = "calibrate --from-trace {dir}/t.json --hidden 8 --seq 4 --layers-per-stage 1 --base {dir}/c.json "
             "-o {dir}/out.json",
     .files = {{"t.json", measured_trace_with([](json&) {})}, fifo("c.json")},
     .message = "c.json: is not a regular file (a FIFO)"},
    {.name = "ValidateModelCorpusIsAFifo", .args = "validate-model --corpus {dir}/c.json",
     .files = {fifo("c.json")}, .message = "c.json: is not a regular file (a FIFO)"},
    {.name = "ValidateModelCorpusAboveItsLimit", .args = "validate-model --corpus {dir}/c.csv",
     .files = {sparse("c.csv", uintmax_t{17} << 20)}, .message = "c.csv: is 17 MiB, the limit is 16 MiB"},
    {.name = "ValidateModelCorpusRowModelIsADirectory", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", corpus_with([](json& c) { c["rows"][0]["model"] = "sub"; })}, subdirectory("sub")},
     .message = "sub: is a directory, not a file"},
    {.name = "ValidateModelClusterOverrideIsADirectory",
     .args = "validate-model --corpus {data}/corpus/small.json --cluster {dir}",
     .message = "is a directory, not a file"},
    {.name = "ExploreUnknownClusterSaysPresetAndFile", .args = kExplore + "--cluster {dir}/nope.json",
     .message = "nope.json: unknown cluster: not a preset and no such file (presets: "},
    {.name = "GraphUnknownModelSaysPresetAndFile", .args = "graph --model {dir}/nope.json --pp 2",
     .message = "nope.json: unknown model: not a preset and no such file (presets: "},

    // ---- Files that contradict themselves (issue 16, class 4). -------------------------------
    {.name = "ValidatePlanGpusNotTheProduct", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["gpus"] = 8; })}},
     .message = "plan.json: field 'config': gpus 8 is not pp·tp·dp·cp = 2·1·1·1 = 2"},
    {.name = "ValidatePlanGlobalBatchDisagrees", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["global_batch"] = 6; })}},
     .message = "field 'config': global_batch 6 is not dp·microbatch_size·num_microbatches = 1·1·4 = 4"},
    {.name = "ValidatePlanDpDisagrees", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["dp"] = 2; p["config"]["gpus"] = 4; })}},
     .message = "field 'config': global_batch 4 is not dp·microbatch_size·num_microbatches = 2·1·4 = 8"},
    {.name = "ValidatePlanVirtualStagesDisagree", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["virtual_stages"] = 2; })}},
     .message = "field 'config': pp·virtual_stages = 2·2 = 4 stages, but the partition has 2"},
    {.name = "ValidatePlanScheduleNameDisagrees", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["schedule"] = "gpipe"; })}},
     .message = "field 'config': schedule 'gpipe' for pp 2, 2 stages and 4 microbatches is not the program's compute order"},
    {.name = "ValidatePlanTpNotDividingTheHeads", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["tp"] = 3; p["config"]["gpus"] = 6; })}},
     .message = "field 'config': tp 3 does not divide the 4 attention heads"},
    {.name = "ValidatePlanMicrobatchSizeChangesTheTransfers", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) {
        p["config"]["microbatch_size"] = 2; p["config"]["global_batch"] = 8; })}},
     .message = "bytes, but the model and configuration give"},
    {.name = "ValidatePlanInvalidCluster", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["cluster"]["hbm_gib"] = -80; })}},
     .message = "plan.json: field 'cluster': field 'hbm_gib'"},
    {.name = "ValidatePlanWithoutCluster", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p.erase("cluster"); })}},
     .message = "plan.json: field 'cluster': missing"},
    {.name = "ValidatePlanSendOfTheWrongSize", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { set_transfer_bytes(p, 0, 1); })}},
     .message = "field 'program': actor 0, instruction 1 (send F0@s0 ->1): 1 bytes, but the model and configuration give"},
    {.name = "ValidatePlanAllReduceOfTheWrongSize", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) {
        for (json& ins : p["program"]["actors"][1]) if (ins["op"] == "allreduce") ins["bytes"] = 7; })}},
     .message = "7 bytes, but the model and configuration give"},
    {.name = "ValidatePlanModelEditedUnderItsProgram", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) {
        // Without heads the header gives no whole shape: the layers are the model, and the
        // program's bytes are checked against them (with a shape the header check refuses first,
        // ValidatePlanWithAnEditedDtype).
        p["model"].erase("heads");
        p["model"].erase("kv_heads");
        for (json& l : p["model"]["layers_list"]) l["output_bytes"] = 12345; })}},
     .message = "bytes, but the model and configuration give"},
    {.name = "ValidatePlanPredictedIsAString", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["predicted"] = "fast"; })}},
     .message = "plan.json: field 'predicted': expected an object of metrics or null"},
    {.name = "ValidatePlanPredictedStepTimeIsAString", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["predicted"]["step_time_s"] = "1 s"; })}},
     .message = "field 'predicted': field 'step_time_s': expected a number >= 0"},
    {.name = "ValidatePlanPredictedNegativeMfu", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["predicted"]["mfu"] = -0.5; })}},
     .message = "field 'predicted': field 'mfu': expected a number >= 0, got -0.5"},
    {.name = "ValidatePlanPredictedWarningsNotStrings", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["predicted"]["warnings"] = {1, 2}; })}},
     .message = "field 'predicted': field 'warnings': expected a list of strings"},
    {.name = "ValidatePlanDuplicateTopLevelKey", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", with_leading_key(plan_with([](json&) {}), "version", "1")}},
     .message = "plan.json: field 'version': duplicate key"},
    {.name = "ValidatePlanDuplicateConfigKey", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", inserted(plan_with([](json&) {}), "\"pp\":", "\"pp\": 4, ")}},
     .message = "plan.json: field 'config.pp': duplicate key"},
    {.name = "ValidatePlanContentAfterANul", .args = "validate {dir}/plan.json",
     .files = {{"plan.json", nul_then(plan_with([](json&) {}), R"({"config": {"pp": 4}})")}},
     .message = "contains a NUL byte"},
    {.name = "RunPlanGpusNotTheProduct", .args = "run {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["gpus"] = 8; })}},
     .message = "plan.json: field 'config': gpus 8 is not pp·tp·dp·cp"},
    {.name = "RunPlanSendOfTheWrongSize", .args = "run {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { set_transfer_bytes(p, 1, 999); })}},
     .message = "999 bytes, but the model and configuration give"},
    {.name = "RunPlanScheduleNameDisagrees", .args = "run {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["schedule"] = "zb-h1"; })}},
     .message = "field 'config': schedule 'zb-h1'"},
    {.name = "RunPlanInvalidClusterWithStageTimes", .args = "run {dir}/plan.json --stage-times {dir}/t.json",
     .files = {{"plan.json", plan_with([](json& p) { p["cluster"]["devices_per_node"] = 0; })},
               {"t.json", text(R"({"t_f_ms": 1, "t_b_ms": 1, "t_w_ms": 0, "t_comm_ms": 0})")}},
     .message = "plan.json: field 'cluster': field 'devices_per_node'"},
    {.name = "RunPlanPredictedIsAList", .args = "run {dir}/plan.json",
     .files = {{"plan.json", plan_with([](json& p) { p["predicted"] = {1, 2, 3}; })}},
     .message = "field 'predicted': expected an object of metrics or null"},
    {.name = "RunPlanDuplicateProgramKey", .args = "run {dir}/plan.json",
     .files = {{"plan.json", inserted(plan_with([](json&) {}), "\"num_microbatches\":", "\"num_microbatches\": 2, ", "\"program\"")}},
     .message = "plan.json: field 'program.num_microbatches': duplicate key"},
    {.name = "ExportPlanGpusNotTheProduct", .args = "export --plan {dir}/plan.json -o {dir}/x.txt",
     .files = {{"plan.json", plan_with([](json& p) { p["config"]["gpus"] = 8; })}},
     .message = "plan.json: field 'config': gpus 8 is not pp·tp·dp·cp"},
    {.name = "ExportTaskGraphOfAPlanWithTheWrongSendSize",
     .args = "export --plan {dir}/plan.json --view taskgraph -o {dir}/x.dot",
     .files = {{"plan.json", plan_with([](json& p) { set_transfer_bytes(p, 1, 999); })}},
     .message = "999 bytes, but the model and configuration give"},
    {.name = "GraphModelDuplicateKey", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", with_leading_key(text(kTinyModel), "layers", "40")}},
     .message = "m.json: field 'layers': duplicate key"},
    {.name = "GraphModelContentAfterANul", .args = "graph --model {dir}/m.json --pp 2",
     .files = {{"m.json", nul_then(text(kTinyModel), R"({"layers": 400})")}},
     .message = "m.json:1:" },
    {.name = "SimulateClusterDuplicateNestedKey", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --cluster {dir}/c.json",
     .files = {{"c.json", text(R"({"name": "c", "base": "a100-80g", "intra_node": {"latency_us": 1, "latency_us": 1e6}})")}},
     .message = "c.json: field 'intra_node.latency_us': duplicate key"},
    {.name = "SimulateStageTimesDuplicateKey",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times {dir}/t.json",
     .files = {{"t.json", text(R"({"stages": [{"t_f_ms": 1, "t_b_ms": 1, "t_w_ms": 0, "t_comm_ms": 0}, {"t_f_ms": 1, "t_b_ms": 1, "t_w_ms": 0, "t_comm_ms": 0, "t_f_ms": 9}]})")}},
     .message = "t.json: field 'stages[1].t_f_ms': duplicate key"},
    {.name = "ValidateScheduleDuplicateActors", .args = "validate {dir}/s.json",
     .files = {{"s.json", text(R"({"actors": [["F0@s0", "B0@s0"]], "actors": [["F0@s0"]]})")}},
     .message = "s.json: field 'actors': duplicate key"},
    {.name = "ValidateCsvContentAfterANul", .args = "validate {dir}/s.csv",
     .files = {{"s.csv", nul_then(text("0F0,0B0\n"), "1F0,1B0\n")}},
     .message = "s.csv:2:1: contains a NUL byte (byte offset 8)"},
    {.name = "ExportTraceDuplicateEventKey", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", inserted(trace_with([](json&) {}), "\"actor\":", "\"actor\": 1, ")}},
     .message = "t.json: field 'events[0].actor': duplicate key"},
    {.name = "ExportTraceContentAfterANul", .args = "export --trace {dir}/t.json -o {dir}/x.txt",
     .files = {{"t.json", nul_then(trace_with([](json&) {}), "garbage")}},
     .message = "contains a NUL byte"},
    {.name = "CalibrateTraceDuplicateKey", .args = "calibrate --from-trace {dir}/t.json",
     .files = {{"t.json", with_leading_key(measured_trace_with([](json&) {}), "version", "1")}},
     .message = "t.json: field 'version': duplicate key"},
    {.name = "ValidateModelCorpusDuplicateRowKey", .args = "validate-model --corpus {dir}/c.json",
     .files = {{"c.json", inserted(corpus_with([](json&) {}), "\"gpus\":", "\"gpus\": 64, ")}},
     .message = "c.json: field 'rows[0].gpus': duplicate key"},
    // Class 5 (issue 16): flags that would be ignored or overridden are refused.
    {.name = "RunPlanWithPp", .args = "run {dir}/plan.json --pp 4",
     .files = {{"plan.json", plan_with([](json&) {})}},
     .message = "--pp: not used with PLAN.json (the plan fixes the program)"},
    {.name = "RunRepeatedSteps", .args = kRun.substr(0, kRun.size() - 1) + " --steps 3",
     .message = "--steps: given 2 times (1, 3)"},
    {.name = "SimulateRepeatedScalarFlag",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 --pp 4",
     .message = "--pp: given 2 times (2, 4); give each flag once"},
    {.name = "SchedulesRepeatedBooleanFlag", .args = "schedules --json --json",
     .message = "--json: given 2 times"},
    {.name = "ExploreRepeatedFlag", .args = "explore --model gpt3-1.3b --gpus 8 --global-batch 8 --gpus 16",
     .message = "--gpus: given 2 times (8, 16)"},
    {.name = "SimulateScheduleAndScheduleFile",
     .args = "simulate --schedule 1f1b --schedule-file {dir}/s.csv --pp 1 --microbatches 1 --t-f 1 --t-b 1",
     .files = {{"s.csv", text("0F0,0B0\n")}},
     .message = "--schedule and --schedule-file: give a schedule name or a schedule file, not both"},
    {.name = "SimulateFuseWithScheduleFile",
     .args = "simulate --schedule-file {dir}/s.csv --fuse-steady-state --pp 1 --microbatches 1 --t-f 1 --t-b 1",
     .files = {{"s.csv", text("0F0,0B0\n")}},
     .message = "--fuse-steady-state and --schedule-file"},
    {.name = "SimulateVirtualDisagreesWithScheduleFile",
     .args = "simulate --schedule-file {dir}/s.csv --virtual 2 --pp 1 --microbatches 1 --t-f 1 --t-b 1",
     .files = {{"s.csv", text("0F0,0B0\n")}},
     .message = "s.csv: the schedule has 1 stages but --pp x --virtual is 2"},
    {.name = "SimulateModelFlagInMeasuredMode",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 --tp 2",
     .message = "--tp: a model-mode flag, but without --model simulate runs in measured mode"},
    {.name = "SimulateClusterInMeasuredMode",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 --cluster h100-sxm",
     .message = "--cluster: a model-mode flag"},
    {.name = "SimulateMeasuredFlagInModelMode", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --t-f 1",
     .message = "--t-f: a measured-mode flag, but --model selects model mode"},
    {.name = "SimulateMicrobatchesInModelMode", .args = kSim + "--gpus 2 --pp 2 --global-batch 4 --microbatches 8",
     .message = "--microbatches: a measured-mode flag"},
    {.name = "SimulateStageTimesAndUniformTimes",
     .args = "simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times {dir}/t.json --t-f 1",
     .files = {{"t.json", text(R"({"t_f_ms": 1, "t_b_ms": 1, "t_w_ms": 0, "t_comm_ms": 0})")}},
     .message = "--stage-times and --t-f"},
    {.name = "ShowStagesWithScheduleFile", .args = "show --schedule-file {dir}/s.csv --stages 4",
     .files = {{"s.csv", text("0F0,0B0\n")}},
     .message = "--stages: not used with --schedule-file"},
    {.name = "CalibrateMicrobenchmarkFlagWithTrace",
     .args = "calibrate --from-trace {dir}/t.json --quick",
     .files = {{"t.json", measured_trace_with([](json&) {})}},
     .message = "--quick: a microbenchmark flag, but --from-trace fits from a trace"},
    {.name = "CalibrateTraceFlagWithoutTrace", .args = "calibrate --hidden 64",
     .message = "--hidden: describes the run of a --from-trace trace"},
    {.name = "ExportWidthOfAPerfettoTrace",
     .args = "export --trace {dir}/t.json -o {dir}/x.json --format perfetto --width 300",
     .files = {{"t.json", trace_with([](json&) {})}},
     .message = "--width: a picture option"},
    {.name = "ExportTitleOfATextGantt",
     .args = "export --trace {dir}/t.json -o {dir}/x.txt --title T",
     .files = {{"t.json", trace_with([](json&) {})}},
     .message = "--title: a picture option"},
    {.name = "ValidateModelStrictWithGemms",
     .args = "validate-model --gemms {data}/kernels/h200_gemm_bf16.json --strict",
     .message = "--strict: judges end-to-end corpus rows"},
    {.name = "ValidateModelStrictWithOnlyFitRows",
     .args = "validate-model --corpus {data}/corpus/small.json --split fit --strict",
     .message = "--strict: judges the test rows, but --split fit keeps none"},
    {.name = "GraphFewerWithAnExplicitPartition",
     .args = "graph --model {dir}/m.json --pp 2 --partition 0,2 --first-stage-fewer 1",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--first-stage-fewer: shapes the auto partition"},
    {.name = "GraphRecomputeLayersWithoutFull",
     .args = "graph --model {dir}/m.json --pp 2 --recompute selective --recompute-layers 1",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--recompute-layers: counts fully recomputed layers and needs recompute full "
                "(recompute is selective)"},
    {.name = "GraphRecomputeLayersNegative",
     .args = "graph --model {dir}/m.json --pp 2 --recompute full --recompute-layers -2",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--recompute-layers: expected a number of layers >= 0, got -2"},
    {.name = "ExploreRecomputeLayerCountNotANumber", .args = kExplore + "--recompute none,full:two",
     .message = "--recompute: 'full:two': expected full:N with a number of layers N >= 0"},
    {.name = "ExploreRecomputeLayerCountOfSelective", .args = kExplore + "--recompute selective:2",
     .message = "--recompute: 'selective:2': only full takes a layer count"},
    {.name = "SimulateRecomputeModulesWithoutSelective",
     .args = "simulate --model {dir}/m.json --gpus 2 --pp 2 --global-batch 4 --schedule 1f1b "
             "--recompute full --recompute-modules core_attn,moe_act",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--recompute-modules: names the modules of selective recompute and needs "
                "recompute selective (recompute is full)"},
    // core_attn alone (stored as the default) was accepted and ignored beside another policy.
    {.name = "SimulateRecomputeModuleCoreAttnWithoutSelective",
     .args = "simulate --model {dir}/m.json --gpus 2 --pp 2 --global-batch 4 --schedule 1f1b "
             "--recompute none --recompute-modules core_attn",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--recompute-modules: names the modules of selective recompute and needs "
                "recompute selective (recompute is none)"},
    {.name = "GraphRecomputeModuleCoreAttnWithoutSelective",
     .args = "graph --model gpt3-1.3b --pp 2 --recompute full --recompute-modules core_attn",
     .message = "--recompute-modules: names the modules of selective recompute and needs "
                "recompute selective (recompute is full)"},
    {.name = "SimulateRecomputeModulesUnknown",
     .args = "simulate --model {dir}/m.json --gpus 2 --pp 2 --global-batch 4 --schedule 1f1b "
             "--recompute selective --recompute-modules core_attn,norm",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--recompute-modules: unknown recompute module \"norm\" (expected core_attn, "
                "layernorm, mla_up_proj or moe_act)"},
    {.name = "SimulateRecomputeModuleNoLayerHas",
     .args = "simulate --model {dir}/m.json --gpus 2 --pp 2 --global-batch 4 --schedule 1f1b "
             "--recompute selective --recompute-modules mla_up_proj",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--recompute-modules: recompute module mla_up_proj needs multi-head latent "
                "attention, which no layer of model 'm' has"},
    {.name = "GraphRecomputeModulesWithoutSelective",
     .args = "graph --model {dir}/m.json --pp 2 --recompute full --recompute-modules layernorm",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--recompute-modules: names the modules of selective recompute and needs "
                "recompute selective (recompute is full)"},
    {.name = "GraphRecomputeModulesUnknown",
     .args = "graph --model {dir}/m.json --pp 2 --recompute selective --recompute-modules norm",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--recompute-modules: unknown recompute module \"norm\""},
    {.name = "GraphRecomputeModuleNoLayerHas",
     .args = "graph --model {dir}/m.json --pp 2 --recompute selective --recompute-modules moe_act",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--recompute-modules: recompute module moe_act needs routed experts, which no "
                "layer of model 'm' has"},
    {.name = "GraphRecomputeModuleNoLayerHasEvenPartition",
     .args = "graph --model {dir}/m.json --pp 2 --partition even --recompute selective "
             "--recompute-modules mla_up_proj",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--recompute-modules: recompute module mla_up_proj needs multi-head latent "
                "attention, which no layer of model 'm' has"},
    {.name = "ExploreRecomputeModuleUnknown",
     .args = kExplore + "--recompute none,selective:layernorm+norm",
     .message = "--recompute: 'selective:layernorm+norm': unknown recompute module \"norm\""},
    {.name = "ExploreRecomputeModulesEmpty", .args = kExplore + "--recompute selective:",
     .message = "--recompute: 'selective:': expected selective:a+b with recompute module names "
                "joined by '+'"},
    {.name = "ExploreRecomputeModuleTwice",
     .args = kExplore + "--recompute selective:layernorm+layernorm",
     .message = "--recompute: 'selective:layernorm+layernorm': names recompute module "
                "\"layernorm\" twice"},
    {.name = "ExploreRecomputeModuleNoLayerHas",
     .args = kExplore + "--recompute none,selective:moe_act",
     .message = "--recompute: 'selective:moe_act': recompute module moe_act needs routed "
                "experts, which no layer of model 'gpt3-1.3b' has"},
    {.name = "ExploreRecomputeModulesOnAHeterogeneousCluster",
     .args = "explore --model gpt3-1.3b --cluster {dir}/c.json --global-batch 8 --quiet "
             "--recompute selective:layernorm",
     .files = {{"c.json", text(R"({"name": "mixed", "kinds": [{"preset": "h100-sxm", "gpus": 4},
                                  {"preset": "a100-80g", "gpus": 4}]})")}},
     .message = "--recompute: 'selective:layernorm': recompute modules (selective:a+b) are not "
                "supported on a heterogeneous --cluster"},
    {.name = "ExploreOffloadChoiceNotANumber", .args = kExplore + "--offload-layers 0,half",
     .message = "--offload-layers: 'half': expected a number of layers >= 0 or auto"},
    {.name = "ExploreOffloadAllLayers", .args = kExplore + "--offload-layers 24",
     .message = "--offload-layers: offloads 24 layers but model 'gpt3-1.3b' has 24 transformer "
                "layers"},
    {.name = "GraphOffloadWithPipeline",
     .args = "graph --model {dir}/m.json --pp 2 --offload-layers 1",
     .files = {{"m.json", text(kTinyModel)}},
     .message = "--offload-layers: activation offloading needs pp 1"},
    {.name = "ClusterHostMemoryNegative",
     .args = "simulate --model gpt3-1.3b --cluster {dir}/c.json --gpus 1 --pp 1 --dp 1 "
             "--global-batch 8 --schedule 1f1b",
     .files = {{"c.json", text(R"({"base": "a100-80g", "host_memory_gib_per_gpu": -2})")}},
     .message = "field 'host_memory_gib_per_gpu'"},
    {.name = "SimulateOffloadAboveTheHostMemory",
     .args = "simulate --model gpt3-1.3b --cluster {dir}/c.json --gpus 1 --pp 1 --dp 1 "
             "--global-batch 8 --microbatch-size 8 --schedule 1f1b --offload-layers 8 "
             "--plan {dir}/plan.json",
     .files = {{"c.json", text(R"({"base": "a100-80g", "host_memory_gib_per_gpu": 1})")}},
     .message = "does not fit in host memory: actor 0 offloads"},

    // ---- sweep 5 (2026-11-29). ---------------------------------------------------------------
    {.name = "SimulateTpAboveTheKvHeads",  // was accepted: 8 K/V heads split 16 ways
     .args = "simulate --model llama3-8b --cluster h100-sxm --gpus 16 --pp 1 --tp 16 "
             "--global-batch 4 --schedule 1f1b --no-memory-check",
     .message = "configuration: tp 16 does not divide the 8 key/value heads (query groups) of "
                "llama3-8b"},
    {.name = "ValidateFusedGroupOutOfDependencyOrder",  // passed validate; the real run failed
     .args = "validate {dir}/s.json",
     .files = {{"s.json", text(R"({"actors": [["F0@s1+F0@s0", "B0@s0+B0@s1"]]})")}},
     .exit_code = 1,
     .message = "F0@s1 comes before F0@s0, which it depends on, in the same fused group",
     .report = Report::kList},
    {.name = "SimulatePlanGivenAsScheduleFile",  // was "field 'cluster': unknown field"
     .args = "simulate --schedule-file {dir}/p.json --pp 2 --microbatches 2 --t-f 1 --t-b 1",
     .files = {{"p.json", plan_with([](json&) {})}},
     .message = "p.json: is a jaxpp-sim plan, not a schedule file"},
};
// clang-format on

struct Outcome {
  int exit_code = -1;  // 128 + signal when killed, 124 when the timeout stopped it
  std::string out;
  std::string err;
};

Outcome run_case(const BadInputCase& c, const std::string& args, const std::string& scratch) {
  const std::string out = scratch + "/stdout", err = scratch + "/stderr";
  std::string launcher = "timeout -k 10 " + std::to_string(kTimeoutS) + " ";
  if (c.mpi_processes > 0) {
    launcher += std::string(JAXPP_MPIEXEC) + " --oversubscribe --allow-run-as-root -n " +
                std::to_string(c.mpi_processes) + " ";
  }
  const std::string cmd =
      launcher + JAXPP_SIM_BINARY + " " + args + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(cmd.c_str());
  Outcome o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.out = read_file(out);
  o.err = read_file(err);
  return o;
}

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// The bytes of every small regular file in `dir`: an input a failed command must not have changed.
std::map<std::string, std::string> small_file_contents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && !e.is_symlink() && e.file_size() < (1u << 20))
      out[e.path().filename().string()] = read_file(e.path().string());
  }
  return out;
}

class BadInputCatalogue : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(BadInputCatalogue, FailsCleanlyWithAnErrorNamingTheProblem) {
  const BadInputCase& c = GetParam();
  const std::string dir = make_temp_dir();
  const std::string scratch = make_temp_dir();  // stdout/stderr, outside the case's directory
  for (const File& f : c.files) {
    const std::string path = dir + "/" + f.name;
    if (f.make) {
      f.make(path);
    } else {
      std::ofstream(path, std::ios::binary) << f.content();
    }
  }
  const std::set<std::string> before = entries(dir);
  const std::map<std::string, std::string> contents_before = small_file_contents(dir);
  const std::string args =
      replace_all(replace_all(c.args, "{dir}", dir), "{data}", std::string(JAXPP_TEST_DATA_DIR));

  const Outcome o = run_case(c, args, scratch);
  const std::string context = "jaxpp-sim " + args + "\nstderr: " + o.err + "\nstdout: " + o.out;

  ASSERT_NE(o.exit_code, 124) << "hang: stopped by the " << kTimeoutS << " s timeout\n" << context;
  ASSERT_LT(o.exit_code, 128) << "crash: killed by signal " << o.exit_code - 128 << "\n" << context;
  EXPECT_EQ(o.exit_code, c.exit_code) << context;
  const std::string& text = c.report == Report::kList ? o.out + o.err : o.err;
  const std::string message = replace_all(c.message, "{dir}", dir);  // messages name paths too
  EXPECT_NE(text.find(message), std::string::npos) << "expected '" << message << "'\n"
                                                   << context;
  if (c.report == Report::kOneLine) {
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << context;
    EXPECT_EQ(o.err.rfind("jaxpp-sim", 0), 0u) << context;
    EXPECT_NE(o.err.find(": error: "), std::string::npos) << context;
  }
  EXPECT_EQ(entries(dir), before) << "an output file was left behind\n" << context;
  EXPECT_TRUE(small_file_contents(dir) == contents_before) << "an input was changed\n" << context;

  fs::remove_all(dir);
  fs::remove_all(scratch);
}

INSTANTIATE_TEST_SUITE_P(Cases, BadInputCatalogue, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

TEST(BadInputCatalogueTable, HasAtLeastFortyCasesWithUniqueNames) {
  std::set<std::string> names;
  for (const BadInputCase& c : kCases) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    EXPECT_FALSE(c.message.empty()) << c.name;
    EXPECT_NE(c.exit_code, 0) << c.name;
  }
  EXPECT_GE(kCases.size(), 40u);
}

}  // namespace
}  // namespace jaxpp::testing
