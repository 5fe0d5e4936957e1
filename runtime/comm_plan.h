// CommPlan: the communicators, devices and wire header of the cuda backend, computed the same way
// by every worker from the Program alone, so it needs no coordination and is tested on the CPU.
//
// Communicators (NCCL, runtime/cuda/nccl_backend.h), in this order:
//   link      one 2-rank communicator per directed pair (src -> dst) that the program sends on,
//             per replica; rank 0 = the sender (src actor), rank 1 = the receiver. A link carries
//             messages in one direction only, so the k-th send matches the k-th receive
//             (check_program guarantees the same tag order on both ends) and a blocked send can
//             never wait behind a receive of the same communicator.
//   replicas  one communicator per actor over its dp replicas (rank = replica), for the gradient
//             all-reduce; none when dp == 1.
// Links are sorted by (replica, src, dst), replica groups by actor. Worker id = replica *
// num_actors + actor, as in runtime/backend.h.
//
// Devices: one process driving every worker of its host (threads) gives worker w GPU w
// (assign_device). Under an MPI launcher each process is one worker and device_of_rank decides:
// the process's local rank when it sees at least one GPU per local worker, GPU 0 when it sees
// exactly one (the launcher gave each rank its own GPU: CUDA_VISIBLE_DEVICES per rank, Slurm
// --gpus-per-task=1), otherwise a RuntimeFailure naming both counts.
//
// LinkHeader: every message on a link is a fixed 24-byte header (ready time, key, element count)
// followed by `count` fp64 values when count > 0; check_link_header rejects a header whose key is
// not the one the receiver expects (a lost or reordered message).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/program.h"
#include "runtime/link_header.h"

namespace jaxpp {

struct CommSpec {
  enum class Kind { kLink, kReplicas };
  Kind kind = Kind::kLink;
  int replica = -1;          // kLink: the replica both ends belong to
  int src = -1, dst = -1;    // kLink: sending and receiving actor
  int actor = -1;            // kReplicas: the actor whose replicas reduce together
  std::vector<int> workers;  // worker ids in communicator-rank order
  std::string name() const;  // "link 0->1 of replica 0", "replicas of actor 2"
};

struct CommPlan {
  int num_actors = 0;
  int num_replicas = 0;
  std::vector<CommSpec> comms;
  int worker(int actor, int replica) const { return replica * num_actors + actor; }
  // Indices into `comms` that `worker` belongs to, ascending.
  std::vector<int> comms_of(int worker) const;
  // Index of the link src -> dst of `replica`, or -1 when the program never sends on it.
  int link(int replica, int src, int dst) const;
  // Index of the replica communicator of `actor`, or -1 when dp == 1.
  int replica_group(int actor) const;
};

CommPlan make_comm_plan(const Program& program, int num_replicas);

// One process drives all `local_workers` workers of its host, one thread each: GPU of the worker
// with host-local index `local_rank` among `device_count` visible GPUs. RuntimeFailure "...
// N workers on this host need N GPUs, found M" when there are fewer GPUs than workers.
int assign_device(int local_rank, int local_workers, int device_count);

// One process per worker (MPI launcher): GPU of the process with host-local rank `local_rank`
// among `local_workers` processes of its host, when it sees `visible_devices` GPUs:
//   visible_devices >= local_workers   local_rank (every rank sees the host's GPUs)
//   visible_devices == 1               0 (the launcher bound this rank to its own GPU)
//   otherwise                          RuntimeFailure naming both counts and the two remedies
// Two ranks given the same single GPU are not detected here; NCCL refuses them when the
// communicators are created ("Duplicate GPU detected").
int device_of_rank(int local_rank, int local_workers, int visible_devices);

// True when an MPI launcher started this process (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK or
// MPI_LOCALNRANKS set); `get_env` defaults to std::getenv.
bool launched_by_mpi_launcher(const std::function<const char*(const char*)>& get_env = {});
// The number of processes the launcher started (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_SIZE),
// 0 when not launched by one or when it does not say.
int mpi_launcher_world_size(const std::function<const char*(const char*)>& get_env = {});

// RuntimeFailure naming the link and both keys when `header` is not message `expected_key` from
// actor `src`, or when its count is negative or above `max_count`.
void check_link_header(const LinkHeader& header, int64_t expected_key, int src, int64_t max_count);

}  // namespace jaxpp
