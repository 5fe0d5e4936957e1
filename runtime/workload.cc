#include "runtime/workload.h"

#include <cblas.h>

#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "graph/error.h"
#include "runtime/backend.h"

namespace jaxpp {
namespace {

constexpr double kAdamBeta1 = 0.9;
constexpr double kAdamBeta2 = 0.999;
constexpr double kAdamEps = 1e-8;
constexpr uint64_t kSaltInput = 0x1111;
constexpr uint64_t kSaltTarget = 0x2222;
constexpr uint64_t kSaltWeight = 0x3333;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t s = a * 0x100000001B3ull ^ b;
  return splitmix64(s);
}

// Uniform values in [-scale, scale) from a seed.
std::vector<double> uniform(uint64_t seed, size_t n, double scale) {
  std::vector<double> v(n);
  uint64_t state = seed;
  for (double& x : v) {
    double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
    x = (2 * u - 1) * scale;
  }
  return v;
}

std::vector<double> input_of(const MlpConfig& c, int step, int replica, int mb) {
  (void)step;  // a fixed data set: the same batches every step
  uint64_t key = mix(mix(mix(c.seed, kSaltInput), replica), mb);
  return uniform(key, static_cast<size_t>(c.seq) * c.hidden, 1.0);
}

std::vector<double> target_of(const MlpConfig& c, int step, int replica, int mb) {
  (void)step;
  uint64_t key = mix(mix(mix(c.seed, kSaltTarget), replica), mb);
  return uniform(key, static_cast<size_t>(c.seq) * c.hidden, 1.0);
}

// C (m x n) = alpha * op(A) op(B) + beta * C, row-major.
void gemm(bool ta, bool tb, int m, int n, int k, const double* a, int lda, const double* b,
          int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)

double gelu(double u) { return 0.5 * u * (1 + std::tanh(kGeluC * (u + 0.044715 * u * u * u))); }

double gelu_grad(double u) {
  double inner = kGeluC * (u + 0.044715 * u * u * u);
  double t = std::tanh(inner);
  return 0.5 * (1 + t) + 0.5 * u * (1 - t * t) * kGeluC * (1 + 3 * 0.044715 * u * u);
}

std::vector<char> to_bytes(const std::vector<double>& v) {
  std::vector<char> out(v.size() * sizeof(double));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<double> from_bytes(const std::vector<char>& b) {
  std::vector<double> v(b.size() / sizeof(double));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(double));
  return v;
}

// The numerics of one stage, shared by MlpWorkload and run_reference so both compute exactly
// the same arithmetic.
struct StageMath {
  const MlpConfig& c;
  int h() const { return c.hidden; }
  int f() const { return c.ffn_size(); }
  int t() const { return c.seq; }
  size_t w1_offset(int l) const { return static_cast<size_t>(l) * 2 * h() * f(); }
  size_t w2_offset(int l) const { return w1_offset(l) + static_cast<size_t>(h()) * f(); }

  // x: stage input; fills stash x/u/a; returns the output.
  std::vector<double> forward(const std::vector<double>& params, std::vector<double> x,
                              std::vector<std::vector<double>>& xs,
                              std::vector<std::vector<double>>& us,
                              std::vector<std::vector<double>>& as) const {
    int L = c.layers_per_stage;
    xs.assign(L, {});
    us.assign(L, {});
    as.assign(L, {});
    for (int l = 0; l < L; ++l) {
      std::vector<double> u(static_cast<size_t>(t()) * f());
      gemm(false, false, t(), f(), h(), x.data(), h(), params.data() + w1_offset(l), f(), 0.0,
           u.data(), f());
      std::vector<double> a(u.size());
      for (size_t i = 0; i < u.size(); ++i) a[i] = gelu(u[i]);
      std::vector<double> y = x;  // residual
      gemm(false, false, t(), h(), f(), a.data(), f(), params.data() + w2_offset(l), h(), 1.0,
           y.data(), h());
      xs[l] = std::move(x);
      us[l] = std::move(u);
      as[l] = std::move(a);
      x = std::move(y);
    }
    return x;
  }

  // Input gradient of layer l: returns dx, sets du.
  std::vector<double> backward_input_layer(const std::vector<double>& params, int l,
                                           const std::vector<double>& dy,
                                           const std::vector<double>& u,
                                           std::vector<double>& du) const {
    std::vector<double> da(static_cast<size_t>(t()) * f());
    gemm(false, true, t(), f(), h(), dy.data(), h(), params.data() + w2_offset(l), h(), 0.0,
         da.data(), f());
    du.resize(da.size());
    for (size_t i = 0; i < da.size(); ++i) du[i] = da[i] * gelu_grad(u[i]);
    std::vector<double> dx = dy;  // residual
    gemm(false, true, t(), h(), f(), du.data(), f(), params.data() + w1_offset(l), f(), 1.0,
         dx.data(), h());
    return dx;
  }

  void backward_weight_layer(std::vector<double>& grads, int l, const std::vector<double>& x,
                             const std::vector<double>& a, const std::vector<double>& dy,
                             const std::vector<double>& du) const {
    gemm(true, false, f(), h(), t(), a.data(), f(), dy.data(), h(), 1.0,
         grads.data() + w2_offset(l), h());
    gemm(true, false, h(), f(), t(), x.data(), h(), du.data(), f(), 1.0,
         grads.data() + w1_offset(l), f());
  }

  // Loss of one microbatch and dL/dy.
  double loss(const std::vector<double>& y, const std::vector<double>& target,
              std::vector<double>& dy) const {
    double n = static_cast<double>(y.size());
    double scale = 2.0 / n / (static_cast<double>(c.num_microbatches) * c.num_replicas);
    double sum = 0;
    dy.resize(y.size());
    for (size_t i = 0; i < y.size(); ++i) {
      double d = y[i] - target[i];
      sum += d * d;
      dy[i] = scale * d;
    }
    return sum / n;
  }

  void optimizer(std::vector<double>& p, std::vector<double>& g, std::vector<double>& m,
                 std::vector<double>& v, int step) const {
    double lr = c.lr();
    if (c.optimizer == OptimizerKind::kSgd) {
      for (size_t i = 0; i < p.size(); ++i) p[i] -= lr * g[i];
    } else {
      if (m.empty()) m.assign(p.size(), 0.0);
      if (v.empty()) v.assign(p.size(), 0.0);
      double bc1 = 1 - std::pow(kAdamBeta1, step + 1);
      double bc2 = 1 - std::pow(kAdamBeta2, step + 1);
      for (size_t i = 0; i < p.size(); ++i) {
        m[i] = kAdamBeta1 * m[i] + (1 - kAdamBeta1) * g[i];
        v[i] = kAdamBeta2 * v[i] + (1 - kAdamBeta2) * g[i] * g[i];
        p[i] -= lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + kAdamEps);
      }
    }
    std::fill(g.begin(), g.end(), 0.0);
  }
};

int64_t vec_bytes(const std::vector<double>& v) {
  return static_cast<int64_t>(v.size() * sizeof(double));
}

}  // namespace

std::string_view to_string(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam:
      return "adam";
  }
  return "?";
}

OptimizerKind parse_optimizer_kind(std::string_view s, const std::string& where) {
  if (s == "sgd") return OptimizerKind::kSgd;
  if (s == "adam") return OptimizerKind::kAdam;
  throw_input_error(where, "expected sgd or adam, got '" + std::string(s) + "'");
}

double MlpConfig::lr() const {
  if (learning_rate > 0) return learning_rate;
  return optimizer == OptimizerKind::kSgd ? 0.05 : 1e-3;
}

int64_t MlpConfig::params_per_stage() const {
  return 2LL * hidden * ffn_size() * layers_per_stage;
}

std::vector<double> initial_stage_params(const MlpConfig& c, int stage) {
  std::vector<double> p;
  p.reserve(static_cast<size_t>(c.params_per_stage()));
  size_t hf = static_cast<size_t>(c.hidden) * c.ffn_size();
  for (int l = 0; l < c.layers_per_stage; ++l) {
    uint64_t key = mix(mix(mix(c.seed, kSaltWeight), stage), l);
    std::vector<double> w1 = uniform(key, hf, 1.0 / std::sqrt(c.hidden));
    std::vector<double> w2 = uniform(mix(key, 2), hf, 1.0 / std::sqrt(c.ffn_size()));
    p.insert(p.end(), w1.begin(), w1.end());
    p.insert(p.end(), w2.begin(), w2.end());
  }
  return p;
}

MlpWorkload::MlpWorkload(const MlpConfig& config, int actor, int replica,
                         const std::vector<int>& stage_to_actor)
    : config_(config), actor_(actor), replica_(replica) {
  for (int s = 0; s < static_cast<int>(stage_to_actor.size()); ++s) {
    if (stage_to_actor[s] != actor) continue;
    StageState st;
    st.params = initial_stage_params(config_, s);
    st.grads.assign(st.params.size(), 0.0);
    stages_.emplace(s, std::move(st));
  }
}

MlpWorkload::StageState& MlpWorkload::stage(int s) {
  auto it = stages_.find(s);
  if (it == stages_.end())
    throw std::logic_error("MlpWorkload: actor " + std::to_string(actor_) +
                           " does not hold stage " + std::to_string(s));
  return it->second;
}

const std::vector<double>& MlpWorkload::params(int s) const { return stages_.at(s).params; }

void MlpWorkload::run_task(const TaskRef& task, int step) {
  switch (task.kind) {
    case TaskKind::kF:
      forward(task.stage, task.microbatch, step);
      return;
    case TaskKind::kB:
      backward_input(task.stage, task.microbatch, /*also_weights=*/true);
      return;
    case TaskKind::kI:
      backward_input(task.stage, task.microbatch, /*also_weights=*/false);
      return;
    case TaskKind::kW:
      backward_weights(task.stage, task.microbatch);
      return;
  }
}

template <typename M>
static std::vector<double> take(M& map, const std::pair<int, int>& key, const char* what,
                                int actor) {
  auto it = map.find(key);
  if (it == map.end())
    throw RuntimeFailure(std::string("actor ") + std::to_string(actor) + ": missing " + what +
                             " of stage " + std::to_string(key.first) + " microbatch " +
                             std::to_string(key.second));
  std::vector<double> v = std::move(it->second);
  map.erase(it);
  return v;
}

void MlpWorkload::forward(int s, int mb, int step) {
  StageMath math{config_};
  std::vector<double> x = s == 0 ? input_of(config_, step, replica_, mb)
                                 : take(activation_, {s - 1, mb}, "activation", actor_);
  Stash& st = stash_[{s, mb}];
  std::vector<double> y = math.forward(stage(s).params, std::move(x), st.x, st.u, st.a);
  if (s == config_.num_stages - 1) {
    std::vector<double> dy;
    losses_[step][mb] = math.loss(y, target_of(config_, step, replica_, mb), dy);
    gradient_[{s, mb}] = std::move(dy);
  } else {
    activation_[{s, mb}] = std::move(y);
  }
}

void MlpWorkload::backward_input(int s, int mb, bool also_weights) {
  StageMath math{config_};
  StageState& state = stage(s);
  std::vector<double> dy = take(gradient_, {s, mb}, "gradient", actor_);
  auto it = stash_.find({s, mb});
  if (it == stash_.end())
    throw RuntimeFailure("actor " + std::to_string(actor_) + ": backward of stage " +
                             std::to_string(s) + " microbatch " + std::to_string(mb) +
                             " before its forward");
  Stash& st = it->second;
  int L = config_.layers_per_stage;
  st.dy.assign(L, {});
  st.du.assign(L, {});
  for (int l = L - 1; l >= 0; --l) {
    std::vector<double> du;
    std::vector<double> dx = math.backward_input_layer(state.params, l, dy, st.u[l], du);
    st.u[l].clear();
    st.u[l].shrink_to_fit();
    if (also_weights) {
      math.backward_weight_layer(state.grads, l, st.x[l], st.a[l], dy, du);
    } else {
      st.dy[l] = std::move(dy);
      st.du[l] = std::move(du);
    }
    dy = std::move(dx);
  }
  if (also_weights) stash_.erase(it);
  if (s > 0) gradient_[{s - 1, mb}] = std::move(dy);
}

void MlpWorkload::backward_weights(int s, int mb) {
  StageMath math{config_};
  StageState& state = stage(s);
  auto it = stash_.find({s, mb});
  if (it == stash_.end() || it->second.dy.empty())
    throw RuntimeFailure("actor " + std::to_string(actor_) + ": W of stage " +
                             std::to_string(s) + " microbatch " + std::to_string(mb) +
                             " before its I");
  Stash& st = it->second;
  for (int l = config_.layers_per_stage - 1; l >= 0; --l)
    math.backward_weight_layer(state.grads, l, st.x[l], st.a[l], st.dy[l], st.du[l]);
  stash_.erase(it);
}

std::vector<char> MlpWorkload::take_output(const TaskRef& producer, int step) {
  (void)step;
  if (producer.kind == TaskKind::kF)
    return to_bytes(take(activation_, {producer.stage, producer.microbatch}, "activation", actor_));
  return to_bytes(
      take(gradient_, {producer.stage - 1, producer.microbatch}, "input gradient", actor_));
}

void MlpWorkload::put_input(const TaskRef& producer, int step, std::vector<char> payload) {
  (void)step;
  if (producer.kind == TaskKind::kF)
    activation_[{producer.stage, producer.microbatch}] = from_bytes(payload);
  else
    gradient_[{producer.stage - 1, producer.microbatch}] = from_bytes(payload);
}

std::span<double> MlpWorkload::grads(int s) { return std::span<double>(stage(s).grads); }

void MlpWorkload::optimizer_step(int s, int step) {
  StageState& st = stage(s);
  StageMath{config_}.optimizer(st.params, st.grads, st.adam_m, st.adam_v, step);
}

int64_t MlpWorkload::bytes_held() const {
  int64_t total = 0;
  for (const auto& [s, st] : stages_)
    total += vec_bytes(st.params) + vec_bytes(st.grads) + vec_bytes(st.adam_m) +
             vec_bytes(st.adam_v);
  for (const auto& [k, st] : stash_)
    for (const auto* group : {&st.x, &st.u, &st.a, &st.dy, &st.du})
      for (const auto& v : *group) total += vec_bytes(v);
  for (const auto& [k, v] : activation_) total += vec_bytes(v);
  for (const auto& [k, v] : gradient_) total += vec_bytes(v);
  return total;
}

ReferenceResult run_reference(const MlpConfig& c, int num_steps) {
  StageMath math{c};
  int S = c.num_stages;
  std::vector<std::vector<double>> params(S), m(S), v(S);
  for (int s = 0; s < S; ++s) params[s] = initial_stage_params(c, s);
  ReferenceResult result;
  for (int step = 0; step < num_steps; ++step) {
    std::vector<std::vector<double>> total(S, std::vector<double>(params[0].size(), 0.0));
    double loss_sum = 0;
    for (int r = 0; r < c.num_replicas; ++r) {
      std::vector<std::vector<double>> grads(S, std::vector<double>(params[0].size(), 0.0));
      for (int mb = 0; mb < c.num_microbatches; ++mb) {
        std::vector<std::vector<std::vector<double>>> xs(S), us(S), as(S);
        std::vector<double> x = input_of(c, step, r, mb);
        for (int s = 0; s < S; ++s) x = math.forward(params[s], std::move(x), xs[s], us[s], as[s]);
        std::vector<double> dy;
        loss_sum += math.loss(x, target_of(c, step, r, mb), dy);
        for (int s = S - 1; s >= 0; --s) {
          for (int l = c.layers_per_stage - 1; l >= 0; --l) {
            std::vector<double> du;
            std::vector<double> dx = math.backward_input_layer(params[s], l, dy, us[s][l], du);
            math.backward_weight_layer(grads[s], l, xs[s][l], as[s][l], dy, du);
            dy = std::move(dx);
          }
        }
      }
      for (int s = 0; s < S; ++s)
        for (size_t i = 0; i < total[s].size(); ++i) total[s][i] += grads[s][i];
    }
    for (int s = 0; s < S; ++s) math.optimizer(params[s], total[s], m[s], v[s], step);
    result.losses.push_back(loss_sum / (static_cast<double>(c.num_microbatches) * c.num_replicas));
  }
  result.stage_params = std::move(params);
  return result;
}

EmulatedWorkload::EmulatedWorkload(const CostProvider& cost, int actor, double time_scale)
    : cost_(cost), actor_(actor), time_scale_(time_scale) {}

double EmulatedWorkload::emulated_s(const Instruction& ins) const {
  switch (ins.op) {
    case OpKind::kCompute:
    case OpKind::kOptimizer:
      return cost_.compute_s(actor_, ins) * time_scale_;
    case OpKind::kAllReduce:
      return cost_.allreduce_s(actor_, ins) * time_scale_;
    case OpKind::kSend: {
      double bw = cost_.p2p_bandwidth_bytes_per_s(actor_, ins.peer);
      double t = cost_.transfer_latency_s(actor_, ins.peer, ins);
      if (std::isfinite(bw) && bw > 0) t += static_cast<double>(ins.bytes) / bw;
      return t * time_scale_;
    }
    case OpKind::kRecv:
      return 0;
  }
  return 0;
}

}  // namespace jaxpp
