#include "runtime/mpi_backend.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "graph/error.h"

namespace jaxpp {

struct MpiBackend::PendingSend {
  MPI_Request request;
  std::vector<char> payload;
};

namespace {

// Paces the polls of one wait (see mpi_backend.h): spins for kSpinS, then yields the CPU between
// polls until kYieldS, then sleeps, kFirstSleepS first and twice as long each time after, at most
// kMaxSleepS.
class WaitBackoff {
 public:
  explicit WaitBackoff(const MpiBackend& b) : backend_(b), start_s_(b.now_s()) {}
  // Called after a poll that found nothing.
  void pause() {
    const double waited_s = backend_.now_s() - start_s_;
    if (waited_s < MpiBackend::kSpinS) return;
    if (waited_s < MpiBackend::kYieldS) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s_));
    sleep_s_ = std::min(2 * sleep_s_, MpiBackend::kMaxSleepS);
  }

 private:
  const MpiBackend& backend_;
  double start_s_;
  double sleep_s_ = MpiBackend::kFirstSleepS;
};

// Polls `request` until done or the deadline; false on timeout.
bool poll_until(MPI_Request* request, const MpiBackend& b, double deadline_s) {
  WaitBackoff backoff(b);
  while (true) {
    int flag = 0;
    MPI_Test(request, &flag, MPI_STATUS_IGNORE);
    if (flag) return true;
    if (b.now_s() > deadline_s) return false;
    backoff.pause();
  }
}
}  // namespace

MpiSession& MpiSession::get() {
  static MpiSession session;
  return session;
}

MpiSession::MpiSession() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string mpi_library_version() {
#if defined(OMPI_MAJOR_VERSION)
  return "Open MPI " + std::to_string(OMPI_MAJOR_VERSION) + "." +
         std::to_string(OMPI_MINOR_VERSION) + "." + std::to_string(OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
  return std::string("MPICH ") + MPICH_VERSION;
#else
  return "MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION);
#endif
}

void mpi_abort(const std::string& message, int code) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::vector<std::vector<char>> mpi_gather_bytes(const std::vector<char>& mine) {
  MpiSession& s = MpiSession::get();
  int n = static_cast<int>(mine.size());
  std::vector<int> sizes(s.size());
  MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> displs(s.size(), 0);
  int total = 0;
  for (int r = 0; r < s.size(); ++r) {
    displs[r] = total;
    total += sizes[r];
  }
  std::vector<char> all(s.rank() == 0 ? total : 0);
  MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), sizes.data(), displs.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  std::vector<std::vector<char>> out;
  if (s.rank() != 0) return out;
  for (int r = 0; r < s.size(); ++r)
    out.emplace_back(all.begin() + displs[r], all.begin() + displs[r] + sizes[r]);
  return out;
}

MpiBackend::MpiBackend(int num_actors, int num_replicas)
    : num_actors_(num_actors), num_replicas_(num_replicas) {
  MpiSession& s = MpiSession::get();
  if (s.size() != num_actors * num_replicas)
    throw InputError("--backend mpi: the program needs " + std::to_string(num_actors) +
                     " actors x " + std::to_string(num_replicas) +
                     " replicas = " + std::to_string(num_actors * num_replicas) +
                     " processes, but mpirun started " + std::to_string(s.size()));
  sends_ = new std::list<PendingSend>;  // after the check: no destructor runs when it throws
  actor_ = s.rank() % num_actors;
  replica_ = s.rank() / num_actors;
  void* attr = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &flag);
  if (flag && attr) tag_ub_ = *static_cast<int*>(attr);
  MPI_Comm_split(MPI_COMM_WORLD, actor_, replica_, &actor_comm_);
  int64_t origin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  MPI_Bcast(&origin_ns, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  origin_ = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(origin_ns));
}

MpiBackend::~MpiBackend() {
  reap_sends();
  for (auto& s : *sends_) MPI_Wait(&s.request, MPI_STATUS_IGNORE);
  delete sends_;
  for (auto& [size, comm] : group_comms_) MPI_Comm_free(&comm);
  for (auto& [stride, comm] : strided_comms_) MPI_Comm_free(&comm);
  MPI_Comm_free(&actor_comm_);
}

int MpiBackend::tag_of(int64_t key) const { return static_cast<int>(key % (tag_ub_ + 1)); }

void MpiBackend::reap_sends() {
  for (auto it = sends_->begin(); it != sends_->end();) {
    int flag = 0;
    MPI_Test(&it->request, &flag, MPI_STATUS_IGNORE);
    it = flag ? sends_->erase(it) : std::next(it);
  }
}

void MpiBackend::post_send(int peer, int64_t key, std::vector<char> payload) {
  reap_sends();
  sends_->push_back({MPI_REQUEST_NULL, std::move(payload)});
  PendingSend& s = sends_->back();
  MPI_Isend(s.payload.data(), static_cast<int>(s.payload.size()), MPI_CHAR,
            replica_ * num_actors_ + peer, tag_of(key), MPI_COMM_WORLD, &s.request);
}

int MpiBackend::post_recv(int peer, int64_t key) {
  recvs_.push_back({replica_ * num_actors_ + peer, tag_of(key)});
  return static_cast<int>(recvs_.size()) - 1;
}

bool MpiBackend::test_recv(int handle, std::vector<char>* payload) {
  auto [source, tag] = recvs_.at(handle);
  int flag = 0;
  MPI_Status status;
  MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &status);
  if (!flag) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_CHAR, &count);
  payload->resize(count);
  MPI_Recv(payload->data(), count, MPI_CHAR, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return true;
}

bool MpiBackend::wait_recv(int handle, double deadline_s, std::vector<char>* payload) {
  WaitBackoff backoff(*this);
  while (true) {
    reap_sends();
    if (test_recv(handle, payload)) return true;
    if (now_s() > deadline_s) return false;
    backoff.pause();
  }
}

void MpiBackend::allreduce_sum(std::span<double> data, double timeout_s) {
  MPI_Request req;
  MPI_Iallreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_DOUBLE, MPI_SUM,
                 actor_comm_, &req);
  if (!poll_until(&req, *this, now_s() + timeout_s))
    throw RuntimeFailure("allreduce: timed out after " + seconds_text(timeout_s) +
                         " s waiting for the other replicas");
}

void MpiBackend::allreduce_sum_strided(std::span<double> data, int stride, double timeout_s) {
  if (stride == 1) return allreduce_sum(data, timeout_s);
  if (stride < 1 || num_replicas_ % stride != 0)
    throw std::logic_error("allreduce_sum_strided: stride " + std::to_string(stride) +
                           " does not divide the " + std::to_string(num_replicas_) + " replicas");
  auto [it, fresh] = strided_comms_.try_emplace(stride, MPI_COMM_NULL);
  if (fresh) MPI_Comm_split(actor_comm_, replica_ % stride, replica_, &it->second);
  MPI_Request req;
  MPI_Iallreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_DOUBLE, MPI_SUM,
                 it->second, &req);
  if (!poll_until(&req, *this, now_s() + timeout_s))
    throw RuntimeFailure("allreduce: timed out after " + seconds_text(timeout_s) +
                         " s waiting for the other replicas of the group");
}

void MpiBackend::barrier(double timeout_s) {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  if (!poll_until(&req, *this, now_s() + timeout_s))
    throw RuntimeFailure("barrier: timed out after " + seconds_text(timeout_s) +
                         " s waiting for the other ranks");
}

std::vector<std::vector<double>> MpiBackend::alltoallv(int group_size,
                                                       std::vector<std::vector<double>> send,
                                                       double timeout_s) {
  if (group_size < 1 || num_replicas_ % group_size != 0 ||
      send.size() != static_cast<size_t>(group_size))
    throw std::logic_error("alltoallv: group size " + std::to_string(group_size) + " with " +
                           std::to_string(send.size()) + " send buffers over " +
                           std::to_string(num_replicas_) + " replicas");
  auto [it, fresh] = group_comms_.try_emplace(group_size, MPI_COMM_NULL);
  if (fresh) MPI_Comm_split(actor_comm_, replica_ / group_size, replica_, &it->second);
  const MPI_Comm comm = it->second;
  const double deadline_s = now_s() + timeout_s;
  std::vector<int> send_counts(group_size), recv_counts(group_size);
  for (int i = 0; i < group_size; ++i) send_counts[i] = static_cast<int>(send[i].size());
  MPI_Request req;
  MPI_Ialltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm, &req);
  if (!poll_until(&req, *this, deadline_s))
    throw RuntimeFailure("alltoall: timed out after " + seconds_text(timeout_s) +
                         " s waiting for the other replicas of the group (counts)");
  std::vector<int> send_displs(group_size, 0), recv_displs(group_size, 0);
  std::vector<double> send_flat, recv_flat;
  for (int i = 0; i < group_size; ++i) {
    send_displs[i] = static_cast<int>(send_flat.size());
    send_flat.insert(send_flat.end(), send[i].begin(), send[i].end());
  }
  int total = 0;
  for (int i = 0; i < group_size; ++i) {
    recv_displs[i] = total;
    total += recv_counts[i];
  }
  recv_flat.resize(static_cast<size_t>(total));
  MPI_Ialltoallv(send_flat.data(), send_counts.data(), send_displs.data(), MPI_DOUBLE,
                 recv_flat.data(), recv_counts.data(), recv_displs.data(), MPI_DOUBLE, comm, &req);
  if (!poll_until(&req, *this, deadline_s))
    throw RuntimeFailure("alltoall: timed out after " + seconds_text(timeout_s) +
                         " s waiting for the other replicas of the group (payload)");
  std::vector<std::vector<double>> recv(group_size);
  for (int i = 0; i < group_size; ++i)
    recv[i].assign(recv_flat.begin() + recv_displs[i],
                   recv_flat.begin() + recv_displs[i] + recv_counts[i]);
  return recv;
}

double MpiBackend::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
}

void MpiBackend::abort(const std::string& why) {
  if (abort_reason_.empty()) abort_reason_ = why;
}

}  // namespace jaxpp
