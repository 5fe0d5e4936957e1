// Plans on a heterogeneous cluster (costmodel/hetero_cluster.h): every pipeline actor runs on one
// device kind with its own tensor parallelism (its mesh, graph/plan.h ActorMesh); dp, cp, the
// microbatches and the schedule are shared. Used by `jaxpp-sim simulate --cluster mixed.json`
// and `jaxpp-sim explore --cluster mixed.json` (docs/hardware.md, docs/partition.md).
//
// Meshes (resolve_meshes). Each kind k has a tp, tp_k (--kind-tp, one per kind in file order;
// default --tp for all). Placement rule: without --actor-kinds, the kinds take the actors in file
// order, kind k the next n_k = gpus_k / (tp_k · dp · cp) actors (so the first actors run on the
// first kind); pp = Σ n_k. With --actor-kinds (one kind name per actor, any order) the actors of
// kind k must use exactly its GPUs: (actors of k) · tp_k · dp · cp = gpus_k. Every GPU of every
// kind is used, as pp·tp·dp·cp = gpus on one kind.
//
// Partition (search_hetero_partition, `--partition balanced-time`): the search of
// simulator/partition_search.h with per-actor costs. A layer's weight depends on the kind and tp
// of the actor whose stage holds it (layer_weights_s on that kind), so a slower kind's stages get
// fewer layers; memory is checked per actor against its own kind's HBM (or --max-memory-gib).
//   1. Starting candidates: "time", the exact bottleneck-optimal split under per-stage weights
//      (bisection on the bottleneck; a stage takes the longest range within the bound that leaves
//      a layer to each later stage), with one stage per actor also under each stage's memory
//      limit; "flops" (--partition auto) and "even" (--partition even). Those that fit are
//      simulated with HeteroCost; the fastest is the start.
//   2. Nothing fits: with one stage per actor, the split of least memory relative to each
//      limit (bisection on a common fraction of the limits); if it does not fit either, or with
//      several stages per actor, PartitionDoesNotFit naming the actor, its kind and its need.
//   3. Local search over the boundaries, one layer at a time, first improvement, at most
//      max_evaluations simulations in all (default 4·S + 16).
//
// Usage:
//   std::vector<ActorMesh> meshes = resolve_meshes(cluster, config, {4, 2}, {});
//   Plan plan = build_hetero_plan(request, cluster, meshes);
//   SimulatedPlan sim = simulate_hetero_plan(plan, {});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/hetero_cluster.h"
#include "graph/model.h"
#include "graph/plan.h"
#include "schedules/schedule.h"
#include "simulator/partition_search.h"
#include "simulator/plan_builder.h"

namespace jaxpp {

// The meshes of the rule above. kind_tp: empty or one per kind (InputError naming --kind-tp);
// actor_kinds: empty or one kind name per actor (InputError naming --actor-kinds[i] for a kind
// the cluster lacks, and --actor-kinds when a kind's actors do not use exactly its GPUs);
// config.tp (for an empty kind_tp), dp and cp are read. InputError naming the kind when its GPUs
// are not a multiple of tp_k·dp·cp.
std::vector<ActorMesh> resolve_meshes(const HeteroCluster& cluster, const ParallelConfig& config,
                                      const std::vector<int>& kind_tp,
                                      const std::vector<std::string>& actor_kinds);

// build_plan (simulator/plan_builder.h) on a heterogeneous cluster: request.cluster is not read;
// config.pp must be 0 (derived) or the number of meshes, config.gpus 0 or the cluster's GPUs;
// partition auto, even, explicit starts or balanced-time; no assignment. The plan's cluster is
// hetero_cluster_to_json(cluster), its meshes `meshes`, config.tp the first mesh's tp, config.gpus
// the cluster's GPUs.
Plan build_hetero_plan(const PlanRequest& request, const HeteroCluster& cluster,
                       const std::vector<ActorMesh>& meshes);

// simulate_plan for a plan with meshes (simulate_plan calls it): HeteroCost, the per-kind memory
// model and the engine. Metrics as simulate_plan's (tflops_per_gpu over all GPUs; mfu and hfu
// over the sum of every GPU's peak) plus "meshes": [{"actor", "kind", "tp", "layers"}] (layers:
// the transformer and other layers the actor holds). The fit check compares each actor with its
// own kind's HBM. breakdown and perturbation are not supported (InputError).
SimulatedPlan simulate_hetero_plan(const Plan& plan, const PlanSimOptions& options);

// The search described above. `meshes`: one per actor of schedule.placement.
PartitionSearchResult search_hetero_partition(const ModelSpec& model, const HeteroCluster& cluster,
                                              const ParallelConfig& config,
                                              const Schedule& schedule,
                                              const std::vector<ActorMesh>& meshes,
                                              const PartitionSearchOptions& options);

// Simulated step time (seconds) of a partition on the meshes (no memory check).
double hetero_step_time_s(const ModelSpec& model, const HeteroCluster& cluster,
                          const ParallelConfig& config, const Schedule& schedule,
                          const std::vector<ActorMesh>& meshes, const Partition& partition);

// Peak bytes per device of every actor, each on its own kind and tp.
std::vector<int64_t> hetero_peak_memory(const ModelSpec& model, const HeteroCluster& cluster,
                                        const ParallelConfig& config, const Schedule& schedule,
                                        const std::vector<ActorMesh>& meshes,
                                        const Partition& partition);

// explore on a heterogeneous cluster: every dp dividing each kind's GPUs, every combination of a
// tp per kind from `tps` (tp_k dividing gpus_k / dp, at most the kind's devices_per_node, dividing
// the attention heads), every schedule, microbatch size, recompute policy and ZeRO-1 setting;
// one stage per actor. Each configuration is partitioned with balanced-time (the heterogeneous
// split) and with even (the baseline), both simulated; configurations where neither fits are
// pruned with the reason.
struct HeteroExploreOptions {
  ParallelConfig base;  // global_batch, sequence_parallel, attention, tp_comm_overlap, ...
  std::vector<std::string> schedules;
  std::vector<int> tps;
  std::vector<int> microbatch_sizes;
  std::vector<Recompute> recomputes;
  std::vector<bool> zero1;
  int64_t max_memory_bytes = 0;
  int partition_evaluations = 0;
};

struct HeteroExploreRow {
  ParallelConfig config;
  std::vector<ActorMesh> meshes;
  Partition partition;     // balanced-time
  double step_time_s = 0;  // balanced-time; infinity when it does not fit
  std::vector<int64_t> peak_memory_bytes;
  double even_step_time_s = 0;        // infinity when the even split does not fit
  std::vector<int> layers_per_actor;  // of the balanced-time partition
};

struct HeteroExploreResult {
  std::vector<HeteroExploreRow> rows;  // fitting balanced-time rows, fastest first
  std::vector<std::string> pruned;     // "<config>: <reason>"
  int configurations = 0;
  std::vector<HeteroExploreRow> even_rows;  // rows whose even split fits, fastest even first
};

HeteroExploreResult explore_hetero(const ModelSpec& model, const HeteroCluster& cluster,
                                   const HeteroExploreOptions& options);

// One line describing a row's configuration: "dp 1, h100-sxm tp 4 x2, a100-80g tp 4 x2, 1f1b,
// mbs 1, recompute none, zero1 off".
std::string describe_hetero_config(const HeteroExploreRow& row);

// The JSON of a row (config, meshes, stage starts, layers per actor, step times, peaks).
nlohmann::json hetero_row_to_json(const HeteroExploreRow& row);

}  // namespace jaxpp
