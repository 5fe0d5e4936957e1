// Microbenchmarks on tiny sizes (what they return, never how fast), the MLP workload's kernel
// description, and observations of a real run's trace.
#include "runtime/microbench.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/cluster.h"
#include "graph/error.h"
#include "runtime/cuda_plugin.h"
#include "runtime/run.h"
#include "runtime/threads_backend.h"
#include "schedules/lower.h"
#include "schedules/registry.h"

namespace jaxpp {
namespace {

Timing tiny_timing() {
  Timing t;
  t.warmup = 0;
  t.repeats = 2;
  t.min_repetition_s = 0;
  return t;
}

// Runs `fn(backend)` on every worker of a threads world and returns actor 0 / replica 0's result.
template <class Fn>
auto on_world(int actors, int replicas, Fn fn) {
  ThreadsWorld world(actors, replicas);
  decltype(fn(std::declval<Backend&>())) result{};
  std::vector<std::thread> threads;
  for (int r = 0; r < replicas; ++r)
    for (int a = 0; a < actors; ++a)
      threads.emplace_back([&, a, r] {
        std::unique_ptr<Backend> b = world.backend(a, r);
        auto mine = fn(*b);
        if (a == 0 && r == 0) result = std::move(mine);
      });
  for (auto& t : threads) t.join();
  return result;
}

TEST(Microbench, GemmReturnsOnePositiveSamplePerShape) {
  std::vector<GemmSpec> shapes = {
      {2, 3, 4, false, false, false}, {5, 4, 3, true, false, true}, {3, 3, 6, false, true, false}};
  std::vector<GemmSample> s = bench_gemm(host_device(), shapes, tiny_timing());
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].m, 5);
  EXPECT_TRUE(s[1].trans_a);
  EXPECT_TRUE(s[1].accumulate);
  EXPECT_DOUBLE_EQ(s[0].flops(), 2.0 * 2 * 3 * 4);
  for (const GemmSample& g : s) EXPECT_GT(g.seconds, 0);
}

TEST(Microbench, ColdOperandsRotateThroughAPoolAndGiveTheSameSamples) {
  Timing cold = tiny_timing();
  cold.cold_pool_bytes = 64 << 10;
  std::vector<GemmSample> g =
      bench_gemm(host_device(), {{4, 8, 4, false, false}, {8, 4, 8, true, true}}, cold);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_GT(g[1].seconds, 0);
  auto e = bench_gelu(host_device(), {100}, /*backward=*/false, cold);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_GT(e[0].seconds, 0);
  EXPECT_GT(default_cold_pool_bytes(), 0);
}

TEST(Microbench, EmptyGemmShapeIsAnInputError) {
  EXPECT_THROW(bench_gemm(host_device(), {{0, 3, 4, false, false}}, tiny_timing()), InputError);
}

TEST(Microbench, ElementwiseAndCopyReportTheirSizes) {
  auto g = bench_gelu(host_device(), {16, 64}, /*backward=*/true, tiny_timing());
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[1].size, 64);
  auto c = bench_copy(host_device(), {64, 100}, tiny_timing());
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].size, 96) << "sizes are whole doubles";
  EXPECT_GT(c[0].seconds, 0);
}

TEST(Microbench, InputGenerationReportsItsElementCounts) {
  auto g = bench_input_generation({16, 1000}, tiny_timing());
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].size, 16);
  EXPECT_EQ(g[1].size, 1000);
  EXPECT_GT(g[1].seconds, 0);
}

TEST(Microbench, UploadReportsItsBytes) {
  auto u = bench_upload(host_device(), {8 << 10, 1 << 20}, tiny_timing());
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].size, 8 << 10);
  EXPECT_EQ(u[1].size, 1 << 20);
  EXPECT_GT(u[1].seconds, 0);
}

TEST(Microbench, PingPongMeasuresOnActorZeroOnly) {
  auto samples = on_world(3, 1, [](Backend& b) {
    auto s = bench_p2p(b, {8, 4096}, tiny_timing(), /*think_s=*/1e-5, /*spin=*/true, 10);
    if (b.actor() != 0) {
      EXPECT_TRUE(s.empty());
    }
    return s;
  });
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[1].size, 4096);
  EXPECT_GT(samples[0].seconds, 0);
}

// Actor 0 of two on a simulated clock: its peer echoes each message at once, and a message takes
// latency + bytes / bandwidth each way. The host is loaded (kBusyLatencyS instead of kLatencyS)
// while the first `busy_messages` messages travel: a burst of load early in the sweep.
class LoadBurstBackend : public Backend {
 public:
  static constexpr double kLatencyS = 5e-6, kBusyLatencyS = 1e-3, kBandwidth = 1e10;
  explicit LoadBurstBackend(int busy_messages) : busy_messages_(busy_messages) {}
  BackendKind kind() const override { return BackendKind::kThreads; }
  int actor() const override { return 0; }
  int replica() const override { return 0; }
  int num_actors() const override { return 2; }
  int num_replicas() const override { return 1; }
  void post_send(int, int64_t key, std::vector<char> payload) override {
    clock_s_ += one_way_s(payload.size());
    echoes_[key + 1] = std::move(payload);
  }
  int post_recv(int, int64_t key) override { return static_cast<int>(key); }
  bool test_recv(int handle, std::vector<char>* payload) override {
    return wait_recv(handle, 0, payload);
  }
  bool wait_recv(int handle, double, std::vector<char>* payload) override {
    auto it = echoes_.find(handle);
    if (it == echoes_.end()) return false;
    clock_s_ += one_way_s(it->second.size());
    *payload = std::move(it->second);
    echoes_.erase(it);
    return true;
  }
  void allreduce_sum(std::span<double>, double) override { refuse(); }
  void allreduce_sum_strided(std::span<double>, int, double) override { refuse(); }
  void barrier(double) override {}
  std::vector<std::vector<double>> alltoallv(int, std::vector<std::vector<double>>,
                                             double) override {
    refuse();
  }
  double now_s() const override { return clock_s_; }
  void abort(const std::string&) override { refuse(); }
  std::string abort_reason() const override { return ""; }

 private:
  [[noreturn]] static void refuse() { throw std::logic_error("not used by bench_p2p"); }
  double one_way_s(size_t bytes) {
    const double latency = messages_++ < busy_messages_ ? kBusyLatencyS : kLatencyS;
    return latency + static_cast<double>(bytes) / kBandwidth;
  }
  int busy_messages_;
  int messages_ = 0;
  double clock_s_ = 0;
  std::map<int64_t, std::vector<char>> echoes_;
};

TEST(Microbench, PingPongSizesShareALoadBurstEarlyInTheSweep) {
  const std::vector<int64_t> sizes = default_message_sizes_bytes(/*quick=*/true);
  const int round_trips = 31 * static_cast<int>(sizes.size());  // 31 repetitions per size
  // Load during the first 40 % of the round trips (2 messages each): fewer than half of every
  // size's repetitions when the sizes take turns; all of the smallest size's when swept in order.
  LoadBurstBackend backend(2 * round_trips * 4 / 10);
  const std::vector<SizeSample> samples = bench_p2p(backend, sizes, tiny_timing(), 0, true, 10);
  ASSERT_EQ(samples.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    // The median round trip is an unloaded one: latency + the framed message's bytes.
    const double bytes = static_cast<double>(sizes[i]) + sizeof(double);
    EXPECT_NEAR(samples[i].seconds,
                LoadBurstBackend::kLatencyS + bytes / LoadBurstBackend::kBandwidth, 1e-12)
        << sizes[i] << " B";
  }
  // And the point-to-point fit finds the bandwidth.
  std::vector<double> x, t;
  for (const SizeSample& s : samples) x.push_back(s.size), t.push_back(s.seconds);
  EXPECT_NEAR(fit_alpha_beta(x, t, "p2p").bandwidth_bytes_per_s, LoadBurstBackend::kBandwidth,
              1e-3 * LoadBurstBackend::kBandwidth);
}

TEST(Microbench, AllReduceRecordsTheReplicaCount) {
  auto samples = on_world(2, 2, [](Backend& b) {
    return bench_allreduce(b, {8, 1024}, tiny_timing(), 10);
  });
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].ranks, 2);
  EXPECT_EQ(samples[1].bytes, 1024);
}

TEST(Microbench, LaunchOverheadGivesOneValuePerTimedRepetition) {
  auto samples =
      on_world(2, 1, [](Backend& b) { return bench_launch_overhead(b, 20, tiny_timing(), 10); });
  ASSERT_EQ(samples.size(), 2u);
  for (double s : samples) EXPECT_GT(s, 0);
}

TEST(Microbench, SuiteWithRoundsHasTheSinglePassPoints) {
  MicrobenchOptions o;
  o.quick = true;
  o.timing = tiny_timing();
  o.timing.rounds = 2;
  const Measurements m = run_microbenchmarks(o, nullptr).measurements;
  EXPECT_EQ(m.gemm.size(), default_gemm_shapes(true).size());
  EXPECT_EQ(m.gelu.size(), default_elementwise_sizes(true).size());
  EXPECT_EQ(m.copy.size(), default_copy_sizes_bytes(true).size());
  EXPECT_EQ(m.upload.size(), default_copy_sizes_bytes(true).size());
  EXPECT_EQ(m.p2p.size(), default_message_sizes_bytes(true).size());
  ASSERT_EQ(m.launch_overhead_s.size(), 1u);  // the rounds combined
  EXPECT_GT(m.launch_overhead_s[0], 0);
  for (const GemmSample& g : m.gemm) EXPECT_GT(g.seconds, 0);
}

TEST(Microbench, CommunicationNeedsPeers) {
  ThreadsWorld world(1, 1);
  std::unique_ptr<Backend> b = world.backend(0, 0);
  EXPECT_THROW(bench_p2p(*b, {8}, tiny_timing(), 0, false, 1), InputError);
  EXPECT_THROW(bench_allreduce(*b, {8}, tiny_timing(), 1), InputError);
}

TEST(Microbench, SuiteRejectsTooFewThreadRanks) {
  MicrobenchOptions o;
  o.ranks = 1;
  EXPECT_THROW(run_microbenchmarks(o, nullptr), InputError);
}

TEST(Microbench, DefaultGemmsAreTheMlpLayersSixShapesPerSize) {
  std::vector<GemmSpec> shapes = default_gemm_shapes(true);
  ASSERT_EQ(shapes.size() % 6, 0u);
  int accumulating = 0, transposed_b = 0;
  for (const GemmSpec& g : shapes) {
    accumulating += g.accumulate;
    transposed_b += g.trans_b;
    EXPECT_EQ(g.accumulate, g.trans_a) << "weight gradients: A transposed, accumulated";
  }
  EXPECT_EQ(accumulating * 3, static_cast<int>(shapes.size()));
  EXPECT_EQ(transposed_b * 3, static_cast<int>(shapes.size()));
}

TEST(Microbench, DefaultSuitesCoverTheirRangesQuickOrNot) {
  EXPECT_LT(default_gemm_shapes(true).size(), default_gemm_shapes(false).size());
  EXPECT_EQ(default_message_sizes_bytes(true).front(), default_message_sizes_bytes(false).front());
  EXPECT_GE(default_elementwise_sizes(true).size(), 2u);
  EXPECT_GE(default_copy_sizes_bytes(true).size(), 2u);
}

// The cuda suite's sizes reach far past the CPU ones: on a GPU every CPU size is launch-bound
// (the first H200 calibration failed with "GeLU benchmark: times do not grow with size").
TEST(Microbench, GpuSuiteReachesPastTheLaunchBoundSizes) {
  auto flops = [](const GemmSpec& g) { return 2.0 * g.m * g.n * g.k; };
  for (bool quick : {true, false}) {
    const std::vector<GemmSpec> gpu = gpu_gemm_shapes(quick), cpu = default_gemm_shapes(quick);
    ASSERT_EQ(gpu.size() % 6, 0u);
    EXPECT_GE(flops(gpu.back()), 256 * flops(cpu.back())) << quick;
    EXPECT_LE(flops(gpu.front()), 64 * flops(cpu.back())) << "a launch-bound point too";
    const std::vector<int64_t> elements = gpu_elementwise_sizes(quick);
    const std::vector<int64_t> copies = gpu_copy_sizes_bytes(quick);
    EXPECT_GE(elements.back(), 16 * default_elementwise_sizes(quick).back());
    EXPECT_GE(copies.back(), 32 * default_copy_sizes_bytes(quick).back());
    EXPECT_TRUE(std::is_sorted(elements.begin(), elements.end()));
    EXPECT_TRUE(std::is_sorted(copies.begin(), copies.end()));
  }
  EXPECT_LT(gpu_gemm_shapes(true).size(), gpu_gemm_shapes(false).size());
}

// A GPU as the cuda suite sees it, without CUDA: it keeps no values and spends, spinning, the time
// a GPU of 10 TFLOP/s fp64 and 2 TB/s with 5 us launches would (so the calibration fits it), and
// reports `memory_bytes` as its total memory.
class EmulatedGpu : public Device {
 public:
  explicit EmulatedGpu(int64_t memory_bytes) : memory_bytes_(memory_bytes) {}
  MemorySpace space() const override { return MemorySpace::kCuda; }
  int64_t memory_bytes() const override { return memory_bytes_; }
  DeviceArray alloc(size_t n) override {
    // Address space only: the pages are never touched.
    return n == 0 ? DeviceArray() : DeviceArray(this, new double[n], n);
  }
  void fill_zero(DeviceArray& a) override { stream(a.bytes()); }
  DeviceArray upload(std::span<const double> host) override {
    spin(5e-6 + static_cast<double>(host.size_bytes()) / 2.5e10);  // PCIe
    return alloc(host.size());
  }
  std::vector<double> download(const DeviceArray& a) override {
    return std::vector<double>(a.size(), 0.0);
  }
  DeviceArray copy(const DeviceArray& a) override {
    stream(2 * a.bytes());
    return alloc(a.size());
  }
  void gemm(bool, bool, int m, int n, int k, const double*, int, const double*, int, double,
            double*, int) override {
    spin(5e-6 + 2.0 * m * n * k / 1e13);
  }
  void gelu(const DeviceArray& u, DeviceArray&) override { stream(2 * u.bytes()); }
  void gelu_backward(const DeviceArray& da, const DeviceArray&, DeviceArray&) override {
    stream(3 * da.bytes());
  }
  double mse_loss(const DeviceArray& y, const DeviceArray&, double, DeviceArray&) override {
    stream(3 * y.bytes());
    return 0;
  }
  void sgd_step(DeviceArray& p, const DeviceArray&, double) override { stream(3 * p.bytes()); }
  void adam_step(DeviceArray& p, const DeviceArray&, DeviceArray&, DeviceArray&,
                 const AdamStep&) override {
    stream(7 * p.bytes());
  }
  void synchronize() override {}

 protected:
  void release(double* data, size_t) override { delete[] data; }

 private:
  static void spin(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
    }
  }
  static void stream(int64_t bytes) { spin(5e-6 + static_cast<double>(bytes) / 2e12); }
  int64_t memory_bytes_;
};

// A CUDA plugin with one EmulatedGpu: the cuda suite's compute part, no links.
class OneEmulatedGpuPlugin : public CudaPlugin {
 public:
  explicit OneEmulatedGpuPlugin(int64_t memory_bytes) : memory_bytes_(memory_bytes) {}
  int prepare_process() override { return 1; }
  std::vector<NcclId> make_nccl_ids(size_t count) override { return std::vector<NcclId>(count); }
  std::unique_ptr<Device> make_device(int) override {
    return std::make_unique<EmulatedGpu>(memory_bytes_);
  }
  void warm_up_compute(Device&, const MlpConfig&) override {}
  std::unique_ptr<CudaWorker> make_worker(Backend&, int, int, const CommPlan&,
                                          const std::vector<NcclId>&, double,
                                          const MlpConfig*) override {
    throw std::logic_error("OneEmulatedGpuPlugin: one GPU has no links to benchmark");
  }
  std::string library_versions() override { return "emulated GPU"; }

 private:
  int64_t memory_bytes_;
};

// One rank of `calibrate --backend cuda` is one GPU: the calibrated cluster's memory is the GPU's
// (141 GiB, as an H200), not the host's and not the base preset's (h100-sxm: 80 GiB).
TEST(Microbench, CudaSuiteGivesTheClusterTheGpusMemory) {
  const int64_t gib141 = int64_t{141} << 30;
  OneEmulatedGpuPlugin plugin(gib141);
  MicrobenchOptions o;
  o.backend = BackendKind::kCuda;
  o.quick = true;
  o.timing = tiny_timing();
  o.cuda = &plugin;
  const Measurements m = run_microbenchmarks(o, nullptr).measurements;
  EXPECT_EQ(m.backend, "cuda");
  EXPECT_EQ(m.gemm.size(), gpu_gemm_shapes(true).size());
  EXPECT_EQ(m.memory_bytes_per_rank, gib141);
  const ClusterSpec base = cluster_preset("h100-sxm");
  ASSERT_EQ(base.hbm_bytes, int64_t{80} << 30);
  const Calibration cal = calibrate(m, base, "emulated-gpu");
  EXPECT_EQ(cal.cluster.hbm_bytes, gib141);
  EXPECT_EQ(cluster_to_json(cal.cluster)["hbm_gib"], 141);
}

// threads: the host's memory shared by the ranks.
TEST(Microbench, ThreadsSuiteSharesTheHostsMemoryAmongItsRanks) {
  MicrobenchOptions o;
  o.quick = true;
  o.timing = tiny_timing();
  o.ranks = 2;
  const Measurements m = run_microbenchmarks(o, nullptr).measurements;
  ASSERT_GT(host_device().memory_bytes(), 0);
  EXPECT_EQ(m.memory_bytes_per_rank, host_device().memory_bytes() / 2);
}

TEST(MlpKernels, TasksLaunchTheMlpBlocksGemmsAndActivations) {
  MlpConfig mlp;
  mlp.hidden = 4;
  mlp.seq = 3;
  mlp.layers_per_stage = 2;  // ffn = 16
  std::vector<StageKernels> k = mlp_stage_kernels(mlp, 3);
  ASSERT_EQ(k.size(), 3u);
  const KernelWork& f = k[1].task[static_cast<int>(TaskKind::kF)];
  EXPECT_DOUBLE_EQ(f.gemm_flops(), 2 * 2 * (2.0 * 3 * 4 * 16));
  EXPECT_EQ(f.gelu_elements, 2 * 3 * 16);
  const KernelWork& b = k[1].task[static_cast<int>(TaskKind::kB)];
  const KernelWork& i = k[1].task[static_cast<int>(TaskKind::kI)];
  const KernelWork& w = k[1].task[static_cast<int>(TaskKind::kW)];
  EXPECT_DOUBLE_EQ(b.gemm_flops(), i.gemm_flops() + w.gemm_flops());
  EXPECT_EQ(i.gelu_backward_elements, 2 * 3 * 16);
  EXPECT_EQ(w.gelu_elements + w.gelu_backward_elements, 0);
  // The first stage generates and uploads its input; the last one its target, and it computes
  // the loss.
  EXPECT_EQ(f.generated_elements, 0);
  EXPECT_EQ(k[0].task[0].generated_elements, 3 * 4);
  EXPECT_EQ(k[2].task[0].generated_elements, 3 * 4);
  EXPECT_EQ(k[0].task[static_cast<int>(TaskKind::kB)].generated_elements, 0);
  EXPECT_EQ(f.host_transfer_bytes, 0);
  EXPECT_EQ(k[0].task[0].host_transfer_bytes, 3 * 4 * 8);  // the input, host -> device
  EXPECT_EQ(k[2].task[0].host_transfer_bytes, 3 * 4 * 8);  // the target
  EXPECT_EQ(k[0].task[0].memory_bytes, f.memory_bytes);
  EXPECT_GT(k[2].task[0].memory_bytes, f.memory_bytes);  // the loss
  EXPECT_EQ(k[1].optimizer.memory_bytes, mlp.params_per_stage() * 32);  // SGD
  EXPECT_EQ(mlp_transfer_bytes(mlp), 3 * 4 * 8);
  // Calls, as runtime/workload.cc makes them: per block a GeLU and the residual's copy in F, the
  // GeLU gradient and the residual's copy in I; the input's and target's generation and upload;
  // the loss; the optimizer step and the zero fill.
  EXPECT_EQ(f.gelu_calls, 2);
  EXPECT_EQ(f.memory_calls, 2);
  EXPECT_EQ(f.host_transfer_calls + f.generation_calls, 0);
  EXPECT_EQ(i.gelu_backward_calls, 2);
  EXPECT_EQ(i.memory_calls, 2);
  EXPECT_EQ(w.gelu_calls + w.gelu_backward_calls + w.memory_calls, 0);
  EXPECT_EQ(b.gelu_backward_calls, 2);
  EXPECT_EQ(k[0].task[0].host_transfer_calls, 1);
  EXPECT_EQ(k[0].task[0].generation_calls, 1);
  EXPECT_EQ(k[2].task[0].host_transfer_calls, 1);
  EXPECT_EQ(k[2].task[0].memory_calls, 3);  // two residuals and the loss
  EXPECT_EQ(k[1].optimizer.memory_calls, 2);
}

TEST(MlpKernels, AnMoeWorkloadLaunchesTheRouterTheHeldExpertsAndTheAllToAlls) {
  MlpConfig mlp;
  mlp.hidden = 4;
  mlp.ffn = 6;
  mlp.seq = 3;
  mlp.layers_per_stage = 2;
  mlp.experts = 8;
  mlp.top_k = 2;
  mlp.ep = 2;
  mlp.num_replicas = 2;
  std::vector<StageKernels> k = mlp_stage_kernels(mlp, 2);
  const KernelWork& f = k[1].task[static_cast<int>(TaskKind::kF)];
  const KernelWork& i = k[1].task[static_cast<int>(TaskKind::kI)];
  const KernelWork& w = k[1].task[static_cast<int>(TaskKind::kW)];
  const KernelWork& b = k[1].task[static_cast<int>(TaskKind::kB)];
  // Per block: router 3x8x4; a holder's 3·2 = 6 rows over its 4 experts (1, 2, 1, 2 rows), each
  // expert x W1 (r x 6 x 4) and a W2 (r x 4 x 6).
  const double router = 2.0 * 3 * 8 * 4;
  const double experts = 2 * (2.0 * 6 * 6 * 4);  // Σ rows = 6
  EXPECT_DOUBLE_EQ(f.gemm_flops(), 2 * (router + experts));
  EXPECT_EQ(f.gemms.size(), 2u * (1 + 2 * 4));
  EXPECT_EQ(f.gemms[1].m + f.gemms[3].m + f.gemms[5].m + f.gemms[7].m, 6);
  EXPECT_EQ(f.gelu_elements, 2 * 6 * 6);
  EXPECT_DOUBLE_EQ(i.gemm_flops(), 2 * (router + experts));
  EXPECT_EQ(i.gelu_backward_elements, 2 * 6 * 6);
  EXPECT_DOUBLE_EQ(w.gemm_flops(), 2 * (router + experts));
  EXPECT_DOUBLE_EQ(b.gemm_flops(), i.gemm_flops() + w.gemm_flops());
  // Dispatch [e, x] rows and combine x rows, 3·2/2 = 3 rows to each ep rank, in F and in I.
  ASSERT_EQ(f.alltoalls.size(), 4u);
  EXPECT_EQ(f.alltoalls[0].group_size, 2);
  EXPECT_DOUBLE_EQ(f.alltoalls[0].bytes_per_peer, 3 * (4 + 1) * 8.0);
  EXPECT_DOUBLE_EQ(f.alltoalls[1].bytes_per_peer, 3 * 4 * 8.0);
  ASSERT_EQ(i.alltoalls.size(), 4u);
  EXPECT_DOUBLE_EQ(i.alltoalls[0].bytes_per_peer, 3 * 4 * 8.0);
  EXPECT_TRUE(w.alltoalls.empty());
  EXPECT_EQ(b.alltoalls.size(), 4u);
  // Host staging per block (MoeWorkload on a device): F scores 3x8 and x 3x4 down, the 6 expert
  // rows up and their outputs down, y up; I gy down, ds up, the rows up and down, dx down and up.
  // (stage 1 is the last: its forward also uploads the target, 3x4).
  EXPECT_EQ(f.host_transfer_bytes, (2 * (3 * 8 + 3 * 4 + 2 * 6 * 4 + 3 * 4) + 3 * 4) * 8);
  EXPECT_EQ(i.host_transfer_bytes, 2 * (3 * 4 + 3 * 8 + 2 * 6 * 4 + 2 * 3 * 4) * 8);
  EXPECT_EQ(w.host_transfer_bytes, 0);
  // The same as calls: per block F 2 down, 4 experts x (up, down), 1 up, and the target; I 2,
  // 4 x 2, 2. One GeLU (gradient) per held expert; I's dx = gy copy; the last stage's loss.
  EXPECT_EQ(f.host_transfer_calls, 2 * (2 + 4 * 2 + 1) + 1);
  EXPECT_EQ(i.host_transfer_calls, 2 * (2 + 4 * 2 + 2));
  EXPECT_EQ(w.host_transfer_calls, 0);
  EXPECT_EQ(f.gelu_calls, 2 * 4);
  EXPECT_EQ(i.gelu_backward_calls, 2 * 4);
  EXPECT_EQ(i.memory_calls, 2);
  EXPECT_EQ(f.memory_calls, 1);
  // The optimizer runs over the whole buffer: the router and all 8 experts of each block.
  EXPECT_EQ(k[1].optimizer.memory_bytes, 2 * (4 * 8 + 8 * 2 * 4 * 6) * 32);
  // Top-2 of 8 experts: more work than the dense block of the same width.
  MlpConfig dense = mlp;
  dense.experts = 0;
  EXPECT_GT(f.gemm_flops(), mlp_stage_kernels(dense, 2)[1].task[0].gemm_flops());
}

TEST(ObserveTrace, FindsEveryComputeAndMatchesEveryTransferOfARun) {
  ScheduleParams params;
  params.num_actors = 2;
  params.num_microbatches = 3;
  MlpConfig mlp;
  mlp.hidden = 4;
  mlp.seq = 2;
  mlp.layers_per_stage = 1;
  LoweringOptions lo;
  lo.activation_bytes.assign(2, mlp_transfer_bytes(mlp));
  lo.grad_bytes.assign(2, mlp.params_per_stage() * 8);
  Program program = lower(generate_schedule("1f1b", params), lo);
  RunOptions ro;
  ro.steps = 2;
  ro.warmup = 1;
  ro.mlp = mlp;
  RunResult run = run_program(program, nullptr, ro);
  int computes = 0, recvs = 0;
  for (const TraceEvent& e : run.trace.events) {
    if (e.step < 1) continue;
    computes += e.op == OpKind::kCompute || e.op == OpKind::kOptimizer;
    recvs += e.op == OpKind::kRecv;
  }
  TraceObservations obs =
      observe_trace(run.trace, mlp_stage_kernels(mlp, 2), reference_host_cluster(), 1, 1);
  EXPECT_EQ(static_cast<int>(obs.computes.size()), computes);
  EXPECT_EQ(static_cast<int>(obs.transfers.size()), recvs);
  for (const ComputeObservation& c : obs.computes) EXPECT_GT(c.predicted_s, 0) << c.kind;
  for (const TransferObservation& t : obs.transfers) {
    EXPECT_NE(t.from, t.to);
    EXPECT_EQ(t.bytes, mlp_transfer_bytes(mlp));
  }
  // And the fit on top of them gives a loadable cluster.
  TraceCalibration cal = calibrate_from_trace(obs, reference_host_cluster(), "from-run");
  EXPECT_NO_THROW(cluster_from_json(cluster_to_json(cal.cluster), "from-run.json"));
}

TEST(ObserveTrace, AStageBeyondTheWorkloadIsAnInputError) {
  Trace t;
  t.num_actors = 1;
  TraceEvent e;
  e.op = OpKind::kCompute;
  e.tasks = {{TaskKind::kF, 5, 0}};
  e.stage = 5;
  e.end_s = 1e-3;
  t.events.push_back(e);
  MlpConfig mlp;
  EXPECT_THROW(observe_trace(t, mlp_stage_kernels(mlp, 2), reference_host_cluster(), 1, 0),
               InputError);
}

}  // namespace
}  // namespace jaxpp
