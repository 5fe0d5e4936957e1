#include "runtime/moe_workload.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "graph/error.h"
#include "runtime/mlp_math.h"

namespace jaxpp {
namespace {

constexpr double kMoeAdamBeta1 = 0.9;
constexpr double kMoeAdamBeta2 = 0.999;
constexpr double kMoeAdamEps = 1e-8;

DeviceArray take_tensor(std::map<std::pair<int, int>, DeviceArray>& map,
                        const std::pair<int, int>& key, const char* what, int actor) {
  auto it = map.find(key);
  if (it == map.end())
    throw RuntimeFailure("actor " + std::to_string(actor) + ": missing " + what + " of stage " +
                         std::to_string(key.first) + " microbatch " + std::to_string(key.second));
  DeviceArray v = std::move(it->second);
  map.erase(it);
  return v;
}

std::vector<double> to_vector(const DeviceArray& a) {
  return std::vector<double>(a.data(), a.data() + a.size());
}

}  // namespace

MoeLayout::MoeLayout(const MlpConfig& c)
    : h(static_cast<size_t>(c.hidden)),
      f(static_cast<size_t>(c.ffn_size())),
      experts(static_cast<size_t>(c.experts)) {}

int moe_expert_owner(const MlpConfig& c, int expert) { return expert / (c.experts / c.ep); }

std::vector<int> moe_top_k(const double* scores, int experts, int top_k) {
  std::vector<int> order(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  order.resize(static_cast<size_t>(top_k));
  return order;
}

MoeWorkload::MoeWorkload(const MlpConfig& config, int actor, int replica,
                         const std::vector<int>& stage_to_actor, Backend& backend, double timeout_s)
    : config_(config),
      layout_(config),
      actor_(actor),
      replica_(replica),
      backend_(backend),
      timeout_s_(timeout_s) {
  if (config_.experts < 1 || config_.top_k < 1 || config_.top_k > config_.experts)
    throw InputError("MoE workload: expected 1 <= top_k <= experts, got top_k " +
                     std::to_string(config_.top_k) + " of " + std::to_string(config_.experts));
  if (config_.ep < 1 || config_.experts % config_.ep != 0 ||
      backend.num_replicas() % config_.ep != 0)
    throw InputError("MoE workload: ep " + std::to_string(config_.ep) + " must divide the " +
                     std::to_string(config_.experts) + " experts and the " +
                     std::to_string(backend.num_replicas()) +
                     " dp replicas (the runtime carves ep out of dp)");
  ep_rank_ = replica % config_.ep;
  HostDevice& dev = host_device();
  for (int s = 0; s < static_cast<int>(stage_to_actor.size()); ++s) {
    if (stage_to_actor[s] != actor) continue;
    StageState st;
    st.params = dev.upload(moe_initial_stage_params(config_, s));
    st.grads = dev.zeros(st.params.size());
    stages_.emplace(s, std::move(st));
  }
}

const MoeWorkload::StageState& MoeWorkload::stage(int s) const {
  auto it = stages_.find(s);
  if (it == stages_.end())
    throw std::logic_error("MoeWorkload: actor " + std::to_string(actor_) +
                           " does not hold stage " + std::to_string(s));
  return it->second;
}

MoeWorkload::StageState& MoeWorkload::stage(int s) {
  return const_cast<StageState&>(std::as_const(*this).stage(s));
}

std::vector<double> MoeWorkload::params(int s) const { return to_vector(stage(s).params); }

std::vector<std::pair<size_t, size_t>> MoeWorkload::held_ranges() const {
  std::vector<std::pair<size_t, size_t>> ranges;
  const int per_rank = config_.experts / config_.ep;
  const int first = ep_rank_ * per_rank;
  for (int l = 0; l < config_.layers_per_stage; ++l) {
    ranges.push_back({layout_.router(l), layout_.router(l) + layout_.h * layout_.experts});
    ranges.push_back({layout_.w1(l, first), layout_.w1(l, first + per_rank)});
  }
  return ranges;
}

void MoeWorkload::reduce_gradients(int s, Backend& backend, double timeout_s) {
  double* g = stage(s).grads.data();
  const int per_rank = config_.experts / config_.ep;
  const int first = ep_rank_ * per_rank;
  const size_t router_size = layout_.h * layout_.experts;
  const size_t expert_size = layout_.w1(0, first + per_rank) - layout_.w1(0, first);
  std::vector<double> router, experts;
  router.reserve(router_size * config_.layers_per_stage);
  experts.reserve(expert_size * config_.layers_per_stage);
  for (int l = 0; l < config_.layers_per_stage; ++l) {
    router.insert(router.end(), g + layout_.router(l), g + layout_.router(l) + router_size);
    experts.insert(experts.end(), g + layout_.w1(l, first), g + layout_.w1(l, first) + expert_size);
  }
  backend.allreduce_sum(router, timeout_s);
  backend.allreduce_sum_strided(experts, config_.ep, timeout_s);
  for (int l = 0; l < config_.layers_per_stage; ++l) {
    std::copy_n(router.begin() + static_cast<std::ptrdiff_t>(l * router_size), router_size,
                g + layout_.router(l));
    std::copy_n(experts.begin() + static_cast<std::ptrdiff_t>(l * expert_size), expert_size,
                g + layout_.w1(l, first));
  }
  grad_reduce_bytes_ += static_cast<int64_t>((router.size() + experts.size()) * sizeof(double));
}

std::vector<std::vector<double>> MoeWorkload::exchange(std::vector<std::vector<double>> send) {
  return backend_.alltoallv(config_.ep, std::move(send), timeout_s_);
}

std::vector<double> MoeWorkload::block_forward(const std::vector<double>& w, int l,
                                               std::vector<double> x, BlockStash& st) {
  const int T = config_.seq, K = config_.top_k, E = config_.experts, ep = config_.ep;
  const size_t H = layout_.h, F = layout_.f;
  const double* wr = w.data() + layout_.router(l);
  st.p.assign(static_cast<size_t>(T) * E, 0.0);
  st.chosen.assign(T, {});
  st.sent.assign(ep, {});
  std::vector<std::vector<double>> send(ep);
  std::vector<double> scores(E);
  for (int t = 0; t < T; ++t) {
    const double* xt = x.data() + t * H;
    for (int e = 0; e < E; ++e) {
      double sum = 0;
      for (size_t i = 0; i < H; ++i) sum += xt[i] * wr[i * E + e];
      scores[e] = sum;
    }
    double* pt = st.p.data() + static_cast<size_t>(t) * E;
    if (config_.router == RouterScoring::kSigmoid) {
      for (int e = 0; e < E; ++e) pt[e] = 1.0 / (1.0 + std::exp(-scores[e]));
    } else {
      const double top = *std::max_element(scores.begin(), scores.end());
      double z = 0;
      for (int e = 0; e < E; ++e) z += (pt[e] = std::exp(scores[e] - top));
      for (int e = 0; e < E; ++e) pt[e] /= z;
    }
    st.chosen[t] = moe_top_k(scores.data(), E, K);
    if (config_.fault == MlpFault::kExpertSwap && replica_ == 0)
      st.chosen[t][0] = (st.chosen[t][0] + 1) % E;
    for (int k = 0; k < K; ++k) {
      const int e = st.chosen[t][k];
      const int owner = moe_expert_owner(config_, e);
      st.sent[owner].push_back({t, k});
      send[owner].push_back(static_cast<double>(e));
      send[owner].insert(send[owner].end(), xt, xt + H);
    }
  }
  // Holder: run the experts on the rows this replica received.
  std::vector<std::vector<double>> recv = exchange(std::move(send));
  st.rows.assign(ep, {});
  std::vector<std::vector<double>> reply(ep);
  for (int i = 0; i < ep; ++i) {
    if (recv[i].size() % (H + 1) != 0)
      throw RuntimeFailure("MoE dispatch: " + std::to_string(recv[i].size()) +
                           " values from ep rank " + std::to_string(i) + " are not whole rows");
    for (size_t at = 0; at < recv[i].size(); at += H + 1) {
      Row r;
      r.expert = static_cast<int>(recv[i][at]);
      if (r.expert < 0 || r.expert >= E || moe_expert_owner(config_, r.expert) != ep_rank_)
        throw RuntimeFailure("MoE dispatch: expert " + std::to_string(r.expert) +
                             " is not held by ep rank " + std::to_string(ep_rank_));
      r.x.assign(recv[i].begin() + static_cast<std::ptrdiff_t>(at + 1),
                 recv[i].begin() + static_cast<std::ptrdiff_t>(at + 1 + H));
      const double* w1 = w.data() + layout_.w1(l, r.expert);
      const double* w2 = w.data() + layout_.w2(l, r.expert);
      r.u.assign(F, 0.0);
      r.a.assign(F, 0.0);
      for (size_t i2 = 0; i2 < H; ++i2)
        for (size_t c = 0; c < F; ++c) r.u[c] += r.x[i2] * w1[i2 * F + c];
      for (size_t c = 0; c < F; ++c) r.a[c] = mlp_math::gelu(r.u[c]);
      std::vector<double> o(H, 0.0);
      for (size_t c = 0; c < F; ++c)
        for (size_t k = 0; k < H; ++k) o[k] += r.a[c] * w2[c * H + k];
      reply[i].insert(reply[i].end(), o.begin(), o.end());
      st.rows[i].push_back(std::move(r));
    }
  }
  std::vector<std::vector<double>> back = exchange(std::move(reply));
  // Source: combine.
  st.out.assign(static_cast<size_t>(T) * K * H, 0.0);
  std::vector<double> y = x;
  for (int j = 0; j < ep; ++j) {
    if (back[j].size() != st.sent[j].size() * H)
      throw RuntimeFailure("MoE combine: ep rank " + std::to_string(j) + " returned " +
                           std::to_string(back[j].size()) + " values for " +
                           std::to_string(st.sent[j].size()) + " rows");
    for (size_t n = 0; n < st.sent[j].size(); ++n) {
      const auto [t, k] = st.sent[j][n];
      const int e = st.chosen[t][k];
      const double gate = st.p[static_cast<size_t>(t) * E + e];
      double* out = st.out.data() + (static_cast<size_t>(t) * K + k) * H;
      for (size_t i = 0; i < H; ++i) {
        out[i] = back[j][n * H + i];
        y[t * H + i] += gate * out[i];
      }
    }
  }
  st.x = std::move(x);
  return y;
}

std::vector<double> MoeWorkload::block_backward_input(const std::vector<double>& w, int l,
                                                      const std::vector<double>& gy,
                                                      BlockStash& st) {
  const int T = config_.seq, K = config_.top_k, E = config_.experts, ep = config_.ep;
  const size_t H = layout_.h, F = layout_.f;
  const double* wr = w.data() + layout_.router(l);
  // Router path.
  std::vector<double> dp(static_cast<size_t>(T) * E, 0.0);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) {
      const double* out = st.out.data() + (static_cast<size_t>(t) * K + k) * H;
      double dot = 0;
      for (size_t i = 0; i < H; ++i) dot += gy[t * H + i] * out[i];
      dp[static_cast<size_t>(t) * E + st.chosen[t][k]] += dot;
    }
  st.ds.assign(dp.size(), 0.0);
  for (int t = 0; t < T; ++t) {
    const double* pt = st.p.data() + static_cast<size_t>(t) * E;
    const double* dpt = dp.data() + static_cast<size_t>(t) * E;
    double* dst = st.ds.data() + static_cast<size_t>(t) * E;
    if (config_.router == RouterScoring::kSigmoid) {
      for (int e = 0; e < E; ++e) dst[e] = dpt[e] * pt[e] * (1 - pt[e]);
    } else {
      double mean = 0;
      for (int e = 0; e < E; ++e) mean += pt[e] * dpt[e];
      for (int e = 0; e < E; ++e) dst[e] = pt[e] * (dpt[e] - mean);
    }
  }
  std::vector<double> dx = gy;
  for (int t = 0; t < T; ++t)
    for (size_t i = 0; i < H; ++i) {
      double sum = 0;
      for (int e = 0; e < E; ++e) sum += st.ds[static_cast<size_t>(t) * E + e] * wr[i * E + e];
      dx[t * H + i] += sum;
    }
  // Expert path: gated output gradients to the holders, input gradients back.
  std::vector<std::vector<double>> send(ep);
  for (int j = 0; j < ep; ++j)
    for (const auto& [t, k] : st.sent[j]) {
      const double gate = st.p[static_cast<size_t>(t) * E + st.chosen[t][k]];
      for (size_t i = 0; i < H; ++i) send[j].push_back(gate * gy[t * H + i]);
    }
  std::vector<std::vector<double>> recv = exchange(std::move(send));
  std::vector<std::vector<double>> reply(ep);
  for (int i = 0; i < ep; ++i) {
    if (recv[i].size() != st.rows[i].size() * H)
      throw RuntimeFailure("MoE backward dispatch: " + std::to_string(recv[i].size()) +
                           " values from ep rank " + std::to_string(i) + " for " +
                           std::to_string(st.rows[i].size()) + " rows");
    for (size_t n = 0; n < st.rows[i].size(); ++n) {
      Row& r = st.rows[i][n];
      const double* w1 = w.data() + layout_.w1(l, r.expert);
      const double* w2 = w.data() + layout_.w2(l, r.expert);
      r.gy.assign(recv[i].begin() + static_cast<std::ptrdiff_t>(n * H),
                  recv[i].begin() + static_cast<std::ptrdiff_t>((n + 1) * H));
      r.du.assign(F, 0.0);
      for (size_t c = 0; c < F; ++c) {
        double ga = 0;
        for (size_t k = 0; k < H; ++k) ga += r.gy[k] * w2[c * H + k];
        r.du[c] = ga * mlp_math::gelu_grad(r.u[c]);
      }
      for (size_t i2 = 0; i2 < H; ++i2) {
        double sum = 0;
        for (size_t c = 0; c < F; ++c) sum += r.du[c] * w1[i2 * F + c];
        reply[i].push_back(sum);
      }
    }
  }
  std::vector<std::vector<double>> back = exchange(std::move(reply));
  for (int j = 0; j < ep; ++j) {
    if (back[j].size() != st.sent[j].size() * H)
      throw RuntimeFailure("MoE backward combine: ep rank " + std::to_string(j) + " returned " +
                           std::to_string(back[j].size()) + " values for " +
                           std::to_string(st.sent[j].size()) + " rows");
    for (size_t n = 0; n < st.sent[j].size(); ++n) {
      const int t = st.sent[j][n].first;
      for (size_t i = 0; i < H; ++i) dx[t * H + i] += back[j][n * H + i];
    }
  }
  return dx;
}

void MoeWorkload::block_backward_weights(std::vector<double>& g, int l, BlockStash& st) {
  const int T = config_.seq, E = config_.experts;
  const size_t H = layout_.h, F = layout_.f;
  double* gr = g.data() + layout_.router(l);
  for (size_t i = 0; i < H; ++i)
    for (int e = 0; e < E; ++e) {
      double sum = 0;
      for (int t = 0; t < T; ++t) sum += st.x[t * H + i] * st.ds[static_cast<size_t>(t) * E + e];
      gr[i * E + e] += sum;
    }
  for (const std::vector<Row>& rows : st.rows)
    for (const Row& r : rows) {
      double* g1 = g.data() + layout_.w1(l, r.expert);
      double* g2 = g.data() + layout_.w2(l, r.expert);
      for (size_t c = 0; c < F; ++c)
        for (size_t k = 0; k < H; ++k) g2[c * H + k] += r.a[c] * r.gy[k];
      for (size_t i = 0; i < H; ++i)
        for (size_t c = 0; c < F; ++c) g1[i * F + c] += r.x[i] * r.du[c];
    }
}

void MoeWorkload::run_task(const TaskRef& task, int step) {
  switch (task.kind) {
    case TaskKind::kF:
      forward(task.stage, task.microbatch, step);
      break;
    case TaskKind::kB:
      backward_input(task.stage, task.microbatch, /*also_weights=*/true);
      break;
    case TaskKind::kI:
      backward_input(task.stage, task.microbatch, /*also_weights=*/false);
      break;
    case TaskKind::kW:
      backward_weights(task.stage, task.microbatch);
      break;
  }
}

void MoeWorkload::forward(int s, int mb, int step) {
  (void)step;  // a fixed data set: the same batches every step
  std::vector<double> x = s == 0
                              ? mlp_input(config_, replica_, mb)
                              : to_vector(take_tensor(activation_, {s, mb}, "activation", actor_));
  const std::vector<double> w = to_vector(stage(s).params);
  std::vector<BlockStash>& blocks = stash_[{s, mb}];
  blocks.assign(config_.layers_per_stage, {});
  for (int l = 0; l < config_.layers_per_stage; ++l)
    x = block_forward(w, l, std::move(x), blocks[l]);
  HostDevice& dev = host_device();
  if (s == config_.num_stages - 1) {
    const std::vector<double> target = mlp_target(config_, replica_, mb);
    const double n = static_cast<double>(x.size());
    const double scale =
        2.0 / n / (static_cast<double>(config_.num_microbatches) * config_.num_replicas);
    std::vector<double> dy(x.size());
    double loss = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = x[i] - target[i];
      loss += d * d;
      dy[i] = scale * d;
    }
    losses_[step][mb] = loss / n;
    gradient_[{s, mb}] = dev.upload(dy);
  } else {
    activation_[{s + 1, mb}] = dev.upload(x);
  }
}

void MoeWorkload::backward_input(int s, int mb, bool also_weights) {
  std::vector<double> gy = to_vector(take_tensor(gradient_, {s, mb}, "gradient", actor_));
  auto it = stash_.find({s, mb});
  if (it == stash_.end())
    throw RuntimeFailure("actor " + std::to_string(actor_) + ": backward of stage " +
                         std::to_string(s) + " microbatch " + std::to_string(mb) +
                         " before its forward");
  const std::vector<double> w = to_vector(stage(s).params);
  for (int l = config_.layers_per_stage - 1; l >= 0; --l)
    gy = block_backward_input(w, l, gy, it->second[l]);
  if (s > 0) gradient_[{s - 1, mb}] = host_device().upload(gy);
  if (also_weights) backward_weights(s, mb);
}

void MoeWorkload::backward_weights(int s, int mb) {
  auto it = stash_.find({s, mb});
  if (it == stash_.end() || it->second.empty() || it->second[0].ds.empty())
    throw RuntimeFailure("actor " + std::to_string(actor_) + ": W of stage " + std::to_string(s) +
                         " microbatch " + std::to_string(mb) + " before its I");
  DeviceArray& grads = stage(s).grads;
  std::vector<double> g = to_vector(grads);
  if (config_.fault == MlpFault::kSkipAccumulate && replica_ == 0)
    std::fill(g.begin(), g.end(), 0.0);
  for (int l = config_.layers_per_stage - 1; l >= 0; --l)
    block_backward_weights(g, l, it->second[l]);
  std::copy(g.begin(), g.end(), grads.data());
  stash_.erase(it);
}

DeviceArray MoeWorkload::take_output(const TaskRef& producer, int step) {
  (void)step;
  if (producer.kind == TaskKind::kF)
    return take_tensor(activation_, {producer.stage + 1, producer.microbatch}, "activation",
                       actor_);
  return take_tensor(gradient_, {producer.stage - 1, producer.microbatch}, "input gradient",
                     actor_);
}

void MoeWorkload::put_input(const TaskRef& producer, int step, DeviceArray tensor) {
  (void)step;
  const size_t expected = static_cast<size_t>(config_.seq) * config_.hidden;
  if (tensor.size() != expected)
    throw RuntimeFailure("actor " + std::to_string(actor_) + ": received " +
                         std::to_string(tensor.size()) + " values for " + to_string(producer) +
                         ", expected " + std::to_string(expected));
  if (!tensor.on_host()) throw std::logic_error("MoeWorkload::put_input: tensor not on the host");
  if (producer.kind == TaskKind::kF)
    activation_[{producer.stage + 1, producer.microbatch}] = std::move(tensor);
  else
    gradient_[{producer.stage - 1, producer.microbatch}] = std::move(tensor);
}

DeviceArray& MoeWorkload::grad_buffer(int s) { return stage(s).grads; }

void MoeWorkload::optimizer_step(int s, int step) {
  StageState& st = stage(s);
  const bool faulty_step = replica_ == 0 && step == 0;
  double* g = st.grads.data();
  if (faulty_step && config_.fault == MlpFault::kCorruptGrad && s == config_.num_stages - 1)
    g[0] += 1e-6;
  const bool stale = faulty_step && config_.fault == MlpFault::kStaleWeight && s == 0;
  const double lr = config_.lr();
  HostDevice& dev = host_device();
  if (config_.optimizer == OptimizerKind::kAdam && st.adam_m.empty()) {
    st.adam_m = dev.zeros(st.params.size());
    st.adam_v = dev.zeros(st.params.size());
  }
  const double bc1 = 1 - std::pow(kMoeAdamBeta1, step + 1);
  const double bc2 = 1 - std::pow(kMoeAdamBeta2, step + 1);
  double* p = st.params.data();
  for (const auto& [begin, end] : held_ranges()) {
    if (stale) break;
    for (size_t i = begin; i < end; ++i) {
      if (config_.optimizer == OptimizerKind::kSgd)
        p[i] -= lr * g[i];
      else
        mlp_math::adam_update(p[i], g[i], st.adam_m.data()[i], st.adam_v.data()[i], lr,
                              kMoeAdamBeta1, kMoeAdamBeta2, kMoeAdamEps, bc1, bc2);
    }
  }
  std::fill(g, g + st.grads.size(), 0.0);
}

int64_t MoeWorkload::bytes_held() const {
  int64_t total = 0;
  for (const auto& [s, st] : stages_)
    total += st.params.bytes() + st.grads.bytes() + st.adam_m.bytes() + st.adam_v.bytes();
  for (const auto& [key, blocks] : stash_)
    for (const BlockStash& b : blocks) {
      size_t values = b.x.size() + b.p.size() + b.ds.size() + b.out.size();
      for (const auto& rows : b.rows)
        for (const Row& r : rows)
          values += r.x.size() + r.u.size() + r.a.size() + r.gy.size() + r.du.size();
      total += static_cast<int64_t>(values * sizeof(double));
    }
  for (const auto& [k, v] : activation_) total += v.bytes();
  for (const auto& [k, v] : gradient_) total += v.bytes();
  return total;
}

}  // namespace jaxpp
