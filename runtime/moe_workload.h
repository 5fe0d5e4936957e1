// MoeWorkload: the Workload of an MoE plan with real fp64 numerics on a Device (runtime/device.h),
// as MlpWorkload: the HostDevice on the threads and mpi backends, the worker's cuda::CudaDevice on
// the cuda backend, with the same code for both. Every stage holds `layers_per_stage` routed
// mixture-of-experts blocks on microbatches of `seq` tokens x `hidden` features (the data, the
// loss and the optimizers are MlpWorkload's, runtime/workload.h):
//
//   router   s = x Wr (Wr: hidden x experts); p = softmax(s) or sigmoid(s) (MlpConfig::router)
//   top-k    the top_k experts of largest score s per token, ties to the lower expert index
//            (softmax and sigmoid are increasing, so ranking by s ranks by p); the gate of a
//            chosen expert e is p_e, not renormalised
//   expert   E_e(x) = GeLU(x W1_e) W2_e (W1_e: hidden x ffn, W2_e: ffn x hidden, no biases)
//   block    y = x + sum over the chosen e of p_e E_e(x)
//   backward for a chosen e: dW2_e += a^T (p_e gy), du = (p_e gy) W2_e^T * GeLU'(u),
//            dW1_e += x^T du, dx += du W1_e^T; dp_e = gy . E_e(x) (0 for experts not chosen);
//            softmax ds_j = p_j (dp_j - sum_i p_i dp_i), sigmoid ds_j = dp_j p_j (1 - p_j);
//            dWr += x^T ds, dx += gy + ds Wr^T
//
// Expert placement (ep carved out of the dp replicas, Megatron Core's folding with tp = cp = etp
// = 1 as the runtime runs them): replica r is ep rank r mod ep of the ep group {g·ep, ...,
// g·ep + ep − 1}, g = r / ep, and holds the experts e with e / (experts / ep) = r mod ep. The
// dp / ep replicas r mod ep = j (one per ep group) hold the same experts: the expert data-parallel
// group of ep rank j.
//
// Dispatch and combine are Backend::alltoallv over the ep group of the stage's actor:
//   F  every (token, choice) row [e, x_t] goes to the ep rank holding e; the holder runs E_e on
//      the rows it receives and sends the outputs back in the same order (combine); the source
//      adds p_e E_e(x_t) to its tokens.
//   I  the rows p_e gy_t go to the same holders in the same order; the holder sends back the
//      expert input gradients du W1_e^T; the source adds them and the router's path to dx.
//   W  local: the holder's dW1_e, dW2_e of the rows it received in F and I (one GEMM per expert
//      over its rows, stacked in the order of the group's members, then rows), the source's dWr.
//   B  I followed by W.
// Every replica of an actor runs the same instruction list, so the members of an ep group call
// the all-to-alls in the same order.
//
// Gradients: the stage's gradient buffer has the full layout of moe_initial_stage_params (router
// and every expert). A replica accumulates the router and the experts it holds; the other
// experts' slots stay 0. The program's one all-reduce per stage (reduce_gradients) sums the
// routers of every layer over all dp replicas (the router is data parallel everywhere) and the
// held experts of every layer over the expert data-parallel group only (the dp / ep replicas
// r mod ep = ep_rank, Backend::allreduce_sum_strided), each packed into one buffer: per replica
// (h·E + (E/ep)·2·h·f)·layers doubles instead of the whole buffer. The non-held slots stay 0. The
// optimizer then updates the router and the held experts; held_ranges() names them (what run
// --check compares per replica). grad_reduce_bytes() counts the bytes this replica reduced.
//
// Faults (MlpConfig::fault, replica 0): corrupt-grad, skip-accumulate and stale-weight as in
// MlpWorkload (on the MoE layout); expert-swap sends every token's first choice to expert
// (e + 1) mod experts in F and I alike (a routing bug the forward and backward agree on).
//
// Where the work runs. On the Device: the router GEMM s = x Wr, the expert GEMMs, GeLU and its
// gradient (the rows of one expert stacked into one matrix per expert, in the order of the group's
// members, then rows), the router's and the residual's share of dx, every weight-gradient GEMM
// (accumulated in place into the stage's gradient buffer), the loss and the optimizer. On the host,
// after a Device::download: routing (softmax or sigmoid, top-k, gates) of the T x E score matrix,
// and the row gather / scatter of dispatch and combine: the Device has no gather kernel, so the
// source downloads x (F) or gy (I), packs the rows the all-to-all sends, and after the combine
// adds the returned rows on the host and uploads the block's output; the holder uploads the
// rows of each expert and downloads its outputs. The all-to-all payloads are host buffers on
// every backend (Backend::alltoallv; the cuda backend stages them through GPU memory for its
// grouped ncclSend/ncclRecv), so the workload does not depend on the backend. reduce_gradients
// packs the router and held-expert gradients on the host as well (the host all-reduces of the
// backend, the control plane's under cuda).
// The optimizer runs on the whole parameter buffer: the slots of the experts this replica does
// not hold have a zero gradient and zero Adam moments forever, so SGD and Adam leave them exactly
// unchanged (p - lr·0 = p), and the held ranges are updated as an update of those ranges alone.
//
// Usage:
//   MoeWorkload w(config, actor, replica, program.stage_to_actor, backend, timeout_s, device);
//   // then as any Workload (runtime/executor.h)
#pragma once

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "runtime/backend.h"
#include "runtime/workload.h"

namespace jaxpp {

// Offsets into a stage's MoE parameters (moe_initial_stage_params) of layer l.
struct MoeLayout {
  size_t h = 0, f = 0, experts = 0;
  explicit MoeLayout(const MlpConfig& c);
  size_t layer_size() const { return h * experts + experts * 2 * h * f; }
  size_t router(int l) const { return static_cast<size_t>(l) * layer_size(); }
  size_t w1(int l, int e) const {
    return router(l) + h * experts + static_cast<size_t>(e) * 2 * h * f;
  }
  size_t w2(int l, int e) const { return w1(l, e) + h * f; }
};

// The ep rank holding expert e: e / (experts / ep).
int moe_expert_owner(const MlpConfig& c, int expert);
// The top_k experts of one token's scores (largest first, ties to the lower index).
std::vector<int> moe_top_k(const double* scores, int experts, int top_k);

class MoeWorkload : public Workload {
 public:
  // InputError when ep does not divide the experts or the backend's replicas. Tensors live on
  // `device` (not owned, must outlive the workload), by default the host.
  MoeWorkload(const MlpConfig& config, int actor, int replica,
              const std::vector<int>& stage_to_actor, Backend& backend, double timeout_s,
              Device& device = host_device());
  void run_task(const TaskRef& task, int step) override;
  DeviceArray take_output(const TaskRef& producer, int step) override;
  void put_input(const TaskRef& producer, int step, DeviceArray tensor) override;
  DeviceArray& grad_buffer(int stage) override;
  void optimizer_step(int stage, int step) override;
  void reduce_gradients(int stage, Backend& backend, double timeout_s) override;
  int64_t bytes_held() const override;
  // Bytes of gradients this replica has reduced so far (routers and held experts, every stage).
  int64_t grad_reduce_bytes() const { return grad_reduce_bytes_; }

  bool holds_stage(int stage) const { return stages_.count(stage) > 0; }
  // Weights of a stage, copied to the host.
  std::vector<double> params(int stage) const;
  // [begin, end) index ranges of the stage's parameters this replica owns: every router, and
  // the experts of its ep rank, layer by layer.
  std::vector<std::pair<size_t, size_t>> held_ranges() const;
  const std::map<int, std::map<int, double>>& losses() const { return losses_; }

 private:
  struct StageState {
    DeviceArray params, grads, adam_m, adam_v;
  };
  // Holder side: the rows of one expert this replica received in F, stacked in the order of the
  // group's members, then rows (the order of their weight-gradient contributions).
  struct ExpertRows {
    int expert = 0;
    std::vector<std::pair<int, size_t>> at;  // (ep group member, row of that member's buffer)
    DeviceArray x, u, a;                     // n x h, n x f, n x f
    DeviceArray gy, du;                      // n x h gated output gradients, n x f (set in I)
  };
  // What one MoE block keeps between F, I and W.
  struct BlockStash {
    DeviceArray x;                                       // T x h input
    DeviceArray ds;                                      // T x E router score gradient (set in I)
    std::vector<double> p;                               // T x E gate probabilities (host)
    std::vector<std::vector<int>> chosen;                // T x top_k experts (as dispatched)
    std::vector<std::vector<std::pair<int, int>>> sent;  // per ep rank: (token, choice) rows
    std::vector<double> out;          // T x top_k x h expert outputs (host, for the gate gradients)
    std::vector<size_t> received;     // per ep group member: rows received (holder side)
    std::vector<ExpertRows> experts;  // per held expert that received rows, in expert order
    bool has_input_grad = false;      // I has run
  };
  using Key = std::pair<int, int>;  // (stage, microbatch)
  void forward(int stage, int mb, int step);
  void backward_input(int stage, int mb, bool also_weights);
  void backward_weights(int stage, int mb);
  DeviceArray block_forward(const DeviceArray& params, int l, DeviceArray x, BlockStash& st);
  DeviceArray block_backward_input(const DeviceArray& params, int l, const DeviceArray& gy,
                                   BlockStash& st);
  void block_backward_weights(DeviceArray& grads, int l, BlockStash& st);
  std::vector<std::vector<double>> exchange(std::vector<std::vector<double>> send);
  StageState& stage(int s);
  const StageState& stage(int s) const;

  MlpConfig config_;
  MoeLayout layout_;
  int actor_ = 0;
  int replica_ = 0;
  int ep_rank_ = 0;
  Backend& backend_;
  double timeout_s_ = 30;
  Device& device_;
  std::map<int, StageState> stages_;
  std::map<Key, std::vector<BlockStash>> stash_;
  std::map<Key, DeviceArray> activation_;
  std::map<Key, DeviceArray> gradient_;
  std::map<int, std::map<int, double>> losses_;
  int64_t grad_reduce_bytes_ = 0;
};

}  // namespace jaxpp
