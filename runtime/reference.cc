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
  if (c.moe()) return run_independent_moe_reference(c, num_steps);
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

namespace jaxpp {
namespace {

// One MoE block of the reference, every expert here. Row-major matrices as in the workload's
// layout (moe_initial_stage_params).
struct RefMoeBlock {
  std::vector<double> router;               // hidden x experts
  std::vector<std::vector<double>> w1, w2;  // per expert: hidden x ffn, ffn x hidden
};

struct RefMoeToken {  // what one token of one block keeps for its backward
  std::vector<double> x, p;
  std::vector<int> chosen;
  std::vector<std::vector<double>> u, a, out;  // per choice
};

std::vector<int> reference_top_k(const std::vector<double>& scores, int k) {
  std::vector<bool> taken(scores.size(), false);
  std::vector<int> chosen;
  for (int n = 0; n < k; ++n) {
    int best = -1;
    for (int e = 0; e < static_cast<int>(scores.size()); ++e)
      if (!taken[e] && (best < 0 || scores[e] > scores[best])) best = e;
    taken[best] = true;
    chosen.push_back(best);
  }
  return chosen;
}

}  // namespace

ReferenceResult run_independent_moe_reference(const MlpConfig& c, int num_steps,
                                              const std::vector<std::vector<double>>* initial) {
  const int H = c.hidden, F = c.ffn_size(), E = c.experts, K = c.top_k, T = c.seq;
  const int L = c.layers_per_stage, S = c.num_stages;
  const bool sigmoid = c.router == RouterScoring::kSigmoid;
  // Unpack every stage's parameters into blocks.
  std::vector<RefMoeBlock> blocks;
  for (int s = 0; s < S; ++s) {
    const std::vector<double> p = initial ? initial->at(s) : moe_initial_stage_params(c, s);
    size_t at = 0;
    auto next = [&](size_t n) {
      std::vector<double> v(p.begin() + static_cast<std::ptrdiff_t>(at),
                            p.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      return v;
    };
    for (int l = 0; l < L; ++l) {
      RefMoeBlock b;
      b.router = next(static_cast<size_t>(H) * E);
      for (int e = 0; e < E; ++e) {
        b.w1.push_back(next(static_cast<size_t>(H) * F));
        b.w2.push_back(next(static_cast<size_t>(F) * H));
      }
      blocks.push_back(std::move(b));
    }
  }
  auto flatten = [&](const std::vector<RefMoeBlock>& bs, int s) {
    std::vector<double> p;
    for (int l = 0; l < L; ++l) {
      const RefMoeBlock& b = bs[s * L + l];
      p.insert(p.end(), b.router.begin(), b.router.end());
      for (int e = 0; e < E; ++e) {
        p.insert(p.end(), b.w1[e].begin(), b.w1[e].end());
        p.insert(p.end(), b.w2[e].begin(), b.w2[e].end());
      }
    }
    return p;
  };
  auto zero_like = [&] {
    std::vector<RefMoeBlock> z = blocks;
    for (RefMoeBlock& b : z) {
      std::fill(b.router.begin(), b.router.end(), 0.0);
      for (auto& w : b.w1) std::fill(w.begin(), w.end(), 0.0);
      for (auto& w : b.w2) std::fill(w.begin(), w.end(), 0.0);
    }
    return z;
  };
  std::vector<RefMoeBlock> adam_m = zero_like(), adam_v = zero_like();
  const double batches = static_cast<double>(c.num_microbatches) * c.num_replicas;
  ReferenceResult result;
  for (int step = 0; step < num_steps; ++step) {
    std::vector<RefMoeBlock> grads = zero_like();
    double loss_sum = 0;
    for (int r = 0; r < c.num_replicas; ++r) {
      for (int mb = 0; mb < c.num_microbatches; ++mb) {
        const std::vector<double> input = mlp_input(c, r, mb);
        const std::vector<double> target = mlp_target(c, r, mb);
        double loss = 0;
        for (int t = 0; t < T; ++t) {
          // Forward of token t through every block.
          std::vector<double> x(input.begin() + t * H, input.begin() + (t + 1) * H);
          std::vector<RefMoeToken> kept(blocks.size());
          for (size_t b = 0; b < blocks.size(); ++b) {
            const RefMoeBlock& blk = blocks[b];
            RefMoeToken& tk = kept[b];
            tk.x = x;
            std::vector<double> scores(E, 0.0);
            for (int e = 0; e < E; ++e)
              for (int i = 0; i < H; ++i) scores[e] += x[i] * blk.router[i * E + e];
            tk.p.assign(E, 0.0);
            if (sigmoid) {
              for (int e = 0; e < E; ++e) tk.p[e] = 1.0 / (1.0 + std::exp(-scores[e]));
            } else {
              double z = 0;
              for (int e = 0; e < E; ++e) z += std::exp(scores[e]);
              for (int e = 0; e < E; ++e) tk.p[e] = std::exp(scores[e]) / z;
            }
            tk.chosen = reference_top_k(scores, K);
            std::vector<double> y = x;
            for (int e : tk.chosen) {
              std::vector<double> u(F, 0.0), a(F), o(H, 0.0);
              for (int j = 0; j < F; ++j) {
                for (int i = 0; i < H; ++i) u[j] += x[i] * blk.w1[e][i * F + j];
                a[j] = reference::gelu(u[j]);
              }
              for (int k = 0; k < H; ++k)
                for (int j = 0; j < F; ++j) o[k] += a[j] * blk.w2[e][j * H + k];
              for (int k = 0; k < H; ++k) y[k] += tk.p[e] * o[k];
              tk.u.push_back(std::move(u));
              tk.a.push_back(std::move(a));
              tk.out.push_back(std::move(o));
            }
            x = std::move(y);
          }
          // Loss (MSE over the microbatch's seq x hidden values) and its gradient.
          const double n = static_cast<double>(T) * H;
          std::vector<double> gy(H);
          for (int k = 0; k < H; ++k) {
            const double d = x[k] - target[t * H + k];
            loss += d * d / n;
            gy[k] = 2.0 * d / n / batches;
          }
          // Backward through the blocks in reverse.
          for (int b = static_cast<int>(blocks.size()) - 1; b >= 0; --b) {
            const RefMoeBlock& blk = blocks[b];
            RefMoeBlock& g = grads[b];
            const RefMoeToken& tk = kept[b];
            std::vector<double> gx = gy;
            std::vector<double> dp(E, 0.0);
            for (size_t n2 = 0; n2 < tk.chosen.size(); ++n2) {
              const int e = tk.chosen[n2];
              for (int k = 0; k < H; ++k) dp[e] += gy[k] * tk.out[n2][k];
              std::vector<double> ge(H);
              for (int k = 0; k < H; ++k) ge[k] = tk.p[e] * gy[k];
              for (int j = 0; j < F; ++j) {
                double ga = 0;
                for (int k = 0; k < H; ++k) {
                  g.w2[e][j * H + k] += tk.a[n2][j] * ge[k];
                  ga += ge[k] * blk.w2[e][j * H + k];
                }
                const double gu = ga * reference::gelu_derivative(tk.u[n2][j]);
                for (int i = 0; i < H; ++i) {
                  g.w1[e][i * F + j] += tk.x[i] * gu;
                  gx[i] += gu * blk.w1[e][i * F + j];
                }
              }
            }
            std::vector<double> ds(E, 0.0);
            for (int j = 0; j < E; ++j) {
              if (sigmoid) {
                ds[j] = dp[j] * tk.p[j] * (1.0 - tk.p[j]);
              } else {
                for (int e = 0; e < E; ++e)
                  ds[j] += dp[e] * tk.p[e] * ((e == j ? 1.0 : 0.0) - tk.p[j]);
              }
            }
            for (int i = 0; i < H; ++i)
              for (int j = 0; j < E; ++j) {
                g.router[i * E + j] += tk.x[i] * ds[j];
                gx[i] += ds[j] * blk.router[i * E + j];
              }
            gy = std::move(gx);
          }
        }
        loss_sum += loss;
      }
    }
    result.losses.push_back(loss_sum / batches);
    // The optimizer, element by element over router and experts.
    const int t_adam = step + 1;
    auto update = [&](std::vector<double>& w, const std::vector<double>& gw, std::vector<double>& m,
                      std::vector<double>& v) {
      for (size_t i = 0; i < w.size(); ++i) {
        if (c.optimizer == OptimizerKind::kSgd) {
          w[i] -= c.lr() * gw[i];
          continue;
        }
        m[i] = reference::kAdamBeta1 * m[i] + (1.0 - reference::kAdamBeta1) * gw[i];
        v[i] = reference::kAdamBeta2 * v[i] + (1.0 - reference::kAdamBeta2) * gw[i] * gw[i];
        const double m_hat = m[i] / (1.0 - std::pow(reference::kAdamBeta1, t_adam));
        const double v_hat = v[i] / (1.0 - std::pow(reference::kAdamBeta2, t_adam));
        w[i] -= c.lr() * m_hat / (std::sqrt(v_hat) + reference::kAdamEps);
      }
    };
    for (size_t b = 0; b < blocks.size(); ++b) {
      update(blocks[b].router, grads[b].router, adam_m[b].router, adam_v[b].router);
      for (int e = 0; e < E; ++e) {
        update(blocks[b].w1[e], grads[b].w1[e], adam_m[b].w1[e], adam_v[b].w1[e]);
        update(blocks[b].w2[e], grads[b].w2[e], adam_m[b].w2[e], adam_v[b].w2[e]);
      }
    }
  }
  for (int s = 0; s < S; ++s) result.stage_params.push_back(flatten(blocks, s));
  return result;
}

}  // namespace jaxpp
