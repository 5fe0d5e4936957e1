#include "simulator/synthesize.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <queue>
#include <stdexcept>
#include <utility>

#include "costmodel/analytic_cost.h"
#include "costmodel/cluster.h"
#include "costmodel/memory.h"
#include "graph/error.h"
#include "graph/limits.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

constexpr double kSynthInf = std::numeric_limits<double>::infinity();
constexpr double kSynthUnknown = -1.0;  // a time not known yet (all real times are >= 0)

// One task of an actor's order; the stage is the actor (one stage per actor).
enum class SynthOp : uint8_t { kF, kI, kW, kB };
struct SynthTask {
  SynthOp op = SynthOp::kF;
  int32_t mb = 0;
  bool operator==(const SynthTask&) const = default;
};
using SynthOrders = std::vector<std::vector<SynthTask>>;

// Flat per-stage durations in seconds.
struct SynthTimes {
  std::vector<double> f, i, w, comm;
};

SynthTimes synth_times(const StageTimes& t) { return {t.t_f_s, t.t_b_s, t.t_w_s, t.t_comm_s}; }

// Replay of per-actor orders with the engine's measured-mode semantics; see replay_makespan_s.
class OrderReplay {
 public:
  OrderReplay(int p, int m, const SynthTimes& t) : p_(p), m_(m), t_(t) {
    const size_t n = static_cast<size_t>(p) * m;
    end_f_.resize(n);
    end_i_.resize(n);
    arr_f_.resize(n);
    arr_g_.resize(n);
  }

  // Makespan (+inf on deadlock); `max_span` gets the longest actor span (first start to last
  // end), `sum_last_end` Σ over actors of their last task's end.
  double run(const SynthOrders& orders, double* max_span, double* sum_last_end) {
    std::fill(end_f_.begin(), end_f_.end(), kSynthUnknown);
    std::fill(end_i_.begin(), end_i_.end(), kSynthUnknown);
    std::fill(arr_f_.begin(), arr_f_.end(), kSynthUnknown);
    std::fill(arr_g_.begin(), arr_g_.end(), kSynthUnknown);
    pos_.assign(p_, 0);
    free_.assign(p_, 0.0);
    first_.assign(p_, -1.0);
    link_f_.assign(p_, 0.0);
    link_g_.assign(p_, 0.0);
    queued_.assign(p_, 1);
    stack_.clear();
    for (int r = p_ - 1; r >= 0; --r) stack_.push_back(r);
    while (!stack_.empty()) {
      const int r = stack_.back();
      stack_.pop_back();
      queued_[r] = 0;
      advance(orders, r);
    }
    double makespan = 0, sum = 0, span = 0;
    for (int r = 0; r < p_; ++r) {
      if (pos_[r] < orders[r].size()) return kSynthInf;
      makespan = std::max(makespan, free_[r]);
      span = std::max(span, free_[r] - std::max(0.0, first_[r]));
      sum += free_[r];
    }
    if (max_span) *max_span = span;
    if (sum_last_end) *sum_last_end = sum;
    return makespan;
  }

 private:
  void wake(int r) {
    if (queued_[r]) return;
    queued_[r] = 1;
    stack_.push_back(r);
  }

  void advance(const SynthOrders& orders, int r) {
    const std::vector<SynthTask>& list = orders[r];
    const size_t base = static_cast<size_t>(r) * m_;
    while (pos_[r] < list.size()) {
      const SynthTask task = list[pos_[r]];
      const size_t at = base + task.mb;
      double ready = free_[r];
      double dur = 0;
      switch (task.op) {
        case SynthOp::kF:
          if (r > 0) {
            if (arr_f_[at] < 0) return;
            ready = std::max(ready, arr_f_[at]);
          }
          dur = t_.f[r];
          break;
        case SynthOp::kI:
        case SynthOp::kB:
          if (end_f_[at] < 0) return;
          ready = std::max(ready, end_f_[at]);
          if (r < p_ - 1) {
            if (arr_g_[at] < 0) return;
            ready = std::max(ready, arr_g_[at]);
          }
          dur = task.op == SynthOp::kB ? t_.i[r] + t_.w[r] : t_.i[r];
          break;
        case SynthOp::kW:
          if (end_i_[at] < 0) return;
          ready = std::max(ready, end_i_[at]);
          dur = t_.w[r];
          break;
      }
      const double end = ready + dur;
      if (pos_[r] == 0) first_[r] = ready;
      free_[r] = end;
      ++pos_[r];
      if (task.op == SynthOp::kF) {
        end_f_[at] = end;
        if (r < p_ - 1) {
          const double start = std::max(end, link_f_[r]);
          link_f_[r] = start + t_.comm[r];
          arr_f_[at + m_] = link_f_[r];
          wake(r + 1);
        }
      } else if (task.op != SynthOp::kW) {
        end_i_[at] = end;
        if (r > 0) {
          const double start = std::max(end, link_g_[r]);
          link_g_[r] = start + t_.comm[r];
          arr_g_[at - m_] = link_g_[r];
          wake(r - 1);
        }
      }
    }
  }

  int p_, m_;
  const SynthTimes& t_;
  std::vector<double> end_f_, end_i_, arr_f_, arr_g_;
  std::vector<size_t> pos_;
  std::vector<double> free_, first_, link_f_, link_g_;
  std::vector<char> queued_;
  std::vector<int> stack_;
};

// ---- Greedy construction ----------------------------------------------------------------------

struct SynthGreedyParams {
  int warmup_scale = 1;        // a in w_r = a·(p-r)+b; 0 = as many as the budget allows
  int warmup_offset = 0;       // b
  bool cap_is_budget = false;  // steady-state forwards up to K_r stashed (else up to w_r)
  // When an actor has nothing else to run: kEager runs a pending W; kGapAware runs it unless the
  // next F/I is known to arrive within T_W; kLazy also waits while the next arrival is unknown
  // (keeps W for known gaps and the tail, so the I chain back to actor 0 is not delayed).
  enum class WPolicy { kEager, kGapAware, kLazy } w_policy = WPolicy::kEager;
  // An I whose gradient has arrived runs before a warm-up forward (ending the warm-up early), and
  // no forward starts when the next I's gradient is known to arrive before that forward would
  // end: the I chain from the last stage back to the first is then never delayed by a forward,
  // which shortens the wait before the first I of every stage (the Zero Bubble paper's bubble
  // before the first B, its appendix B).
  bool i_first = false;

  std::string describe() const {
    std::string s = "greedy(warm-up ";
    if (warmup_scale == 0) {
      s += "K";
    } else {
      s += (warmup_scale == 1 ? "" : std::to_string(warmup_scale)) + "(p-r)";
      if (warmup_offset > 0) s += "+" + std::to_string(warmup_offset);
      if (warmup_offset < 0) s += std::to_string(warmup_offset);
    }
    s += cap_is_budget ? ", steady cap K" : ", steady cap warm-up";
    s += w_policy == WPolicy::kEager      ? ", eager W"
         : w_policy == WPolicy::kGapAware ? ", gap-aware W"
                                          : ", lazy W";
    s += i_first ? ", I first)" : ")";
    return s;
  }
};

SynthOrders greedy_orders(int p, int m, const SynthTimes& t, const std::vector<int>& budget,
                          const SynthGreedyParams& g) {
  const size_t n = static_cast<size_t>(p) * m;
  std::vector<double> end_f(n, kSynthUnknown), end_i(n, kSynthUnknown), arr_f(n, kSynthUnknown),
      arr_g(n, kSynthUnknown);
  std::vector<double> free_at(p, 0.0), link_f(p, 0.0), link_g(p, 0.0);
  std::vector<int> nf(p, 0), ni(p, 0), nw(p, 0), warm(p), cap(p);
  std::vector<char> waiting(p, 0);
  for (int r = 0; r < p; ++r) {
    const int limit = std::min(budget[r], m);
    const int want = g.warmup_scale == 0 ? limit : g.warmup_scale * (p - r) + g.warmup_offset;
    warm[r] = std::clamp(want, 1, limit);
    cap[r] = g.cap_is_budget ? limit : warm[r];
  }
  SynthOrders orders(p);
  for (auto& o : orders) o.reserve(3 * static_cast<size_t>(m));
  auto done = [&](int r) { return nw[r] == m; };
  // Ready time of the next F / I of actor r: kSynthInf when not allowed, kSynthUnknown when its
  // producer has not run yet.
  auto ready_f = [&](int r, int limit) {
    if (nf[r] >= m || nf[r] - ni[r] >= limit) return kSynthInf;
    return r == 0 ? 0.0 : arr_f[static_cast<size_t>(r) * m + nf[r]];
  };
  auto ready_i = [&](int r) {
    if (ni[r] >= nf[r]) return kSynthInf;
    const size_t at = static_cast<size_t>(r) * m + ni[r];
    if (r == p - 1) return end_f[at];
    if (arr_g[at] < 0) return kSynthUnknown;
    return std::max(end_f[at], arr_g[at]);
  };
  auto run = [&](int r, SynthOp op, int mb, double start) {
    const size_t at = static_cast<size_t>(r) * m + mb;
    double dur = op == SynthOp::kF ? t.f[r] : op == SynthOp::kI ? t.i[r] : t.w[r];
    const double end = start + dur;
    free_at[r] = end;
    orders[r].push_back({op, mb});
    if (op == SynthOp::kF) {
      end_f[at] = end;
      ++nf[r];
      if (r < p - 1) {
        link_f[r] = std::max(end, link_f[r]) + t.comm[r];
        arr_f[at + m] = link_f[r];
      }
    } else if (op == SynthOp::kI) {
      end_i[at] = end;
      ++ni[r];
      if (r > 0) {
        link_g[r] = std::max(end, link_g[r]) + t.comm[r];
        arr_g[at - m] = link_g[r];
      }
    } else {
      ++nw[r];
    }
  };
  auto known_le = [](double ready, double now) { return ready >= 0 && ready <= now; };
  // Returns true when actor r ran a task at time `now`.
  auto decide = [&](int r, double now) {
    const bool in_warmup = ni[r] == 0 && nf[r] < warm[r];
    const double ri = ready_i(r);
    if (g.i_first && known_le(ri, now)) {
      run(r, SynthOp::kI, ni[r], now);
      return true;
    }
    // i_first: a forward started now would delay an I known to arrive before it ends.
    const bool hold_f = g.i_first && ni[r] == 0 && ri >= 0 && ri < now + t.f[r];
    const double rf_warm = ready_f(r, warm[r]);
    if (in_warmup && !hold_f && known_le(rf_warm, now)) {
      run(r, SynthOp::kF, nf[r], now);
      return true;
    }
    if (known_le(ri, now)) {
      run(r, SynthOp::kI, ni[r], now);
      return true;
    }
    const double rf = ready_f(r, in_warmup ? warm[r] : cap[r]);
    if (!hold_f && known_le(rf, now)) {
      run(r, SynthOp::kF, nf[r], now);
      return true;
    }
    if (nw[r] < ni[r]) {
      bool fill = true;
      if (g.w_policy != SynthGreedyParams::WPolicy::kEager) {
        double next = kSynthInf;
        bool unknown = false;
        for (double x : {ri, rf}) {
          if (x >= 0) next = std::min(next, x);
          if (x == kSynthUnknown) unknown = true;
        }
        fill = next - now >= t.w[r];
        if (g.w_policy == SynthGreedyParams::WPolicy::kLazy && unknown) fill = false;
      }
      if (fill) {
        run(r, SynthOp::kW, nw[r], now);
        return true;
      }
    }
    return false;
  };
  // Event loop: an actor re-decides when its task ends, when a dependency it knows of becomes
  // ready, and when a neighbour runs a task whose result it needs (so a waiting actor learns an
  // arrival time as soon as it is known). Heap entries that no longer match wake_at are stale.
  using Wake = std::pair<double, int>;
  std::priority_queue<Wake, std::vector<Wake>, std::greater<Wake>> heap;
  std::vector<double> wake_at(p, 0.0);
  for (int r = 0; r < p; ++r) heap.push({0.0, r});
  double now = 0;
  auto wake_neighbour = [&](int q) {
    if (q < 0 || q >= p || !waiting[q] || wake_at[q] <= now) return;
    wake_at[q] = now;
    heap.push({now, q});
  };
  while (true) {
    while (!heap.empty()) {
      const auto [time, r] = heap.top();
      heap.pop();
      if (time != wake_at[r] || done(r)) continue;
      now = time;
      const int before_f = nf[r], before_i = ni[r];
      if (decide(r, now)) {
        waiting[r] = 0;
        wake_at[r] = free_at[r];
        heap.push({free_at[r], r});
        if (nf[r] != before_f) wake_neighbour(r + 1);
        if (ni[r] != before_i) wake_neighbour(r - 1);
        continue;
      }
      waiting[r] = 1;
      double next = kSynthInf;
      for (double x : {ready_i(r), ready_f(r, ni[r] == 0 && nf[r] < warm[r] ? warm[r] : cap[r])})
        if (x > now && x < kSynthInf) next = std::min(next, x);
      wake_at[r] = next;
      if (next < kSynthInf) heap.push({next, r});
    }
    if (std::all_of(nw.begin(), nw.end(), [&](int w) { return w == m; })) break;
    // Only W that a gap-aware or lazy policy held back can be left: run one on the first actor.
    int r = 0;
    while (r < p && (done(r) || nw[r] >= ni[r])) ++r;
    if (r == p) throw std::logic_error("synthesize: greedy construction made no progress");
    run(r, SynthOp::kW, nw[r], std::max(now, free_at[r]));
    waiting[r] = 0;
    wake_at[r] = free_at[r];
    heap.push({free_at[r], r});
  }
  return orders;
}

// ---- Conversions -----------------------------------------------------------------------------

Schedule schedule_of_orders(int p, int m, const SynthOrders& orders) {
  Schedule s;
  s.name = "synthesized";
  s.placement = make_placement(PlacementKind::kLinear, p, p);
  s.num_stages = p;
  s.num_microbatches = m;
  s.split_backward.assign(p, true);
  s.actors.resize(p);
  for (int r = 0; r < p; ++r) {
    s.actors[r].reserve(orders[r].size());
    for (const SynthTask& t : orders[r]) {
      const TaskKind kind = t.op == SynthOp::kF   ? TaskKind::kF
                            : t.op == SynthOp::kI ? TaskKind::kI
                            : t.op == SynthOp::kW ? TaskKind::kW
                                                  : TaskKind::kB;
      s.actors[r].push_back({TaskRef{kind, r, t.mb}});
    }
  }
  return s;
}

// Orders of a one-stage-per-actor schedule of single-task items; a B becomes I then W (the
// search's form). false when the schedule does not have that shape.
bool orders_of_schedule(const Schedule& s, SynthOrders& out, bool split_b) {
  const int p = s.num_actors();
  if (s.num_stages != p) return false;
  out.assign(p, {});
  for (int r = 0; r < p; ++r) {
    for (const ScheduleItem& item : s.actors[r]) {
      if (item.size() != 1 || item[0].stage != r) return false;
      const TaskRef& t = item[0];
      switch (t.kind) {
        case TaskKind::kF:
          out[r].push_back({SynthOp::kF, t.microbatch});
          break;
        case TaskKind::kI:
          out[r].push_back({SynthOp::kI, t.microbatch});
          break;
        case TaskKind::kW:
          out[r].push_back({SynthOp::kW, t.microbatch});
          break;
        case TaskKind::kB:
          if (split_b) {
            out[r].push_back({SynthOp::kI, t.microbatch});
            out[r].push_back({SynthOp::kW, t.microbatch});
          } else {
            out[r].push_back({SynthOp::kB, t.microbatch});
          }
          break;
      }
    }
  }
  return true;
}

// ---- Local search ----------------------------------------------------------------------------

// Lexicographic: the step (makespan), then the longest actor span (with the busy time fixed by the
// stage times, the bubble rate's numerator), then Σ actors' last ends (finishing early elsewhere
// makes room for later moves).
struct SynthScore {
  double makespan = kSynthInf;
  double max_span = kSynthInf;
  double sum_last_end = kSynthInf;
  bool better_than(const SynthScore& o) const {
    if (!std::isfinite(o.makespan)) return std::isfinite(makespan);
    auto less = [](double a, double b) { return a < b - 1e-12 * std::max(1e-9, std::abs(b)); };
    if (less(makespan, o.makespan)) return true;
    if (less(o.makespan, makespan)) return false;
    if (less(max_span, o.max_span)) return true;
    if (less(o.max_span, max_span)) return false;
    return less(sum_last_end, o.sum_last_end);
  }
};

class SynthLocalSearch {
 public:
  SynthLocalSearch(int p, int m, const SynthTimes& t, const std::vector<int>& budget,
                   const SynthesisOptions& options)
      : p_(p),
        budget_(budget),
        options_(options),
        replay_(p, m, t),
        call_start_(std::chrono::steady_clock::now()) {}

  SynthScore score(const SynthOrders& orders) {
    SynthScore s;
    s.makespan = replay_.run(orders, &s.max_span, &s.sum_last_end);
    return s;
  }

  // Improves `orders` in place; returns why it stopped.
  std::string improve(SynthOrders& orders, SynthScore& best) {
    start_ = std::chrono::steady_clock::now();
    last_report_ = start_;
    while (true) {
      bool improved_round = false;
      for (int r = 0; r < p_; ++r) {
        std::vector<SynthTask>& list = orders[r];
        for (size_t i = 0; i < list.size(); ++i) {
          // (a) a W moved up to 4 positions either way.
          if (list[i].op == SynthOp::kW) {
            for (int d : {-1, 1, -2, 2, -4, 4}) {
              if (const char* stop = out_of_budget()) return stop;
              if (try_move_w(orders, r, i, d, best)) {
                improved_round = true;
                break;
              }
            }
          }
          // (b) adjacent F and I swapped.
          if (i + 1 < list.size() && list[i].op != SynthOp::kW && list[i + 1].op != SynthOp::kW &&
              list[i].op != list[i + 1].op) {
            if (const char* stop = out_of_budget()) return stop;
            if (try_swap(orders, r, i, best)) improved_round = true;
          }
        }
      }
      if (!improved_round) return "local-optimum";
    }
  }

  int64_t evaluations() const { return evaluations_; }
  // The synthesis's time budget is spent (counted from the construction of this search).
  bool out_of_time() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - call_start_).count() >=
           options_.time_budget_s;
  }
  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  const char* out_of_budget() {
    if (options_.max_evaluations > 0 && evaluations_ >= options_.max_evaluations)
      return "evaluation-budget";
    if ((evaluations_ & 15) == 0) {
      const auto now = std::chrono::steady_clock::now();
      // The budget counts from the start of the synthesis (the constructions and the built-in
      // schedules' simulations come first and always run: the search needs a candidate).
      if (std::chrono::duration<double>(now - call_start_).count() >= options_.time_budget_s)
        return "time-budget";
      if (options_.progress && now - last_report_ >= std::chrono::milliseconds(500)) {
        last_report_ = now;
        options_.progress({elapsed_s(), evaluations_, best_makespan_});
      }
    }
    return nullptr;
  }

  bool accept_if_better(const SynthOrders& orders, SynthScore& best) {
    ++evaluations_;
    const SynthScore s = score(orders);
    if (!s.better_than(best)) return false;
    best = s;
    best_makespan_ = s.makespan;
    return true;
  }

  bool try_move_w(SynthOrders& orders, int r, size_t i, int d, SynthScore& best) {
    std::vector<SynthTask>& list = orders[r];
    const int64_t j = static_cast<int64_t>(i) + d;
    if (j < 0 || j >= static_cast<int64_t>(list.size())) return false;
    const SynthTask w = list[i];
    if (d < 0) {
      // Must stay after its I.
      for (int64_t x = j; x < static_cast<int64_t>(i); ++x)
        if (list[x].op == SynthOp::kI && list[x].mb == w.mb) return false;
      std::rotate(list.begin() + j, list.begin() + i, list.begin() + i + 1);
    } else {
      std::rotate(list.begin() + i, list.begin() + i + 1, list.begin() + j + 1);
    }
    if (accept_if_better(orders, best)) return true;
    if (d < 0) {
      std::rotate(list.begin() + j, list.begin() + j + 1, list.begin() + i + 1);
    } else {
      std::rotate(list.begin() + i, list.begin() + j, list.begin() + j + 1);
    }
    return false;
  }

  bool try_swap(SynthOrders& orders, int r, size_t i, SynthScore& best) {
    std::vector<SynthTask>& list = orders[r];
    SynthTask& a = list[i];
    SynthTask& b = list[i + 1];
    if (a.mb == b.mb) return false;  // F(k) I(k) stays in that order
    if (a.op == SynthOp::kI) {
      // I then F becomes F then I: one more stashed microbatch at the F.
      int stashed = 0;
      for (size_t x = 0; x < i; ++x) {
        if (list[x].op == SynthOp::kF) ++stashed;
        if (list[x].op == SynthOp::kI) --stashed;
      }
      if (stashed + 1 > budget_[r]) return false;
    }
    std::swap(a, b);
    if (accept_if_better(orders, best)) return true;
    std::swap(list[i], list[i + 1]);
    return false;
  }

  int p_;
  const std::vector<int>& budget_;
  const SynthesisOptions& options_;
  OrderReplay replay_;
  int64_t evaluations_ = 0;
  double best_makespan_ = 0;
  std::chrono::steady_clock::time_point call_start_, start_, last_report_;
};

std::vector<int> synth_peak_stashed(const SimResult& r) {
  std::vector<int> out;
  for (const ActorStats& a : r.actors) out.push_back(a.peak_stashed_microbatches);
  return out;
}

bool fits_budget(const std::vector<int>& peak, const std::vector<int>& budget) {
  for (size_t r = 0; r < peak.size(); ++r)
    if (peak[r] > budget[r]) return false;
  return true;
}

}  // namespace

double replay_makespan_s(const Schedule& schedule, const StageTimes& times) {
  SynthOrders orders;
  if (!orders_of_schedule(schedule, orders, /*split_b=*/false)) {
    throw_input_error("schedule", "the replay needs one stage per actor and single-task items");
  }
  const SynthTimes t = synth_times(times);
  OrderReplay replay(schedule.num_actors(), schedule.num_microbatches, t);
  return replay.run(orders, nullptr, nullptr);
}

SynthesisResult synthesize_schedule(int p, int m, const StageTimes& times,
                                    const SynthesisOptions& options) {
  if (p < 1 || p > kMaxStages)
    throw_input_error(
        "--pp", "must be in [1, " + std::to_string(kMaxStages) + "], got " + std::to_string(p));
  if (m < 1 || m > kMaxMicrobatches)
    throw_input_error("--microbatches", "must be in [1, " + std::to_string(kMaxMicrobatches) +
                                            "], got " + std::to_string(m));
  if (int64_t{p} * m > kMaxStageMicrobatches)
    throw_input_error("--pp x --microbatches",
                      "more than the limit of " + std::to_string(kMaxStageMicrobatches));
  if (times.num_stages() != p)
    throw_input_error("stage times", "given for " + std::to_string(times.num_stages()) +
                                         " stages but synthesize needs one per actor (" +
                                         std::to_string(p) + ")");
  if (static_cast<int>(options.max_stashed.size()) != p)
    throw_input_error("memory budget", "needs one entry per actor (" + std::to_string(p) + ")");
  for (int r = 0; r < p; ++r)
    if (options.max_stashed[r] < 1)
      throw_input_error("memory budget",
                        "actor " + std::to_string(r) + " may stash " +
                            std::to_string(options.max_stashed[r]) +
                            " microbatches, below the minimum of 1 (one stashed microbatch per "
                            "stage)");
  const std::vector<int>& budget = options.max_stashed;
  const SynthTimes t = synth_times(times);
  SynthLocalSearch search(p, m, t, budget, options);
  SynthesisResult result;

  // 1. Candidates: greedy constructions and the built-in schedules that fit.
  SynthOrders best_orders;
  SynthScore best;
  std::string origin;
  // kSynthesisConstructions constructions; once the time budget is spent the rest are skipped (the
  // first always runs).
  const std::pair<int, int> warmups[] = {{1, 0}, {1, 1}, {2, -1}, {2, 0}, {0, 0}};
  static_assert(std::size(warmups) * 2 * 3 * 2 == kSynthesisConstructions);
  for (const auto& [a, b] : warmups) {
    for (bool cap_is_budget : {false, true}) {
      for (auto w : {SynthGreedyParams::WPolicy::kEager, SynthGreedyParams::WPolicy::kGapAware,
                     SynthGreedyParams::WPolicy::kLazy}) {
        for (bool i_first : {false, true}) {
          if (result.constructions > 0 && search.out_of_time()) continue;
          ++result.constructions;
          const SynthGreedyParams g{a, b, cap_is_budget, w, i_first};
          SynthOrders orders = greedy_orders(p, m, t, budget, g);
          const SynthScore s = search.score(orders);
          if (s.better_than(best)) {
            best = s;
            best_orders = std::move(orders);
            origin = g.describe();
          }
        }
      }
    }
  }
  result.greedy_step_time_s = best.makespan;
  // The built-in schedules that fit, with their engine step times (each simulated once).
  std::vector<std::pair<Schedule, double>> named_schedules;
  for (const ScheduleInfo& info : all_schedules()) {
    NamedCandidate c;
    c.name = info.name;
    Schedule s;
    try {
      s = info.generate({.num_actors = p, .num_stages = p, .num_microbatches = m});
    } catch (const InputError&) {
      result.named.push_back(c);
      continue;
    }
    if (s.num_stages != p) {
      result.named.push_back(c);
      continue;
    }
    c.applicable = true;
    PlanSimOptions so;
    so.record_trace = false;
    const SimulatedPlan sim = simulate_stage_times(s, times, so);
    c.step_time_s = sim.result.step_time_s;
    c.bubble_rate = sim.result.bubble_rate;
    c.peak_stashed = synth_peak_stashed(sim.result);
    c.fits = fits_budget(c.peak_stashed, budget);
    if (c.fits) {
      SynthOrders orders;
      if (orders_of_schedule(s, orders, /*split_b=*/true)) {
        const SynthScore sc = search.score(orders);
        if (sc.better_than(best)) {
          best = sc;
          best_orders = std::move(orders);
          origin = info.name;
        }
      }
      named_schedules.emplace_back(std::move(s), c.step_time_s);
    }
    result.named.push_back(std::move(c));
  }

  // 2. Local search.
  result.stopped_by = search.improve(best_orders, best);
  result.evaluations = search.evaluations();
  result.search_s = search.elapsed_s();
  result.origin = "search from " + origin;

  // 3. The engine scores the result; a fitting built-in schedule that is faster wins.
  PlanSimOptions so;
  so.record_trace = false;
  Schedule chosen = schedule_of_orders(p, m, best_orders);
  validate_or_throw(chosen, "synthesized schedule");
  SimulatedPlan sim = simulate_stage_times(chosen, times, so);
  // The fastest fitting built-in schedule by the step times of step 1 (the engine is
  // deterministic: simulating one again gives the same time); only the winner is simulated again.
  const Schedule* faster = nullptr;
  double best_step = sim.result.step_time_s;
  for (const auto& [s, step] : named_schedules) {
    if (step < best_step * (1 - 1e-12)) {
      faster = &s;
      best_step = step;
    }
  }
  if (faster != nullptr) {
    chosen = *faster;
    chosen.name = "synthesized";
    result.origin = faster->name + " (built-in; the search found nothing faster)";
    sim = simulate_stage_times(*faster, times, so);
  }
  assert(fits_budget(synth_peak_stashed(sim.result), budget) &&
         "synthesize: result over the budget");
  result.schedule = std::move(chosen);
  result.step_time_s = sim.result.step_time_s;
  result.bubble_rate = sim.result.bubble_rate;
  result.peak_stashed = synth_peak_stashed(sim.result);
  return result;
}

void require_one_stage_per_actor(const Plan& plan, const std::string& where) {
  if (plan.partition.num_stages() != plan.placement.num_actors) {
    throw_input_error(where,
                      "synthesize needs one stage per actor (linear placement); the plan "
                      "has " +
                          std::to_string(plan.partition.num_stages()) + " stages on " +
                          std::to_string(plan.placement.num_actors) + " actors");
  }
}

StageTimes plan_stage_times(const Plan& plan) {
  require_one_stage_per_actor(plan);
  const ClusterSpec cluster = cluster_from_json(plan.cluster, "plan: field 'cluster'");
  const AnalyticCost cost(plan.model, plan.partition, plan.placement, plan.config, cluster);
  const int S = plan.partition.num_stages();
  StageTimes t;
  auto task_time = [&](TaskKind kind, int s) {
    Instruction ins;
    ins.op = OpKind::kCompute;
    ins.stage = s;
    ins.tasks.push_back(TaskRef{kind, s, 0});
    return cost.compute_s(plan.placement.actor_of(s), ins);
  };
  for (int s = 0; s < S; ++s) {
    t.t_f_s.push_back(task_time(TaskKind::kF, s));
    t.t_b_s.push_back(task_time(TaskKind::kI, s));
    t.t_w_s.push_back(task_time(TaskKind::kW, s));
    const int from = plan.placement.actor_of(s);
    const int to = plan.placement.actor_of(s + 1 < S ? s + 1 : s);
    t.t_comm_s.push_back(from == to ? 0.0 : cost.p2p_s(from, to, cost.activation_bytes(s)));
  }
  return t;
}

std::vector<int> stash_budget_for_bytes(const Plan& plan, int64_t limit_bytes) {
  require_one_stage_per_actor(plan);
  const ClusterSpec cluster = cluster_from_json(plan.cluster, "plan: field 'cluster'");
  const MemoryModel mem =
      build_memory_model(plan.model, plan.partition, plan.placement, plan.config, cluster);
  const std::vector<int64_t> statics = mem.static_bytes_per_actor();
  std::vector<int> out;
  for (int r = 0; r < plan.placement.num_actors; ++r) {
    const int s = plan.placement.stages_of(r).front();
    const int64_t stash = std::max<int64_t>(1, mem.stash_bytes_per_stage[s]);
    const int64_t minimum = statics[r] + stash;
    if (limit_bytes < minimum) {
      throw_input_error("--memory-limit-bytes",
                        std::to_string(limit_bytes) + " is below the minimum of actor " +
                            std::to_string(r) + ": " + std::to_string(minimum) + " bytes (static " +
                            std::to_string(statics[r]) + " + one stashed microbatch " +
                            std::to_string(stash) + ")");
    }
    const int64_t k = (limit_bytes - statics[r]) / stash;
    out.push_back(static_cast<int>(std::min<int64_t>(k, kMaxMicrobatches)));
  }
  return out;
}

Plan plan_with_schedule(const Plan& plan, const Schedule& schedule) {
  Plan out = plan;
  const ClusterSpec cluster = cluster_from_json(plan.cluster, "plan: field 'cluster'");
  out.config.schedule = schedule.name;
  out.placement = schedule.placement;
  const AnalyticCost cost(out.model, out.partition, out.placement, out.config, cluster);
  out.program = lower(schedule, lowering_options_of(cost, schedule.num_stages));
  out.predicted = nlohmann::json();
  return out;
}

PlanSynthesis synthesize_for_plan(const Plan& plan, const SynthesisOptions& options) {
  PlanSynthesis out;
  out.synthesis = synthesize_schedule(plan.placement.num_actors, plan.config.num_microbatches,
                                      plan_stage_times(plan), options);
  PlanSimOptions so;
  so.record_trace = false;
  so.check_memory = false;
  out.plan = plan_with_schedule(plan, out.synthesis.schedule);
  SimulatedPlan best = simulate_plan(out.plan, so);
  for (const NamedCandidate& c : out.synthesis.named) {
    if (!c.fits) continue;
    Schedule s = generate_schedule(c.name, {.num_actors = plan.placement.num_actors,
                                            .num_stages = plan.placement.num_actors,
                                            .num_microbatches = plan.config.num_microbatches});
    s.name = "synthesized";
    Plan candidate = plan_with_schedule(plan, s);
    SimulatedPlan sim = simulate_plan(candidate, so);
    if (sim.result.step_time_s < best.result.step_time_s) {
      best = std::move(sim);
      out.plan = std::move(candidate);
      out.synthesis.schedule = std::move(s);
      out.synthesis.origin = c.name + " (built-in; faster under the cost model)";
    }
  }
  out.synthesis.step_time_s = best.result.step_time_s;
  out.synthesis.bubble_rate = best.result.bubble_rate;
  out.synthesis.peak_stashed = synth_peak_stashed(best.result);
  out.metrics = best.metrics;
  out.plan.predicted = best.metrics;
  return out;
}

}  // namespace jaxpp
