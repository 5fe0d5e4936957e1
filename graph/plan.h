// Plan: everything needed to simulate or run one configuration, as a versioned JSON file.
//
// plan.json = { "format": "jaxpp-sim-plan", "version": 1, "model": <model explicit form>,
//   "cluster": <ClusterSpec JSON, opaque to graph/>, "config": {...}, "partition": {...},
//   "placement": {...}, "program": {...}, "predicted": <metrics JSON, opaque to graph/> }
// `explore` and `simulate --plan` write it; `run` and `validate` read it. A file of another
// format or version is rejected with a clear error.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "graph/limits.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/program.h"

namespace jaxpp {

inline constexpr int kPlanVersion = 1;

// Attention kernel of the run: FlashAttention (fused, causal work only, no s x s activations;
// today's default in Megatron-LM/Transformer Engine, torchtitan, JAX) or the unfused form of
// Megatron-LM before FlashAttention (batched QK^T and attention x V GEMMs, a fused
// scale-mask-softmax kernel, s x s scores and dropout mask stashed for the backward).
enum class AttentionKernel { kFlash, kUnfused };
inline constexpr std::array kAllAttentionKernels = {AttentionKernel::kFlash,
                                                    AttentionKernel::kUnfused};
std::string_view to_string(AttentionKernel a);  // "flash", "unfused"
AttentionKernel parse_attention_kernel(std::string_view s, const std::string& where);

// How the devices are used. gpus = pp · dp · cp · tp. Rank layout (costmodel/analytic_cost.h):
// tensor parallelism innermost, then context parallelism, then data parallelism, then pipeline.
struct ParallelConfig {
  int gpus = 1;
  int pp = 1;
  int tp = 1;
  int dp = 1;
  // Context parallelism: each sequence split over cp devices (ring attention exchanging K/V);
  // gradients are reduced over dp · cp devices.
  int cp = 1;
  int virtual_stages = 1;  // v: stages per actor
  int microbatch_size = 1;
  int num_microbatches = 1;
  int global_batch = 1;  // sequences per iteration over all dp replicas
  std::string schedule = "1f1b";
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;
  // Distributed optimizer (Megatron-LM's --use-distributed-optimizer, ZeRO-1): optimizer state
  // sharded over the dp · cp replicas; gradients reduce-scattered, parameters all-gathered.
  bool zero1 = false;
  AttentionKernel attention = AttentionKernel::kFlash;
  // Tensor-parallel communication overlapped with the neighbouring GEMMs (Megatron-LM
  // --tp-comm-overlap, Transformer Engine userbuffers; needs sequence parallelism). Megatron's
  // default: off.
  bool tp_comm_overlap = false;
  // Data-parallel gradient reduction overlapped with the backward (Megatron-LM
  // --overlap-grad-reduce) and, with the distributed optimizer, the parameter all-gather with the
  // next forward (--overlap-param-gather). Megatron's default: off.
  bool overlap_grad_reduce = false;
  bool operator==(const ParallelConfig&) const = default;
};
nlohmann::json config_to_json(const ParallelConfig& c);
ParallelConfig config_from_json(const nlohmann::json& j, const std::string& where);

struct Plan {
  ModelSpec model;
  nlohmann::json cluster;  // parsed by costmodel/
  ParallelConfig config;
  Partition partition;
  Placement placement;
  Program program;
  nlohmann::json predicted;  // metrics written by the simulator; may be null
};

nlohmann::json plan_to_json(const Plan& plan);
Plan plan_from_json(const nlohmann::json& j, const std::string& source);
Plan load_plan(const std::string& path);
// The plan file's text (plan_to_json, indented). A plan that could not be read back (longer than
// kMaxInputFileBytes, graph/limits.h) is an InputError "<where>: the plan would be N MiB, ..."
// instead of a file that load_plan refuses.
std::string plan_to_text(const Plan& plan, const std::string& where = "plan",
                         int64_t max_bytes = kMaxInputFileBytes);
void save_plan(const Plan& plan, const std::string& path);  // atomic write

}  // namespace jaxpp
