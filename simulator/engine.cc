#include "simulator/engine.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <string>
#include <unordered_map>

#include "graph/error.h"

namespace jaxpp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class EventType : uint8_t { kFinish, kTransferJoin, kLinkCheck };

struct Event {
  double time_s;
  uint64_t seq;
  EventType type;
  int id;            // instruction (kFinish, kTransferJoin: the send) or link (kLinkCheck)
  uint32_t version;  // kLinkCheck
};

struct EventLater {
  bool operator()(const Event& a, const Event& b) const {
    if (a.time_s != b.time_s) return a.time_s > b.time_s;
    return a.seq > b.seq;
  }
};

struct Link {
  std::vector<int> active;  // sends in their bandwidth phase
  double last_update_s = 0;
  uint32_t version = 0;
};

bool is_compute_stream(OpKind op) { return op == OpKind::kCompute || op == OpKind::kOptimizer; }

class Engine {
 public:
  Engine(const Program& program, const CostProvider& cost, const SimOptions& options)
      : program_(program), cost_(cost), options_(options) {}

  SimResult run();

 private:
  void build();
  void try_start(int g, int cause);
  void start(int g, int cause);
  void start_transfer(int send, int recv, int cause);
  void finish(int g);
  void push(double t, EventType type, int id, uint32_t version = 0) {
    queue_.push(Event{t, seq_++, type, id, version});
  }
  void advance_link(int l);
  void schedule_link(int l);
  void on_link_check(int l, uint32_t version);
  void memory_delta(int actor, int64_t delta_bytes);
  [[noreturn]] void report_deadlock() const;
  const Instruction& ins(int g) const { return program_.actors[actor_[g]][local_[g]]; }

  const Program& program_;
  const CostProvider& cost_;
  const SimOptions& options_;

  int n_ = 0;
  std::vector<int> offset_;  // first global index of each actor
  std::vector<int> actor_, local_;
  std::vector<int> stream_;       // global stream index of each instruction
  std::vector<int> stream_begin_, stream_items_, stream_cursor_;  // CSR of stream members
  std::vector<int> deps_left_;
  std::vector<int> dependents_begin_, dependents_;  // CSR
  std::vector<int> partner_;                        // send <-> recv, -1 otherwise
  std::vector<uint8_t> posted_, started_, done_;
  std::vector<int> cause_;
  std::vector<double> start_s_, end_s_;
  std::vector<int> link_of_;  // per send: dense link index
  std::vector<double> remaining_bytes_, bandwidth_;
  std::vector<Link> links_;

  std::priority_queue<Event, std::vector<Event>, EventLater> queue_;
  uint64_t seq_ = 0;
  double now_ = 0;
  int done_count_ = 0;

  // Memory.
  std::vector<int64_t> mem_bytes_;
  std::vector<int> stash_count_stage_, stash_count_actor_;
  SimResult result_;
};

void Engine::build() {
  const int num_actors = program_.num_actors;
  if (static_cast<int>(program_.actors.size()) != num_actors) {
    throw_input_error("program", "num_actors is " + std::to_string(num_actors) + " but " +
                                     std::to_string(program_.actors.size()) +
                                     " instruction lists are given");
  }
  offset_.resize(num_actors + 1, 0);
  for (int r = 0; r < num_actors; ++r) {
    offset_[r + 1] = offset_[r] + static_cast<int>(program_.actors[r].size());
  }
  n_ = offset_[num_actors];
  actor_.resize(n_);
  local_.resize(n_);
  stream_.resize(n_);
  deps_left_.assign(n_, 0);
  partner_.assign(n_, -1);
  posted_.assign(n_, 0);
  started_.assign(n_, 0);
  done_.assign(n_, 0);
  cause_.assign(n_, -1);
  start_s_.assign(n_, 0);
  end_s_.assign(n_, 0);

  // Streams: dense index per (actor, StreamId), in order of first appearance.
  int num_streams = 0;
  std::vector<int> stream_count;
  std::vector<std::pair<int, int>> edges;  // (from, to): to waits for from
  std::unordered_map<int64_t, int> send_of_tag, recv_of_tag;
  for (int r = 0; r < num_actors; ++r) {
    std::map<StreamId, int> streams;
    int last_compute = -1;
    const auto& list = program_.actors[r];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const int g = offset_[r] + i;
      const Instruction& in = list[i];
      actor_[g] = r;
      local_[g] = i;
      const auto [it, inserted] = streams.emplace(stream_of(in), num_streams);
      if (inserted) {
        ++num_streams;
        stream_count.push_back(0);
      }
      stream_[g] = it->second;
      ++stream_count[it->second];
      for (int d : in.deps) {
        if (d < 0 || d >= i) {
          throw_input_error("program: actor " + std::to_string(r) + " instruction " +
                                std::to_string(i),
                            "dependency " + std::to_string(d) + " is not an earlier instruction");
        }
        edges.emplace_back(offset_[r] + d, g);
      }
      if (in.op == OpKind::kSend || in.op == OpKind::kRecv) {
        if (in.peer < 0 || in.peer >= num_actors || in.peer == r) {
          throw_input_error("program: actor " + std::to_string(r) + " instruction " +
                                std::to_string(i),
                            "peer " + std::to_string(in.peer) + " out of range");
        }
        auto& tags = in.op == OpKind::kSend ? send_of_tag : recv_of_tag;
        if (!tags.emplace(in.tag, g).second) {
          throw_input_error("program: actor " + std::to_string(r) + " instruction " +
                                std::to_string(i),
                            "duplicate tag " + std::to_string(in.tag));
        }
      }
      if (in.op == OpKind::kCompute) last_compute = g;
    }
    if (!options_.overlap_grad_reduce && last_compute >= 0) {
      for (int i = 0; i < static_cast<int>(list.size()); ++i) {
        const int g = offset_[r] + i;
        if (list[i].op == OpKind::kAllReduce && g != last_compute) edges.emplace_back(last_compute, g);
      }
    }
  }
  // Pair sends with recvs (deterministic: iterate sends in global order).
  for (int g = 0; g < n_; ++g) {
    const Instruction& in = ins(g);
    if (in.op != OpKind::kSend && in.op != OpKind::kRecv) continue;
    const auto& other = in.op == OpKind::kSend ? recv_of_tag : send_of_tag;
    auto it = other.find(in.tag);
    if (it == other.end() || actor_[it->second] != in.peer || ins(it->second).peer != actor_[g]) {
      throw_input_error("program: actor " + std::to_string(actor_[g]) + " instruction " +
                            std::to_string(local_[g]),
                        std::string("no matching ") +
                            (in.op == OpKind::kSend ? "recv" : "send") + " with tag " +
                            std::to_string(in.tag) + " on actor " + std::to_string(in.peer));
    }
    partner_[g] = it->second;
  }
  // Stream CSR.
  stream_begin_.assign(num_streams + 1, 0);
  for (int s = 0; s < num_streams; ++s) stream_begin_[s + 1] = stream_begin_[s] + stream_count[s];
  stream_items_.resize(n_);
  std::vector<int> fill(stream_begin_.begin(), stream_begin_.end() - 1);
  for (int g = 0; g < n_; ++g) stream_items_[fill[stream_[g]]++] = g;
  stream_cursor_.assign(stream_begin_.begin(), stream_begin_.end() - 1);
  // Dependents CSR.
  dependents_begin_.assign(n_ + 1, 0);
  for (const auto& [from, to] : edges) {
    ++dependents_begin_[from + 1];
    ++deps_left_[to];
  }
  for (int g = 0; g < n_; ++g) dependents_begin_[g + 1] += dependents_begin_[g];
  dependents_.resize(edges.size());
  std::vector<int> dfill(dependents_begin_.begin(), dependents_begin_.end() - 1);
  for (const auto& [from, to] : edges) dependents_[dfill[from]++] = to;
  // Links (dense, by first appearance in global order).
  link_of_.assign(n_, -1);
  remaining_bytes_.assign(n_, 0);
  bandwidth_.assign(n_, 0);
  std::unordered_map<int, int> dense_link;
  for (int g = 0; g < n_; ++g) {
    if (ins(g).op != OpKind::kSend) continue;
    const int id = cost_.link_id(actor_[g], ins(g).peer);
    auto [it, inserted] = dense_link.emplace(id, static_cast<int>(links_.size()));
    if (inserted) links_.emplace_back();
    link_of_[g] = it->second;
  }
  // Memory.
  mem_bytes_.assign(num_actors, 0);
  stash_count_stage_.assign(program_.num_stages, 0);
  stash_count_actor_.assign(num_actors, 0);
  result_.actors.resize(num_actors);
  result_.peak_stashed_per_stage.assign(program_.num_stages, 0);
  for (int r = 0; r < num_actors; ++r) {
    const int64_t s = r < static_cast<int>(options_.static_bytes_per_actor.size())
                          ? options_.static_bytes_per_actor[r]
                          : 0;
    mem_bytes_[r] = s;
    result_.actors[r].static_bytes = s;
    result_.actors[r].peak_memory_bytes = s;
    result_.actors[r].instructions = static_cast<int64_t>(program_.actors[r].size());
    if (options_.record_trace) result_.trace.memory.push_back({r, 0.0, s});
  }
}

void Engine::memory_delta(int actor, int64_t delta_bytes) {
  mem_bytes_[actor] += delta_bytes;
  ActorStats& a = result_.actors[actor];
  a.peak_memory_bytes = std::max(a.peak_memory_bytes, mem_bytes_[actor]);
  if (options_.record_trace && delta_bytes != 0) {
    result_.trace.memory.push_back({actor, now_, mem_bytes_[actor]});
  }
}

void Engine::try_start(int g, int cause) {
  if (started_[g] || posted_[g] || deps_left_[g] > 0) return;
  if (stream_items_[stream_cursor_[stream_[g]]] != g) return;
  const OpKind op = ins(g).op;
  if (op == OpKind::kSend || op == OpKind::kRecv) {
    posted_[g] = 1;
    cause_[g] = cause;
    const int p = partner_[g];
    if (!posted_[p]) return;
    cause_[p] = cause;  // both sides were released by what released the later posting
    if (op == OpKind::kSend) {
      start_transfer(g, p, cause);
    } else {
      start_transfer(p, g, cause);
    }
    return;
  }
  start(g, cause);
}

void Engine::start(int g, int cause) {
  const Instruction& in = ins(g);
  const int r = actor_[g];
  started_[g] = 1;
  cause_[g] = cause;
  start_s_[g] = now_;
  double dur = 0;
  if (is_compute_stream(in.op)) {
    dur = cost_.compute_s(r, in);
    if (in.op == OpKind::kCompute) {
      int64_t added = 0;
      for (const TaskRef& t : in.tasks) {
        if (t.kind != TaskKind::kF) continue;
        if (t.stage >= 0 && t.stage < program_.num_stages) {
          int& c = stash_count_stage_[t.stage];
          ++c;
          result_.peak_stashed_per_stage[t.stage] =
              std::max(result_.peak_stashed_per_stage[t.stage], c);
          if (t.stage < static_cast<int>(options_.stash_bytes_per_stage.size()))
            added += options_.stash_bytes_per_stage[t.stage];
        }
        ++stash_count_actor_[r];
        ActorStats& a = result_.actors[r];
        a.peak_stashed_microbatches = std::max(a.peak_stashed_microbatches, stash_count_actor_[r]);
      }
      if (added != 0) memory_delta(r, added);
    }
  } else if (in.op == OpKind::kAllReduce) {
    dur = cost_.allreduce_s(r, in);
    result_.actors[r].collective_bytes += in.bytes;
    result_.collective_bytes += in.bytes;
  }
  if (!(dur >= 0) || !std::isfinite(dur)) {
    throw_input_error("cost model", "invalid duration for " + to_string(in) + " on actor " +
                                        std::to_string(r));
  }
  push(now_ + dur, EventType::kFinish, g);
}

void Engine::start_transfer(int send, int recv, int cause) {
  (void)cause;
  const Instruction& in = ins(send);
  const int from = actor_[send];
  const int to = in.peer;
  started_[send] = started_[recv] = 1;
  start_s_[send] = start_s_[recv] = now_;
  result_.actors[from].p2p_send_bytes += in.bytes;
  result_.p2p_bytes += in.bytes;
  const double latency = cost_.transfer_latency_s(from, to, in);
  const double bw = cost_.p2p_bandwidth_bytes_per_s(from, to);
  if (!(latency >= 0) || !(bw > 0)) {
    throw_input_error("cost model", "invalid link between actors " + std::to_string(from) +
                                        " and " + std::to_string(to));
  }
  if (in.bytes <= 0 || std::isinf(bw)) {
    push(now_ + latency, EventType::kFinish, send);
    return;
  }
  remaining_bytes_[send] = static_cast<double>(in.bytes);
  bandwidth_[send] = bw;
  push(now_ + latency, EventType::kTransferJoin, send);
}

void Engine::advance_link(int l) {
  Link& link = links_[l];
  const double dt = now_ - link.last_update_s;
  link.last_update_s = now_;
  if (dt <= 0 || link.active.empty()) return;
  const double n = static_cast<double>(link.active.size());
  for (int s : link.active) remaining_bytes_[s] -= dt * bandwidth_[s] / n;
}

void Engine::schedule_link(int l) {
  Link& link = links_[l];
  ++link.version;
  if (link.active.empty()) return;
  const double n = static_cast<double>(link.active.size());
  double best = kInf;
  for (int s : link.active) {
    best = std::min(best, std::max(0.0, remaining_bytes_[s]) * n / bandwidth_[s]);
  }
  push(now_ + best, EventType::kLinkCheck, l, link.version);
}

void Engine::on_link_check(int l, uint32_t version) {
  Link& link = links_[l];
  if (version != link.version) return;
  advance_link(l);
  // The transfer(s) that reached zero: the argmin always, plus any within rounding of zero.
  const double n = static_cast<double>(link.active.size());
  int argmin = -1;
  double best = kInf;
  for (int s : link.active) {
    const double t = remaining_bytes_[s] * n / bandwidth_[s];
    if (t < best) {
      best = t;
      argmin = s;
    }
  }
  std::vector<int> finished;
  std::vector<int> keep;
  for (int s : link.active) {
    if (s == argmin || remaining_bytes_[s] <= 1e-9 * static_cast<double>(ins(s).bytes) + 1e-6) {
      finished.push_back(s);
    } else {
      keep.push_back(s);
    }
  }
  link.active = std::move(keep);
  schedule_link(l);
  for (int s : finished) finish(s);
}

void Engine::finish(int g) {
  const Instruction& in = ins(g);
  const int r = actor_[g];
  std::vector<int> ended = {g};
  if (in.op == OpKind::kSend) ended.push_back(partner_[g]);
  for (int e : ended) {
    done_[e] = 1;
    end_s_[e] = now_;
    ++done_count_;
  }
  if (in.op == OpKind::kCompute) {
    int64_t freed = 0;
    for (const TaskRef& t : in.tasks) {
      if (t.kind != TaskKind::kB && t.kind != TaskKind::kI) continue;
      if (t.stage >= 0 && t.stage < program_.num_stages) {
        --stash_count_stage_[t.stage];
        if (t.stage < static_cast<int>(options_.stash_bytes_per_stage.size()))
          freed += options_.stash_bytes_per_stage[t.stage];
      }
      --stash_count_actor_[r];
    }
    if (freed != 0) memory_delta(r, -freed);
  }
  for (int e : ended) {
    const int s = stream_[e];
    ++stream_cursor_[s];
    if (stream_cursor_[s] < stream_begin_[s + 1]) try_start(stream_items_[stream_cursor_[s]], e);
    for (int k = dependents_begin_[e]; k < dependents_begin_[e + 1]; ++k) {
      const int d = dependents_[k];
      --deps_left_[d];
      try_start(d, e);
    }
  }
}

void Engine::report_deadlock() const {
  std::string msg = "deadlock: the schedule cannot progress;";
  for (int r = 0; r < program_.num_actors; ++r) {
    int first = -1;
    for (int g = offset_[r]; g < offset_[r + 1]; ++g) {
      if (!done_[g] && !started_[g]) {
        first = g;
        break;
      }
    }
    msg += " actor " + std::to_string(r) + ": ";
    if (first < 0) {
      msg += "finished;";
      continue;
    }
    const Instruction& in = ins(first);
    msg += "#" + std::to_string(local_[first]) + " " + to_string(in);
    const int head = stream_items_[stream_cursor_[stream_[first]]];
    if (head != first) {
      msg += " (waits for #" + std::to_string(local_[head]) + " on its stream)";
    } else if (deps_left_[first] > 0) {
      msg += " (waits for a dependency)";
    } else if (posted_[first]) {
      msg += " (waits for the peer on actor " + std::to_string(in.peer) + " to post tag " +
             std::to_string(in.tag) + ")";
    }
    msg += ";";
  }
  msg.pop_back();
  throw InputError(msg);
}

SimResult Engine::run() {
  build();
  // Initial stream heads, in global order.
  for (size_t s = 0; s + 1 < stream_begin_.size(); ++s) {
    if (stream_begin_[s] < stream_begin_[s + 1]) try_start(stream_items_[stream_begin_[s]], -1);
  }
  while (!queue_.empty()) {
    const Event e = queue_.top();
    queue_.pop();
    now_ = e.time_s;
    switch (e.type) {
      case EventType::kFinish:
        finish(e.id);
        break;
      case EventType::kTransferJoin: {
        const int l = link_of_[e.id];
        advance_link(l);
        links_[l].active.push_back(e.id);
        schedule_link(l);
        break;
      }
      case EventType::kLinkCheck:
        on_link_check(e.id, e.version);
        break;
    }
  }
  if (done_count_ < n_) report_deadlock();

  // Metrics.
  SimResult& res = result_;
  res.num_instructions = n_;
  int last = -1;
  for (int g = 0; g < n_; ++g) {
    if (last < 0 || end_s_[g] > end_s_[last]) last = g;
  }
  res.makespan_s = last >= 0 ? end_s_[last] : 0;
  res.step_time_s = res.makespan_s + options_.iteration_overhead_s;
  for (int r = 0; r < program_.num_actors; ++r) {
    ActorStats& a = res.actors[r];
    bool any = false;
    for (int g = offset_[r]; g < offset_[r + 1]; ++g) {
      if (!is_compute_stream(ins(g).op)) continue;
      a.busy_s += end_s_[g] - start_s_[g];
      a.first_start_s = any ? std::min(a.first_start_s, start_s_[g]) : start_s_[g];
      a.last_end_s = any ? std::max(a.last_end_s, end_s_[g]) : end_s_[g];
      any = true;
    }
    a.idle_s = res.makespan_s - a.busy_s;
  }
  res.bubble_actor = 0;
  for (int r = 1; r < program_.num_actors; ++r) {
    if (res.actors[r].span_s() > res.actors[res.bubble_actor].span_s()) res.bubble_actor = r;
  }
  if (!res.actors.empty()) {
    const ActorStats& b = res.actors[res.bubble_actor];
    res.bubble_rate = b.span_s() > 0 ? (b.span_s() - b.busy_s) / b.span_s() : 0;
  }
  for (int g = last; g >= 0; g = cause_[g]) {
    res.critical_path.push_back({actor_[g], local_[g], start_s_[g], end_s_[g]});
    if (res.critical_path.size() > static_cast<size_t>(n_)) break;  // defensive: no cycles
  }
  std::reverse(res.critical_path.begin(), res.critical_path.end());

  if (options_.record_trace) {
    res.start_s.resize(program_.num_actors);
    res.end_s.resize(program_.num_actors);
    Trace& tr = res.trace;
    tr.source = "simulated";
    tr.num_actors = program_.num_actors;
    tr.num_steps = 1;
    tr.events.reserve(n_);
    for (int r = 0; r < program_.num_actors; ++r) {
      res.start_s[r].assign(start_s_.begin() + offset_[r], start_s_.begin() + offset_[r + 1]);
      res.end_s[r].assign(end_s_.begin() + offset_[r], end_s_.begin() + offset_[r + 1]);
    }
    for (int g = 0; g < n_; ++g) {
      const Instruction& in = ins(g);
      TraceEvent ev;
      ev.actor = actor_[g];
      ev.instruction = local_[g];
      ev.op = in.op;
      ev.stream = stream_of(in);
      ev.tasks = in.tasks;
      ev.stage = in.stage;
      ev.peer = in.peer;
      ev.bytes = in.bytes;
      ev.tag = in.tag;
      ev.start_s = start_s_[g];
      ev.end_s = end_s_[g];
      tr.events.push_back(std::move(ev));
    }
    std::stable_sort(tr.events.begin(), tr.events.end(),
                     [](const TraceEvent& a, const TraceEvent& b) {
                       if (a.start_s != b.start_s) return a.start_s < b.start_s;
                       if (a.actor != b.actor) return a.actor < b.actor;
                       return a.instruction < b.instruction;
                     });
    std::stable_sort(tr.memory.begin(), tr.memory.end(),
                     [](const MemorySample& a, const MemorySample& b) {
                       if (a.time_s != b.time_s) return a.time_s < b.time_s;
                       return a.actor < b.actor;
                     });
  }
  return std::move(res);
}

}  // namespace

SimResult simulate(const Program& program, const CostProvider& cost, const SimOptions& options) {
  Engine engine(program, cost, options);
  return engine.run();
}

nlohmann::json sim_result_to_json(const SimResult& r, const Program& program) {
  nlohmann::json actors = nlohmann::json::array();
  for (size_t i = 0; i < r.actors.size(); ++i) {
    const ActorStats& a = r.actors[i];
    actors.push_back({{"actor", i},
                      {"busy_s", a.busy_s},
                      {"idle_s", a.idle_s},
                      {"span_s", a.span_s()},
                      {"static_bytes", a.static_bytes},
                      {"peak_memory_bytes", a.peak_memory_bytes},
                      {"peak_stashed_microbatches", a.peak_stashed_microbatches},
                      {"p2p_send_bytes", a.p2p_send_bytes},
                      {"collective_bytes", a.collective_bytes},
                      {"instructions", a.instructions}});
  }
  nlohmann::json peak = nlohmann::json::array();
  for (const ActorStats& a : r.actors) peak.push_back(a.peak_memory_bytes);
  nlohmann::json path = nlohmann::json::array();
  for (const CriticalStep& c : r.critical_path) {
    path.push_back({{"actor", c.actor},
                    {"instruction", c.instruction},
                    {"name", to_string(program.actors[c.actor][c.instruction])},
                    {"start_s", c.start_s},
                    {"end_s", c.end_s}});
  }
  return {{"step_time_s", r.step_time_s},
          {"makespan_s", r.makespan_s},
          {"bubble_rate", r.bubble_rate},
          {"bubble_actor", r.bubble_actor},
          {"tasks", r.num_instructions},
          {"peak_memory_bytes", peak},
          {"peak_stashed_per_stage", r.peak_stashed_per_stage},
          {"p2p_bytes", r.p2p_bytes},
          {"collective_bytes", r.collective_bytes},
          {"actors", actors},
          {"critical_path", path}};
}

}  // namespace jaxpp
