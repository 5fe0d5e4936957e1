// The independent reference of `run --check`: the MLP training of runtime/workload.h written a
// second time, deliberately naive, sharing no arithmetic with the workload (no StageMath, no
// Device, no GEMM, no mlp_math.h): plain loops over row-major vectors and the textbook formulas.
//
//   block      u = x W1,  a = GeLU(u),  y = a W2 + x      (x: seq x hidden, W1: hidden x ffn,
//                                                          W2: ffn x hidden; no biases)
//   GeLU       0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))   (tanh approximation)
//   GeLU'      0.5 (1 + tanh(k)) + 0.5 u sech^2(k) dk/du,  k = sqrt(2/pi) (u + 0.044715 u^3)
//   loss       MSE: sum (y - t)^2 / (seq * hidden) per microbatch; the training objective is its
//              mean over the m microbatches of the dp replicas, so dObjective/dy =
//              2 (y - t) / (seq * hidden) / (m * dp)
//   backward   dW2 = a^T gy, ga = gy W2^T, gu = ga * GeLU'(u), dW1 = x^T gu, gx = gu W1^T + gy
//   SGD        w = w - lr g
//   Adam       m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, m^ = m / (1 - b1^t),
//              v^ = v / (1 - b2^t), w = w - lr m^ / (sqrt(v^) + eps), t = 1, 2, ...;
//              b1 0.9, b2 0.999, eps 1e-8
// Gradients of one step are summed over every (replica, microbatch) into one accumulator, in
// replica-major order: a different summation order from the pipelined run, so results agree
// to rounding (about 1e-15 relative here), not bit for bit.
//
// Shared with the workload: only the description of the data (workload.h
// initial_stage_params, mlp_input, mlp_target: the seeded generator, the parameter layout) and
// MlpConfig (sizes, optimizer, learning rate).
//
// Usage:
//   ReferenceResult ref = run_independent_reference(config, /*num_steps=*/3);
//   reference::Mlp mlp = {.hidden = 2, .ffn = 2, .seq = 1, .w1 = {{...}}, .w2 = {{...}}};
//   reference::Gradients g = reference::zero_gradients(mlp);
//   double loss = reference::accumulate_gradients(mlp, x, target, /*scale=*/1.0, g);
//   reference::sgd_step(mlp, g, 0.05);
#pragma once

#include <vector>

#include "runtime/workload.h"

namespace jaxpp {

namespace reference {

inline constexpr double kAdamBeta1 = 0.9;
inline constexpr double kAdamBeta2 = 0.999;
inline constexpr double kAdamEps = 1e-8;

double gelu(double u);
double gelu_derivative(double u);

// A stack of MLP blocks (all stages in order), each W1 hidden x ffn and W2 ffn x hidden,
// row-major.
struct Mlp {
  int hidden = 0;
  int ffn = 0;
  int seq = 0;
  std::vector<std::vector<double>> w1, w2;  // per block
};

// Same shapes as Mlp::w1 / w2.
struct Gradients {
  std::vector<std::vector<double>> w1, w2;
};
Gradients zero_gradients(const Mlp& mlp);

// Output of the stack for one microbatch x (seq x hidden).
std::vector<double> forward(const Mlp& mlp, const std::vector<double>& x);
// sum (y - t)^2 / size.
double mse(const std::vector<double>& y, const std::vector<double>& target);
// Runs one microbatch forward and backward: adds scale * d mse(forward(x), target) / dW to
// `grads` and returns the microbatch's loss.
double accumulate_gradients(const Mlp& mlp, const std::vector<double>& x,
                            const std::vector<double>& target, double scale, Gradients& grads);

void sgd_step(Mlp& mlp, const Gradients& grads, double lr);

struct AdamState {
  Gradients m, v;  // moments, same shapes as the weights
  int t = 0;       // updates done so far
};
AdamState zero_adam_state(const Mlp& mlp);
void adam_step(Mlp& mlp, const Gradients& grads, AdamState& state, double lr);

}  // namespace reference

// The MoE model of runtime/moe_workload.h written a second time, as naively: the whole model in
// one process, every expert of every block held here, one token at a time, no all-to-all.
//   router   s_e = sum_i x_i Wr[i,e]; softmax p_e = exp(s_e) / sum_j exp(s_j) (computed as
//            written, no max shift), or sigmoid p_e = 1 / (1 + exp(-s_e))
//   top-k    repeatedly the largest remaining score, the first (lowest index) on a tie
//   block    y = x + sum over chosen e of p_e GeLU(x W1_e) W2_e
//   backward the chain rule per token: dL/dp_e = gy . E_e(x) for a chosen e; softmax
//            dL/ds_j = sum_e dL/dp_e p_e (delta_ej - p_j), sigmoid dL/ds_e = dL/dp_e p_e (1 - p_e)
// Gradients of a step are summed over (replica, microbatch, token) in that order.
// `initial` (tests): every stage's starting weights in the layout of moe_initial_stage_params
// instead of those (e.g. one weight moved, for a finite-difference check of the gradient).
ReferenceResult run_independent_moe_reference(
    const MlpConfig& config, int num_steps,
    const std::vector<std::vector<double>>* initial = nullptr);

// Trains `config` (num_stages x layers_per_stage blocks, num_microbatches x num_replicas
// microbatches a step) for num_steps steps with the functions above. losses[s]: the mean loss of
// step s over all microbatches and replicas, before its update; stage_params: every stage's
// weights after the last step, in the layout of initial_stage_params.
// A config with experts > 0 runs run_independent_moe_reference.
ReferenceResult run_independent_reference(const MlpConfig& config, int num_steps);

}  // namespace jaxpp
