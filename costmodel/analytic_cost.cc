#include "costmodel/analytic_cost.h"

#include <algorithm>
#include <cmath>

#include "costmodel/alltoall_overlap.h"
#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"

namespace jaxpp {

AnalyticCost::AnalyticCost(const ModelSpec& model, const Partition& partition,
                           const Placement& placement, const ParallelConfig& config,
                           const ClusterSpec& cluster)
    : config_(config), cluster_(cluster), num_actors_(placement.num_actors) {
  if (partition.num_stages() != placement.num_stages()) {
    throw_input_error("configuration", "partition has " + std::to_string(partition.num_stages()) +
                                           " stages but placement has " +
                                           std::to_string(placement.num_stages()));
  }
  if (config.tp < 1 || config.dp < 1 || config.cp < 1 || config.microbatch_size < 1) {
    throw_input_error("configuration", "tp, dp, cp and microbatch size must be >= 1");
  }
  const OperatorCost op(model, config, cluster);  // throws if the dtype is unsupported
  work_ = compute_stage_work(model, partition, config.microbatch_size, config.recompute,
                             config.recompute_layers, config.recompute_modules);
  const int num_stages = partition.num_stages();
  task_s_.assign(num_stages, std::vector<double>(4, 0.0));
  optimizer_s_.assign(num_stages, 0.0);
  tp_comm_s_.assign(num_stages, 0.0);
  breakdown_.resize(num_stages);
  for (int s = 0; s < num_stages; ++s) {
    const StageBreakdown b =
        op.stage(work_[s].first_layer, work_[s].num_layers, static_cast<double>(work_[s].params));
    breakdown_[s] = b;
    tp_comm_s_[s] = b.at(Pass::kForward).tp_comm_s;
    const double f = b.at(Pass::kForward).total_s();
    const double i = b.at(Pass::kBackwardInput).total_s() + b.at(Pass::kRecompute).total_s();
    const double w = b.at(Pass::kBackwardWeight).total_s();
    task_s_[s][static_cast<int>(TaskKind::kF)] = f;
    task_s_[s][static_cast<int>(TaskKind::kI)] = i;
    task_s_[s][static_cast<int>(TaskKind::kW)] = w;
    task_s_[s][static_cast<int>(TaskKind::kB)] = i + w - b.fused_backward_hidden_s;
    optimizer_s_[s] = b.optimizer_s;
    const double local = op.device_params(work_[s].first_layer, work_[s].num_layers,
                                          static_cast<double>(work_[s].params), false);
    device_params_.push_back(local);
    double experts = 0;
    for (int l = work_[s].first_layer; l < work_[s].first_layer + work_[s].num_layers; ++l)
      experts += static_cast<double>(model.routed_expert_params(l));
    const double expert_local =
        experts / (static_cast<double>(std::max(1, config.ep)) * config.expert_tp());
    expert_grad_fraction_.push_back(local > 0 ? expert_local / local : 0.0);
    gather_bytes_.push_back(config.shard_parameters
                                ? stage_gather_bytes(op, model, cluster, work_[s].first_layer,
                                                     work_[s].num_layers)
                                : 0.0);
    // Per-block collectives (the header): blocks with gathered weights (parameter sharding) and
    // blocks with gradients (the same layers when both apply).
    int blocks = 0, grad_blocks = 0;
    double lead_gather = 0, lead_grad = 0, grad_sum = 0;
    {
      for (int l = work_[s].first_layer; l < work_[s].first_layer + work_[s].num_layers; ++l) {
        const double grads = op.device_params(l, 1, static_cast<double>(model.layers[l].params),
                                              /*optimizer_sharded=*/false);
        if (grads > 0) {
          ++grad_blocks;
          lead_grad = std::max(lead_grad, grads);
          grad_sum += grads;
        }
        if (!config.shard_parameters) continue;
        const double gathered = layer_gather_bytes(op, model, cluster, l);
        if (gathered <= 0) continue;
        ++blocks;
        lead_gather = std::max(lead_gather, gathered);
      }
    }
    fsdp_blocks_.push_back(blocks);
    grad_blocks_.push_back(grad_blocks);
    lead_gather_fraction_.push_back(gather_bytes_.back() > 0 ? lead_gather / gather_bytes_.back()
                                                             : 1.0);
    lead_grad_fraction_.push_back(grad_sum > 0 ? lead_grad / grad_sum : 1.0);
    // All-to-all time inside each task (AnalyticCost::a2a_parts).
    const double a2a_f = b.at(Pass::kForward).ep_comm_s;
    const double a2a_i = b.at(Pass::kBackwardInput).ep_comm_s + b.at(Pass::kRecompute).ep_comm_s;
    a2a_s_.push_back({a2a_f, a2a_i, a2a_i, 0.0});
  }
}

double AnalyticCost::task_s(TaskKind kind, int stage) const {
  return task_s_.at(stage)[static_cast<int>(kind)];
}

double AnalyticCost::optimizer_s(int stage) const { return optimizer_s_.at(stage); }

double AnalyticCost::tp_comm_s(int stage) const { return tp_comm_s_.at(stage); }

double AnalyticCost::alltoall_task_s(TaskKind kind, int stage) const {
  return a2a_s_.at(stage)[static_cast<int>(kind)];
}

AnalyticCost::GroupTime AnalyticCost::group_time(const Instruction& ins) const {
  const AllToAllGroup a = alltoall_group(
      ins, config_.moe_overlap != MoeOverlap::kNone,
      [&](const TaskRef& t) { return task_s(t.kind, t.stage); },
      [&](const TaskRef& t) { return alltoall_task_s(t.kind, t.stage); });
  return {cluster_.launch_overhead_s + a.compute_s, a.busy_s, a.exposed_s};
}

double AnalyticCost::compute_s(int /*actor*/, const Instruction& ins) const {
  if (ins.op == OpKind::kOptimizer) return optimizer_s(ins.stage);
  if (ins.op != OpKind::kCompute) return 0;
  double total = 0;
  if (config_.ep <= 1) {
    total = cluster_.launch_overhead_s;
    for (const TaskRef& t : ins.tasks) total += task_s(t.kind, t.stage);
  } else {
    total = group_time(ins).total_s;  // the launch overhead included
  }
  if (cluster_.contention_modelled())
    for (const TaskRef& t : ins.tasks) total += contention_s(t);
  return total;
}

CostProvider::AllToAll AnalyticCost::alltoall(int /*actor*/, const Instruction& ins) const {
  if (ins.op != OpKind::kCompute || config_.ep <= 1) return {};
  const GroupTime g = group_time(ins);
  return {g.busy_s, g.exposed_s};
}

bool AnalyticCost::same_node(int a, int b) const {
  const int64_t group = static_cast<int64_t>(config_.tp) * config_.cp * config_.dp;
  return (a * group) / cluster_.devices_per_node == (b * group) / cluster_.devices_per_node;
}

double AnalyticCost::p2p_latency_s(int from, int to) const {
  const LinkSpec& link = same_node(from, to) ? cluster_.intra_node : cluster_.inter_node;
  return link.latency_s + cluster_.p2p_overhead_s;
}

double AnalyticCost::p2p_bandwidth_bytes_per_s(int from, int to) const {
  const LinkSpec& link = same_node(from, to) ? cluster_.intra_node : cluster_.inter_node;
  return link.effective_bandwidth_bytes_per_s();
}

int AnalyticCost::link_id(int from, int to) const { return from * num_actors_ + to; }

double AnalyticCost::dp_allreduce_s(int64_t bytes) const {
  // Gradients are reduced over the dp · cp devices holding the same parameters.
  return replica_allreduce_s(static_cast<double>(bytes), config_.dp * config_.cp, config_.tp);
}

AnalyticCost::ReplicaLayout AnalyticCost::replica_layout(int replicas, int stride) const {
  const int g = std::clamp(cluster_.devices_per_node / std::max(1, stride), 1, replicas);
  return {g, (replicas + g - 1) / g};
}

double AnalyticCost::replica_allreduce_s(double bytes, int replicas, int stride,
                                         bool reduce_scatter_only) const {
  if (replicas <= 1 || bytes <= 0) return 0;
  const double n = bytes;
  const ReplicaLayout layout = replica_layout(replicas, stride);
  const int g = layout.g, k = layout.k;  // captured below: not a structured binding
  const double eff = cluster_.allreduce_bus_efficiency;
  const double intra_bw = cluster_.intra_node.bandwidth_bytes_per_s * eff;
  // The network's bandwidth is already an achieved figure (per NIC); the bus efficiency is
  // NVLink's (NCCL busbw inside a node over the link's peak).
  const double inter_bw = cluster_.inter_node.effective_bandwidth_bytes_per_s();
  // One hierarchical all-reduce of `v` bytes: reduce-scatter + all-gather inside the node,
  // all-reduce of the node's shard across nodes.
  const auto allreduce = [&](double v) {
    double t = 0;
    if (g > 1)
      t += 2.0 * (g - 1) / g * v / intra_bw + 2.0 * (g - 1) * cluster_.intra_collective_latency_s();
    if (k > 1)
      t += 2.0 * (k - 1) / k * (v / g) / inter_bw + 2.0 * (k - 1) * cluster_.inter_node.latency_s;
    return t;
  };
  if (reduce_scatter_only) return allreduce(n) / 2;
  if (!config_.zero1) return allreduce(n);
  // Parameter sharding gathers the parameters before each use: no all-gather after the step.
  if (config_.shard_parameters) return allreduce(n) / 2;
  // Distributed optimizer: reduce-scatter of the gradients (half an all-reduce) and all-gather of
  // the updated parameters (weight bytes); the all-gather overlaps the next forward when the
  // reduction is overlapped (Megatron's --overlap-param-gather).
  const double reduce_scatter = allreduce(n) / 2;
  if (config_.overlap_grad_reduce) return reduce_scatter;
  const double grad_bytes = grad_bytes_per_param(config_.grad_dtype, cluster_.grad_bytes_per_param);
  const double param_bytes = grad_bytes > 0 ? n * cluster_.weight_bytes_per_param / grad_bytes : 0;
  return reduce_scatter + allreduce(param_bytes) / 2;
}

double AnalyticCost::collective_s(double bytes, int stage, bool per_microbatch) const {
  // The routed experts' gradients are reduced over their edp replicas (ep·etp devices apart),
  // the rest over dp·cp (tp apart).
  const double expert = stage >= 0 && stage < static_cast<int>(expert_grad_fraction_.size())
                            ? expert_grad_fraction_[stage]
                            : 0.0;
  if (expert <= 0)
    return replica_allreduce_s(bytes, config_.dp * config_.cp, config_.tp, per_microbatch);
  return replica_allreduce_s(bytes * (1 - expert), config_.dp * config_.cp, config_.tp,
                             per_microbatch) +
         replica_allreduce_s(bytes * expert, config_.expert_dp(),
                             std::max(1, config_.ep) * config_.expert_tp(), per_microbatch);
}

AnalyticCost::PerBlock AnalyticCost::per_block(const Instruction& ins) const {
  const bool has_task = !ins.tasks.empty();
  return per_block(ins.op == OpKind::kAllGather, ins.stage, static_cast<double>(ins.bytes),
                   has_task ? ins.tasks[0].kind : TaskKind::kB, has_task);
}

AnalyticCost::PerBlock AnalyticCost::per_block(bool gather, int s, double bytes, TaskKind paired,
                                               bool has_task) const {
  PerBlock p;
  // A per-microbatch reduction of gradient sharding (lowered with its task): reduce-scatter only.
  // A parameter all-gather: the other half of an all-reduce, the same price.
  p.per_microbatch = gather || (config_.shard_gradients && has_task);
  if (s < 0 || s >= static_cast<int>(fsdp_blocks_.size())) return p;
  // Gathers are per block with parameter sharding. Reductions: with parameter sharding (always
  // issued during the backward); with gradient sharding when they overlap the backward
  // (overlap_grad_reduce; otherwise they wait for the actor's last compute and hide nothing).
  // The plain all-reduce and the distributed optimizer's reduce-scatter stay whole (the header).
  const bool blocked =
      gather ? config_.shard_parameters
             : config_.shard_parameters || (config_.shard_gradients && config_.overlap_grad_reduce);
  const int n = gather ? fsdp_blocks_[s] : grad_blocks_[s];
  if (!blocked || n <= 1) return p;
  p.n = n;
  const double lead_bytes = bytes * (gather ? lead_gather_fraction_[s] : lead_grad_fraction_[s]);
  p.lead_s = collective_s(lead_bytes, s, p.per_microbatch);
  p.block_s = collective_s((bytes - lead_bytes) / (n - 1), s, p.per_microbatch);
  p.paired_s = task_s(paired, s);
  // A backward's reduce-scatter shares the link with that backward's all-gather (the header):
  // beside each block's compute the link carries the next block's all-gather and the previous
  // block's reduce-scatter, so the all-gather's block time is not there to hide the reduction.
  if (!gather && config_.shard_parameters && paired == TaskKind::kB) {
    const PerBlock g = per_block(true, s, static_cast<double>(param_bytes(s)), TaskKind::kB, true);
    if (g.n > 1) p.shared_s = g.block_s;
  }
  // Contention (the header): the share of the GPU a hidden block's collective takes from the
  // compute beside it, from the bytes it receives per second.
  if (cluster_.contention_modelled() && p.block_s > 0) {
    const double block_bytes = (bytes - lead_bytes) / (n - 1);
    p.share = cluster_.collective_compute_share(received_bytes(block_bytes) / p.block_s);
  }
  return p;
}

double AnalyticCost::received_bytes(double bytes) const {
  // The hierarchical half all-reduce of replica_allreduce_s: (g−1)/g of the bytes over NVLink,
  // (k−1)/k of the node's shard over the network.
  const int replicas = config_.dp * config_.cp;
  if (replicas <= 1 || bytes <= 0) return 0;
  const auto [g, k] = replica_layout(replicas, config_.tp);
  return static_cast<double>(g - 1) / g * bytes + static_cast<double>(k - 1) / k * (bytes / g);
}

AnalyticCost::BlockOverlap AnalyticCost::block_overlap(const PerBlock& p) {
  // One block's compute at full rate, less the link time another collective beside it takes.
  const double c = std::max(0.0, p.paired_s / p.n - p.shared_s);
  const double s = p.share;
  // The compute runs at 1 − s while the collective runs: it loses s · block_s, or, when the
  // collective outlasts the slowed compute (block_s > c / (1 − s)), runs slowed throughout and
  // takes c / (1 − s).
  double stretch = 0;
  if (s >= 1) {
    stretch = p.block_s;
  } else if (s > 0) {
    stretch = std::min(s * p.block_s, c * s / (1 - s));
  }
  return {stretch, std::max(0.0, p.block_s - c - stretch)};
}

double AnalyticCost::allreduce_s(int /*actor*/, const Instruction& ins) const {
  const PerBlock p = per_block(ins);
  if (p.n <= 1) return collective_s(static_cast<double>(ins.bytes), ins.stage, p.per_microbatch);
  // One block at a time (the header): the lead block's collective is exposed, the other blocks'
  // run beside the paired compute (slowed by contention, which hides more of them).
  return p.lead_s + (p.n - 1) * block_overlap(p).exposed_s;
}

double AnalyticCost::contention_s(const TaskRef& t) const {
  if (!cluster_.contention_modelled()) return 0;
  double total = 0;
  // The task's own all-gather (an F, B or I with parameter sharding) ...
  if (config_.shard_parameters && t.kind != TaskKind::kW) {
    const PerBlock p =
        per_block(true, t.stage, static_cast<double>(param_bytes(t.stage)), t.kind, true);
    if (p.n > 1) total += (p.n - 1) * block_overlap(p).stretch_s;
  }
  // ... and the reduce-scatter of the weight gradients it completes (a B or a W).
  if (t.kind == TaskKind::kB || t.kind == TaskKind::kW) {
    const PerBlock p =
        per_block(false, t.stage, static_cast<double>(grad_bytes(t.stage)), t.kind, true);
    if (p.n > 1) total += (p.n - 1) * block_overlap(p).stretch_s;
  }
  return total;
}

double AnalyticCost::collective_busy_s(int actor, const Instruction& ins) const {
  const PerBlock p = per_block(ins);
  // An all-gather's hidden blocks follow its exposed lead block: the stream is busy until the
  // last one is gathered. A reduce-scatter's hidden blocks ran beside the backward that produced
  // them, before the instruction starts: holding the stream after it would queue the next
  // collective behind link time already spent (the header).
  if (p.n <= 1 || ins.op != OpKind::kAllGather) return allreduce_s(actor, ins);
  return p.lead_s + (p.n - 1) * p.block_s;
}

int64_t AnalyticCost::activation_bytes(int stage) const {
  const int64_t shards = static_cast<int64_t>(config_.tp) * config_.cp;
  return (work_.at(stage).output_bytes + shards - 1) / shards;
}

int64_t AnalyticCost::param_bytes(int stage) const {
  return std::llround(gather_bytes_.at(stage));
}

int64_t AnalyticCost::grad_bytes(int stage) const {
  return std::llround(device_params_.at(stage) *
                     grad_bytes_per_param(config_.grad_dtype, cluster_.grad_bytes_per_param));
}

}  // namespace jaxpp
