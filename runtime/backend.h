// Backend: how one worker of a running Program talks to the others. The executor
// (runtime/executor.h) holds all the control flow; a backend only moves bytes.
//
// A *worker* is one (actor, replica) pair: `actor` is the pipeline rank of the Program, `replica`
// the data-parallel index. Worker id = replica * num_actors + actor. Point-to-point messages go
// between actors of the same replica; collectives reduce one actor's buffers across its replicas.
//
// Messages are keyed by (source actor, destination actor, key), where the executor builds `key`
// from the training step and the instruction's tag, so keys never repeat within a run. Sends are
// buffered (the payload is handed over; post_send never blocks). Receives are posted and then
// completed with test_recv / wait_recv. Payloads are opaque bytes.
//
// Failures: a receive or collective that does not complete before its deadline returns false /
// throws RuntimeFailure; the executor turns that into an error naming the actor and the
// instruction. abort() tells every other worker to stop (threads: a shared flag, mpi: a
// best-effort notice followed by MPI_Abort from the driver).
//
// Times: now_s() is seconds since the run's common origin (the same clock on every worker of a
// run: steady_clock in one process, CLOCK_MONOTONIC shared by the processes of one host for mpi).
//
// Two planes. The byte-level calls (post_send, post_recv, test_recv, wait_recv, allreduce_sum of
// host memory, alltoallv of host memory, barrier) are the host control plane. The executor moves
// tensors through the message-level calls (send_message, post_message_recv, test_message,
// wait_message, allreduce_tensor), which carry a DeviceArray (runtime/device.h) and the emulated
// ready time. Their defaults serve host-memory backends (threads, mpi): a message travels as the
// bytes [double ready_at_s][payload] over the byte-level calls and arrives as a host DeviceArray. A
// backend whose tensors live in GPU memory (cuda) overrides them and keeps the bytes on the GPU.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/device.h"

namespace jaxpp {

// A run that started and then failed (timeout, dead peer, injected fault, no device). Distinct
// from InputError (bad flags or files): the CLI reports both, with exit codes 1 and 2.
class RuntimeFailure : public std::runtime_error {
 public:
  explicit RuntimeFailure(const std::string& m) : std::runtime_error(m) {}
};

// What one kSend hands over and the matching kRecv gets back.
struct Message {
  double ready_at_s = 0;  // emulation: the receiver may not consume it before this time
  DeviceArray data;       // the tensor (activation or input gradient); empty in emulation
};

enum class BackendKind { kThreads, kMpi, kCuda };
std::string_view to_string(BackendKind k);  // "threads", "mpi", "cuda"

// A timeout in seconds as the backends' messages print it ("%g": 0.5, 30, 1e-05).
std::string seconds_text(double s);
BackendKind parse_backend_kind(std::string_view s, const std::string& where);  // InputError

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  virtual int actor() const = 0;
  virtual int replica() const = 0;
  virtual int num_actors() const = 0;
  virtual int num_replicas() const = 0;

  // Hands `payload` to actor `peer` of this replica under `key`. Never blocks.
  virtual void post_send(int peer, int64_t key, std::vector<char> payload) = 0;
  // Posts a receive from actor `peer` under `key`; returns a handle for test/wait.
  virtual int post_recv(int peer, int64_t key) = 0;
  // True (and the payload moved out) when the receive has completed.
  virtual bool test_recv(int handle, std::vector<char>* payload) = 0;
  // Blocks until the receive completes (true) or `deadline_s` (now_s clock) passes (false).
  virtual bool wait_recv(int handle, double deadline_s, std::vector<char>* payload) = 0;
  // In-place sum of `data` over the replicas of this actor (same length everywhere; every
  // replica sums in replica order where the backend can). Throws RuntimeFailure after
  // `timeout_s` without all replicas.
  virtual void allreduce_sum(std::span<double> data, double timeout_s) = 0;
  // In-place sum of `data` over the replicas r of this actor with r mod stride == replica() mod
  // stride (`stride` divides num_replicas; 1 = allreduce_sum): the expert data-parallel group of
  // an MoE replica, whose ep group is `stride` consecutive replicas (runtime/moe_workload.h).
  // Every member calls it the same number of times in the same order. RuntimeFailure after
  // `timeout_s` without all of them.
  virtual void allreduce_sum_strided(std::span<double> data, int stride, double timeout_s) = 0;
  // Waits for every worker of the run (all actors, all replicas); RuntimeFailure after timeout_s.
  virtual void barrier(double timeout_s) = 0;
  // All-to-all(v) of host fp64 buffers among a group of replicas of this actor: the `group_size`
  // consecutive replicas g·group_size, ..., g·group_size + group_size − 1 with g = replica /
  // group_size (group_size must divide num_replicas). send[i] (any length, 0 allowed) goes to the
  // i-th member of the group; the result's element i is what member i sent to this replica. Every
  // member calls it the same number of times in the same order (the MoE dispatch and combine of
  // runtime/moe_workload.h). RuntimeFailure after `timeout_s` without all members, or when the
  // run is aborted.
  virtual std::vector<std::vector<double>> alltoallv(int group_size,
                                                     std::vector<std::vector<double>> send,
                                                     double timeout_s) = 0;

  // Message-level calls (see the header comment); handles of post_message_recv are completed
  // with test_message / wait_message only.
  virtual void send_message(int peer, int64_t key, Message message);
  virtual int post_message_recv(int peer, int64_t key);
  virtual bool test_message(int handle, Message* message);
  virtual bool wait_message(int handle, double deadline_s, Message* message);
  // In-place sum of `data` over the replicas of this actor; the default needs host memory and
  // calls allreduce_sum.
  virtual void allreduce_tensor(DeviceArray& data, double timeout_s);

  virtual double now_s() const = 0;
  // Tells the other workers to give up (their waits fail with `why`).
  virtual void abort(const std::string& why) = 0;
  // Non-empty once some worker aborted.
  virtual std::string abort_reason() const = 0;
};

}  // namespace jaxpp
