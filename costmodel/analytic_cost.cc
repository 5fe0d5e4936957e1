#include "costmodel/analytic_cost.h"

#include <algorithm>
#include <cmath>

#include "graph/error.h"

namespace jaxpp {
namespace {

enum Pass { kFwd = 0, kBwdInput = 1, kBwdWeight = 2, kRecompute = 3 };

double ring_allreduce_s(double bytes, int n, const LinkSpec& link, double bus_eff) {
  if (n <= 1 || bytes <= 0) return 0;
  return 2.0 * (n - 1) / n * bytes / (link.bandwidth_bytes_per_s * bus_eff);
}

}  // namespace

AnalyticCost::AnalyticCost(const ModelSpec& model, const Partition& partition,
                           const Placement& placement, const ParallelConfig& config,
                           const ClusterSpec& cluster)
    : config_(config), cluster_(cluster), num_actors_(placement.num_actors) {
  if (partition.num_stages() != placement.num_stages()) {
    throw_input_error("configuration", "partition has " + std::to_string(partition.num_stages()) +
                                           " stages but placement has " +
                                           std::to_string(placement.num_stages()));
  }
  if (config.tp < 1 || config.dp < 1 || config.microbatch_size < 1) {
    throw_input_error("configuration", "tp, dp and microbatch size must be >= 1");
  }
  cluster_.peak_flops(model.dtype);  // throws if the dtype is unsupported
  work_ = compute_stage_work(model, partition, config.microbatch_size, config.recompute);
  const int num_stages = partition.num_stages();
  task_s_.assign(num_stages, std::vector<double>(4, 0.0));
  optimizer_s_.assign(num_stages, 0.0);
  tp_comm_s_.assign(num_stages, 0.0);

  const LinkSpec& tp_link =
      config.tp <= cluster.devices_per_node ? cluster.intra_node : cluster.inter_node;
  for (int s = 0; s < num_stages; ++s) {
    int collectives = 0;
    for (int l = partition.begin(s); l < partition.end(s); ++l) {
      if (model.layers[l].tp_allreduce_bytes > 0) collectives += 2;
    }
    const double tp_bytes =
        static_cast<double>(work_[s].tp_allreduce_bytes);  // per pass, whole microbatch
    const double tp_s =
        config.tp > 1 ? ring_allreduce_s(tp_bytes, config.tp, tp_link,
                                         cluster.allreduce_bus_efficiency) +
                            collectives * 2.0 *
                                (config.tp <= cluster.devices_per_node
                                     ? cluster.intra_collective_latency_s()
                                     : tp_link.latency_s)
                      : 0.0;
    tp_comm_s_[s] = tp_s;
    const double f = pass_s(model, s, kFwd) + tp_s;
    double i = pass_s(model, s, kBwdInput) + pass_s(model, s, kRecompute) + tp_s;
    if (config.recompute == Recompute::kFull) i += tp_s;  // the recomputed forward's all-reduces
    const double w = pass_s(model, s, kBwdWeight);
    task_s_[s][static_cast<int>(TaskKind::kF)] = f;
    task_s_[s][static_cast<int>(TaskKind::kI)] = i;
    task_s_[s][static_cast<int>(TaskKind::kW)] = w;
    task_s_[s][static_cast<int>(TaskKind::kB)] = i + w;
    const double params = static_cast<double>(work_[s].params) / config.tp /
                          (config.zero1 ? config.dp : 1);
    optimizer_s_[s] =
        params * cluster.optimizer_traffic_bytes_per_param / cluster.hbm_bandwidth_bytes_per_s;
  }
}

double AnalyticCost::pass_s(const ModelSpec& model, int stage, int which) const {
  const double peak = cluster_.peak_flops(model.dtype);
  const int recompute = static_cast<int>(config_.recompute);
  // Layers of the stage, from the stage's first layer (StageWork knows the range).
  const StageWork& w = work_[stage];
  double total = 0;
  for (int l = w.first_layer; l < w.first_layer + w.num_layers; ++l) {
    const LayerWork& layer = model.layers[l];
    double flops = 0;
    switch (which) {
      case kFwd:
        flops = layer.fwd_flops;
        break;
      case kBwdInput:
        flops = layer.bwd_input_flops;
        break;
      case kBwdWeight:
        flops = layer.bwd_weight_flops;
        break;
      default:
        flops = layer.recompute_flops[recompute];
        break;
    }
    flops *= static_cast<double>(config_.microbatch_size) / config_.tp;
    if (flops <= 0) continue;
    total += flops / (peak * cluster_.gemm_efficiency(flops));
  }
  return total;
}

double AnalyticCost::task_s(TaskKind kind, int stage) const {
  return task_s_.at(stage)[static_cast<int>(kind)];
}

double AnalyticCost::optimizer_s(int stage) const { return optimizer_s_.at(stage); }

double AnalyticCost::tp_comm_s(int stage) const { return tp_comm_s_.at(stage); }

double AnalyticCost::compute_s(int /*actor*/, const Instruction& ins) const {
  if (ins.op == OpKind::kOptimizer) return optimizer_s(ins.stage);
  if (ins.op != OpKind::kCompute) return 0;
  double total = cluster_.launch_overhead_s;
  for (const TaskRef& t : ins.tasks) total += task_s(t.kind, t.stage);
  return total;
}

bool AnalyticCost::same_node(int a, int b) const {
  const int64_t group = static_cast<int64_t>(config_.tp) * config_.dp;
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
  const int dp = config_.dp;
  if (dp <= 1 || bytes <= 0) return 0;
  const double n = static_cast<double>(bytes);
  const int g = std::clamp(cluster_.devices_per_node / std::max(1, config_.tp), 1, dp);
  const int k = (dp + g - 1) / g;
  const double eff = cluster_.allreduce_bus_efficiency;
  const double intra_bw = cluster_.intra_node.bandwidth_bytes_per_s * eff;
  const double inter_bw = cluster_.inter_node.bandwidth_bytes_per_s * eff;
  double t = 0;
  if (g > 1)
    t += 2.0 * (g - 1) / g * n / intra_bw + 2.0 * (g - 1) * cluster_.intra_collective_latency_s();
  if (k > 1) {
    t += 2.0 * (k - 1) / k * (n / g) / inter_bw + 2.0 * (k - 1) * cluster_.inter_node.latency_s;
  }
  return t;
}

double AnalyticCost::allreduce_s(int /*actor*/, const Instruction& ins) const {
  return dp_allreduce_s(ins.bytes);
}

int64_t AnalyticCost::activation_bytes(int stage) const {
  return (work_.at(stage).output_bytes + config_.tp - 1) / config_.tp;
}

int64_t AnalyticCost::grad_bytes(int stage) const {
  return std::llround(static_cast<double>(work_.at(stage).params) / config_.tp *
                      cluster_.grad_bytes_per_param);
}

}  // namespace jaxpp
