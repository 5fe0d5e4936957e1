#include "costmodel/memory.h"

#include <cmath>
#include <cstdio>

#include "graph/error.h"
#include "graph/task_graph.h"

namespace jaxpp {

std::vector<int64_t> MemoryModel::static_bytes_per_actor() const {
  std::vector<int64_t> out;
  out.reserve(actors.size());
  for (const ActorMemory& a : actors) out.push_back(a.static_bytes());
  return out;
}

MemoryModel build_memory_model(const ModelSpec& model, const Partition& partition,
                               const Placement& placement, const ParallelConfig& config,
                               const ClusterSpec& cluster) {
  const std::vector<StageWork> work =
      compute_stage_work(model, partition, config.microbatch_size, config.recompute);
  const double tp = config.tp;
  MemoryModel mem;
  mem.actors.resize(placement.num_actors);
  mem.stash_bytes_per_stage.resize(work.size());
  for (int s = 0; s < static_cast<int>(work.size()); ++s) {
    const int actor = placement.actor_of(s);
    ActorMemory& a = mem.actors[actor];
    const double params = static_cast<double>(work[s].params) / tp;
    a.params += static_cast<int64_t>(std::llround(params));
    a.weight_bytes += std::llround(params * cluster.weight_bytes_per_param);
    a.grad_bytes += std::llround(params * cluster.grad_bytes_per_param);
    a.optimizer_bytes += std::llround(params * cluster.optimizer_state_bytes_per_param /
                                      (config.zero1 ? config.dp : 1));
    double factor = 1.0 / tp;
    if (!config.sequence_parallel) {
      factor = config.recompute == Recompute::kFull ? 1.0 : (10.0 + 24.0 / tp) / 34.0;
    }
    mem.stash_bytes_per_stage[s] = std::llround(static_cast<double>(work[s].stash_bytes) * factor);
  }
  return mem;
}

void check_memory_fits(const std::vector<int64_t>& peak_bytes_per_actor,
                       const ClusterSpec& cluster) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  for (size_t r = 0; r < peak_bytes_per_actor.size(); ++r) {
    if (peak_bytes_per_actor[r] <= cluster.hbm_bytes) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, "does not fit: actor %zu needs %.1f GiB, has %.1f GiB (%s)", r,
                  static_cast<double>(peak_bytes_per_actor[r]) / kGiB,
                  static_cast<double>(cluster.hbm_bytes) / kGiB, cluster.name.c_str());
    throw InputError(buf);
  }
}

}  // namespace jaxpp
