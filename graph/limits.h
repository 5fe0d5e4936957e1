// Size limits on user input.
//
// Far above any real configuration (published runs use at most a few hundred pipeline stages, a
// few thousand microbatches and ~100k-wide layers), and low enough that a typo such as
// `--microbatches 2000000000` or `"layers": 2147483647` is a one-line InputError instead of hours
// of work, an out-of-memory crash or an integer overflow in the work formulas. Checked where the
// sizes enter: the model parser, the task graph, the schedule generators and the custom schedule,
// plan and trace parsers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace jaxpp {

inline constexpr int kMaxLayers = 100'000;                 // layers of one model
// Multi-token prediction modules (DeepSeek-V3 trains with 1; Megatron-LM's mtp_num_layers is
// small): each one's block is found by a walk back over the modules before it.
inline constexpr int kMaxMtpModules = 64;
inline constexpr int kMaxStages = 16'384;                  // pipeline stages (and so actors)
inline constexpr int kMaxMicrobatches = 1 << 20;           // microbatches per iteration
inline constexpr int64_t kMaxStageMicrobatches = 1 << 21;  // stages x microbatches
// Transformer shape (the work formulas stay inside int64 below these).
inline constexpr int kMaxHidden = 1 << 20;
inline constexpr int kMaxHeads = 1 << 14;
inline constexpr int kMaxFfnHidden = 1 << 22;
inline constexpr int kMaxSeqLen = 1 << 22;
inline constexpr int kMaxVocab = 1 << 24;
inline constexpr int kMaxExperts = 1 << 16;  // routed (or shared) experts of one MoE layer
// GPUs of one run or cluster (today's largest clusters hold a few hundred thousand): node counts
// and GPU indices stay far inside an int.
inline constexpr int kMaxGpus = 1 << 24;
// What the check of a GPU count against [1, kMaxGpus] calls it (check_int_in, graph/range_check.h):
// "--gpus: expected a number of GPUs in [1, 16777216], got 0".
inline constexpr const char* kGpuCountWhat = "a number of GPUs";
// One explicit layer's params and byte counts (sums over kMaxLayers layers stay inside int64).
inline constexpr int64_t kMaxLayerQuantity = int64_t{1} << 45;
// A whole model's parameters. Memory in bytes is counted in int64: a model a thousand times
// today's largest (2^50 = 1.1e15 parameters) stays far inside it with its optimizer state.
inline constexpr int64_t kMaxModelParams = int64_t{1} << 50;
// Bytes one device's memory may reach in a simulation (static memory plus the stashes of every
// microbatch in flight): past this the int64 byte counts could overflow.
inline constexpr double kMaxDeviceBytes = 4.6e18;  // about 2^62

// Input files (graph/input_file.h): the size of any one file, so that /dev/zero or a mistyped
// path to a disk image is refused before it is read. A plan.json takes about 1 KiB per
// stage-microbatch (64 stages and 1024 microbatches: about 70 MiB), so a plan of more than about
// 250,000 stage-microbatches is refused when written (plan_to_text, graph/plan.h) rather than
// written and then not read back.
inline constexpr int64_t kMaxInputFileBytes = int64_t{256} << 20;
// JSON nesting (graph/json_util.h): objects and arrays open at once. Every file format of the
// project nests at most 6 deep; the bound keeps the recursive code that walks, copies and prints a
// document (nlohmann's dump, copy, comparison) far from the end of the stack.
inline constexpr int kMaxJsonDepth = 64;

// InputError "<where>: <n> stages ..." when a pipeline of `num_stages` stages and
// `num_microbatches` microbatches exceeds the limits above (sizes below 1 are not checked here).
void check_pipeline_size(int64_t num_stages, int64_t num_microbatches, const std::string& where);

// Numbers at their edges (issue 16, class 3). Every user-given number is checked after its
// conversion to SI units, against a bound that is physically meaningful:
//
// One explicit layer's FLOPs of one pass (1e6 times the forward of a GPT-3 175B layer on a 2048-
// token sequence); sums over kMaxLayers layers and every microbatch stay finite.
inline constexpr double kMaxLayerFlops = 1e21;
// Training steps of one run (warm-up included), and so of a measured trace.
inline constexpr int kMaxSteps = 100'000;
// A user-given duration that is not 0 (stage times, emulated steps) is at least 1 ns, so that a
// denormal in milliseconds does not silently become 0 or a denormal in seconds, and one task or
// transfer lasts at most an hour. A timeout lasts from 1 ms to one day.
inline constexpr double kMinDurationS = 1e-9;
inline constexpr double kMaxTaskDurationS = 3600;
inline constexpr double kMinTimeoutS = 1e-3;
inline constexpr double kMaxTimeoutS = 86400;

// Checked 64-bit size arithmetic: a · b and a + b, or nullopt when the exact result does not fit
// in int64.
std::optional<int64_t> checked_mul(int64_t a, int64_t b);
std::optional<int64_t> checked_add(int64_t a, int64_t b);
// a · b as an int when it is at most `limit` (itself at most INT_MAX), else InputError
// "<where>: <a> x <b> = <product> is more than the limit of <limit>" (the product written exactly,
// or "more than 2^63" when it leaves int64).
int checked_int_product(int64_t a, int64_t b, int64_t limit, const std::string& where);

}  // namespace jaxpp
