// AnalyticCost: instruction durations from a model, a partition, a placement, a parallel
// configuration and a cluster (roofline compute with efficiency, alpha-beta links, ring
// collectives). Implements CostProvider for the simulator.
//
// Rank layout (documented assumption): global rank = tp_index + tp·(dp_index + dp·pp_rank), i.e.
// tensor parallelism innermost, then data parallelism, then pipeline. Node of a rank =
// rank / devices_per_node. Actor r (pipeline rank r) holds ranks [r·tp·dp, (r+1)·tp·dp); two
// actors a, b are "on the same node" when their first ranks are: (a·tp·dp)/n == (b·tp·dp)/n.
//
// Compute (per task, per microbatch of `microbatch_size` sequences, on one device):
//   t(pass) = Σ_layers flops_l / tp / (peak(dtype) · eff(flops_l / tp))      (see cluster.h)
//   F = t(fwd) + TP(fwd)
//   I = t(bwd_input) + t(recompute) + TP(bwd) [+ TP(fwd) again with full recompute]
//   W = t(bwd_weight)            B = I + W
//   a fused group = Σ tasks + launch_overhead_s; kOptimizer = params/tp [/dp with ZeRO-1] ·
//   optimizer_traffic_bytes_per_param / hbm_bandwidth.
// TP(pass) = tensor-parallel all-reduces of the pass (Megatron: 2 per transformer layer forward,
//   2 backward), ring over tp devices: 2(t−1)/t · bytes / (link bw · allreduce_bus_efficiency)
//   + 2·latency per collective; NVLink when tp <= devices_per_node. Sequence parallelism replaces
//   each all-reduce by reduce-scatter + all-gather of the same total volume (same time); it only
//   changes activation memory (memory.h).
// P2P: latency = link latency + p2p_overhead_s, bandwidth = link bandwidth · efficiency, link by
//   the rank layout above; payload per device = the stage's output bytes / tp (Megatron's
//   scatter/gather: each of the tp devices sends its slice over its own NIC).
// DP gradient all-reduce of a stage (kAllReduce, bytes = per-device gradient bytes n): hierarchical
//   ring. g = dp peers inside one node = clamp(devices_per_node / tp, 1, dp), k = dp / g nodes:
//     reduce-scatter inside the node  (g−1)/g · n / bw_intra'
//     all-reduce across nodes         2(k−1)/k · (n/g) / bw_inter'
//     all-gather inside the node      (g−1)/g · n / bw_intra'
//   (bw' = bandwidth · allreduce_bus_efficiency) plus 2(g−1) intra and 2(k−1) inter latencies.
//   With ZeRO-1 the reduce-scatter + all-gather of the sharded optimizer moves the same volume, so
//   the time is the same; the optimizer step and its state shrink by dp.
// Units: seconds, bytes, FLOPs, bytes per second.
//
// Usage:
//   AnalyticCost cost(model, partition, placement, config, cluster);
//   double f = cost.task_s(TaskKind::kF, /*stage=*/0);
#pragma once

#include <cstdint>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/cost_provider.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/plan.h"
#include "graph/task_graph.h"

namespace jaxpp {

class AnalyticCost : public CostProvider {
 public:
  // InputError when the configuration is inconsistent (stages of partition and placement differ,
  // the cluster lacks the model's dtype, ...).
  AnalyticCost(const ModelSpec& model, const Partition& partition, const Placement& placement,
               const ParallelConfig& config, const ClusterSpec& cluster);

  double compute_s(int actor, const Instruction& ins) const override;
  double p2p_latency_s(int from, int to) const override;
  double p2p_bandwidth_bytes_per_s(int from, int to) const override;
  int link_id(int from, int to) const override;  // directed actor pair
  double allreduce_s(int actor, const Instruction& ins) const override;

  double task_s(TaskKind kind, int stage) const;  // without launch overhead
  double optimizer_s(int stage) const;
  double tp_comm_s(int stage) const;  // TP all-reduce time of one pass (forward) of a stage
  // Gradient all-reduce time of `bytes` per device across the dp replicas.
  double dp_allreduce_s(int64_t bytes) const;
  bool same_node(int actor_a, int actor_b) const;

  // Per-device payload of the activation stage s sends forward (= gradient sent backward).
  int64_t activation_bytes(int stage) const;
  // Per-device gradient bytes of stage s (reduced across dp).
  int64_t grad_bytes(int stage) const;
  const std::vector<StageWork>& stage_work() const { return work_; }

 private:
  double pass_s(const ModelSpec& model, int stage, int which) const;

  ParallelConfig config_;
  ClusterSpec cluster_;
  int num_actors_ = 0;
  std::vector<StageWork> work_;
  std::vector<std::vector<double>> task_s_;  // [stage][TaskKind]
  std::vector<double> optimizer_s_;
  std::vector<double> tp_comm_s_;
};

}  // namespace jaxpp
