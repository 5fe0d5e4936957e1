// ClusterSpec: the hardware a plan runs on, as data (a built-in preset or a JSON file).
//
// Units: every field carries its unit in its name. In JSON, GB = 1e9 bytes, GiB = 2^30 bytes,
// TFLOP/s = 1e12 FLOP/s, us = microseconds, ms = milliseconds. In C++ all values are SI:
// bytes, seconds, FLOP/s, bytes per second.
//
// GEMM efficiency model (fittable, two parameters):
//   eff(x) = gemm_efficiency_max · x / (x + gemm_half_saturation_flops)
// where x is the work of one layer pass on one device (FLOPs of one transformer layer's forward,
// or input/weight backward, for one microbatch divided by tp). Small layer passes (small GEMMs)
// run far below peak; large ones approach gemm_efficiency_max. The achieved compute rate of a
// pass is peak_flops(dtype) · eff(x). Non-GEMM work (layer norms, softmax, dropout, kernel
// launches inside a layer) is folded into the two constants, so they are "model" efficiencies,
// not cuBLAS GEMM efficiencies.
//
// Measured table (optional, gemm_efficiency_measured; empty = the curve above alone): points
// (flops, efficiency) from a calibration, flops strictly increasing. Inside [first, last] eff(x)
// interpolates the efficiency linearly in log(x) between the two neighbouring points (a point's
// own efficiency exactly at it). Outside, it follows the curve's shape scaled to the nearest end
// point: eff(x) = curve(x) · p.efficiency / curve(p.flops), p = first below, last above (so it is
// continuous at both ends; one point serves both sides), capped at 1. x <= 0 gives
// gemm_efficiency_max, table or not.
//
// Kernel model (optional "kernels" object; absent = not modelled, as for a CPU calibration).
// The operator-level cost model (costmodel/operator_cost.h) prices each GEMM of a layer by its
// (m, n, k): efficiency = shape · eff(flops / shape), the curve above taken at the work the GEMM
// issues, so that its fixed cost (the half-saturation work: launch, ramp, tail) is paid once per
// GEMM and not scaled by the shape (a GEMM of one tile costs about that fixed time); a GEMM's time
// never rises as m, n or k shrinks. shape = wave and tile quantization of output tiles of
// gemm_tile_m × gemm_tile_n over num_sms streaming multiprocessors (1 when num_sms is 0) ·
// k / (k + gemm_small_k) (a short inner dimension leaves each tile's pipeline mostly prologue and
// epilogue). When the tiles do not fill whole waves, the library may instead spread the tiles'
// k-iterations evenly over the SMs (stream-K): shape stream_k_rate · tile quantization · depth /
// (max(depth, stream_k_min_k) + gemm_small_k · max(1, tiles / SMs)), with depth = tiles · k / SMs
// (an SM's share takes at least stream_k_min_k iterations' time; from that depth on this is
// d / (d + gemm_small_k) with d = min(k, depth)); the better of the two counts (stream_k_min_k 0:
// no stream-K).
// gemm_small_k and the stream-K constants are fitted on measured H200 GEMMs
// (tests/data/kernels/h200_gemm_bf16.json, scripts/fit_gemm_shapes.py) and assumed for the other GPUs.
// FP8 GEMMs (a model with dtype fp8, Transformer Engine) run at the fp8 peak with efficiency
// fp8_gemm_efficiency · the BF16 efficiency above, the curve taken at the FLOPs the GEMM would do
// in the same time at the BF16 peak (a GEMM's launch and tail cost time, not FLOPs):
//   e_fp8(flops) = fp8_gemm_efficiency · eff(flops / shape · peak_bf16 / peak_fp8) · shape.
// fp8_gemm_efficiency ("kernels.fp8_gemm_efficiency", a fraction in (0, 1]; default 1, the BF16
// fraction of peak) is fitted on the FP8 rows of the validation corpus (docs/validation.md).
// fp8_transpose_copy ("kernels.fp8_transpose_copy", default true): the GPU's FP8 GEMMs take only
// the TN layout (Hopper), so Transformer Engine writes a transposed FP8 copy of each operand for
// the backward GEMMs; false on Blackwell, whose FP8 GEMMs take every layout (TE's
// nvte_is_non_tn_fp8_gemm_supported): one FP8 copy. costmodel/operator_cost.h prices the casts.
// fp8_block_scaling ("kernels.fp8_block_scaling", default false): the GPU's tensor cores take
// block-scaled FP8 operands (MXFP8: one E8M0 scale per 32 elements, applied inside the MMA):
// true on Blackwell (b200, gb200-nvl72; Transformer Engine's MXFP8 recipe "leverages native
// hardware acceleration on Blackwell GPUs (SM 10.0+)", TE user guide, Low precision training,
// MXFP8), false on Hopper, Ampere and MI300X, whose FP8 GEMMs (where they have any) take one
// scale per tensor. A model with "fp8_scaling": "mxfp8" on a GPU without it is an InputError
// (operator_cost.h). mxfp8_gemm_efficiency ("kernels.mxfp8_gemm_efficiency", a factor in (0, 2];
// default 1): an MXFP8 model's FP8 GEMMs run at mxfp8_gemm_efficiency · fp8_gemm_efficiency · the
// BF16 efficiency (fitted on the MXFP8 fit rows of the validation corpus, docs/validation.md).
// FlashAttention runs at attention_efficiency_{forward,backward} of peak on a full wave
// (0 = priced as GEMMs with the curve above); the FlashAttention-2 library kernels (a plan's
// `attention: flash2`) at flash2_attention_efficiency_{forward,backward} ("attention_efficiency":
// {"flash2_forward", "flash2_backward"}; 0 = the same as the fused kernels); element-wise
// kernels move their bytes at hbm_efficiency · hbm_bandwidth_bytes_per_s; every kernel costs
// kernel_overhead_s on top (launch and tail).
//
// Collective contention (optional "collective_contention" object; absent = not modelled): an
// NCCL collective is a kernel of one CTA per channel, each alone on an SM ("NCCL CTAs won't share
// an SM with compute kernels", NVIDIA/nccl#689), and it streams HBM: every byte it receives is
// stored and read back, and user data read or written, "at least 2x ... it can be 3x" the link
// bytes in memory traffic (NVIDIA/nccl#1428). While it runs, compute beside it has the other SMs
// and the rest of the HBM bandwidth. collective_contention.sms (collective_sms) is the number of
// SMs the kernel holds; collective_contention.hbm_bytes_per_byte (collective_hbm_bytes_per_byte)
// its HBM bytes per received byte. The compute beside it runs at rate 1 − s, s =
// collective_compute_share: the larger of the SM share and the HBM share (costmodel/analytic_cost.h
// applies it to the per-block FSDP collectives).
//
// Links are alpha-beta: a transfer of n bytes alone on a link takes
//   latency_s + n / (bandwidth_bytes_per_s · efficiency).
// intra_node = NVLink (per GPU, per direction), inter_node = the network (per GPU). Collectives
// use the same links with allreduce_bus_efficiency applied to the bandwidth.
//
// Element-wise kernels (optional, 0 = not modelled): the measured cost per element of the GeLU
// activation and of its gradient as the runtime's MLP workload runs them (runtime/device.h).
// On a GPU these are memory bound and folded into the GEMM efficiency constants; on a CPU they
// are transcendental-bound and a calibration (`jaxpp-sim calibrate`, costmodel/calibration.h)
// fits them, together with hbm_bandwidth_bytes_per_s for streaming copies and optimizer steps.
//
// JSON form (every key optional when "base" names a preset; unknown keys are errors):
//   { "name": "my-a100", "base": "a100-80g",
//     "peak_tflops": {"bf16": 312, "fp16": 312, "fp8": 0, "fp32": 19.5},
//     "hbm_gib": 80, "hbm_bandwidth_gb_per_s": 2039,
//     "gemm_efficiency": {"max": 0.6, "half_saturation_gflops": 40,
//                         "measured": [{"gflops": 0.0041, "efficiency": 0.12},
//                                      {"gflops": 2.1, "efficiency": 0.45}]},
//     "devices_per_node": 8,
//     "intra_node": {"bandwidth_gb_per_s": 300, "latency_us": 7, "efficiency": 0.8},
//     "inter_node": {"bandwidth_gb_per_s": 24, "latency_us": 20, "efficiency": 1.0},
//     "allreduce_bus_efficiency": 0.75, "launch_overhead_us": 10, "iteration_overhead_ms": 0,
//     "p2p_overhead_us": 10, "weight_bytes_per_param": 2, "grad_bytes_per_param": 4,
//     "optimizer_state_bytes_per_param": 12, "optimizer_traffic_bytes_per_param": 36,
//     "elementwise": {"gelu_ns_per_element": 3.1, "gelu_backward_ns_per_element": 4.2,
//                     "input_generation_ns_per_element": 2.5, "upload_gb_per_s": 12},
//     "collective_step_latency_us": 12,
//     "collective_contention": {"sms": 16, "hbm_bytes_per_byte": 3},
//     "host_link_gb_per_s": 64, "host_memory_gib_per_gpu": 256,
//     "kernels": {"sms": 132, "gemm_tile": [128, 256], "gemm_small_k": 96,
//                 "stream_k": {"min_k": 1024, "rate": 1.0}, "hbm_efficiency": 0.85,
//                 "attention_efficiency": {"forward": 0.55, "backward": 0.45,
//                                          "flash2_forward": 0.3, "flash2_backward": 0.3},
//                 "fp8_gemm_efficiency": 0.8, "fp8_transpose_copy": true,
//                 "fp8_block_scaling": false, "mxfp8_gemm_efficiency": 1,
//                 "kernel_overhead_us": 2} }
// "elementwise", "collective_step_latency_us", "collective_contention", "host_link_gb_per_s" and
// "host_memory_gib_per_gpu" are optional even without a base (absent = 0)
// and written only when non-zero, so files written before they existed still load and still
// round-trip. Likewise
// "gemm_efficiency.measured" (gflops = 1e9 FLOPs, strictly increasing; efficiency in (0, 1]; at
// most kMaxGemmEfficiencyPoints points) is optional (absent = the base's table, or none) and
// written only when non-empty.
//
// Usage:
//   ClusterSpec c = load_cluster("h100-sxm");          // preset, or a path to a JSON file
//   double peak = c.peak_flops(Dtype::kBf16);          // FLOP/s
//   nlohmann::json j = cluster_to_json(c);             // cluster_from_json(j) == c
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/model.h"

namespace jaxpp {

// Most points a cluster file's "gemm_efficiency.measured" may hold.
inline constexpr int kMaxGemmEfficiencyPoints = 4096;

// A measured point of the GEMM efficiency curve: one call (or layer pass) of `flops` FLOPs ran at
// efficiency · peak.
struct GemmEfficiencyPoint {
  double flops = 0;
  double efficiency = 0;
  bool operator==(const GemmEfficiencyPoint&) const = default;
};

struct LinkSpec {
  double bandwidth_bytes_per_s = 0;  // per GPU, per direction
  double latency_s = 0;
  double efficiency = 1.0;  // achieved fraction of bandwidth_bytes_per_s for point-to-point
  double effective_bandwidth_bytes_per_s() const { return bandwidth_bytes_per_s * efficiency; }
  bool operator==(const LinkSpec&) const = default;
};

struct ClusterSpec {
  std::string name;
  // Peak dense tensor FLOP/s indexed by Dtype (kBf16, kFp16, kFp32, kFp8); 0 = unsupported.
  std::array<double, 4> peak_flops_per_s = {0, 0, 0, 0};
  int64_t hbm_bytes = 0;
  double hbm_bandwidth_bytes_per_s = 0;
  double gemm_efficiency_max = 0.6;
  double gemm_half_saturation_flops = 4e10;
  // Measured efficiency points (optional; empty = the analytic curve alone), flops strictly
  // increasing, efficiencies in (0, 1].
  std::vector<GemmEfficiencyPoint> gemm_efficiency_measured;
  int devices_per_node = 8;
  LinkSpec intra_node;
  LinkSpec inter_node;
  double allreduce_bus_efficiency = 0.75;  // applied to link bandwidth in collectives
  // Latency of one step of a collective inside a node (a ring all-reduce of r ranks takes
  // 2(r-1) steps); 0 = intra_node.latency_s. A calibration fits it apart from the point-to-point
  // latency: a pipeline's receiver has been blocked for a while and must be woken, the ranks of a
  // collective arrive together and are awake.
  double collective_step_latency_s = 0;
  double launch_overhead_s = 0;            // per compute instruction (fused group)
  double iteration_overhead_s = 0;         // added once to every step (data loading, etc.)
  double p2p_overhead_s = 0;               // added to every point-to-point transfer
  // Training state per parameter (mixed-precision Adam by default).
  double weight_bytes_per_param = 2;
  double grad_bytes_per_param = 4;
  double optimizer_state_bytes_per_param = 12;    // fp32 master, m, v; sharded by ZeRO-1
  double optimizer_traffic_bytes_per_param = 36;  // HBM bytes read+written by one Adam step
  // Element-wise kernels (see above); 0 = not modelled.
  double gelu_s_per_element = 0;
  double gelu_backward_s_per_element = 0;
  // Host-side generation of the runtime MLP workload's inputs and targets (seeded generator, per
  // element; calibrate measures it); 0 = not modelled.
  double input_generation_s_per_element = 0;
  // Host-to-device copy of the runtime workload's inputs and targets (bytes per second; calibrate
  // measures it: PCIe for a GPU, a memcpy for the host); 0 = not measured: an upload of n bytes
  // costs a copy's 2n bytes of memory traffic, as on the host.
  double upload_bandwidth_bytes_per_s = 0;
  // Fixed cost of one call of each element-wise operation of the runtime workload (the intercept
  // of its calibrated fit: the launch and, on a GPU, the stream-ordered allocation the call makes),
  // added per call by kernel_time_s; 0 = not modelled. On a GPU these few microseconds per call
  // dominate small microbatches (a GeLU of 4096 elements costs 4 us, its arithmetic 20 ns).
  double gelu_call_s = 0;
  double gelu_backward_call_s = 0;
  double copy_call_s = 0;  // a copy or another streaming kernel (loss, optimizer, zero fill)
  double upload_call_s = 0;
  double input_generation_call_s = 0;
  // Kernel model (see above); zeros = not modelled.
  int num_sms = 0;
  int gemm_tile_m = 128;
  int gemm_tile_n = 256;
  double gemm_small_k = 96;
  double stream_k_min_k = 1024;
  double stream_k_rate = 1.0;
  double attention_efficiency_forward = 0;
  double attention_efficiency_backward = 0;
  double flash2_attention_efficiency_forward = 0;   // 0 = attention_efficiency_forward
  double flash2_attention_efficiency_backward = 0;  // 0 = attention_efficiency_backward
  // FP8 GEMM efficiency relative to the BF16 one (see above); 1 = the same fraction of peak.
  double fp8_gemm_efficiency = 1.0;
  bool fp8_transpose_copy = true;  // FP8 casts also write a transposed copy (see above)
  bool fp8_block_scaling = false;  // block-scaled (MXFP8) FP8 tensor cores (see above)
  // MXFP8 GEMMs' efficiency relative to per-tensor FP8 ones (fp8_gemm_efficiency); 1 = the same.
  double mxfp8_gemm_efficiency = 1.0;
  double hbm_efficiency = 1.0;  // achieved fraction of hbm_bandwidth_bytes_per_s, streaming
  double kernel_overhead_s = 0;
  // Compute beside an overlapped collective (see above, "Collective contention"); 0 = not
  // modelled. collective_sms: the SMs one NCCL collective kernel holds (one CTA per channel,
  // alone on its SM); collective_hbm_bytes_per_byte: the HBM bytes it reads and writes per byte
  // it receives.
  double collective_sms = 0;
  double collective_hbm_bytes_per_byte = 0;
  // The link between a GPU and host memory, per GPU and per direction (datasheet figure:
  // PCIe or NVLink-C2C, docs/hardware.md); what activation offloading
  // (ParallelConfig::offload_layers) copies over. 0 = not known: offloading is refused.
  double host_link_bandwidth_bytes_per_s = 0;
  // Host (CPU) memory available to one GPU's process, in bytes: the node's system memory divided
  // by its GPUs (datasheet figure, docs/hardware.md). What activation offloading
  // (ParallelConfig::offload_layers) may fill: a plan whose offloaded activations exceed it is
  // refused. 0 = not known: not checked.
  int64_t host_memory_bytes_per_gpu = 0;

  // FLOP/s for `dtype`; InputError if the cluster has no peak for it.
  double peak_flops(Dtype dtype) const;
  // collective_step_latency_s, or intra_node.latency_s when that is 0.
  double intra_collective_latency_s() const;
  // eff(x) above (the measured table when there is one), x in FLOPs of one layer pass on one
  // device. O(log n) in the table's size, no allocation.
  double gemm_efficiency(double layer_pass_flops) const;
  // The share of the GPU a collective receiving `received_bytes_per_s` takes from the compute
  // beside it: max(collective_sms / num_sms, collective_hbm_bytes_per_byte · received /
  // hbm_bandwidth_bytes_per_s), capped at 1; 0 when contention is not modelled.
  double collective_compute_share(double received_bytes_per_s) const;
  bool contention_modelled() const {
    return collective_sms > 0 || collective_hbm_bytes_per_byte > 0;
  }
  bool operator==(const ClusterSpec&) const = default;
};

// The fixed costs per call (ClusterSpec::gelu_call_s, ...) with their keys in the cluster file's
// "elementwise" object (microseconds): read, written and scaled by a trace calibration from here.
inline constexpr std::array<std::pair<const char*, double ClusterSpec::*>, 5> kCallCosts = {{
    {"gelu_call_us", &ClusterSpec::gelu_call_s},
    {"gelu_backward_call_us", &ClusterSpec::gelu_backward_call_s},
    {"copy_call_us", &ClusterSpec::copy_call_s},
    {"upload_call_us", &ClusterSpec::upload_call_s},
    {"input_generation_call_us", &ClusterSpec::input_generation_call_s},
}};

// A preset name (case-insensitive: a100-40g, a100-80g, h100-sxm, h200, h800, b200, gb200-nvl72,
// mi300x; docs/hardware.md gives each field its source) or a path to a JSON file.
ClusterSpec load_cluster(const std::string& name_or_path);

// load_cluster for a user-given name or path (the CLI's --cluster, the Python module's
// Cluster.load): it says what was actually given when it is neither a preset nor a regular file:
//   h900: unknown cluster: not a preset and no such file (presets: a100-80g, ...)
//   clusters/: is a directory, not a file
//   pipe: is not a regular file (a FIFO)
ClusterSpec load_cluster_arg(const std::string& name_or_path);
// Parses the JSON form; "base" (a preset) supplies defaults, otherwise every field is required.
// `source` names the document in errors.
ClusterSpec cluster_from_json(const nlohmann::json& doc, const std::string& source);
// A link object of its own ({"bandwidth_gb_per_s", "latency_us", optional "efficiency"}, as a
// heterogeneous cluster's "inter_kind"), with the bounds of a cluster file's links.
LinkSpec link_from_json(const JsonObject& obj);
// Full JSON form (no "base"), which cluster_from_json reads back to an equal ClusterSpec.
nlohmann::json cluster_to_json(const ClusterSpec& cluster);
std::vector<std::string> cluster_preset_names();
std::string cluster_preset_list();  // the names, comma-separated, for error messages
ClusterSpec cluster_preset(const std::string& name);  // InputError if unknown

}  // namespace jaxpp
