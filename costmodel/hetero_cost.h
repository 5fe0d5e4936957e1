// HeteroCost: the cost model of a pipeline whose actors run on different device kinds
// (costmodel/hetero_cluster.h), each actor with its own mesh: a device kind and a tensor
// parallelism (graph/plan.h ActorMesh); dp, cp and the rest of ParallelConfig are shared.
//
// Compute, all-to-all and the dp gradient reduction of an actor are priced by an AnalyticCost
// (costmodel/analytic_cost.h) built on the actor's kind (its ClusterSpec) with the actor's tp:
// every actor is priced on its own devices. One AnalyticCost per distinct (kind, tp).
//
// Rank layout: the devices of each kind are numbered on their own; the actors of a kind take
// them in actor order, tp·cp·dp devices each (tp innermost, as analytic_cost.h). Two actors of the
// same kind are on the same node when their first devices are (device / devices_per_node).
//
// P2P between actors a and b:
//   same kind, same node      the kind's intra_node link
//   same kind, other node     the kind's inter_node link
//   different kinds           the cluster's inter_kind link
//   latency = link latency + p2p_overhead_s (the larger of the two kinds'), bandwidth = link
//   bandwidth · efficiency.
// Payload and reshard. Stage s sends its output forward to stage s+1 (and receives the gradient
// of the same shape back). With tp_a devices on the sending actor and tp_b on the receiving one,
// the payload per device over the link is output / (min(tp_a, tp_b) · cp): min(tp_a, tp_b) device
// pairs carry it, one slice each (equal tp: Megatron's scatter/gather, as AnalyticCost). When the
// tps differ, the side with k = max/min times more devices reshards its slices within groups of k
// devices over its own NVLink: the sender all-gathers k slices into the one slice it sends, or the
// receiver splits the slice it received among k devices. Priced as a ring all-gather of the
// link payload n over k devices of that side's kind, added to the transfer's latency:
//   reshard = (k−1)/k · n / (intra_node bandwidth · allreduce_bus_efficiency)
//             + (k−1) · collective step latency
// (max/min must be an integer: tps 2 and 3 are refused).
// Memory: each actor's bytes come from the memory model (costmodel/memory.h) of its kind and tp;
// the fit check compares each actor with its own kind's HBM.
//
// Usage:
//   HeteroCost cost(model, partition, placement, config, cluster, meshes, "--actor-kinds");
//   double t = cost.compute_s(actor, instruction);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "costmodel/analytic_cost.h"
#include "costmodel/cost_provider.h"
#include "costmodel/hetero_cluster.h"
#include "costmodel/memory.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/plan.h"

namespace jaxpp {

// The index of each mesh's kind in the cluster. InputError naming `where`[i] when a mesh names a
// kind the cluster lacks ("<where>[2]: device kind 'v100' is not in cluster mixed (kinds: ...)").
std::vector<int> mesh_kind_indices(const HeteroCluster& cluster,
                                   const std::vector<ActorMesh>& meshes, const std::string& where);

// The configuration of one actor: `config` with the mesh's tp (etp reset to its default).
ParallelConfig mesh_config(const ParallelConfig& config, const ActorMesh& mesh);

class HeteroCost : public CostProvider {
 public:
  // meshes: one per actor of `placement`. InputError for a mesh of an unknown kind (naming
  // `where`), tps that are not multiples of each other on neighbouring stages, or what
  // AnalyticCost refuses.
  HeteroCost(const ModelSpec& model, const Partition& partition, const Placement& placement,
             const ParallelConfig& config, const HeteroCluster& cluster,
             const std::vector<ActorMesh>& meshes, const std::string& where);

  double compute_s(int actor, const Instruction& ins) const override;
  double p2p_latency_s(int from, int to) const override;
  double p2p_bandwidth_bytes_per_s(int from, int to) const override;
  int link_id(int from, int to) const override;
  double transfer_latency_s(int from, int to, const Instruction& ins) const override;
  AllToAll alltoall(int actor, const Instruction& ins) const override;
  double allreduce_s(int actor, const Instruction& ins) const override;
  double collective_busy_s(int actor, const Instruction& ins) const override;

  // Reshard time of a transfer of `bytes` per device from actor `from` to actor `to` (0 for equal
  // tp).
  double reshard_s(int from, int to, int64_t bytes) const;
  bool same_node(int a, int b) const;
  // Per-device link payload of stage s's output (see above) and its gradient bytes per device
  // (on the stage's actor).
  int64_t activation_bytes(int stage) const;
  int64_t grad_bytes(int stage) const;
  // Gradient sharding: the lowering emits one reduction per microbatch and stage.
  bool reduces_each_microbatch() const { return costs_.front()->reduces_each_microbatch(); }
  // Parameter sharding: an all-gather before every F, B and I; its bytes on the stage's actor.
  bool gathers_params() const { return costs_.front()->gathers_params(); }
  int64_t param_bytes(int stage) const;

  const AnalyticCost& actor_cost(int actor) const { return *costs_.at(cost_of_actor_.at(actor)); }
  const ClusterSpec& actor_cluster(int actor) const;
  int kind_of(int actor) const { return kind_.at(actor); }
  int tp_of(int actor) const { return tp_.at(actor); }
  int num_actors() const { return static_cast<int>(kind_.size()); }

 private:
  HeteroCluster cluster_;
  Placement placement_;
  std::vector<int> kind_, tp_, first_device_, cost_of_actor_;
  std::vector<std::unique_ptr<AnalyticCost>> costs_;
  std::vector<int64_t> activation_bytes_;
};

// The memory model of each actor on its own kind and tp (MemoryModel's fields: per actor, and per
// stage from the stage's actor).
MemoryModel build_hetero_memory_model(const ModelSpec& model, const Partition& partition,
                                      const Placement& placement, const ParallelConfig& config,
                                      const HeteroCluster& cluster,
                                      const std::vector<ActorMesh>& meshes,
                                      const std::string& where);

// InputError "does not fit: actor r (kind K) needs X GiB, has Y GiB (K's HBM)" for the first actor
// whose peak exceeds its kind's HBM (or limit_bytes when > 0, named --max-memory-gib).
void check_hetero_memory_fits(const std::vector<int64_t>& peak_bytes_per_actor,
                              const HeteroCluster& cluster, const std::vector<ActorMesh>& meshes,
                              int64_t limit_bytes);

}  // namespace jaxpp
