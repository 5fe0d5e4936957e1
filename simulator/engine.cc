#include "simulator/engine.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <new>
#include <queue>
#include <string>
#include <utility>

#include <sys/mman.h>

#include "graph/error.h"

namespace jaxpp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// kStreamRelease: a collective that keeps its stream busy past its end frees it.
enum class EventType : uint8_t { kFinish, kTransferJoin, kLinkCheck, kStreamRelease };

struct Event {
  double time_s;
  uint64_t seq;  // creation order: the tie-break at equal times
  int id;        // instruction (kFinish, kTransferJoin: the send) or link (kLinkCheck)
  EventType type;
};

struct EventLater {
  bool operator()(const Event& a, const Event& b) const {
    if (a.time_s != b.time_s) return a.time_s > b.time_s;
    return a.seq > b.seq;
  }
};

// A send in its bandwidth phase.
struct ActiveTransfer {
  int send;
  double remaining_bytes;
  double bandwidth_bytes_per_s;
  double bytes;
};

struct Link {
  std::vector<ActiveTransfer> active;  // in order of joining
  double last_update_s = 0;
  uint64_t check_seq = kNoCheck;  // seq of the one kLinkCheck event still valid
  static constexpr uint64_t kNoCheck = ~uint64_t{0};
};

// Allocator of the engine's per-instruction arrays. A block of kHugeBlockBytes or more is mapped
// on its own, aligned to 2 MiB and marked MADV_HUGEPAGE, so that the kernel backs it with huge
// pages where it can: a 450,000-instruction program's nodes take 29 MB, i.e. 7,000 page faults
// with 4 KiB pages and as many TLB entries for the event loop's scattered accesses. Smaller
// blocks come from the ordinary heap.
template <typename T>
struct LargeBlockAllocator {
  using value_type = T;
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kHugeBlockBytes = size_t{4} << 20;
  LargeBlockAllocator() = default;
  template <typename U>
  LargeBlockAllocator(const LargeBlockAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator
  static size_t mapped_bytes(size_t n) {
    return (n * sizeof(T) + kHugePage - 1) / kHugePage * kHugePage;
  }
  T* allocate(size_t n) {
    if (n * sizeof(T) < kHugeBlockBytes) return std::allocator<T>().allocate(n);
    const size_t len = mapped_bytes(n);
    void* p = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    // Keep the 2 MiB-aligned part of the mapping and give the rest back.
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > begin) munmap(p, aligned - begin);
    const uintptr_t tail = aligned + len, end = begin + len + kHugePage;
    if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
#ifdef MADV_HUGEPAGE
    madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);  // a hint: failure is fine
#endif
    return reinterpret_cast<T*>(aligned);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHugeBlockBytes) {
      std::allocator<T>().deallocate(p, n);
      return;
    }
    munmap(p, mapped_bytes(n));
  }
  friend bool operator==(const LargeBlockAllocator&, const LargeBlockAllocator&) { return true; }
};

// How many instructions ahead build() prefetches the heap blocks of an instruction.
constexpr int kPrefetchDistance = 8;

// Node flags. kStreamHead: every earlier instruction of its stream has finished.
constexpr uint8_t kPosted = 1, kStarted = 2, kDone = 4, kCostDeferred = 8, kStreamHead = 16;

// What the event loop reads about one instruction to start and end it, in half a cache line,
// indexed by the global instruction index g (actor-major, program order): an actor's
// neighbouring instructions, which run at about the same time, share a line. Costs are looked
// up once, in build(), where the program is read sequentially (link bandwidths when a transfer
// starts, as they are needed only then); the event loop never touches the Program. What is
// written once and read afterwards (start and end times, the cause) is kept apart (Times,
// Engine::cause_), as are a send's bytes (Engine::send_bytes_).
struct alignas(32) Node {
  union {
    double duration_s = 0;  // compute, optimizer, all-reduce; a send until it starts: latency
    double bandwidth_bytes_per_s;  // a send from its start on: the bandwidth of its link
  };
  union {
    struct {
      int link;   // dense link index
      int peer;   // the other end's actor: kSend the receiver, kRecv the sender
      int bytes;  // into Engine::send_bytes_
    } send;       // kSend; kRecv: only `peer`
    struct {
      int begin;  // into Engine::stash_stages_: num_f stages of F tasks, then num_bi of B/I
      int16_t num_f, num_bi;
      int actor;
    } stash;  // kCompute; kOptimizer: only `actor`
  } u{};
  int next_in_stream = -1;  // the stream's next instruction, -1 at its end
  int deps_left = 0;        // unfinished dependencies
  OpKind op : 8 = OpKind::kCompute;
  uint8_t flags = 0;
};
static_assert(sizeof(Node) == 32, "Node should fill exactly half a cache line");

struct Times {
  double start_s = 0, end_s = 0;
};

bool is_compute_stream(OpKind op) { return op == OpKind::kCompute || op == OpKind::kOptimizer; }

uint64_t mix64(int64_t key) {  // splitmix64 finaliser
  uint64_t h = static_cast<uint64_t>(key) + 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

// Open-addressing map from an int64 key (a link id) to a non-negative int.
class FlatIndex {
 public:
  explicit FlatIndex(size_t expected) {
    size_t capacity = 16;
    while (capacity < 2 * expected) capacity *= 2;
    keys_.resize(capacity);
    values_.assign(capacity, -1);
    mask_ = capacity - 1;
  }
  // Inserts key -> value unless the key is present; returns the value now stored.
  int emplace(int64_t key, int value) {
    const size_t i = slot(key);
    if (values_[i] >= 0) return values_[i];
    keys_[i] = key;
    values_[i] = value;
    if (++size_ * 2 > keys_.size()) grow();
    return value;
  }

 private:
  size_t slot(int64_t key) const {
    size_t i = static_cast<size_t>(mix64(key)) & mask_;
    while (values_[i] >= 0 && keys_[i] != key) i = (i + 1) & mask_;
    return i;
  }
  void grow() {
    FlatIndex bigger(keys_.size());
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (values_[i] >= 0) bigger.emplace(keys_[i], values_[i]);
    }
    *this = std::move(bigger);
  }

  std::vector<int64_t> keys_;
  std::vector<int> values_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// The two ends of a point-to-point transfer, by tag: index 0 = the send, 1 = the recv. Each
// field holds its value plus one, so that zeroed memory is a table of empty entries.
struct TagEnds {
  int g1[2];
  int actor1[2];
  int peer1[2];
};

// Tag -> TagEnds. Tags in [0, dense_size) (lower() numbers them 0, 1, 2, ...) index a zeroed
// mapping whose pages the kernel provides only when first touched, so it needs no pass over the
// program to size it; any other tag goes to an open-addressing table that grows as needed.
class TagTable {
 public:
  explicit TagTable(size_t dense_size)
      : dense_bytes_(std::max<size_t>(dense_size, 1) * sizeof(TagEnds)), dense_size_(dense_size) {
    // Mapped directly (calloc may take the block from the heap and clear all of it).
    void* p = mmap(nullptr, dense_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    dense_ = static_cast<TagEnds*>(p);
  }
  ~TagTable() { munmap(dense_, dense_bytes_); }
  TagTable(const TagTable&) = delete;
  TagTable& operator=(const TagTable&) = delete;

  // The entry of `tag`, created empty when absent.
  TagEnds& at(int64_t tag) {
    if (tag >= 0 && static_cast<uint64_t>(tag) < dense_size_) {
      dense_end_ = std::max(dense_end_, static_cast<size_t>(tag) + 1);
      return dense_[tag];
    }
    if (2 * (sparse_count_ + 1) > keys_.size()) grow_sparse();
    const size_t i = slot(tag);
    if (!used(sparse_[i])) {
      keys_[i] = tag;
      ++sparse_count_;
    }
    return sparse_[i];
  }
  void prefetch(int64_t tag) const {
    if (tag >= 0 && static_cast<uint64_t>(tag) < dense_size_) __builtin_prefetch(&dense_[tag]);
  }
  // Calls f(entry) for every entry that may be used.
  template <typename F>
  void for_each(F&& f) const {
    for (size_t t = 0; t < dense_end_; ++t) f(dense_[t]);
    for (const TagEnds& e : sparse_) f(e);
  }
  static bool used(const TagEnds& e) { return e.g1[0] != 0 || e.g1[1] != 0; }

 private:
  size_t slot(int64_t tag) const {
    size_t i = static_cast<size_t>(mix64(tag)) & mask_;
    while (used(sparse_[i]) && keys_[i] != tag) i = (i + 1) & mask_;
    return i;
  }
  void grow_sparse() {
    const size_t capacity = std::max<size_t>(16, 2 * keys_.size());
    std::vector<int64_t> keys = std::move(keys_);
    std::vector<TagEnds> ends = std::move(sparse_);
    keys_.assign(capacity, 0);
    sparse_.assign(capacity, TagEnds{});
    mask_ = capacity - 1;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!used(ends[i])) continue;
      const size_t j = slot(keys[i]);
      keys_[j] = keys[i];
      sparse_[j] = ends[i];
    }
  }

  size_t dense_bytes_;
  TagEnds* dense_ = nullptr;
  size_t dense_size_;
  size_t dense_end_ = 0;  // one past the highest dense tag seen
  std::vector<int64_t> keys_;
  std::vector<TagEnds> sparse_;
  size_t mask_ = 0;
  size_t sparse_count_ = 0;
};

class Engine {
 public:
  Engine(const Program& program, const CostProvider& cost, const SimOptions& options)
      : program_(program), cost_(cost), options_(options) {}

  SimResult run();

 private:
  void build();
  void look_up_cost(int g, const Instruction& in, int actor);
  void try_start(int g, int cause);
  void start(int g, int cause);
  void start_transfer(int send, int recv);
  void finish(int g);
  void release_stream(int g);  // the next instruction of g's stream may start
  uint64_t push(double t, EventType type, int id) {
    if (t == now_) {
      now_events_.push_back(Event{t, seq_, id, type});
    } else {
      queue_.push(Event{t, seq_, id, type});
    }
    return seq_++;
  }
  void advance_link(int l);
  void schedule_link(int l);
  void on_link_check(int l, uint64_t seq);
  void memory_delta(int actor, int64_t delta_bytes);
  // Fetches the nodes that finish(g) will touch, while g runs.
  // A successor that is a send or a recv starts its transfer with its partner, on another actor,
  // whose node was last touched long before (when it was built or posted): fetch that one too.
  void prefetch_successors(int g) const {
    const Node& node = nodes_[g];
    if (node.next_in_stream >= 0) prefetch_node(node.next_in_stream);
    const int begin = dependents_begin_[g], end = dependents_begin_[g + 1];
    for (int i = begin; i < end && i < begin + 2; ++i) prefetch_node(dependents_[i]);
  }
  void prefetch_node(int g) const {
    __builtin_prefetch(&nodes_[g]);
    const int p = partner_[g];
    if (p >= 0) __builtin_prefetch(&nodes_[p]);
  }
  void fill_trace();
  int actor_of(int g) const {
    return static_cast<int>(std::upper_bound(offset_.begin(), offset_.end(), g) - offset_.begin()) -
           1;
  }
  const Instruction& ins(int g) const {
    const int r = actor_of(g);
    return program_.actors[r][g - offset_[r]];
  }
  [[noreturn]] void report_deadlock() const;

  const Program& program_;
  const CostProvider& cost_;
  const SimOptions& options_;

  int n_ = 0;
  std::vector<int> offset_;        // first global index of each actor; offset_[num_actors] = n_
  std::vector<Node, LargeBlockAllocator<Node>> nodes_;
  std::vector<Times, LargeBlockAllocator<Times>> times_;
  std::vector<int> cause_;  // what released g (critical path), -1 for none
  std::vector<int64_t> send_bytes_;
  // Send <-> recv (-1 for other instructions), and whether each end is posted: dense arrays
  // (4 and 1 bytes per instruction) rather than node fields, so that posting one end reads
  // the other's state without fetching its node, and build() pairs the ends without writing
  // to a node of another actor.
  std::vector<int> partner_;
  std::vector<uint8_t> posted_;
  std::vector<int> stream_heads_;  // first instruction of each stream, in order of appearance
  // The instructions that wait for g: dependents_[dependents_begin_[g] .. dependents_begin_[g+1]).
  std::vector<int> dependents_begin_;
  std::vector<int> dependents_;
  std::vector<int> stash_stages_;  // see Node::u.stash; -1 = stage out of range
  // With SimOptions::stash_bytes_per_stage_microbatch: the microbatch of each stash_stages_ entry.
  bool per_microbatch_stash_ = false;
  std::vector<int> stash_microbatches_;
  // The bytes one stash of stage s (>= 0) holds; `entry` indexes stash_stages_.
  int64_t stash_bytes(int s, int entry) const {
    if (per_microbatch_stash_) {
      const int mb = stash_microbatches_[static_cast<size_t>(entry)];
      if (mb < 0 || mb >= program_.num_microbatches) return 0;
      return options_.stash_bytes_per_stage_microbatch[static_cast<size_t>(s) *
                                                           static_cast<size_t>(
                                                               program_.num_microbatches) +
                                                       static_cast<size_t>(mb)];
    }
    return s < static_cast<int>(options_.stash_bytes_per_stage.size())
               ? options_.stash_bytes_per_stage[static_cast<size_t>(s)]
               : 0;
  }
  std::vector<Link> links_;
  std::vector<ActiveTransfer> keep_scratch_;  // on_link_check
  std::vector<int> finished_scratch_;
  std::vector<int> start_order_;  // with record_trace: g in start order
  struct AllToAllTime {
    int g;
    double busy_s, exposed_s;
  };
  std::vector<AllToAllTime> alltoall_;  // compute instructions with an MoE all-to-all
  // Per instruction, the time a collective keeps its stream busy when that is longer than its
  // duration (CostProvider::collective_busy_s), 0 otherwise; empty when no collective does.
  std::vector<double> stream_busy_s_;
  bool holds_stream(int g) const {
    return !stream_busy_s_.empty() && stream_busy_s_[g] > nodes_[g].duration_s;
  }

  // Events, earliest (time_s, seq) first. An event for the current time (a transfer without
  // latency or bytes) goes to now_events_ instead of the heap: its seq is above that of every
  // queued event, so those of the current time are in creation order there, and the clock does
  // not advance before they are taken (next_event takes the earlier of the two fronts).
  std::priority_queue<Event, std::vector<Event>, EventLater> queue_;
  std::vector<Event> now_events_;
  size_t now_head_ = 0;  // the first of now_events_ not yet taken
  bool next_event(Event& e) {
    if (now_head_ < now_events_.size() &&
        (queue_.empty() || EventLater()(queue_.top(), now_events_[now_head_]))) {
      e = now_events_[now_head_++];
      if (now_head_ == now_events_.size()) {
        now_events_.clear();
        now_head_ = 0;
      }
      return true;
    }
    if (queue_.empty()) return false;
    e = queue_.top();
    queue_.pop();
    return true;
  }
  uint64_t seq_ = 0;
  double now_ = 0;
  int done_count_ = 0;

  // Metrics gathered as instructions end.
  int last_ended_ = -1;                // the instruction that ends last (lowest index on ties)
  std::vector<uint8_t> compute_ended_;  // per actor: a compute-stream instruction has ended

  // Memory.
  std::vector<int64_t> mem_bytes_;
  std::vector<int> stash_count_stage_, stash_count_actor_;
  SimResult result_;
};

// Durations are looked up here, once per instruction. A cost provider that throws is asked again
// when the instruction starts, so its error surfaces exactly when it would without the look-up.
void Engine::look_up_cost(int g, const Instruction& in, int actor) {
  Node& node = nodes_[g];
  try {
    if (is_compute_stream(in.op)) {
      node.duration_s = cost_.compute_s(actor, in);
    } else if (in.op == OpKind::kAllReduce || in.op == OpKind::kAllGather) {
      node.duration_s = cost_.allreduce_s(actor, in);
      const double busy = cost_.collective_busy_s(actor, in);
      if (busy > node.duration_s) {
        if (stream_busy_s_.empty()) stream_busy_s_.assign(n_, 0.0);
        stream_busy_s_[g] = busy;
      }
    } else if (in.op == OpKind::kSend) {
      node.duration_s = cost_.transfer_latency_s(actor, in.peer, in);
    }
  } catch (...) {
    node.flags |= kCostDeferred;
  }
}

// One pass over the program, actor by actor, so that the per-actor structures (nodes, streams,
// dependents) are built while that actor's data is in cache. Errors are reported in the order of
// the checks: structure (dependencies, peers, duplicate tags) in program order, then the first
// send or recv in program order without a matching partner.
void Engine::build() {
  const int num_actors = program_.num_actors;
  if (static_cast<int>(program_.actors.size()) != num_actors) {
    throw_input_error("program", "num_actors is " + std::to_string(num_actors) + " but " +
                                     std::to_string(program_.actors.size()) +
                                     " instruction lists are given");
  }
  // Sizes only: the instructions are read once, in the pass below.
  offset_.resize(num_actors + 1, 0);
  for (int r = 0; r < num_actors; ++r)
    offset_[r + 1] = offset_[r] + static_cast<int>(program_.actors[r].size());
  n_ = offset_[num_actors];
  nodes_.reserve(n_);
  times_.resize(n_);
  cause_.assign(n_, -1);
  dependents_begin_.resize(static_cast<size_t>(n_) + 1);
  partner_.assign(n_, -1);
  posted_.assign(n_, 0);
  // Room for two dependencies and one stashing task per instruction (lowered programs need
  // less; more grows the vectors). Pages that are never written are never mapped.
  dependents_.reserve(2 * static_cast<size_t>(n_));
  stash_stages_.reserve(n_);
  per_microbatch_stash_ = !options_.stash_bytes_per_stage_microbatch.empty();
  if (per_microbatch_stash_) {
    if (options_.stash_bytes_per_stage_microbatch.size() !=
        static_cast<size_t>(program_.num_stages) * static_cast<size_t>(program_.num_microbatches))
      throw_input_error("simulator", "stash bytes given for " +
                                         std::to_string(
                                             options_.stash_bytes_per_stage_microbatch.size()) +
                                         " stage-microbatches, the program has " +
                                         std::to_string(program_.num_stages) + " x " +
                                         std::to_string(program_.num_microbatches));
    stash_microbatches_.reserve(n_);
  }
  mem_bytes_.assign(num_actors, 0);
  compute_ended_.assign(num_actors, 0);
  stash_count_stage_.assign(program_.num_stages, 0);
  stash_count_actor_.assign(num_actors, 0);
  result_.actors.resize(num_actors);
  result_.peak_stashed_per_stage.assign(program_.num_stages, 0);

  TagTable tags(static_cast<size_t>(n_) + 1);
  FlatIndex dense_link(static_cast<size_t>(num_actors) * 2);
  int first_unmatched = std::numeric_limits<int>::max();  // smallest g failing the pairing
  // Streams: a chain of next_in_stream links per (actor, StreamId); stream_heads_ lists the
  // chains in order of first appearance. Per actor, slot 0 is the compute stream, 1 the
  // collective stream, 2 + peer the send stream to peer and 2 + num_actors + peer the recv
  // stream from peer; stream_last holds the latest instruction of each slot.
  std::vector<int> stream_last(2 + 2 * static_cast<size_t>(num_actors));
  std::vector<int> count;
  std::vector<std::pair<int, int>> edges;  // this actor's (from, to): to waits for from
  std::vector<int> allreduces;
  // This actor's dense link index per peer (-1: none yet), and the peers it has sent to.
  std::vector<int> link_to_peer(num_actors, -1);
  std::vector<int> sent_to;
  for (int r = 0; r < num_actors; ++r) {
    std::fill(stream_last.begin(), stream_last.end(), -1);
    for (int peer : sent_to) link_to_peer[peer] = -1;
    sent_to.clear();
    edges.clear();
    allreduces.clear();
    bool gathers = false;
    int last_compute = -1;
    const auto& list = program_.actors[r];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const int g = offset_[r] + i;
      const Instruction& in = list[i];
      if (i + kPrefetchDistance < static_cast<int>(list.size())) {
        // deps and tasks live in separate heap blocks, scattered when the program was built
        // actor by actor in an interleaved order; fetching them ahead hides most of the misses.
        const Instruction& ahead = list[i + kPrefetchDistance];
        __builtin_prefetch(ahead.deps.data());
        __builtin_prefetch(ahead.tasks.data());
        if (ahead.op == OpKind::kSend || ahead.op == OpKind::kRecv) tags.prefetch(ahead.tag);
      }
      Node& node = nodes_.emplace_back();
      node.op = in.op;
      for (int d : in.deps) {
        if (d < 0 || d >= i) {
          throw_input_error(
              "program: actor " + std::to_string(r) + " instruction " + std::to_string(i),
              "dependency " + std::to_string(d) + " is not an earlier instruction");
        }
        edges.emplace_back(offset_[r] + d, g);
        ++node.deps_left;
      }
      const bool p2p = in.op == OpKind::kSend || in.op == OpKind::kRecv;
      if (p2p && (in.peer < 0 || in.peer >= num_actors || in.peer == r)) {
        throw_input_error(
            "program: actor " + std::to_string(r) + " instruction " + std::to_string(i),
            "peer " + std::to_string(in.peer) + " out of range");
      }
      size_t slot = 0;
      if (in.op == OpKind::kAllReduce || in.op == OpKind::kAllGather) slot = 1;
      if (in.op == OpKind::kSend) slot = 2 + static_cast<size_t>(in.peer);
      if (in.op == OpKind::kRecv) slot = 2 + static_cast<size_t>(num_actors + in.peer);
      if (stream_last[slot] < 0) {
        stream_heads_.push_back(g);
        node.flags |= kStreamHead;
      } else {
        nodes_[stream_last[slot]].next_in_stream = g;
      }
      stream_last[slot] = g;
      if (p2p) {
        const int side = in.op == OpKind::kSend ? 0 : 1;
        TagEnds& ends = tags.at(in.tag);
        if (ends.g1[side] != 0) {
          throw_input_error(
              "program: actor " + std::to_string(r) + " instruction " + std::to_string(i),
              "duplicate tag " + std::to_string(in.tag));
        }
        ends.g1[side] = g + 1;
        ends.actor1[side] = r + 1;
        ends.peer1[side] = in.peer + 1;
        const int other = ends.g1[1 - side] - 1;
        if (other >= 0) {
          if (ends.actor1[1 - side] - 1 != in.peer || ends.peer1[1 - side] - 1 != r) {
            first_unmatched = std::min(first_unmatched, other);  // both ends fail; other < g
          }
          partner_[g] = other;
          partner_[other] = g;
        }
      }
      if (in.op == OpKind::kOptimizer) node.u.stash = {0, 0, 0, r};  // the actor, for finish()
      if (in.op == OpKind::kCompute) {
        last_compute = g;
        node.u.stash = {static_cast<int>(stash_stages_.size()), 0, 0, r};
        for (const TaskRef& t : in.tasks) {
          if (t.kind != TaskKind::kF) continue;
          stash_stages_.push_back(t.stage >= 0 && t.stage < program_.num_stages ? t.stage : -1);
          if (per_microbatch_stash_) stash_microbatches_.push_back(t.microbatch);
          ++node.u.stash.num_f;
        }
        for (const TaskRef& t : in.tasks) {
          if (t.kind != TaskKind::kB && t.kind != TaskKind::kI) continue;
          stash_stages_.push_back(t.stage >= 0 && t.stage < program_.num_stages ? t.stage : -1);
          if (per_microbatch_stash_) stash_microbatches_.push_back(t.microbatch);
          ++node.u.stash.num_bi;
        }
      }
      if (in.op == OpKind::kSend) {
        result_.actors[r].p2p_send_bytes += in.bytes;
        result_.p2p_bytes += in.bytes;
      }
      if (in.op == OpKind::kAllReduce || in.op == OpKind::kAllGather) {
        result_.actors[r].collective_bytes += in.bytes;
        result_.collective_bytes += in.bytes;
      }
      if (in.op == OpKind::kAllReduce) allreduces.push_back(g);
      if (in.op == OpKind::kAllGather) gathers = true;
      look_up_cost(g, in, r);
      if (in.op == OpKind::kCompute && !(node.flags & kCostDeferred)) {
        const CostProvider::AllToAll a = cost_.alltoall(r, in);
        if (a.busy_s > 0) {
          alltoall_.push_back({g, a.busy_s, a.exposed_s});
          result_.actors[r].alltoall_s += a.busy_s;
          result_.actors[r].alltoall_exposed_s += a.exposed_s;
          result_.alltoall_s += a.busy_s;
          result_.alltoall_exposed_s += a.exposed_s;
        }
      }
      if (in.op == OpKind::kSend) {
        int& l = link_to_peer[in.peer];  // link_id is a function of the actor pair
        if (l < 0) {
          sent_to.push_back(in.peer);
          const int id = cost_.link_id(r, in.peer);
          l = dense_link.emplace(id, static_cast<int>(links_.size()));
          if (l == static_cast<int>(links_.size())) links_.emplace_back();
        }
        node.u.send = {l, in.peer, static_cast<int>(send_bytes_.size())};
        send_bytes_.push_back(in.bytes);
      }
      if (in.op == OpKind::kRecv) node.u.send = {-1, in.peer, -1};
    }
    // Parameter all-gathers share the collective stream and precede computes, so a reduction
    // held back until the last compute would hold them back too: an actor with all-gathers
    // always overlaps its reductions (FSDP has no other mode).
    if (!options_.overlap_grad_reduce && !gathers && last_compute >= 0) {
      for (int a : allreduces) {
        if (a != last_compute) {
          edges.emplace_back(last_compute, a);
          ++nodes_[a].deps_left;
        }
      }
    }
    // This actor's dependents CSR, edges of one `from` in the order they were added.
    const int size = offset_[r + 1] - offset_[r];
    count.assign(size + 1, 0);
    for (const auto& [from, to] : edges) ++count[from - offset_[r] + 1];
    const int dep_base = static_cast<int>(dependents_.size());
    for (int i = 0; i < size; ++i) {
      count[i + 1] += count[i];
      dependents_begin_[offset_[r] + i] = dep_base + count[i];
    }
    dependents_.resize(dep_base + edges.size());
    for (const auto& [from, to] : edges) dependents_[dep_base + count[from - offset_[r]]++] = to;
  }
  dependents_begin_[n_] = static_cast<int>(dependents_.size());
  // Sends and recvs whose partner never appeared.
  tags.for_each([&first_unmatched](const TagEnds& ends) {
    if (!TagTable::used(ends) || (ends.g1[0] != 0 && ends.g1[1] != 0)) return;
    first_unmatched = std::min(first_unmatched, (ends.g1[0] != 0 ? ends.g1[0] : ends.g1[1]) - 1);
  });
  if (first_unmatched < n_) {
    const int r = actor_of(first_unmatched);
    const Instruction& in = ins(first_unmatched);
    throw_input_error("program: actor " + std::to_string(r) + " instruction " +
                          std::to_string(first_unmatched - offset_[r]),
                      std::string("no matching ") + (in.op == OpKind::kSend ? "recv" : "send") +
                          " with tag " + std::to_string(in.tag) + " on actor " +
                          std::to_string(in.peer));
  }
  // Memory.
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
  if (options_.record_trace) start_order_.reserve(n_);
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
  Node& node = nodes_[g];
  if ((node.flags & (kStarted | kPosted | kStreamHead)) != kStreamHead || node.deps_left > 0)
    return;
  if (node.op == OpKind::kSend || node.op == OpKind::kRecv) {
    node.flags |= kPosted;
    posted_[g] = 1;
    cause_[g] = cause;
    const int p = partner_[g];
    if (!posted_[p]) {
      // The transfer starts when the partner posts, and ends at once when it has no latency and
      // no bytes to move: fetch now what its end releases, while this node is in cache.
      prefetch_successors(g);
      return;
    }
    cause_[p] = cause;  // both sides were released by what released the later posting
    if (node.op == OpKind::kSend) {
      start_transfer(g, p);
    } else {
      start_transfer(p, g);
    }
    return;
  }
  start(g, cause);
}

void Engine::start(int g, int cause) {
  Node& node = nodes_[g];
  node.flags |= kStarted;
  cause_[g] = cause;
  times_[g].start_s = now_;
  if (options_.record_trace) start_order_.push_back(g);
  prefetch_successors(g);
  // The actor's next instructions (its sends, recvs and next compute), which this one's end
  // and its transfers touch: two nodes per line.
  for (int k = 2; k <= 8 && g + k < n_; k += 2) __builtin_prefetch(&nodes_[g + k]);
  if (node.flags & kCostDeferred) look_up_cost(g, ins(g), actor_of(g));  // throws again
  const double dur = node.duration_s;
  if (node.op == OpKind::kCompute) {
    const int r = node.u.stash.actor;
    const int* stage = stash_stages_.data() + node.u.stash.begin;
    int64_t added = 0;
    for (int k = 0; k < node.u.stash.num_f; ++k) {
      const int s = stage[k];
      if (s >= 0) {
        int& c = stash_count_stage_[s];
        ++c;
        result_.peak_stashed_per_stage[s] = std::max(result_.peak_stashed_per_stage[s], c);
        added += stash_bytes(s, node.u.stash.begin + k);
      }
      ++stash_count_actor_[r];
      ActorStats& a = result_.actors[r];
      a.peak_stashed_microbatches = std::max(a.peak_stashed_microbatches, stash_count_actor_[r]);
    }
    if (added != 0) memory_delta(r, added);
  }
  if (!(dur >= 0) || !std::isfinite(dur)) {
    const int r = actor_of(g);
    throw_input_error("cost model", "invalid duration for " + to_string(ins(g)) + " on actor " +
                                        std::to_string(r));
  }
  push(now_ + dur, EventType::kFinish, g);
  if (holds_stream(g)) {
    if (!std::isfinite(stream_busy_s_[g])) {
      throw_input_error("cost model", "invalid collective busy time for " + to_string(ins(g)) +
                                          " on actor " + std::to_string(actor_of(g)));
    }
    push(now_ + stream_busy_s_[g], EventType::kStreamRelease, g);
  }
}

void Engine::release_stream(int g) {
  const int next = nodes_[g].next_in_stream;
  if (next < 0) return;
  nodes_[next].flags |= kStreamHead;
  try_start(next, g);
}

void Engine::start_transfer(int send, int recv) {
  Node& s = nodes_[send];
  Node& v = nodes_[recv];
  s.flags |= kStarted;
  v.flags |= kStarted;
  times_[send].start_s = times_[recv].start_s = now_;
  if (options_.record_trace) {
    start_order_.push_back(send);
    start_order_.push_back(recv);
  }
  prefetch_successors(send);
  prefetch_successors(recv);
  if (s.flags & kCostDeferred) look_up_cost(send, ins(send), actor_of(send));  // throws again
  const double latency = s.duration_s;
  // The two actors, from the nodes (each end stores its peer): no search of offset_.
  const int from = v.u.send.peer, to = s.u.send.peer;
  const double bw = cost_.p2p_bandwidth_bytes_per_s(from, to);
  if (!(latency >= 0) || !(bw > 0)) {
    throw_input_error("cost model", "invalid link between actors " + std::to_string(from) +
                                        " and " + std::to_string(to));
  }
  if (send_bytes_[s.u.send.bytes] <= 0 || std::isinf(bw)) {
    push(now_ + latency, EventType::kFinish, send);
    return;
  }
  s.bandwidth_bytes_per_s = bw;  // the latency is no longer needed
  push(now_ + latency, EventType::kTransferJoin, send);
}

void Engine::advance_link(int l) {
  Link& link = links_[l];
  const double dt = now_ - link.last_update_s;
  link.last_update_s = now_;
  if (dt <= 0 || link.active.empty()) return;
  const double n = static_cast<double>(link.active.size());
  for (ActiveTransfer& t : link.active) t.remaining_bytes -= dt * t.bandwidth_bytes_per_s / n;
}

void Engine::schedule_link(int l) {
  Link& link = links_[l];
  link.check_seq = Link::kNoCheck;
  if (link.active.empty()) return;
  const double n = static_cast<double>(link.active.size());
  double best = kInf;
  for (const ActiveTransfer& t : link.active) {
    best = std::min(best, std::max(0.0, t.remaining_bytes) * n / t.bandwidth_bytes_per_s);
  }
  link.check_seq = push(now_ + best, EventType::kLinkCheck, l);
}

void Engine::on_link_check(int l, uint64_t seq) {
  Link& link = links_[l];
  if (seq != link.check_seq) return;  // superseded by a later join or finish on this link
  advance_link(l);
  // The transfer(s) that reached zero: the argmin always, plus any within rounding of zero.
  const double n = static_cast<double>(link.active.size());
  int argmin = -1;
  double best = kInf;
  for (const ActiveTransfer& t : link.active) {
    const double time_s = t.remaining_bytes * n / t.bandwidth_bytes_per_s;
    if (time_s < best) {
      best = time_s;
      argmin = t.send;
    }
  }
  std::vector<int>& finished = finished_scratch_;
  std::vector<ActiveTransfer>& keep = keep_scratch_;
  finished.clear();
  keep.clear();
  for (const ActiveTransfer& t : link.active) {
    if (t.send == argmin || t.remaining_bytes <= 1e-9 * t.bytes + 1e-6) {
      finished.push_back(t.send);
    } else {
      keep.push_back(t);
    }
  }
  link.active.swap(keep);
  schedule_link(l);
  // finish() never re-enters on_link_check, so `finished` stays valid while we iterate.
  for (int s : finished) finish(s);
}

void Engine::finish(int g) {
  Node& node = nodes_[g];
  int ended[2] = {g, -1};
  int num_ended = 1;
  if (node.op == OpKind::kSend) ended[num_ended++] = partner_[g];
  for (int k = 0; k < num_ended; ++k) {
    Node& e = nodes_[ended[k]];
    e.flags |= kDone;
    times_[ended[k]].end_s = now_;
    ++done_count_;
    // The clock never goes back: the last to end is the latest, the lowest index on ties.
    if (last_ended_ < 0 || now_ > times_[last_ended_].end_s ||
        (now_ == times_[last_ended_].end_s && ended[k] < last_ended_))
      last_ended_ = ended[k];
  }
  if (is_compute_stream(node.op)) {
    // An actor's compute stream runs in program order, so its instructions end in index order
    // and busy_s sums their durations in that order (as a pass over the nodes would).
    const int r = node.u.stash.actor;
    ActorStats& a = result_.actors[r];
    const Times& t = times_[g];
    a.busy_s += t.end_s - t.start_s;
    if (compute_ended_[r]) {
      a.first_start_s = std::min(a.first_start_s, t.start_s);
      a.last_end_s = std::max(a.last_end_s, t.end_s);
    } else {
      a.first_start_s = t.start_s;
      a.last_end_s = t.end_s;
      compute_ended_[r] = 1;
    }
  }
  if (node.op == OpKind::kCompute && node.u.stash.num_bi > 0) {
    const int r = node.u.stash.actor;
    const int* stage = stash_stages_.data() + node.u.stash.begin + node.u.stash.num_f;
    int64_t freed = 0;
    for (int k = 0; k < node.u.stash.num_bi; ++k) {
      const int s = stage[k];
      if (s >= 0) {
        --stash_count_stage_[s];
        freed += stash_bytes(s, node.u.stash.begin + node.u.stash.num_f + k);
      }
      --stash_count_actor_[r];
    }
    if (freed != 0) memory_delta(r, -freed);
  }
  for (int k = 0; k < num_ended; ++k) {
    const int e = ended[k];
    if (!holds_stream(e)) release_stream(e);  // else at its kStreamRelease
    for (int i = dependents_begin_[e]; i < dependents_begin_[e + 1]; ++i) {
      const int d = dependents_[i];
      --nodes_[d].deps_left;
      try_start(d, e);
    }
  }
}

void Engine::report_deadlock() const {
  std::string msg = "deadlock: the schedule cannot progress;";
  for (int r = 0; r < program_.num_actors; ++r) {
    int first = -1;
    for (int g = offset_[r]; g < offset_[r + 1]; ++g) {
      if (!(nodes_[g].flags & (kDone | kStarted))) {
        first = g;
        break;
      }
    }
    msg += " actor " + std::to_string(r) + ": ";
    if (first < 0) {
      msg += "finished;";
      continue;
    }
    const Node& node = nodes_[first];
    const Instruction& in = ins(first);
    msg += '#';
    msg += std::to_string(first - offset_[r]);
    msg += ' ';
    msg += to_string(in);
    int head = first;  // the first unfinished instruction of first's stream
    for (int g = offset_[r]; g < first; ++g) {
      if (!(nodes_[g].flags & kDone) && stream_of(ins(g)) == stream_of(in)) {
        head = g;
        break;
      }
    }
    if (head != first) {
      msg += " (waits for #" + std::to_string(head - offset_[r]) + " on its stream)";
    } else if (node.deps_left > 0) {
      msg += " (waits for a dependency)";
    } else if (node.flags & kPosted) {
      msg += " (waits for the peer on actor " + std::to_string(in.peer) + " to post tag " +
             std::to_string(in.tag) + ")";
    }
    msg += ";";
  }
  msg.pop_back();
  throw InputError(msg);
}

// Trace events in (start_s, actor, instruction) order. Instructions started in non-decreasing
// time (the clock never goes back), so start_order_ is sorted by start_s already; only runs of
// equal start times need ordering by global index g, which is (actor, instruction) order.
// Memory samples were appended in non-decreasing time too; equal times are ordered by actor,
// keeping the order of appearance within one actor.
void Engine::fill_trace() {
  SimResult& res = result_;
  const int num_actors = program_.num_actors;
  res.start_s.resize(num_actors);
  res.end_s.resize(num_actors);
  for (int r = 0; r < num_actors; ++r) {
    res.start_s[r].resize(offset_[r + 1] - offset_[r]);
    res.end_s[r].resize(offset_[r + 1] - offset_[r]);
    for (int g = offset_[r]; g < offset_[r + 1]; ++g) {
      res.start_s[r][g - offset_[r]] = times_[g].start_s;
      res.end_s[r][g - offset_[r]] = times_[g].end_s;
    }
  }
  auto by_time_then_index = [this](int a, int b) {
    if (times_[a].start_s != times_[b].start_s) return times_[a].start_s < times_[b].start_s;
    return a < b;
  };
  for (size_t i = 0; i < start_order_.size();) {
    size_t j = i + 1;
    while (j < start_order_.size() &&
           times_[start_order_[j]].start_s == times_[start_order_[i]].start_s)
      ++j;
    if (j - i > 1)
      std::sort(start_order_.begin() + i, start_order_.begin() + j, by_time_then_index);
    i = j;
  }
  assert(std::is_sorted(start_order_.begin(), start_order_.end(), by_time_then_index) &&
         "simulator: instructions started out of time order");
  Trace& tr = res.trace;
  tr.source = "simulated";
  tr.num_actors = num_actors;
  tr.num_steps = 1;
  tr.events.resize(start_order_.size());
  for (size_t k = 0; k < start_order_.size(); ++k) {
    if (k + kPrefetchDistance < start_order_.size()) {
      const int ahead = start_order_[k + kPrefetchDistance];
      __builtin_prefetch(&times_[ahead]);
      __builtin_prefetch(&ins(ahead));
    }
    const int g = start_order_[k];
    const int r = actor_of(g);
    const Instruction& in = program_.actors[r][g - offset_[r]];
    TraceEvent& ev = tr.events[k];
    ev.actor = r;
    ev.instruction = g - offset_[r];
    ev.op = in.op;
    ev.stream = stream_of(in);
    ev.tasks.assign(in.tasks.begin(), in.tasks.end());
    ev.stage = in.stage;
    ev.peer = in.peer;
    ev.bytes = in.bytes;
    ev.tag = in.tag;
    ev.start_s = times_[g].start_s;
    ev.end_s = times_[g].end_s;
  }
  // The all-to-all inside MoE compute instructions, as events of the actor's alltoall stream:
  // from the instruction's start where it is (partly) hidden behind paired compute, at its end
  // where it is serialised.
  if (!alltoall_.empty()) {
    for (const AllToAllTime& a : alltoall_) {
      const int r = actor_of(a.g);
      const Instruction& in = program_.actors[r][a.g - offset_[r]];
      TraceEvent ev;
      ev.actor = r;
      ev.instruction = a.g - offset_[r];
      ev.op = OpKind::kCompute;
      ev.stream = StreamId{StreamKind::kAllToAll, -1};
      ev.tasks.assign(in.tasks.begin(), in.tasks.end());
      ev.stage = in.stage;
      const Times& t = times_[a.g];
      const double busy = std::min(a.busy_s, t.end_s - t.start_s);
      const bool hidden = a.exposed_s < a.busy_s;
      ev.start_s = hidden ? t.start_s : t.end_s - busy;
      ev.end_s = hidden ? t.start_s + busy : t.end_s;
      tr.events.push_back(std::move(ev));
    }
    std::stable_sort(tr.events.begin(), tr.events.end(),
                     [](const TraceEvent& a, const TraceEvent& b) {
                       if (a.start_s != b.start_s) return a.start_s < b.start_s;
                       if (a.actor != b.actor) return a.actor < b.actor;
                       return a.instruction < b.instruction;
                     });
  }
  auto& memory = tr.memory;
  for (size_t i = 0; i < memory.size();) {
    size_t j = i + 1;
    while (j < memory.size() && memory[j].time_s == memory[i].time_s) ++j;
    if (j - i > 1) {
      std::stable_sort(
          memory.begin() + i, memory.begin() + j,
          [](const MemorySample& a, const MemorySample& b) { return a.actor < b.actor; });
    }
    i = j;
  }
}

SimResult Engine::run() {
  build();
  // Initial stream heads, in global order.
  for (int g : stream_heads_) try_start(g, -1);
  Event e{};
  while (next_event(e)) {
    now_ = e.time_s;
    switch (e.type) {
      case EventType::kFinish:
        if (now_ + options_.iteration_overhead_s > options_.stop_after_step_s) {
          result_ = SimResult{};
          result_.stopped = true;
          result_.stopped_at_step_s = now_ + options_.iteration_overhead_s;
          return std::move(result_);
        }
        finish(e.id);
        break;
      case EventType::kTransferJoin: {
        const Node& send = nodes_[e.id];
        const int l = send.u.send.link;
        advance_link(l);
        const double bytes = static_cast<double>(send_bytes_[send.u.send.bytes]);
        links_[l].active.push_back({e.id, bytes, send.bandwidth_bytes_per_s, bytes});
        schedule_link(l);
        break;
      }
      case EventType::kLinkCheck:
        on_link_check(e.id, e.seq);
        break;
      case EventType::kStreamRelease:
        release_stream(e.id);
        break;
    }
  }
  if (done_count_ < n_) report_deadlock();

  // Metrics.
  SimResult& res = result_;
  res.num_instructions = n_;
  const int last = last_ended_;  // busy_s, first_start_s and last_end_s: finish()
  res.makespan_s = last >= 0 ? times_[last].end_s : 0;
  res.step_time_s = res.makespan_s + options_.iteration_overhead_s;
  for (ActorStats& a : res.actors) a.idle_s = res.makespan_s - a.busy_s;
  res.bubble_actor = 0;
  for (int r = 1; r < program_.num_actors; ++r) {
    if (res.actors[r].span_s() > res.actors[res.bubble_actor].span_s()) res.bubble_actor = r;
  }
  if (!res.actors.empty()) {
    const ActorStats& b = res.actors[res.bubble_actor];
    res.bubble_rate = b.span_s() > 0 ? (b.span_s() - b.busy_s) / b.span_s() : 0;
  }
  for (int g = last; g >= 0; g = cause_[g]) {
    const int r = actor_of(g);
    res.critical_path.push_back({r, g - offset_[r], times_[g].start_s, times_[g].end_s});
    if (res.critical_path.size() > static_cast<size_t>(n_)) break;  // defensive: no cycles
  }
  std::reverse(res.critical_path.begin(), res.critical_path.end());

  if (options_.record_trace) fill_trace();
  return std::move(res);
}

}  // namespace

SimResult simulate(const Program& program, const CostProvider& cost, const SimOptions& options) {
  Engine engine(program, cost, options);
  return engine.run();
}

nlohmann::json sim_result_to_json(const SimResult& r, const Program& program) {
  // Objects are filled key by key: nlohmann's initializer-list form first builds every pair as a
  // two-element array, then copies it into the object, several times the cost (a critical path has
  // thousands of steps). The keys are sorted either way (std::map), so the text is the same.
  nlohmann::json actors = nlohmann::json::array();
  actors.get_ref<nlohmann::json::array_t&>().reserve(r.actors.size());
  for (size_t i = 0; i < r.actors.size(); ++i) {
    const ActorStats& a = r.actors[i];
    nlohmann::json& o = actors.emplace_back(nlohmann::json::object());
    o.emplace("actor", i);
    o.emplace("busy_s", a.busy_s);
    o.emplace("idle_s", a.idle_s);
    o.emplace("span_s", a.span_s());
    o.emplace("static_bytes", a.static_bytes);
    o.emplace("peak_memory_bytes", a.peak_memory_bytes);
    o.emplace("peak_stashed_microbatches", a.peak_stashed_microbatches);
    o.emplace("p2p_send_bytes", a.p2p_send_bytes);
    o.emplace("collective_bytes", a.collective_bytes);
    o.emplace("instructions", a.instructions);
    if (r.alltoall_s > 0) {
      o.emplace("alltoall_s", a.alltoall_s);
      o.emplace("alltoall_exposed_s", a.alltoall_exposed_s);
    }
  }
  nlohmann::json peak = nlohmann::json::array();
  for (const ActorStats& a : r.actors) peak.push_back(a.peak_memory_bytes);
  nlohmann::json path = nlohmann::json::array();
  path.get_ref<nlohmann::json::array_t&>().reserve(r.critical_path.size());
  for (const CriticalStep& c : r.critical_path) {
    nlohmann::json& o = path.emplace_back(nlohmann::json::object());
    o.emplace("actor", c.actor);
    o.emplace("instruction", c.instruction);
    o.emplace("name", to_string(program.actors[c.actor][c.instruction]));
    o.emplace("start_s", c.start_s);
    o.emplace("end_s", c.end_s);
  }
  nlohmann::json out = nlohmann::json::object();
  out.emplace("step_time_s", r.step_time_s);
  out.emplace("makespan_s", r.makespan_s);
  out.emplace("bubble_rate", r.bubble_rate);
  out.emplace("bubble_actor", r.bubble_actor);
  out.emplace("tasks", r.num_instructions);
  out.emplace("peak_memory_bytes", std::move(peak));
  out.emplace("peak_stashed_per_stage", r.peak_stashed_per_stage);
  out.emplace("p2p_bytes", r.p2p_bytes);
  out.emplace("collective_bytes", r.collective_bytes);
  out.emplace("actors", std::move(actors));  // moved, not copied
  out.emplace("critical_path", std::move(path));
  if (r.alltoall_s > 0) {
    out["alltoall_s"] = r.alltoall_s;
    out["alltoall_exposed_s"] = r.alltoall_exposed_s;
  }
  return out;
}

}  // namespace jaxpp
