#include "runtime/microbench.h"

#include <cblas.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "graph/error.h"
#include "runtime/comm_plan.h"
#include "runtime/cuda_plugin.h"
#include "runtime/executor.h"
#include "runtime/mpi_backend.h"
#include "runtime/run.h"
#include "runtime/threads_backend.h"

namespace jaxpp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Per-call time of `op`: calls per repetition chosen so that a repetition lasts at least
// min_repetition_s, warm-up repetitions, then the median of the timed ones.
template <class Op>
double time_per_call_s(Device& device, const Timing& timing, Op&& op) {
  auto t0 = Clock::now();
  op();
  device.synchronize();
  const double first = std::max(seconds_since(t0), 1e-9);
  const int calls =
      static_cast<int>(std::clamp(std::ceil(timing.min_repetition_s / first), 1.0, 1e6));
  auto repetition = [&] {
    auto start = Clock::now();
    for (int c = 0; c < calls; ++c) op();
    device.synchronize();
    return seconds_since(start) / calls;
  };
  for (int w = 0; w < timing.warmup; ++w) repetition();
  std::vector<double> per_call;
  for (int r = 0; r < std::max(1, timing.repeats); ++r) per_call.push_back(repetition());
  return median_of(per_call);
}

// Deterministic values in [-1, 1) (no denormals, no NaNs).
// xorshift64 seeded from `seed`: the deterministic bits behind filled and filled_normal.
class Bits {
 public:
  explicit Bits(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next53() {  // 53 random bits
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_ >> 11;
  }

 private:
  uint64_t s_;
};

DeviceArray filled(Device& device, size_t n, uint64_t seed) {
  std::vector<double> v(std::max<size_t>(n, 1));
  Bits bits(seed);
  for (double& x : v) x = static_cast<double>(bits.next53()) * 0x1.0p-52 - 1.0;
  return device.upload(v);
}

// Deterministic values like the MLP workload's pre-activations: normal with mean 0 and standard
// deviation `sigma` (Box-Muller on the bits of `filled`).
DeviceArray filled_normal(Device& device, size_t n, uint64_t seed, double sigma) {
  std::vector<double> v(std::max<size_t>(n, 1));
  Bits bits(seed);
  auto uniform01 = [&] { return static_cast<double>(bits.next53() + 1) * 0x1.0p-53; };  // (0, 1]
  for (size_t i = 0; i < v.size(); i += 2) {
    const double r = sigma * std::sqrt(-2.0 * std::log(uniform01()));
    const double angle = 2.0 * M_PI * uniform01();
    v[i] = r * std::cos(angle);
    if (i + 1 < v.size()) v[i + 1] = r * std::sin(angle);
  }
  return device.upload(v);
}

// Standard deviation of the workload's pre-activations u = x W1 (runtime/workload.h: x uniform in
// [-1, 1), W1 uniform in ±1/sqrt(hidden)): sqrt(hidden · 1/3 · 1/(3 hidden)) = 1/3.
constexpr double kPreActivationSigma = 1.0 / 3.0;

// Stands for the compute between two messages: spins (a real task) or sleeps (an emulated one).
void think_for(const Backend& backend, double seconds, bool spin) {
  if (!spin) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return;
  }
  const double end = backend.now_s() + seconds;
  while (backend.now_s() < end) {
  }
}

// Doubles rounded up to a whole 64-byte line.
size_t aligned(size_t doubles) { return (doubles + 7) / 8 * 8; }

// Consecutive regions of `region` doubles in a pool of `pool` doubles, wrapping around.
class Rotation {
 public:
  Rotation(size_t pool, size_t region) : pool_(pool), region_(region) {}
  size_t next() {
    const size_t at = offset_;
    offset_ += region_;
    if (offset_ + region_ > pool_) offset_ = 0;
    return at;
  }

 private:
  size_t pool_, region_;
  size_t offset_ = 0;
};

// How many operand sets of `doubles` each fill the cold pool (at least 1, at most 4096).
size_t sets_for(const Timing& timing, size_t doubles) {
  const double pool = static_cast<double>(std::max<int64_t>(timing.cold_pool_bytes, 0));
  return static_cast<size_t>(
      std::clamp(std::ceil(pool / (8.0 * static_cast<double>(doubles))), 1.0, 4096.0));
}

// A CostProvider under which every instruction takes no time (the launch-overhead benchmark).
class ZeroCost : public CostProvider {
 public:
  double compute_s(int, const Instruction&) const override { return 0; }
  double p2p_latency_s(int, int) const override { return 0; }
  double p2p_bandwidth_bytes_per_s(int, int) const override { return 1; }
  int link_id(int from, int to) const override { return from * 1024 + to; }
  double allreduce_s(int, const Instruction&) const override { return 0; }
};

// Compute part of the suite on one device (one sweep).
// `gpu` picks the GPU's sizes (gpu_gemm_shapes, ...); the input generation runs on the host, at
// the element counts of the device's suite.
Measurements compute_suite(Device& device, bool quick, const Timing& timing, bool gpu = false) {
  Measurements m;
  const std::vector<int64_t> elements =
      gpu ? gpu_elementwise_sizes(quick) : default_elementwise_sizes(quick);
  m.gemm = bench_gemm(device, gpu ? gpu_gemm_shapes(quick) : default_gemm_shapes(quick), timing);
  m.gelu = bench_gelu(device, elements, false, timing);
  m.gelu_backward = bench_gelu(device, elements, true, timing);
  m.copy = bench_copy(device, gpu ? gpu_copy_sizes_bytes(quick) : default_copy_sizes_bytes(quick),
                      timing);
  // The GPU workload's inputs are larger: measured at its sizes, where fresh pages and caches
  // cost more per element than the CPU sizes show (the first H200 runs' forward tasks of 2M-element
  // inputs were 28-84 % over a prediction from sizes up to 1M).
  m.input_generation = bench_input_generation(elements, timing);
  m.upload = bench_upload(
      device, gpu ? gpu_copy_sizes_bytes(quick) : default_copy_sizes_bytes(quick), timing);
  return m;
}

// Point-wise quantile q of the `seconds` of several sweeps over the same points.
template <class Sample>
std::vector<Sample> quantile_of_sweeps(const std::vector<std::vector<Sample>>& sweeps, double q) {
  if (sweeps.empty()) return {};
  std::vector<Sample> out = sweeps.front();
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<double> v;
    for (const auto& sweep : sweeps) v.push_back(sweep.at(i).seconds);
    out[i].seconds = quantile_of(v, q);
  }
  return out;
}

// Point-wise quantile q of several compute suites (0.5: of concurrent workers; kRoundQuantile: of
// rounds).
Measurements quantile_of_suites(const std::vector<Measurements>& suites, double q) {
  Measurements out = suites.at(0);
  auto merge = [&](auto member) {
    std::vector<std::remove_reference_t<decltype(out.*member)>> sweeps;
    for (const Measurements& s : suites) sweeps.push_back(s.*member);
    out.*member = quantile_of_sweeps(sweeps, q);
  };
  merge(&Measurements::gemm);
  merge(&Measurements::gelu);
  merge(&Measurements::gelu_backward);
  merge(&Measurements::copy);
  merge(&Measurements::input_generation);
  merge(&Measurements::upload);
  return out;
}

// How the rounds combine: a point's value is this quantile of its rounds. Interference from the
// rest of the host (another tenant's job, a descheduled vCPU) only ever slows a benchmark down,
// and a slow spell spoils whole rounds, so the quieter rounds are the better estimate of the
// undisturbed cost; the lower quartile (the second best of five) rather than the best, so that
// one lucky round does not decide. On this machine the median of rounds left two calibrations
// 10-26% apart on the launch overhead and the memory bandwidth in noisy spells.
constexpr double kRoundQuantile = 0.25;

// What the rounds of a suite collect; finish() combines them point by point.
struct Rounds {
  std::vector<Measurements> compute;
  std::vector<std::vector<SizeSample>> p2p;
  std::vector<std::vector<AllReduceSample>> allreduce;
  std::vector<double> launch;  // per round: the median over its workers and worlds
  Measurements finish() const {
    Measurements m = quantile_of_suites(compute, kRoundQuantile);
    m.p2p = quantile_of_sweeps(p2p, kRoundQuantile);
    m.allreduce = quantile_of_sweeps(allreduce, kRoundQuantile);
    m.launch_overhead_s = {quantile_of(launch, kRoundQuantile)};
    return m;
  }
};

std::string round_label(int round, int rounds) {
  return rounds > 1 ? "round " + std::to_string(round + 1) + "/" + std::to_string(rounds) + ": "
                    : "";
}

int hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

std::vector<int> allreduce_rank_counts(int ranks) {
  std::vector<int> counts;
  for (int r = 2; r <= ranks; ++r)
    if (ranks % r == 0) counts.push_back(r);
  return counts;
}

// The partner of `actor` in the ping-pong: actors pair up 0-1, 2-3, ... (an odd last actor's
// partner does not exist).
int ping_pong_peer(int actor) { return actor % 2 == 0 ? actor + 1 : actor - 1; }

// Instructions per step of the launch-overhead benchmark: a step of ~0.1 µs instructions lasts a
// few milliseconds, long enough that a preemption spoils few steps.
int launch_instructions(const MicrobenchOptions& o) { return o.quick ? 2000 : 5000; }

void say(const std::function<void(const std::string&)>& progress, const std::string& line) {
  if (progress) progress(line);
}

// Pins the calling thread to hardware thread `index` modulo their number (best effort).
// The threads benchmarks pin their workers so that every calibration measures
// the same placement: on a virtual machine the hardware threads need not be alike (measured here:
// the executor's loop takes 85 ns per instruction on one vCPU and 110 ns on the other, and an
// unpinned worker lands on either).
void pin_to_hardware_thread(int index) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(index % hardware_threads(), &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// Runs `fn(backend)` on every worker of a threads world, one thread each, worker i pinned to
// hardware thread i (modulo); rethrows the first failure as a RuntimeFailure.
template <class Fn>
void on_threads_world(int actors, int replicas, Fn&& fn) {
  ThreadsWorld world(actors, replicas);
  run_on_threads(world, [&](int a, int r) {
    pin_to_hardware_thread(r * actors + a);
    std::unique_ptr<Backend> backend = world.backend(a, r);
    try {
      fn(*backend);
    } catch (const std::exception& e) {
      world.abort("worker " + std::to_string(a) + "/" + std::to_string(r) + ": " + e.what());
    }
  });
  const std::string why = world.abort_reason();
  if (!why.empty()) throw RuntimeFailure("calibrate: " + why);
}

// Threads worlds the launch-overhead benchmark runs in, one after another, per round: a worker's
// speed changes between spells of a few tens of milliseconds on a shared host, so several short
// measurements spread over the calibration give a steadier median than one long one.
constexpr int kLaunchWorlds = 3;

// The launch-overhead benchmark on kLaunchWorlds threads worlds of o.ranks actors: every actor's
// median of every world.
std::vector<double> launch_overhead_per_worker(const MicrobenchOptions& o) {
  std::vector<double> medians;
  for (int w = 0; w < kLaunchWorlds; ++w) {
    std::vector<double> world_medians(o.ranks);
    on_threads_world(o.ranks, 1, [&](Backend& b) {
      world_medians[b.actor()] =
          median_of(bench_launch_overhead(b, launch_instructions(o), o.timing, o.timeout_s));
    });
    medians.insert(medians.end(), world_medians.begin(), world_medians.end());
  }
  return medians;
}

// Every benchmark of the suite once on `workers` threads (compute) and on a threads world of
// o.ranks workers (communication, launch).
void threads_round(const MicrobenchOptions& o, int workers, Rounds& rounds,
                   const std::function<void(const std::string&)>& say_line) {
  say_line("compute: GEMM, GeLU, copy on " + std::to_string(workers) + " thread(s) at once");
  std::vector<Measurements> suites(workers);
  std::mutex error_mu;
  std::string error;
  try {
    run_together(workers, [&](int w) {
      pin_to_hardware_thread(w);
      try {
        suites[w] = compute_suite(host_device(), o.quick, o.timing);
      } catch (const std::exception& e) {
        std::lock_guard lock(error_mu);
        if (error.empty()) error = e.what();
      }
    });
  } catch (const RuntimeFailure& e) {
    error = std::string(e.what()) + ": the compute round runs one thread per hardware thread";
  }
  if (!error.empty()) throw RuntimeFailure("calibrate: " + error);
  rounds.compute.push_back(quantile_of_suites(suites, 0.5));

  say_line("point-to-point: ping-pong of thread pairs, " + std::to_string(o.ranks) + " threads");
  on_threads_world(o.ranks, 1, [&](Backend& b) {
    auto samples = bench_p2p(b, default_message_sizes_bytes(o.quick), o.timing, o.p2p_think_s,
                             /*spin=*/o.ranks <= hardware_threads(), o.timeout_s);
    if (b.actor() == 0) rounds.p2p.push_back(std::move(samples));
  });
  std::vector<AllReduceSample> allreduce;
  for (int r : allreduce_rank_counts(o.ranks)) {
    say_line("all-reduce: " + std::to_string(o.ranks / r) + " x " + std::to_string(r) + " ranks");
    on_threads_world(o.ranks / r, r, [&](Backend& b) {
      auto samples =
          bench_allreduce(b, default_message_sizes_bytes(o.quick), o.timing, o.timeout_s);
      if (b.actor() == 0 && b.replica() == 0)
        allreduce.insert(allreduce.end(), samples.begin(), samples.end());
    });
  }
  rounds.allreduce.push_back(std::move(allreduce));
  say_line("launch overhead: executor on " + std::to_string(o.ranks) + " threads");
  rounds.launch.push_back(median_of(launch_overhead_per_worker(o)));
}

MicrobenchResult run_threads_suite(const MicrobenchOptions& o,
                                   const std::function<void(const std::string&)>& progress) {
  const int workers = std::min(o.ranks, hardware_threads());
  Rounds rounds;
  for (int round = 0; round < o.timing.rounds; ++round)
    threads_round(o, workers, rounds, [&](const std::string& line) {
      say(progress, round_label(round, o.timing.rounds) + line);
    });
  MicrobenchResult result;
  Measurements& m = result.measurements;
  m = rounds.finish();
  m.backend = "threads";
  m.device = "host";
  m.ranks = o.ranks;
  m.ranks_per_host = o.ranks;
  m.memory_bytes_per_rank = host_device().memory_bytes() / o.ranks;
  return result;
}

// A barrier whose waiters poll every 10 ms, so ranks that sit out the compute benchmarks do not
// take CPU time from the ranks that run them (six ranks polling each millisecond woke 6000 times
// a second on the two CPUs the compute ranks use; the section lasts seconds, so 10 ms of extra
// wait is nothing).
void quiet_barrier() {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  int done = 0;
  while (true) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

MicrobenchResult run_mpi_suite(const MicrobenchOptions& o,
                               const std::function<void(const std::string&)>& progress) {
  MpiSession& session = MpiSession::get();
  if (session.size() < 2)
    throw InputError(
        "--backend mpi: the communication benchmarks need at least 2 processes (run under "
        "mpirun -n K with K >= 2)");
  if (o.ranks != session.size())
    throw InputError("--ranks: " + std::to_string(o.ranks) + " but mpirun started " +
                     std::to_string(session.size()) + " processes");
  const int rank = session.rank();
  MicrobenchResult result;
  result.root = rank == 0;
  Measurements& m = result.measurements;
  auto root_say = [&](const std::string& line) {
    if (rank == 0) say(progress, line);
  };
  // Barriers that wait for a whole benchmark section get a generous deadline.
  const double section_timeout_s = std::max(o.timeout_s, 3600.0);

  int ranks_per_host = 1;
  {
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &ranks_per_host);
    MPI_Comm_free(&local);
  }
  const int workers = std::min(ranks_per_host, hardware_threads());
  Rounds rounds;
  for (int round = 0; round < o.timing.rounds; ++round) {
    const std::string label = round_label(round, o.timing.rounds);
    {
      MpiBackend world(session.size(), 1);
      root_say(label + "compute: GEMM, GeLU, copy on " + std::to_string(workers) +
               " rank(s) at once");
      world.barrier(section_timeout_s);
      if (rank < workers) {
        // Pinned for the compute benchmarks only (as the threads workers are); the ranks of the
        // communication benchmarks keep mpirun's placement.
        cpu_set_t placement;
        const bool saved = sched_getaffinity(0, sizeof placement, &placement) == 0;
        pin_to_hardware_thread(rank);
        Measurements suite = compute_suite(host_device(), o.quick, o.timing);
        if (saved) sched_setaffinity(0, sizeof placement, &placement);
        if (rank == 0) rounds.compute.push_back(std::move(suite));
      }
      quiet_barrier();
      root_say(label + "point-to-point: ping-pong of rank pairs, " +
               std::to_string(session.size()) + " ranks");
      auto p2p = bench_p2p(world, default_message_sizes_bytes(o.quick), o.timing, o.p2p_think_s,
                           /*spin=*/ranks_per_host <= hardware_threads(), o.timeout_s);
      if (rank == 0) rounds.p2p.push_back(std::move(p2p));
      root_say(label + "launch overhead: executor on " + std::to_string(session.size()) + " ranks");
      // Every rank's median, gathered on rank 0 (ranks sit on different hardware threads).
      const double mine =
          median_of(bench_launch_overhead(world, launch_instructions(o), o.timing, o.timeout_s));
      std::vector<double> medians(rank == 0 ? session.size() : 0);
      MPI_Gather(&mine, 1, MPI_DOUBLE, medians.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      if (rank == 0) rounds.launch.push_back(median_of(medians));
    }
    std::vector<AllReduceSample> allreduce;
    for (int r : allreduce_rank_counts(session.size())) {
      root_say(label + "all-reduce: " + std::to_string(session.size() / r) + " x " +
               std::to_string(r) + " ranks");
      MpiBackend world(session.size() / r, r);
      auto samples =
          bench_allreduce(world, default_message_sizes_bytes(o.quick), o.timing, o.timeout_s);
      allreduce.insert(allreduce.end(), samples.begin(), samples.end());
    }
    if (rank == 0) rounds.allreduce.push_back(std::move(allreduce));
  }
  if (rank == 0) m = rounds.finish();
  m.backend = "mpi";
  m.device = "host";
  m.ranks = session.size();
  m.ranks_per_host = ranks_per_host;
  m.memory_bytes_per_rank = host_device().memory_bytes() / ranks_per_host;
  return result;
}

// Runs `fn(worker)` on a threads world of program.num_actors x `replicas` workers, each on its own
// GPU with the NCCL backend of `program`'s links and replica groups (as run_program's cuda path
// does).
template <class Fn>
void on_gpu_world(CudaPlugin& cuda, const Program& program, int replicas, int devices,
                  double timeout_s, Fn&& fn) {
  const CommPlan plan = make_comm_plan(program, replicas);
  const int workers = program.num_actors * replicas;
  const std::vector<NcclId> ids = cuda.make_nccl_ids(plan.comms.size());
  on_threads_world(program.num_actors, replicas, [&](Backend& host) {
    const int worker = plan.worker(host.actor(), host.replica());
    std::unique_ptr<CudaWorker> w = cuda.make_worker(host, assign_device(worker, workers, devices),
                                                     worker, plan, ids, timeout_s, nullptr);
    fn(*w);
  });
}

// A program whose only instructions are sends between actor pairs (0 <-> 1, 2 <-> 3, ...): the
// links bench_p2p uses, for make_comm_plan.
Program pairs_program(int actors) {
  Program p;
  p.num_actors = actors;
  p.num_stages = actors;
  p.num_microbatches = 1;
  p.actors.resize(actors);
  for (int a = 0; a < actors; ++a) {
    p.stage_to_actor.push_back(a);
    const int peer = ping_pong_peer(a);
    if (peer >= actors) continue;
    Instruction send;
    send.op = OpKind::kSend;
    send.peer = peer;
    send.stage = a;
    p.actors[a].push_back(send);
  }
  return p;
}

MicrobenchResult run_cuda_suite(const MicrobenchOptions& o,
                                const std::function<void(const std::string&)>& progress) {
  // The GPUs of this process (at most 8, one host): P2P between pairs of them and all-reduces
  // over them with NCCL, as run_program's cuda backend moves tensors; one GPU: compute only.
  CudaPlugin& cuda = o.cuda ? *o.cuda : cuda_plugin();  // RuntimeFailure naming what is missing
  const int devices = std::min(cuda.prepare_process(), 8);
  const int link_gpus = devices - devices % 2;
  MicrobenchResult result;
  Rounds rounds;
  int64_t gpu_memory_bytes = 0;
  for (int round = 0; round < o.timing.rounds; ++round) {
    const std::string label = round_label(round, o.timing.rounds);
    {
      say(progress, label + "compute: GEMM, GeLU, copy on GPU 0");
      std::unique_ptr<Device> device = cuda.make_device(0);
      gpu_memory_bytes = device->memory_bytes();
      rounds.compute.push_back(compute_suite(*device, o.quick, o.timing, /*gpu=*/true));
    }
    if (link_gpus >= 2) {
      say(progress, label + "point-to-point: NCCL ping-pong of GPU pairs, " +
                        std::to_string(link_gpus) + " GPUs");
      on_gpu_world(cuda, pairs_program(link_gpus), 1, devices, o.timeout_s, [&](CudaWorker& w) {
        auto samples = bench_p2p(w.backend(), default_message_sizes_bytes(o.quick), o.timing,
                                 o.p2p_think_s, /*spin=*/true, o.timeout_s, w.device());
        if (w.backend().actor() == 0) rounds.p2p.push_back(std::move(samples));
      });
      std::vector<AllReduceSample> allreduce;
      for (int r : allreduce_rank_counts(devices)) {
        say(progress, label + "all-reduce: NCCL, " + std::to_string(devices / r) + " x " +
                          std::to_string(r) + " GPUs");
        Program none;
        none.num_actors = devices / r;
        none.actors.resize(devices / r);
        on_gpu_world(cuda, none, r, devices, o.timeout_s, [&](CudaWorker& w) {
          auto samples = bench_allreduce(w.backend(), default_message_sizes_bytes(o.quick),
                                         o.timing, o.timeout_s, w.device());
          if (w.backend().actor() == 0 && w.backend().replica() == 0)
            allreduce.insert(allreduce.end(), samples.begin(), samples.end());
        });
      }
      rounds.allreduce.push_back(std::move(allreduce));
    }
    say(progress, label + "launch overhead: executor on " + std::to_string(o.ranks) + " threads");
    rounds.launch.push_back(median_of(launch_overhead_per_worker(o)));
  }
  result.measurements = rounds.finish();
  result.measurements.backend = "cuda";
  result.measurements.device = "cuda:0";
  result.measurements.ranks = std::max(1, devices);
  // The GPUs of one host: their links are the intra-node ones (calibrate keeps the base's
  // inter-node link); without links, keep the base's devices_per_node too.
  result.measurements.ranks_per_host = link_gpus >= 2 ? devices : 0;
  result.measurements.p2p_is_network = false;
  // One rank is one GPU: its memory is GPU 0's (the GPUs of a host are taken to be alike, as the
  // compute benchmarks on GPU 0 take them), not the host's.
  result.measurements.memory_bytes_per_rank = gpu_memory_bytes;
  return result;
}

}  // namespace

int64_t default_cold_pool_bytes() {
  // The largest cache level the kernel reports (e.g. "32768K"), twice over.
  int64_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (!(in >> text) || text.empty()) continue;
    int64_t value = std::atoll(text.c_str());
    if (text.back() == 'K') value <<= 10;
    if (text.back() == 'M') value <<= 20;
    largest = std::max(largest, value);
  }
  return largest > 0 ? 2 * largest : int64_t{64} << 20;
}

namespace {

// The MLP workload's six GEMMs of a layer with tokens = hidden = a, ffn = 4a
// (runtime/workload.h): forward x W1 and a W2 (NN), input gradient dy W2^T and du W1^T (NT),
// weight gradients a^T dy and x^T du (TN, accumulated).
std::vector<GemmSpec> mlp_gemm_shapes(const std::vector<int64_t>& sides) {
  std::vector<GemmSpec> shapes;
  for (int64_t a : sides) {
    shapes.push_back({a, 4 * a, a, false, false, false});
    shapes.push_back({a, a, 4 * a, false, false, false});
    shapes.push_back({a, 4 * a, a, false, true, false});
    shapes.push_back({a, a, 4 * a, false, true, false});
    shapes.push_back({4 * a, a, a, true, false, true});
    shapes.push_back({a, 4 * a, a, true, false, true});
  }
  return shapes;
}

}  // namespace

std::vector<GemmSpec> default_gemm_shapes(bool quick) {
  // The small sides pin the per-call overhead (the curve's half saturation), the large ones the
  // asymptotic rate.
  return mlp_gemm_shapes(quick ? std::vector<int64_t>{8, 24, 64, 128, 256}
                               : std::vector<int64_t>{8, 16, 32, 48, 64, 96, 128, 192, 256});
}

std::vector<GemmSpec> gpu_gemm_shapes(bool quick) {
  // A GPU's fp64 GEMM is launch-bound up to sides of a few hundred (a 256 x 1024 x 256 product is
  // under a microsecond of arithmetic on a GPU with tens of fp64 TFLOP/s): the sides reach 2048
  // (69 GFLOP, about a millisecond) so that the rate, not the launch, dominates the largest.
  return mlp_gemm_shapes(quick ? std::vector<int64_t>{64, 256, 1024, 2048}
                               : std::vector<int64_t>{32, 64, 128, 256, 512, 1024, 1536, 2048});
}

std::vector<int64_t> gpu_elementwise_sizes(bool quick) {
  // Up to 2^24 doubles (128 MiB read, 128 MiB written): tens of microseconds at a few TB/s, well
  // above the few microseconds a launch costs, which all the CPU sizes stay below.
  if (quick) return {1 << 12, 1 << 20, 1 << 22, 1 << 24};
  return {1 << 12, 1 << 16, 1 << 20, 1 << 22, 1 << 23, 1 << 24};
}

std::vector<int64_t> gpu_copy_sizes_bytes(bool quick) {
  if (quick) return {int64_t{64} << 10, int64_t{8} << 20, int64_t{64} << 20, int64_t{256} << 20};
  return {int64_t{64} << 10, int64_t{1} << 20,   int64_t{8} << 20,
          int64_t{32} << 20, int64_t{128} << 20, int64_t{256} << 20};
}

std::vector<int64_t> default_elementwise_sizes(bool quick) {
  if (quick) return {1 << 10, 1 << 14, 1 << 18};
  return {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20};
}

std::vector<int64_t> default_copy_sizes_bytes(bool quick) {
  if (quick) return {8 << 10, 128 << 10, 2 << 20};
  return {8 << 10, 32 << 10, 128 << 10, 512 << 10, 2 << 20, 8 << 20};
}

std::vector<int64_t> default_message_sizes_bytes(bool quick) {
  if (quick) return {8, 4 << 10, 256 << 10, 2 << 20};
  return {8, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, 8 << 20};
}

std::vector<GemmSample> bench_gemm(Device& device, const std::vector<GemmSpec>& shapes,
                                   const Timing& timing) {
  for (const GemmSpec& s : shapes)
    if (s.m < 1 || s.n < 1 || s.k < 1)
      throw InputError("GEMM benchmark: shape " + std::to_string(s.m) + "x" + std::to_string(s.n) +
                       "x" + std::to_string(s.k) + " is empty");
  // One input pool (A and B of consecutive calls side by side) and one output pool for C.
  const size_t cold = static_cast<size_t>(std::max<int64_t>(timing.cold_pool_bytes, 0)) / 8;
  size_t in_need = 1, out_need = 1;
  for (const GemmSpec& s : shapes) {
    in_need = std::max(in_need, aligned(static_cast<size_t>(s.m * s.k + s.k * s.n)));
    out_need = std::max(out_need, aligned(static_cast<size_t>(s.m * s.n)));
  }
  DeviceArray in = filled(device, std::max(in_need, cold), 1);
  DeviceArray out_pool = device.zeros(std::max(out_need, cold / 2));
  std::vector<GemmSample> out;
  for (const GemmSpec& s : shapes) {
    const size_t a_size = static_cast<size_t>(s.m * s.k);
    Rotation ab(in.size(), aligned(a_size + static_cast<size_t>(s.k * s.n)));
    Rotation c(out_pool.size(), aligned(static_cast<size_t>(s.m * s.n)));
    const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
    const int lda = s.trans_a ? m : k;
    const int ldb = s.trans_b ? k : n;
    const double t = time_per_call_s(device, timing, [&] {
      const double* a = in.data() + ab.next();
      device.gemm(s.trans_a, s.trans_b, m, n, k, a, lda, a + a_size, ldb, s.accumulate ? 1.0 : 0.0,
                  out_pool.data() + c.next(), n);
    });
    out.push_back({s.m, s.n, s.k, s.trans_a, s.trans_b, s.accumulate, t});
  }
  return out;
}

std::vector<SizeSample> bench_gelu(Device& device, const std::vector<int64_t>& elements,
                                   bool backward, const Timing& timing) {
  std::vector<SizeSample> out;
  for (int64_t n : elements) {
    const size_t size = static_cast<size_t>(std::max<int64_t>(n, 1));
    // Sets of (u, da, result) rotating through the cold pool.
    const int arrays = backward ? 3 : 2;
    const size_t sets = sets_for(timing, size * arrays);
    std::vector<DeviceArray> u, da, result;
    for (size_t i = 0; i < sets; ++i) {
      u.push_back(filled_normal(device, size, 11 + i, kPreActivationSigma));
      if (backward) da.push_back(filled(device, size, 5000 + i));
      result.push_back(device.alloc(size));
    }
    size_t next = 0;
    const double t = time_per_call_s(device, timing, [&] {
      const size_t i = next;
      next = (next + 1) % sets;
      if (backward)
        device.gelu_backward(da[i], u[i], result[i]);
      else
        device.gelu(u[i], result[i]);
    });
    out.push_back({static_cast<double>(size), t});
  }
  return out;
}

namespace {

// One timed call per size in `bytes`: `op` on sources made by `make(elements, i)` that rotate
// through the cold pool.
template <class Make, class Op>
std::vector<SizeSample> bench_rotating_sources(Device& device, const std::vector<int64_t>& bytes,
                                               const Timing& timing, Make make, Op op) {
  std::vector<SizeSample> out;
  for (int64_t b : bytes) {
    const size_t n = static_cast<size_t>(std::max<int64_t>(b / 8, 1));
    const size_t sets = sets_for(timing, n);
    std::vector<decltype(make(n, size_t{0}))> sources;
    for (size_t i = 0; i < sets; ++i) sources.push_back(make(n, i));
    size_t next = 0;
    const double t = time_per_call_s(device, timing, [&] {
      op(sources[next]);
      next = (next + 1) % sets;
    });
    out.push_back({static_cast<double>(n * sizeof(double)), t});
  }
  return out;
}

}  // namespace

std::vector<SizeSample> bench_copy(Device& device, const std::vector<int64_t>& bytes,
                                   const Timing& timing) {
  return bench_rotating_sources(
      device, bytes, timing, [&](size_t n, size_t i) { return filled(device, n, 21 + i); },
      [&](const DeviceArray& source) { DeviceArray c = device.copy(source); });
}

std::vector<SizeSample> bench_upload(Device& device, const std::vector<int64_t>& bytes,
                                     const Timing& timing) {
  // Host arrays (pageable memory, as std::vector is) rotating through the cold pool, as the
  // workload uploads freshly generated inputs.
  return bench_rotating_sources(
      device, bytes, timing,
      [](size_t n, size_t i) { return std::vector<double>(n, 0.5 + static_cast<double>(i)); },
      [&](const std::vector<double>& source) { DeviceArray a = device.upload(source); });
}

std::vector<SizeSample> bench_input_generation(const std::vector<int64_t>& elements,
                                               const Timing& timing) {
  std::vector<SizeSample> out;
  for (int64_t n : elements) {
    MlpConfig c;
    c.seq = static_cast<int>(n);
    c.hidden = 1;
    int microbatch = 0;
    const double t = time_per_call_s(host_device(), timing, [&] {
      std::vector<double> v = mlp_input(c, 0, microbatch++);
      if (v.empty()) throw std::logic_error("bench_input_generation: nothing generated");
    });
    out.push_back({static_cast<double>(n), t});
  }
  return out;
}

std::vector<SizeSample> bench_p2p(Backend& backend, const std::vector<int64_t>& bytes,
                                  const Timing& timing, double think_s, bool spin, double timeout_s,
                                  Device& device) {
  if (backend.num_actors() < 2)
    throw InputError("point-to-point benchmark: needs at least 2 actors");
  std::vector<SizeSample> out;
  backend.barrier(timeout_s);
  const int me = backend.actor();
  // Actors pair up (0 with 1, 2 with 3, ...) and all pairs ping-pong at once, as the stages of a
  // pipeline exchange messages at once; an odd last actor sits out.
  const int peer = ping_pong_peer(me);
  if (backend.replica() == 0 && peer < backend.num_actors()) {
    const bool leader = me % 2 == 0;
    const int reps = std::max(31, timing.repeats);  // cheap, and latency is noisy
    int64_t key = 0;
    auto receive = [&](int64_t k) {
      Message msg;
      const int handle = backend.post_message_recv(peer, k);
      if (!backend.wait_message(handle, backend.now_s() + timeout_s, &msg))
        throw RuntimeFailure("point-to-point benchmark: no message from actor " +
                             std::to_string(peer) + " within " + seconds_text(timeout_s) + " s");
      return msg;
    };
    // The sizes take turns, one round trip each per repetition, instead of one size's
    // repetitions after another's: a change of the host's load during the sweep (another process
    // starting on a shared host) then reaches every size alike. Swept size by size, a burst over
    // the small sizes made them slower than the large ones, and the fit found no bandwidth
    // ("times do not grow with size").
    std::vector<DeviceArray> payloads;
    for (int64_t b : bytes)
      payloads.push_back(device.zeros(static_cast<size_t>(std::max<int64_t>(b / 8, 1))));
    std::vector<std::vector<double>> one_way(bytes.size());
    for (int r = 0; r < timing.warmup + reps; ++r) {
      for (size_t i = 0; i < payloads.size(); ++i, key += 2) {
        if (leader) {
          think_for(backend, think_s, spin);
          Message msg;
          msg.data = device.copy(payloads[i]);
          device.synchronize();  // the copy is not part of the transfer
          const double t0 = backend.now_s();
          backend.send_message(peer, key, std::move(msg));
          receive(key + 1);
          const double round_trip = backend.now_s() - t0 - think_s;
          if (r >= timing.warmup) one_way[i].push_back(std::max(1e-9, round_trip / 2));
        } else {
          Message msg = receive(key);
          think_for(backend, think_s, spin);
          backend.send_message(peer, key + 1, std::move(msg));
        }
      }
    }
    if (me == 0)
      for (size_t i = 0; i < payloads.size(); ++i)
        out.push_back(
            {static_cast<double>(payloads[i].size() * sizeof(double)), median_of(one_way[i])});
  }
  backend.barrier(timeout_s);
  return out;
}

std::vector<AllReduceSample> bench_allreduce(Backend& backend, const std::vector<int64_t>& bytes,
                                             const Timing& timing, double timeout_s,
                                             Device& device) {
  const int ranks = backend.num_replicas();
  if (ranks < 2) throw InputError("all-reduce benchmark: needs at least 2 replicas");
  const bool measuring = backend.actor() == 0 && backend.replica() == 0;
  std::vector<AllReduceSample> out;
  for (int64_t b : bytes) {
    const size_t n = static_cast<size_t>(std::max<int64_t>(b / 8, 1));
    DeviceArray buffer = device.zeros(n);
    device.synchronize();
    std::vector<double> times;
    // Small all-reduces are cheap and their latency is noisy (as the ping-pong's): more of them.
    const int reps = b <= (256 << 10) ? std::max(31, timing.repeats) : timing.repeats;
    for (int r = 0; r < timing.warmup + reps; ++r) {
      backend.barrier(timeout_s);
      const double t0 = backend.now_s();
      backend.allreduce_tensor(buffer, timeout_s);
      if (r >= timing.warmup) times.push_back(backend.now_s() - t0);
    }
    if (measuring)
      out.push_back({ranks, static_cast<double>(n * sizeof(double)), median_of(times)});
  }
  backend.barrier(timeout_s);
  return out;
}

std::vector<double> bench_launch_overhead(Backend& backend, int instructions, const Timing& timing,
                                          double timeout_s) {
  if (instructions < 1) throw InputError("launch-overhead benchmark: needs >= 1 instruction");
  Program program;
  program.num_actors = backend.num_actors();
  program.num_stages = backend.num_actors();
  program.num_microbatches = instructions;
  program.actors.resize(program.num_actors);
  for (int a = 0; a < program.num_actors; ++a) {
    program.stage_to_actor.push_back(a);
    for (int i = 0; i < instructions; ++i) {
      Instruction ins;
      ins.op = OpKind::kCompute;
      ins.tasks = {TaskRef{TaskKind::kF, a, i}};
      ins.stage = a;
      program.actors[a].push_back(ins);
    }
  }
  ZeroCost zero;
  EmulatedWorkload workload(zero, backend.actor(), 1.0);
  ExecutorOptions eo;
  eo.num_steps = 1;
  eo.timeout_s = timeout_s;
  // One run of one step per repetition: the record of a run grows by one event per instruction,
  // and a single long run would time the kernel's first touch of that memory (page faults, whose
  // cost on a virtual machine swings with the host) instead of the executor. Separate runs reuse
  // the freed record's memory, as the steps of a real run of a few hundred instructions do.
  const int runs = timing.warmup + std::max(1, timing.repeats);
  std::vector<double> per_instruction;
  for (int r = 0; r < runs; ++r) {
    const WorkerRecord record = run_worker(program, backend, workload, eo);
    if (r >= timing.warmup)
      per_instruction.push_back((record.step_end_s.at(0) - record.step_begin_s.at(0)) /
                                instructions);
  }
  return per_instruction;
}

MicrobenchResult run_microbenchmarks(const MicrobenchOptions& o,
                                     const std::function<void(const std::string&)>& progress) {
  if (o.timing.repeats < 1) throw InputError("--repeats: expected >= 1");
  if (o.timing.warmup < 0) throw InputError("--warmup: expected >= 0");
  if (o.timing.rounds < 1) throw InputError("--rounds: expected >= 1");
  if (o.timeout_s <= 0) throw InputError("--timeout-s: expected > 0");
  openblas_set_num_threads(1);  // one BLAS thread per worker, as run_program does
  keep_freed_host_memory();     // and the same allocator steady state
  switch (o.backend) {
    case BackendKind::kThreads:
      if (o.ranks < 2) throw InputError("--ranks: expected >= 2, got " + std::to_string(o.ranks));
      return run_threads_suite(o, progress);
    case BackendKind::kMpi:
      return run_mpi_suite(o, progress);
    case BackendKind::kCuda:
      return run_cuda_suite(o, progress);
  }
  throw InputError("--backend: unknown backend");
}

// ---- MLP kernels and trace observations --------------------------------------------------------

namespace {

// The kernels and all-to-alls of the MoE workload's tasks (runtime/moe_workload.h), with balanced
// routing: every replica sends T·top_k/ep rows to each ep rank, and a holder's T·top_k rows are
// spread evenly over its E/ep experts.
struct MoeTaskKernels {
  KernelWork fwd, input, weight;
  int64_t params = 0;  // per layer: the router and every expert (the optimizer's buffer)
};

// What MoeWorkload (runtime/moe_workload.h) launches per task: GEMMs and GeLU on the device,
// routing, dispatch and combine on the host between Device::download and Device::upload (the
// host_transfer_bytes below; on the host device they are copies in memory).
MoeTaskKernels moe_task_kernels(const MlpConfig& mlp) {
  const int64_t t = mlp.seq, h = mlp.hidden, f = mlp.ffn_size(), e = mlp.experts, k = mlp.top_k;
  const int ep = std::max(1, mlp.ep);
  const int64_t held = e / ep;
  constexpr int64_t kDouble = sizeof(double);
  const int64_t rows = t * k;  // routed rows a holder receives (balanced)
  // Rows of each held expert: rows spread over `held` experts, the remainder to the first ones.
  std::vector<int64_t> expert_rows;
  for (int64_t i = 0; i < held; ++i) {
    const int64_t r = rows * (i + 1) / held - rows * i / held;
    if (r > 0) expert_rows.push_back(r);
  }
  const double peer_rows = static_cast<double>(rows) / ep;  // to each ep rank, self included
  MoeTaskKernels out;
  out.params = h * e + e * 2 * h * f;
  KernelWork& fw = out.fwd;
  KernelWork& in = out.input;
  KernelWork& wt = out.weight;
  // Each held expert on its rows, in F and in I alike: the rows up, two GEMMs (x W1 and a W2, or
  // gy W2^T and du W1^T) around the GeLU or its gradient, the results down.
  auto held_experts = [&](KernelWork& w, int64_t KernelWork::*gelu, int64_t KernelWork::*calls) {
    for (int64_t r : expert_rows) {
      w.*calls += 1;
      w.gemms.push_back({r, f, h});
      w.gemms.push_back({r, h, f});  // to fresh buffers (the results go down)
      w.*gelu += r * f;
      w.host_transfer_bytes += 2 * r * h * kDouble;
      w.host_transfer_calls += 2;
    }
  };
  for (int l = 0; l < mlp.layers_per_stage; ++l) {
    // Forward: scores x Wr on the device; scores and x down; softmax or sigmoid and top-k over
    // T x E on the host; dispatch [e, x_t] rows; each held expert's rows up, GeLU(x W1) W2, its
    // outputs down; combine; y = x + gated sum up.
    fw.gemms.push_back({t, e, h});
    fw.host_transfer_bytes += (t * e + t * h) * kDouble;
    fw.host_transfer_calls += 2;
    fw.memory_bytes += 3 * t * e * kDouble;
    fw.alltoalls.push_back({ep, peer_rows * (h + 1) * kDouble});
    held_experts(fw, &KernelWork::gelu_elements, &KernelWork::gelu_calls);
    fw.alltoalls.push_back({ep, peer_rows * h * kDouble});
    fw.memory_bytes += 2 * (rows * h + t * h) * kDouble;
    fw.host_transfer_bytes += t * h * kDouble;
    fw.host_transfer_calls += 1;
    // Input gradient: gy down; the router path on the host (gy . outputs, ds over T x E), ds up;
    // dx = gy + ds Wr^T on the device; gated output gradients to the holders, each expert's rows
    // up, du W1^T down; dx down, the experts' input gradients added, dx up.
    in.host_transfer_bytes += (t * h + t * e) * kDouble;
    in.host_transfer_calls += 2;
    in.memory_bytes += (2 * rows * h + 3 * t * e + 2 * t * h) * kDouble;
    in.memory_calls += 1;                                // dx = gy on the device
    in.gemms.push_back({t, h, e, /*accumulate=*/true});  // onto dx = gy
    in.alltoalls.push_back({ep, peer_rows * h * kDouble});
    held_experts(in, &KernelWork::gelu_backward_elements, &KernelWork::gelu_backward_calls);
    in.alltoalls.push_back({ep, peer_rows * h * kDouble});
    in.memory_bytes += 2 * (rows * h + t * h) * kDouble;
    in.host_transfer_bytes += 2 * t * h * kDouble;
    in.host_transfer_calls += 2;
    // Weight gradient, accumulated in the gradient buffer on the device: dWr += x^T ds; per held
    // expert dW2 += a^T gy, dW1 += x^T du.
    wt.gemms.push_back({h, e, t, /*accumulate=*/true});
    for (int64_t r : expert_rows) {
      wt.gemms.push_back({f, h, r, /*accumulate=*/true});
      wt.gemms.push_back({h, f, r, /*accumulate=*/true});
    }
  }
  return out;
}

}  // namespace

std::vector<StageKernels> mlp_stage_kernels(const MlpConfig& mlp, int num_stages) {
  const int64_t t = mlp.seq, h = mlp.hidden, f = mlp.ffn_size();
  const int64_t th_bytes = t * h * static_cast<int64_t>(sizeof(double));
  const int layers = mlp.layers_per_stage;
  KernelWork fwd, input, weight;
  int64_t params = mlp.params_per_stage();
  if (mlp.moe()) {
    MoeTaskKernels moe = moe_task_kernels(mlp);
    fwd = std::move(moe.fwd);
    input = std::move(moe.input);
    weight = std::move(moe.weight);
    params = moe.params * layers;  // the optimizer runs over the whole buffer
  }
  for (int l = 0; l < layers && !mlp.moe(); ++l) {
    // Forward: u = x W1, a = gelu(u), y = x + a W2 (the residual is a copy of x).
    fwd.gemms.push_back({t, f, h});
    fwd.gemms.push_back({t, h, f, /*accumulate=*/true});  // onto the residual
    fwd.gelu_elements += t * f;
    fwd.gelu_calls += 1;
    fwd.memory_bytes += 2 * th_bytes;
    fwd.memory_calls += 1;
    // Input gradient: da = dy W2^T, du = da gelu'(u), dx = dy + du W1^T.
    input.gemms.push_back({t, f, h});
    input.gemms.push_back({t, h, f, /*accumulate=*/true});  // onto the residual's gradient
    input.gelu_backward_elements += t * f;
    input.gelu_backward_calls += 1;
    input.memory_bytes += 2 * th_bytes;
    input.memory_calls += 1;
    // Weight gradient: dW2 += a^T dy, dW1 += x^T du.
    weight.gemms.push_back({f, h, t, /*accumulate=*/true});  // into the gradient buffer
    weight.gemms.push_back({h, f, t, /*accumulate=*/true});
  }
  const int64_t optimizer_bytes_per_param = mlp.optimizer == OptimizerKind::kSgd ? 32 : 64;
  std::vector<StageKernels> stages(num_stages);
  for (int s = 0; s < num_stages; ++s) {
    StageKernels& k = stages[s];
    KernelWork f_s = fwd;
    if (s == 0) {  // generation and upload of the input
      f_s.generated_elements += t * h;
      f_s.generation_calls += 1;
      f_s.host_transfer_bytes += th_bytes;
      f_s.host_transfer_calls += 1;
    }
    if (s == num_stages - 1) {  // generation and upload of the target, loss
      f_s.generated_elements += t * h;
      f_s.generation_calls += 1;
      f_s.host_transfer_bytes += th_bytes;
      f_s.host_transfer_calls += 1;
      f_s.memory_bytes += 3 * th_bytes;
      f_s.memory_calls += 1;
    }
    k.task[static_cast<int>(TaskKind::kF)] = f_s;
    k.task[static_cast<int>(TaskKind::kI)] = input;
    k.task[static_cast<int>(TaskKind::kW)] = weight;
    KernelWork b = input;
    b += weight;
    k.task[static_cast<int>(TaskKind::kB)] = b;
    k.optimizer.memory_bytes = params * optimizer_bytes_per_param;
    k.optimizer.memory_calls = 2;  // the SGD or Adam step, then the gradients' zero fill
  }
  return stages;
}

int64_t mlp_transfer_bytes(const MlpConfig& mlp) {
  return static_cast<int64_t>(mlp.seq) * mlp.hidden * static_cast<int64_t>(sizeof(double));
}

TraceObservations observe_trace(const Trace& trace, const std::vector<StageKernels>& kernels,
                                const ClusterSpec& base, int dp, int first_step) {
  TraceObservations obs;
  obs.num_actors = trace.num_actors;
  obs.dp = std::max(1, dp);
  const auto sends = sends_by_step_and_tag(trace, first_step);
  auto stage_kernels = [&](int stage) -> const StageKernels& {
    if (stage < 0 || stage >= static_cast<int>(kernels.size()))
      throw InputError("trace: an instruction of stage " + std::to_string(stage) +
                       ", but the workload has " + std::to_string(kernels.size()) + " stages");
    return kernels[stage];
  };
  for (const TraceEvent& e : trace.events) {
    if (e.step < first_step) continue;
    switch (e.op) {
      case OpKind::kCompute: {
        double predicted = 0;
        for (const TaskRef& task : e.tasks)
          predicted += kernel_time_s(stage_kernels(task.stage).task[static_cast<int>(task.kind)],
                                     base, Dtype::kFp32);
        obs.computes.push_back({kind_label(e.op, e.tasks), e.duration_s(), predicted});
        break;
      }
      case OpKind::kOptimizer:
        obs.computes.push_back(
            {"optimizer", e.duration_s(),
             kernel_time_s(stage_kernels(e.stage).optimizer, base, Dtype::kFp32)});
        break;
      case OpKind::kSend:
        break;  // seen from its recv
      case OpKind::kRecv: {
        auto it = sends.find({e.step, e.tag});
        if (it == sends.end()) break;  // the sender's events are not in this trace
        const TraceEvent& sent = *it->second;
        obs.transfers.push_back({sent.actor, e.actor, static_cast<double>(sent.bytes),
                                 std::max(0.0, e.end_s - sent.start_s)});
        break;
      }
      case OpKind::kAllReduce:
        obs.allreduces.push_back({obs.dp, static_cast<double>(e.bytes), e.duration_s()});
        break;
      case OpKind::kAllGather:
        break;  // parameter all-gathers are not fitted
    }
  }
  return obs;
}

}  // namespace jaxpp
