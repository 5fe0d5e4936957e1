// TaskGraph: the dependency graph of one training iteration of one pipeline (one dp replica).
//
// Nodes:
//   kCompute     F/B/I/W of (stage, microbatch), on actor placement.actor_of(stage)
//   kTransfer    a tensor moving between different actors: the activation of F(s,k) to stage
//                s+1, or the input gradient of B/I(s+1,k) to stage s; `bytes` is its payload
//   kGradReduce  the gradient all-reduce of a stage across dp replicas (bytes = its gradients)
//   kOptimizer   the optimizer step of a stage
// Edges (u -> v: v needs u):
//   F(s-1,k) -> F(s,k)                 (through a kTransfer node when the actors differ)
//   F(s,k) -> B(s,k) | I(s,k)          and   B|I(s+1,k) -> B|I(s,k) (through a transfer if needed)
//   I(s,k) -> W(s,k)
//   every B|W(s,·) -> GradReduce(s) -> Optimizer(s)
// Whether a stage's backward is one B or split into I and W is chosen per stage
// (TaskGraphOptions::split_backward), because schedules such as ZeroBubble keep B on stage 0.
// All work is for the whole microbatch (microbatch_size sequences), without tensor parallelism.
//
// boost-graph stays inside task_graph.cc; this facade exposes plain ids.
//
// Usage:
//   TaskGraph g = TaskGraph::build(model, partition, placement, {.num_microbatches = 8});
//   for (int id : g.topological_order()) { const TaskNode& n = g.node(id); ... }
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/task.h"

namespace jaxpp {

enum class NodeKind { kCompute, kTransfer, kGradReduce, kOptimizer };
std::string_view to_string(NodeKind k);

struct TaskNode {
  NodeKind kind = NodeKind::kCompute;
  // kCompute: the task. kTransfer: the producing task (F for activations, B/I for gradients).
  // kGradReduce/kOptimizer: kind kB, microbatch -1, the stage.
  TaskRef task;
  int actor = 0;       // where it runs (kTransfer: the sender)
  int peer = -1;       // kTransfer: the receiving actor
  double flops = 0;    // kCompute: work of the task for the whole microbatch (incl. recompute in B/I)
  int64_t bytes = 0;   // kTransfer: payload; kGradReduce: gradient bytes of the stage
  std::string label() const;  // "F3@s2", "xfer F3@s2 a1->a2", "reduce s2", "optimizer s2"
};

struct TaskGraphOptions {
  int num_microbatches = 1;
  int microbatch_size = 1;  // sequences per microbatch
  // Per stage: true = I and W tasks, false = one B. Empty = all false.
  std::vector<bool> split_backward;
  Recompute recompute = Recompute::kNone;
  int recompute_layers = -1;  // ParallelConfig::recompute_layers
  uint32_t recompute_modules = 0;  // ParallelConfig::recompute_modules
  int offload_layers = 0;          // ParallelConfig::offload_layers (activation offloading)
};

struct StageWork {
  int first_layer = 0;
  int num_layers = 0;
  int64_t params = 0;
  double fwd_flops = 0;         // one microbatch
  double bwd_input_flops = 0;   // one microbatch
  double bwd_weight_flops = 0;  // one microbatch
  double recompute_flops = 0;   // one microbatch, for the chosen policy
  int64_t output_bytes = 0;     // activation sent to the next stage, one microbatch
  int64_t stash_bytes = 0;      // activations held between F and backward, one microbatch
  int64_t tp_allreduce_bytes = 0;  // per pass, one microbatch
  // Activation offloading: the stash of the stage's offloaded layers, held in host memory
  // (stash_bytes then counts the layers kept plus the two largest offloaded ones, in flight).
  int64_t offloaded_stash_bytes = 0;
};

// Work of each stage for one microbatch (shared by TaskGraph, the cost model and the runtime).
// recompute_layers >= 0 (recompute full only, ParallelConfig::recompute_layers): only the first
// recompute_layers transformer layers of each stage are recomputed, the others priced as none.
// offload_layers > 0 (ParallelConfig::offload_layers): the model's first offload_layers
// transformer layers are offloaded; a stage's stash_bytes keeps its other layers plus its two
// largest offloaded ones (those in flight, OperatorCost::stage_stash_bytes' rule), and
// offloaded_stash_bytes is the stash of all its offloaded layers. recompute_modules (selective
// only, ParallelConfig::recompute_modules): each layer's selective_recompute_flops and
// selective_stash_bytes (graph/plan.h) instead of its selective figures.
std::vector<StageWork> compute_stage_work(const ModelSpec& model, const Partition& partition,
                                          int microbatch_size, Recompute recompute,
                                          int recompute_layers = -1,
                                          uint32_t recompute_modules = 0, int offload_layers = 0);
// FLOPs one sequence costs on the hardware (forward, backward and the recomputed forward) over
// the stages of `partition`: ModelSpec::hardware_flops_per_sequence(recompute) when
// recompute_layers < 0, else only the first recompute_layers transformer layers of each stage
// recomputed. recompute_modules (selective only, ParallelConfig::recompute_modules): each
// layer's selective_recompute_flops (graph/plan.h) instead of its selective figure.
double hardware_flops_per_sequence(const ModelSpec& model, const Partition& partition,
                                   Recompute recompute, int recompute_layers,
                                   uint32_t recompute_modules = 0);

struct CriticalPath {
  double length_s = 0;
  std::vector<int> nodes;  // in order
};

class TaskGraph {
 public:
  // InputError when the partition and placement disagree on the number of stages, or options
  // are out of range.
  static TaskGraph build(const ModelSpec& model, const Partition& partition,
                         const Placement& placement, const TaskGraphOptions& options);

  TaskGraph(TaskGraph&&) noexcept;
  TaskGraph& operator=(TaskGraph&&) noexcept;
  ~TaskGraph();

  int num_nodes() const;
  int num_edges() const;
  const TaskNode& node(int id) const;
  std::vector<int> successors(int id) const;
  std::vector<int> predecessors(int id) const;
  // Id of the compute node for a task, if the graph has it.
  std::optional<int> find_compute(const TaskRef& t) const;
  // Id of the transfer node carrying the output of `producer` (a compute task), if any.
  std::optional<int> find_transfer(const TaskRef& producer) const;

  const Placement& placement() const;
  const std::vector<StageWork>& stage_work() const;
  const TaskGraphOptions& options() const;
  int num_stages() const;
  bool is_split(int stage) const;

  // Deterministic topological order (smallest id first among ready nodes).
  // InputError naming a task on the cycle if the graph has one (possible after add_edge).
  std::vector<int> topological_order() const;
  // Longest path for the given node durations (seconds).
  CriticalPath critical_path(const std::function<double(const TaskNode&)>& duration_s) const;
  // Extra dependency, for tests and user-specified constraints.
  void add_edge(int from, int to);

  // Graphviz DOT of the graph, nodes clustered by actor.
  std::string to_dot() const;

 private:
  struct Impl;
  explicit TaskGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace jaxpp
