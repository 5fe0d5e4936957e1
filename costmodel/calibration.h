// Calibration: turning measurements into a ClusterSpec, and predicting what a runtime really
// runs from a calibrated ClusterSpec. Pure maths: no clocks, no threads, no files; the
// measurements come from runtime/microbench.h (microbenchmarks on a backend, or observations of
// a measured run trace) and `jaxpp-sim calibrate` writes the result (docs/calibrate.md).
//
// Fits (all weighted least squares on RELATIVE residuals: a point counts by (measured − model) /
// measured, so microsecond and second measurements weigh the same; coefficients are
// constrained to be >= 0 by dropping a negative one and refitting):
//   GEMM curve       t(x) = t0 + x / R for one GEMM call of x FLOPs. This is exactly the
//                    ClusterSpec efficiency curve eff(x) = emax·x / (x + x_half) with
//                    peak·emax = R and x_half = t0·R (t = x / (peak·eff(x)) = (x + x_half) / R).
//                    A calibrated cluster stores peak · emax = R (see calibrate() below).
//   alpha-beta       t(n) = latency + n / bandwidth for a message (or a copy) of n bytes.
//   all-reduce       t(r, n) = 2(r−1)·latency + 2(r−1)/r · n / bus_bandwidth for r ranks and n
//                    bytes (ring). The microbenchmarks fit both coefficients (the step latency
//                    goes to collective_step_latency_s: the ranks of a collective are awake, a
//                    pipeline's receiver is woken, and the two latencies differ by 5x on an
//                    oversubscribed host); a trace fit keeps the base's latency and fits the
//                    bandwidth.
//   per element      t(n) = t0 + n · s_per_element (GeLU and its gradient; the host-side
//                    generation of the MLP workload's inputs and targets).
// Residuals are reported per point as (measured − fitted) / fitted (signed, so + means the
// model is optimistic).
//
// Link fits reject outliers (fit_alpha_beta, fit_allreduce_with_latency, the trace's link fits;
// fit_robust_relative): a point of a shared host's microbenchmark is sometimes bimodal (a 2 MiB
// message that took 0.66 ms in one calibration and 1.24 ms in the next) and, weighing by its
// relative error like every other point, pulls the latency and the bandwidth of the whole fit.
// After the least-squares fit, the point with the largest |relative residual| is dropped when that
// residual exceeds max(kOutlierMads · 1.4826 · MAD of the residuals, kOutlierFloor), and the
// fit is redone; this repeats while more than half of the points (and one more than the
// coefficients) remain. A dropped point keeps its residual against the final fit and is marked in
// LinearFit::rejected.
//
// Units: seconds, bytes, FLOPs, bytes per second, FLOP/s; sizes are counts of elements or bytes
// as the names say.
//
// Usage:
//   Measurements m = ...;                        // runtime/microbench.h
//   Calibration cal = calibrate(m, cluster_preset("a100-80g"), "calibrated-threads");
//   save cluster_to_json(cal.cluster);           // loads with load_cluster(path)
//   KernelCost cost(stage_kernels, stage_to_actor, cal.cluster, Dtype::kFp32, /*dp=*/1);
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/cost_provider.h"
#include "graph/model.h"
#include "graph/program.h"

namespace jaxpp {

// ---- Statistics of repeated timings ------------------------------------------------------------

// Median of `values` (mean of the two middle values for an even count); 0 for none.
double median_of(std::vector<double> values);
// Linear-interpolated quantile q in [0, 1] of `values`; 0 for none.
double quantile_of(std::vector<double> values, double q);

// ---- Least squares -----------------------------------------------------------------------------

// y ≈ Σ_j coefficients[j] · rows[i][j], coefficients >= 0, minimising Σ ((y_i − ŷ_i) / y_i)².
struct LinearFit {
  std::vector<double> coefficients;
  std::vector<double> fitted;     // ŷ_i
  std::vector<double> residuals;  // (y_i − ŷ_i) / ŷ_i
  double rms_residual = 0;        // root mean square of `residuals` of the points fitted
  double max_abs_residual = 0;    // likewise
  // Per point: true when a robust fit left it out as an outlier (empty: every point was fitted).
  std::vector<bool> rejected;
  bool is_rejected(size_t i) const { return i < rejected.size() && rejected[i]; }
};
// InputError ("<what>: ...") when there are fewer points than coefficients, a y is not > 0, or
// the points cannot determine the coefficients (e.g. every x equal).
LinearFit fit_nonnegative_relative(const std::vector<std::vector<double>>& rows,
                                   std::span<const double> y, const std::string& what);

// Outlier rejection of the robust fit (see the top of this file): a residual counts as an
// outlier beyond kOutlierMads robust standard deviations (1.4826 · MAD) and beyond kOutlierFloor
// (so that a near-perfect fit, whose MAD is ~0, does not reject ordinary 5% noise).
inline constexpr double kOutlierMads = 3.0;
inline constexpr double kOutlierFloor = 0.15;
// fit_nonnegative_relative with outliers dropped one at a time; `rejected` marks them.
LinearFit fit_robust_relative(const std::vector<std::vector<double>>& rows,
                              std::span<const double> y, const std::string& what);

struct GemmCurveFit {
  double rate_flops_per_s = 0;       // R: the asymptotic rate (peak · emax)
  double half_saturation_flops = 0;  // x_half = t0 · R
  double call_overhead_s = 0;        // t0
  LinearFit fit;
  // Time of one GEMM call of `flops` under the fit.
  double time_s(double flops) const { return call_overhead_s + flops / rate_flops_per_s; }
};
GemmCurveFit fit_gemm_curve(std::span<const double> flops, std::span<const double> seconds);

struct AlphaBetaFit {
  double latency_s = 0;
  double bandwidth_bytes_per_s = 0;
  LinearFit fit;
  double time_s(double bytes) const { return latency_s + bytes / bandwidth_bytes_per_s; }
};
// Robust (outliers rejected). `robust` false: plain least squares (kept for comparison).
AlphaBetaFit fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds,
                            const std::string& what, bool robust = true);

struct AllReduceFit {
  double latency_s = 0;  // per ring step (given, or fitted)
  // +infinity when the times do not grow with size (no bandwidth limit the points can show).
  double bus_bandwidth_bytes_per_s = 0;
  LinearFit fit;  // residuals of the complete model (latency term included)
  double time_s(int ranks, double bytes) const;
};
// The bandwidth with the step latency given. InputError when no time exceeds its latency term.
AllReduceFit fit_allreduce(std::span<const int> ranks, std::span<const double> bytes,
                           std::span<const double> seconds, double latency_s);
// Both the step latency and the bandwidth (needs two or more points of different sizes or rank
// counts), outliers rejected. InputError when the points cannot determine them.
AllReduceFit fit_allreduce_with_latency(std::span<const int> ranks, std::span<const double> bytes,
                                        std::span<const double> seconds);

struct PerElementFit {
  double call_overhead_s = 0;
  double s_per_element = 0;
  LinearFit fit;
};
PerElementFit fit_per_element(std::span<const double> elements, std::span<const double> seconds,
                              const std::string& what);

// ---- From microbenchmark measurements to a ClusterSpec -----------------------------------------

// One point of a microbenchmark: the median over the timed repetitions.
struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  bool accumulate = false;  // C += A B
  double seconds = 0;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * k; }
};
struct SizeSample {  // per-element kernels (elements) and copies / messages (bytes)
  double size = 0;
  double seconds = 0;
};
struct AllReduceSample {
  int ranks = 0;
  double bytes = 0;
  double seconds = 0;
};

struct Measurements {
  std::string backend;                // "threads", "mpi", "cuda"
  std::string device;                 // "host" or the GPU's name
  int ranks = 1;                      // workers that took part in the communication benchmarks
  int ranks_per_host = 1;             // devices_per_node of the result
  // The P2P samples also price the network (inter_node): a host backend's "node" is the host
  // itself. False when they are the links inside one node only (the GPUs of one cuda host).
  bool p2p_is_network = true;
  int64_t memory_bytes_per_rank = 0;  // hbm_bytes of the result (0: keep the base's)
  std::vector<GemmSample> gemm;
  std::vector<SizeSample> gelu;           // size = elements
  std::vector<SizeSample> gelu_backward;  // size = elements
  std::vector<SizeSample> copy;           // size = bytes of the array (2x moved: read + write)
  std::vector<SizeSample> input_generation;  // size = elements; empty: not measured
  std::vector<SizeSample> upload;  // size = bytes copied host -> device; empty: not measured
  std::vector<SizeSample> p2p;            // size = payload bytes; seconds = one-way time
  std::vector<AllReduceSample> allreduce;
  std::vector<double> launch_overhead_s;  // per compute instruction; the fit takes the median
                                          // (run_microbenchmarks gives one: its rounds combined)
};

// The GEMM benchmark at one FLOP count: the mean time of its shapes and the rate it gives.
struct GemmPoint {
  double flops = 0;
  double mean_s = 0;
  double rate_flops_per_s = 0;
};

struct Calibration {
  ClusterSpec cluster;
  GemmCurveFit gemm;
  std::vector<GemmPoint> gemm_measured;  // by increasing FLOPs
  PerElementFit gelu, gelu_backward;
  PerElementFit input_generation;  // valid when has_input_generation
  bool has_input_generation = false;
  AlphaBetaFit copy;  // bandwidth = bytes moved (read + written) per second
  AlphaBetaFit upload;  // host -> device bytes per second; valid when has_upload
  bool has_upload = false;
  AlphaBetaFit p2p;   // valid when has_p2p
  bool has_p2p = false;
  AllReduceFit allreduce;  // valid when has_allreduce
  bool has_allreduce = false;
  // All-reduce times did not grow with size (no bandwidth limit visible): bus efficiency 1, the
  // largest the model allows (has_allreduce is true and the step latency fitted).
  bool allreduce_unbounded = false;
  double launch_overhead_s = 0;
};

// Fits every microbenchmark and builds the cluster: peak (bf16, fp16, fp32) = the highest rate
// the measured (fp64) GEMMs reached (or the fitted asymptotic rate R when that is higher),
// gemm_efficiency max = R / peak and the fitted half saturation (so the analytic curve is the
// fit), and the measured efficiency table (gemm_efficiency_measured): per FLOP count, the mean
// time of its shapes as a fraction of peak. Predictions interpolate the table inside the measured
// range, where the two-parameter curve misfits by up to 25% (a host's GEMM rate keeps rising
// past the sizes where t0 + x / R saturates), and follow the curve outside it; GeLU costs;
// hbm_bandwidth = copy bandwidth; intra_node and inter_node = the point-to-point fit (one host:
// both links are the one measured; inter_node kept when !p2p_is_network) with
// efficiency 1 and p2p_overhead 0;
// allreduce_bus_efficiency = bus bandwidth / link bandwidth, clamped to (0, 1] (1 when the
// all-reduce times do not grow with size), collective_step_latency = the fitted step latency
// (at least 1 ns, as 0 means "the link's latency");
// launch_overhead = median of the samples; iteration_overhead 0; training-state bytes per
// parameter of the fp64 workload with Adam (8 weights, 8 gradients, 16 moments, 64 bytes of
// optimizer traffic). What was not measured (no point-to-point samples: the links and the
// all-reduce efficiency; no all-reduce samples: its efficiency; memory_bytes_per_rank 0: the
// memory size) keeps `base`'s value. InputError naming the benchmark when one has too few points.
Calibration calibrate(const Measurements& m, const ClusterSpec& base, const std::string& name);

// The fitted parameters of a cluster by name ("gemm_rate_flops_per_s", "p2p_latency_s", ...), in
// a fixed order, for reports and for comparing two calibrations.
std::vector<std::pair<std::string, double>> fitted_parameters(const ClusterSpec& c);
// Fits, parameters and residuals as JSON (what `calibrate --json` prints).
nlohmann::json calibration_to_json(const Calibration& cal);

// ---- Kernel-level prediction -------------------------------------------------------------------

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool accumulate = false;  // C += A·B: C is read as well as written
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * k; }
  // Memory traffic of the runtime workload's fp64 GEMM: A and B read once, C written (and read).
  double bytes() const {
    const double mn = static_cast<double>(m) * static_cast<double>(n);
    return 8.0 * (static_cast<double>(m) * k + static_cast<double>(k) * n +
                  (accumulate ? 2.0 : 1.0) * mn);
  }
};

// One all-to-all (Backend::alltoallv) among the `group_size` replicas of an actor that form an
// expert-parallel group (replicas g·group_size ... g·group_size + group_size − 1), sending
// `bytes_per_peer` to each other member.
struct AllToAllWork {
  int group_size = 1;
  double bytes_per_peer = 0;
};

// What one task (or optimizer step) of a runtime workload launches.
struct KernelWork {
  std::vector<GemmShape> gemms;
  std::vector<AllToAllWork> alltoalls;  // blocking, between the kernels (MoE dispatch/combine)
  int64_t gelu_elements = 0;
  int64_t gelu_backward_elements = 0;
  int64_t memory_bytes = 0;  // streaming traffic (read + written): copies, loss, optimizer
  // Elements of inputs and targets the runtime's MLP workload generates on the host.
  int64_t generated_elements = 0;
  // Bytes copied between the host and the device, either way (the inputs and targets; the MoE
  // workload's routing, dispatch and combine staged through the host), at the cluster's upload
  // bandwidth (calibrate measures host -> device and assumes the other way is as fast).
  int64_t host_transfer_bytes = 0;
  // Calls, each paying the cluster's fixed cost of its kind (gelu_call_s, ...): GeLU and GeLU
  // gradient kernels; streaming kernels of memory_bytes (copies, the loss, optimizer steps, zero
  // fills); copies between host and device; host-side generations of an input or a target.
  int64_t gelu_calls = 0;
  int64_t gelu_backward_calls = 0;
  int64_t memory_calls = 0;
  int64_t host_transfer_calls = 0;
  int64_t generation_calls = 0;
  KernelWork& operator+=(const KernelWork& other);
  double gemm_flops() const;
};

// Σ_gemm max(flops / (peak(dtype) · eff(flops)), bytes / hbm_bandwidth) + gelu and gelu-gradient elements · their costs +
// generated elements · input_generation cost + memory_bytes / hbm_bandwidth +
// host_transfer_bytes / upload_bandwidth (2 · host_transfer_bytes / hbm_bandwidth when the cluster
// has no upload bandwidth: a copy on the host) + each kind's calls · its fixed cost per call
// (gelu_call_s, gelu_backward_call_s, copy_call_s for memory_calls, upload_call_s for
// host_transfer_calls, input_generation_call_s). A GEMM's fixed cost is in its efficiency (the
// measured table's small points). No launch overhead (the executor's per instruction).
double kernel_time_s(const KernelWork& work, const ClusterSpec& cluster, Dtype dtype);

// One all-to-all of `a` for the replicas of `actor` (dp replicas per actor, ranks actor·dp +
// replica), over the link between the group's first and last member (intra-node when they share
// a node, by the rank layout of actors_share_node): a counts exchange and the data exchange (the
// MPI backend's MPI_Alltoall + MPI_Alltoallv; the threads backend's rendezvous), each g − 1
// pairwise steps:  2·(g − 1)·(latency + p2p_overhead) + (g − 1)·bytes_per_peer / bandwidth
// (the link's effective bandwidth). 0 for a group of one.
double alltoall_time_s(const AllToAllWork& a, const ClusterSpec& cluster, int dp, int actor);

// Ring all-reduce of `bytes` per device over `ranks` data-parallel replicas, hierarchical as in
// AnalyticCost (tp = 1): g = min(devices_per_node, ranks) peers inside a node, ranks / g nodes.
double ring_allreduce_time_s(const ClusterSpec& cluster, int ranks, double bytes);

// Whether two actors (pipeline ranks of dp devices each) share a node: (a·dp)/devices_per_node.
bool actors_share_node(const ClusterSpec& cluster, int dp, int actor_a, int actor_b);

// CostProvider of a workload described kernel by kernel, per stage:
//   kCompute   launch_overhead + Σ tasks (kernel_time_s(task kernels of its stage) + Σ its
//              all-to-alls' alltoall_time_s); alltoall() reports the all-to-all part, all of it
//              exposed (the runtime's all-to-all blocks its worker: nothing overlaps it)
//   kOptimizer launch_overhead + kernel_time_s(optimizer kernels of its stage)
//   transfers  link latency + p2p_overhead, link bandwidth · efficiency (link by actors_share_node)
//   kAllReduce ring_allreduce_time_s(dp, ins.bytes)
struct StageKernels {
  std::array<KernelWork, 4> task;  // indexed by TaskKind (F, B, I, W)
  KernelWork optimizer;
};
class KernelCost : public CostProvider {
 public:
  KernelCost(std::vector<StageKernels> stages, int num_actors, const ClusterSpec& cluster,
             Dtype dtype, int dp);
  double compute_s(int actor, const Instruction& ins) const override;
  double p2p_latency_s(int from, int to) const override;
  double p2p_bandwidth_bytes_per_s(int from, int to) const override;
  int link_id(int from, int to) const override;
  double allreduce_s(int actor, const Instruction& ins) const override;
  AllToAll alltoall(int actor, const Instruction& ins) const override;
  double task_s(TaskKind kind, int stage) const;  // kernels only, without launch overhead
  // The all-to-all of one task of `stage` on `actor`'s replicas.
  double task_alltoall_s(TaskKind kind, int stage, int actor) const;

 private:
  std::vector<StageKernels> stages_;
  int num_actors_;
  ClusterSpec cluster_;
  Dtype dtype_;
  int dp_;
};

// Prediction of an EMULATED run: the emulation cost (what the workers sleep, times time_scale)
// plus what the backend itself costs, from a cluster calibrated on that backend:
//   compute/optimizer  time_scale · emulated + launch_overhead
//   transfer           max(time_scale · emulated transfer, backend latency + 8 bytes / bandwidth)
//                      (a message carries its ready time and no payload; the receiver finishes
//                      at the later of the two), infinite bandwidth
//   kAllReduce         max(time_scale · emulated, backend all-reduce of one double over dp)
//   all-to-all         time_scale · emulated (an MoE plan's all-to-all is part of the sleep)
// `emulated` must outlive this object.
class EmulationPredictionCost : public CostProvider {
 public:
  EmulationPredictionCost(const CostProvider& emulated, double time_scale,
                          const ClusterSpec& backend_cluster, int num_actors, int dp);
  // `emulated` is kept by reference: a temporary cannot bind (the cluster is copied).
  EmulationPredictionCost(const CostProvider&& emulated, double time_scale,
                          const ClusterSpec& backend_cluster, int num_actors, int dp) = delete;
  double compute_s(int actor, const Instruction& ins) const override;
  double p2p_latency_s(int from, int to) const override;
  double p2p_bandwidth_bytes_per_s(int from, int to) const override;  // +infinity
  int link_id(int from, int to) const override;
  double transfer_latency_s(int from, int to, const Instruction& ins) const override;
  double allreduce_s(int actor, const Instruction& ins) const override;
  AllToAll alltoall(int actor, const Instruction& ins) const override;

 private:
  const CostProvider& emulated_;
  double time_scale_;
  ClusterSpec cluster_;
  int num_actors_;
  int dp_;
};

// ---- From a measured run trace -----------------------------------------------------------------

// A compute instruction of a measured run with what a base cluster predicts for its kernels
// (kernel_time_s, no launch overhead). kind: "F", "B", "I", "W", "fused" or "optimizer".
struct ComputeObservation {
  std::string kind;
  double measured_s = 0;
  double predicted_s = 0;
};
// A transfer: send start to the matching receive's end.
struct TransferObservation {
  int from = 0, to = 0;
  double bytes = 0;
  double seconds = 0;
};
struct TraceObservations {
  int num_actors = 0;
  int dp = 1;
  std::vector<ComputeObservation> computes;
  std::vector<TransferObservation> transfers;
  std::vector<AllReduceSample> allreduces;  // ranks = dp
};

struct KindSummary {
  int count = 0;
  double measured_s = 0;  // median; lower quartile for "transfer" and "allreduce" (as fitted)
  double predicted_before_s = 0;  // median, base cluster, launch overhead included
  double predicted_after_s = 0;   // median, fitted cluster
};
struct TraceCalibration {
  ClusterSpec cluster;
  double compute_slowdown = 1;  // measured ≈ launch + slowdown · base kernel time
  double launch_overhead_s = 0;
  LinearFit compute_fit;
  bool fitted_transfers = false;
  bool fitted_allreduce = false;
  std::map<std::string, KindSummary> kinds;  // compute kinds and "transfer", "allreduce"
};

// A neutral starting point for calibrate_from_trace when no calibrated cluster is at hand:
// 1e10 FLOP/s for every GEMM (no efficiency curve), element-wise kernels not modelled (0 s),
// memory traffic at 1e11 bytes/s, no launch overhead, links of 1e10 bytes/s and 0 latency, one
// node of 1024 devices. A fit on top of it yields an effective FLOP rate and a launch overhead.
ClusterSpec reference_host_cluster();

// Fits a trace's observations on top of `base`:
//   compute    measured = launch + slowdown · predicted over all compute observations; when every
//              prediction is the same (one kind of work), launch stays the base's and only the
//              slowdown is fitted. The cluster's rates (peaks, hbm and upload bandwidth) are
//              divided by the slowdown and its costs (GeLU and input generation per element, the
//              fixed costs per call) multiplied by it, so its kernel times scale by it exactly.
//   transfers  per link class (same node or not, by actors_share_node) and payload size, the
//              lower quartile of the observed times (a transfer observed late because its receiver
//              was busy is not a slow transfer); an alpha-beta fit over two or more sizes, else
//              the latency with the base's bandwidth. p2p_overhead becomes 0 (folded into the
//              link latency).
//   allreduce  (dp > 1) per size, the lower quartile; the bus efficiency that fits them best with
//              the link latency fixed, clamped to (0, 1].
// InputError when there is no compute observation.
TraceCalibration calibrate_from_trace(const TraceObservations& obs, const ClusterSpec& base,
                                      const std::string& name);
nlohmann::json trace_calibration_to_json(const TraceCalibration& cal);

}  // namespace jaxpp
