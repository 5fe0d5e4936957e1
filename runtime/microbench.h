// Microbenchmarks for calibration (`jaxpp-sim calibrate`): they time, on a real backend, the
// operations a run is made of, and hand the medians to the fitting in costmodel/calibration.h.
//
//   GEMM          Device::gemm over a range of sizes in exactly the MLP workload's mix of shapes,
//                 transpositions and accumulation (forward NN, input-gradient NT, weight-gradient
//                 TN accumulating), so the fitted curve is the workload's average efficiency
//   GeLU          Device::gelu and Device::gelu_backward over a range of element counts
//   input gen.    the MLP workload's seeded generation of an input or target (mlp_input), on the
//                 host, over element counts (the first stage's forward generates its input, the
//                 last stage's its target: 40-50 us per 16 Ki elements here, 1% of a task)
//   copy          Device::copy (allocation + copy, as the workload's residual copies) over sizes
//   P2P           ping-pong of Backend::send_message / wait_message over message sizes (one-way
//                 time = round trip / 2), the executor's transfer path; actors pair up (0-1, 2-3,
//                 ...) and every pair runs at once, as a pipeline's stages send at once; actor 0
//                 measures; each side computes ~1 ms between messages (spinning, or sleeping
//                 on an oversubscribed host), so the time includes waking a blocked receiver
//   all-reduce    Backend::allreduce_tensor over sizes, for every rank count r that divides the
//                 number of ranks (a world of ranks/r actors x r replicas: ranks/r all-reduces of
//                 r ranks run at once, as the data-parallel reductions of a run do)
//   launch        the executor (run_worker) on a program of empty compute instructions with a
//                 zero-cost emulated workload: time per instruction, one short run per
//                 repetition; per round the median over every worker (workers sit on different
//                 hardware threads, which on a virtual machine need not run alike) of several
//                 worlds
// Threads workers (compute, communication and launch benchmarks) are pinned round robin to the
// hardware threads, so that two calibrations measure the same placement.
// Measurement: every point is run `warmup` times untimed, then `repeats` timed repetitions; a
// repetition loops the operation until it lasts at least min_repetition_s (per-call time =
// elapsed / calls); the point's value is the median of the repetitions, and with
// Timing::rounds > 1 the lower quartile over that many rounds of the whole suite (interference
// only slows a benchmark down, so the quieter rounds are the better estimate).
// GeLU's operands are drawn like the MLP workload's pre-activations (x W1 with x uniform in
// [-1, 1) and W1 uniform in ±1/sqrt(hidden): close to normal with sigma 1/3): tanh's cost depends
// on its argument (glibc takes different paths by magnitude; 10 ns/element for |u| < 0.1 against
// 18-20 ns for |u| ~ 1 on a 2.6 GHz EPYC), so uniform operands would over-predict the workload. The compute benchmarks'
// operands rotate through a pool larger than the caches (Timing::cold_pool_bytes), so every call
// finds them cold, as a pipelined run's tasks do; on hot operands some kernels run up to 1.8x
// faster (GeLU on arrays that fit the L2 cache) and would make predictions optimistic.
//
// Backends: threads (the compute benchmarks run on min(ranks, hardware threads) threads at once,
// as the actors of a run compute at once; values are the median over the threads), mpi (call on
// every rank of mpirun; the compute benchmarks run on the first min(ranks, hardware threads)
// ranks at once, rank 0 keeps its values; P2P between rank pairs; only rank 0 returns
// root = true with the measurements), cuda (the compute benchmarks on GPU 0 through the same
// Device interface; no communication benchmarks: RuntimeFailure without a CUDA build or device).
// Memory per rank (Measurements::memory_bytes_per_rank, the calibrated cluster's hbm_gib):
// Device::memory_bytes of the host divided by the ranks of a host on threads and mpi, of GPU 0 on
// cuda.
//
// Also here, because they describe what the runtime runs:
//   mlp_stage_kernels   the kernels of each task of the MLP workload (runtime/workload.h), for
//                       KernelCost predictions from a calibrated cluster
//   observe_trace       the observations of a measured run trace that calibrate_from_trace fits
//
// Units: seconds, bytes, elements, FLOPs.
//
// Usage:
//   MicrobenchOptions o; o.backend = BackendKind::kThreads; o.quick = true;
//   MicrobenchResult r = run_microbenchmarks(o, nullptr);
//   Calibration cal = calibrate(r.measurements, cluster_preset("a100-80g"), "host");
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "graph/program.h"
#include "runtime/backend.h"
#include "runtime/device.h"
#include "runtime/workload.h"
#include "trace/trace.h"

namespace jaxpp {

struct Timing {
  int warmup = 2;                  // untimed repetitions
  int repeats = 7;                 // timed repetitions (median)
  // run_microbenchmarks measures the whole suite this many times over (every benchmark, then
  // every benchmark again) and a point's value is the lower quartile over the rounds: a slow
  // spell of the host then spoils one round of every point instead of a run of consecutive
  // points, every benchmark's samples spread over the calibration's whole duration, and the
  // spoiled rounds do not count.
  int rounds = 1;
  double min_repetition_s = 2e-4;  // a repetition loops the operation at least this long
  // Compute benchmarks: consecutive calls take their operands from a pool of at least this many
  // bytes (0: the same operands every call, hot in cache).
  int64_t cold_pool_bytes = 0;
};
// Twice the largest CPU cache the kernel reports (64 MiB if it reports none): operands rotating
// through that much memory are cold at every call, as a pipelined run's are (a task reads
// activations stashed many tasks earlier, and the actors of a host share the last-level cache).
int64_t default_cold_pool_bytes();

// Shapes and sizes of the default suite (quick: fewer points, same range).
struct GemmSpec {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  bool accumulate = false;  // C += op(A) op(B) (beta = 1), as weight gradients accumulate
};
std::vector<GemmSpec> default_gemm_shapes(bool quick);
std::vector<int64_t> default_elementwise_sizes(bool quick);  // elements
std::vector<int64_t> default_copy_sizes_bytes(bool quick);
// The cuda backend's compute suite: the same kinds of points at GPU sizes, from launch-bound to
// rate- or bandwidth-bound (the CPU sizes are all launch-bound on a GPU, so their times do not
// grow with size and no rate can be fitted).
std::vector<GemmSpec> gpu_gemm_shapes(bool quick);
std::vector<int64_t> gpu_elementwise_sizes(bool quick);  // elements
std::vector<int64_t> gpu_copy_sizes_bytes(bool quick);
std::vector<int64_t> default_message_sizes_bytes(bool quick);  // P2P and all-reduce

// Compute benchmarks on one device (the calling thread).
std::vector<GemmSample> bench_gemm(Device& device, const std::vector<GemmSpec>& shapes,
                                   const Timing& timing);
std::vector<SizeSample> bench_gelu(Device& device, const std::vector<int64_t>& elements,
                                   bool backward, const Timing& timing);
std::vector<SizeSample> bench_copy(Device& device, const std::vector<int64_t>& bytes,
                                   const Timing& timing);
// Device::upload of host arrays of `bytes` each (host -> device; a memcpy on the host device).
std::vector<SizeSample> bench_upload(Device& device, const std::vector<int64_t>& bytes,
                                     const Timing& timing);
// The host-side generation of inputs and targets (mlp_input) of `elements` each.
std::vector<SizeSample> bench_input_generation(const std::vector<int64_t>& elements,
                                               const Timing& timing);

// Communication benchmarks: every worker of the backend's world calls them (they synchronise with
// Backend::barrier); the samples come back on the measuring worker (actor 0, replica 0) and are
// empty elsewhere. bench_p2p needs >= 2 actors; bench_allreduce >= 2 replicas.
// A ping-pong round: the leader computes think_s, sends, waits for the reply; the follower waits,
// computes think_s, replies. One-way time = (round trip - think_s) / 2, so it includes waking a
// worker that has been blocked for a while, as a pipeline's receiver is. The compute spins
// (`spin`) or sleeps: run_microbenchmarks spins when every worker of a host has a hardware thread
// of its own, and sleeps when the host is oversubscribed (such hosts run emulated compute, which
// sleeps; spinning ranks would steal each other's CPU and inflate the latency).
// The sizes take turns (each repetition is one round trip of every size), so that a change of the
// host's load during the sweep reaches every size alike.
// Payloads live on `device` (the host by default; a GPU for the NCCL backend).
std::vector<SizeSample> bench_p2p(Backend& backend, const std::vector<int64_t>& bytes,
                                  const Timing& timing, double think_s, bool spin,
                                  double timeout_s, Device& device = host_device());
std::vector<AllReduceSample> bench_allreduce(Backend& backend, const std::vector<int64_t>& bytes,
                                             const Timing& timing, double timeout_s,
                                             Device& device = host_device());
// Per-instruction time of the executor on this worker, one value per timed step (repeats x rounds
// steps after the warm-up).
std::vector<double> bench_launch_overhead(Backend& backend, int instructions, const Timing& timing,
                                          double timeout_s);

class CudaPlugin;

struct MicrobenchOptions {
  BackendKind backend = BackendKind::kThreads;
  int ranks = 2;  // threads: workers of the communication benchmarks (>= 2); mpi: the world size
  bool quick = false;
  Timing timing;
  double p2p_think_s = 1e-3;  // compute between two messages of the ping-pong (bench_p2p)
  double timeout_s = 60;      // per blocking wait
  // cuda: the plugin whose GPUs are measured; nullptr: cuda_plugin() (runtime/cuda_plugin.h).
  // Tests pass a stand-in.
  CudaPlugin* cuda = nullptr;
};
struct MicrobenchResult {
  bool root = true;  // false on mpi ranks other than 0 (their measurements are empty)
  Measurements measurements;
};
// Runs the whole suite. `progress` (may be empty) receives one line per benchmark on the root.
// InputError for bad options (ranks < 2; mpi: ranks != world size), RuntimeFailure when a
// backend fails (cuda without a device, a timeout).
MicrobenchResult run_microbenchmarks(const MicrobenchOptions& options,
                                     const std::function<void(const std::string&)>& progress);

// The kernels of every stage's tasks and optimizer step in the MLP workload, for a program of
// `num_stages` stages (the first stage uploads its input, the last computes the loss). For an MoE
// workload (mlp.moe(); runtime/moe_workload.h), balanced routing: per block the router GEMM
// (T×E×H) and its softmax/sigmoid and top-k over T×E, the dispatch and combine all-to-alls over
// the ep group (T·top_k/ep rows to each member: H + 1 doubles per dispatched row, H per returned
// one; the same two in the input gradient), the held experts' GEMMs over their share of the
// T·top_k rows a holder receives (E/ep groups), the copies of the stage's parameters each task
// makes, and an optimizer step over the router and the held experts.
std::vector<StageKernels> mlp_stage_kernels(const MlpConfig& mlp, int num_stages);
// Bytes of the tensor one MLP transfer carries (activation or input gradient).
int64_t mlp_transfer_bytes(const MlpConfig& mlp);

// Observations of a measured trace's steps >= first_step (replica 0): every compute and optimizer
// instruction with kernel_time_s of its kernels under `base` (dtype kFp32: the host calibration
// stores its fp64 GEMM rate there), every transfer (send start to the matching receive's end,
// matched by step and tag) and every all-reduce (ranks = dp).
TraceObservations observe_trace(const Trace& trace, const std::vector<StageKernels>& kernels,
                                const ClusterSpec& base, int dp, int first_step);

}  // namespace jaxpp
