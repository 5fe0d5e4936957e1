// AnalyticCost: instruction durations from a model, a partition, a placement, a parallel
// configuration and a cluster (roofline compute with efficiency, alpha-beta links, ring
// collectives). Implements CostProvider for the simulator.
//
// Rank layout (documented assumption): global rank = tp_index + tp·(cp_index + cp·(dp_index +
// dp·pp_rank)), i.e. tensor parallelism innermost, then context, then data parallelism, then
// pipeline (Megatron-LM's order). Node of a rank = rank / devices_per_node. Actor r (pipeline rank
// r) holds ranks [r·g, (r+1)·g) with g = tp·cp·dp; two actors a, b are "on the same node" when
// their first ranks are: (a·g)/n == (b·g)/n.
//
// Compute (per task, per microbatch of `microbatch_size` sequences, on one device): the
// operator-level model of operator_cost.h, per stage and pass (GEMMs, attention, element-wise
// kernels, exposed TP and CP communication):
//   F = forward      I = backward for inputs + recompute      W = backward for weights
//   B = I + W − the input-gradient collectives a fused backward hides under its weight GEMMs
//   a fused group = Σ tasks + launch_overhead_s; kOptimizer = operator_cost.h's optimizer step.
// Expert-parallel all-to-all (MoE, ep > 1): every task's time includes its dispatch and combine
//   (A_F in F; the input-gradient pass's A_B, and the recompute's, in I and B; none in W). An
//   overlapped F&B group (a kCompute holding forward tasks and backward tasks that share no
//   (stage, microbatch), and ParallelConfig::moe_overlap not kNone) runs each side's all-to-all
//   behind the other side's compute:
//     group = launch + C_F + C_B + max(0, A_F − C_B) + max(0, A_B − C_F)
//   with C = the side's task times without their all-to-all (C_B: its I, W or B tasks).
//   Every other group keeps Σ tasks (all-to-all serialised).
// P2P: latency = link latency + p2p_overhead_s, bandwidth = link bandwidth · efficiency, link by
//   the rank layout above; payload per device = the stage's output bytes / (tp · cp) (Megatron's
//   scatter/gather: each of the tp devices sends its slice over its own NIC; each cp rank its
//   part of the sequence).
// DP gradient reduction of a stage (kAllReduce, bytes = per-device gradient bytes n) over the
//   r = dp · cp devices that hold the same parameters: hierarchical ring. g = peers inside one
//   node = clamp(devices_per_node / tp, 1, r), k = r / g nodes:
//     reduce-scatter inside the node  (g−1)/g · n / bw_intra'
//     all-reduce across nodes         2(k−1)/k · (n/g) / bw_inter'
//     all-gather inside the node      (g−1)/g · n / bw_intra'
//   (bw_intra' = NVLink bandwidth · allreduce_bus_efficiency, bw_inter' = the network's
//   effective bandwidth, already an achieved per-NIC figure) plus 2(g−1) intra and 2(k−1) inter
//   latencies.
//   With the distributed optimizer (zero1): a reduce-scatter of the gradients (half the above)
//   plus an all-gather of the updated parameters (weight_bytes_per_param / grad_bytes_per_param
//   of the volume), the all-gather hidden under the next forward when overlap_grad_reduce is on.
//   With gradient sharding (shard_gradients, ZeRO-2, needs zero1) the program holds m reductions
//   per stage (schedules/lower.h): each per-microbatch one (a kAllReduce with a task) is the
//   reduce-scatter of the stage's n bytes alone, (g−1)/g · n over NVLink and (k−1)/k · n/g over the
//   network with the latencies above; the final one (no task) is priced as with zero1 (the last
//   microbatch's reduce-scatter, plus the parameter all-gather unless overlap_grad_reduce). So a
//   step moves m reduce-scatters and one all-gather per stage. They share the actor's collective
//   stream, one at a time.
//   With parameter sharding (shard_parameters, ZeRO-3 / FSDP, implies gradient sharding) the
//   program also holds a kAllGather before every forward and every backward (B or I) of a stage
//   and microbatch (schedules/lower.h): the all-gather of the stage's weights, n_w = its
//   per-device parameters at their gathered bytes (memory.h stage_gather_bytes: 1 byte for the FP8
//   layers of an fp8_params model, 16-bit otherwise), priced as half of the hierarchical
//   all-reduce above of n_w bytes ((g−1)/g · n_w over NVLink, (k−1)/k · n_w/g over the network,
//   the latencies above), the routed experts' share over their edp replicas. The final
//   reduction is then the reduce-scatter alone: the parameters are gathered before use, so the
//   distributed optimizer's parameter all-gather is not needed.
//   Per block (FSDP2, Megatron-FSDP, DeepSpeed): the frameworks gather and reduce-scatter one
//   block (layer; the embedding and the LM head count as blocks) at a time, block j+1's
//   all-gather beside block j's compute and block j's reduce-scatter beside block j−1's backward.
//   The program keeps one kAllGather / kAllReduce per stage and pass; its duration is the part of
//   the per-block collectives the paired compute does not hide. With n blocks of the stage
//   (layers with weights), the lead block = the stage's largest layer (its share of the bytes:
//   the first block gathered, or the last one reduce-scattered), each other block
//   (bytes − lead) / (n − 1), priced as above (t_lead, t_block), and the paired compute C split
//   evenly over the blocks:
//     exposed = t_lead + (n − 1) · max(0, t_block − C / n)
//     busy    = t_lead + (n − 1) · t_block   (all-gathers)
//   (exact for equal blocks: the lead is exposed; a block whose collective is longer than a
//   block's compute adds the difference). C is the task the collective serves: an all-gather's
//   F, B or I; a per-microbatch reduce-scatter's B or W; the final reduction (no task) pairs
//   with the stage's B. The instruction lasts `exposed` (what its dependents wait for). An
//   all-gather keeps the actor's collective stream busy for `busy` from its start
//   (collective_busy_s): its hidden blocks follow its lead block on the link, so the next
//   collective of the stream queues behind them. A reduce-scatter's hidden blocks ran beside the
//   backward that produced them, before the instruction starts; it holds the stream for its
//   exposed part only (holding it for `busy` after its start would queue the next collective
//   behind link time already spent: the NeMo AutoModel Llama 3.1 70B row, docs/validation.md,
//   exposed 0.53 s more DP time so, every backward's gather waiting behind the previous
//   reduce-scatter's hidden blocks). A backward's reduce-scatter shares the link with that
//   backward's all-gather: beside each block's B the link carries the next block's gather and
//   the previous block's reduce-scatter, so with parameter sharding a reduce-scatter paired with
//   a B hides behind c = max(0, C / n − t_gather_block) (PerBlock::shared_s): the two expose
//   max(0, t_gather_block + t_block − C / n) per block together, the gather its own part.
//   Which collectives are per block:
//     all-gathers                       with parameter sharding
//     reductions                        with parameter sharding (always issued during the
//                                       backward); with gradient sharding when
//                                       overlap_grad_reduce (otherwise they wait for the
//                                       actor's last compute and hide nothing)
//   Every other collective (the plain all-reduce and the distributed optimizer's reduction
//   without sharding, a stage with one block) is priced whole: its duration and busy time are
//   the whole collective. Megatron-LM with overlap_grad_reduce does reduce pipeline rank 0's
//   first model chunk bucket by bucket during the last backward (docs/simulate.md, "Data-parallel
//   overlap"); that stage is priced whole here, see there why.
//   Contention (ClusterSpec "collective_contention"; not modelled when absent): a hidden
//   block's collective holds SMs and HBM bandwidth while it runs, so the compute beside it runs
//   at rate 1 − s, s = ClusterSpec::collective_compute_share of the bytes the block receives
//   (received_bytes) per second of block_s. Per hidden block, with c = C / n:
//     stretch = min(s · t_block, c · s / (1 − s))    (t_block if s = 1)
//     exposed = max(0, t_block − c − stretch)
//   (the compute loses s · t_block while the collective runs; a collective longer than the
//   slowed compute, t_block > c / (1 − s), slows all of it and is exposed by the rest). The
//   collective keeps its own time; the instruction lasts t_lead + (n − 1) · exposed, and the
//   task gains (n − 1) · stretch in compute_s (contention_s: an F, B or I for its all-gather, a B
//   or W for the reduce-scatter of the gradients it completes). So a gather and its compute last
//     t_lead + (n − 1) · max(t_block, c + stretch) + c
//   instead of t_lead + (n − 1) · max(t_block, c) + c. s = 0 gives the formulas above exactly.
//   Not modelled: contention beside the collectives priced whole (Megatron-LM's overlapped
//   all-reduce and distributed-optimizer collectives, the TP, CP and expert-parallel
//   communication); the routed experts' own replicas in the received bytes (dp · cp replicas
//   are assumed); the final reduction of a stage whose backward is split pairs with the stage's
//   B time in allreduce_s but stretches its last W by W's time.
//   Whether the reduction overlaps the remaining backward is the simulator's business
//   (SimOptions::overlap_grad_reduce, set from ParallelConfig::overlap_grad_reduce).
// Units: seconds, bytes, FLOPs, bytes per second.
//
// Usage:
//   AnalyticCost cost(model, partition, placement, config, cluster);
//   double f = cost.task_s(TaskKind::kF, /*stage=*/0);
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/cost_provider.h"
#include "costmodel/operator_cost.h"
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
  // The time a collective keeps the actor's collective stream busy: allreduce_s, except for the
  // per-block collectives, where the hidden blocks count too (the header).
  double collective_busy_s(int actor, const Instruction& ins) const override;
  AllToAll alltoall(int actor, const Instruction& ins) const override;
  // All-to-all time inside one task of a stage (dispatch + combine of its MoE layers).
  double alltoall_task_s(TaskKind kind, int stage) const;

  double task_s(TaskKind kind, int stage) const;  // without launch overhead
  double optimizer_s(int stage) const;
  double tp_comm_s(int stage) const;  // TP all-reduce time of one pass (forward) of a stage
  // Contention (the header): what task `t` gains beside its overlapped per-block collectives
  // (its all-gather, the reduce-scatter of the gradients it completes); 0 when the cluster does
  // not model it. compute_s adds it to each task of a group.
  double contention_s(const TaskRef& t) const;
  // Gradient all-reduce time of `bytes` per device across the dp replicas.
  double dp_allreduce_s(int64_t bytes) const;
  // Hierarchical all-reduce of `bytes` per device over `replicas` devices `stride` ranks apart
  // (with zero1: reduce-scatter + parameter all-gather as above; `reduce_scatter_only`: the
  // reduce-scatter alone, a per-microbatch reduction of gradient sharding).
  double replica_allreduce_s(double bytes, int replicas, int stride,
                             bool reduce_scatter_only = false) const;
  // The hierarchy of those replicas: g of them share a node (NVLink), k nodes (the network).
  struct ReplicaLayout {
    int g = 1, k = 1;
  };
  ReplicaLayout replica_layout(int replicas, int stride) const;
  // Gradient sharding: the lowering emits one reduction per microbatch and stage.
  bool reduces_each_microbatch() const { return config_.shard_gradients; }
  // The whole of one collective of `bytes` per device of `stage` as priced above, the routed
  // experts' share over their replicas (`per_microbatch`: a reduce-scatter or an all-gather
  // alone). allreduce_s returns this, except for parameter sharding's per-block collectives,
  // where it returns the exposed part (the header) and this is the time they keep the link busy
  // (plus one latency per block).
  double collective_s(double bytes, int stage, bool per_microbatch) const;
  // Parameter sharding: the lowering emits an all-gather before every F, B and I.
  bool gathers_params() const { return config_.shard_parameters; }
  // Per-device bytes of one all-gather of stage s's weights (0 without parameter sharding).
  int64_t param_bytes(int stage) const;
  bool same_node(int actor_a, int actor_b) const;

  // Per-device payload of the activation stage s sends forward (= gradient sent backward).
  int64_t activation_bytes(int stage) const;
  // Per-device gradient bytes of stage s (reduced across dp).
  int64_t grad_bytes(int stage) const;
  const std::vector<StageWork>& stage_work() const { return work_; }
  // Where the time of each task kind of a stage goes (operator_cost.h).
  const StageBreakdown& breakdown(int stage) const { return breakdown_.at(stage); }

 private:
  ParallelConfig config_;
  ClusterSpec cluster_;
  int num_actors_ = 0;
  std::vector<StageWork> work_;
  std::vector<std::vector<double>> task_s_;  // [stage][TaskKind]
  std::vector<double> optimizer_s_;
  std::vector<double> tp_comm_s_;
  std::vector<StageBreakdown> breakdown_;
  std::vector<double> device_params_;         // per stage, per device
  std::vector<double> expert_grad_fraction_;  // per stage: routed experts' share of grad bytes
  std::vector<double> gather_bytes_;          // per stage: one all-gather of its weights
  // Parameter sharding, per stage: blocks (layers with gathered weights) and the largest
  // layer's share of the gathered bytes and of the gradient bytes (the per-block model above).
  std::vector<int> fsdp_blocks_;
  std::vector<int> grad_blocks_;  // gradient sharding: layers with gradients
  std::vector<double> lead_gather_fraction_, lead_grad_fraction_;
  std::vector<std::array<double, 4>> a2a_s_;  // [stage][TaskKind]
  // The compute time of a group and its all-to-all (shared by compute_s and alltoall).
  struct GroupTime {
    double total_s = 0;
    double busy_s = 0;
    double exposed_s = 0;
  };
  GroupTime group_time(const Instruction& ins) const;
  // A collective's per-block pricing (the header); n = 0 when it is priced whole.
  struct PerBlock {
    bool per_microbatch = false;  // a reduce-scatter or an all-gather alone
    int n = 0;
    double lead_s = 0, block_s = 0, paired_s = 0;
    double share = 0;  // contention: the compute share a hidden block's collective takes
    // Link time per block that another collective beside the same compute takes first: a
    // backward's reduce-scatter shares the link with that backward's all-gather (the header).
    double shared_s = 0;
  };
  PerBlock per_block(const Instruction& ins) const;
  // The same for a collective of `bytes` of stage `s` paired with a `paired` task (`has_task`:
  // lowered with its task; the final reduction has none and pairs with the stage's B).
  PerBlock per_block(bool gather, int s, double bytes, TaskKind paired, bool has_task) const;
  // One hidden block beside one block's compute (the header, "Contention").
  struct BlockOverlap {
    double stretch_s = 0;  // what the compute gains
    double exposed_s = 0;  // what the collective outlasts the stretched compute by
  };
  static BlockOverlap block_overlap(const PerBlock& p);
  // Bytes one device receives in a reduce-scatter or all-gather of `bytes` per device.
  double received_bytes(double bytes) const;
};

}  // namespace jaxpp
