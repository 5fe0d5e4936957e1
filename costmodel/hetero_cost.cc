#include "costmodel/hetero_cost.h"

#include <algorithm>
#include <cstdio>

#include "graph/error.h"

namespace jaxpp {

std::vector<int> mesh_kind_indices(const HeteroCluster& cluster,
                                   const std::vector<ActorMesh>& meshes, const std::string& where) {
  std::vector<int> kinds;
  for (size_t r = 0; r < meshes.size(); ++r) {
    const int k = cluster.kind_index(meshes[r].kind);
    if (k < 0)
      throw_input_error(where + "[" + std::to_string(r) + "]",
                        "device kind '" + meshes[r].kind + "' is not in cluster " + cluster.name +
                            " (kinds: " + cluster.kind_names() + ")");
    kinds.push_back(k);
  }
  return kinds;
}

ParallelConfig mesh_config(const ParallelConfig& config, const ActorMesh& mesh) {
  ParallelConfig c = config;
  c.tp = mesh.tp;
  c.etp = 0;
  return c;
}

HeteroCost::HeteroCost(const ModelSpec& model, const Partition& partition,
                       const Placement& placement, const ParallelConfig& config,
                       const HeteroCluster& cluster, const std::vector<ActorMesh>& meshes,
                       const std::string& where)
    : cluster_(cluster), placement_(placement) {
  if (static_cast<int>(meshes.size()) != placement.num_actors)
    throw_input_error(where, std::to_string(meshes.size()) + " meshes for " +
                                 std::to_string(placement.num_actors) + " actors");
  kind_ = mesh_kind_indices(cluster, meshes, where);
  std::vector<int> next_device(cluster.kinds.size(), 0);
  std::vector<std::pair<int, int>> built;  // (kind, tp) of costs_
  for (size_t r = 0; r < meshes.size(); ++r) {
    tp_.push_back(meshes[r].tp);
    first_device_.push_back(next_device[kind_[r]]);
    next_device[kind_[r]] += meshes[r].tp * config.cp * config.dp;
    const std::pair<int, int> key(kind_[r], meshes[r].tp);
    auto it = std::find(built.begin(), built.end(), key);
    if (it == built.end()) {
      costs_.push_back(std::make_unique<AnalyticCost>(model, partition, placement,
                                                      mesh_config(config, meshes[r]),
                                                      cluster.kinds[kind_[r]].spec));
      built.push_back(key);
      it = built.end() - 1;
    }
    cost_of_actor_.push_back(static_cast<int>(it - built.begin()));
  }
  const int S = partition.num_stages();
  for (int s = 0; s < S; ++s) {
    const int a = placement.actor_of(s);
    const int b = s + 1 < S ? placement.actor_of(s + 1) : a;
    const int lo = std::min(tp_[a], tp_[b]), hi = std::max(tp_[a], tp_[b]);
    if (hi % lo != 0)
      throw_input_error(where, "stage " + std::to_string(s) + " on actor " + std::to_string(a) +
                                   " (tp " + std::to_string(tp_[a]) + ") sends to actor " +
                                   std::to_string(b) + " (tp " + std::to_string(tp_[b]) +
                                   "): neighbouring tps must be multiples of each other");
    const int64_t shards = static_cast<int64_t>(lo) * config.cp;
    const int64_t full = actor_cost(a).stage_work().at(s).output_bytes;
    activation_bytes_.push_back((full + shards - 1) / shards);
  }
}

const ClusterSpec& HeteroCost::actor_cluster(int actor) const {
  return cluster_.kinds.at(kind_.at(actor)).spec;
}

double HeteroCost::compute_s(int actor, const Instruction& ins) const {
  return actor_cost(actor).compute_s(actor, ins);
}

CostProvider::AllToAll HeteroCost::alltoall(int actor, const Instruction& ins) const {
  return actor_cost(actor).alltoall(actor, ins);
}

double HeteroCost::allreduce_s(int actor, const Instruction& ins) const {
  return actor_cost(actor).allreduce_s(actor, ins);
}

double HeteroCost::collective_busy_s(int actor, const Instruction& ins) const {
  return actor_cost(actor).collective_busy_s(actor, ins);
}

bool HeteroCost::same_node(int a, int b) const {
  if (kind_.at(a) != kind_.at(b)) return false;
  const int n = std::max(1, actor_cluster(a).devices_per_node);
  return first_device_[a] / n == first_device_[b] / n;
}

double HeteroCost::p2p_latency_s(int from, int to) const {
  const double overhead =
      std::max(actor_cluster(from).p2p_overhead_s, actor_cluster(to).p2p_overhead_s);
  if (kind_.at(from) != kind_.at(to)) return cluster_.inter_kind.latency_s + overhead;
  const ClusterSpec& c = actor_cluster(from);
  return (same_node(from, to) ? c.intra_node : c.inter_node).latency_s + overhead;
}

double HeteroCost::p2p_bandwidth_bytes_per_s(int from, int to) const {
  if (kind_.at(from) != kind_.at(to)) return cluster_.inter_kind.effective_bandwidth_bytes_per_s();
  const ClusterSpec& c = actor_cluster(from);
  return (same_node(from, to) ? c.intra_node : c.inter_node).effective_bandwidth_bytes_per_s();
}

int HeteroCost::link_id(int from, int to) const { return from * num_actors() + to; }

double HeteroCost::reshard_s(int from, int to, int64_t bytes) const {
  const int a = tp_.at(from), b = tp_.at(to);
  if (a == b || bytes <= 0) return 0;
  const int larger = a > b ? from : to;
  const int k = std::max(a, b) / std::min(a, b);
  const ClusterSpec& c = actor_cluster(larger);
  const double bw = c.intra_node.bandwidth_bytes_per_s * c.allreduce_bus_efficiency;
  return (k - 1.0) / k * static_cast<double>(bytes) / bw + (k - 1) * c.intra_collective_latency_s();
}

double HeteroCost::transfer_latency_s(int from, int to, const Instruction& ins) const {
  return p2p_latency_s(from, to) + reshard_s(from, to, ins.bytes);
}

int64_t HeteroCost::activation_bytes(int stage) const { return activation_bytes_.at(stage); }

int64_t HeteroCost::grad_bytes(int stage) const {
  return actor_cost(placement_.actor_of(stage)).grad_bytes(stage);
}

int64_t HeteroCost::param_bytes(int stage) const {
  return actor_cost(placement_.actor_of(stage)).param_bytes(stage);
}

MemoryModel build_hetero_memory_model(const ModelSpec& model, const Partition& partition,
                                      const Placement& placement, const ParallelConfig& config,
                                      const HeteroCluster& cluster,
                                      const std::vector<ActorMesh>& meshes,
                                      const std::string& where) {
  const std::vector<int> kinds = mesh_kind_indices(cluster, meshes, where);
  MemoryModel out;
  out.actors.resize(meshes.size());
  out.stash_bytes_per_stage.assign(partition.num_stages(), 0);
  std::vector<std::pair<std::pair<int, int>, MemoryModel>> built;
  for (size_t r = 0; r < meshes.size(); ++r) {
    const std::pair<int, int> key(kinds[r], meshes[r].tp);
    auto it =
        std::find_if(built.begin(), built.end(), [&](const auto& e) { return e.first == key; });
    if (it == built.end()) {
      built.emplace_back(
          key, build_memory_model(model, partition, placement, mesh_config(config, meshes[r]),
                                  cluster.kinds[kinds[r]].spec));
      it = built.end() - 1;
    }
    out.actors[r] = it->second.actors.at(r);
    for (int s = 0; s < partition.num_stages(); ++s)
      if (placement.actor_of(s) == static_cast<int>(r))
        out.stash_bytes_per_stage[s] = it->second.stash_bytes_per_stage.at(s);
  }
  return out;
}

void check_hetero_memory_fits(const std::vector<int64_t>& peak_bytes_per_actor,
                              const HeteroCluster& cluster, const std::vector<ActorMesh>& meshes,
                              int64_t limit_bytes) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const std::vector<int> kinds = mesh_kind_indices(cluster, meshes, "meshes");
  for (size_t r = 0; r < peak_bytes_per_actor.size() && r < kinds.size(); ++r) {
    const ClusterKind& kind = cluster.kinds[kinds[r]];
    const int64_t limit = limit_bytes > 0 ? limit_bytes : kind.spec.hbm_bytes;
    if (peak_bytes_per_actor[r] <= limit) continue;
    const std::string name = limit_bytes > 0 ? "--max-memory-gib" : kind.name + "'s HBM";
    char buf[256];
    std::snprintf(buf, sizeof buf, "does not fit: actor %zu (%s) needs %.1f GiB, has %.1f GiB (%s)",
                  r, kind.name.c_str(), static_cast<double>(peak_bytes_per_actor[r]) / kGiB,
                  static_cast<double>(limit) / kGiB, name.c_str());
    throw InputError(buf);
  }
}

}  // namespace jaxpp
