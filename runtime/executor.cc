#include "runtime/executor.h"

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

namespace jaxpp {
namespace {

// Sleeps until `target_s` on the backend clock (timer slack is set to 1 ns in run_worker, so the
// overshoot is the scheduler's wake-up latency).
void sleep_until_s(const Backend& backend, double target_s) {
  double now = backend.now_s();
  if (target_s > now) std::this_thread::sleep_for(std::chrono::duration<double>(target_s - now));
}

class WorkerRun {
 public:
  WorkerRun(const Program& program, Backend& backend, Workload& workload,
            const ExecutorOptions& options)
      : backend_(backend),
        workload_(workload),
        options_(options),
        actor_(backend.actor()),
        list_(program.actors.at(backend.actor())),
        key_stride_(max_tag(program) + 1) {
    std::map<StreamId, int> slot_of;
    for (int i = 0; i < static_cast<int>(list_.size()); ++i) {
      StreamId sid = stream_of(list_[i]);
      auto [it, inserted] = slot_of.emplace(sid, static_cast<int>(streams_.size()));
      if (inserted) streams_.push_back({sid, {}});
      streams_[it->second].order.push_back(i);
      if (list_[i].op == OpKind::kCompute) ++num_computes_;
      if (list_[i].op == OpKind::kAllGather) has_gathers_ = true;
    }
    record_.actor = actor_;
    record_.replica = backend.replica();
  }

  WorkerRecord run() {
    for (int step = 0; step < options_.num_steps; ++step) run_step(step);
    return std::move(record_);
  }

 private:
  struct Stream {
    StreamId id;
    std::vector<int> order;
  };

  std::string where(int i) const {
    return "actor " + std::to_string(actor_) + " (replica " + std::to_string(backend_.replica()) +
           "), step " + std::to_string(step_) + ", instruction " + std::to_string(i) + " '" +
           to_string(list_[i]) + "'";
  }

  bool deps_done(int i) const {
    for (int d : list_[i].deps)
      if (!done_[d]) return false;
    return true;
  }

  void check_abort() const {
    std::string why = backend_.abort_reason();
    if (!why.empty()) throw RuntimeFailure("stopped because another worker failed: " + why);
  }

  void maybe_kill(int i) const {
    if (step_ != 0 || actor_ != options_.kill_actor || backend_.replica() != 0 ||
        i != options_.kill_at_instruction)
      return;
    std::fprintf(stderr, "jaxpp-sim run: injected fault: %s exits now\n", where(i).c_str());
    std::fflush(stderr);
    std::_Exit(3);
  }

  void finish(int i, double start_s, double end_s) {
    done_[i] = true;
    ++num_done_;
    const Instruction& ins = list_[i];
    if (ins.op == OpKind::kCompute) ++computes_done_;
    TraceEvent e;
    e.actor = actor_;
    e.instruction = i;
    e.step = step_;
    e.op = ins.op;
    e.stream = stream_of(ins);
    e.tasks.assign(ins.tasks.begin(), ins.tasks.end());
    e.stage = ins.stage;
    e.peer = ins.peer;
    e.bytes = ins.bytes;
    e.tag = ins.tag;
    e.start_s = start_s;
    e.end_s = std::max(start_s, end_s);
    record_.events.push_back(std::move(e));
    last_end_s_ = std::max(last_end_s_, end_s);
    sample_memory(end_s);
  }

  void sample_memory(double t) {
    int64_t bytes = workload_.bytes_held();
    if (bytes == last_bytes_) return;
    last_bytes_ = bytes;
    record_.memory.push_back({actor_, t, bytes});
  }

  int64_t key(int i) const { return static_cast<int64_t>(step_) * key_stride_ + list_[i].tag; }

  void do_send(int i) {
    const Instruction& ins = list_[i];
    maybe_kill(i);
    double start = backend_.now_s();
    Message message;
    message.data = workload_.take_output(ins.tasks.at(0), step_);
    message.ready_at_s = start + workload_.emulated_s(ins);
    if (ins.tag != options_.drop_tag) {
      try {
        backend_.send_message(ins.peer, key(i), std::move(message));
      } catch (const RuntimeFailure& e) {  // a device backend may time out or fail posting it
        check_abort();
        throw RuntimeFailure(where(i) + ": " + e.what());
      }
    }
    finish(i, start, backend_.now_s());
  }

  void post_recv(int i) {
    maybe_kill(i);
    handle_[i] = backend_.post_message_recv(list_[i].peer, key(i));
    recv_start_[i] = backend_.now_s();
    pending_.push_back(i);
  }

  void complete_recv(int i, Message message) {
    sleep_until_s(backend_, message.ready_at_s);
    workload_.put_input(list_[i].tasks.at(0), step_, std::move(message.data));
    pending_.erase(std::find(pending_.begin(), pending_.end(), i));
    finish(i, recv_start_[i], backend_.now_s());
  }

  // Backend::test_message / wait_message with the instruction named in a failure they report (a
  // device backend checks what arrives).
  bool test_message(int i, Message* message) {
    try {
      return backend_.test_message(handle_[i], message);
    } catch (const RuntimeFailure& e) {
      check_abort();
      throw RuntimeFailure(where(i) + ": " + e.what());
    }
  }

  bool wait_message(int i, double deadline_s, Message* message) {
    try {
      return backend_.wait_message(handle_[i], deadline_s, message);
    } catch (const RuntimeFailure& e) {
      check_abort();
      throw RuntimeFailure(where(i) + ": " + e.what());
    }
  }

  // Non-blocking: completes every pending receive whose message is there and ready.
  bool poll_recvs() {
    bool progress = false;
    std::vector<int> snapshot = pending_;
    for (int i : snapshot) {
      Message& message = arrived_[i];
      if (!has_arrived_[i]) {
        if (!test_message(i, &message)) continue;
        has_arrived_[i] = true;
      }
      if (message.ready_at_s > backend_.now_s()) continue;
      complete_recv(i, std::move(message));
      progress = true;
    }
    return progress;
  }

  void wait_recv(int i) {
    if (!has_arrived_[i]) {
      double deadline = backend_.now_s() + options_.timeout_s;
      if (!wait_message(i, deadline, &arrived_[i])) {
        check_abort();
        throw RuntimeFailure(where(i) + ": timed out after " + seconds_text(options_.timeout_s) +
                             " s waiting for tag " + std::to_string(list_[i].tag) + " from actor " +
                             std::to_string(list_[i].peer) +
                             " (message lost, or the peer dead or still busy: if its work takes "
                             "longer, give a larger --timeout-s)");
      }
      has_arrived_[i] = true;
    }
    complete_recv(i, std::move(arrived_[i]));
  }

  void run_compute(int i) {
    const Instruction& ins = list_[i];
    maybe_kill(i);
    double start = backend_.now_s();
    if (ins.op == OpKind::kCompute) {
      for (const TaskRef& t : ins.tasks) workload_.run_task(t, step_);
    } else {
      workload_.optimizer_step(ins.stage, step_);
    }
    double emulated = workload_.emulated_s(ins);
    if (emulated > 0) {
      // Sleep-debt compensation: the wake-up overshoot of earlier emulated computes of this
      // worker is taken off this one, so the compute stream's total time tracks the model.
      double target = start + std::max(0.0, emulated - sleep_debt_s_);
      sleep_until_s(backend_, target);
      double now = backend_.now_s();
      sleep_debt_s_ = std::max(0.0, sleep_debt_s_ + (now - start) - emulated);
    }
    finish(i, start, backend_.now_s());
  }

  void run_allreduce(int i) {
    const Instruction& ins = list_[i];
    maybe_kill(i);
    double start = backend_.now_s();
    if (backend_.num_replicas() > 1) {
      try {
        if (ins.op == OpKind::kAllGather)
          workload_.gather_parameters(ins.stage, backend_, options_.timeout_s);
        else
          reduce_stage(ins.stage, /*final=*/ins.tasks.empty());
      } catch (const RuntimeFailure& e) {
        check_abort();
        throw RuntimeFailure(where(i) + ": " + e.what());
      }
    }
    sleep_until_s(backend_, start + workload_.emulated_s(ins));
    finish(i, start, backend_.now_s());
  }

  // A stage's gradient reduction. Gradient sharding (ZeRO-2) lowers one after every microbatch's
  // backward of the stage (its tasks: that backward) before the stage's final one (no tasks).
  // Each reduces what the buffer accumulated since the previous one and moves it out of the
  // buffer; the final one adds the reduced parts back, so the optimizer sees the sum one
  // reduction at the end would give (in another order of addition).
  void reduce_stage(int stage, bool final) {
    workload_.reduce_gradients(stage, backend_, options_.timeout_s);
    DeviceArray& g = workload_.grad_buffer(stage);
    Device* device = g.device();
    std::vector<double>& reduced = reduced_parts_[stage];
    if (!final) {
      std::vector<double> part = device->download(g);
      if (reduced.empty()) {
        reduced = std::move(part);
      } else {
        for (size_t k = 0; k < part.size(); ++k) reduced[k] += part[k];
      }
      device->fill_zero(g);
      return;
    }
    if (reduced.empty()) return;
    std::vector<double> sum = device->download(g);
    for (size_t k = 0; k < sum.size(); ++k) sum[k] += reduced[k];
    g = device->upload(sum);
    reduced.clear();
  }

  // The receive the worker should block on: the first unfinished posted receive among the
  // compute head's deps, else the oldest posted receive.
  int recv_to_wait_for(int compute_head) const {
    if (compute_head >= 0)
      for (int d : list_[compute_head].deps)
        if (!done_[d] && handle_[d] >= 0) return d;
    return pending_.empty() ? -1 : pending_.front();
  }

  void run_step(int step) {
    step_ = step;
    size_t n = list_.size();
    done_.assign(n, false);
    handle_.assign(n, -1);
    has_arrived_.assign(n, false);
    arrived_.clear();
    arrived_.resize(n);
    recv_start_.assign(n, 0.0);
    pending_.clear();
    num_done_ = 0;
    computes_done_ = 0;
    std::vector<size_t> head(streams_.size(), 0);
    try {
      backend_.barrier(options_.timeout_s);
    } catch (const RuntimeFailure& e) {
      check_abort();
      throw RuntimeFailure("actor " + std::to_string(actor_) + ", step " + std::to_string(step) +
                           ": barrier: " + e.what());
    }
    double begin = backend_.now_s();
    record_.step_begin_s.push_back(begin);
    last_end_s_ = begin;
    while (num_done_ < n) {
      check_abort();
      bool progress = false;
      int compute_head = -1;
      int collective_head = -1;
      for (size_t s = 0; s < streams_.size(); ++s) {
        const Stream& st = streams_[s];
        switch (st.id.kind) {
          case StreamKind::kSend:
          case StreamKind::kRecv:
            while (head[s] < st.order.size() && deps_done(st.order[head[s]])) {
              int i = st.order[head[s]++];
              if (st.id.kind == StreamKind::kSend)
                do_send(i);
              else
                post_recv(i);
              progress = true;
            }
            break;
          case StreamKind::kCompute:
            if (head[s] < st.order.size()) compute_head = st.order[head[s]];
            break;
          case StreamKind::kCollective:
            if (head[s] < st.order.size()) collective_head = st.order[head[s]];
            break;
          case StreamKind::kAllToAll:  // never an instruction's stream (stream_of)
            break;
        }
      }
      if (poll_recvs()) progress = true;
      if (compute_head >= 0 && deps_done(compute_head)) {
        run_compute(compute_head);
        ++head[slot_of(compute_head)];
        continue;
      }
      // Collectives wait for the actor's last compute, except where parameter all-gathers (which
      // computes wait for) share the stream: then each runs as soon as its deps are done.
      if (collective_head >= 0 && deps_done(collective_head) &&
          (has_gathers_ || computes_done_ == num_computes_)) {
        run_allreduce(collective_head);
        ++head[slot_of(collective_head)];
        continue;
      }
      if (progress) continue;
      int wait = recv_to_wait_for(compute_head);
      if (wait < 0) {
        int blocked = compute_head >= 0 ? compute_head : collective_head;
        throw RuntimeFailure((blocked >= 0 ? where(blocked) : "actor " + std::to_string(actor_)) +
                             ": can never start (the program deadlocks on this actor)");
      }
      wait_recv(wait);
    }
    record_.step_end_s.push_back(last_end_s_);
  }

  int slot_of(int i) const {
    StreamId sid = stream_of(list_[i]);
    for (size_t s = 0; s < streams_.size(); ++s)
      if (streams_[s].id == sid) return static_cast<int>(s);
    return -1;
  }

  Backend& backend_;
  Workload& workload_;
  const ExecutorOptions& options_;
  int actor_;
  const std::vector<Instruction>& list_;
  int64_t key_stride_;
  std::vector<Stream> streams_;
  int num_computes_ = 0;
  bool has_gathers_ = false;  // the list holds kAllGather instructions (parameter sharding)

  int step_ = 0;
  std::vector<bool> done_;
  std::vector<int> handle_;
  std::vector<bool> has_arrived_;
  std::vector<Message> arrived_;
  std::vector<double> recv_start_;
  std::vector<int> pending_;
  size_t num_done_ = 0;
  int computes_done_ = 0;
  double last_end_s_ = 0;
  int64_t last_bytes_ = -1;
  double sleep_debt_s_ = 0;
  // Per stage: the gradients already reduced by this step's per-microbatch reductions.
  std::map<int, std::vector<double>> reduced_parts_;
  WorkerRecord record_;
};

}  // namespace

int64_t max_tag(const Program& program) {
  int64_t t = 0;
  for (const auto& list : program.actors)
    for (const Instruction& ins : list) t = std::max(t, ins.tag);
  return t;
}

WorkerRecord run_worker(const Program& program, Backend& backend, Workload& workload,
                        const ExecutorOptions& options) {
#ifdef __linux__
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // precise sleeps for emulated compute
#endif
  WorkerRun run(program, backend, workload, options);
  try {
    return run.run();
  } catch (const std::exception& e) {
    if (backend.abort_reason().empty()) backend.abort(e.what());
    throw;
  }
}

}  // namespace jaxpp
