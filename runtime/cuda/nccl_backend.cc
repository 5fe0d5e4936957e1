#include "runtime/cuda/nccl_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>
#include <utility>

#include "runtime/cuda/check.h"
#include "runtime/cuda/kernels.h"

namespace jaxpp::cuda {
namespace {

constexpr int64_t kMaxMessageValues = int64_t{1} << 36;  // sanity bound on a received header
constexpr auto kPollInterval = std::chrono::microseconds(20);
constexpr int kSenderRank = 0;  // on a link communicator
constexpr int kReceiverRank = 1;

void pause() { std::this_thread::sleep_for(kPollInterval); }

// An ncclGroupStart that is always closed. end() closes it and checks ncclGroupEnd (which may
// answer ncclInProgress on non-blocking communicators); when a throw leaves the scope first, the
// destructor closes it, so the thread's group depth returns to zero and the ncclCommAbort that
// follows the failure is not queued into a group that never ends.
class NcclGroup {
 public:
  NcclGroup() { JAXPP_NCCL_CHECK(ncclGroupStart()); }
  ~NcclGroup() {
    if (!open_) return;
    ncclResult_t r = ncclGroupEnd();
    if (r != ncclSuccess && r != ncclInProgress)
      warn(__FILE__, __LINE__, "ncclGroupEnd() while unwinding", ncclGetErrorString(r));
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void end() {
    open_ = false;
    JAXPP_NCCL_CHECK_NONBLOCKING(ncclGroupEnd());
  }

 private:
  bool open_ = true;
};

}  // namespace

std::vector<NcclId> make_nccl_ids(size_t count) {
  std::vector<NcclId> ids(count);
  for (NcclId& id : ids) {
    ncclUniqueId unique;
    JAXPP_NCCL_CHECK(ncclGetUniqueId(&unique));
    std::memcpy(id.data(), &unique, sizeof unique);
  }
  return ids;
}

NcclBackend::NcclBackend(Backend& control, CudaDevice& device, const CommPlan& plan,
                         const std::vector<NcclId>& ids, double timeout_s)
    : control_(control), device_(device), plan_(plan), timeout_s_(timeout_s) {
  if (ids.size() != plan.comms.size())
    throw std::logic_error("NcclBackend: " + std::to_string(ids.size()) + " ids for " +
                           std::to_string(plan.comms.size()) + " communicators");
  try {
    create_communicators(ids);
    connect_links();
  } catch (...) {
    abort_communicators();
    release_resources();
    throw;
  }
}

void NcclBackend::create_communicators(const std::vector<NcclId>& ids) {
  int me = plan_.worker(actor(), replica());
  std::vector<int> mine = plan_.comms_of(me);
  comms_.resize(mine.size());
  // Streams, header slots and events first: no allocation once an NCCL call was made.
  for (size_t i = 0; i < mine.size(); ++i) {
    comms_[i].plan_index = mine[i];
    const CommSpec& spec = plan_.comms[mine[i]];
    if (spec.kind == CommSpec::Kind::kReplicas) {
      replica_comm_ = static_cast<int>(i);
      JAXPP_CUDA_CHECK(cudaStreamCreateWithFlags(&allreduce_stream_, cudaStreamNonBlocking));
      JAXPP_CUDA_CHECK(cudaEventCreateWithFlags(&allreduce_done_, cudaEventDisableTiming));
      continue;
    }
    if (spec.src == actor()) {
      OutLink& link = out_links_.emplace_back();
      link.comm = static_cast<int>(i);
      link.peer = spec.dst;
      JAXPP_CUDA_CHECK(cudaStreamCreateWithFlags(&link.stream, cudaStreamNonBlocking));
      JAXPP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&link.header), sizeof(LinkHeader)));
    } else {
      InLink& link = in_links_.emplace_back();
      link.comm = static_cast<int>(i);
      link.peer = spec.src;
      JAXPP_CUDA_CHECK(cudaStreamCreateWithFlags(&link.stream, cudaStreamNonBlocking));
      JAXPP_CUDA_CHECK(
          cudaMalloc(reinterpret_cast<void**>(&link.header_device), sizeof(LinkHeader)));
      JAXPP_CUDA_CHECK(
          cudaMallocHost(reinterpret_cast<void**>(&link.header_host), sizeof(LinkHeader)));
      JAXPP_CUDA_CHECK(cudaEventCreateWithFlags(&link.header_arrived, cudaEventDisableTiming));
    }
  }
  // Kept alive until ncclGroupEnd, which may still read them.
  std::vector<ncclUniqueId> unique_ids(mine.size());
  std::vector<ncclConfig_t> configs(mine.size(), ncclConfig_t(NCCL_CONFIG_INITIALIZER));
  NcclGroup group;
  for (size_t i = 0; i < mine.size(); ++i) {
    const CommSpec& spec = plan_.comms[mine[i]];
    int rank = static_cast<int>(std::find(spec.workers.begin(), spec.workers.end(), me) -
                                spec.workers.begin());
    std::memcpy(&unique_ids[i], ids[mine[i]].data(), sizeof(ncclUniqueId));
    configs[i].blocking = 0;  // initialisation and every later call may answer ncclInProgress
    JAXPP_NCCL_CHECK_NONBLOCKING(ncclCommInitRankConfig(
        &comms_[i].comm, static_cast<int>(spec.workers.size()), unique_ids[i], rank, &configs[i]));
  }
  group.end();
  std::vector<ncclComm_t> all;
  for (const Comm& c : comms_) all.push_back(c.comm);
  wait_ready(all, "creating the NCCL communicators");
}

// One byte over every link and one value over the replica communicator, in one group: the
// connections are made now, within the timeout, not by the first message.
void NcclBackend::connect_links() {
  connect_scratch_ = device_.zeros(1);
  DeviceArray& scratch = connect_scratch_;
  std::vector<cudaStream_t> streams;
  if (replica_comm_ >= 0)
    device_.order_before(allreduce_stream_);  // `scratch` was zeroed on the compute stream
  NcclGroup group;
  for (OutLink& link : out_links_) {
    JAXPP_NCCL_CHECK_NONBLOCKING(
        ncclSend(link.header, 1, ncclUint8, kReceiverRank, comms_[link.comm].comm, link.stream));
    streams.push_back(link.stream);
  }
  for (InLink& link : in_links_) {
    JAXPP_NCCL_CHECK_NONBLOCKING(ncclRecv(link.header_device, 1, ncclUint8, kSenderRank,
                                          comms_[link.comm].comm, link.stream));
    streams.push_back(link.stream);
  }
  if (replica_comm_ >= 0) {
    JAXPP_NCCL_CHECK_NONBLOCKING(ncclAllReduce(scratch.data(), scratch.data(), 1, ncclFloat64,
                                               ncclSum, comms_[replica_comm_].comm,
                                               allreduce_stream_));
    streams.push_back(allreduce_stream_);
  }
  group.end();
  std::vector<ncclComm_t> all;
  for (const Comm& c : comms_) all.push_back(c.comm);
  wait_ready(all, "connecting the NCCL links");

  std::vector<cudaEvent_t> done;
  for (cudaStream_t s : streams) {
    done.push_back(take_event());
    JAXPP_CUDA_CHECK(cudaEventRecord(done.back(), s));
  }
  double deadline = now_s() + timeout_s_;
  for (cudaEvent_t e : done) {
    while (!event_done(e)) {
      check_async_errors();
      if (!abort_reason().empty())
        throw RuntimeFailure("stopped because another worker failed: " + abort_reason());
      if (now_s() > deadline)
        throw RuntimeFailure("connecting the NCCL links: timed out after " +
                             seconds_text(timeout_s_) + " s (a peer did not connect)");
      pause();
    }
    give_event(e);
  }
}

void NcclBackend::wait_ready(const std::vector<ncclComm_t>& comms, const std::string& what) {
  double deadline = now_s() + timeout_s_;
  while (true) {
    bool pending = false;
    for (ncclComm_t c : comms) {
      ncclResult_t state = ncclSuccess;
      JAXPP_NCCL_CHECK(ncclCommGetAsyncError(c, &state));
      if (state == ncclInProgress) {
        pending = true;
      } else if (state != ncclSuccess) {
        fail(__FILE__, __LINE__, what.c_str(),
             std::string(ncclGetErrorString(state)) + " (" + ncclGetLastError(c) + ")");
      }
    }
    if (!pending) return;
    if (!abort_reason().empty())
      throw RuntimeFailure("stopped because another worker failed: " + abort_reason());
    if (now_s() > deadline)
      throw RuntimeFailure(what + ": timed out after " + seconds_text(timeout_s_) +
                           " s (a peer did not join or is stuck)");
    pause();
  }
}

void NcclBackend::check_async_errors() {
  for (size_t i = 0; i < comms_.size(); ++i) {
    if (comms_[i].comm == nullptr) continue;
    ncclResult_t state = ncclSuccess;
    JAXPP_NCCL_CHECK(ncclCommGetAsyncError(comms_[i].comm, &state));
    if (state != ncclSuccess && state != ncclInProgress)
      fail(__FILE__, __LINE__, ("NCCL " + comm_name(static_cast<int>(i))).c_str(),
           std::string(ncclGetErrorString(state)) + " (" + ncclGetLastError(comms_[i].comm) + ")");
  }
}

std::string NcclBackend::comm_name(int comm) const {
  return plan_.comms[comms_[comm].plan_index].name();
}

bool NcclBackend::event_done(cudaEvent_t event) {
  cudaError_t r = cudaEventQuery(event);
  if (r == cudaErrorNotReady) return false;
  JAXPP_CUDA_CHECK(r);
  return true;
}

cudaEvent_t NcclBackend::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  JAXPP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void NcclBackend::give_event(cudaEvent_t event) { free_events_.push_back(event); }

NcclBackend::OutLink& NcclBackend::out_link(int peer) {
  for (OutLink& link : out_links_)
    if (link.peer == peer) return link;
  throw std::logic_error("NcclBackend: actor " + std::to_string(actor()) +
                         " has no link to actor " + std::to_string(peer));
}

NcclBackend::InLink& NcclBackend::in_link(int peer, int* index) {
  for (size_t i = 0; i < in_links_.size(); ++i) {
    if (in_links_[i].peer != peer) continue;
    *index = static_cast<int>(i);
    return in_links_[i];
  }
  throw std::logic_error("NcclBackend: actor " + std::to_string(actor()) +
                         " has no link from actor " + std::to_string(peer));
}

// ---- byte-level plane: the control backend ----

void NcclBackend::post_send(int peer, int64_t key, std::vector<char> payload) {
  control_.post_send(peer, key, std::move(payload));
}
int NcclBackend::post_recv(int peer, int64_t key) { return control_.post_recv(peer, key); }
bool NcclBackend::test_recv(int handle, std::vector<char>* payload) {
  return control_.test_recv(handle, payload);
}
bool NcclBackend::wait_recv(int handle, double deadline_s, std::vector<char>* payload) {
  return control_.wait_recv(handle, deadline_s, payload);
}
void NcclBackend::allreduce_sum(std::span<double> data, double timeout_s) {
  control_.allreduce_sum(data, timeout_s);
}
void NcclBackend::allreduce_sum_strided(std::span<double> data, int stride, double timeout_s) {
  control_.allreduce_sum_strided(data, stride, timeout_s);
}
void NcclBackend::barrier(double timeout_s) {
  progress();
  control_.barrier(timeout_s);
}

// ---- tensor plane: NCCL ----

void NcclBackend::send_message(int peer, int64_t key, Message message) {
  OutLink& link = out_link(peer);
  ncclComm_t comm = comms_[link.comm].comm;
  DeviceArray data = std::move(message.data);
  if (data.on_host() && !data.empty())
    data = device_.upload(std::span<const double>(data.data(), data.size()));
  if (!data.on_host() && data.device() != &device_)
    throw std::logic_error("NcclBackend::send_message: tensor of another device");
  LinkHeader header{message.ready_at_s, key, static_cast<int64_t>(data.size())};
  device_.order_before(link.stream);  // the tensor was produced on the compute stream
  launch_write_link_header(link.header, header, link.stream);
  // Header and payload in one group: one enqueue (one NCCL progress thread on a non-blocking
  // communicator) and one readiness wait per message instead of two.
  NcclGroup group;
  JAXPP_NCCL_CHECK_NONBLOCKING(
      ncclSend(link.header, sizeof(LinkHeader), ncclUint8, kReceiverRank, comm, link.stream));
  if (!data.empty())
    JAXPP_NCCL_CHECK_NONBLOCKING(
        ncclSend(data.data(), data.size(), ncclFloat64, kReceiverRank, comm, link.stream));
  group.end();
  wait_ready({comm}, "sending key " + std::to_string(key) + " to actor " + std::to_string(peer));
  Send send;
  send.key = key;
  send.data = std::move(data);
  send.done = take_event();
  JAXPP_CUDA_CHECK(cudaEventRecord(send.done, link.stream));
  link.in_flight.push_back(std::move(send));
  progress();
}

int NcclBackend::post_message_recv(int peer, int64_t key) {
  int index = -1;
  InLink& link = in_link(peer, &index);
  Recv recv;
  recv.link = index;
  recv.key = key;
  // Handles are slots, reused once their message was taken: recvs_ holds at most the receives
  // outstanding at once, not every receive of the run.
  int handle = -1;
  if (free_recvs_.empty()) {
    recvs_.push_back(std::move(recv));
    handle = static_cast<int>(recvs_.size()) - 1;
  } else {
    handle = free_recvs_.back();
    free_recvs_.pop_back();
    recvs_[handle] = std::move(recv);
  }
  link.queued.push_back(handle);
  progress(link);
  return handle;
}

void NcclBackend::progress() {
  for (InLink& link : in_links_) progress(link);
  reap_sends();
}

void NcclBackend::progress(InLink& link) {
  ncclComm_t comm = comms_[link.comm].comm;
  while (true) {
    if (link.header_owner >= 0) {
      if (!event_done(link.header_arrived)) return;
      Recv& recv = recvs_[link.header_owner];
      link.header_owner = -1;
      LinkHeader header = *link.header_host;
      check_link_header(header, recv.key, link.peer, kMaxMessageValues);
      recv.message.ready_at_s = header.ready_at_s;
      if (header.count == 0) {
        recv.state = RecvState::kDone;
      } else {
        recv.message.data = device_.alloc(static_cast<size_t>(header.count));
        device_.order_before(link.stream);  // the allocation is ordered on the compute stream
        JAXPP_NCCL_CHECK_NONBLOCKING(ncclRecv(recv.message.data.data(),
                                              static_cast<size_t>(header.count), ncclFloat64,
                                              kSenderRank, comm, link.stream));
        wait_ready({comm}, "receiving from actor " + std::to_string(link.peer));
        recv.done = take_event();
        JAXPP_CUDA_CHECK(cudaEventRecord(recv.done, link.stream));
        recv.state = RecvState::kPayload;
      }
    }
    if (link.queued.empty()) return;
    int next = link.queued.front();
    link.queued.pop_front();
    JAXPP_NCCL_CHECK_NONBLOCKING(ncclRecv(link.header_device, sizeof(LinkHeader), ncclUint8,
                                          kSenderRank, comm, link.stream));
    wait_ready({comm}, "receiving from actor " + std::to_string(link.peer));
    JAXPP_CUDA_CHECK(cudaMemcpyAsync(link.header_host, link.header_device, sizeof(LinkHeader),
                                     cudaMemcpyDeviceToHost, link.stream));
    JAXPP_CUDA_CHECK(cudaEventRecord(link.header_arrived, link.stream));
    link.header_owner = next;
    recvs_[next].state = RecvState::kHeader;
  }
}

void NcclBackend::reap_sends() {
  for (OutLink& link : out_links_) {
    while (!link.in_flight.empty() && event_done(link.in_flight.front().done)) {
      give_event(link.in_flight.front().done);
      link.in_flight.pop_front();  // frees the tensor on the compute stream; its send is over
    }
  }
}

bool NcclBackend::test_message(int handle, Message* message) {
  progress();
  Recv& recv = recvs_.at(handle);
  if (recv.state == RecvState::kTaken)
    throw std::logic_error("NcclBackend::test_message: handle " + std::to_string(handle) +
                           " was already taken");
  if (recv.state == RecvState::kPayload && event_done(recv.done)) {
    give_event(recv.done);
    recv.done = nullptr;
    recv.state = RecvState::kDone;
  }
  if (recv.state != RecvState::kDone) return false;
  *message = std::move(recv.message);
  recv.state = RecvState::kTaken;
  free_recvs_.push_back(handle);
  return true;
}

bool NcclBackend::wait_message(int handle, double deadline_s, Message* message) {
  while (true) {
    if (test_message(handle, message)) return true;
    if (!abort_reason().empty()) return false;
    check_async_errors();
    if (now_s() > deadline_s) return false;
    pause();
  }
}

void NcclBackend::allreduce_tensor(DeviceArray& data, double timeout_s) {
  if (data.on_host()) {
    control_.allreduce_sum(std::span<double>(data.data(), data.size()), timeout_s);
    return;
  }
  if (replica_comm_ < 0 || data.empty()) return;  // dp == 1: nothing to reduce
  if (data.device() != &device_)
    throw std::logic_error("NcclBackend::allreduce_tensor: tensor of another device");
  ncclComm_t comm = comms_[replica_comm_].comm;
  device_.order_before(allreduce_stream_);  // the gradients were accumulated on the compute stream
  JAXPP_NCCL_CHECK_NONBLOCKING(ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat64,
                                             ncclSum, comm, allreduce_stream_));
  wait_ready({comm}, "allreduce");
  JAXPP_CUDA_CHECK(cudaEventRecord(allreduce_done_, allreduce_stream_));
  double deadline = now_s() + timeout_s;
  while (!event_done(allreduce_done_)) {
    progress();
    if (!abort_reason().empty())
      throw RuntimeFailure("stopped because another worker failed: " + abort_reason());
    check_async_errors();
    if (now_s() > deadline)
      throw RuntimeFailure("allreduce: timed out after " + seconds_text(timeout_s) +
                           " s waiting for the other replicas");
    pause();
  }
}

void NcclBackend::wait_allreduce_stream(const std::string& what, double deadline_s,
                                        double timeout_s) {
  JAXPP_CUDA_CHECK(cudaEventRecord(allreduce_done_, allreduce_stream_));
  while (!event_done(allreduce_done_)) {
    progress();
    if (!abort_reason().empty())
      throw RuntimeFailure("stopped because another worker failed: " + abort_reason());
    check_async_errors();
    if (now_s() > deadline_s)
      throw RuntimeFailure(what + ": timed out after " + seconds_text(timeout_s) +
                           " s waiting for the other replicas of the group");
    pause();
  }
}

// The all-to-all of the MoE dispatch and combine over the replica communicator (rank = replica),
// on the all-reduce stream. ncclRecv must name the count its peer sends, so the counts travel
// first: one grouped ncclSend/ncclRecv of one fp64 count per peer, then one group of the
// payloads (a pair with nothing to move posts no call). Calls to one peer within a group run in
// order and calls to different peers progress independently (NCCL's point-to-point semantics), so
// every member posting its sends and receives in one group cannot deadlock. The block to itself
// is copied on the host.
std::vector<std::vector<double>> NcclBackend::alltoallv(int group_size,
                                                        std::vector<std::vector<double>> send,
                                                        double timeout_s) {
  const int replicas = num_replicas();
  if (group_size < 1 || replicas % group_size != 0 ||
      send.size() != static_cast<size_t>(group_size))
    throw std::logic_error("NcclBackend::alltoallv: group size " + std::to_string(group_size) +
                           " with " + std::to_string(send.size()) + " send buffers over " +
                           std::to_string(replicas) + " replicas");
  const int first = replica() / group_size * group_size;
  const int me = replica() - first;
  std::vector<std::vector<double>> recv(group_size);
  recv[me] = std::move(send[me]);
  if (group_size == 1) return recv;
  if (replica_comm_ < 0) throw std::logic_error("NcclBackend::alltoallv: no replica communicator");
  ncclComm_t comm = comms_[replica_comm_].comm;
  const double deadline_s = now_s() + timeout_s;

  std::vector<double> counts(group_size, 0.0);
  for (int i = 0; i < group_size; ++i) counts[i] = static_cast<double>(send[i].size());
  DeviceArray send_counts = device_.upload(counts);
  DeviceArray recv_counts = device_.zeros(static_cast<size_t>(group_size));
  device_.order_before(allreduce_stream_);
  {
    NcclGroup group;
    for (int i = 0; i < group_size; ++i) {
      if (i == me) continue;
      JAXPP_NCCL_CHECK_NONBLOCKING(
          ncclSend(send_counts.data() + i, 1, ncclFloat64, first + i, comm, allreduce_stream_));
      JAXPP_NCCL_CHECK_NONBLOCKING(
          ncclRecv(recv_counts.data() + i, 1, ncclFloat64, first + i, comm, allreduce_stream_));
    }
    group.end();
  }
  wait_ready({comm}, "alltoall");
  wait_allreduce_stream("alltoall (counts)", deadline_s, timeout_s);
  const std::vector<double> incoming = device_.download(recv_counts);

  std::vector<double> flat;
  std::vector<size_t> send_at(group_size, 0), recv_at(group_size, 0);
  for (int i = 0; i < group_size; ++i) {
    send_at[i] = flat.size();
    if (i != me) flat.insert(flat.end(), send[i].begin(), send[i].end());
  }
  size_t total = 0;
  for (int i = 0; i < group_size; ++i) {
    recv_at[i] = total;
    if (i != me) total += static_cast<size_t>(incoming[i]);
  }
  DeviceArray send_data = device_.upload(flat);
  DeviceArray recv_data = device_.zeros(total);
  device_.order_before(allreduce_stream_);
  {
    NcclGroup group;
    for (int i = 0; i < group_size; ++i) {
      if (i == me) continue;
      if (!send[i].empty())
        JAXPP_NCCL_CHECK_NONBLOCKING(ncclSend(send_data.data() + send_at[i], send[i].size(),
                                              ncclFloat64, first + i, comm, allreduce_stream_));
      if (incoming[i] > 0)
        JAXPP_NCCL_CHECK_NONBLOCKING(ncclRecv(recv_data.data() + recv_at[i],
                                              static_cast<size_t>(incoming[i]), ncclFloat64,
                                              first + i, comm, allreduce_stream_));
    }
    group.end();
  }
  wait_ready({comm}, "alltoall");
  wait_allreduce_stream("alltoall (payload)", deadline_s, timeout_s);
  const std::vector<double> got = device_.download(recv_data);
  for (int i = 0; i < group_size; ++i)
    if (i != me)
      recv[i].assign(got.begin() + static_cast<std::ptrdiff_t>(recv_at[i]),
                     got.begin() + static_cast<std::ptrdiff_t>(recv_at[i] + incoming[i]));
  return recv;
}

void NcclBackend::abort(const std::string& why) {
  control_.abort(why);
  abort_communicators();
}

void NcclBackend::abort_communicators() {
  if (aborted_) return;
  aborted_ = true;
  for (Comm& c : comms_) {
    if (c.comm != nullptr) JAXPP_NCCL_CHECK_NOTHROW(ncclCommAbort(c.comm));
    c.comm = nullptr;
  }
}

NcclBackend::~NcclBackend() {
  // Unwinding from a failure of this worker, or another worker failed: no finalize handshake.
  bool clean = !aborted_ && abort_reason().empty() && std::uncaught_exceptions() == 0;
  for (const Recv& r : recvs_)
    if (r.state != RecvState::kTaken) clean = false;
  if (clean) {
    try {
      double deadline = now_s() + timeout_s_;
      auto sends_pending = [&] {
        for (const OutLink& link : out_links_)
          if (!link.in_flight.empty()) return true;
        return false;
      };
      while (sends_pending()) {
        reap_sends();
        if (now_s() > deadline) throw RuntimeFailure(pending_sends_message());
        pause();
      }
      // No kernel of this worker is left on any of its streams, and every worker got that far,
      // before any communicator is finalized or any memory freed: in one process (threads mode)
      // a worker's ncclCommDestroy or cudaFree must not overtake another worker's NCCL kernels.
      synchronize_streams();
      control_.barrier(timeout_s_);
      std::vector<ncclComm_t> all;
      for (Comm& c : comms_) {
        JAXPP_NCCL_CHECK_NONBLOCKING(ncclCommFinalize(c.comm));
        all.push_back(c.comm);
      }
      wait_ready(all, "finalizing the NCCL communicators");
      for (Comm& c : comms_) {
        JAXPP_NCCL_CHECK_NOTHROW(ncclCommDestroy(c.comm));
        c.comm = nullptr;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "jaxpp-sim run: warning: %s; aborting the NCCL communicators\n",
                   e.what());
      clean = false;
    }
  }
  if (!clean) abort_communicators();
  release_resources();
}

std::string NcclBackend::pending_sends_message() const {
  for (const OutLink& link : out_links_) {
    if (link.in_flight.empty()) continue;
    const Send& oldest = link.in_flight.front();
    return "the send of key " + std::to_string(oldest.key) + " to actor " +
           std::to_string(link.peer) + " (" + std::to_string(link.in_flight.size()) +
           " sends on that link) did not complete within " + seconds_text(timeout_s_) +
           " s after the run (the receiver never took it)";
  }
  return "no send pending";
}

void NcclBackend::synchronize_streams() {
  device_.synchronize();
  for (const OutLink& link : out_links_) JAXPP_CUDA_CHECK(cudaStreamSynchronize(link.stream));
  for (const InLink& link : in_links_) JAXPP_CUDA_CHECK(cudaStreamSynchronize(link.stream));
  if (allreduce_stream_ != nullptr) JAXPP_CUDA_CHECK(cudaStreamSynchronize(allreduce_stream_));
}

// After the communicators are finalized or aborted no NCCL kernel can hold a stream any more.
// A link whose creation failed half-way has null members, which are skipped.
void NcclBackend::release_resources() {
  for (OutLink& link : out_links_)
    if (link.stream != nullptr) JAXPP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(link.stream));
  for (InLink& link : in_links_)
    if (link.stream != nullptr) JAXPP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(link.stream));
  if (allreduce_stream_ != nullptr)
    JAXPP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(allreduce_stream_));
  connect_scratch_.reset();
  for (OutLink& link : out_links_) {
    for (Send& s : link.in_flight) JAXPP_CUDA_CHECK_NOTHROW(cudaEventDestroy(s.done));
    link.in_flight.clear();
    JAXPP_CUDA_CHECK_NOTHROW(cudaFree(link.header));
    if (link.stream != nullptr) JAXPP_CUDA_CHECK_NOTHROW(cudaStreamDestroy(link.stream));
  }
  out_links_.clear();
  for (InLink& link : in_links_) {
    JAXPP_CUDA_CHECK_NOTHROW(cudaFree(link.header_device));
    JAXPP_CUDA_CHECK_NOTHROW(cudaFreeHost(link.header_host));
    if (link.header_arrived != nullptr)
      JAXPP_CUDA_CHECK_NOTHROW(cudaEventDestroy(link.header_arrived));
    if (link.stream != nullptr) JAXPP_CUDA_CHECK_NOTHROW(cudaStreamDestroy(link.stream));
  }
  in_links_.clear();
  for (Recv& r : recvs_)
    if (r.done != nullptr) JAXPP_CUDA_CHECK_NOTHROW(cudaEventDestroy(r.done));
  recvs_.clear();
  free_recvs_.clear();
  for (cudaEvent_t e : free_events_) JAXPP_CUDA_CHECK_NOTHROW(cudaEventDestroy(e));
  free_events_.clear();
  if (allreduce_done_ != nullptr) JAXPP_CUDA_CHECK_NOTHROW(cudaEventDestroy(allreduce_done_));
  if (allreduce_stream_ != nullptr) JAXPP_CUDA_CHECK_NOTHROW(cudaStreamDestroy(allreduce_stream_));
  allreduce_done_ = nullptr;
  allreduce_stream_ = nullptr;
}

}  // namespace jaxpp::cuda
