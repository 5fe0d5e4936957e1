// NcclBackend: the cuda Backend of one worker (actor, replica). Tensors stay in GPU memory and
// move with NCCL; everything else is delegated to a host `control` backend (an MpiBackend under
// mpirun, a ThreadsBackend when one process drives several GPUs):
//   send_message / post_message_recv / test_message / wait_message   NCCL, one link per direction
//   allreduce_tensor of GPU memory                                   ncclAllReduce (sum, fp64)
//   alltoallv (host buffers, staged through GPU memory)              grouped ncclSend/ncclRecv
//   byte-level calls, host all-reduces, barrier, clock, abort        control
//
// Communicators and streams (runtime/comm_plan.h): one 2-rank communicator per directed link the
// program sends on, each with its own CUDA stream on both ends (the program's send stream and
// recv stream per peer), plus one communicator over the replicas of this actor with its own
// stream for the all-reduce. Streams, header slots and events are allocated first; then the
// communicators are created non-blocking (ncclConfig_t::blocking = 0) inside one
// ncclGroupStart/End, polled until ready within `timeout_s`, and every link is connected by a
// one-byte exchange, so later calls do not wait for a peer on the host. Every group is an
// NcclGroup scope (nccl_backend.cc), closed even when a call inside it throws.
//
// A message on a link is a LinkHeader (ready time, key, count) followed by `count` fp64 values.
// The sender writes the header with a one-thread kernel into the link's device header slot,
// then posts ncclSend(header) and ncclSend(payload) in one group on the link stream, after
// waiting for the compute stream (the payload was produced there). The receiver posts
// ncclRecv(header) when the receive is posted and copies it to pinned host memory; when the host
// sees it (event), it checks the key (a dropped or reordered message is an error), allocates the
// payload and posts ncclRecv(payload): the receiver cannot group the two, as the payload's size
// is in the header (and grouping a payload with the next header would hold the payload until the
// next message arrives). Receives of one link
// are served in posting order, which is the order of the sends (check_program). Progress is made
// whenever the executor calls into the backend.
//
// Buffer lifetimes: a sent tensor is kept until the host has seen its ncclSend complete; a
// received tensor is allocated on the compute stream, which the link stream waits for, and
// handed to the workload only after its ncclRecv completed.
//
// Timeouts and faults: waits poll CUDA events against the deadline, the control backend's abort
// flag and ncclCommGetAsyncError of every communicator. A wait that expires returns false or
// throws RuntimeFailure (the executor adds the actor and instruction, sends included); an NCCL
// error throws CudaError. abort() and a destructor that finds unfinished work or a failed run
// call ncclCommAbort on every communicator. A clean run waits for its sends, synchronizes all its
// streams, meets every other worker at a control-plane barrier, and only then finalizes
// (ncclCommFinalize, polled), destroys the communicators and frees memory.
//
// `ids` holds one ncclUniqueId per communicator of `plan` (make_nccl_ids, runtime/cuda/cuda_run.h),
// the same bytes on every worker.
// Threading: construct, use and destroy on the thread that owns `device`.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "runtime/backend.h"
#include "runtime/comm_plan.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_run.h"

namespace jaxpp::cuda {

class NcclBackend : public Backend {
 public:
  NcclBackend(Backend& control, CudaDevice& device, const CommPlan& plan,
              const std::vector<NcclId>& ids, double timeout_s);
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  BackendKind kind() const override { return BackendKind::kCuda; }
  int actor() const override { return control_.actor(); }
  int replica() const override { return control_.replica(); }
  int num_actors() const override { return control_.num_actors(); }
  int num_replicas() const override { return control_.num_replicas(); }

  void post_send(int peer, int64_t key, std::vector<char> payload) override;
  int post_recv(int peer, int64_t key) override;
  bool test_recv(int handle, std::vector<char>* payload) override;
  bool wait_recv(int handle, double deadline_s, std::vector<char>* payload) override;
  void allreduce_sum(std::span<double> data, double timeout_s) override;
  void allreduce_sum_strided(std::span<double> data, int stride, double timeout_s) override;
  void barrier(double timeout_s) override;

  void send_message(int peer, int64_t key, Message message) override;
  int post_message_recv(int peer, int64_t key) override;
  bool test_message(int handle, Message* message) override;
  bool wait_message(int handle, double deadline_s, Message* message) override;
  void allreduce_tensor(DeviceArray& data, double timeout_s) override;
  std::vector<std::vector<double>> alltoallv(int group_size, std::vector<std::vector<double>> send,
                                             double timeout_s) override;

  double now_s() const override { return control_.now_s(); }
  void abort(const std::string& why) override;
  std::string abort_reason() const override { return control_.abort_reason(); }

 private:
  struct Comm {
    int plan_index = -1;
    ncclComm_t comm = nullptr;
  };
  struct Send {
    int64_t key = 0;   // named when it never completes
    DeviceArray data;  // kept until `done`
    cudaEvent_t done = nullptr;
  };
  struct OutLink {
    int comm = -1;  // index into comms_
    int peer = -1;
    cudaStream_t stream = nullptr;
    LinkHeader* header = nullptr;  // device slot, rewritten for every message
    std::deque<Send> in_flight;
  };
  struct InLink {
    int comm = -1;
    int peer = -1;
    cudaStream_t stream = nullptr;
    LinkHeader* header_device = nullptr;
    LinkHeader* header_host = nullptr;  // pinned
    cudaEvent_t header_arrived = nullptr;
    int header_owner = -1;   // receive whose header is in flight
    std::deque<int> queued;  // receives whose header is not posted yet, in posting order
  };
  enum class RecvState { kQueued, kHeader, kPayload, kDone, kTaken };
  struct Recv {
    int link = -1;  // index into in_links_
    int64_t key = 0;
    RecvState state = RecvState::kQueued;
    Message message;
    cudaEvent_t done = nullptr;
  };

  void create_communicators(const std::vector<NcclId>& ids);
  void connect_links();
  // Polls until no communicator is ncclInProgress; CudaError on an error, RuntimeFailure naming
  // `what` after the timeout.
  void wait_ready(const std::vector<ncclComm_t>& comms, const std::string& what);
  void check_async_errors();
  // Records an event on the all-reduce stream and polls it (progress, abort, async errors) until
  // `deadline_s`; RuntimeFailure naming `what` when it passes.
  void wait_allreduce_stream(const std::string& what, double deadline_s, double timeout_s);
  void progress();
  void progress(InLink& link);
  void reap_sends();
  bool event_done(cudaEvent_t event);
  cudaEvent_t take_event();
  void give_event(cudaEvent_t event);
  OutLink& out_link(int peer);
  InLink& in_link(int peer, int* index);
  std::string comm_name(int comm) const;
  // "the send of key K to actor P ... did not complete": the oldest send still in flight.
  std::string pending_sends_message() const;
  // Waits for the compute stream and every link and all-reduce stream of this worker.
  void synchronize_streams();
  void abort_communicators();
  void release_resources();

  Backend& control_;
  CudaDevice& device_;
  const CommPlan& plan_;
  double timeout_s_;
  std::vector<Comm> comms_;
  std::deque<OutLink> out_links_;  // deques: links hold deques and never move
  std::deque<InLink> in_links_;
  int replica_comm_ = -1;  // index into comms_, -1 when dp == 1
  cudaStream_t allreduce_stream_ = nullptr;
  cudaEvent_t allreduce_done_ = nullptr;
  DeviceArray connect_scratch_;  // the value reduced by connect_links
  std::vector<Recv> recvs_;      // by handle; a taken receive's slot is reused
  std::vector<int> free_recvs_;  // handles of taken receives
  std::vector<cudaEvent_t> free_events_;
  bool aborted_ = false;
};

}  // namespace jaxpp::cuda
