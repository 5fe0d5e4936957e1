// The device abstraction the cuda backend is built on, exercised on the CPU: DeviceArray
// ownership, the default message path of host backends, and whole pipelined training runs whose
// tensors live in a fake device memory the host cannot read, moved by a backend that carries
// DeviceArrays directly (as NCCL does) and refuses the byte-level plane: the MLP workload, and the
// MoE workload (dp 2, ep 2: its all-to-alls on the host plane), which must equal its run on the
// host device bit for bit.
#include "runtime/device.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/backend.h"
#include "runtime/executor.h"
#include "runtime/mlp_math.h"
#include "runtime/moe_workload.h"
#include "runtime/reference.h"
#include "runtime/threads_backend.h"
#include "runtime/workload.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "tests/testing/lowered.h"

namespace jaxpp {
namespace {

// A Device whose pointers are not host addresses: data() is the real address shifted by 2^46
// bytes, so any host dereference of a tensor by code under test crashes, while the device's own
// operations (host maths underneath) translate back. Counts live allocations.
class OffsetDevice : public Device {
 public:
  static constexpr uintptr_t kShift = uintptr_t{1} << 46;
  MemorySpace space() const override { return MemorySpace::kCuda; }
  int64_t memory_bytes() const override { return host_device().memory_bytes(); }
  DeviceArray alloc(size_t n) override {
    if (n == 0) return {};
    std::lock_guard lock(mu_);
    ++live_;
    return DeviceArray(this, shift(new double[n]), n);
  }
  void fill_zero(DeviceArray& a) override {
    std::fill(real(a.data()), real(a.data()) + a.size(), 0.0);
  }
  DeviceArray upload(std::span<const double> host) override {
    DeviceArray a = alloc(host.size());
    std::copy(host.begin(), host.end(), real(a.data()));
    return a;
  }
  std::vector<double> download(const DeviceArray& a) override {
    return std::vector<double>(real(a.data()), real(a.data()) + a.size());
  }
  DeviceArray copy(const DeviceArray& a) override {
    return upload(std::span<const double>(real(a.data()), a.size()));
  }
  void gemm(bool ta, bool tb, int m, int n, int k, const double* a, int lda, const double* b,
            int ldb, double beta, double* c, int ldc) override {
    host_device().gemm(ta, tb, m, n, k, real(a), lda, real(b), ldb, beta, real(c), ldc);
  }
  // The loops below are HostDevice's, on translated pointers.
  void gelu(const DeviceArray& u, DeviceArray& a) override {
    for (size_t i = 0; i < u.size(); ++i) real(a.data())[i] = mlp_math::gelu(real(u.data())[i]);
  }
  void gelu_backward(const DeviceArray& da, const DeviceArray& u, DeviceArray& du) override {
    for (size_t i = 0; i < da.size(); ++i)
      real(du.data())[i] = real(da.data())[i] * mlp_math::gelu_grad(real(u.data())[i]);
  }
  double mse_loss(const DeviceArray& y, const DeviceArray& t, double scale,
                  DeviceArray& dy) override {
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      double d = real(y.data())[i] - real(t.data())[i];
      sum += d * d;
      real(dy.data())[i] = scale * d;
    }
    return sum / static_cast<double>(y.size());
  }
  void sgd_step(DeviceArray& p, const DeviceArray& g, double lr) override {
    for (size_t i = 0; i < p.size(); ++i) real(p.data())[i] -= lr * real(g.data())[i];
  }
  void adam_step(DeviceArray& p, const DeviceArray& g, DeviceArray& m, DeviceArray& v,
                 const AdamStep& s) override {
    for (size_t i = 0; i < p.size(); ++i)
      mlp_math::adam_update(real(p.data())[i], real(g.data())[i], real(m.data())[i],
                            real(v.data())[i], s.lr, s.beta1, s.beta2, s.eps, s.bias_correction1,
                            s.bias_correction2);
  }
  void synchronize() override {}
  int live() const {
    std::lock_guard lock(mu_);
    return live_;
  }

 protected:
  void release(double* data, size_t) override {
    std::lock_guard lock(mu_);
    --live_;
    delete[] real(data);
  }

 private:
  static double* shift(double* p) {
    return reinterpret_cast<double*>(reinterpret_cast<uintptr_t>(p) + kShift);
  }
  static double* real(const double* p) {
    return reinterpret_cast<double*>(reinterpret_cast<uintptr_t>(p) - kShift);
  }
  mutable std::mutex mu_;
  int live_ = 0;
};

// Moves Messages between the workers of one process without turning them into bytes, the way
// the cuda backend moves GPU tensors; barrier, clock and abort come from a ThreadsBackend. The
// byte-level P2P calls throw: the executor must not use them for tensors.
class DirectWorld {
 public:
  DirectWorld(int actors, int replicas) : threads_(actors, replicas), actors_(actors) {}
  std::unique_ptr<Backend> backend(int actor, int replica, OffsetDevice& device);

 private:
  friend class DirectBackend;
  ThreadsWorld threads_;
  int actors_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, int64_t>, Message> mail_;  // (dst worker, src actor, key)
};

class DirectBackend : public Backend {
 public:
  DirectBackend(DirectWorld& world, int actor, int replica, OffsetDevice& device)
      : world_(world), control_(world.threads_.backend(actor, replica)), device_(device) {}
  BackendKind kind() const override { return BackendKind::kCuda; }
  int actor() const override { return control_->actor(); }
  int replica() const override { return control_->replica(); }
  int num_actors() const override { return control_->num_actors(); }
  int num_replicas() const override { return control_->num_replicas(); }
  void post_send(int, int64_t, std::vector<char>) override { refuse(); }
  int post_recv(int, int64_t) override { refuse(); }
  bool test_recv(int, std::vector<char>*) override { refuse(); }
  bool wait_recv(int, double, std::vector<char>*) override { refuse(); }
  void allreduce_sum(std::span<double> data, double timeout_s) override {
    control_->allreduce_sum(data, timeout_s);
  }
  void allreduce_sum_strided(std::span<double> data, int stride, double timeout_s) override {
    control_->allreduce_sum_strided(data, stride, timeout_s);
  }
  void barrier(double timeout_s) override { control_->barrier(timeout_s); }
  std::vector<std::vector<double>> alltoallv(int group_size, std::vector<std::vector<double>> send,
                                             double timeout_s) override {
    return control_->alltoallv(group_size, std::move(send), timeout_s);
  }
  double now_s() const override { return control_->now_s(); }
  void abort(const std::string& why) override { control_->abort(why); }
  std::string abort_reason() const override { return control_->abort_reason(); }

  void send_message(int peer, int64_t key, Message message) override {
    if (!message.data.empty() && message.data.device() != &device_)
      throw std::logic_error("a tensor of another device was sent");
    {
      std::lock_guard lock(world_.mu_);
      world_.mail_[{replica() * world_.actors_ + peer, actor(), key}] = std::move(message);
    }
    world_.cv_.notify_all();
  }
  int post_message_recv(int peer, int64_t key) override {
    recvs_.push_back({peer, key});
    return static_cast<int>(recvs_.size()) - 1;
  }
  bool test_message(int handle, Message* message) override {
    std::lock_guard lock(world_.mu_);
    return take(handle, message);
  }
  bool wait_message(int handle, double deadline_s, Message* message) override {
    std::unique_lock lock(world_.mu_);
    while (!take(handle, message)) {
      if (!abort_reason().empty() || now_s() > deadline_s) return false;
      world_.cv_.wait_for(lock, std::chrono::milliseconds(1));
    }
    return true;
  }
  // Device gradients are reduced through the host plane, as a stand-in for ncclAllReduce.
  void allreduce_tensor(DeviceArray& data, double timeout_s) override {
    std::vector<double> host = device_.download(data);
    control_->allreduce_sum(host, timeout_s);
    data = device_.upload(host);
  }

 private:
  [[noreturn]] static void refuse() { throw std::logic_error("byte-level P2P used for a tensor"); }
  bool take(int handle, Message* message) {
    auto [peer, key] = recvs_.at(handle);
    auto it = world_.mail_.find({replica() * world_.actors_ + actor(), peer, key});
    if (it == world_.mail_.end()) return false;
    *message = std::move(it->second);
    world_.mail_.erase(it);
    // Lands in this worker's memory, like an ncclRecv into a buffer of the receiving GPU.
    if (!message->data.empty())
      message->data = device_.upload(message->data.device()->download(message->data));
    return true;
  }
  DirectWorld& world_;
  std::unique_ptr<Backend> control_;
  OffsetDevice& device_;
  std::vector<std::pair<int, int64_t>> recvs_;
};

std::unique_ptr<Backend> DirectWorld::backend(int actor, int replica, OffsetDevice& device) {
  return std::make_unique<DirectBackend>(*this, actor, replica, device);
}

MlpConfig small_mlp(const Program& prog, int dp, OptimizerKind optimizer) {
  MlpConfig c;
  c.hidden = 8;
  c.seq = 4;
  c.layers_per_stage = 2;
  c.num_stages = prog.num_stages;
  c.num_microbatches = prog.num_microbatches;
  c.num_replicas = dp;
  c.optimizer = optimizer;
  return c;
}

using Losses = std::map<int, std::map<int, std::map<int, double>>>;  // replica -> step -> mb -> loss

// Per step, the mean loss over microbatches and replicas, summed replica by replica in
// microbatch order as runtime/run.cc does.
std::vector<double> mean_losses(const Losses& losses, const MlpConfig& mlp, int steps) {
  std::vector<double> loss_sum(steps, 0.0), out;
  for (const auto& [r, per_step] : losses)
    for (const auto& [step, per_mb] : per_step)
      for (const auto& [mb, l] : per_mb) loss_sum.at(step) += l;
  for (double l : loss_sum)
    out.push_back(l / (static_cast<double>(mlp.num_microbatches) * mlp.num_replicas));
  return out;
}

int live_arrays(const std::vector<OffsetDevice>& devices) {
  int live = 0;
  for (const OffsetDevice& d : devices) live += d.live();
  return live;
}

// What the worker threads share: their losses, written under a lock by `record`.
struct WorkerRunner {
  std::mutex mu;
  Losses losses;
  template <typename Fn>
  void record(Fn&& fn) {
    std::lock_guard lock(mu);
    fn(losses);
  }
};

// Runs every worker (actor a, replica r; worker w = r * actors + a) on its own thread with the
// backend `make_backend(a, r, w)`: `body(a, r, w, backend, runner)` runs it and records what it
// produced through `runner.record`. An exception aborts the run through the worker's backend and
// fails the test. Returns the losses the workers recorded.
template <typename MakeBackend, typename Body>
Losses run_worker_threads(int actors, int replicas, MakeBackend make_backend, Body body) {
  WorkerRunner runner;
  std::vector<std::thread> threads;
  for (int w = 0; w < actors * replicas; ++w) {
    threads.emplace_back([&, w] {
      const int a = w % actors, r = w / actors;
      std::unique_ptr<Backend> backend = make_backend(a, r, w);
      try {
        body(a, r, w, *backend, runner);
      } catch (const std::exception& e) {
        backend->abort(e.what());
        ADD_FAILURE() << "worker " << w << ": " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return std::move(runner.losses);
}

ExecutorOptions test_executor_options(int steps) {
  ExecutorOptions eo;
  eo.num_steps = steps;
  eo.timeout_s = 20;
  return eo;
}

struct DeviceRun {
  std::map<int, std::vector<double>> params;  // stage -> weights (one replica's copy)
  std::vector<double> losses;                 // per step, mean over microbatches and replicas
  int live_after = -1;                        // live device arrays once the workloads are gone
  int reductions = 0;                         // gradient reductions of all workers
};

// A workload that counts the gradient reductions it is asked for and passes everything on.
class ReductionCounter : public Workload {
 public:
  ReductionCounter(Workload& inner, std::atomic<int>& count) : inner_(inner), count_(count) {}
  void run_task(const TaskRef& task, int step) override { inner_.run_task(task, step); }
  DeviceArray take_output(const TaskRef& producer, int step) override {
    return inner_.take_output(producer, step);
  }
  void put_input(const TaskRef& producer, int step, DeviceArray tensor) override {
    inner_.put_input(producer, step, std::move(tensor));
  }
  DeviceArray& grad_buffer(int stage) override { return inner_.grad_buffer(stage); }
  void optimizer_step(int stage, int step) override { inner_.optimizer_step(stage, step); }
  void reduce_gradients(int stage, Backend& backend, double timeout_s) override {
    ++count_;
    inner_.reduce_gradients(stage, backend, timeout_s);
  }
  int64_t bytes_held() const override { return inner_.bytes_held(); }

 private:
  Workload& inner_;
  std::atomic<int>& count_;
};

// Every worker's tensors on its own OffsetDevice, moved by DirectBackends.
DeviceRun run_on_offset_devices(const Program& prog, const MlpConfig& mlp, int steps) {
  DirectWorld world(prog.num_actors, mlp.num_replicas);
  std::vector<OffsetDevice> devices(prog.num_actors * mlp.num_replicas);
  DeviceRun out;
  std::atomic<int> reductions{0};
  const ExecutorOptions eo = test_executor_options(steps);
  const Losses losses = run_worker_threads(
      prog.num_actors, mlp.num_replicas,
      [&](int a, int r, int w) { return world.backend(a, r, devices[w]); },
      [&](int a, int r, int w, Backend& backend, WorkerRunner& runner) {
        MlpWorkload workload(mlp, a, r, prog.stage_to_actor, devices[w]);
        ReductionCounter counted(workload, reductions);
        run_worker(prog, backend, counted, eo);
        runner.record([&](Losses& all) {
          for (int s = 0; s < prog.num_stages; ++s)
            if (workload.holds_stage(s) && r == 0) out.params[s] = workload.params(s);
          if (!workload.losses().empty()) all[r] = workload.losses();
        });
      });
  out.losses = mean_losses(losses, mlp, steps);
  out.live_after = live_arrays(devices);
  out.reductions = reductions.load();
  return out;
}

struct Case {
  std::string schedule;
  int p, m, stages;
  OptimizerKind optimizer;
};

class DeviceResidentTraining : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceResidentTraining, EqualsTheSequentialReferenceBitForBit) {
  const Case& c = GetParam();
  Program prog = lowered(c.schedule, c.p, c.m, c.stages);
  MlpConfig mlp = small_mlp(prog, /*dp=*/2, c.optimizer);
  DeviceRun run = run_on_offset_devices(prog, mlp, /*steps=*/3);
  ReferenceResult ref = run_reference(mlp, 3);
  EXPECT_EQ(run.losses, ref.losses);
  ASSERT_EQ(run.params.size(), static_cast<size_t>(prog.num_stages));
  for (int s = 0; s < prog.num_stages; ++s) EXPECT_EQ(run.params[s], ref.stage_params[s]) << s;
  EXPECT_EQ(run.live_after, 0) << "device arrays leaked";
}

// Gradient sharding (ZeRO-2) lowers a reduction after every microbatch's backward of a stage:
// each one really reduces over the replicas what the buffer gathered since the previous one, and
// the final one adds the parts back, so the weights match the reference (to rounding: the sum
// is added in another order).
TEST(DeviceResidentTraining, ShardedGradientsReduceEveryMicrobatchAndMatchTheReference) {
  ScheduleParams params;
  params.num_actors = 2;
  params.num_microbatches = 4;
  LoweringOptions lo;
  lo.reduce_each_microbatch = true;
  Program prog = lower(generate_schedule("Std1F1B", params), lo);
  MlpConfig mlp = small_mlp(prog, /*dp=*/2, OptimizerKind::kAdam);
  const int steps = 2;
  DeviceRun run = run_on_offset_devices(prog, mlp, steps);
  // 2 stages × 2 replicas × 4 microbatches per step: 4 reductions per stage (one reduction per
  // step with reduce_each_microbatch off).
  EXPECT_EQ(run.reductions, steps * 2 * 2 * 4);
  ReferenceResult ref = run_reference(mlp, steps);
  ASSERT_EQ(run.params.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    ASSERT_EQ(run.params[s].size(), ref.stage_params[s].size());
    for (size_t k = 0; k < run.params[s].size(); ++k)
      EXPECT_NEAR(run.params[s][k], ref.stage_params[s][k],
                  1e-12 * (1 + std::fabs(ref.stage_params[s][k])))
          << "stage " << s << " weight " << k;
  }
  EXPECT_EQ(run.live_after, 0) << "device arrays leaked";
}

INSTANTIATE_TEST_SUITE_P(Schedules, DeviceResidentTraining,
                         ::testing::Values(Case{"Std1F1B", 3, 4, 0, OptimizerKind::kSgd},
                                           Case{"ZeroBubble", 2, 4, 0, OptimizerKind::kAdam},
                                           Case{"Interleaved1F1B", 2, 4, 4, OptimizerKind::kSgd}),
                         [](const auto& info) { return info.param.schedule; });

TEST(DeviceArray, ReleasesThroughItsDeviceExactlyOnceAcrossMoves) {
  OffsetDevice dev;
  {
    DeviceArray a = dev.zeros(5);
    EXPECT_EQ(dev.live(), 1);
    DeviceArray b = std::move(a);
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(b.size(), 5u);
    EXPECT_EQ(b.bytes(), 40);
    EXPECT_FALSE(b.on_host());
    DeviceArray c = dev.alloc(3);
    c = std::move(b);  // c's old array is released
    EXPECT_EQ(dev.live(), 1);
  }
  EXPECT_EQ(dev.live(), 0);
}

// The host's memory is its physical memory (what calibrate divides among the ranks of a host).
TEST(HostDevice, MemoryIsTheHostsPhysicalMemory) {
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  EXPECT_EQ(host_device().memory_bytes(), physical);
  EXPECT_GT(host_device().memory_bytes(), int64_t{256} << 20);
}

TEST(HostDevice, MatchesTheMathItDocuments) {
  HostDevice& dev = host_device();
  DeviceArray y = dev.upload(std::vector<double>{1, 2, 3, 4});
  DeviceArray t = dev.upload(std::vector<double>{0, 2, 5, 4});
  DeviceArray dy = dev.alloc(4);
  EXPECT_DOUBLE_EQ(dev.mse_loss(y, t, 0.5, dy), (1.0 + 0 + 4 + 0) / 4);
  EXPECT_EQ(dev.download(dy), (std::vector<double>{0.5, 0, -1, 0}));
  // [1 2; 3 4] x [1 0; 0 1]^T + 1 * C
  DeviceArray a = dev.upload(std::vector<double>{1, 2, 3, 4});
  DeviceArray b = dev.upload(std::vector<double>{1, 0, 0, 1});
  DeviceArray c = dev.upload(std::vector<double>{1, 1, 1, 1});
  dev.gemm(false, true, 2, 2, 2, a.data(), 2, b.data(), 2, 1.0, c.data(), 2);
  EXPECT_EQ(dev.download(c), (std::vector<double>{2, 3, 4, 5}));
  DeviceArray g = dev.upload(std::vector<double>{1, -1, 0, 2});
  dev.sgd_step(c, g, 0.5);
  EXPECT_EQ(dev.download(c), (std::vector<double>{1.5, 3.5, 4, 4}));
}

TEST(BackendDefaults, HostMessagesKeepValuesAndReadyTimeOverTheBytePlane) {
  ThreadsWorld world(2, 1);
  auto a = world.backend(0, 0);
  auto b = world.backend(1, 0);
  Message m;
  m.ready_at_s = 1.25;
  m.data = host_device().upload(std::vector<double>{3, -4.5});
  a->send_message(1, 9, std::move(m));
  a->send_message(1, 10, Message{0.5, {}});
  int h9 = b->post_message_recv(0, 9);
  int h10 = b->post_message_recv(0, 10);
  Message got;
  ASSERT_TRUE(b->wait_message(h9, b->now_s() + 5, &got));
  EXPECT_EQ(got.ready_at_s, 1.25);
  EXPECT_TRUE(got.data.on_host());
  EXPECT_EQ(host_device().download(got.data), (std::vector<double>{3, -4.5}));
  ASSERT_TRUE(b->test_message(h10, &got));
  EXPECT_EQ(got.ready_at_s, 0.5);
  EXPECT_TRUE(got.data.empty());
}

TEST(BackendDefaults, RefuseDeviceMemory) {
  ThreadsWorld world(2, 1);
  auto a = world.backend(0, 0);
  OffsetDevice dev;
  Message m;
  m.data = dev.zeros(2);
  EXPECT_THROW(a->send_message(1, 1, std::move(m)), std::logic_error);
  DeviceArray g = dev.zeros(2);
  EXPECT_THROW(a->allreduce_tensor(g, 1), std::logic_error);
}

TEST(MlpWorkload, OnADeviceFreesEveryStashedTensorAtItsLastUse) {
  Program prog = lowered("GPipe", 1, 2);
  MlpConfig mlp = small_mlp(prog, 1, OptimizerKind::kAdam);
  OffsetDevice dev;
  {
    MlpWorkload w(mlp, 0, 0, prog.stage_to_actor, dev);
    int base = dev.live();  // parameters and gradients of the one stage
    EXPECT_EQ(base, 2);
    w.run_task({TaskKind::kF, 0, 0}, 0);
    w.run_task({TaskKind::kF, 0, 1}, 0);
    EXPECT_GT(dev.live(), base);
    w.run_task({TaskKind::kI, 0, 0}, 0);
    w.run_task({TaskKind::kW, 0, 0}, 0);
    w.run_task({TaskKind::kB, 0, 1}, 0);
    EXPECT_EQ(dev.live(), base);
    w.optimizer_step(0, 0);
    EXPECT_EQ(dev.live(), base + 2);  // Adam moments
    EXPECT_THROW(w.grads(0), std::logic_error) << "no host view of device gradients";
  }
  EXPECT_EQ(dev.live(), 0);
}

// ---- the MoE workload on a device --------------------------------------------------------------

MlpConfig small_moe(const Program& prog, OptimizerKind optimizer, RouterScoring router) {
  MlpConfig c = small_mlp(prog, /*dp=*/2, optimizer);
  c.ffn = 12;
  c.seq = 5;
  c.experts = 4;
  c.top_k = 2;
  c.ep = 2;
  c.router = router;
  return c;
}

struct MoeDeviceRun {
  std::map<std::pair<int, int>, std::vector<double>> params;   // (stage, replica) -> weights
  std::map<int, std::vector<std::pair<size_t, size_t>>> held;  // replica -> owned ranges
  std::vector<double> losses;  // per step, mean over microbatches and replicas
  int live_after = -1;
};

// Every worker runs the MoE workload: on its own OffsetDevice behind a DirectBackend
// (`on_offset_devices`), or on the host device behind a ThreadsBackend.
MoeDeviceRun run_moe_workers(const Program& prog, const MlpConfig& mlp, int steps,
                             bool on_offset_devices) {
  DirectWorld direct(prog.num_actors, mlp.num_replicas);
  ThreadsWorld threads_world(prog.num_actors, mlp.num_replicas);
  std::vector<OffsetDevice> devices(prog.num_actors * mlp.num_replicas);
  MoeDeviceRun out;
  const ExecutorOptions eo = test_executor_options(steps);
  const Losses losses = run_worker_threads(
      prog.num_actors, mlp.num_replicas,
      [&](int a, int r, int w) {
        return on_offset_devices ? direct.backend(a, r, devices[w]) : threads_world.backend(a, r);
      },
      [&](int a, int r, int w, Backend& backend, WorkerRunner& runner) {
        Device& device = on_offset_devices ? static_cast<Device&>(devices[w]) : host_device();
        MoeWorkload workload(mlp, a, r, prog.stage_to_actor, backend, eo.timeout_s, device);
        run_worker(prog, backend, workload, eo);
        runner.record([&](Losses& all) {
          for (int s = 0; s < prog.num_stages; ++s)
            if (workload.holds_stage(s)) out.params[{s, r}] = workload.params(s);
          out.held[r] = workload.held_ranges();
          if (!workload.losses().empty()) all[r] = workload.losses();
        });
      });
  out.losses = mean_losses(losses, mlp, steps);
  out.live_after = live_arrays(devices);
  return out;
}

struct MoeDeviceCase {
  std::string schedule;
  OptimizerKind optimizer;
  RouterScoring router;
};

class MoeOnADevice : public ::testing::TestWithParam<MoeDeviceCase> {};

TEST_P(MoeOnADevice, EqualsTheHostRunBitForBitAndTheIndependentReference) {
  const MoeDeviceCase& c = GetParam();
  const Program prog = lowered(c.schedule, 2, 4);
  const MlpConfig mlp = small_moe(prog, c.optimizer, c.router);
  const int steps = 3;
  const MoeDeviceRun device = run_moe_workers(prog, mlp, steps, /*on_offset_devices=*/true);
  const MoeDeviceRun host = run_moe_workers(prog, mlp, steps, /*on_offset_devices=*/false);
  // The same Device calls with the same host arithmetic underneath: identical results.
  EXPECT_EQ(device.losses, host.losses);
  ASSERT_EQ(device.params.size(), static_cast<size_t>(prog.num_stages * mlp.num_replicas));
  EXPECT_EQ(device.params, host.params);
  EXPECT_EQ(device.live_after, 0) << "device arrays leaked";
  // And the model trained is the reference's: the losses, and every replica's owned weights.
  const ReferenceResult ref = run_independent_reference(mlp, steps);
  ASSERT_EQ(device.losses.size(), ref.losses.size());
  for (int s = 0; s < steps; ++s)
    EXPECT_NEAR(device.losses[s], ref.losses[s], 1e-12 * std::abs(ref.losses[s])) << "step " << s;
  for (const auto& [key, weights] : device.params) {
    const auto [stage, replica] = key;
    const std::vector<double>& want = ref.stage_params.at(stage);
    ASSERT_EQ(weights.size(), want.size());
    ASSERT_FALSE(device.held.at(replica).empty());
    for (const auto& [begin, end] : device.held.at(replica))
      for (size_t i = begin; i < end; ++i)
        ASSERT_NEAR(weights[i], want[i], 1e-10 * std::max(1.0, std::abs(want[i])))
            << "stage " << stage << " replica " << replica << " " << describe_stage_param(mlp, i);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, MoeOnADevice,
    ::testing::Values(MoeDeviceCase{"Std1F1B", OptimizerKind::kSgd, RouterScoring::kSoftmax},
                      MoeDeviceCase{"ZeroBubble", OptimizerKind::kAdam, RouterScoring::kSigmoid}),
    [](const auto& info) { return info.param.schedule; });

TEST(MoeWorkload, OnADeviceFreesEveryStashedTensorAtItsLastUse) {
  Program prog = lowered("GPipe", 1, 2);
  MlpConfig mlp = small_moe(prog, OptimizerKind::kAdam, RouterScoring::kSoftmax);
  mlp.num_replicas = 1;
  mlp.ep = 1;
  ThreadsWorld world(1, 1);
  std::unique_ptr<Backend> backend = world.backend(0, 0);
  OffsetDevice dev;
  {
    MoeWorkload w(mlp, 0, 0, prog.stage_to_actor, *backend, 5, dev);
    const int base = dev.live();  // parameters and gradients of the one stage
    EXPECT_EQ(base, 2);
    w.run_task({TaskKind::kF, 0, 0}, 0);
    w.run_task({TaskKind::kF, 0, 1}, 0);
    EXPECT_GT(dev.live(), base);
    w.run_task({TaskKind::kI, 0, 0}, 0);
    w.run_task({TaskKind::kW, 0, 0}, 0);
    w.run_task({TaskKind::kB, 0, 1}, 0);
    EXPECT_EQ(dev.live(), base);
    w.optimizer_step(0, 0);
    EXPECT_EQ(dev.live(), base + 2);  // Adam moments
    EXPECT_GT(w.losses().at(0).size(), 0u);
  }
  EXPECT_EQ(dev.live(), 0);
}

}  // namespace
}  // namespace jaxpp
