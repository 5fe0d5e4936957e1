#include "graph/task_graph.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <map>
#include <queue>
#include <sstream>

#include <boost/graph/adjacency_list.hpp>

#include "graph/error.h"
#include "graph/limits.h"
#include "graph/plan.h"

namespace jaxpp {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, TaskNode>;

std::string_view to_string(NodeKind k) {
  switch (k) {
    case NodeKind::kCompute:
      return "compute";
    case NodeKind::kTransfer:
      return "transfer";
    case NodeKind::kGradReduce:
      return "grad_reduce";
    case NodeKind::kOptimizer:
      return "optimizer";
  }
  return "?";
}

std::string TaskNode::label() const {
  switch (kind) {
    case NodeKind::kCompute:
      return to_string(task);
    case NodeKind::kTransfer:
      return "xfer " + to_string(task) + " a" + std::to_string(actor) + "->a" +
             std::to_string(peer);
    case NodeKind::kGradReduce:
      return "reduce s" + std::to_string(task.stage);
    case NodeKind::kOptimizer:
      return "optimizer s" + std::to_string(task.stage);
  }
  return "?";
}

std::vector<StageWork> compute_stage_work(const ModelSpec& model, const Partition& partition,
                                          int microbatch_size, Recompute recompute,
                                          int recompute_layers, uint32_t recompute_modules,
                                          int offload_layers) {
  if (partition.num_layers != model.num_layers())
    throw_input_error("partition", "covers " + std::to_string(partition.num_layers) +
                                       " layers but the model has " +
                                       std::to_string(model.num_layers()));
  const double b = microbatch_size;
  std::vector<StageWork> work;
  int offloaded = 0;  // transformer layers of the model offloaded so far
  for (int s = 0; s < partition.num_stages(); ++s) {
    StageWork w;
    w.first_layer = partition.begin(s);
    w.num_layers = partition.size(s);
    int transformers = 0;  // transformer layers of the stage so far
    int64_t largest = 0, second = 0;  // the stage's two largest offloaded stashes
    for (int i = partition.begin(s); i < partition.end(s); ++i) {
      const LayerWork& l = model.layers[i];
      int r = static_cast<int>(recompute);
      if (recompute == Recompute::kFull && recompute_layers >= 0 &&
          l.kind == LayerKind::kTransformer && transformers++ >= recompute_layers)
        r = static_cast<int>(Recompute::kNone);
      w.params += l.params;
      w.fwd_flops += l.fwd_flops * b;
      w.bwd_input_flops += l.bwd_input_flops * b;
      w.bwd_weight_flops += l.bwd_weight_flops * b;
      // Megatron-Core's recompute modules: their FLOPs and what they free (graph/plan.h).
      const bool modules = recompute == Recompute::kSelective && recompute_modules != 0;
      w.recompute_flops +=
          (modules ? selective_recompute_flops(model, i, recompute_modules) : l.recompute_flops[r]) *
          b;
      const int64_t stash =
          (modules ? selective_stash_bytes(model, i, recompute_modules) : l.stash_bytes[r]) *
          microbatch_size;
      if (l.kind == LayerKind::kTransformer && offloaded < offload_layers) {
        ++offloaded;
        w.offloaded_stash_bytes += stash;
        if (stash > largest) {
          second = largest;
          largest = stash;
        } else {
          second = std::max(second, stash);
        }
      } else {
        w.stash_bytes += stash;
      }
      w.tp_allreduce_bytes += l.tp_allreduce_bytes * microbatch_size;
    }
    w.stash_bytes += largest + second;
    w.output_bytes = model.layers[partition.end(s) - 1].output_bytes * microbatch_size;
    work.push_back(w);
  }
  return work;
}

double hardware_flops_per_sequence(const ModelSpec& model, const Partition& partition,
                                   Recompute recompute, int recompute_layers,
                                   uint32_t recompute_modules) {
  if (recompute_layers < 0 && (recompute_modules == 0 || recompute != Recompute::kSelective))
    return model.hardware_flops_per_sequence(recompute);
  double f = model.model_flops_per_sequence();
  for (const StageWork& w :
       compute_stage_work(model, partition, 1, recompute, recompute_layers, recompute_modules))
    f += w.recompute_flops;
  return f;
}

struct TaskGraph::Impl {
  Graph graph;
  Placement placement;
  std::vector<StageWork> stage_work;
  TaskGraphOptions options;
  std::map<TaskRef, int> compute_ids;
  std::map<TaskRef, int> transfer_ids;

  int add_node(const TaskNode& n) { return static_cast<int>(boost::add_vertex(n, graph)); }
  void add_edge(int u, int v) { boost::add_edge(u, v, graph); }
};

TaskGraph::TaskGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TaskGraph::TaskGraph(TaskGraph&&) noexcept = default;
TaskGraph& TaskGraph::operator=(TaskGraph&&) noexcept = default;
TaskGraph::~TaskGraph() = default;

TaskGraph TaskGraph::build(const ModelSpec& model, const Partition& partition,
                           const Placement& placement, const TaskGraphOptions& options) {
  const int stages = partition.num_stages();
  if (placement.num_stages() != stages)
    throw_input_error("task graph", "the partition has " + std::to_string(stages) +
                                        " stages but the placement has " +
                                        std::to_string(placement.num_stages()));
  if (options.num_microbatches < 1)
    throw_input_error("task graph", "expected at least 1 microbatch, got " +
                                        std::to_string(options.num_microbatches));
  if (options.microbatch_size < 1)
    throw_input_error("task graph", "expected a microbatch size >= 1, got " +
                                        std::to_string(options.microbatch_size));
  check_pipeline_size(stages, options.num_microbatches, "task graph");
  if (!options.split_backward.empty() && static_cast<int>(options.split_backward.size()) != stages)
    throw_input_error("task graph", "split_backward has " +
                                        std::to_string(options.split_backward.size()) +
                                        " entries for " + std::to_string(stages) + " stages");

  auto impl = std::make_unique<Impl>();
  impl->placement = placement;
  impl->options = options;
  impl->stage_work =
      compute_stage_work(model, partition, options.microbatch_size, options.recompute,
                         options.recompute_layers, options.recompute_modules,
                         options.offload_layers);
  const auto& work = impl->stage_work;
  const int m = options.num_microbatches;
  const int64_t grad_bytes_per_param = dtype_bytes(model.dtype);
  auto split = [&](int s) { return !options.split_backward.empty() && options.split_backward[s]; };

  auto add_compute = [&](TaskKind kind, int s, int k, double flops) {
    TaskNode n;
    n.kind = NodeKind::kCompute;
    n.task = {kind, s, k};
    n.actor = placement.actor_of(s);
    n.flops = flops;
    const int id = impl->add_node(n);
    impl->compute_ids[n.task] = id;
    return id;
  };
  // Connects producer -> consumer, through a transfer node when their actors differ.
  auto connect = [&](int producer, int consumer_stage, int consumer, int64_t bytes) {
    const TaskNode& p = impl->graph[producer];
    const int to_actor = placement.actor_of(consumer_stage);
    if (p.actor == to_actor) {
      impl->add_edge(producer, consumer);
      return;
    }
    TaskNode x;
    x.kind = NodeKind::kTransfer;
    x.task = p.task;
    x.actor = p.actor;
    x.peer = to_actor;
    x.bytes = bytes;
    const int id = impl->add_node(x);
    impl->transfer_ids[x.task] = id;
    impl->add_edge(producer, id);
    impl->add_edge(id, consumer);
  };

  // Forwards, microbatch-major, stage-ascending.
  std::vector<std::vector<int>> fwd(stages, std::vector<int>(m)), bwd(stages, std::vector<int>(m));
  std::vector<std::vector<int>> last_bwd(stages, std::vector<int>(m));  // B or W
  for (int k = 0; k < m; ++k) {
    for (int s = 0; s < stages; ++s) {
      fwd[s][k] = add_compute(TaskKind::kF, s, k, work[s].fwd_flops);
      if (s > 0) connect(fwd[s - 1][k], s, fwd[s][k], work[s - 1].output_bytes);
    }
  }
  // Backwards, microbatch-major, stage-descending.
  for (int k = 0; k < m; ++k) {
    for (int s = stages - 1; s >= 0; --s) {
      const StageWork& w = work[s];
      if (split(s)) {
        bwd[s][k] = add_compute(TaskKind::kI, s, k, w.bwd_input_flops + w.recompute_flops);
      } else {
        bwd[s][k] = add_compute(TaskKind::kB, s, k,
                                w.bwd_input_flops + w.bwd_weight_flops + w.recompute_flops);
      }
      impl->add_edge(fwd[s][k], bwd[s][k]);
      // The gradient w.r.t. stage s+1's input has the shape of stage s's output.
      if (s + 1 < stages) connect(bwd[s + 1][k], s, bwd[s][k], w.output_bytes);
      last_bwd[s][k] = bwd[s][k];
      if (split(s)) {
        const int wid = add_compute(TaskKind::kW, s, k, w.bwd_weight_flops);
        impl->add_edge(bwd[s][k], wid);
        last_bwd[s][k] = wid;
      }
    }
  }
  for (int s = 0; s < stages; ++s) {
    TaskNode reduce;
    reduce.kind = NodeKind::kGradReduce;
    reduce.task = {TaskKind::kB, s, -1};
    reduce.actor = placement.actor_of(s);
    reduce.bytes = work[s].params * grad_bytes_per_param;
    const int rid = impl->add_node(reduce);
    for (int k = 0; k < m; ++k) impl->add_edge(last_bwd[s][k], rid);
    TaskNode opt = reduce;
    opt.kind = NodeKind::kOptimizer;
    opt.bytes = 0;
    const int oid = impl->add_node(opt);
    impl->add_edge(rid, oid);
  }
  return TaskGraph(std::move(impl));
}

int TaskGraph::num_nodes() const { return static_cast<int>(boost::num_vertices(impl_->graph)); }
int TaskGraph::num_edges() const { return static_cast<int>(boost::num_edges(impl_->graph)); }

const TaskNode& TaskGraph::node(int id) const {
  assert(id >= 0 && id < num_nodes() && "TaskGraph::node: id out of range");
  return impl_->graph[id];
}

std::vector<int> TaskGraph::successors(int id) const {
  std::vector<int> out;
  for (auto [it, end] = boost::out_edges(id, impl_->graph); it != end; ++it)
    out.push_back(static_cast<int>(boost::target(*it, impl_->graph)));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> TaskGraph::predecessors(int id) const {
  std::vector<int> out;
  for (auto [it, end] = boost::in_edges(id, impl_->graph); it != end; ++it)
    out.push_back(static_cast<int>(boost::source(*it, impl_->graph)));
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<int> TaskGraph::find_compute(const TaskRef& t) const {
  auto it = impl_->compute_ids.find(t);
  if (it == impl_->compute_ids.end()) return std::nullopt;
  return it->second;
}

std::optional<int> TaskGraph::find_transfer(const TaskRef& producer) const {
  auto it = impl_->transfer_ids.find(producer);
  if (it == impl_->transfer_ids.end()) return std::nullopt;
  return it->second;
}

const Placement& TaskGraph::placement() const { return impl_->placement; }
const std::vector<StageWork>& TaskGraph::stage_work() const { return impl_->stage_work; }
const TaskGraphOptions& TaskGraph::options() const { return impl_->options; }
int TaskGraph::num_stages() const { return impl_->placement.num_stages(); }
bool TaskGraph::is_split(int stage) const {
  const auto& split = impl_->options.split_backward;
  return !split.empty() && split[stage];
}

std::vector<int> TaskGraph::topological_order() const {
  const int n = num_nodes();
  std::vector<int> indegree(n, 0);
  for (int v = 0; v < n; ++v) indegree[v] = static_cast<int>(boost::in_degree(v, impl_->graph));
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int v = 0; v < n; ++v)
    if (indegree[v] == 0) ready.push(v);
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int u = ready.top();
    ready.pop();
    order.push_back(u);
    for (auto [it, end] = boost::out_edges(u, impl_->graph); it != end; ++it) {
      const int v = static_cast<int>(boost::target(*it, impl_->graph));
      if (--indegree[v] == 0) ready.push(v);
    }
  }
  if (static_cast<int>(order.size()) == n) return order;
  // Every node left has a remaining predecessor; walking predecessors from the smallest such
  // node must revisit a node, which lies on a cycle.
  int start = 0;
  while (indegree[start] == 0) ++start;
  std::vector<bool> seen(n, false);
  int v = start;
  while (!seen[v]) {
    seen[v] = true;
    for (int p : predecessors(v)) {
      if (indegree[p] > 0) {
        v = p;
        break;
      }
    }
  }
  throw_input_error("task graph", "dependency cycle through " + node(v).label());
}

CriticalPath TaskGraph::critical_path(
    const std::function<double(const TaskNode&)>& duration_s) const {
  const std::vector<int> order = topological_order();
  const int n = num_nodes();
  std::vector<double> finish(n, 0.0);
  std::vector<int> via(n, -1);
  for (int v : order) {
    double start = 0;
    for (int p : predecessors(v)) {
      if (finish[p] > start) {  // strict: the smallest id wins ties
        start = finish[p];
        via[v] = p;
      }
    }
    finish[v] = start + duration_s(node(v));
  }
  CriticalPath path;
  int end = -1;
  for (int v = 0; v < n; ++v)
    if (end < 0 || finish[v] > finish[end]) end = v;
  if (end < 0) return path;
  path.length_s = finish[end];
  for (int v = end; v >= 0; v = via[v]) path.nodes.push_back(v);
  std::reverse(path.nodes.begin(), path.nodes.end());
  return path;
}

void TaskGraph::add_edge(int from, int to) {
  assert(from >= 0 && from < num_nodes() && to >= 0 && to < num_nodes() &&
         "TaskGraph::add_edge: node id out of range");
  impl_->add_edge(from, to);
}

std::string TaskGraph::to_dot() const {
  std::ostringstream out;
  out << "digraph taskgraph {\n  rankdir=LR;\n  node [shape=box, fontsize=10];\n";
  const int n = num_nodes();
  for (int a = 0; a < impl_->placement.num_actors; ++a) {
    out << "  subgraph cluster_actor" << a << " {\n    label=\"actor " << a << "\";\n";
    for (int v = 0; v < n; ++v) {
      const TaskNode& t = node(v);
      if (t.actor != a || t.kind == NodeKind::kTransfer) continue;
      const char* style = t.kind == NodeKind::kCompute ? "" : ", style=rounded";
      out << "    n" << v << " [label=\"" << t.label() << "\"" << style << "];\n";
    }
    out << "  }\n";
  }
  for (int v = 0; v < n; ++v) {
    const TaskNode& t = node(v);
    if (t.kind != NodeKind::kTransfer) continue;
    out << "  n" << v << " [label=\"" << t.label() << "\\n"
        << t.bytes << " B\", shape=ellipse, fontsize=8];\n";
  }
  for (int v = 0; v < n; ++v)
    for (int w : successors(v)) out << "  n" << v << " -> n" << w << ";\n";
  out << "}\n";
  return out.str();
}

}  // namespace jaxpp
