#include "runtime/threads_backend.h"

#include <latch>
#include <span>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace jaxpp {

class ThreadsBackend : public Backend {
 public:
  ThreadsBackend(ThreadsWorld& world, int actor, int replica)
      : world_(world), actor_(actor), replica_(replica) {}
  BackendKind kind() const override { return BackendKind::kThreads; }
  int actor() const override { return actor_; }
  int replica() const override { return replica_; }
  int num_actors() const override { return world_.num_actors_; }
  int num_replicas() const override { return world_.num_replicas_; }

  void post_send(int peer, int64_t key, std::vector<char> payload) override {
    ThreadsWorld::Mailbox& box = *world_.boxes_[world_.worker(peer, replica_)];
    {
      std::lock_guard lock(box.mu);
      box.messages[{actor_, key}] = std::move(payload);
    }
    box.cv.notify_all();
  }

  int post_recv(int peer, int64_t key) override {
    recvs_.push_back({peer, key});
    return static_cast<int>(recvs_.size()) - 1;
  }

  bool test_recv(int handle, std::vector<char>* payload) override {
    ThreadsWorld::Mailbox& box = own_box();
    std::lock_guard lock(box.mu);
    return take(box, handle, payload);
  }

  bool wait_recv(int handle, double deadline_s, std::vector<char>* payload) override {
    ThreadsWorld::Mailbox& box = own_box();
    std::unique_lock lock(box.mu);
    auto deadline = to_time_point(deadline_s);
    while (true) {
      if (take(box, handle, payload)) return true;
      if (world_.aborted_) return false;
      if (box.cv.wait_until(lock, deadline) == std::cv_status::timeout) {
        return take(box, handle, payload);
      }
    }
  }

  void allreduce_sum(std::span<double> data, double timeout_s) override {
    ThreadsWorld::Rendezvous& r = *world_.reductions_[actor_];
    std::unique_lock lock(r.mu);
    if (r.parts.empty()) r.parts.assign(world_.num_replicas_, {});
    r.parts[replica_] = data;
    uint64_t gen = r.generation;
    if (++r.arrived == world_.num_replicas_) {
      std::vector<double> sum(data.size(), 0.0);
      for (const auto& part : r.parts) {
        if (part.size() != sum.size())
          throw RuntimeFailure("allreduce: replicas hold gradients of different sizes");
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
      }
      for (auto& part : r.parts) std::copy(sum.begin(), sum.end(), part.begin());
      r.parts.assign(world_.num_replicas_, {});
      r.arrived = 0;
      ++r.generation;
      r.cv.notify_all();
      return;
    }
    wait_generation(r, lock, gen, timeout_s, "allreduce");
  }

  void allreduce_sum_strided(std::span<double> data, int stride, double timeout_s) override {
    if (stride == 1) return allreduce_sum(data, timeout_s);
    if (stride < 1 || world_.num_replicas_ % stride != 0)
      throw std::logic_error("allreduce_sum_strided: stride " + std::to_string(stride) +
                             " does not divide the " + std::to_string(world_.num_replicas_) +
                             " replicas");
    const int members = world_.num_replicas_ / stride;
    // Keyed apart from the all-to-all groups (first replica, group size) by a negative size.
    ThreadsWorld::Rendezvous& r = world_.alltoall_rendezvous(actor_, replica_ % stride, -stride);
    std::unique_lock lock(r.mu);
    if (r.parts.empty()) r.parts.assign(members, {});
    r.parts[replica_ / stride] = data;
    uint64_t gen = r.generation;
    if (++r.arrived == members) {
      std::vector<double> sum(data.size(), 0.0);
      for (const auto& part : r.parts) {  // in replica order, as allreduce_sum
        if (part.size() != sum.size())
          throw RuntimeFailure("allreduce: replicas hold gradients of different sizes");
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
      }
      for (auto& part : r.parts) std::copy(sum.begin(), sum.end(), part.begin());
      r.parts.assign(members, {});
      r.arrived = 0;
      ++r.generation;
      r.cv.notify_all();
      return;
    }
    try {
      wait_generation(r, lock, gen, timeout_s, "allreduce");
    } catch (const RuntimeFailure&) {
      r.parts[replica_ / stride] = {};  // leave without this (returning) frame's buffer
      --r.arrived;
      throw;
    }
  }

  std::vector<std::vector<double>> alltoallv(int group_size, std::vector<std::vector<double>> send,
                                             double timeout_s) override {
    check_group(group_size, send.size());
    const int first = replica_ / group_size * group_size;
    ThreadsWorld::Rendezvous& r = world_.alltoall_rendezvous(actor_, first, group_size);
    std::vector<std::vector<double>> recv(group_size);
    std::unique_lock lock(r.mu);
    if (r.sends.empty()) {
      r.sends.assign(group_size, nullptr);
      r.recvs.assign(group_size, nullptr);
    }
    r.sends[replica_ - first] = &send;
    r.recvs[replica_ - first] = &recv;
    uint64_t gen = r.generation;
    if (++r.arrived == group_size) {
      if (world_.aborted_) throw RuntimeFailure("alltoall: aborted");
      for (int i = 0; i < group_size; ++i)
        for (int j = 0; j < group_size; ++j) (*r.recvs[j])[i] = std::move((*r.sends[i])[j]);
      r.sends.clear();
      r.recvs.clear();
      r.arrived = 0;
      ++r.generation;
      r.cv.notify_all();
      return recv;
    }
    try {
      wait_generation(r, lock, gen, timeout_s, "alltoall");
    } catch (const RuntimeFailure&) {
      // Leave the rendezvous without buffers of this (returning) frame in it.
      r.sends[replica_ - first] = nullptr;
      r.recvs[replica_ - first] = nullptr;
      --r.arrived;
      throw;
    }
    return recv;
  }

  void barrier(double timeout_s) override {
    ThreadsWorld::Rendezvous& r = world_.barrier_;
    std::unique_lock lock(r.mu);
    uint64_t gen = r.generation;
    if (++r.arrived == world_.num_actors_ * world_.num_replicas_) {
      r.arrived = 0;
      ++r.generation;
      r.cv.notify_all();
      return;
    }
    wait_generation(r, lock, gen, timeout_s, "barrier");
  }

  double now_s() const override { return world_.now_s(); }
  void abort(const std::string& why) override { world_.abort(why); }
  std::string abort_reason() const override { return world_.abort_reason(); }

 private:
  void check_group(int group_size, size_t buffers) const {
    if (group_size < 1 || world_.num_replicas_ % group_size != 0)
      throw std::logic_error("alltoallv: group size " + std::to_string(group_size) +
                             " does not divide the " + std::to_string(world_.num_replicas_) +
                             " replicas");
    if (buffers != static_cast<size_t>(group_size))
      throw std::logic_error("alltoallv: " + std::to_string(buffers) +
                             " send buffers for a group of " + std::to_string(group_size));
  }

  ThreadsWorld::Mailbox& own_box() { return *world_.boxes_[world_.worker(actor_, replica_)]; }

  bool take(ThreadsWorld::Mailbox& box, int handle, std::vector<char>* payload) {
    auto it = box.messages.find(recvs_.at(handle));
    if (it == box.messages.end()) return false;
    *payload = std::move(it->second);
    box.messages.erase(it);
    return true;
  }

  std::chrono::steady_clock::time_point to_time_point(double t_s) const {
    return world_.origin_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(t_s));
  }

  void wait_generation(ThreadsWorld::Rendezvous& r, std::unique_lock<std::mutex>& lock,
                       uint64_t gen, double timeout_s, const char* what) {
    auto deadline = to_time_point(now_s() + timeout_s);
    while (r.generation == gen) {
      if (world_.aborted_) throw RuntimeFailure(std::string(what) + ": aborted");
      if (r.cv.wait_until(lock, deadline) == std::cv_status::timeout && r.generation == gen)
        throw RuntimeFailure(std::string(what) + ": timed out after " + seconds_text(timeout_s) +
                             " s waiting for the other workers");
    }
  }

  ThreadsWorld& world_;
  int actor_;
  int replica_;
  std::vector<std::pair<int, int64_t>> recvs_;
};

ThreadsWorld::ThreadsWorld(int num_actors, int num_replicas)
    : num_actors_(num_actors),
      num_replicas_(num_replicas),
      origin_(std::chrono::steady_clock::now()) {
  for (int i = 0; i < num_actors * num_replicas; ++i) boxes_.push_back(std::make_unique<Mailbox>());
  for (int a = 0; a < num_actors; ++a) reductions_.push_back(std::make_unique<Rendezvous>());
}

std::unique_ptr<Backend> ThreadsWorld::backend(int actor, int replica) {
  return std::make_unique<ThreadsBackend>(*this, actor, replica);
}

ThreadsWorld::Rendezvous& ThreadsWorld::alltoall_rendezvous(int actor, int first_replica,
                                                            int group_size) {
  std::lock_guard lock(alltoall_mu_);
  std::unique_ptr<Rendezvous>& r = alltoalls_[{actor, first_replica, group_size}];
  if (!r) r = std::make_unique<Rendezvous>();
  return *r;
}

double ThreadsWorld::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
}

void ThreadsWorld::abort(const std::string& why) {
  {
    std::lock_guard lock(abort_mu_);
    if (!abort_reason_.empty()) return;
    abort_reason_ = why;
  }
  aborted_ = true;
  notify_all();
}

std::string ThreadsWorld::abort_reason() const {
  if (!aborted_) return {};
  std::lock_guard lock(abort_mu_);
  return abort_reason_;
}

void ThreadsWorld::notify_all() {
  for (auto& box : boxes_) {
    std::lock_guard lock(box->mu);
    box->cv.notify_all();
  }
  for (auto& r : reductions_) {
    std::lock_guard lock(r->mu);
    r->cv.notify_all();
  }
  {
    std::lock_guard lock(alltoall_mu_);
    for (auto& [key, r] : alltoalls_) {
      std::lock_guard inner(r->mu);
      r->cv.notify_all();
    }
  }
  std::lock_guard lock(barrier_.mu);
  barrier_.cv.notify_all();
}

void run_on_threads(ThreadsWorld& world, const std::function<void(int actor, int replica)>& fn) {
  const int actors = world.num_actors(), total = actors * world.num_replicas();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(total));
  for (int w = 0; w < total; ++w) {
    try {
      threads.emplace_back(fn, w % actors, w / actors);
    } catch (const std::system_error& e) {
      world.abort("cannot start worker thread " + std::to_string(w + 1) + " of " +
                  std::to_string(total) + " (" + e.what() +
                  "): the threads backend runs one thread per worker; use fewer workers or "
                  "--backend mpi");
      break;
    }
  }
  for (std::thread& t : threads) t.join();
}

void run_together(int n, const std::function<void(int index)>& fn) {
  std::latch go(1);
  std::atomic<bool> not_started{false};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  std::string failure;
  for (int i = 0; i < n; ++i) {
    try {
      threads.emplace_back([&, i] {
        go.wait();
        if (!not_started) fn(i);
      });
    } catch (const std::system_error& e) {
      not_started = true;
      failure = "cannot start thread " + std::to_string(i + 1) + " of " + std::to_string(n) +
                " (" + e.what() + ")";
      break;
    }
  }
  go.count_down();
  for (std::thread& t : threads) t.join();
  if (!failure.empty()) throw RuntimeFailure(failure);
}

}  // namespace jaxpp
