#include "runtime/reference.h"

#include <cassert>
#include <cmath>
#include <numbers>

namespace jaxpp {
namespace reference {
namespace {

// Row-major element (row, col) of a matrix with `cols` columns.
double& at(std::vector<double>& m, int cols, int row, int col) {
  return m[static_cast<size_t>(row) * cols + col];
}
double at(const std::vector<double>& m, int cols, int row, int col) {
  return m[static_cast<size_t>(row) * cols + col];
}

double gelu_inner(double u) {
  return std::sqrt(2.0 / std::numbers::pi) * (u + 0.044715 * std::pow(u, 3));
}

// What one block keeps for its backward.
struct BlockStash {
  std::vector<double> x, u, a;
};

std::vector<double> block_forward(const Mlp& mlp, int b, const std::vector<double>& x,
                                  BlockStash* stash) {
  const int H = mlp.hidden, F = mlp.ffn, T = mlp.seq;
  std::vector<double> u(static_cast<size_t>(T) * F, 0.0), a(u.size(), 0.0);
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < F; ++j) {
      double sum = 0;
      for (int i = 0; i < H; ++i) sum += at(x, H, t, i) * at(mlp.w1[b], F, i, j);
      at(u, F, t, j) = sum;
      at(a, F, t, j) = gelu(sum);
    }
  }
  std::vector<double> y(x);
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < H; ++k) {
      double sum = 0;
      for (int j = 0; j < F; ++j) sum += at(a, F, t, j) * at(mlp.w2[b], H, j, k);
      at(y, H, t, k) += sum;
    }
  }
  if (stash != nullptr) *stash = {x, std::move(u), std::move(a)};
  return y;
}

// Given gy = dL/dy of block b, adds dL/dW1, dL/dW2 to grads and returns dL/dx.
std::vector<double> block_backward(const Mlp& mlp, int b, const BlockStash& s,
                                   const std::vector<double>& gy, Gradients& grads) {
  const int H = mlp.hidden, F = mlp.ffn, T = mlp.seq;
  for (int j = 0; j < F; ++j)
    for (int k = 0; k < H; ++k)
      for (int t = 0; t < T; ++t) at(grads.w2[b], H, j, k) += at(s.a, F, t, j) * at(gy, H, t, k);
  std::vector<double> gu(static_cast<size_t>(T) * F, 0.0);
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < F; ++j) {
      double ga = 0;
      for (int k = 0; k < H; ++k) ga += at(gy, H, t, k) * at(mlp.w2[b], H, j, k);
      at(gu, F, t, j) = ga * gelu_derivative(at(s.u, F, t, j));
    }
  }
  for (int i = 0; i < H; ++i)
    for (int j = 0; j < F; ++j)
      for (int t = 0; t < T; ++t) at(grads.w1[b], F, i, j) += at(s.x, H, t, i) * at(gu, F, t, j);
  std::vector<double> gx(gy);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < H; ++i)
      for (int j = 0; j < F; ++j) at(gx, H, t, i) += at(gu, F, t, j) * at(mlp.w1[b], F, i, j);
  return gx;
}

}  // namespace

double gelu(double u) { return 0.5 * u * (1.0 + std::tanh(gelu_inner(u))); }

double gelu_derivative(double u) {
  const double k = gelu_inner(u);
  const double dk_du = std::sqrt(2.0 / std::numbers::pi) * (1.0 + 3.0 * 0.044715 * u * u);
  const double sech = 1.0 / std::cosh(k);
  return 0.5 * (1.0 + std::tanh(k)) + 0.5 * u * sech * sech * dk_du;
}

Gradients zero_gradients(const Mlp& mlp) {
  Gradients g;
  for (size_t b = 0; b < mlp.w1.size(); ++b) {
    g.w1.emplace_back(mlp.w1[b].size(), 0.0);
    g.w2.emplace_back(mlp.w2[b].size(), 0.0);
  }
  return g;
}

std::vector<double> forward(const Mlp& mlp, const std::vector<double>& x) {
  std::vector<double> y = x;
  for (int b = 0; b < static_cast<int>(mlp.w1.size()); ++b) y = block_forward(mlp, b, y, nullptr);
  return y;
}

double mse(const std::vector<double>& y, const std::vector<double>& target) {
  assert(y.size() == target.size() && "mse: output and target differ in size");
  double sum = 0;
  for (size_t i = 0; i < y.size(); ++i) sum += (y[i] - target[i]) * (y[i] - target[i]);
  return sum / static_cast<double>(y.size());
}

double accumulate_gradients(const Mlp& mlp, const std::vector<double>& x,
                            const std::vector<double>& target, double scale, Gradients& grads) {
  const int blocks = static_cast<int>(mlp.w1.size());
  std::vector<BlockStash> stash(blocks);
  std::vector<double> y = x;
  for (int b = 0; b < blocks; ++b) y = block_forward(mlp, b, y, &stash[b]);
  const double n = static_cast<double>(y.size());
  std::vector<double> gy(y.size());
  for (size_t i = 0; i < y.size(); ++i) gy[i] = scale * 2.0 * (y[i] - target[i]) / n;
  for (int b = blocks - 1; b >= 0; --b) gy = block_backward(mlp, b, stash[b], gy, grads);
  return mse(y, target);
}

void sgd_step(Mlp& mlp, const Gradients& grads, double lr) {
  for (size_t b = 0; b < mlp.w1.size(); ++b) {
    for (size_t i = 0; i < mlp.w1[b].size(); ++i) mlp.w1[b][i] -= lr * grads.w1[b][i];
    for (size_t i = 0; i < mlp.w2[b].size(); ++i) mlp.w2[b][i] -= lr * grads.w2[b][i];
  }
}

AdamState zero_adam_state(const Mlp& mlp) { return {zero_gradients(mlp), zero_gradients(mlp), 0}; }

void adam_step(Mlp& mlp, const Gradients& grads, AdamState& state, double lr) {
  ++state.t;
  const double correction1 = 1.0 - std::pow(kAdamBeta1, state.t);
  const double correction2 = 1.0 - std::pow(kAdamBeta2, state.t);
  auto update = [&](std::vector<double>& w, const std::vector<double>& g, std::vector<double>& m,
                    std::vector<double>& v) {
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = kAdamBeta1 * m[i] + (1.0 - kAdamBeta1) * g[i];
      v[i] = kAdamBeta2 * v[i] + (1.0 - kAdamBeta2) * g[i] * g[i];
      const double m_hat = m[i] / correction1;
      const double v_hat = v[i] / correction2;
      w[i] -= lr * m_hat / (std::sqrt(v_hat) + kAdamEps);
    }
  };
  for (size_t b = 0; b < mlp.w1.size(); ++b) {
    update(mlp.w1[b], grads.w1[b], state.m.w1[b], state.v.w1[b]);
    update(mlp.w2[b], grads.w2[b], state.m.w2[b], state.v.w2[b]);
  }
}

}  // namespace reference

ReferenceResult run_independent_reference(const MlpConfig& c, int num_steps) {
  const int H = c.hidden, F = c.ffn_size(), L = c.layers_per_stage;
  const size_t hf = static_cast<size_t>(H) * F;
  reference::Mlp mlp{H, F, c.seq, {}, {}};
  for (int s = 0; s < c.num_stages; ++s) {
    const std::vector<double> p = initial_stage_params(c, s);
    for (int l = 0; l < L; ++l) {
      const auto w1 = p.begin() + static_cast<std::ptrdiff_t>(2 * hf * l);
      mlp.w1.emplace_back(w1, w1 + static_cast<std::ptrdiff_t>(hf));
      mlp.w2.emplace_back(w1 + static_cast<std::ptrdiff_t>(hf),
                          w1 + static_cast<std::ptrdiff_t>(2 * hf));
    }
  }
  reference::AdamState adam = reference::zero_adam_state(mlp);
  const double batches = static_cast<double>(c.num_microbatches) * c.num_replicas;
  ReferenceResult result;
  for (int step = 0; step < num_steps; ++step) {
    reference::Gradients grads = reference::zero_gradients(mlp);
    double loss_sum = 0;
    for (int r = 0; r < c.num_replicas; ++r)
      for (int mb = 0; mb < c.num_microbatches; ++mb)
        loss_sum += reference::accumulate_gradients(mlp, mlp_input(c, r, mb), mlp_target(c, r, mb),
                                                    1.0 / batches, grads);
    result.losses.push_back(loss_sum / batches);
    if (c.optimizer == OptimizerKind::kSgd)
      reference::sgd_step(mlp, grads, c.lr());
    else
      reference::adam_step(mlp, grads, adam, c.lr());
  }
  for (int s = 0; s < c.num_stages; ++s) {
    std::vector<double> p;
    for (int l = 0; l < L; ++l) {
      p.insert(p.end(), mlp.w1[s * L + l].begin(), mlp.w1[s * L + l].end());
      p.insert(p.end(), mlp.w2[s * L + l].begin(), mlp.w2[s * L + l].end());
    }
    result.stage_params.push_back(std::move(p));
  }
  return result;
}

}  // namespace jaxpp
