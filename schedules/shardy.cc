// Shardy:MPMD's predicates, restated from pipeline_schedule.cc (see shardy.h for the mapping of
// words). A task's "transpose count" is 0 for F and 1 for B, I and W; "wgrad" is W only.
#include "schedules/shardy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "graph/error.h"

namespace jaxpp {
namespace {

int transpose_count(const TaskRef& t) { return t.kind == TaskKind::kF ? 0 : 1; }
bool is_wgrad(const TaskRef& t) { return t.kind == TaskKind::kW; }

// OneFOneBMustHappenBefore: B(i) < F(i + n - r); F(i + n - r - 1) < B(i); same kind in
// microbatch order.
bool shardy_1f1b(const TaskRef& a, const TaskRef& b, int r, int n) {
  const int ta = transpose_count(a);
  const int tb = transpose_count(b);
  if (ta == 1 && tb == 0) return a.microbatch == b.microbatch - n + r;
  if (ta == 0 && tb == 1) return a.microbatch == b.microbatch + n - (r + 1);
  if (ta == tb) return a.microbatch < b.microbatch;
  return false;
}

// GPipeMustHappenBefore: every forward before every backward; same kind in microbatch order.
bool shardy_gpipe(const TaskRef& a, const TaskRef& b, int, int) {
  const int ta = transpose_count(a);
  const int tb = transpose_count(b);
  if (ta == tb) return a.microbatch < b.microbatch;
  return ta < tb;
}

// GPipeBut1F1BLastMeshHappenBefore: 1F1B on the last actor, GPipe elsewhere.
bool shardy_gpipe_but_1f1b_last(const TaskRef& a, const TaskRef& b, int r, int n) {
  return r == n - 1 ? shardy_1f1b(a, b, r, n) : shardy_gpipe(a, b, r, n);
}

// ZeroBubbleH1MustHappenBefore. Ba = I, or the unsplit B of stage 0.
bool shardy_zero_bubble_h1(const TaskRef& a, const TaskRef& b, int r, int n) {
  const int ta = transpose_count(a);
  const int tb = transpose_count(b);
  const bool wa = is_wgrad(a);
  const bool wb = is_wgrad(b);
  const int ia = a.microbatch;
  const int ib = b.microbatch;
  // 1: Ba(i) < F(i + n - r)
  if (ta == 1 && !wa && tb == 0) return ia == ib - n + r;
  // 2: F(i + n - r - 1) < Ba(i)
  if (ta == 0 && tb == 1 && !wb) return ia == ib + n - (r + 1);
  // 3: Bw(i) < F(i + n) (on actor 0 the unsplit B counts as Bw here, but clause 1 caught it)
  if (ta == 1 && (wa || r == 0) && tb == 0) return ib - ia == n;
  // 4: Ba(i + r) < Bw(i)
  if (ta == 1 && !wa && tb == 1 && wb) return ia - ib == r;
  // 5: Bw(i) < Ba(i + r + 1)
  if (ta == 1 && wa && tb == 1 && !wb) return ib - ia == r + 1;
  return false;
}

// ZeroBubbleH2MustHappenBefore with Shardy's latency-hiding warm-up per actor.
bool shardy_zero_bubble_h2(const TaskRef& a, const TaskRef& b, int r, int n, float fraction) {
  const int ta = transpose_count(a);
  const int tb = transpose_count(b);
  const bool wa = is_wgrad(a);
  const bool wb = is_wgrad(b);
  const int ia = a.microbatch;
  const int ib = b.microbatch;
  const int init = zero_bubble_h2_init_forwards(r, n, fraction);
  const int complement = zero_bubble_h2_init_forwards(n - r - 1, n, fraction);
  // 1: F(i) before every backward, for i < init
  if (ta == 0 && tb == 1 && ia < init) return true;
  // 2: Ba(i) < F(i + init)
  if (ta == 1 && !wa && tb == 0 && ib >= init) return ib - ia == init;
  // 3: F(i + init - 1) < Ba(i)
  if (ta == 0 && ia >= init && tb == 1 && !wb) return ia - ib == init - 1;
  // 4: Ba(i + complement - 1) < Bw(i)
  if (ta == 1 && !wa && tb == 1 && wb) return ia - ib == complement - 1;
  // 5: Bw(i) < Ba(i + complement)
  if (ta == 1 && wa && tb == 1 && !wb) return ib - ia == complement;
  return false;
}

// Lexicographic comparison of (phase, stage, microbatch) keys; false when equal.
bool lexicographic_before(const std::array<int, 3>& x, const std::array<int, 3>& y,
                          bool ascending) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == y[i]) continue;
    return ascending ? x[i] < y[i] : x[i] > y[i];
  }
  return false;
}

// CircularMustHappenBeforeBase: forwards before backwards; a phase is n consecutive
// microbatches; forwards by (phase, stage, microbatch) ascending; backwards by (phase ascending,
// stage descending, microbatch ascending), or with reversed_backward all three descending.
bool shardy_circular(const TaskRef& a, const TaskRef& b, int, int n, bool reversed_backward) {
  const int ta = transpose_count(a);
  const int tb = transpose_count(b);
  if (ta != tb) return ta < tb;
  std::array<int, 3> ka{a.microbatch / n, a.stage, a.microbatch};
  std::array<int, 3> kb{b.microbatch / n, b.stage, b.microbatch};
  if (ta == 0) return lexicographic_before(ka, kb, /*ascending=*/true);
  if (reversed_backward) return lexicographic_before(ka, kb, /*ascending=*/false);
  std::swap(ka[1], kb[1]);
  return lexicographic_before(ka, kb, /*ascending=*/true);
}

float latency_fraction(ShardySchedule s) {
  switch (s) {
    case ShardySchedule::kZeroBubbleH2HalfTxLatency:
      return 0.5f;
    case ShardySchedule::kZeroBubbleH2FullTxLatency:
      return 1.0f;
    default:
      return 0.0f;
  }
}

bool uses_loop_placement(ShardySchedule s) {
  return s == ShardySchedule::kCircular || s == ShardySchedule::kCircularWithReversedBackward;
}

int max_stages_on_one_actor(const Placement& placement) {
  std::vector<int> count(placement.num_actors, 0);
  for (int a : placement.stage_to_actor) ++count[a];
  return count.empty() ? 0 : *std::max_element(count.begin(), count.end());
}

// Work bound: the scheduler looks at every ordered pair of tasks on one actor.
constexpr int64_t kMaxShardyPairs = int64_t{1} << 24;

}  // namespace

std::string_view to_string(ShardySchedule s) {
  switch (s) {
    case ShardySchedule::k1F1B:
      return "1F1B";
    case ShardySchedule::kGPipe:
      return "GPipe";
    case ShardySchedule::kCircular:
      return "Circular";
    case ShardySchedule::kCircularWithReversedBackward:
      return "CircularWithReversedBackward";
    case ShardySchedule::kGPipeBut1F1BForLastMesh:
      return "GPipeBut1F1BForLastMesh";
    case ShardySchedule::kZeroBubbleH1:
      return "ZeroBubbleH1";
    case ShardySchedule::kZeroBubbleH2ZeroTxLatency:
      return "ZeroBubbleH2ZeroTxLatency";
    case ShardySchedule::kZeroBubbleH2HalfTxLatency:
      return "ZeroBubbleH2HalfTxLatency";
    case ShardySchedule::kZeroBubbleH2FullTxLatency:
      return "ZeroBubbleH2FullTxLatency";
  }
  return "?";
}

int zero_bubble_h2_init_forwards(int actor, int num_actors, float latency_stage_fraction) {
  const float num_init_transfers = 2.0f * static_cast<float>(num_actors - actor - 1);
  const float num_init_compute = 2.0f * static_cast<float>(num_actors - actor) - 1.0f;
  return static_cast<int>(
      std::floor(num_init_compute + num_init_transfers * latency_stage_fraction));
}

MustHappenBefore shardy_rule(ShardySchedule s) {
  switch (s) {
    case ShardySchedule::k1F1B:
      return shardy_1f1b;
    case ShardySchedule::kGPipe:
      return shardy_gpipe;
    case ShardySchedule::kGPipeBut1F1BForLastMesh:
      return shardy_gpipe_but_1f1b_last;
    case ShardySchedule::kZeroBubbleH1:
      return shardy_zero_bubble_h1;
    case ShardySchedule::kZeroBubbleH2ZeroTxLatency:
    case ShardySchedule::kZeroBubbleH2HalfTxLatency:
    case ShardySchedule::kZeroBubbleH2FullTxLatency: {
      const float fraction = latency_fraction(s);
      return [fraction](const TaskRef& a, const TaskRef& b, int r, int n) {
        return shardy_zero_bubble_h2(a, b, r, n, fraction);
      };
    }
    case ShardySchedule::kCircular:
      return [](const TaskRef& a, const TaskRef& b, int r, int n) {
        return shardy_circular(a, b, r, n, /*reversed_backward=*/false);
      };
    case ShardySchedule::kCircularWithReversedBackward:
      return [](const TaskRef& a, const TaskRef& b, int r, int n) {
        return shardy_circular(a, b, r, n, /*reversed_backward=*/true);
      };
  }
  return shardy_gpipe;
}

bool shardy_splits_backward(ShardySchedule s) {
  return s == ShardySchedule::kZeroBubbleH1 || s == ShardySchedule::kZeroBubbleH2ZeroTxLatency ||
         s == ShardySchedule::kZeroBubbleH2HalfTxLatency ||
         s == ShardySchedule::kZeroBubbleH2FullTxLatency;
}

ProgramOrder shardy_program_order(ShardySchedule s) {
  return s == ShardySchedule::kCircularWithReversedBackward ? ProgramOrder::kReversedBackward
                                                            : ProgramOrder::kMicrobatchMajor;
}

namespace {

// The checks of params shared by shardy_program and shardy_program_on (not the placement's
// shape); returns S.
std::string shardy_values(std::initializer_list<std::pair<const char*, int>> vs) {
  std::string out = " (got ";
  for (const auto& [key, value] : vs) {
    if (out.size() > 6) out += ", ";
    out += std::string(key) + "=" + std::to_string(value);
  }
  return out + ")";
}

void check_shardy_params(const std::string& name, const ScheduleParams& params) {
  const int p = params.num_actors;
  const int m = params.num_microbatches;
  if (p < 1) throw InputError(name + " needs p >= 1 actor" + shardy_values({{"p", p}}));
  if (m < 1) throw InputError(name + " needs m >= 1 microbatch" + shardy_values({{"m", m}}));
  if (params.num_stages < 0) {
    throw InputError(name + " needs S >= 1" + shardy_values({{"S", params.num_stages}}));
  }
  if (params.fuse_steady_state) {
    throw InputError(name +
                     " does not take fuse_steady_state (only Interleaved1F1B and KimiK2 do)");
  }
  if (params.group_size != 0) {
    throw InputError(name + " does not take a group size (only MegatronInterleaved does)" +
                     shardy_values({{"g", params.group_size}}));
  }
}

}  // namespace

RuleProgram shardy_program_on(ShardySchedule s, const Placement& placement,
                              const ScheduleParams& params) {
  const std::string name(to_string(s));
  ScheduleParams checked = params;
  checked.num_actors = placement.num_actors;
  checked.num_stages = placement.num_stages();
  check_shardy_params(name, checked);
  const int p = placement.num_actors;
  const int S = placement.num_stages();
  const int m = params.num_microbatches;
  // Tasks on the busiest actor: (1 + backward tasks) per stage and microbatch.
  const int64_t per_actor =
      int64_t{max_stages_on_one_actor(placement)} * m * (shardy_splits_backward(s) ? 3 : 2);
  if (per_actor * per_actor * p > kMaxShardyPairs) {
    throw InputError(name + " is scheduled from pairwise rules; " + std::to_string(per_actor) +
                     " tasks per actor is too many (at most " + std::to_string(kMaxShardyPairs) +
                     " ordered pairs over all actors)" +
                     shardy_values({{"p", p}, {"S", S}, {"m", m}}));
  }
  std::vector<bool> split = shardy_splits_backward(s) ? split_where_gradient_is_sent(placement)
                                                      : std::vector<bool>(S, false);
  return make_rule_program(placement, m, std::move(split), shardy_program_order(s));
}

RuleProgram shardy_program(ShardySchedule s, const ScheduleParams& params) {
  const std::string name(to_string(s));
  check_shardy_params(name, params);
  const int p = params.num_actors;
  const int S = params.num_stages == 0 ? p : params.num_stages;
  Placement placement;
  if (uses_loop_placement(s)) {
    if (S % p != 0) {
      throw InputError(name + " places stage s on actor s mod p: needs S divisible by p" +
                       shardy_values({{"S", S}, {"p", p}}));
    }
    placement = make_placement(PlacementKind::kLoop, S, p);
  } else {
    if (S != p) {
      throw InputError(name + " places stage r on actor r: needs S = p" +
                       shardy_values({{"S", S}, {"p", p}}));
    }
    placement = make_placement(PlacementKind::kLinear, S, p);
  }
  return shardy_program_on(s, placement, params);
}

bool is_wrap_around_name(std::string_view name) {
  return normalize_schedule_name(name) == normalize_schedule_name(kParallelPipelinesWithWrapAround);
}

bool shardy_wrap_around_rule(const TaskRef& a, const TaskRef& b, int actor, int) {
  // ParallelPipelinesWithWrapAroundMustHappenBefore: the entry microbatch of actor r is r.
  const int pivot = actor;
  if (a.microbatch == pivot || b.microbatch == pivot) return a.microbatch == pivot;
  const bool same_side = (a.microbatch > pivot) == (b.microbatch > pivot);
  return same_side ? a.microbatch > b.microbatch : a.microbatch < b.microbatch;
}

ForwardOnlyOrders make_parallel_pipelines_with_wrap_around(int num_actors, int num_microbatches) {
  const std::string name(kParallelPipelinesWithWrapAround);
  if (num_actors < 1) {
    throw InputError(name + " needs p >= 1 actor (got p=" + std::to_string(num_actors) + ")");
  }
  if (num_microbatches != num_actors) {
    throw InputError(name + " runs one microbatch per actor: needs m = p (got m=" +
                     std::to_string(num_microbatches) + ", p=" + std::to_string(num_actors) + ")");
  }
  if (int64_t{num_actors} * num_actors * num_actors > kMaxShardyPairs) {
    throw InputError(name + " is scheduled from pairwise rules; at most " +
                     std::to_string(kMaxShardyPairs) +
                     " ordered pairs over all actors (got p=" + std::to_string(num_actors) + ")");
  }
  ForwardOnlyOrders out;
  out.num_actors = num_actors;
  out.num_microbatches = num_microbatches;
  out.actors = schedule_by_rules(make_wrap_around_program(num_actors), shardy_wrap_around_rule);
  return out;
}

Schedule make_shardy_schedule(ShardySchedule s, const ScheduleParams& params) {
  const RuleProgram program = shardy_program(s, params);
  return schedule_from_orders(std::string(to_string(s)), program,
                              schedule_by_rules(program, shardy_rule(s)));
}

}  // namespace jaxpp
