#include "simulator/hetero_plan.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>

#include "costmodel/hetero_cost.h"
#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/partition.h"
#include "schedules/lower.h"
#include "simulator/engine.h"

namespace jaxpp {
namespace {

constexpr const char* kHeteroSearchFlag = "--partition balanced-time";
constexpr double kHeteroGiB = 1024.0 * 1024.0 * 1024.0;

std::string hetero_gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / kHeteroGiB);
  return buf;
}

bool hetero_splits_backward(const Schedule& schedule) {
  for (const auto& items : schedule.actors)
    for (const ScheduleItem& item : items)
      for (const TaskRef& t : item)
        if (t.kind == TaskKind::kI || t.kind == TaskKind::kW) return true;
  return false;
}

// Largest number of microbatches of each stage stashed at once along its actor's order.
std::vector<int> hetero_stash_counts(const Schedule& schedule) {
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

std::vector<double> hetero_prefix(const std::vector<double>& v) {
  std::vector<double> p(v.size() + 1, 0.0);
  for (size_t i = 0; i < v.size(); ++i) p[i + 1] = p[i] + v[i];
  return p;
}

// The least bound in [lo, hi] for which `feasible` holds (it holds at hi), bisecting over the
// ordered bit patterns of non-negative doubles.
template <typename F>
double hetero_least(double lo, double hi, F feasible) {
  if (feasible(lo)) return lo;
  uint64_t lo_bits = std::bit_cast<uint64_t>(lo), hi_bits = std::bit_cast<uint64_t>(hi);
  while (hi_bits - lo_bits > 1) {
    const uint64_t mid = lo_bits + (hi_bits - lo_bits) / 2;
    (feasible(std::bit_cast<double>(mid)) ? hi_bits : lo_bits) = mid;
  }
  return std::bit_cast<double>(hi_bits);
}

// Contiguous splits of n layers into S stages where stage s has its own layer weights (its
// actor's kind) and, optionally, its own memory per layer (static + k_s · stash) and limit.
// Greedy: each stage takes the longest range within the bounds that leaves one layer to each
// later stage; exact for a time bound (ranges shrink monotonically), and for memory when the
// bounds are monotone in the range, as here.
class StageGreedy {
 public:
  StageGreedy(int n, std::vector<std::vector<double>> time_prefix,
              std::vector<std::vector<double>> memory_prefix, std::vector<double> limits)
      : n_(n),
        time_(std::move(time_prefix)),
        mem_(std::move(memory_prefix)),
        limit_(std::move(limits)) {}

  int stages() const { return static_cast<int>(time_.size()); }
  double max_total_time() const {
    double t = 0;
    for (const auto& p : time_) t = std::max(t, p[n_]);
    return t;
  }
  bool has_memory() const { return !mem_.empty(); }
  // Largest memory of any stage over its whole-model range relative to its limit.
  double max_memory_fraction() const {
    double f = 0;
    for (int s = 0; s < stages(); ++s) f = std::max(f, mem_[s][n_] / limit_[s]);
    return f;
  }

  // Stage starts with every stage's weight <= time_bound and memory <= fraction · its limit
  // (memory ignored without memory prefixes); nullopt when the greedy finds none.
  std::optional<std::vector<int>> starts(double time_bound, double fraction) const {
    const int S = stages();
    std::vector<int> out;
    int i = 0;
    for (int s = 0; s < S; ++s) {
      out.push_back(i);
      const int cap = n_ - (S - 1 - s);
      int j = i;
      while (j < cap && time_[s][j + 1] - time_[s][i] <= time_bound &&
             (!has_memory() || mem_[s][j + 1] - mem_[s][i] <= fraction * limit_[s]))
        ++j;
      if (j == i) return std::nullopt;
      i = j;
    }
    if (i != n_) return std::nullopt;
    return out;
  }

 private:
  int n_;
  std::vector<std::vector<double>> time_, mem_;
  std::vector<double> limit_;
};

std::optional<Partition> hetero_moved(const Partition& p, int b, int d) {
  Partition q = p;
  q.stage_begin[b] += d;
  if (q.stage_begin[b] <= q.begin(b - 1) || q.stage_begin[b] >= q.end(b)) return std::nullopt;
  return q;
}

std::string hetero_starts_text(const Partition& p) {
  std::string text;
  for (int s = 0; s < p.num_stages(); ++s) text += (s ? "," : "") + std::to_string(p.begin(s));
  return text;
}

// Distinct (kind, tp) meshes and the index of each actor's.
struct MeshGroups {
  std::vector<ActorMesh> distinct;
  std::vector<int> of_actor;
  explicit MeshGroups(const std::vector<ActorMesh>& meshes) {
    for (const ActorMesh& m : meshes) {
      auto it = std::find(distinct.begin(), distinct.end(), m);
      if (it == distinct.end()) {
        distinct.push_back(m);
        it = distinct.end() - 1;
      }
      of_actor.push_back(static_cast<int>(it - distinct.begin()));
    }
  }
};

std::vector<int> layers_per_actor(const Partition& partition, const Placement& placement) {
  std::vector<int> out(placement.num_actors, 0);
  for (int s = 0; s < partition.num_stages(); ++s) out[placement.actor_of(s)] += partition.size(s);
  return out;
}

int hetero_check_batch(const ParallelConfig& c) {
  // check_parallel_config's checks of sizes and the batch, on a configuration whose GPU count is
  // its own product (the kinds' GPU counts are checked by resolve_meshes).
  ParallelConfig probe = c;
  probe.tp = 1;
  probe.gpus = std::max(1, c.pp) * std::max(1, c.dp) * std::max(1, c.cp);
  probe.tp_comm_overlap = false;
  return check_parallel_config(probe);
}

}  // namespace

std::vector<ActorMesh> resolve_meshes(const HeteroCluster& cluster, const ParallelConfig& config,
                                      const std::vector<int>& kind_tp,
                                      const std::vector<std::string>& actor_kinds) {
  const int K = static_cast<int>(cluster.kinds.size());
  if (!kind_tp.empty() && static_cast<int>(kind_tp.size()) != K)
    throw_input_error("--kind-tp", "gives " + std::to_string(kind_tp.size()) + " tps but cluster " +
                                       cluster.name + " has " + std::to_string(K) +
                                       " device kinds (" + cluster.kind_names() + ")");
  if (config.dp < 1 || config.cp < 1) throw_input_error("configuration", "dp and cp must be >= 1");
  std::vector<int> tp(K);
  for (int k = 0; k < K; ++k) {
    tp[k] = kind_tp.empty() ? config.tp : kind_tp[k];
    if (tp[k] < 1) throw_input_error(kind_tp.empty() ? "--tp" : "--kind-tp", "must be >= 1");
  }
  std::vector<ActorMesh> meshes;
  if (actor_kinds.empty()) {
    for (int k = 0; k < K; ++k) {
      const ClusterKind& kind = cluster.kinds[k];
      const int64_t group = int64_t{tp[k]} * config.dp * config.cp;
      // Named by the flag that gave this kind its tp and the cluster that holds the kind.
      if (kind.gpus % group != 0)
        throw_input_error(std::string(kind_tp.empty() ? "--tp" : "--kind-tp") + ": cluster " +
                              cluster.name + ": device kind " + kind.name,
                          std::to_string(kind.gpus) + " GPUs are not a multiple of tp·dp·cp = " +
                              std::to_string(tp[k]) + "·" + std::to_string(config.dp) + "·" +
                              std::to_string(config.cp) + " = " + std::to_string(group));
      for (int64_t a = 0; a < kind.gpus / group; ++a) meshes.push_back({kind.name, tp[k]});
    }
    return meshes;
  }
  std::vector<int64_t> used(K, 0);
  for (size_t r = 0; r < actor_kinds.size(); ++r) {
    const int k = cluster.kind_index(actor_kinds[r]);
    if (k < 0)
      throw_input_error("--actor-kinds[" + std::to_string(r) + "]",
                        "device kind '" + actor_kinds[r] + "' is not in cluster " + cluster.name +
                            " (kinds: " + cluster.kind_names() + ")");
    used[k] += int64_t{tp[k]} * config.dp * config.cp;
    meshes.push_back({cluster.kinds[k].name, tp[k]});
  }
  for (int k = 0; k < K; ++k)
    if (used[k] != cluster.kinds[k].gpus)
      throw_input_error("--actor-kinds", "the actors of kind " + cluster.kinds[k].name + " use " +
                                             std::to_string(used[k]) +
                                             " GPUs (actors x tp·dp·cp) but the kind has " +
                                             std::to_string(cluster.kinds[k].gpus));
  return meshes;
}

std::vector<int64_t> hetero_peak_memory(const ModelSpec& model, const HeteroCluster& cluster,
                                        const ParallelConfig& config, const Schedule& schedule,
                                        const std::vector<ActorMesh>& meshes,
                                        const Partition& partition) {
  const MeshGroups groups(meshes);
  std::vector<std::vector<int64_t>> per_group;
  for (const ActorMesh& m : groups.distinct) {
    const int k = cluster.kind_index(m.kind);
    if (k < 0) mesh_kind_indices(cluster, meshes, "meshes");  // throws, naming the mesh
    per_group.push_back(partition_peak_memory(model, cluster.kinds[k].spec, mesh_config(config, m),
                                              schedule, partition));
  }
  std::vector<int64_t> peak;
  for (size_t r = 0; r < meshes.size(); ++r) peak.push_back(per_group[groups.of_actor[r]][r]);
  return peak;
}

double hetero_step_time_s(const ModelSpec& model, const HeteroCluster& cluster,
                          const ParallelConfig& config, const Schedule& schedule,
                          const std::vector<ActorMesh>& meshes, const Partition& partition) {
  const HeteroCost cost(model, partition, schedule.placement, config, cluster, meshes, "meshes");
  const Program program = lower(schedule, lowering_options_of(cost, partition.num_stages()));
  SimOptions so;
  so.record_trace = false;
  so.overlap_grad_reduce = config.overlap_grad_reduce;
  double overhead = 0;
  for (const ClusterKind& k : cluster.kinds)
    overhead = std::max(overhead, k.spec.iteration_overhead_s);
  so.iteration_overhead_s = overhead;
  return simulate(program, cost, so).step_time_s;
}

PartitionSearchResult search_hetero_partition(const ModelSpec& model, const HeteroCluster& cluster,
                                              const ParallelConfig& config,
                                              const Schedule& schedule,
                                              const std::vector<ActorMesh>& meshes,
                                              const PartitionSearchOptions& options) {
  const int n = model.num_layers();
  const int S = schedule.num_stages;
  const int p = schedule.num_actors();
  if (S > n)
    throw_input_error(kHeteroSearchFlag, std::to_string(S) + " stages but the model has only " +
                                             std::to_string(n) + " layers");
  if (static_cast<int>(meshes.size()) != p)
    throw_input_error(kHeteroSearchFlag, std::to_string(meshes.size()) + " meshes for " +
                                             std::to_string(p) + " actors");
  const std::vector<int> kinds = mesh_kind_indices(cluster, meshes, "meshes");
  std::vector<int64_t> limit(p);
  for (int r = 0; r < p; ++r)
    limit[r] = options.max_memory_bytes > 0 ? options.max_memory_bytes
                                            : cluster.kinds[kinds[r]].spec.hbm_bytes;
  const auto fits = [&](const std::vector<int64_t>& peak) {
    for (int r = 0; r < p; ++r)
      if (limit[r] > 0 && peak[r] > limit[r]) return false;
    return true;
  };
  const int budget = options.max_evaluations > 0 ? options.max_evaluations : 4 * S + 16;
  const bool split = hetero_splits_backward(schedule);

  // Per distinct mesh: layer weights, static and stash bytes per layer.
  const MeshGroups groups(meshes);
  std::vector<std::vector<double>> weights;
  const std::vector<int> k_counts = hetero_stash_counts(schedule);
  for (const ActorMesh& m : groups.distinct) {
    const ClusterSpec& spec = cluster.kinds[cluster.kind_index(m.kind)].spec;
    const ParallelConfig c = mesh_config(config, m);
    weights.push_back(layer_weights_s(model, spec, c, split));
  }
  const bool one_stage_per_actor = S == p;
  std::vector<std::vector<double>> time_prefix, memory_prefix;
  std::vector<double> stage_limit;
  bool have_limits = true;
  for (int s = 0; s < S; ++s) {
    const int r = schedule.placement.actor_of(s);
    time_prefix.push_back(hetero_prefix(weights[groups.of_actor[r]]));
    stage_limit.push_back(static_cast<double>(limit[r]));
    if (limit[r] <= 0) have_limits = false;
  }
  // (Not with gradient sharding: its transient gradient is the largest layer's, not a sum; the
  // candidates are checked against the memory model below either way.)
  if (one_stage_per_actor && have_limits && !config.shard_gradients) {
    std::vector<std::vector<double>> static_bytes(groups.distinct.size()),
        stash_bytes(groups.distinct.size());
    for (size_t g = 0; g < groups.distinct.size(); ++g) {
      const ClusterSpec& spec = cluster.kinds[cluster.kind_index(groups.distinct[g].kind)].spec;
      const ParallelConfig mesh = mesh_config(config, groups.distinct[g]);
      const OperatorCost op(model, mesh, spec);
      for (int l = 0; l < n; ++l) {
        const StageStaticBytes b = stage_static_bytes(op, l, 1);
        static_bytes[g].push_back(
            static_cast<double>(b.weight_bytes + b.grad_bytes + b.optimizer_bytes) +
            b.loss_transient_bytes);  // a per-actor maximum summed per layer (partition_search)
        stash_bytes[g].push_back(op.stash_bytes(l));
      }
    }
    for (int s = 0; s < S; ++s) {
      const int g = groups.of_actor[schedule.placement.actor_of(s)];
      std::vector<double> per_layer(n);
      for (int l = 0; l < n; ++l)
        per_layer[l] = static_bytes[g][l] + k_counts[s] * stash_bytes[g][l];
      memory_prefix.push_back(hetero_prefix(per_layer));
    }
  }
  const StageGreedy greedy(n, time_prefix, memory_prefix, stage_limit);

  PartitionSearchResult best;
  best.step_time_s = std::numeric_limits<double>::infinity();
  int evaluations = 0;
  std::vector<Partition> seen;
  const auto peaks = [&](const Partition& q) {
    return hetero_peak_memory(model, cluster, config, schedule, meshes, q);
  };
  const auto consider = [&](const Partition& candidate, const std::string& name) {
    if (std::find(seen.begin(), seen.end(), candidate) != seen.end()) return;
    seen.push_back(candidate);
    const std::vector<int64_t> peak = peaks(candidate);
    if (!fits(peak)) return;
    const double t = hetero_step_time_s(model, cluster, config, schedule, meshes, candidate);
    ++evaluations;
    best.evaluations = evaluations;
    if (t < best.step_time_s) {
      best.partition = candidate;
      best.step_time_s = t;
      best.peak_memory_bytes = peak;
      best.start = name;
    }
  };

  // 1. Starting candidates.
  const double hi = greedy.max_total_time();
  const StageGreedy time_greedy(n, time_prefix, {}, stage_limit);
  const double bottleneck =
      hetero_least(0.0, hi, [&](double bound) { return time_greedy.starts(bound, 0).has_value(); });
  consider(partition_from_starts(*time_greedy.starts(bottleneck, 0), n), "time");
  if (greedy.has_memory() && greedy.starts(hi, 1.0)) {
    const double t =
        hetero_least(0.0, hi, [&](double bound) { return greedy.starts(bound, 1.0).has_value(); });
    consider(partition_from_starts(*greedy.starts(t, 1.0), n), "time");
  }
  consider(auto_partition(model, {.num_stages = S}), "flops");
  int transformer_layers = 0;
  for (const LayerWork& l : model.layers) transformer_layers += l.kind == LayerKind::kTransformer;
  if (transformer_layers >= S) consider(even_partition(model, S), "even");

  // 2. Nothing fits.
  if (best.evaluations == 0) {
    Partition least;
    std::vector<int64_t> least_peak;
    if (greedy.has_memory()) {
      const double inf = std::numeric_limits<double>::infinity();
      const double f = hetero_least(0.0, greedy.max_memory_fraction() + 1.0, [&](double frac) {
        return greedy.starts(inf, frac).has_value();
      });
      least = partition_from_starts(*greedy.starts(inf, f), n);
      least_peak = peaks(least);
    } else {
      for (const Partition& c : seen) {
        std::vector<int64_t> pk = peaks(c);
        double worst = 0, least_worst = 0;
        for (int r = 0; r < p; ++r) {
          worst = std::max(worst, static_cast<double>(pk[r]) / std::max<double>(1, limit[r]));
          if (!least_peak.empty())
            least_worst = std::max(
                least_worst, static_cast<double>(least_peak[r]) / std::max<double>(1, limit[r]));
        }
        if (least_peak.empty() || worst < least_worst) {
          least = c;
          least_peak = std::move(pk);
        }
      }
    }
    if (!fits(least_peak)) {
      int actor = 0;
      double worst = -1;
      for (int r = 0; r < p; ++r) {
        const double f = static_cast<double>(least_peak[r]) / std::max<double>(1, limit[r]);
        if (f > worst) {
          worst = f;
          actor = r;
        }
      }
      throw PartitionDoesNotFit(
          std::string(kHeteroSearchFlag) +
              ": no partition fits the memory of each actor's device; " +
              "the search's least need is " + hetero_gib(static_cast<double>(least_peak[actor])) +
              " GiB on actor " + std::to_string(actor) + " (" + meshes[actor].kind + ", tp " +
              std::to_string(meshes[actor].tp) + ", " +
              hetero_gib(static_cast<double>(limit[actor])) + " GiB; stage starts " +
              hetero_starts_text(least) + ")",
          least_peak[actor], actor);
    }
    consider(least, "memory");
  }
  best.start_step_time_s = best.step_time_s;

  // 3. Local search over the boundaries, first improvement.
  for (bool improved = true; improved && evaluations < budget;) {
    improved = false;
    for (int b = 1; b < S && evaluations < budget; ++b) {
      for (int d : {-1, +1}) {
        if (evaluations >= budget) break;
        const std::optional<Partition> q = hetero_moved(best.partition, b, d);
        if (!q) continue;
        const std::vector<int64_t> peak = peaks(*q);
        if (!fits(peak)) continue;
        const double t = hetero_step_time_s(model, cluster, config, schedule, meshes, *q);
        ++evaluations;
        if (t < best.step_time_s - 1e-12) {
          best.partition = *q;
          best.step_time_s = t;
          best.peak_memory_bytes = peak;
          ++best.improvements;
          improved = true;
        }
      }
    }
  }
  best.evaluations = evaluations;
  return best;
}

Plan build_hetero_plan(const PlanRequest& req, const HeteroCluster& cluster,
                       const std::vector<ActorMesh>& meshes) {
  if (req.assignment) throw_input_error("--assign", "is not supported on a heterogeneous cluster");
  if (meshes.empty()) throw_input_error("configuration", "no actors (no meshes)");
  if (req.config.recompute_layers >= 0)
    throw_input_error("--recompute-layers", "is not supported on a heterogeneous cluster");
  if (req.config.recompute_modules != 0)
    throw_input_error("--recompute-modules", "is not supported on a heterogeneous cluster");
  ParallelConfig config = req.config;
  const int pp = static_cast<int>(meshes.size());
  if (config.pp > 0 && config.pp != pp)
    throw_input_error("--pp", std::to_string(config.pp) + " but the meshes of cluster " +
                                  cluster.name + " give " + std::to_string(pp) +
                                  " actors (omit --pp, or change --kind-tp / --actor-kinds)");
  if (config.gpus > 0 && config.gpus != cluster.total_gpus())
    throw_input_error("--gpus", std::to_string(config.gpus) + " but cluster " + cluster.name +
                                    " has " + std::to_string(cluster.total_gpus()) + " GPUs");
  config.pp = pp;
  config.tp = meshes.front().tp;
  config.etp = 0;
  config.gpus = cluster.total_gpus();
  const int m = hetero_check_batch(config);
  config.num_microbatches = m;
  for (size_t r = 0; r < meshes.size(); ++r) {
    const ParallelConfig c = mesh_config(config, meshes[r]);
    check_moe_config(req.model, c, "configuration", /*flags=*/true);
    if (const std::string why = tp_heads_error(req.model, c.tp); !why.empty())
      throw_input_error("configuration", "actor " + std::to_string(r) + " (" + meshes[r].kind +
                                             "): " + why);
    if (c.tp_comm_overlap && !c.sequence_parallel && c.tp > 1)
      throw_input_error("configuration", "--tp-comm-overlap needs --sequence-parallel");
  }
  mesh_kind_indices(cluster, meshes, "meshes");
  const int requested_stages = config.virtual_stages > 1 ? pp * config.virtual_stages : 0;
  Schedule schedule = make_schedule(config.schedule, req.schedule_file, pp, requested_stages, m,
                                    req.fuse_steady_state);
  const int num_stages = schedule.num_stages;
  if (num_stages % pp != 0)
    throw_input_error("schedule",
                      std::to_string(num_stages) + " stages on " + std::to_string(pp) + " actors");
  config.virtual_stages = num_stages / pp;
  if (!req.schedule_file.empty()) config.schedule = schedule.name;

  Plan plan;
  plan.model = req.model;
  plan.cluster = hetero_cluster_to_json(cluster);
  plan.placement = schedule.placement;
  plan.meshes = meshes;
  switch (req.partition) {
    case PartitionMode::kAuto:
      plan.partition = auto_partition(req.model, {.num_stages = num_stages});
      break;
    case PartitionMode::kEven:
      plan.partition = even_partition(req.model, num_stages);
      break;
    case PartitionMode::kExplicit:
      plan.partition = partition_from_starts(req.partition_starts, req.model.num_layers());
      if (plan.partition.num_stages() != num_stages)
        throw_input_error("--partition", "gives " + std::to_string(plan.partition.num_stages()) +
                                             " stages but the schedule has " +
                                             std::to_string(num_stages));
      break;
    case PartitionMode::kBalancedTime:
      plan.partition = search_hetero_partition(req.model, cluster, config, schedule, meshes,
                                               {.max_memory_bytes = req.max_memory_bytes,
                                                .max_evaluations = req.partition_evaluations})
                           .partition;
      break;
  }
  plan.config = config;
  const HeteroCost cost(plan.model, plan.partition, plan.placement, config, cluster, meshes,
                        "meshes");
  plan.program = lower(schedule, lowering_options_of(cost, num_stages));
  return plan;
}

SimulatedPlan simulate_hetero_plan(const Plan& plan, const PlanSimOptions& options) {
  if (options.breakdown)
    throw_input_error("--breakdown", "is not supported on a heterogeneous cluster");
  if (options.perturbation)
    throw_input_error("--perturb", "is not supported on a heterogeneous cluster");
  if (plan.config.recompute_layers >= 0)
    throw_input_error("plan: field 'config.recompute_layers'",
                      "is not supported on a heterogeneous cluster");
  if (plan.config.recompute_modules != 0)
    throw_input_error("plan: field 'config.recompute_modules'",
                      "is not supported on a heterogeneous cluster");
  const HeteroCluster cluster = hetero_cluster_from_json(plan.cluster, "plan: field 'cluster'");
  const HeteroCost cost(plan.model, plan.partition, plan.placement, plan.config, cluster,
                        plan.meshes, "plan: field 'meshes'");
  const MemoryModel mem =
      build_hetero_memory_model(plan.model, plan.partition, plan.placement, plan.config, cluster,
                                plan.meshes, "plan: field 'meshes'");
  SimOptions so;
  so.record_trace = options.record_trace;
  so.overlap_grad_reduce = options.overlap_grad_reduce || plan.config.overlap_grad_reduce;
  double overhead = 0;
  for (const ClusterKind& k : cluster.kinds)
    overhead = std::max(overhead, k.spec.iteration_overhead_s);
  so.iteration_overhead_s = overhead;
  so.static_bytes_per_actor = mem.static_bytes_per_actor();
  so.stash_bytes_per_stage = mem.stash_bytes_per_stage;
  SimulatedPlan out;
  out.program = plan.program;
  out.result = simulate(plan.program, cost, so);
  out.metrics = sim_result_to_json(out.result, plan.program);
  const ParallelConfig& c = plan.config;
  const double step = out.result.step_time_s;
  const double batch = c.global_batch;
  const double model_flops = plan.model.model_flops_per_sequence() * batch;
  const double hw_flops = plan.model.hardware_flops_per_sequence(c.recompute) * batch;
  double peak = 0;  // FLOP/s of every GPU of the cluster
  for (const ClusterKind& k : cluster.kinds) peak += k.gpus * k.spec.peak_flops(plan.model.dtype);
  out.metrics["tokens_per_s"] = batch * plan.model.tokens_per_sequence() / step;
  out.metrics["tflops_per_gpu"] = hw_flops / step / cluster.total_gpus() / 1e12;
  out.metrics["mfu"] = model_flops / step / peak;
  out.metrics["hfu"] = hw_flops / step / peak;
  out.metrics["model_flops_per_iteration"] = model_flops;
  out.metrics["hardware_flops_per_iteration"] = hw_flops;
  out.metrics["gpus"] = cluster.total_gpus();
  out.metrics["cluster"] = cluster.name;
  out.metrics["model"] = plan.model.name;
  out.metrics["config"] = config_to_json(plan.config);
  const std::vector<int> layers = layers_per_actor(plan.partition, plan.placement);
  nlohmann::json meshes = nlohmann::json::array();
  for (size_t r = 0; r < plan.meshes.size(); ++r)
    meshes.push_back({{"actor", r},
                      {"kind", plan.meshes[r].kind},
                      {"tp", plan.meshes[r].tp},
                      {"layers", layers[r]}});
  out.metrics["meshes"] = meshes;
  nlohmann::json warnings = nlohmann::json::array();
  if (out.result.bubble_rate >= 0.9) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "bubble rate %.0f%% on actor %d: the pipeline is idle most of the step",
                  out.result.bubble_rate * 100, out.result.bubble_actor);
    warnings.push_back(buf);
  }
  out.metrics["warnings"] = warnings;
  if (options.check_memory) {
    std::vector<int64_t> peaks;
    for (const ActorStats& a : out.result.actors) peaks.push_back(a.peak_memory_bytes);
    check_hetero_memory_fits(peaks, cluster, plan.meshes, options.max_memory_bytes);
  }
  return out;
}

std::string describe_hetero_config(const HeteroExploreRow& row) {
  std::string text = "dp " + std::to_string(row.config.dp);
  for (size_t r = 0; r < row.meshes.size();) {
    size_t e = r;
    while (e < row.meshes.size() && row.meshes[e] == row.meshes[r]) ++e;
    text += ", " + row.meshes[r].kind + " tp " + std::to_string(row.meshes[r].tp) + " x" +
            std::to_string(e - r);
    r = e;
  }
  text += ", " + row.config.schedule + ", mbs " + std::to_string(row.config.microbatch_size) +
          ", recompute " + std::string(to_string(row.config.recompute)) + ", zero1 " +
          (row.config.zero1 ? "on" : "off");
  return text;
}

nlohmann::json hetero_row_to_json(const HeteroExploreRow& row) {
  nlohmann::json meshes = nlohmann::json::array();
  for (size_t r = 0; r < row.meshes.size(); ++r)
    meshes.push_back({{"actor", r},
                      {"kind", row.meshes[r].kind},
                      {"tp", row.meshes[r].tp},
                      {"layers", r < row.layers_per_actor.size() ? row.layers_per_actor[r] : 0}});
  const auto time = [](double t) {
    return std::isfinite(t) ? nlohmann::json(t) : nlohmann::json();
  };
  return {{"config", config_to_json(row.config)},
          {"description", describe_hetero_config(row)},
          {"meshes", meshes},
          {"stage_begin", row.partition.stage_begin},
          {"step_time_s", time(row.step_time_s)},
          {"even_step_time_s", time(row.even_step_time_s)},
          {"peak_memory_bytes", row.peak_memory_bytes}};
}

HeteroExploreResult explore_hetero(const ModelSpec& model, const HeteroCluster& cluster,
                                   const HeteroExploreOptions& options) {
  HeteroExploreResult result;
  int common = 0;
  for (const ClusterKind& k : cluster.kinds) common = std::gcd(common, k.gpus);
  const int K = static_cast<int>(cluster.kinds.size());
  for (int dp = 1; dp <= common; ++dp) {
    if (common % dp != 0) continue;
    // Every tp per kind from options.tps that fits the kind.
    std::vector<std::vector<int>> choices(K);
    for (int k = 0; k < K; ++k)
      for (int tp : options.tps)
        if ((cluster.kinds[k].gpus / dp) % tp == 0 &&
            tp <= cluster.kinds[k].spec.devices_per_node &&
            (model.heads <= 0 || model.heads % tp == 0))
          choices[k].push_back(tp);
    bool empty = false;
    for (const auto& c : choices) empty = empty || c.empty();
    if (empty) continue;
    std::vector<size_t> pick(K, 0);
    for (bool more = true; more;) {
      std::vector<int> kind_tp(K);
      for (int k = 0; k < K; ++k) kind_tp[k] = choices[k][pick[k]];
      for (const std::string& schedule : options.schedules)
        for (int mbs : options.microbatch_sizes)
          for (Recompute rc : options.recomputes)
            for (bool z : options.zero1) {
              HeteroExploreRow row;
              row.config = options.base;
              row.config.dp = dp;
              row.config.pp = 0;
              row.config.gpus = 0;
              row.config.virtual_stages = 1;
              row.config.schedule = schedule;
              row.config.microbatch_size = mbs;
              row.config.recompute = rc;
              row.config.zero1 = z;
              ++result.configurations;
              try {
                row.meshes = resolve_meshes(cluster, row.config, kind_tp, {});
                PlanRequest req;
                req.model = model;
                req.config = row.config;
                req.partition = PartitionMode::kEven;
                req.max_memory_bytes = options.max_memory_bytes;
                req.partition_evaluations = options.partition_evaluations;
                const Plan even = build_hetero_plan(req, cluster, row.meshes);
                row.config = even.config;
                PlanSimOptions so;
                so.record_trace = false;
                so.max_memory_bytes = options.max_memory_bytes;
                row.even_step_time_s = std::numeric_limits<double>::infinity();
                try {
                  row.even_step_time_s = simulate_hetero_plan(even, so).result.step_time_s;
                } catch (const InputError&) {
                  // does not fit: the balanced-time split may
                }
                req.partition = PartitionMode::kBalancedTime;
                const Plan plan = build_hetero_plan(req, cluster, row.meshes);
                const SimulatedPlan sim = simulate_hetero_plan(plan, so);
                row.partition = plan.partition;
                row.step_time_s = sim.result.step_time_s;
                for (const ActorStats& a : sim.result.actors)
                  row.peak_memory_bytes.push_back(a.peak_memory_bytes);
                row.layers_per_actor = layers_per_actor(plan.partition, plan.placement);
                if (std::isfinite(row.even_step_time_s)) result.even_rows.push_back(row);
                result.rows.push_back(std::move(row));
              } catch (const InputError& e) {
                result.pruned.push_back(describe_hetero_config(row) + ": " + e.what());
              }
            }
      // Next combination of tps.
      more = false;
      for (int k = 0; k < K; ++k) {
        if (++pick[k] < choices[k].size()) {
          more = true;
          break;
        }
        pick[k] = 0;
      }
    }
  }
  std::stable_sort(result.rows.begin(), result.rows.end(),
                   [](const auto& a, const auto& b) { return a.step_time_s < b.step_time_s; });
  std::stable_sort(
      result.even_rows.begin(), result.even_rows.end(),
      [](const auto& a, const auto& b) { return a.even_step_time_s < b.even_step_time_s; });
  return result;
}

}  // namespace jaxpp
