// Workload: what the compute instructions of a Program do on one worker (actor, replica).
//
// The executor (runtime/executor.h) decides WHEN; a Workload decides WHAT:
//   run_task(F|B|I|W of (stage, microbatch))   the numerics of one task
//   take_output(producer)                      the tensor a kSend carries (activation or gradient)
//   put_input(producer, tensor)                what a kRecv delivers
//   grad_buffer(stage)                         the buffer a kAllReduce sums across replicas
//   optimizer_step(stage)                      the kOptimizer instruction
//   emulated_s(ins)                            how long an instruction must last in emulation
// Tensors are DeviceArrays (runtime/device.h): host memory on the CPU backends, GPU memory on the
// cuda backend, which moves them with NCCL without staging through the host.
//
// MlpWorkload: real numerics in fp64 on a Device: OpenBLAS cblas_dgemm and host loops on the
// HostDevice (the default), cuBLAS and CUDA kernels on a cuda::CudaDevice; the bookkeeping below
// is the same code for both. Every stage holds
// `layers_per_stage` transformer-like MLP blocks  y = GeLU(x W1) W2 + x  with W1: hidden x ffn and
// W2: ffn x hidden (no biases), on microbatches of `seq` tokens x `hidden` features.
//   F  forward; the last stage's F also computes the loss, mean squared error against a
//      deterministic target: loss_k = sum((y - t)^2) / (seq * hidden), and seeds the backward
//      with dL/dy = 2 (y - t) / (seq * hidden) / (m * dp), so that the all-reduced (summed)
//      gradient is the gradient of the mean loss over all microbatches of all replicas.
//   I  input gradient: per layer da = dy W2^T, du = da * GeLU'(u), dx = du W1^T + dy
//   W  weight gradient: dW2 += a^T dy, dW1 += x^T du (accumulated over microbatches)
//   B  = I followed by W, layer by layer.
// Stashed tensors (layer inputs x, pre-activations u, activations a; per-layer dy, du between I
// and W) are freed at their last use: u after I (or B), everything after W (or B).
// Inputs of stage 0 and targets of the last stage are drawn from a seeded generator keyed by
// (seed, step, replica, microbatch); weights from (seed, stage, layer), identical in every
// replica. SGD: w -= lr g. Adam: beta1 0.9, beta2 0.999, eps 1e-8, bias-corrected.
// Every run_task and optimizer_step ends with Device::synchronize(), so an instruction's host
// timestamps include its device work.
//
// run_reference() executes the same model and data sequentially (one worker, all stages, all
// microbatches in order, each stage's weight gradients accumulated in the program's microbatch
// order, replica gradients summed in replica order) with the same StageMath code:
// the bit-exact "orchestration check" of --check. The independent reference, which shares no
// arithmetic with this file, is runtime/reference.h.
//
// Fault injection (MlpConfig::fault, `run --inject`), on replica 0 only, so that --check has
// something to catch: kCorruptGrad adds 1e-6 to the first weight gradient of the last stage
// before the step-0 optimizer update; kSkipAccumulate makes weight gradients overwrite the
// stage's gradient instead of adding to it (`=` for `+=`); kStaleWeight leaves stage 0's weights
// unchanged by the step-0 update (its gradients are still zeroed).
//
// EmulatedWorkload: no numerics; every compute / optimizer instruction lasts
// cost.compute_s(actor, ins) * time_scale, a kAllReduce cost.allreduce_s * time_scale and a
// transfer (transfer latency + bytes / bandwidth) * time_scale (sharing of links not modelled).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/cost_provider.h"
#include "graph/program.h"
#include "runtime/device.h"

namespace jaxpp {

class Backend;

class Workload {
 public:
  virtual ~Workload() = default;
  virtual void run_task(const TaskRef& task, int step) = 0;
  virtual DeviceArray take_output(const TaskRef& producer, int step) = 0;
  virtual void put_input(const TaskRef& producer, int step, DeviceArray tensor) = 0;
  virtual DeviceArray& grad_buffer(int stage) = 0;
  virtual void optimizer_step(int stage, int step) = 0;
  // The stage's kAllReduce: sums its gradients over the replicas that hold the same parameters.
  // Default: backend.allreduce_tensor(grad_buffer(stage)) over every replica of the actor.
  virtual void reduce_gradients(int stage, Backend& backend, double timeout_s);
  // The stage's kAllGather (parameter sharding): gathers its weights from the replicas' shards.
  // Default: nothing moves (the workload keeps whole weights, identical in every replica, so
  // the weights are already what a gather would give); MlpWorkload gathers for real.
  virtual void gather_parameters(int stage, Backend& backend, double timeout_s) {
    (void)stage;
    (void)backend;
    (void)timeout_s;
  }
  // Bytes held: parameters, gradients, optimizer state, stashed and in-flight tensors.
  virtual int64_t bytes_held() const = 0;
  // Minimum duration of an instruction in seconds (emulation); 0 for real work.
  virtual double emulated_s(const Instruction& ins) const {
    (void)ins;
    return 0;
  }
};

enum class OptimizerKind { kSgd, kAdam };

// A deliberate numerical defect of the pipelined run (see above); kNone in normal runs.
// kExpertSwap: the MoE workload's dispatch on replica 0 sends every token's first routed choice
// to expert (e + 1) mod E instead of e (a routing bug); only for MoE runs.
enum class MlpFault { kNone, kCorruptGrad, kSkipAccumulate, kStaleWeight, kExpertSwap };
inline constexpr MlpFault kAllMlpFaults[] = {MlpFault::kNone, MlpFault::kCorruptGrad,
                                             MlpFault::kSkipAccumulate, MlpFault::kStaleWeight,
                                             MlpFault::kExpertSwap};
// "none", "corrupt-grad", "skip-accumulate", "stale-weight", "expert-swap"
std::string_view to_string(MlpFault f);
MlpFault parse_mlp_fault(std::string_view s, const std::string& where);
std::string_view to_string(OptimizerKind k);  // "sgd", "adam"
// How the MoE router turns scores into gate weights (runtime/moe_workload.h).
enum class RouterScoring { kSoftmax, kSigmoid };
std::string_view to_string(RouterScoring r);  // "softmax", "sigmoid"
OptimizerKind parse_optimizer_kind(std::string_view s, const std::string& where);

struct MlpConfig {
  int hidden = 32;  // features per token
  int ffn = 0;      // 0 = 4 * hidden
  int seq = 8;      // tokens per microbatch
  int layers_per_stage = 2;
  int num_stages = 1;
  int num_microbatches = 1;
  int num_replicas = 1;  // dp
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double learning_rate = 0;  // 0 = 0.05 for SGD, 1e-3 for Adam
  uint64_t seed = 1234;
  MlpFault fault = MlpFault::kNone;  // fault injection, replica 0 of MlpWorkload only
  // Mixture of experts (runtime/moe_workload.h): experts == 0 is the dense MLP above. Otherwise
  // every block is a routed MoE block of `experts` experts of width ffn_size(), top_k of them per
  // token, the experts sharded over `ep` replicas.
  int experts = 0;
  int top_k = 0;
  int ep = 1;
  RouterScoring router = RouterScoring::kSoftmax;
  bool moe() const { return experts > 0; }
  int ffn_size() const { return ffn > 0 ? ffn : 4 * hidden; }
  double lr() const;
  // Dense: 2 * hidden * ffn * layers_per_stage. MoE: (hidden * experts + experts * 2 * hidden *
  // ffn) * layers_per_stage (router and every expert; see moe_workload.h for the layout).
  int64_t params_per_stage() const;
  // Parameters one replica reduces per stage: params_per_stage(), or for MoE the routers and the
  // E/ep held experts (h·E + (E/ep)·2·h·ffn per layer; runtime/moe_workload.h).
  int64_t reduced_params_per_stage() const;
};

// What the MLP workload holds for `stages` stages of `c` at most, in bytes (a double, as absurd
// sizes overflow integers): weights and gradients (and the two Adam moments) of each stage, plus
// the activations of every microbatch stashed at once (x, u and gelu(u) of every block).
// run_program refuses a run whose estimate exceeds the host's memory before allocating anything.
double mlp_memory_estimate_bytes(const MlpConfig& c, int stages);

class MlpWorkload : public Workload {
 public:
  // Holds the stages `stage_to_actor` places on `actor`; tensors live on `device` (not owned,
  // must outlive the workload), by default the host.
  MlpWorkload(const MlpConfig& config, int actor, int replica,
              const std::vector<int>& stage_to_actor, Device& device = host_device());
  void run_task(const TaskRef& task, int step) override;
  DeviceArray take_output(const TaskRef& producer, int step) override;
  void put_input(const TaskRef& producer, int step, DeviceArray tensor) override;
  DeviceArray& grad_buffer(int stage) override;
  void optimizer_step(int stage, int step) override;
  // Replica i of R keeps its shard [n·i/R, n·(i+1)/R) of the stage's n weights, zeroes the rest
  // and all-reduces (sums) them over the replicas: an all-gather of the shards, exact in fp64
  // (the other terms are zeros), which rebuilds the whole weights in every replica.
  void gather_parameters(int stage, Backend& backend, double timeout_s) override;
  int64_t bytes_held() const override;

  bool holds_stage(int stage) const { return stages_.count(stage) > 0; }
  // Weights of a stage, copied to the host.
  std::vector<double> params(int stage) const;
  void set_params(int stage, std::span<const double> weights);
  // `mutable_params(s) = weights` replaces the weights of stage s (set_params).
  class ParamsSlot {
   public:
    ParamsSlot& operator=(std::span<const double> weights) {
      owner_.set_params(stage_, weights);
      return *this;
    }

   private:
    friend class MlpWorkload;
    ParamsSlot(MlpWorkload& owner, int stage) : owner_(owner), stage_(stage) {}
    MlpWorkload& owner_;
    int stage_;
  };
  ParamsSlot mutable_params(int s) { return ParamsSlot(*this, s); }
  // The accumulated gradient of a stage in place; only for a workload on host memory.
  std::span<double> grads(int stage);
  // Losses of the last stage's forwards, [step][microbatch]; empty if this actor lacks it.
  const std::map<int, std::map<int, double>>& losses() const { return losses_; }

 private:
  struct StageState {
    DeviceArray params, grads, adam_m, adam_v;
  };
  struct Stash {
    std::vector<DeviceArray> x, u, a, dy, du;  // per layer
  };
  using Key = std::pair<int, int>;  // (stage, microbatch)
  void forward(int stage, int mb, int step);
  void backward_input(int stage, int mb, bool also_weights);
  void backward_weights(int stage, int mb);
  StageState& stage(int s);
  const StageState& stage(int s) const;
  bool accumulate() const;  // false under MlpFault::kSkipAccumulate

  MlpConfig config_;
  int actor_ = 0;
  int replica_ = 0;
  Device& device_;
  std::map<int, StageState> stages_;
  std::map<Key, Stash> stash_;
  std::map<Key, DeviceArray> activation_;  // output of stage s, microbatch k
  std::map<Key, DeviceArray> gradient_;    // d loss / d output of stage s
  std::map<int, std::map<int, double>> losses_;
};

struct ReferenceResult {
  std::vector<double> losses;                     // per step: mean over microbatches and replicas
  std::vector<std::vector<double>> stage_params;  // after the last step
};
// weight_gradient_order[s]: the microbatches in the order the program accumulates stage s's
// weight gradients (its B and W tasks in program order; fp64 addition is not associative, and
// e.g. LoopedBFS runs backwards in reverse). Empty (or an empty entry): microbatch order.
ReferenceResult run_reference(const MlpConfig& config, int num_steps,
                              const std::vector<std::vector<int>>& weight_gradient_order = {});

// The data description shared by every implementation of the model (the workload, run_reference
// and the independent reference): no arithmetic of the model, only its inputs.
// Deterministic initial parameters of a stage (what every replica starts from). Layout, per layer
// l of the stage in order: W1 (hidden x ffn, row-major), then W2 (ffn x hidden, row-major).
// MoE (config.experts > 0), per layer: the router Wr (hidden x experts), then per expert e in
// order W1_e (hidden x ffn) and W2_e (ffn x hidden), all row-major (moe_initial_stage_params).
std::vector<double> initial_stage_params(const MlpConfig& config, int stage);
std::vector<double> moe_initial_stage_params(const MlpConfig& config, int stage);
// Input of stage 0 and target of the last stage for (replica, microbatch): seq x hidden values,
// row-major, the same every step.
std::vector<double> mlp_input(const MlpConfig& config, int replica, int microbatch);
std::vector<double> mlp_target(const MlpConfig& config, int replica, int microbatch);
// Name of element `index` of a stage's parameters in the layout above, e.g. "layer 1 W2[3,0]"
// (MoE: "layer 0 router[2,1]", "layer 1 expert 3 W1[0,5]").
std::string describe_stage_param(const MlpConfig& config, size_t index);

class EmulatedWorkload : public Workload {
 public:
  EmulatedWorkload(const CostProvider& cost, int actor, double time_scale);
  void run_task(const TaskRef&, int) override {}
  DeviceArray take_output(const TaskRef&, int) override { return {}; }
  void put_input(const TaskRef&, int, DeviceArray) override {}
  DeviceArray& grad_buffer(int) override { return token_; }
  void optimizer_step(int, int) override {}
  int64_t bytes_held() const override { return 0; }
  double emulated_s(const Instruction& ins) const override;

 private:
  const CostProvider& cost_;
  int actor_ = 0;
  double time_scale_ = 1;
  DeviceArray token_ = host_device().zeros(1);  // what an emulated all-reduce sums
};

}  // namespace jaxpp
