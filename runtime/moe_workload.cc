#include "runtime/moe_workload.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "graph/error.h"

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
                         const std::vector<int>& stage_to_actor, Backend& backend, double timeout_s,
                         Device& device)
    : config_(config),
      layout_(config),
      actor_(actor),
      replica_(replica),
      backend_(backend),
      timeout_s_(timeout_s),
      device_(device) {
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
  for (int s = 0; s < static_cast<int>(stage_to_actor.size()); ++s) {
    if (stage_to_actor[s] != actor) continue;
    StageState st;
    st.params = device_.upload(moe_initial_stage_params(config_, s));
    st.grads = device_.zeros(st.params.size());
    stages_.emplace(s, std::move(st));
  }
  device_.synchronize();
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

std::vector<double> MoeWorkload::params(int s) const { return device_.download(stage(s).params); }

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
  StageState& state = stage(s);
  // Packed on the host: the router and the held experts of every layer, two host all-reduces.
  std::vector<double> g = device_.download(state.grads);
  const int per_rank = config_.experts / config_.ep;
  const int first = ep_rank_ * per_rank;
  const size_t router_size = layout_.h * layout_.experts;
  const size_t expert_size = layout_.w1(0, first + per_rank) - layout_.w1(0, first);
  std::vector<double> router, experts;
  router.reserve(router_size * config_.layers_per_stage);
  experts.reserve(expert_size * config_.layers_per_stage);
  for (int l = 0; l < config_.layers_per_stage; ++l) {
    const double* at_router = g.data() + layout_.router(l);
    const double* at_experts = g.data() + layout_.w1(l, first);
    router.insert(router.end(), at_router, at_router + router_size);
    experts.insert(experts.end(), at_experts, at_experts + expert_size);
  }
  backend.allreduce_sum(router, timeout_s);
  backend.allreduce_sum_strided(experts, config_.ep, timeout_s);
  for (int l = 0; l < config_.layers_per_stage; ++l) {
    std::copy_n(router.begin() + static_cast<std::ptrdiff_t>(l * router_size), router_size,
                g.begin() + static_cast<std::ptrdiff_t>(layout_.router(l)));
    std::copy_n(experts.begin() + static_cast<std::ptrdiff_t>(l * expert_size), expert_size,
                g.begin() + static_cast<std::ptrdiff_t>(layout_.w1(l, first)));
  }
  state.grads = device_.upload(g);
  device_.synchronize();
  grad_reduce_bytes_ += static_cast<int64_t>((router.size() + experts.size()) * sizeof(double));
}

std::vector<std::vector<double>> MoeWorkload::exchange(std::vector<std::vector<double>> send) {
  return backend_.alltoallv(config_.ep, std::move(send), timeout_s_);
}

DeviceArray MoeWorkload::block_forward(const DeviceArray& w, int l, DeviceArray x, BlockStash& st) {
  const int T = config_.seq, K = config_.top_k, E = config_.experts, ep = config_.ep;
  const int H = config_.hidden, F = config_.ffn_size();
  const size_t h = layout_.h;
  // Router scores on the device; routing on the host.
  DeviceArray scores_on_device = device_.alloc(static_cast<size_t>(T) * E);
  device_.gemm(false, false, T, E, H, x.data(), H, w.data() + layout_.router(l), E, 0.0,
               scores_on_device.data(), E);
  const std::vector<double> scores = device_.download(scores_on_device);
  const std::vector<double> xh = device_.download(x);
  st.p.assign(static_cast<size_t>(T) * E, 0.0);
  st.chosen.assign(T, {});
  st.sent.assign(ep, {});
  std::vector<std::vector<double>> send(ep);
  for (int t = 0; t < T; ++t) {
    const double* xt = xh.data() + t * h;
    const double* score = scores.data() + static_cast<size_t>(t) * E;
    double* pt = st.p.data() + static_cast<size_t>(t) * E;
    if (config_.router == RouterScoring::kSigmoid) {
      for (int e = 0; e < E; ++e) pt[e] = 1.0 / (1.0 + std::exp(-score[e]));
    } else {
      const double top = *std::max_element(score, score + E);
      double z = 0;
      for (int e = 0; e < E; ++e) z += (pt[e] = std::exp(score[e] - top));
      for (int e = 0; e < E; ++e) pt[e] /= z;
    }
    st.chosen[t] = moe_top_k(score, E, K);
    if (config_.fault == MlpFault::kExpertSwap && replica_ == 0)
      st.chosen[t][0] = (st.chosen[t][0] + 1) % E;
    for (int k = 0; k < K; ++k) {
      const int e = st.chosen[t][k];
      const int owner = moe_expert_owner(config_, e);
      st.sent[owner].push_back({t, k});
      send[owner].push_back(static_cast<double>(e));
      send[owner].insert(send[owner].end(), xt, xt + h);
    }
  }
  // Holder: the rows this replica received, grouped by expert.
  std::vector<std::vector<double>> recv = exchange(std::move(send));
  std::vector<std::vector<std::pair<int, size_t>>> by_expert(E);
  st.received.assign(ep, 0);
  for (int i = 0; i < ep; ++i) {
    if (recv[i].size() % (h + 1) != 0)
      throw RuntimeFailure("MoE dispatch: " + std::to_string(recv[i].size()) +
                           " values from ep rank " + std::to_string(i) + " are not whole rows");
    st.received[i] = recv[i].size() / (h + 1);
    for (size_t row = 0; row < st.received[i]; ++row) {
      const int e = static_cast<int>(recv[i][row * (h + 1)]);
      if (e < 0 || e >= E || moe_expert_owner(config_, e) != ep_rank_)
        throw RuntimeFailure("MoE dispatch: expert " + std::to_string(e) +
                             " is not held by ep rank " + std::to_string(ep_rank_));
      by_expert[e].push_back({i, row});
    }
  }
  // Each expert on its stacked rows: u = x W1_e, a = GeLU(u), o = a W2_e.
  std::vector<std::vector<double>> reply(ep);
  for (int i = 0; i < ep; ++i) reply[i].assign(st.received[i] * h, 0.0);
  st.experts.clear();
  for (int e = 0; e < E; ++e) {
    if (by_expert[e].empty()) continue;
    ExpertRows r;
    r.expert = e;
    r.at = std::move(by_expert[e]);
    const int n = static_cast<int>(r.at.size());
    std::vector<double> rows(static_cast<size_t>(n) * h);
    for (int j = 0; j < n; ++j) {
      const auto [i, row] = r.at[j];
      const double* src = recv[i].data() + row * (h + 1) + 1;
      std::copy(src, src + h, rows.begin() + static_cast<std::ptrdiff_t>(j * h));
    }
    r.x = device_.upload(rows);
    r.u = device_.alloc(static_cast<size_t>(n) * F);
    r.a = device_.alloc(static_cast<size_t>(n) * F);
    device_.gemm(false, false, n, F, H, r.x.data(), H, w.data() + layout_.w1(l, e), F, 0.0,
                 r.u.data(), F);
    device_.gelu(r.u, r.a);
    DeviceArray o = device_.alloc(static_cast<size_t>(n) * h);
    device_.gemm(false, false, n, H, F, r.a.data(), F, w.data() + layout_.w2(l, e), H, 0.0,
                 o.data(), H);
    const std::vector<double> oh = device_.download(o);
    for (int j = 0; j < n; ++j) {
      const auto [i, row] = r.at[j];
      std::copy_n(oh.begin() + static_cast<std::ptrdiff_t>(j * h), h,
                  reply[i].begin() + static_cast<std::ptrdiff_t>(row * h));
    }
    st.experts.push_back(std::move(r));
  }
  std::vector<std::vector<double>> back = exchange(std::move(reply));
  // Source: combine on the host, y = x + sum of p_e E_e(x).
  st.out.assign(static_cast<size_t>(T) * K * h, 0.0);
  std::vector<double> y = xh;
  for (int j = 0; j < ep; ++j) {
    if (back[j].size() != st.sent[j].size() * h)
      throw RuntimeFailure("MoE combine: ep rank " + std::to_string(j) + " returned " +
                           std::to_string(back[j].size()) + " values for " +
                           std::to_string(st.sent[j].size()) + " rows");
    for (size_t n = 0; n < st.sent[j].size(); ++n) {
      const auto [t, k] = st.sent[j][n];
      const int e = st.chosen[t][k];
      const double gate = st.p[static_cast<size_t>(t) * E + e];
      double* out = st.out.data() + (static_cast<size_t>(t) * K + k) * h;
      for (size_t i = 0; i < h; ++i) {
        out[i] = back[j][n * h + i];
        y[t * h + i] += gate * out[i];
      }
    }
  }
  st.x = std::move(x);
  return device_.upload(y);
}

DeviceArray MoeWorkload::block_backward_input(const DeviceArray& w, int l,
                                              const DeviceArray& gy_on_device, BlockStash& st) {
  const int T = config_.seq, K = config_.top_k, E = config_.experts, ep = config_.ep;
  const int H = config_.hidden, F = config_.ffn_size();
  const size_t h = layout_.h;
  const std::vector<double> gy = device_.download(gy_on_device);
  // Router path: gate gradients and score gradients on the host.
  std::vector<double> dp(static_cast<size_t>(T) * E, 0.0);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) {
      const double* out = st.out.data() + (static_cast<size_t>(t) * K + k) * h;
      double dot = 0;
      for (size_t i = 0; i < h; ++i) dot += gy[t * h + i] * out[i];
      dp[static_cast<size_t>(t) * E + st.chosen[t][k]] += dot;
    }
  std::vector<double> ds(dp.size(), 0.0);
  for (int t = 0; t < T; ++t) {
    const double* pt = st.p.data() + static_cast<size_t>(t) * E;
    const double* dpt = dp.data() + static_cast<size_t>(t) * E;
    double* dst = ds.data() + static_cast<size_t>(t) * E;
    if (config_.router == RouterScoring::kSigmoid) {
      for (int e = 0; e < E; ++e) dst[e] = dpt[e] * pt[e] * (1 - pt[e]);
    } else {
      double mean = 0;
      for (int e = 0; e < E; ++e) mean += pt[e] * dpt[e];
      for (int e = 0; e < E; ++e) dst[e] = pt[e] * (dpt[e] - mean);
    }
  }
  st.ds = device_.upload(ds);
  // dx = gy + ds Wr^T on the device.
  DeviceArray dx = device_.copy(gy_on_device);
  device_.gemm(false, true, T, H, E, st.ds.data(), E, w.data() + layout_.router(l), E, 1.0,
               dx.data(), H);
  // Expert path: gated output gradients to the holders, input gradients back.
  std::vector<std::vector<double>> send(ep);
  for (int j = 0; j < ep; ++j)
    for (const auto& [t, k] : st.sent[j]) {
      const double gate = st.p[static_cast<size_t>(t) * E + st.chosen[t][k]];
      for (size_t i = 0; i < h; ++i) send[j].push_back(gate * gy[t * h + i]);
    }
  std::vector<std::vector<double>> recv = exchange(std::move(send));
  std::vector<std::vector<double>> reply(ep);
  for (int i = 0; i < ep; ++i) {
    if (recv[i].size() != st.received[i] * h)
      throw RuntimeFailure("MoE backward dispatch: " + std::to_string(recv[i].size()) +
                           " values from ep rank " + std::to_string(i) + " for " +
                           std::to_string(st.received[i]) + " rows");
    reply[i].assign(st.received[i] * h, 0.0);
  }
  // Each expert: da = gy W2_e^T, du = da * GeLU'(u), dx_e = du W1_e^T.
  for (ExpertRows& r : st.experts) {
    const int n = static_cast<int>(r.at.size());
    std::vector<double> rows(static_cast<size_t>(n) * h);
    for (int j = 0; j < n; ++j) {
      const auto [i, row] = r.at[j];
      std::copy_n(recv[i].begin() + static_cast<std::ptrdiff_t>(row * h), h,
                  rows.begin() + static_cast<std::ptrdiff_t>(j * h));
    }
    r.gy = device_.upload(rows);
    DeviceArray da = device_.alloc(static_cast<size_t>(n) * F);
    device_.gemm(false, true, n, F, H, r.gy.data(), H, w.data() + layout_.w2(l, r.expert), H, 0.0,
                 da.data(), F);
    r.du = device_.alloc(static_cast<size_t>(n) * F);
    device_.gelu_backward(da, r.u, r.du);
    r.u.reset();  // its last use
    DeviceArray dx_rows = device_.alloc(static_cast<size_t>(n) * h);
    device_.gemm(false, true, n, H, F, r.du.data(), F, w.data() + layout_.w1(l, r.expert), F, 0.0,
                 dx_rows.data(), H);
    const std::vector<double> dxh = device_.download(dx_rows);
    for (int j = 0; j < n; ++j) {
      const auto [i, row] = r.at[j];
      std::copy_n(dxh.begin() + static_cast<std::ptrdiff_t>(j * h), h,
                  reply[i].begin() + static_cast<std::ptrdiff_t>(row * h));
    }
  }
  std::vector<std::vector<double>> back = exchange(std::move(reply));
  // Source: add the experts' input gradients on the host.
  std::vector<double> dxh = device_.download(dx);
  for (int j = 0; j < ep; ++j) {
    if (back[j].size() != st.sent[j].size() * h)
      throw RuntimeFailure("MoE backward combine: ep rank " + std::to_string(j) + " returned " +
                           std::to_string(back[j].size()) + " values for " +
                           std::to_string(st.sent[j].size()) + " rows");
    for (size_t n = 0; n < st.sent[j].size(); ++n) {
      const int t = st.sent[j][n].first;
      for (size_t i = 0; i < h; ++i) dxh[t * h + i] += back[j][n * h + i];
    }
  }
  st.has_input_grad = true;
  return device_.upload(dxh);
}

void MoeWorkload::block_backward_weights(DeviceArray& g, int l, BlockStash& st) {
  const int T = config_.seq, E = config_.experts;
  const int H = config_.hidden, F = config_.ffn_size();
  // dWr += x^T ds.
  device_.gemm(true, false, H, E, T, st.x.data(), H, st.ds.data(), E, 1.0,
               g.data() + layout_.router(l), E);
  for (const ExpertRows& r : st.experts) {
    const int n = static_cast<int>(r.at.size());
    // dW2_e += a^T gy, dW1_e += x^T du over the expert's rows.
    device_.gemm(true, false, F, H, n, r.a.data(), F, r.gy.data(), H, 1.0,
                 g.data() + layout_.w2(l, r.expert), H);
    device_.gemm(true, false, H, F, n, r.x.data(), H, r.du.data(), F, 1.0,
                 g.data() + layout_.w1(l, r.expert), F);
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
  device_.synchronize();
}

void MoeWorkload::forward(int s, int mb, int step) {
  // A fixed data set: the same batches every step.
  DeviceArray x = s == 0 ? device_.upload(mlp_input(config_, replica_, mb))
                         : take_tensor(activation_, {s, mb}, "activation", actor_);
  const DeviceArray& w = stage(s).params;
  std::vector<BlockStash>& blocks = stash_[{s, mb}];
  blocks.clear();
  blocks.resize(config_.layers_per_stage);
  for (int l = 0; l < config_.layers_per_stage; ++l)
    x = block_forward(w, l, std::move(x), blocks[l]);
  if (s == config_.num_stages - 1) {
    const DeviceArray target = device_.upload(mlp_target(config_, replica_, mb));
    const double n = static_cast<double>(x.size());
    const double scale =
        2.0 / n / (static_cast<double>(config_.num_microbatches) * config_.num_replicas);
    DeviceArray dy = device_.alloc(x.size());
    losses_[step][mb] = device_.mse_loss(x, target, scale, dy);
    gradient_[{s, mb}] = std::move(dy);
  } else {
    activation_[{s + 1, mb}] = std::move(x);
  }
}

void MoeWorkload::backward_input(int s, int mb, bool also_weights) {
  DeviceArray gy = take_tensor(gradient_, {s, mb}, "gradient", actor_);
  auto it = stash_.find({s, mb});
  if (it == stash_.end())
    throw RuntimeFailure("actor " + std::to_string(actor_) + ": backward of stage " +
                         std::to_string(s) + " microbatch " + std::to_string(mb) +
                         " before its forward");
  const DeviceArray& w = stage(s).params;
  for (int l = config_.layers_per_stage - 1; l >= 0; --l)
    gy = block_backward_input(w, l, gy, it->second[l]);
  if (s > 0) gradient_[{s - 1, mb}] = std::move(gy);
  if (also_weights) backward_weights(s, mb);
}

void MoeWorkload::backward_weights(int s, int mb) {
  auto it = stash_.find({s, mb});
  if (it == stash_.end() || it->second.empty() || !it->second[0].has_input_grad)
    throw RuntimeFailure("actor " + std::to_string(actor_) + ": W of stage " + std::to_string(s) +
                         " microbatch " + std::to_string(mb) + " before its I");
  DeviceArray& grads = stage(s).grads;
  if (config_.fault == MlpFault::kSkipAccumulate && replica_ == 0) device_.fill_zero(grads);
  for (int l = config_.layers_per_stage - 1; l >= 0; --l)
    block_backward_weights(grads, l, it->second[l]);
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
  if (!tensor.on_host() && tensor.device() != &device_)
    throw std::logic_error("MoeWorkload::put_input: tensor of another device");
  if (tensor.on_host() && device_.space() != MemorySpace::kHost)
    tensor = device_.upload(std::span<const double>(tensor.data(), tensor.size()));
  if (producer.kind == TaskKind::kF)
    activation_[{producer.stage + 1, producer.microbatch}] = std::move(tensor);
  else
    gradient_[{producer.stage - 1, producer.microbatch}] = std::move(tensor);
}

DeviceArray& MoeWorkload::grad_buffer(int s) { return stage(s).grads; }

void MoeWorkload::optimizer_step(int s, int step) {
  StageState& st = stage(s);
  const bool faulty_step = replica_ == 0 && step == 0;
  if (faulty_step && config_.fault == MlpFault::kCorruptGrad && s == config_.num_stages - 1) {
    std::vector<double> g = device_.download(st.grads);
    g.at(0) += 1e-6;
    st.grads = device_.upload(g);
  }
  const bool stale = faulty_step && config_.fault == MlpFault::kStaleWeight && s == 0;
  if (config_.optimizer == OptimizerKind::kAdam && st.adam_m.empty()) {
    st.adam_m = device_.zeros(st.params.size());
    st.adam_v = device_.zeros(st.params.size());
  }
  // The whole buffer: the slots of experts held elsewhere have zero gradients and moments, which
  // leave them unchanged (moe_workload.h).
  if (!stale) {
    if (config_.optimizer == OptimizerKind::kSgd) {
      device_.sgd_step(st.params, st.grads, config_.lr());
    } else {
      AdamStep a;
      a.lr = config_.lr();
      a.beta1 = kMoeAdamBeta1;
      a.beta2 = kMoeAdamBeta2;
      a.eps = kMoeAdamEps;
      a.bias_correction1 = 1 - std::pow(kMoeAdamBeta1, step + 1);
      a.bias_correction2 = 1 - std::pow(kMoeAdamBeta2, step + 1);
      device_.adam_step(st.params, st.grads, st.adam_m, st.adam_v, a);
    }
  }
  device_.fill_zero(st.grads);
  device_.synchronize();
}

int64_t MoeWorkload::bytes_held() const {
  int64_t total = 0;
  for (const auto& [s, st] : stages_)
    total += st.params.bytes() + st.grads.bytes() + st.adam_m.bytes() + st.adam_v.bytes();
  for (const auto& [key, blocks] : stash_)
    for (const BlockStash& b : blocks) {
      total += b.x.bytes() + b.ds.bytes();
      total += static_cast<int64_t>((b.p.size() + b.out.size()) * sizeof(double));
      for (const ExpertRows& r : b.experts)
        total += r.x.bytes() + r.u.bytes() + r.a.bytes() + r.gy.bytes() + r.du.bytes();
    }
  for (const auto& [k, v] : activation_) total += v.bytes();
  for (const auto& [k, v] : gradient_) total += v.bytes();
  return total;
}

}  // namespace jaxpp
