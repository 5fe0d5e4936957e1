// Threads backend: every worker (actor, replica) is a thread of one process.
//
// ThreadsWorld is the shared state of one run: a mailbox per worker (mutex + condition variable,
// messages keyed by (source actor, key), payloads copied in and moved out), a barrier-based
// reduction per actor for the gradient all-reduce across replicas (the last replica to arrive
// sums the contributions in replica order and writes the sum into every contributor's buffer, so
// every replica holds bit-identical gradients), an all-to-all(v) rendezvous per (actor, replica
// group) (the last member to arrive moves every member's send buffers into the others' results),
// a barrier over all workers, and an abort flag
// that wakes every waiter. The clock is steady_clock from the world's creation.
//
// Usage:
//   ThreadsWorld world(num_actors, num_replicas);
//   std::unique_ptr<Backend> b = world.backend(actor, replica);   // one per worker thread
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/backend.h"

namespace jaxpp {

class ThreadsWorld {
 public:
  ThreadsWorld(int num_actors, int num_replicas);
  std::unique_ptr<Backend> backend(int actor, int replica);
  int num_actors() const { return num_actors_; }
  int num_replicas() const { return num_replicas_; }
  void abort(const std::string& why);
  std::string abort_reason() const;
  double now_s() const;

 private:
  friend class ThreadsBackend;
  struct Mailbox {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::pair<int, int64_t>, std::vector<char>> messages;  // (source actor, key)
  };
  struct Rendezvous {  // reduction or barrier
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    uint64_t generation = 0;
    std::vector<std::span<double>> parts;  // by replica (reductions only)
    // All-to-all only: by member of the group, its send buffers and where its result goes.
    std::vector<std::vector<std::vector<double>>*> sends;
    std::vector<std::vector<std::vector<double>>*> recvs;
  };
  // The all-to-all rendezvous of the replica group (actor, first replica, size); made on first use.
  Rendezvous& alltoall_rendezvous(int actor, int first_replica, int group_size);
  int worker(int actor, int replica) const { return replica * num_actors_ + actor; }
  void notify_all();

  int num_actors_;
  int num_replicas_;
  std::chrono::steady_clock::time_point origin_;
  std::vector<std::unique_ptr<Mailbox>> boxes_;        // per worker
  std::vector<std::unique_ptr<Rendezvous>> reductions_;  // per actor
  Rendezvous barrier_;
  std::mutex alltoall_mu_;  // guards alltoalls_ (the map, not the rendezvous in it)
  std::map<std::tuple<int, int, int>, std::unique_ptr<Rendezvous>> alltoalls_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mu_;
  std::string abort_reason_;
};

// One thread per worker of `world` (replica-major), each running fn(actor, replica); returns when
// every thread has joined. A thread the system cannot start (thread or memory limits) aborts the
// world with "cannot start worker thread i of N (<reason>): the threads backend runs one thread
// per worker; use fewer workers or --backend mpi", which wakes the workers already started; the
// caller reads it from abort_reason() as any other failure.
void run_on_threads(ThreadsWorld& world, const std::function<void(int actor, int replica)>& fn);

// n threads that call fn(i) together, once all of them exist (the calibration's compute round
// measures the cores loaded at once); returns when every thread has joined. A thread the system
// cannot start releases the ones started, which return without calling fn, and throws
// RuntimeFailure "cannot start thread i of n (<reason>)" after they joined.
void run_together(int n, const std::function<void(int index)>& fn);

}  // namespace jaxpp
