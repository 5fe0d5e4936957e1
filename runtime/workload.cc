#include "runtime/workload.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "graph/error.h"
#include "runtime/backend.h"

namespace jaxpp {

void Workload::reduce_gradients(int stage, Backend& backend, double timeout_s) {
  backend.allreduce_tensor(grad_buffer(stage), timeout_s);
}

namespace {

constexpr double kAdamBeta1 = 0.9;
constexpr double kAdamBeta2 = 0.999;
constexpr double kAdamEps = 1e-8;
constexpr uint64_t kSaltInput = 0x1111;
constexpr uint64_t kSaltTarget = 0x2222;
constexpr uint64_t kSaltWeight = 0x3333;
constexpr uint64_t kSaltRouter = 0x4444;

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

// A fixed data set: the same batches every step.
std::vector<double> input_of(const MlpConfig& c, int step, int replica, int mb) {
  (void)step;
  return mlp_input(c, replica, mb);
}

std::vector<double> target_of(const MlpConfig& c, int step, int replica, int mb) {
  (void)step;
  return mlp_target(c, replica, mb);
}

// The numerics of one stage on a Device, shared by MlpWorkload and run_reference so both compute
// exactly the same arithmetic.
struct StageMath {
  const MlpConfig& c;
  Device& dev;
  int h() const { return c.hidden; }
  int f() const { return c.ffn_size(); }
  int t() const { return c.seq; }
  size_t w1_offset(int l) const { return static_cast<size_t>(l) * 2 * h() * f(); }
  size_t w2_offset(int l) const { return w1_offset(l) + static_cast<size_t>(h()) * f(); }
  size_t tf() const { return static_cast<size_t>(t()) * f(); }

  // x: stage input; fills stash x/u/a; returns the output.
  DeviceArray forward(const DeviceArray& params, DeviceArray x, std::vector<DeviceArray>& xs,
                      std::vector<DeviceArray>& us, std::vector<DeviceArray>& as) const {
    int L = c.layers_per_stage;
    xs.clear();
    us.clear();
    as.clear();
    xs.resize(L);
    us.resize(L);
    as.resize(L);
    for (int l = 0; l < L; ++l) {
      DeviceArray u = dev.alloc(tf());
      dev.gemm(false, false, t(), f(), h(), x.data(), h(), params.data() + w1_offset(l), f(), 0.0,
               u.data(), f());
      DeviceArray a = dev.alloc(u.size());
      dev.gelu(u, a);
      DeviceArray y = dev.copy(x);  // residual
      dev.gemm(false, false, t(), h(), f(), a.data(), f(), params.data() + w2_offset(l), h(), 1.0,
               y.data(), h());
      xs[l] = std::move(x);
      us[l] = std::move(u);
      as[l] = std::move(a);
      x = std::move(y);
    }
    return x;
  }

  // Input gradient of layer l: returns dx, sets du.
  DeviceArray backward_input_layer(const DeviceArray& params, int l, const DeviceArray& dy,
                                   const DeviceArray& u, DeviceArray& du) const {
    DeviceArray da = dev.alloc(tf());
    dev.gemm(false, true, t(), f(), h(), dy.data(), h(), params.data() + w2_offset(l), h(), 0.0,
             da.data(), f());
    du = dev.alloc(da.size());
    dev.gelu_backward(da, u, du);
    DeviceArray dx = dev.copy(dy);  // residual
    dev.gemm(false, true, t(), h(), f(), du.data(), f(), params.data() + w1_offset(l), f(), 1.0,
             dx.data(), h());
    return dx;
  }

  // Adds layer l's weight gradients to `grads` (overwrites them when !accumulate: a fault).
  void backward_weight_layer(DeviceArray& grads, int l, const DeviceArray& x, const DeviceArray& a,
                             const DeviceArray& dy, const DeviceArray& du,
                             bool accumulate = true) const {
    const double beta = accumulate ? 1.0 : 0.0;
    dev.gemm(true, false, f(), h(), t(), a.data(), f(), dy.data(), h(), beta,
             grads.data() + w2_offset(l), h());
    dev.gemm(true, false, h(), f(), t(), x.data(), h(), du.data(), f(), beta,
             grads.data() + w1_offset(l), f());
  }

  // Loss of one microbatch and dL/dy.
  double loss(const DeviceArray& y, const DeviceArray& target, DeviceArray& dy) const {
    double n = static_cast<double>(y.size());
    double scale = 2.0 / n / (static_cast<double>(c.num_microbatches) * c.num_replicas);
    dy = dev.alloc(y.size());
    return dev.mse_loss(y, target, scale, dy);
  }

  void optimizer(DeviceArray& p, DeviceArray& g, DeviceArray& m, DeviceArray& v, int step) const {
    double lr = c.lr();
    if (c.optimizer == OptimizerKind::kSgd) {
      dev.sgd_step(p, g, lr);
    } else {
      if (m.empty()) m = dev.zeros(p.size());
      if (v.empty()) v = dev.zeros(p.size());
      AdamStep s;
      s.lr = lr;
      s.beta1 = kAdamBeta1;
      s.beta2 = kAdamBeta2;
      s.eps = kAdamEps;
      s.bias_correction1 = 1 - std::pow(kAdamBeta1, step + 1);
      s.bias_correction2 = 1 - std::pow(kAdamBeta2, step + 1);
      dev.adam_step(p, g, m, v, s);
    }
    dev.fill_zero(g);
  }
};

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

std::string_view to_string(MlpFault f) {
  switch (f) {
    case MlpFault::kNone:
      return "none";
    case MlpFault::kCorruptGrad:
      return "corrupt-grad";
    case MlpFault::kSkipAccumulate:
      return "skip-accumulate";
    case MlpFault::kStaleWeight:
      return "stale-weight";
    case MlpFault::kExpertSwap:
      return "expert-swap";
  }
  return "?";
}

std::string_view to_string(RouterScoring r) {
  return r == RouterScoring::kSigmoid ? "sigmoid" : "softmax";
}

MlpFault parse_mlp_fault(std::string_view s, const std::string& where) {
  for (MlpFault f : kAllMlpFaults)
    if (to_string(f) == s) return f;
  throw_input_error(
      where, "expected none, corrupt-grad, skip-accumulate, stale-weight or expert-swap, got '" +
                 std::string(s) + "'");
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
  if (moe())
    return (int64_t{hidden} * experts + 2LL * experts * hidden * ffn_size()) * layers_per_stage;
  return 2LL * hidden * ffn_size() * layers_per_stage;
}

int64_t MlpConfig::reduced_params_per_stage() const {
  if (!moe()) return params_per_stage();
  const int64_t held = experts / std::max(1, ep);
  return (int64_t{hidden} * experts + 2LL * held * hidden * ffn_size()) * layers_per_stage;
}

double mlp_memory_estimate_bytes(const MlpConfig& c, int stages) {
  const double h = c.hidden, f = c.ffn > 0 ? c.ffn : 4.0 * c.hidden;
  const double params = static_cast<double>(c.params_per_stage());
  const double state = params * 8 * (c.optimizer == OptimizerKind::kAdam ? 4 : 2);
  const double stash = std::max(1, c.num_microbatches) * static_cast<double>(c.layers_per_stage) *
                       c.seq * (h + 2 * f) * 8;
  return std::max(1, stages) * (state + stash);
}

namespace {

// The scale of a block's output weights (w2). Every block adds its output to the residual stream,
// so the stream's variance grows with depth; past kShallowStack blocks w2 shrinks by
// sqrt(kShallowStack / blocks) (GPT-2's 1/sqrt(depth) rule for residual projections), so that a
// deep stack (--pp 48, or 100 blocks) starts at the activations and learns at the rate of a
// shallow one instead of overflowing to inf/NaN. Stacks of up to kShallowStack blocks keep the
// plain 1/sqrt(ffn).
double output_weight_scale(const MlpConfig& c) {
  constexpr double kShallowStack = 8;
  const double blocks = static_cast<double>(c.layers_per_stage) * std::max(1, c.num_stages);
  return std::min(1.0, std::sqrt(kShallowStack / blocks)) / std::sqrt(c.ffn_size());
}

}  // namespace

std::vector<double> initial_stage_params(const MlpConfig& c, int stage) {
  if (c.moe()) return moe_initial_stage_params(c, stage);
  std::vector<double> p;
  p.reserve(static_cast<size_t>(c.params_per_stage()));
  size_t hf = static_cast<size_t>(c.hidden) * c.ffn_size();
  for (int l = 0; l < c.layers_per_stage; ++l) {
    uint64_t key = mix(mix(mix(c.seed, kSaltWeight), stage), l);
    std::vector<double> w1 = uniform(key, hf, 1.0 / std::sqrt(c.hidden));
    std::vector<double> w2 = uniform(mix(key, 2), hf, output_weight_scale(c));
    p.insert(p.end(), w1.begin(), w1.end());
    p.insert(p.end(), w2.begin(), w2.end());
  }
  return p;
}

std::vector<double> mlp_input(const MlpConfig& c, int replica, int mb) {
  uint64_t key = mix(mix(mix(c.seed, kSaltInput), replica), mb);
  return uniform(key, static_cast<size_t>(c.seq) * c.hidden, 1.0);
}

std::vector<double> mlp_target(const MlpConfig& c, int replica, int mb) {
  uint64_t key = mix(mix(mix(c.seed, kSaltTarget), replica), mb);
  return uniform(key, static_cast<size_t>(c.seq) * c.hidden, 1.0);
}

std::vector<double> moe_initial_stage_params(const MlpConfig& c, int stage) {
  std::vector<double> p;
  p.reserve(static_cast<size_t>(c.params_per_stage()));
  const size_t hf = static_cast<size_t>(c.hidden) * c.ffn_size();
  for (int l = 0; l < c.layers_per_stage; ++l) {
    const uint64_t key = mix(mix(mix(c.seed, kSaltRouter), stage), l);
    const std::vector<double> router =
        uniform(key, static_cast<size_t>(c.hidden) * c.experts, 1.0 / std::sqrt(c.hidden));
    p.insert(p.end(), router.begin(), router.end());
    for (int e = 0; e < c.experts; ++e) {
      const uint64_t ekey = mix(mix(mix(mix(c.seed, kSaltWeight), stage), l), 1000 + e);
      const std::vector<double> w1 = uniform(ekey, hf, 1.0 / std::sqrt(c.hidden));
      const std::vector<double> w2 = uniform(mix(ekey, 2), hf, output_weight_scale(c));
      p.insert(p.end(), w1.begin(), w1.end());
      p.insert(p.end(), w2.begin(), w2.end());
    }
  }
  return p;
}

std::string describe_stage_param(const MlpConfig& c, size_t index) {
  if (c.moe()) {
    const size_t h = static_cast<size_t>(c.hidden), f = static_cast<size_t>(c.ffn_size());
    const size_t E = static_cast<size_t>(c.experts);
    const size_t per_layer = h * E + E * 2 * h * f;
    const size_t layer = index / per_layer;
    size_t rest = index % per_layer;
    const std::string at = "layer " + std::to_string(layer);
    if (rest < h * E)
      return at + " router[" + std::to_string(rest / E) + "," + std::to_string(rest % E) + "]";
    rest -= h * E;
    const size_t e = rest / (2 * h * f);
    rest %= 2 * h * f;
    const bool w2 = rest >= h * f;
    const size_t i = w2 ? rest - h * f : rest, cols = w2 ? h : f;
    return at + " expert " + std::to_string(e) + (w2 ? " W2[" : " W1[") + std::to_string(i / cols) +
           "," + std::to_string(i % cols) + "]";
  }
  const size_t h = static_cast<size_t>(c.hidden), f = static_cast<size_t>(c.ffn_size());
  const size_t layer = index / (2 * h * f), rest = index % (2 * h * f);
  const bool w2 = rest >= h * f;
  const size_t i = w2 ? rest - h * f : rest, cols = w2 ? h : f;
  return "layer " + std::to_string(layer) + (w2 ? " W2[" : " W1[") + std::to_string(i / cols) +
         "," + std::to_string(i % cols) + "]";
}

MlpWorkload::MlpWorkload(const MlpConfig& config, int actor, int replica,
                         const std::vector<int>& stage_to_actor, Device& device)
    : config_(config), actor_(actor), replica_(replica), device_(device) {
  for (int s = 0; s < static_cast<int>(stage_to_actor.size()); ++s) {
    if (stage_to_actor[s] != actor) continue;
    StageState st;
    st.params = device_.upload(initial_stage_params(config_, s));
    st.grads = device_.zeros(st.params.size());
    stages_.emplace(s, std::move(st));
  }
  device_.synchronize();
}

const MlpWorkload::StageState& MlpWorkload::stage(int s) const {
  auto it = stages_.find(s);
  if (it == stages_.end())
    throw std::logic_error("MlpWorkload: actor " + std::to_string(actor_) +
                           " does not hold stage " + std::to_string(s));
  return it->second;
}

MlpWorkload::StageState& MlpWorkload::stage(int s) {
  return const_cast<StageState&>(std::as_const(*this).stage(s));
}

std::vector<double> MlpWorkload::params(int s) const { return device_.download(stage(s).params); }

void MlpWorkload::gather_parameters(int s, Backend& backend, double timeout_s) {
  const int replicas = backend.num_replicas();
  if (replicas <= 1) return;
  std::vector<double> shard = params(s);
  const size_t n = shard.size();
  const size_t i = static_cast<size_t>(backend.replica());
  const size_t lo = n * i / static_cast<size_t>(replicas);
  const size_t hi = n * (i + 1) / static_cast<size_t>(replicas);
  for (size_t k = 0; k < n; ++k)
    if (k < lo || k >= hi) shard[k] = 0;
  DeviceArray gathered = device_.upload(shard);
  backend.allreduce_tensor(gathered, timeout_s);
  stage(s).params = std::move(gathered);
  device_.synchronize();
}

void MlpWorkload::set_params(int s, std::span<const double> weights) {
  StageState& st = stage(s);
  if (weights.size() != st.params.size())
    throw std::logic_error("MlpWorkload::set_params: stage " + std::to_string(s) + " has " +
                           std::to_string(st.params.size()) + " weights, got " +
                           std::to_string(weights.size()));
  st.params = device_.upload(weights);
  device_.synchronize();
}

std::span<double> MlpWorkload::grads(int s) {
  DeviceArray& g = stage(s).grads;
  if (!g.on_host())
    throw std::logic_error("MlpWorkload::grads: the gradients live in " +
                           std::string(to_string(device_.space())) + " memory");
  return std::span<double>(g.data(), g.size());
}

void MlpWorkload::run_task(const TaskRef& task, int step) {
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

static DeviceArray take(std::map<std::pair<int, int>, DeviceArray>& map,
                        const std::pair<int, int>& key, const char* what, int actor) {
  auto it = map.find(key);
  if (it == map.end())
    throw RuntimeFailure(std::string("actor ") + std::to_string(actor) + ": missing " + what +
                         " of stage " + std::to_string(key.first) + " microbatch " +
                         std::to_string(key.second));
  DeviceArray v = std::move(it->second);
  map.erase(it);
  return v;
}

void MlpWorkload::forward(int s, int mb, int step) {
  StageMath math{config_, device_};
  DeviceArray x = s == 0 ? device_.upload(input_of(config_, step, replica_, mb))
                         : take(activation_, {s - 1, mb}, "activation", actor_);
  Stash& st = stash_[{s, mb}];
  DeviceArray y = math.forward(stage(s).params, std::move(x), st.x, st.u, st.a);
  if (s == config_.num_stages - 1) {
    DeviceArray dy;
    DeviceArray target = device_.upload(target_of(config_, step, replica_, mb));
    losses_[step][mb] = math.loss(y, target, dy);
    gradient_[{s, mb}] = std::move(dy);
  } else {
    activation_[{s, mb}] = std::move(y);
  }
}

void MlpWorkload::backward_input(int s, int mb, bool also_weights) {
  StageMath math{config_, device_};
  StageState& state = stage(s);
  DeviceArray dy = take(gradient_, {s, mb}, "gradient", actor_);
  auto it = stash_.find({s, mb});
  if (it == stash_.end())
    throw RuntimeFailure("actor " + std::to_string(actor_) + ": backward of stage " +
                         std::to_string(s) + " microbatch " + std::to_string(mb) +
                         " before its forward");
  Stash& st = it->second;
  int L = config_.layers_per_stage;
  st.dy.clear();
  st.du.clear();
  st.dy.resize(L);
  st.du.resize(L);
  for (int l = L - 1; l >= 0; --l) {
    DeviceArray du;
    DeviceArray dx = math.backward_input_layer(state.params, l, dy, st.u[l], du);
    st.u[l].reset();
    if (also_weights) {
      math.backward_weight_layer(state.grads, l, st.x[l], st.a[l], dy, du, accumulate());
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
  StageMath math{config_, device_};
  StageState& state = stage(s);
  auto it = stash_.find({s, mb});
  if (it == stash_.end() || it->second.dy.empty())
    throw RuntimeFailure("actor " + std::to_string(actor_) + ": W of stage " + std::to_string(s) +
                         " microbatch " + std::to_string(mb) + " before its I");
  Stash& st = it->second;
  for (int l = config_.layers_per_stage - 1; l >= 0; --l)
    math.backward_weight_layer(state.grads, l, st.x[l], st.a[l], st.dy[l], st.du[l], accumulate());
  stash_.erase(it);
}

DeviceArray MlpWorkload::take_output(const TaskRef& producer, int step) {
  (void)step;
  if (producer.kind == TaskKind::kF)
    return take(activation_, {producer.stage, producer.microbatch}, "activation", actor_);
  return take(gradient_, {producer.stage - 1, producer.microbatch}, "input gradient", actor_);
}

void MlpWorkload::put_input(const TaskRef& producer, int step, DeviceArray tensor) {
  (void)step;
  size_t expected = static_cast<size_t>(config_.seq) * config_.hidden;
  if (tensor.size() != expected)
    throw RuntimeFailure("actor " + std::to_string(actor_) + ": received " +
                         std::to_string(tensor.size()) + " values for " + to_string(producer) +
                         ", expected " + std::to_string(expected));
  if (!tensor.on_host() && tensor.device() != &device_)
    throw std::logic_error("MlpWorkload::put_input: tensor of another device");
  if (tensor.on_host() && device_.space() != MemorySpace::kHost)
    tensor = device_.upload(std::span<const double>(tensor.data(), tensor.size()));
  if (producer.kind == TaskKind::kF)
    activation_[{producer.stage, producer.microbatch}] = std::move(tensor);
  else
    gradient_[{producer.stage - 1, producer.microbatch}] = std::move(tensor);
}

DeviceArray& MlpWorkload::grad_buffer(int s) { return stage(s).grads; }

bool MlpWorkload::accumulate() const {
  return !(replica_ == 0 && config_.fault == MlpFault::kSkipAccumulate);
}

void MlpWorkload::optimizer_step(int s, int step) {
  StageState& st = stage(s);
  const bool faulty_step = replica_ == 0 && step == 0;
  if (faulty_step && config_.fault == MlpFault::kCorruptGrad && s == config_.num_stages - 1) {
    std::vector<double> g = device_.download(st.grads);
    g.at(0) += 1e-6;
    st.grads = device_.upload(g);
  }
  if (faulty_step && config_.fault == MlpFault::kStaleWeight && s == 0) {
    DeviceArray kept = device_.copy(st.params);
    StageMath{config_, device_}.optimizer(st.params, st.grads, st.adam_m, st.adam_v, step);
    st.params = std::move(kept);
  } else {
    StageMath{config_, device_}.optimizer(st.params, st.grads, st.adam_m, st.adam_v, step);
  }
  device_.synchronize();
}

int64_t MlpWorkload::bytes_held() const {
  int64_t total = 0;
  for (const auto& [s, st] : stages_)
    total += st.params.bytes() + st.grads.bytes() + st.adam_m.bytes() + st.adam_v.bytes();
  for (const auto& [k, st] : stash_)
    for (const auto* group : {&st.x, &st.u, &st.a, &st.dy, &st.du})
      for (const auto& v : *group) total += v.bytes();
  for (const auto& [k, v] : activation_) total += v.bytes();
  for (const auto& [k, v] : gradient_) total += v.bytes();
  return total;
}

ReferenceResult run_reference(const MlpConfig& c, int num_steps,
                              const std::vector<std::vector<int>>& weight_gradient_order) {
  HostDevice& dev = host_device();
  StageMath math{c, dev};
  const int S = c.num_stages, L = c.layers_per_stage, M = c.num_microbatches;
  std::vector<std::vector<int>> order = weight_gradient_order;
  order.resize(S);
  for (std::vector<int>& o : order) {
    if (!o.empty()) continue;
    for (int mb = 0; mb < M; ++mb) o.push_back(mb);
  }
  std::vector<DeviceArray> params(S), m(S), v(S);
  for (int s = 0; s < S; ++s) params[s] = dev.upload(initial_stage_params(c, s));
  ReferenceResult result;
  for (int step = 0; step < num_steps; ++step) {
    std::vector<DeviceArray> total(S);
    for (int s = 0; s < S; ++s) total[s] = dev.zeros(params[0].size());
    double loss_sum = 0;
    for (int r = 0; r < c.num_replicas; ++r) {
      // stash[mb][s]: what the weight gradients of stage s need, per layer.
      struct WeightStash {
        std::vector<DeviceArray> x, a, dy, du;
      };
      std::vector<std::vector<WeightStash>> stash(M);
      for (auto& per_stage : stash) per_stage.resize(S);
      for (int mb = 0; mb < M; ++mb) {
        std::vector<std::vector<DeviceArray>> us(S);
        DeviceArray x = dev.upload(input_of(c, step, r, mb));
        for (int s = 0; s < S; ++s)
          x = math.forward(params[s], std::move(x), stash[mb][s].x, us[s], stash[mb][s].a);
        DeviceArray dy;
        DeviceArray target = dev.upload(target_of(c, step, r, mb));
        loss_sum += math.loss(x, target, dy);
        for (int s = S - 1; s >= 0; --s) {
          WeightStash& st = stash[mb][s];
          st.dy.resize(L);
          st.du.resize(L);
          for (int l = L - 1; l >= 0; --l) {
            DeviceArray dx = math.backward_input_layer(params[s], l, dy, us[s][l], st.du[l]);
            st.dy[l] = std::move(dy);
            dy = std::move(dx);
          }
        }
      }
      std::vector<DeviceArray> grads(S);
      for (int s = 0; s < S; ++s) {
        grads[s] = dev.zeros(params[0].size());
        for (int mb : order[s]) {
          const WeightStash& st = stash.at(mb)[s];
          for (int l = L - 1; l >= 0; --l)
            math.backward_weight_layer(grads[s], l, st.x[l], st.a[l], st.dy[l], st.du[l]);
        }
      }
      for (int s = 0; s < S; ++s)
        for (size_t i = 0; i < total[s].size(); ++i) total[s].data()[i] += grads[s].data()[i];
    }
    for (int s = 0; s < S; ++s) math.optimizer(params[s], total[s], m[s], v[s], step);
    result.losses.push_back(loss_sum / (static_cast<double>(M) * c.num_replicas));
  }
  for (int s = 0; s < S; ++s) result.stage_params.push_back(dev.download(params[s]));
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
    case OpKind::kAllGather:
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
