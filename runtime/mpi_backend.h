// MPI backend: one process per worker under mpirun. World rank = replica * num_actors + actor.
//
//   post_send     MPI_Isend (the payload is kept until the request completes)
//   post_recv     remembers (source, tag); test/wait use MPI_Iprobe + MPI_Recv, so payloads of
//                 any size are received; wait polls until its deadline
//   allreduce_sum MPI_Iallreduce(MPI_SUM) on a sub-communicator of the replicas of one actor
//                 (MPI_Comm_split by actor), polled until the deadline
//   barrier       MPI_Ibarrier on MPI_COMM_WORLD, polled until the deadline
//   alltoallv     on a sub-communicator of the replica group (MPI_Comm_split of the actor's
//                 communicator by replica / group_size, made at the group's first all-to-all and
//                 kept): MPI_Ialltoall of the counts, then MPI_Ialltoallv of the fp64 payloads,
//                 each polled until the deadline (a peer that never comes: RuntimeFailure)
// Waits (wait_recv, all-reduce, barrier) poll with a bounded backoff: they spin for the first
// kSpinS (a message about to arrive costs no wake-up), then yield the CPU between polls until
// kYieldS (a rank that shares the core gets to run), then sleep kFirstSleepS, doubling up to
// kMaxSleepS (an idle rank leaves its core to the ranks that compute, and a message that arrives
// during a long wait is seen at most kMaxSleepS plus the timer's slack late). They used to sleep
// 20 us between all polls (about 70 us with the timer's slack), which every message paid.
// MPI tags are key mod (MPI_TAG_UB + 1). The clock is steady_clock (CLOCK_MONOTONIC) minus an
// origin broadcast by rank 0, so traces of the processes of one host share a time axis (across
// hosts the offsets are not corrected). abort() only records the reason locally; the caller
// reports it and calls mpi_abort() so mpirun stops the other ranks.
//
// Usage (once per process):
//   MpiSession& mpi = MpiSession::get();            // MPI_Init on first use, finalize at exit
//   MpiBackend backend(num_actors, num_replicas);  // InputError if the world size differs
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend.h"

namespace jaxpp {

class MpiSession {
 public:
  static MpiSession& get();
  int rank() const { return rank_; }
  int size() const { return size_; }
  ~MpiSession();

 private:
  MpiSession();
  int rank_ = 0;
  int size_ = 1;
};

// Ends every process of the job (MPI_Abort) after printing `message` on stderr.
[[noreturn]] void mpi_abort(const std::string& message, int code);

// The MPI library this build uses, from its headers ("Open MPI 4.1.4", "MPICH 4.0.2", or the
// standard version "MPI 3.1"); needs no MPI_Init.
std::string mpi_library_version();

// Gathers every rank's bytes at rank 0 (in rank order); other ranks get an empty vector.
std::vector<std::vector<char>> mpi_gather_bytes(const std::vector<char>& mine);

class MpiBackend : public Backend {
 public:
  // The backoff of a wait, in seconds since it started (see the top of this file).
  static constexpr double kSpinS = 50e-6;
  static constexpr double kYieldS = 2e-3;
  static constexpr double kFirstSleepS = 20e-6;
  static constexpr double kMaxSleepS = 200e-6;

  MpiBackend(int num_actors, int num_replicas);
  ~MpiBackend() override;
  BackendKind kind() const override { return BackendKind::kMpi; }
  int actor() const override { return actor_; }
  int replica() const override { return replica_; }
  int num_actors() const override { return num_actors_; }
  int num_replicas() const override { return num_replicas_; }
  void post_send(int peer, int64_t key, std::vector<char> payload) override;
  int post_recv(int peer, int64_t key) override;
  bool test_recv(int handle, std::vector<char>* payload) override;
  bool wait_recv(int handle, double deadline_s, std::vector<char>* payload) override;
  void allreduce_sum(std::span<double> data, double timeout_s) override;
  void allreduce_sum_strided(std::span<double> data, int stride, double timeout_s) override;
  void barrier(double timeout_s) override;
  std::vector<std::vector<double>> alltoallv(int group_size, std::vector<std::vector<double>> send,
                                             double timeout_s) override;
  double now_s() const override;
  void abort(const std::string& why) override;
  std::string abort_reason() const override { return abort_reason_; }

 private:
  int tag_of(int64_t key) const;
  void reap_sends();
  int num_actors_, num_replicas_, actor_, replica_;
  int64_t tag_ub_ = 32767;
  MPI_Comm actor_comm_ = MPI_COMM_NULL;  // the replicas of this actor
  std::map<int, MPI_Comm> group_comms_;  // group size -> this replica's group (alltoallv)
  std::map<int, MPI_Comm> strided_comms_;  // stride -> replicas r mod stride == replica mod stride
  std::chrono::steady_clock::time_point origin_;
  std::vector<std::pair<int, int>> recvs_;  // (source rank, tag)
  struct PendingSend;
  std::list<PendingSend>* sends_;
  std::string abort_reason_;
};

}  // namespace jaxpp
