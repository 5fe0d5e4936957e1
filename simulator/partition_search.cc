#include "simulator/partition_search.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

#include "costmodel/analytic_cost.h"
#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "schedules/lower.h"
#include "simulator/engine.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

constexpr const char* kFlag = "--partition balanced-time";
constexpr double kGiBytes = 1024.0 * 1024.0 * 1024.0;
constexpr double kImprovement_s = 1e-12;

std::string gib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / kGiBytes);
  return buf;
}

bool schedule_splits_backward(const Schedule& schedule) {
  for (const auto& items : schedule.actors)
    for (const ScheduleItem& item : items)
      for (const TaskRef& t : item)
        if (t.kind == TaskKind::kI || t.kind == TaskKind::kW) return true;
  return false;
}

// The peak memory of a partition, computed as build_memory_model and the engine compute it (the
// same calls, in the same order, so the bytes are identical), with the OperatorCost built once.
// The model, cluster and configuration are the OperatorCost's own copies, so a PeakMemory built
// from temporaries stays valid; the schedule is held by reference (it can hold hundreds of
// thousands of items and is not copied), so it must outlive the PeakMemory, as it does in the
// two callers below, which use it within the call that owns the schedule.
class PeakMemory {
 public:
  PeakMemory(const ModelSpec& model, const ClusterSpec& cluster, const ParallelConfig& config,
             const Schedule& schedule)
      : schedule_(schedule), op_(model, config, cluster) {
    stash_.reserve(model.layers.size());
    for (int l = 0; l < model.num_layers(); ++l) stash_.push_back(op_.stash_bytes(l));
  }

  // Static bytes per actor and stash bytes per stage of `p` (MemoryModel's fields).
  void model(const Partition& p, std::vector<int64_t>& static_bytes,
             std::vector<int64_t>& stash_bytes) const {
    static_bytes.assign(schedule_.num_actors(), 0);
    stash_bytes.assign(p.num_stages(), 0);
    // Per actor: gradient sharding's transient gradient, parameter sharding's gathered layers
    // and the loss transient (costmodel/memory.h).
    std::vector<ActorTransients> transients(schedule_.num_actors());
    for (int s = 0; s < p.num_stages(); ++s) {
      double stash = 0;
      for (int l = p.begin(s); l < p.end(s); ++l) stash += stash_[l];
      stash_bytes[s] = std::llround(stash);
      const StageStaticBytes b = stage_static_bytes(op_, p.begin(s), p.size(s));
      const int r = schedule_.placement.actor_of(s);
      static_bytes[r] += b.weight_bytes + b.grad_bytes + b.optimizer_bytes;
      transients[r].take(b);
    }
    for (int r = 0; r < schedule_.num_actors(); ++r)
      static_bytes[r] += transients[r].grad_bytes() + transients[r].weight_bytes() +
                         transients[r].loss_bytes();
  }

  std::vector<int64_t> peaks(const Partition& p) const {
    std::vector<int64_t> static_bytes, stash_bytes;
    model(p, static_bytes, stash_bytes);
    std::vector<int64_t> peak;
    for (int r = 0; r < schedule_.num_actors(); ++r) {
      int64_t current = static_bytes[r], best = current;
      for (const ScheduleItem& item : schedule_.actors[r]) {
        for (const TaskRef& t : item)
          if (t.kind == TaskKind::kF) current += stash_bytes[t.stage];
        best = std::max(best, current);
        for (const TaskRef& t : item)
          if (t.kind == TaskKind::kB || t.kind == TaskKind::kI) current -= stash_bytes[t.stage];
      }
      peak.push_back(best);
    }
    return peak;
  }

  const OperatorCost& op() const { return op_; }

 private:
  const Schedule& schedule_;
  OperatorCost op_;
  std::vector<double> stash_;
};

// Largest number of microbatches of each stage stashed at once along its actor's order.
std::vector<int> stash_counts(const Schedule& schedule) {
  std::vector<int> current(schedule.num_stages, 0), most(schedule.num_stages, 0);
  for (const auto& items : schedule.actors) {
    for (const ScheduleItem& item : items) {
      for (const TaskRef& t : item)
        if (t.kind == TaskKind::kF) most[t.stage] = std::max(most[t.stage], ++current[t.stage]);
      for (const TaskRef& t : item)
        if (t.kind == TaskKind::kB || t.kind == TaskKind::kI) --current[t.stage];
    }
  }
  return most;
}

// Contiguous partitions of n layers into S stages under a per-stage bound on the layer weights
// (time) and on the stage's memory, static(l) + k_s · stash(l) summed over its layers (exact for
// one stage per actor). The greedy takes, stage after stage, the longest range within both
// bounds that leaves one layer for each later stage; when k_s does not increase with s, it finds
// a partition whenever one exists (its ends are never left of any feasible partition's).
class BoundedGreedy {
 public:
  BoundedGreedy(const std::vector<double>& weight, const std::vector<double>& static_bytes,
                const std::vector<double>& stash_bytes, std::vector<int> k)
      : n_(static_cast<int>(weight.size())),
        time_(prefix(weight)),
        static_(prefix(static_bytes)),
        stash_(prefix(stash_bytes)),
        k_(std::move(k)) {}

  int stages() const { return static_cast<int>(k_.size()); }
  double total_time() const { return time_[n_]; }
  double memory(int s, int i, int j) const {
    return static_[j] - static_[i] + k_[s] * (stash_[j] - stash_[i]);
  }
  double max_memory() const {
    double m = 0;
    for (int s = 0; s < stages(); ++s) m = std::max(m, memory(s, 0, n_));
    return m;
  }

  std::optional<std::vector<int>> starts(double time_bound, double memory_bound) const {
    const int S = stages();
    std::vector<int> out;
    int i = 0;
    for (int s = 0; s < S; ++s) {
      out.push_back(i);
      const int cap = n_ - (S - 1 - s);
      int j = i;
      while (j < cap && time_[j + 1] - time_[i] <= time_bound &&
             memory(s, i, j + 1) <= memory_bound)
        ++j;
      if (j == i) return std::nullopt;
      i = j;
    }
    if (i != n_) return std::nullopt;
    return out;
  }

  // The least bound in [lo, hi] for which `feasible` holds (it holds at hi), bisecting over the
  // ordered bit patterns of non-negative doubles.
  template <typename F>
  static double least(double lo, double hi, F feasible) {
    if (feasible(lo)) return lo;
    uint64_t lo_bits = std::bit_cast<uint64_t>(lo), hi_bits = std::bit_cast<uint64_t>(hi);
    while (hi_bits - lo_bits > 1) {
      const uint64_t mid = lo_bits + (hi_bits - lo_bits) / 2;
      (feasible(std::bit_cast<double>(mid)) ? hi_bits : lo_bits) = mid;
    }
    return std::bit_cast<double>(hi_bits);
  }

 private:
  static std::vector<double> prefix(const std::vector<double>& v) {
    std::vector<double> p(v.size() + 1, 0.0);
    for (size_t i = 0; i < v.size(); ++i) p[i + 1] = p[i] + v[i];
    return p;
  }
  int n_;
  std::vector<double> time_, static_, stash_;
  std::vector<int> k_;
};

// Moves boundary b (the first layer of stage b) by d layers; nullopt when a stage would empty.
std::optional<Partition> moved(const Partition& p, int b, int d) {
  Partition q = p;
  q.stage_begin[b] += d;
  if (q.stage_begin[b] <= q.begin(b - 1) || q.stage_begin[b] >= q.end(b)) return std::nullopt;
  return q;
}

int64_t max_of(const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); }

std::string describe_starts(const Partition& p) {
  std::string text;
  for (int s = 0; s < p.num_stages(); ++s) text += (s ? "," : "") + std::to_string(p.begin(s));
  return text;
}

}  // namespace

std::vector<double> layer_weights_s(const ModelSpec& model, const ClusterSpec& cluster,
                                    const ParallelConfig& config, bool split_backward) {
  const OperatorCost op(model, config, cluster);
  const double m = std::max(1, config.num_microbatches);
  std::vector<double> weights;
  weights.reserve(model.layers.size());
  for (int l = 0; l < model.num_layers(); ++l) {
    const StageBreakdown b = op.stage(l, 1, static_cast<double>(model.layers[l].params));
    const double f = b.at(Pass::kForward).total_s();
    const double i = b.at(Pass::kBackwardInput).total_s() + b.at(Pass::kRecompute).total_s();
    const double w = b.at(Pass::kBackwardWeight).total_s();
    const double backward = split_backward ? i + w : i + w - b.fused_backward_hidden_s;
    weights.push_back(f + backward + b.optimizer_s / m);
  }
  return weights;
}

std::vector<int64_t> partition_peak_memory(const ModelSpec& model, const ClusterSpec& cluster,
                                           const ParallelConfig& config, const Schedule& schedule,
                                           const Partition& partition) {
  return PeakMemory(model, cluster, config, schedule).peaks(partition);
}

double partition_step_time_s(const ModelSpec& model, const ClusterSpec& cluster,
                             const ParallelConfig& config, const Schedule& schedule,
                             const Partition& partition) {
  const AnalyticCost cost(model, partition, schedule.placement, config, cluster);
  const Program program = lower(schedule, lowering_options_of(cost, partition.num_stages()));
  SimOptions so;
  so.record_trace = false;
  so.overlap_grad_reduce = config.overlap_grad_reduce;
  so.iteration_overhead_s = cluster.iteration_overhead_s;
  // Memory does not change durations; the peaks come from PeakMemory.
  return simulate(program, cost, so).step_time_s;
}

PartitionSearchResult search_partition(const ModelSpec& model, const ClusterSpec& cluster,
                                       const ParallelConfig& config, const Schedule& schedule,
                                       const PartitionSearchOptions& options) {
  const int n = model.num_layers();
  const int S = schedule.num_stages;
  const int p = schedule.num_actors();
  if (config.recompute_layers >= 0)
    throw_input_error(kFlag, "balanced-time prices each layer on its own and cannot place "
                             "--recompute-layers (the first N layers of each stage); use "
                             "--partition auto, even or explicit stage starts");
  if (S > n)
    throw_input_error(kFlag, std::to_string(S) + " stages but the model has only " +
                                 std::to_string(n) + " layers");
  const int64_t limit = options.max_memory_bytes > 0 ? options.max_memory_bytes : cluster.hbm_bytes;
  const auto fits = [&](const std::vector<int64_t>& peak) {
    return limit <= 0 || max_of(peak) <= limit;
  };
  const int budget = options.max_evaluations > 0 ? options.max_evaluations : 4 * S + 16;

  const PeakMemory memory(model, cluster, config, schedule);
  const std::vector<double> weights =
      layer_weights_s(model, cluster, config, schedule_splits_backward(schedule));

  // One stage per actor: the memory of a stage is static + k_s · stash, exactly.
  std::optional<BoundedGreedy> greedy;
  bool greedy_exact = false;
  // (Not with gradient sharding: its transient gradient is the largest layer's, not a sum.)
  if (S == p && limit > 0 && !config.shard_gradients) {
    std::vector<double> static_bytes, stash_bytes;
    for (int l = 0; l < n; ++l) {
      const StageStaticBytes b = stage_static_bytes(memory.op(), l, 1);
      // The loss transient is a per-actor maximum: summed per layer, an MTP module's and the
      // logits layer's both count in a stage holding the two (a bound above by one transient).
      static_bytes.push_back(static_cast<double>(b.weight_bytes + b.grad_bytes + b.optimizer_bytes) +
                             b.loss_transient_bytes);
      stash_bytes.push_back(memory.op().stash_bytes(l));
    }
    const std::vector<int> k = stash_counts(schedule);
    greedy.emplace(weights, static_bytes, stash_bytes, k);
    greedy_exact = std::is_sorted(k.rbegin(), k.rend());
  }

  PartitionSearchResult best;
  best.step_time_s = std::numeric_limits<double>::infinity();
  int evaluations = 0;
  std::vector<Partition> seen;
  // Step time of every partition checked so far (infinity when it does not fit): each is
  // simulated once.
  std::map<std::vector<int>, double> checked;
  // Simulates a starting candidate that fits (each distinct one once).
  const auto consider = [&](const Partition& candidate, const std::string& name) {
    if (std::find(seen.begin(), seen.end(), candidate) != seen.end()) return;
    seen.push_back(candidate);
    const std::vector<int64_t> peak = memory.peaks(candidate);
    if (!fits(peak)) {
      checked.emplace(candidate.stage_begin, std::numeric_limits<double>::infinity());
      return;
    }
    const double t = partition_step_time_s(model, cluster, config, schedule, candidate);
    checked.emplace(candidate.stage_begin, t);
    ++evaluations;
    best.evaluations = evaluations;
    if (t < best.step_time_s) {
      best.partition = candidate;
      best.step_time_s = t;
      best.peak_memory_bytes = peak;
      best.start = name;
    }
  };

  // 1. Starting candidates (or the given start).
  if (options.start) {
    const Partition& given = *options.start;
    bool valid = given.num_stages() == S && given.num_layers == n && given.stage_begin[0] == 0;
    for (int s = 0; valid && s < S; ++s) valid = given.size(s) >= 1;
    if (!valid)
      throw_input_error(kFlag, "the given start " + describe_starts(given) + " is not " +
                                   std::to_string(S) + " non-empty stages over " +
                                   std::to_string(n) + " layers");
    consider(given, "given");
    if (best.evaluations == 0)
      throw_input_error(kFlag, "the given start " + describe_starts(given) + " does not fit in " +
                                   gib_text(static_cast<double>(limit)) + " GiB per device");
  }
  const Partition time_optimal = auto_partition(weights, S);
  if (!options.start) consider(time_optimal, "time");
  if (!options.start && greedy && !fits(memory.peaks(time_optimal))) {
    const double hi = greedy->total_time();
    if (greedy->starts(hi, static_cast<double>(limit))) {
      const double t = BoundedGreedy::least(0.0, hi, [&](double bound) {
        return greedy->starts(bound, static_cast<double>(limit)).has_value();
      });
      consider(partition_from_starts(*greedy->starts(t, static_cast<double>(limit)), n), "time");
    }
  }
  if (!options.start) consider(auto_partition(model, {.num_stages = S}), "flops");
  int transformer_layers = 0;
  for (const LayerWork& l : model.layers) transformer_layers += l.kind == LayerKind::kTransformer;
  if (!options.start && transformer_layers >= S) consider(even_partition(model, S), "even");

  // 2. Nothing fits: the partition of least peak memory.
  if (best.evaluations == 0) {
    Partition least;
    std::vector<int64_t> least_peak;
    bool exact = false;
    if (greedy && greedy_exact) {
      const double hi = greedy->max_memory();
      const double bound = BoundedGreedy::least(0.0, hi, [&](double m) {
        return greedy->starts(std::numeric_limits<double>::infinity(), m).has_value();
      });
      least =
          partition_from_starts(*greedy->starts(std::numeric_limits<double>::infinity(), bound), n);
      least_peak = memory.peaks(least);
      exact = true;
    } else {
      // Steepest descent on (largest peak, sum of peaks) from the candidate of least peak.
      for (const Partition& c : seen) {
        std::vector<int64_t> pk = memory.peaks(c);
        if (least_peak.empty() || max_of(pk) < max_of(least_peak)) {
          least = c;
          least_peak = std::move(pk);
        }
      }
      const auto key = [](const std::vector<int64_t>& pk) {
        int64_t sum = 0;
        for (int64_t b : pk) sum += b;
        return std::pair(max_of(pk), sum);
      };
      for (int64_t step = 0; step < int64_t{n} * S && !fits(least_peak); ++step) {
        std::optional<Partition> next;
        std::vector<int64_t> next_peak;
        for (int b = 1; b < S; ++b) {
          for (int d : {-1, +1}) {
            const std::optional<Partition> q = moved(least, b, d);
            if (!q) continue;
            std::vector<int64_t> pk = memory.peaks(*q);
            if (key(pk) < (next ? key(next_peak) : key(least_peak))) {
              next = *q;
              next_peak = std::move(pk);
            }
          }
        }
        if (!next) break;
        least = *next;
        least_peak = next_peak;
      }
    }
    if (!fits(least_peak)) {
      const auto worst = std::max_element(least_peak.begin(), least_peak.end());
      const int actor = static_cast<int>(worst - least_peak.begin());
      throw PartitionDoesNotFit(std::string(kFlag) + ": no partition fits in " +
                                    gib_text(static_cast<double>(limit)) + " GiB per device; " +
                                    (exact ? "the least peak memory of any partition is "
                                           : "the least peak memory the search found is ") +
                                    gib_text(static_cast<double>(*worst)) + " GiB on actor " +
                                    std::to_string(actor) + " (stage starts " +
                                    describe_starts(least) + ")",
                                *worst, actor);
    }
    consider(least, "memory");
  }
  best.start_step_time_s = best.step_time_s;

  // 3. Local search, first improvement. Simulates q (once) and keeps it when it is faster.
  const auto improves = [&](const Partition& q) {
    if (evaluations >= budget) return false;
    const auto [it, fresh] = checked.emplace(q.stage_begin, 0.0);
    if (!fresh) return false;  // checked already, and not kept then: never faster than best
    const std::vector<int64_t> peak = memory.peaks(q);
    if (!fits(peak)) {
      it->second = std::numeric_limits<double>::infinity();
      return false;
    }
    it->second = partition_step_time_s(model, cluster, config, schedule, q);
    ++evaluations;
    if (it->second >= best.step_time_s - kImprovement_s) return false;
    best.partition = q;
    best.step_time_s = it->second;
    best.peak_memory_bytes = peak;
    ++best.improvements;
    return true;
  };

  // 3a. A pass of one-layer moves over the boundaries; true when a move was kept.
  const auto one_layer_pass = [&] {
    bool improved = false;
    for (int b = 1; b < S && evaluations < budget; ++b) {
      for (int d : {-1, +1}) {
        if (evaluations >= budget) break;
        const std::optional<Partition> q = moved(best.partition, b, d);
        if (q && improves(*q)) improved = true;
      }
    }
    return improved;
  };

  // 3b. Long moves, tried in the order of their actor weights; true when one was kept.
  std::vector<double> prefix(n + 1, 0.0);
  for (int l = 0; l < n; ++l) prefix[l + 1] = prefix[l] + weights[l];
  const auto actor_key = [&](const Partition& q) {
    std::vector<double> actor(p, 0.0);
    for (int s = 0; s < S; ++s)
      actor[schedule.placement.actor_of(s)] += prefix[q.end(s)] - prefix[q.begin(s)];
    double largest = 0, squares = 0;
    for (double a : actor) {
      largest = std::max(largest, a);
      squares += a * a;
    }
    return std::pair(largest, squares);
  };
  const int longest = std::max(2, n / (4 * S));
  const auto long_move = [&] {
    const Partition& at = best.partition;
    std::vector<Partition> moves;
    const auto add = [&](std::optional<Partition> q) {
      if (q && !checked.contains(q->stage_begin)) moves.push_back(std::move(*q));
    };
    for (int b = 1; b < S; ++b)
      for (int k = 2; k <= longest; k *= 2)
        for (int d : {-k, +k}) add(moved(at, b, d));
    for (int b = 1; b < S; ++b) {
      // The first layer of stage b that minimises the larger weight of stages b−1 and b.
      int balanced = at.begin(b);
      double least = std::numeric_limits<double>::infinity();
      for (int x = at.begin(b - 1) + 1; x < at.end(b); ++x) {
        const double larger = std::max(prefix[x] - prefix[at.begin(b - 1)],
                                       prefix[at.end(b)] - prefix[x]);
        if (larger < least) {
          least = larger;
          balanced = x;
        }
      }
      if (std::abs(balanced - at.begin(b)) >= 2) add(moved(at, b, balanced - at.begin(b)));
    }
    for (int b = 1; b < S; ++b)
      for (int c = b + 1; c < S; ++c)
        for (int d : {-1, +1}) {
          Partition q = at;
          for (int i = b; i <= c; ++i) q.stage_begin[i] += d;
          bool valid = true;
          for (int s = b - 1; s <= c && valid; ++s) valid = q.size(s) >= 1;
          if (valid) add(std::move(q));
        }
    std::vector<std::pair<std::pair<double, double>, int>> order;
    for (int i = 0; i < static_cast<int>(moves.size()); ++i)
      order.emplace_back(actor_key(moves[i]), i);
    std::sort(order.begin(), order.end());
    for (const auto& [key, i] : order) {
      if (evaluations >= budget) return false;
      if (improves(moves[i])) {
        ++best.long_moves;
        return true;
      }
    }
    return false;
  };

  while (evaluations < budget) {
    while (evaluations < budget && one_layer_pass()) {
    }
    if (options.one_layer_moves || !long_move()) break;
  }
  best.evaluations = evaluations;
  return best;
}

}  // namespace jaxpp
