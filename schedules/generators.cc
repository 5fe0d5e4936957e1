// The built-in schedule generators. The exact rules are in ../shared/SCHEDULES.md (JaxPP's
// schedules, ZB-H2, Megatron interleaved) and next to ZB-V and LoopedBFS below; docs/schedules.md
// restates all of them for users.
#include <algorithm>
#include <cassert>
#include <string>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "schedules/registry.h"

namespace jaxpp {
namespace {

// Emits the tasks of one actor, numbering microbatches per (stage, kind) in emission order.
class ActorBuilder {
 public:
  explicit ActorBuilder(int num_stages) : counters_(static_cast<size_t>(num_stages) * 4, 0) {}

  TaskRef next(TaskKind kind, int stage) {
    return TaskRef{kind, stage, counters_[index(kind, stage)]++};
  }
  int count(TaskKind kind, int stage) const { return counters_[index(kind, stage)]; }
  void emit(TaskKind kind, int stage) { items_.push_back({next(kind, stage)}); }
  void emit(ScheduleItem item) { items_.push_back(std::move(item)); }
  void reserve(size_t num_items) { items_.reserve(num_items); }
  std::vector<ScheduleItem> take() { return std::move(items_); }

 private:
  static size_t index(TaskKind kind, int stage) {
    return static_cast<size_t>(stage) * 4 + static_cast<size_t>(kind);
  }
  std::vector<int> counters_;
  std::vector<ScheduleItem> items_;
};

std::string got(std::initializer_list<std::pair<const char*, int>> values) {
  std::string out = " (got ";
  bool first = true;
  for (const auto& [name, value] : values) {
    if (!first) out += ", ";
    first = false;
    out += std::string(name) + "=" + std::to_string(value);
  }
  return out + ")";
}

[[noreturn]] void fail(const std::string& schedule, const std::string& what) {
  throw InputError(schedule + " " + what);
}

struct Shape {
  int p = 0;
  int num_stages = 0;
  int m = 0;
};

enum class Layout { kLinear, kLoop, kV };

// Checks what every schedule needs and resolves the default stage count.
Shape check_shape(const std::string& name, const ScheduleParams& params, Layout layout,
                  bool takes_fuse = false, bool takes_group = false) {
  Shape s;
  s.p = params.num_actors;
  s.m = params.num_microbatches;
  if (s.p < 1) fail(name, "needs p >= 1 actor" + got({{"p", s.p}}));
  if (s.m < 1) fail(name, "needs m >= 1 microbatch" + got({{"m", s.m}}));
  if (params.num_stages < 0) fail(name, "needs S >= 1" + got({{"S", params.num_stages}}));
  if (params.fuse_steady_state && !takes_fuse) {
    fail(name, "does not take fuse_steady_state (only Interleaved1F1B and KimiK2 do)");
  }
  if (params.group_size != 0 && !takes_group) {
    fail(name, "does not take a group size (only MegatronInterleaved does)" +
                   got({{"g", params.group_size}}));
  }
  switch (layout) {
    case Layout::kLinear:
      s.num_stages = params.num_stages == 0 ? s.p : params.num_stages;
      if (s.num_stages != s.p) {
        fail(name,
             "places stage r on actor r: needs S = p" + got({{"S", s.num_stages}, {"p", s.p}}));
      }
      break;
    case Layout::kLoop:
      s.num_stages = params.num_stages == 0 ? s.p : params.num_stages;
      if (s.num_stages % s.p != 0) {
        fail(name, "uses loop placement: needs S divisible by p" +
                       got({{"S", s.num_stages}, {"p", s.p}}));
      }
      break;
    case Layout::kV:
      s.num_stages = params.num_stages == 0 ? 2 * s.p : params.num_stages;
      if (s.num_stages != 2 * s.p) {
        fail(name, "uses V placement (2 stages per actor): needs S = 2p" +
                       got({{"S", s.num_stages}, {"p", s.p}}));
      }
      break;
  }
  return s;
}

Schedule finish(const std::string& name, const Shape& shape, PlacementKind placement,
                std::vector<std::vector<ScheduleItem>> actors, std::vector<bool> split_backward) {
  Schedule s;
  s.name = name;
  s.placement = make_placement(placement, shape.num_stages, shape.p);
  s.num_stages = shape.num_stages;
  s.num_microbatches = shape.m;
  s.actors = std::move(actors);
  s.split_backward = std::move(split_backward);
  return s;
}

// Std1F1B / Eager1F1B: w forwards, then (B, F) pairs, then the remaining backwards.
Schedule one_f_one_b(const std::string& name, const ScheduleParams& params, bool eager) {
  const Shape shape = check_shape(name, params, Layout::kLinear);
  const int S = shape.num_stages;
  const int m = shape.m;
  std::vector<std::vector<ScheduleItem>> actors;
  for (int r = 0; r < shape.p; ++r) {
    ActorBuilder b(S);
    const int w = std::min(eager ? 2 * (S - 1 - r) + 1 : S - r, m);
    for (int k = 0; k < w; ++k) b.emit(TaskKind::kF, r);
    for (int k = 0; k < m - w; ++k) {
      b.emit(TaskKind::kB, r);
      b.emit(TaskKind::kF, r);
    }
    for (int k = m - w; k < m; ++k) b.emit(TaskKind::kB, r);
    actors.push_back(b.take());
  }
  return finish(name, shape, PlacementKind::kLinear, std::move(actors),
                std::vector<bool>(S, false));
}

// Interleaved1F1B (extra_warmup = 0) and KimiK2 (extra_warmup = 1), SCHEDULES.md.
Schedule interleaved(const std::string& name, const ScheduleParams& params, int extra_warmup) {
  const Shape shape = check_shape(name, params, Layout::kLoop, /*takes_fuse=*/true);
  const int p = shape.p;
  const int S = shape.num_stages;
  const int m = shape.m;
  const int v = S / p;
  const int rounds = std::max(1, m / p);
  if (m % rounds != 0) {
    fail(name, "needs m divisible by the number of rounds R = max(1, floor(m/p))" +
                   got({{"m", m}, {"p", p}, {"R", rounds}}));
  }
  const int mpr = m / rounds;
  auto lf = [&](int k) { return (k / mpr) % v; };
  auto lb = [&](int k) { return v - 1 - (k / mpr) % v; };
  std::vector<std::vector<ScheduleItem>> actors;
  for (int r = 0; r < p; ++r) {
    ActorBuilder b(S);
    auto stage = [&](int local) { return local * p + r; };
    const int warmup = std::min((v - 1) * mpr + 2 * (p - 1 - r) + extra_warmup, v * m);
    for (int k = 0; k < warmup; ++k) b.emit(TaskKind::kF, stage(lf(k)));
    for (int k = warmup; k < v * m; ++k) {
      const TaskRef f = b.next(TaskKind::kF, stage(lf(k)));
      const TaskRef bwd = b.next(TaskKind::kB, stage(lb(k - warmup)));
      if (params.fuse_steady_state || f.stage == S - 1) {
        b.emit({f, bwd});
      } else {
        b.emit({f});
        b.emit({bwd});
      }
    }
    for (int k = v * m; k < v * m + warmup; ++k) b.emit(TaskKind::kB, stage(lb(k - warmup)));
    actors.push_back(b.take());
  }
  return finish(name, shape, PlacementKind::kLoop, std::move(actors), std::vector<bool>(S, false));
}

}  // namespace

Schedule make_gpipe(const ScheduleParams& params) {
  const Shape shape = check_shape("GPipe", params, Layout::kLinear);
  std::vector<std::vector<ScheduleItem>> actors;
  for (int r = 0; r < shape.p; ++r) {
    ActorBuilder b(shape.num_stages);
    for (int k = 0; k < shape.m; ++k) b.emit(TaskKind::kF, r);
    for (int k = 0; k < shape.m; ++k) b.emit(TaskKind::kB, r);
    actors.push_back(b.take());
  }
  return finish("GPipe", shape, PlacementKind::kLinear, std::move(actors),
                std::vector<bool>(shape.num_stages, false));
}

Schedule make_std_1f1b(const ScheduleParams& params) {
  return one_f_one_b("Std1F1B", params, /*eager=*/false);
}

Schedule make_eager_1f1b(const ScheduleParams& params) {
  return one_f_one_b("Eager1F1B", params, /*eager=*/true);
}

Schedule make_zero_bubble(const ScheduleParams& params) {
  const Shape shape = check_shape("ZeroBubble", params, Layout::kLinear);
  const int S = shape.num_stages;
  const int m = shape.m;
  if (S < 2) fail("ZeroBubble", "needs S >= 2" + got({{"S", S}}));
  if (m < S) fail("ZeroBubble", "needs m >= S" + got({{"m", m}, {"S", S}}));
  std::vector<std::vector<ScheduleItem>> actors;
  for (int r = 0; r < shape.p; ++r) {
    ActorBuilder b(S);
    b.reserve(3 * static_cast<size_t>(m));
    // (1) S - r forwards; (2) 2r tasks alternating I, F.
    for (int k = 0; k < S - r; ++k) b.emit(TaskKind::kF, r);
    for (int k = 0; k < 2 * r; ++k) b.emit(k % 2 == 0 ? TaskKind::kI : TaskKind::kF, r);
    // (3) cyclic I -> W -> F with a cursor, skipping kinds already at m.
    const TaskKind cycle[3] = {TaskKind::kI, TaskKind::kW, TaskKind::kF};
    int cursor = 0;
    auto total = [&] {
      return b.count(TaskKind::kF, r) + b.count(TaskKind::kI, r) + b.count(TaskKind::kW, r);
    };
    while (total() < 3 * m) {
      for (int step = 0; step < 3; ++step) {
        const int c = (cursor + step) % 3;
        if (b.count(cycle[c], r) < m) {
          b.emit(cycle[c], r);
          cursor = (c + 1) % 3;
          break;
        }
      }
    }
    std::vector<ScheduleItem> items = b.take();
    if (r == 0) {
      // Stage 0: every I is immediately followed by its W; merge them into one B, in place.
      size_t out = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        TaskRef& t = items[i][0];
        const bool merge = t.kind == TaskKind::kI;
        if (merge) {
          assert(i + 1 < items.size() && items[i + 1][0].kind == TaskKind::kW &&
                 items[i + 1][0].microbatch == t.microbatch && "stage 0: I not followed by its W");
          t.kind = TaskKind::kB;
        }
        if (out != i) items[out] = std::move(items[i]);
        ++out;
        if (merge) ++i;  // skip the W, now part of the B
      }
      items.resize(out);
    }
    actors.push_back(std::move(items));
  }
  std::vector<bool> split(S, true);
  split[0] = false;
  return finish("ZeroBubble", shape, PlacementKind::kLinear, std::move(actors), std::move(split));
}

Schedule make_interleaved_1f1b(const ScheduleParams& params) {
  return interleaved("Interleaved1F1B", params, /*extra_warmup=*/0);
}

Schedule make_kimi_k2(const ScheduleParams& params) {
  return interleaved("KimiK2", params, /*extra_warmup=*/1);
}

Schedule make_interleaved_gpipe(const ScheduleParams& params) {
  const std::string name = "InterleavedGPipe";
  const Shape shape = check_shape(name, params, Layout::kLoop);
  const int p = shape.p;
  const int S = shape.num_stages;
  const int m = shape.m;
  const int v = S / p;
  const int rounds = std::max(1, m / p);
  if (m % rounds != 0) {
    fail(name, "needs m divisible by the number of rounds R = max(1, floor(m/p))" +
                   got({{"m", m}, {"p", p}, {"R", rounds}}));
  }
  const int mpr = m / rounds;
  std::vector<std::vector<ScheduleItem>> actors;
  for (int r = 0; r < p; ++r) {
    ActorBuilder b(S);
    // Round-major; within a round local stages ascending (F) or descending (B).
    for (int k = 0; k < v * m; ++k) b.emit(TaskKind::kF, ((k / mpr) % v) * p + r);
    for (int k = 0; k < v * m; ++k) b.emit(TaskKind::kB, (v - 1 - (k / mpr) % v) * p + r);
    actors.push_back(b.take());
  }
  return finish(name, shape, PlacementKind::kLoop, std::move(actors), std::vector<bool>(S, false));
}

Schedule make_dualpipe_v(const ScheduleParams& params) {
  const std::string name = "DualPipeV";
  const Shape shape = check_shape(name, params, Layout::kV);
  const int p = shape.p;
  const int S = shape.num_stages;
  const int m = shape.m;
  if (m < 2 * p) fail(name, "needs m >= 2p" + got({{"m", m}, {"p", p}}));
  std::vector<std::vector<ScheduleItem>> actors;
  for (int r = 0; r < p; ++r) {
    ActorBuilder b(S);
    const int a = r;
    const int bs = 2 * p - 1 - r;
    std::vector<std::vector<bool>> w_done(S, std::vector<bool>(m, false));
    auto F = [&](int x) { b.emit(TaskKind::kF, x); };
    auto I_only = [&](int x) { b.emit(TaskKind::kI, x); };
    auto bwd = [&](int x) {
      const TaskRef i = b.next(TaskKind::kI, x);
      w_done[x][i.microbatch] = true;
      b.emit({i, TaskRef{TaskKind::kW, x, i.microbatch}});
    };
    auto fb = [&](int x, int y) {
      const TaskRef f = b.next(TaskKind::kF, x);
      const TaskRef i = b.next(TaskKind::kI, y);
      w_done[y][i.microbatch] = true;
      b.emit({f, i, TaskRef{TaskKind::kW, y, i.microbatch}});
    };
    // 1.
    for (int k = 0; k < 2 * (p - 1 - r); ++k) F(a);
    // 2.
    for (int k = 0; k < r + 1; ++k) {
      F(a);
      F(bs);
    }
    // 3. [I(b), W(b), F(b)] as three items.
    for (int k = 0; k < p - 1 - r; ++k) {
      const TaskRef i = b.next(TaskKind::kI, bs);
      b.emit({i});
      w_done[bs][i.microbatch] = true;
      b.emit({TaskRef{TaskKind::kW, bs, i.microbatch}});
      F(bs);
    }
    // 4.
    const int n = m - 2 * p + r + 1;
    for (int j = 0; j < n; ++j) {
      if (j == 0 && r == p - 1) {
        F(a);
        bwd(bs);
      } else {
        fb(a, bs);
      }
      fb(bs, a);
    }
    // 5.
    for (int k = 0; k < p - 1 - r; ++k) {
      bwd(bs);
      fb(bs, a);
    }
    // 6.
    const int z = (r + 1) / 2;
    for (int j = 0; j < r + 1; ++j) {
      if (j >= z && r % 2 == 1) {
        I_only(bs);
      } else {
        bwd(bs);
      }
      if (a != 0 && j >= z && r % 2 == 0) {
        I_only(a);
      } else {
        bwd(a);
      }
    }
    // 7.
    for (int k = 0; k < p - 1 - r; ++k) {
      if (a == 0) {
        bwd(a);
      } else {
        I_only(a);
      }
    }
    // 8. Every W still missing, sorted by (microbatch, stage).
    for (int k = 0; k < m; ++k) {
      for (int x : {std::min(a, bs), std::max(a, bs)}) {
        if (!w_done[x][k]) b.emit({TaskRef{TaskKind::kW, x, k}});
      }
    }
    actors.push_back(b.take());
  }
  return finish(name, shape, PlacementKind::kV, std::move(actors), std::vector<bool>(S, true));
}

// ZB-H2 (SCHEDULES.md): warm-up min(2(p-r)-1, m) forwards; alternate I, F while forwards remain;
// then alternate I, W while input-gradients remain; then the remaining W.
Schedule make_zb_h2(const ScheduleParams& params) {
  const std::string name = "ZB-H2";
  const Shape shape = check_shape(name, params, Layout::kLinear);
  const int S = shape.num_stages;
  const int m = shape.m;
  std::vector<std::vector<ScheduleItem>> actors;
  for (int r = 0; r < shape.p; ++r) {
    ActorBuilder b(S);
    const int warmup = std::min(2 * (shape.p - r) - 1, m);
    for (int k = 0; k < warmup; ++k) b.emit(TaskKind::kF, r);
    while (b.count(TaskKind::kF, r) < m) {
      b.emit(TaskKind::kI, r);
      b.emit(TaskKind::kF, r);
    }
    while (b.count(TaskKind::kI, r) < m) {
      b.emit(TaskKind::kI, r);
      b.emit(TaskKind::kW, r);
    }
    while (b.count(TaskKind::kW, r) < m) b.emit(TaskKind::kW, r);
    actors.push_back(b.take());
  }
  return finish(name, shape, PlacementKind::kLinear, std::move(actors), std::vector<bool>(S, true));
}

// ZB-V, the exact rule (PyTorch torch.distributed.pipelining ScheduleZBVZeroBubble, which
// implements the Zero Bubble paper's ZB-V): V placement, actor r owns chunk 0 = stage r and
// chunk 1 = stage 2p-1-r; every stage uses I and W. With n = max(2p-1, m):
//   warm-up 1: 2(p-r)-1 x F(c0)
//   warm-up 2: r x [F(c1), F(c0)]
//   warm-up 3: (p-r) x [F(c1), I(c1), W(c1)]
//   steady, while F(c1) count < F(c0) count or F(c0) count < n:
//       [F(c0) if its count < n], I(c0), W(c0), F(c1), I(c1), W(c1)
//   cool-down 1: r x [I(c0), I(c1)]
//   cool-down 2: (p-r) x [I(c0), W(c0)]   (W counters continue from where steady left them)
//   then the remaining W(c1), then the remaining W(c0), each in microbatch order.
// Every W carries the microbatch of the I it follows in the same phase (W counters are the I
// counters in warm-up 3 and steady). Tasks whose microbatch is >= m (only when m < 2p-1) are
// dropped, as PyTorch does.
Schedule make_zb_v(const ScheduleParams& params) {
  const std::string name = "ZB-V";
  const Shape shape = check_shape(name, params, Layout::kV);
  const int p = shape.p;
  const int S = shape.num_stages;
  const int m = shape.m;
  const int n = std::max(2 * p - 1, m);
  std::vector<std::vector<ScheduleItem>> actors;
  for (int r = 0; r < p; ++r) {
    const int c0 = r;
    const int c1 = S - 1 - r;
    std::vector<ScheduleItem> items;
    auto emit = [&](TaskKind kind, int stage, int microbatch) {
      if (microbatch < m) items.push_back({TaskRef{kind, stage, microbatch}});
    };
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    for (int k = 0; k < 2 * (p - r) - 1; ++k) emit(TaskKind::kF, c0, f0++);
    for (int k = 0; k < r; ++k) {
      emit(TaskKind::kF, c1, f1++);
      emit(TaskKind::kF, c0, f0++);
    }
    for (int k = 0; k < p - r; ++k) {
      emit(TaskKind::kF, c1, f1++);
      emit(TaskKind::kI, c1, b1);
      emit(TaskKind::kW, c1, b1++);
    }
    while (f1 < f0 || f0 < n) {
      if (f0 < n) emit(TaskKind::kF, c0, f0++);
      emit(TaskKind::kI, c0, b0);
      emit(TaskKind::kW, c0, b0++);
      emit(TaskKind::kF, c1, f1++);
      emit(TaskKind::kI, c1, b1);
      emit(TaskKind::kW, c1, b1++);
    }
    int w0 = b0, w1 = b1;
    for (int k = 0; k < r; ++k) {
      emit(TaskKind::kI, c0, b0++);
      emit(TaskKind::kI, c1, b1++);
    }
    for (int k = 0; k < p - r; ++k) {
      emit(TaskKind::kI, c0, b0++);
      emit(TaskKind::kW, c0, w0++);
    }
    while (w1 < b1) emit(TaskKind::kW, c1, w1++);
    while (w0 < b0) emit(TaskKind::kW, c0, w0++);
    actors.push_back(std::move(items));
  }
  return finish(name, shape, PlacementKind::kV, std::move(actors), std::vector<bool>(S, true));
}

// LoopedBFS, the exact rule (PyTorch torch.distributed.pipelining ScheduleLoopedBFS): loop
// placement, actor r owns stages l·p + r, l = 0..v-1. For l = 0..v-1 (ascending) run
// F0..F(m-1) of stage l·p + r; then for l = v-1..0 (descending) run B(m-1)..B0 of that stage
// (backwards in reverse microbatch order, as PyTorch does). Full backward B on every stage.
Schedule make_looped_bfs(const ScheduleParams& params) {
  const std::string name = "LoopedBFS";
  const Shape shape = check_shape(name, params, Layout::kLoop);
  const int p = shape.p;
  const int S = shape.num_stages;
  const int m = shape.m;
  const int v = S / p;
  std::vector<std::vector<ScheduleItem>> actors;
  for (int r = 0; r < p; ++r) {
    std::vector<ScheduleItem> items;
    for (int l = 0; l < v; ++l) {
      for (int k = 0; k < m; ++k) items.push_back({TaskRef{TaskKind::kF, l * p + r, k}});
    }
    for (int l = v - 1; l >= 0; --l) {
      for (int k = m - 1; k >= 0; --k) items.push_back({TaskRef{TaskKind::kB, l * p + r, k}});
    }
    actors.push_back(std::move(items));
  }
  return finish(name, shape, PlacementKind::kLoop, std::move(actors), std::vector<bool>(S, false));
}

// Megatron-LM interleaved 1F1B with microbatch group size g (SCHEDULES.md): the virtual
// microbatch table walks microbatches in groups of g (the last group may be smaller, as in
// Megatron's get_schedule_table; with v > 1 we require m % g == 0, see below); within a group all
// its microbatches of chunk 0, then chunk 1,
// ... Forward k runs table[k] on chunk c; backward k runs table[k] on chunk v-1-c.
// Warm-up min(2(p-r-1) + (v-1)·g, m·v) forwards, then (F, B) pairs, then the remaining B.
Schedule make_megatron_interleaved(const ScheduleParams& params) {
  const std::string name = "MegatronInterleaved";
  const Shape shape =
      check_shape(name, params, Layout::kLoop, /*takes_fuse=*/false, /*takes_group=*/true);
  const int p = shape.p;
  const int S = shape.num_stages;
  const int m = shape.m;
  const int v = S / p;
  const int g = params.group_size == 0 ? p : params.group_size;
  if (g < p || g > m) {
    fail(name, "needs p <= g <= m for the group size" + got({{"p", p}, {"g", g}, {"m", m}}));
  }
  // A smaller last group (Megatron's get_schedule_table allows one) deadlocks this warm-up
  // rule when v > 1, so require whole groups.
  if (v > 1 && m % g != 0) {
    fail(name, "needs m divisible by the group size g when v > 1" + got({{"m", m}, {"g", g}}));
  }
  std::vector<std::pair<int, int>> table;  // (microbatch, chunk)
  for (int start = 0; start < m; start += g) {
    const int end = std::min(start + g, m);
    for (int c = 0; c < v; ++c) {
      for (int k = start; k < end; ++k) table.emplace_back(k, c);
    }
  }
  const int total = m * v;
  std::vector<std::vector<ScheduleItem>> actors;
  for (int r = 0; r < p; ++r) {
    std::vector<ScheduleItem> items;
    auto fwd = [&](int k) {
      items.push_back({TaskRef{TaskKind::kF, table[k].second * p + r, table[k].first}});
    };
    auto bwd = [&](int k) {
      items.push_back({TaskRef{TaskKind::kB, (v - 1 - table[k].second) * p + r, table[k].first}});
    };
    const int warmup = std::min(2 * (p - r - 1) + (v - 1) * g, total);
    for (int k = 0; k < warmup; ++k) fwd(k);
    for (int k = 0; k < total - warmup; ++k) {
      fwd(warmup + k);
      bwd(k);
    }
    for (int k = total - warmup; k < total; ++k) bwd(k);
    actors.push_back(std::move(items));
  }
  return finish(name, shape, PlacementKind::kLoop, std::move(actors), std::vector<bool>(S, false));
}

}  // namespace jaxpp
