#include "costmodel/calibration.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "graph/error.h"

namespace jaxpp {
namespace {

// Solves the square system a·x = b in place (Gaussian elimination, partial pivoting). False when
// the matrix is singular relative to its scale.
bool solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x) {
  const size_t n = b.size();
  double scale = 0;
  for (const auto& row : a)
    for (double v : row) scale = std::max(scale, std::abs(v));
  if (!(scale > 0)) return false;
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r)
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    if (std::abs(a[pivot][col]) <= 1e-12 * scale) return false;
    std::swap(a[pivot], a[col]);
    std::swap(b[pivot], b[col]);
    for (size_t r = col + 1; r < n; ++r) {
      double f = a[r][col] / a[col][col];
      for (size_t c = col; c < n; ++c) a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  x.assign(n, 0);
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t c = i + 1; c < n; ++c) s -= a[i][c] * x[c];
    x[i] = s / a[i][i];
  }
  return true;
}

// Columns are scaled to unit norm before solving so that regressors of very different magnitudes
// (1 and 1e9 FLOPs) do not make the normal equations look singular.
bool weighted_solve(const std::vector<std::vector<double>>& rows, std::span<const double> y,
                    const std::vector<size_t>& active, std::vector<double>& coef) {
  const size_t p = active.size();
  std::vector<double> norm(p, 0);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < p; ++j) {
      double v = rows[i][active[j]] / y[i];
      norm[j] += v * v;
    }
  for (double& v : norm) v = v > 0 ? std::sqrt(v) : 1;
  std::vector<std::vector<double>> ata(p, std::vector<double>(p, 0));
  std::vector<double> atb(p, 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const double w = 1.0 / y[i];
    for (size_t j = 0; j < p; ++j) {
      const double aj = rows[i][active[j]] * w / norm[j];
      atb[j] += aj * y[i] * w;
      for (size_t k = 0; k < p; ++k) ata[j][k] += aj * rows[i][active[k]] * w / norm[k];
    }
  }
  std::vector<double> x;
  if (!solve(ata, atb, x)) return false;
  coef.assign(rows.empty() ? 0 : rows[0].size(), 0);
  for (size_t j = 0; j < p; ++j) coef[active[j]] = x[j] / norm[j];
  return true;
}

// Fitted values and residuals of every point; the rms and max over the points not rejected.
void fill_residuals(const std::vector<std::vector<double>>& rows, std::span<const double> y,
                    LinearFit& fit) {
  fit.fitted.assign(y.size(), 0);
  fit.residuals.assign(y.size(), 0);
  double sum_sq = 0;
  size_t counted = 0;
  fit.max_abs_residual = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    double f = 0;
    for (size_t j = 0; j < fit.coefficients.size(); ++j) f += fit.coefficients[j] * rows[i][j];
    fit.fitted[i] = f;
    const double r = (y[i] - f) / (f > 0 ? f : y[i]);
    fit.residuals[i] = r;
    if (fit.is_rejected(i)) continue;
    sum_sq += r * r;
    ++counted;
    fit.max_abs_residual = std::max(fit.max_abs_residual, std::abs(r));
  }
  fit.rms_residual = counted == 0 ? 0 : std::sqrt(sum_sq / static_cast<double>(counted));
}

void check_points(size_t x_size, size_t y_size, size_t min_points, const std::string& what) {
  if (x_size != y_size)
    throw_input_error(what,
                      std::to_string(x_size) + " sizes but " + std::to_string(y_size) + " times");
  if (y_size < min_points)
    throw_input_error(what, "needs at least " + std::to_string(min_points) +
                                " measured points, got " + std::to_string(y_size));
}

nlohmann::json fit_json(const LinearFit& fit) {
  nlohmann::json j = {{"residuals", fit.residuals},
                      {"rms_residual", fit.rms_residual},
                      {"max_abs_residual", fit.max_abs_residual}};
  std::vector<size_t> rejected;
  for (size_t i = 0; i < fit.residuals.size(); ++i)
    if (fit.is_rejected(i)) rejected.push_back(i);
  if (!rejected.empty()) j["rejected"] = rejected;
  return j;
}

double clamp_fraction(double v) { return std::clamp(v, 1e-6, 1.0); }

const LinkSpec& link_between(const ClusterSpec& c, int dp, int a, int b) {
  return actors_share_node(c, dp, a, b) ? c.intra_node : c.inter_node;
}

}  // namespace

double median_of(std::vector<double> values) { return quantile_of(std::move(values), 0.5); }

double quantile_of(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

LinearFit fit_nonnegative_relative(const std::vector<std::vector<double>>& rows,
                                   std::span<const double> y, const std::string& what) {
  assert(!rows.empty() && "fit needs at least one row");
  const size_t p = rows[0].size();
  check_points(rows.size(), y.size(), p, what);
  for (size_t i = 0; i < y.size(); ++i) {
    if (!(y[i] > 0) || !std::isfinite(y[i]))
      throw_input_error(what, "measured time " + std::to_string(i) + " is not > 0");
    assert(rows[i].size() == p && "every row has one value per coefficient");
  }
  std::vector<size_t> active(p);
  for (size_t j = 0; j < p; ++j) active[j] = j;
  LinearFit fit;
  while (true) {
    std::vector<double> coef;
    if (active.empty() || !weighted_solve(rows, y, active, coef))
      throw_input_error(what, "the measured points cannot determine the fit (sizes all equal?)");
    auto most_negative = std::min_element(coef.begin(), coef.end());
    if (*most_negative >= 0) {
      fit.coefficients = std::move(coef);
      break;
    }
    const size_t drop = static_cast<size_t>(most_negative - coef.begin());
    active.erase(std::find(active.begin(), active.end(), drop));
  }
  fill_residuals(rows, y, fit);
  return fit;
}

LinearFit fit_robust_relative(const std::vector<std::vector<double>>& rows,
                              std::span<const double> y, const std::string& what) {
  assert(!rows.empty() && "fit needs at least one row");
  const size_t n = y.size();
  const size_t keep_at_least = std::max(rows[0].size() + 1, n / 2 + 1);
  std::vector<bool> rejected(n, false);
  size_t kept = n;
  while (true) {
    std::vector<std::vector<double>> sub_rows;
    std::vector<double> sub_y;
    for (size_t i = 0; i < n; ++i)
      if (!rejected[i]) {
        sub_rows.push_back(rows[i]);
        sub_y.push_back(y[i]);
      }
    LinearFit sub = fit_nonnegative_relative(sub_rows, sub_y, what);
    LinearFit fit;
    fit.coefficients = sub.coefficients;
    fit.rejected = rejected;
    fill_residuals(rows, y, fit);
    if (kept <= keep_at_least) return fit;
    std::vector<double> kept_residuals;
    size_t worst = n;
    for (size_t i = 0; i < n; ++i) {
      if (rejected[i]) continue;
      kept_residuals.push_back(fit.residuals[i]);
      if (worst == n || std::abs(fit.residuals[i]) > std::abs(fit.residuals[worst])) worst = i;
    }
    const double center = median_of(kept_residuals);
    std::vector<double> deviations;
    for (double r : kept_residuals) deviations.push_back(std::abs(r - center));
    const double threshold = std::max(kOutlierMads * 1.4826 * median_of(deviations), kOutlierFloor);
    if (!(std::abs(fit.residuals[worst] - center) > threshold)) return fit;
    rejected[worst] = true;
    --kept;
  }
}

GemmCurveFit fit_gemm_curve(std::span<const double> flops, std::span<const double> seconds) {
  check_points(flops.size(), seconds.size(), 2, "GEMM benchmark");
  std::vector<std::vector<double>> rows;
  for (double x : flops) rows.push_back({1.0, x});
  GemmCurveFit g;
  g.fit = fit_nonnegative_relative(rows, seconds, "GEMM benchmark");
  if (!(g.fit.coefficients[1] > 0))
    throw_input_error("GEMM benchmark", "times do not grow with FLOPs");
  g.call_overhead_s = g.fit.coefficients[0];
  g.rate_flops_per_s = 1.0 / g.fit.coefficients[1];
  g.half_saturation_flops = g.call_overhead_s * g.rate_flops_per_s;
  return g;
}

AlphaBetaFit fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds,
                            const std::string& what, bool robust) {
  check_points(bytes.size(), seconds.size(), 2, what);
  std::vector<std::vector<double>> rows;
  for (double n : bytes) rows.push_back({1.0, n});
  AlphaBetaFit a;
  a.fit = robust ? fit_robust_relative(rows, seconds, what)
                 : fit_nonnegative_relative(rows, seconds, what);
  if (!(a.fit.coefficients[1] > 0)) throw_input_error(what, "times do not grow with size");
  a.latency_s = a.fit.coefficients[0];
  a.bandwidth_bytes_per_s = 1.0 / a.fit.coefficients[1];
  return a;
}

double AllReduceFit::time_s(int ranks, double bytes) const {
  if (ranks <= 1) return 0;
  return 2.0 * (ranks - 1) * latency_s +
         2.0 * (ranks - 1) / ranks * bytes / bus_bandwidth_bytes_per_s;
}

AllReduceFit fit_allreduce(std::span<const int> ranks, std::span<const double> bytes,
                           std::span<const double> seconds, double latency_s) {
  const std::string what = "all-reduce benchmark";
  check_points(bytes.size(), seconds.size(), 1, what);
  check_points(ranks.size(), seconds.size(), 1, what);
  // t = off + beta·v with off = 2(r−1)·latency fixed: minimise Σ ((t − off − beta·v) / t)².
  double num = 0, den = 0;
  std::vector<std::vector<double>> rows;
  for (size_t i = 0; i < seconds.size(); ++i) {
    if (ranks[i] < 2) throw_input_error(what, "point " + std::to_string(i) + " has < 2 ranks");
    if (!(seconds[i] > 0)) throw_input_error(what, "measured time " + std::to_string(i) + " <= 0");
    const double off = 2.0 * (ranks[i] - 1) * latency_s;
    const double v = 2.0 * (ranks[i] - 1) / ranks[i] * bytes[i];
    rows.push_back({off, v});
    const double w2 = 1.0 / (seconds[i] * seconds[i]);
    num += v * (seconds[i] - off) * w2;
    den += v * v * w2;
  }
  if (!(den > 0) || !(num > 0))
    throw_input_error(what, "times do not grow with size beyond the link latency");
  AllReduceFit f;
  f.latency_s = latency_s;
  f.bus_bandwidth_bytes_per_s = den / num;
  f.fit.coefficients = {1.0, num / den};
  fill_residuals(rows, seconds, f.fit);
  return f;
}

AllReduceFit fit_allreduce_with_latency(std::span<const int> ranks, std::span<const double> bytes,
                                        std::span<const double> seconds) {
  const std::string what = "all-reduce benchmark";
  check_points(bytes.size(), seconds.size(), 2, what);
  check_points(ranks.size(), seconds.size(), 2, what);
  std::vector<std::vector<double>> rows;
  for (size_t i = 0; i < seconds.size(); ++i) {
    if (ranks[i] < 2) throw_input_error(what, "point " + std::to_string(i) + " has < 2 ranks");
    rows.push_back({2.0 * (ranks[i] - 1), 2.0 * (ranks[i] - 1) / ranks[i] * bytes[i]});
  }
  AllReduceFit f;
  f.fit = fit_robust_relative(rows, seconds, what);
  f.latency_s = f.fit.coefficients[0];
  f.bus_bandwidth_bytes_per_s = f.fit.coefficients[1] > 0
                                    ? 1.0 / f.fit.coefficients[1]
                                    : std::numeric_limits<double>::infinity();
  return f;
}

PerElementFit fit_per_element(std::span<const double> elements, std::span<const double> seconds,
                              const std::string& what) {
  check_points(elements.size(), seconds.size(), 2, what);
  std::vector<std::vector<double>> rows;
  for (double n : elements) rows.push_back({1.0, n});
  PerElementFit e;
  e.fit = fit_nonnegative_relative(rows, seconds, what);
  if (!(e.fit.coefficients[1] > 0)) throw_input_error(what, "times do not grow with size");
  e.call_overhead_s = e.fit.coefficients[0];
  e.s_per_element = e.fit.coefficients[1];
  return e;
}

Calibration calibrate(const Measurements& m, const ClusterSpec& base, const std::string& name) {
  Calibration cal;
  std::vector<double> x, t;
  for (const GemmSample& g : m.gemm) {
    x.push_back(g.flops());
    t.push_back(g.seconds);
  }
  cal.gemm = fit_gemm_curve(x, t);

  auto sizes_and_times = [](const std::vector<SizeSample>& samples) {
    std::pair<std::vector<double>, std::vector<double>> st;
    for (const SizeSample& s : samples) {
      st.first.push_back(s.size);
      st.second.push_back(s.seconds);
    }
    return st;
  };
  auto [gx, gt] = sizes_and_times(m.gelu);
  cal.gelu = fit_per_element(gx, gt, "GeLU benchmark");
  auto [bx, bt] = sizes_and_times(m.gelu_backward);
  cal.gelu_backward = fit_per_element(bx, bt, "GeLU gradient benchmark");
  auto [cx, ct] = sizes_and_times(m.copy);
  for (double& b : cx) b *= 2;  // read + write
  cal.copy = fit_alpha_beta(cx, ct, "copy benchmark");
  if (!m.input_generation.empty()) {
    auto [ix, it] = sizes_and_times(m.input_generation);
    cal.input_generation = fit_per_element(ix, it, "input-generation benchmark");
    cal.has_input_generation = true;
  }
  if (!m.upload.empty()) {
    auto [ux, ut] = sizes_and_times(m.upload);
    cal.upload = fit_alpha_beta(ux, ut, "upload benchmark");
    cal.has_upload = true;
  }
  if (!m.p2p.empty()) {
    auto [px, pt] = sizes_and_times(m.p2p);
    cal.p2p = fit_alpha_beta(px, pt, "point-to-point benchmark");
    cal.has_p2p = true;
  }
  if (cal.has_p2p && !m.allreduce.empty()) {
    std::vector<int> r;
    std::vector<double> n, s;
    for (const AllReduceSample& a : m.allreduce) {
      r.push_back(a.ranks);
      n.push_back(a.bytes);
      s.push_back(a.seconds);
    }
    cal.allreduce = fit_allreduce_with_latency(r, n, s);
    cal.has_allreduce = true;
    cal.allreduce_unbounded = std::isinf(cal.allreduce.bus_bandwidth_bytes_per_s);
  }
  if (m.launch_overhead_s.empty())
    throw_input_error("launch-overhead benchmark", "no measured point");
  cal.launch_overhead_s = median_of(m.launch_overhead_s);

  ClusterSpec& c = cal.cluster;
  c = base;
  c.name = name;
  // The measured curve: per FLOP count, the mean time over its shapes (the workload runs each
  // shape of a size once per layer), as a rate.
  std::map<double, std::pair<double, int>> by_flops;  // flops -> (sum of seconds, shapes)
  for (const GemmSample& g : m.gemm) {
    auto& [sum, count] = by_flops[g.flops()];
    sum += g.seconds;
    ++count;
  }
  double peak = cal.gemm.rate_flops_per_s;
  for (const auto& [flops, st] : by_flops) {
    const double mean_s = st.first / st.second;
    cal.gemm_measured.push_back({flops, mean_s, flops / mean_s});
    peak = std::max(peak, flops / mean_s);
  }
  c.peak_flops_per_s = {peak, peak, peak, 0};
  c.gemm_efficiency_max = cal.gemm.rate_flops_per_s / peak;
  c.gemm_half_saturation_flops = cal.gemm.half_saturation_flops;
  c.gemm_efficiency_measured.clear();
  for (const GemmPoint& g : cal.gemm_measured)
    c.gemm_efficiency_measured.push_back({g.flops, g.rate_flops_per_s / peak});
  if (m.memory_bytes_per_rank > 0) c.hbm_bytes = m.memory_bytes_per_rank;
  c.hbm_bandwidth_bytes_per_s = cal.copy.bandwidth_bytes_per_s;
  c.devices_per_node = std::max(1, m.ranks_per_host);
  if (cal.has_p2p) {
    c.intra_node = {cal.p2p.bandwidth_bytes_per_s, cal.p2p.latency_s, 1.0};
    if (m.p2p_is_network) c.inter_node = c.intra_node;
    c.p2p_overhead_s = 0;
  }
  if (cal.has_allreduce) {
    c.allreduce_bus_efficiency =
        clamp_fraction(cal.allreduce.bus_bandwidth_bytes_per_s / cal.p2p.bandwidth_bytes_per_s);
    c.collective_step_latency_s = std::max(cal.allreduce.latency_s, 1e-9);
  }
  c.launch_overhead_s = cal.launch_overhead_s;
  c.iteration_overhead_s = 0;
  // The runtime's workload trains in fp64 (weights, gradients, Adam moments).
  c.weight_bytes_per_param = 8;
  c.grad_bytes_per_param = 8;
  c.optimizer_state_bytes_per_param = 16;
  c.optimizer_traffic_bytes_per_param = 64;
  c.gelu_s_per_element = cal.gelu.s_per_element;
  c.gelu_backward_s_per_element = cal.gelu_backward.s_per_element;
  if (cal.has_input_generation)
    c.input_generation_s_per_element = cal.input_generation.s_per_element;
  if (cal.has_upload) c.upload_bandwidth_bytes_per_s = cal.upload.bandwidth_bytes_per_s;
  // The fits' intercepts: what one call costs whatever its size (a robust fit can put a slightly
  // negative intercept on points that are all rate-bound: 0 then).
  c.gelu_call_s = std::max(0.0, cal.gelu.call_overhead_s);
  c.gelu_backward_call_s = std::max(0.0, cal.gelu_backward.call_overhead_s);
  c.copy_call_s = std::max(0.0, cal.copy.latency_s);
  c.upload_call_s = cal.has_upload ? std::max(0.0, cal.upload.latency_s) : 0.0;
  c.input_generation_call_s =
      cal.has_input_generation ? std::max(0.0, cal.input_generation.call_overhead_s) : 0.0;
  return cal;
}

std::vector<std::pair<std::string, double>> fitted_parameters(const ClusterSpec& c) {
  return {{"gemm_rate_flops_per_s",
           c.peak_flops_per_s[static_cast<int>(Dtype::kFp32)] * c.gemm_efficiency_max},
          {"gemm_half_saturation_flops", c.gemm_half_saturation_flops},
          {"gelu_s_per_element", c.gelu_s_per_element},
          {"gelu_backward_s_per_element", c.gelu_backward_s_per_element},
          {"input_generation_s_per_element", c.input_generation_s_per_element},
          {"memory_bandwidth_bytes_per_s", c.hbm_bandwidth_bytes_per_s},
          {"upload_bandwidth_bytes_per_s", c.upload_bandwidth_bytes_per_s},
          {"gelu_call_s", c.gelu_call_s},
          {"gelu_backward_call_s", c.gelu_backward_call_s},
          {"copy_call_s", c.copy_call_s},
          {"upload_call_s", c.upload_call_s},
          {"input_generation_call_s", c.input_generation_call_s},
          {"p2p_latency_s", c.intra_node.latency_s + c.p2p_overhead_s},
          {"p2p_bandwidth_bytes_per_s", c.intra_node.effective_bandwidth_bytes_per_s()},
          {"allreduce_bus_bandwidth_bytes_per_s",
           c.intra_node.bandwidth_bytes_per_s * c.allreduce_bus_efficiency},
          {"collective_step_latency_s", c.intra_collective_latency_s()},
          {"launch_overhead_s", c.launch_overhead_s}};
}

nlohmann::json calibration_to_json(const Calibration& cal) {
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [k, v] : fitted_parameters(cal.cluster)) params[k] = v;
  nlohmann::json measured = nlohmann::json::array();
  for (const GemmPoint& g : cal.gemm_measured)
    measured.push_back({{"flops", g.flops},
                        {"mean_s", g.mean_s},
                        {"rate_flops_per_s", g.rate_flops_per_s},
                        {"curve_s", cal.gemm.time_s(g.flops)}});
  nlohmann::json fits = {{"gemm",
                          {{"rate_flops_per_s", cal.gemm.rate_flops_per_s},
                           {"half_saturation_flops", cal.gemm.half_saturation_flops},
                           {"call_overhead_s", cal.gemm.call_overhead_s},
                           {"measured", measured},
                           {"fit", fit_json(cal.gemm.fit)}}},
                         {"gelu",
                          {{"s_per_element", cal.gelu.s_per_element},
                           {"call_overhead_s", cal.gelu.call_overhead_s},
                           {"fit", fit_json(cal.gelu.fit)}}},
                         {"gelu_backward",
                          {{"s_per_element", cal.gelu_backward.s_per_element},
                           {"call_overhead_s", cal.gelu_backward.call_overhead_s},
                           {"fit", fit_json(cal.gelu_backward.fit)}}},
                         {"copy",
                          {{"bandwidth_bytes_per_s", cal.copy.bandwidth_bytes_per_s},
                           {"latency_s", cal.copy.latency_s},
                           {"fit", fit_json(cal.copy.fit)}}},
                         {"p2p",
                          {{"latency_s", cal.p2p.latency_s},
                           {"bandwidth_bytes_per_s", cal.p2p.bandwidth_bytes_per_s},
                           {"fit", fit_json(cal.p2p.fit)}}},
                         {"launch_overhead_s", cal.launch_overhead_s}};
  if (cal.has_input_generation)
    fits["input_generation"] = {{"s_per_element", cal.input_generation.s_per_element},
                                {"call_overhead_s", cal.input_generation.call_overhead_s},
                                {"fit", fit_json(cal.input_generation.fit)}};
  if (cal.has_upload)
    fits["upload"] = {{"bandwidth_bytes_per_s", cal.upload.bandwidth_bytes_per_s},
                      {"latency_s", cal.upload.latency_s},
                      {"fit", fit_json(cal.upload.fit)}};
  if (cal.has_allreduce) {
    fits["allreduce"] = {{"step_latency_s", cal.allreduce.latency_s},
                         {"unbounded", cal.allreduce_unbounded},
                         {"fit", fit_json(cal.allreduce.fit)}};
    if (!cal.allreduce_unbounded)
      fits["allreduce"]["bus_bandwidth_bytes_per_s"] = cal.allreduce.bus_bandwidth_bytes_per_s;
  }
  return {{"parameters", params}, {"fits", fits}, {"cluster", cluster_to_json(cal.cluster)}};
}

// ---- Kernel-level prediction -------------------------------------------------------------------

KernelWork& KernelWork::operator+=(const KernelWork& o) {
  gemms.insert(gemms.end(), o.gemms.begin(), o.gemms.end());
  alltoalls.insert(alltoalls.end(), o.alltoalls.begin(), o.alltoalls.end());
  gelu_elements += o.gelu_elements;
  gelu_backward_elements += o.gelu_backward_elements;
  generated_elements += o.generated_elements;
  memory_bytes += o.memory_bytes;
  host_transfer_bytes += o.host_transfer_bytes;
  gelu_calls += o.gelu_calls;
  gelu_backward_calls += o.gelu_backward_calls;
  memory_calls += o.memory_calls;
  host_transfer_calls += o.host_transfer_calls;
  generation_calls += o.generation_calls;
  return *this;
}

double KernelWork::gemm_flops() const {
  double f = 0;
  for (const GemmShape& g : gemms) f += g.flops();
  return f;
}

double kernel_time_s(const KernelWork& w, const ClusterSpec& c, Dtype dtype) {
  double t = 0;
  if (!w.gemms.empty()) {
    const double peak = c.peak_flops(dtype);
    // A GEMM with a short side streams its operands: 8 tokens through a 2048 x 8192 weight
    // read 134 MB, 30 us at 4.4 TB/s, where its 268 MFLOP at the calibrated rate of that size
    // take 13 us (the calibration's GEMMs are all compute-bound shapes).
    const double hbm = c.hbm_bandwidth_bytes_per_s;
    for (const GemmShape& g : w.gemms) {
      const double x = g.flops();
      if (x <= 0) continue;
      const double compute = x / (peak * c.gemm_efficiency(x));
      t += hbm > 0 ? std::max(compute, g.bytes() / hbm) : compute;
    }
  }
  t += static_cast<double>(w.gelu_elements) * c.gelu_s_per_element;
  t += static_cast<double>(w.gelu_backward_elements) * c.gelu_backward_s_per_element;
  t += static_cast<double>(w.generated_elements) * c.input_generation_s_per_element;
  if (w.memory_bytes > 0 && c.hbm_bandwidth_bytes_per_s > 0)
    t += static_cast<double>(w.memory_bytes) / c.hbm_bandwidth_bytes_per_s;
  if (w.host_transfer_bytes > 0) {
    if (c.upload_bandwidth_bytes_per_s > 0)
      t += static_cast<double>(w.host_transfer_bytes) / c.upload_bandwidth_bytes_per_s;
    else if (c.hbm_bandwidth_bytes_per_s > 0)
      t += 2.0 * static_cast<double>(w.host_transfer_bytes) / c.hbm_bandwidth_bytes_per_s;
  }
  t += static_cast<double>(w.gelu_calls) * c.gelu_call_s +
       static_cast<double>(w.gelu_backward_calls) * c.gelu_backward_call_s +
       static_cast<double>(w.memory_calls) * c.copy_call_s +
       static_cast<double>(w.host_transfer_calls) * c.upload_call_s +
       static_cast<double>(w.generation_calls) * c.input_generation_call_s;
  return t;
}

double alltoall_time_s(const AllToAllWork& a, const ClusterSpec& c, int dp, int actor) {
  const int g = a.group_size;
  if (g <= 1) return 0;
  const int first = actor * std::max(1, dp);
  const int dpn = std::max(1, c.devices_per_node);
  const LinkSpec& link = first / dpn == (first + g - 1) / dpn ? c.intra_node : c.inter_node;
  return 2.0 * (g - 1) * (link.latency_s + c.p2p_overhead_s) +
         (g - 1) * a.bytes_per_peer / link.effective_bandwidth_bytes_per_s();
}

double ring_allreduce_time_s(const ClusterSpec& c, int ranks, double bytes) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const int g = std::clamp(c.devices_per_node, 1, ranks);
  const int k = (ranks + g - 1) / g;
  const double eff = c.allreduce_bus_efficiency;
  double t = 0;
  if (g > 1)
    t += 2.0 * (g - 1) / g * bytes / (c.intra_node.bandwidth_bytes_per_s * eff) +
         2.0 * (g - 1) * c.intra_collective_latency_s();
  if (k > 1)
    t += 2.0 * (k - 1) / k * (bytes / g) / (c.inter_node.bandwidth_bytes_per_s * eff) +
         2.0 * (k - 1) * c.inter_node.latency_s;
  return t;
}

bool actors_share_node(const ClusterSpec& c, int dp, int a, int b) {
  const int64_t group = std::max(1, dp);
  return (a * group) / c.devices_per_node == (b * group) / c.devices_per_node;
}

KernelCost::KernelCost(std::vector<StageKernels> stages, int num_actors, const ClusterSpec& cluster,
                       Dtype dtype, int dp)
    : stages_(std::move(stages)),
      num_actors_(num_actors),
      cluster_(cluster),
      dtype_(dtype),
      dp_(std::max(1, dp)) {
  bool has_gemms = false;
  for (const StageKernels& s : stages_)
    for (const KernelWork& w : s.task) has_gemms |= !w.gemms.empty();
  if (has_gemms) cluster_.peak_flops(dtype_);  // InputError if the cluster lacks the dtype
}

double KernelCost::task_s(TaskKind kind, int stage) const {
  return kernel_time_s(stages_.at(stage).task[static_cast<int>(kind)], cluster_, dtype_);
}

double KernelCost::task_alltoall_s(TaskKind kind, int stage, int actor) const {
  double t = 0;
  for (const AllToAllWork& a : stages_.at(stage).task[static_cast<int>(kind)].alltoalls)
    t += alltoall_time_s(a, cluster_, dp_, actor);
  return t;
}

double KernelCost::compute_s(int actor, const Instruction& ins) const {
  if (ins.op == OpKind::kOptimizer)
    return cluster_.launch_overhead_s +
           kernel_time_s(stages_.at(ins.stage).optimizer, cluster_, dtype_);
  if (ins.op != OpKind::kCompute) return 0;
  double t = cluster_.launch_overhead_s;
  for (const TaskRef& task : ins.tasks)
    t += task_s(task.kind, task.stage) + task_alltoall_s(task.kind, task.stage, actor);
  return t;
}

CostProvider::AllToAll KernelCost::alltoall(int actor, const Instruction& ins) const {
  if (ins.op != OpKind::kCompute) return {};
  double busy = 0;
  for (const TaskRef& task : ins.tasks) busy += task_alltoall_s(task.kind, task.stage, actor);
  return {busy, busy};
}

double KernelCost::p2p_latency_s(int from, int to) const {
  return link_between(cluster_, dp_, from, to).latency_s + cluster_.p2p_overhead_s;
}

double KernelCost::p2p_bandwidth_bytes_per_s(int from, int to) const {
  return link_between(cluster_, dp_, from, to).effective_bandwidth_bytes_per_s();
}

int KernelCost::link_id(int from, int to) const { return from * num_actors_ + to; }

double KernelCost::allreduce_s(int /*actor*/, const Instruction& ins) const {
  return ring_allreduce_time_s(cluster_, dp_, static_cast<double>(ins.bytes));
}

// ---- Emulated runs -----------------------------------------------------------------------------

namespace {
constexpr double kMessageHeaderBytes = sizeof(double);  // the ready time an emulated send carries
}  // namespace

EmulationPredictionCost::EmulationPredictionCost(const CostProvider& emulated, double time_scale,
                                                 const ClusterSpec& backend_cluster, int num_actors,
                                                 int dp)
    : emulated_(emulated),
      time_scale_(time_scale),
      cluster_(backend_cluster),
      num_actors_(num_actors),
      dp_(std::max(1, dp)) {}

double EmulationPredictionCost::compute_s(int actor, const Instruction& ins) const {
  if (ins.op != OpKind::kCompute && ins.op != OpKind::kOptimizer) return 0;
  return time_scale_ * emulated_.compute_s(actor, ins) + cluster_.launch_overhead_s;
}

double EmulationPredictionCost::p2p_latency_s(int from, int to) const {
  const LinkSpec& link = link_between(cluster_, dp_, from, to);
  return link.latency_s + cluster_.p2p_overhead_s +
         kMessageHeaderBytes / link.effective_bandwidth_bytes_per_s();
}

double EmulationPredictionCost::p2p_bandwidth_bytes_per_s(int, int) const {
  return std::numeric_limits<double>::infinity();
}

int EmulationPredictionCost::link_id(int from, int to) const { return from * num_actors_ + to; }

double EmulationPredictionCost::transfer_latency_s(int from, int to, const Instruction& ins) const {
  double emulated = emulated_.transfer_latency_s(from, to, ins);
  const double bw = emulated_.p2p_bandwidth_bytes_per_s(from, to);
  if (std::isfinite(bw) && bw > 0) emulated += static_cast<double>(ins.bytes) / bw;
  return std::max(time_scale_ * emulated, p2p_latency_s(from, to));
}

CostProvider::AllToAll EmulationPredictionCost::alltoall(int actor, const Instruction& ins) const {
  const AllToAll a = emulated_.alltoall(actor, ins);
  return {time_scale_ * a.busy_s, time_scale_ * a.exposed_s};
}

double EmulationPredictionCost::allreduce_s(int actor, const Instruction& ins) const {
  return std::max(time_scale_ * emulated_.allreduce_s(actor, ins),
                  ring_allreduce_time_s(cluster_, dp_, kMessageHeaderBytes));
}

// ---- From a measured run trace -----------------------------------------------------------------

namespace {

// Lower quartile of the observed times per distinct size.
std::map<double, double> lower_quartile_by_size(const std::vector<std::pair<double, double>>& pts) {
  std::map<double, std::vector<double>> by;
  for (const auto& [size, t] : pts) by[size].push_back(t);
  std::map<double, double> out;
  for (auto& [size, ts] : by) out[size] = quantile_of(ts, 0.25);
  return out;
}

// Fits one link class; returns false when there is nothing to fit.
bool fit_link(const std::map<double, double>& by_size, LinkSpec& link) {
  if (by_size.empty()) return false;
  if (by_size.size() >= 2) {
    std::vector<double> n, t;
    for (const auto& [size, q] : by_size) {
      n.push_back(size);
      t.push_back(q);
    }
    try {
      AlphaBetaFit f = fit_alpha_beta(n, t, "transfers");
      link = {f.bandwidth_bytes_per_s, f.latency_s, 1.0};
      return true;
    } catch (const InputError&) {
      // Times do not grow with size: fall back to a latency-only fit below.
    }
  }
  std::vector<double> latencies;
  for (const auto& [size, q] : by_size)
    latencies.push_back(std::max(0.0, q - size / link.effective_bandwidth_bytes_per_s()));
  link.latency_s = median_of(latencies);
  return true;
}

}  // namespace

ClusterSpec reference_host_cluster() {
  ClusterSpec c;
  c.name = "reference-host";
  c.peak_flops_per_s = {1e10, 1e10, 1e10, 0};
  c.hbm_bytes = int64_t{16} << 30;
  c.hbm_bandwidth_bytes_per_s = 1e11;
  c.gemm_efficiency_max = 1.0;
  c.gemm_half_saturation_flops = 0;
  c.devices_per_node = 1024;
  c.intra_node = {1e10, 0, 1.0};
  c.inter_node = c.intra_node;
  c.allreduce_bus_efficiency = 1.0;
  c.launch_overhead_s = 0;
  c.iteration_overhead_s = 0;
  c.p2p_overhead_s = 0;
  c.weight_bytes_per_param = 8;
  c.grad_bytes_per_param = 8;
  c.optimizer_state_bytes_per_param = 16;
  c.optimizer_traffic_bytes_per_param = 64;
  return c;
}

TraceCalibration calibrate_from_trace(const TraceObservations& obs, const ClusterSpec& base,
                                      const std::string& name) {
  if (obs.computes.empty())
    throw_input_error("trace", "no compute instruction to fit (an empty or emulated trace?)");
  // The optimizer steps alone (a trace whose forward and backward events were removed) would fit
  // the whole compute model on one or two memory-bound instructions.
  if (std::all_of(obs.computes.begin(), obs.computes.end(),
                  [](const ComputeObservation& c) { return c.kind == "optimizer"; }))
    throw_input_error("trace", "no forward or backward instruction to fit (only " +
                                   std::to_string(obs.computes.size()) +
                                   " optimizer steps; an edited trace?)");
  TraceCalibration cal;
  cal.cluster = base;
  cal.cluster.name = name;

  // Compute: measured = launch + slowdown · predicted.
  std::vector<double> predicted, measured;
  for (const ComputeObservation& c : obs.computes) {
    if (!(c.measured_s > 0)) continue;  // a zero-length event carries no information
    predicted.push_back(c.predicted_s);
    measured.push_back(c.measured_s);
  }
  if (measured.empty()) throw_input_error("trace", "every compute instruction lasted 0 s");
  const std::set<double> distinct(predicted.begin(), predicted.end());
  double launch = base.launch_overhead_s;
  double slowdown = 1;
  std::vector<std::vector<double>> rows;
  for (double p : predicted) rows.push_back({1.0, p});
  bool fitted_both = false;
  if (distinct.size() >= 2) {
    try {
      cal.compute_fit = fit_nonnegative_relative(rows, measured, "trace compute fit");
      if (cal.compute_fit.coefficients[1] > 0) {
        launch = cal.compute_fit.coefficients[0];
        slowdown = cal.compute_fit.coefficients[1];
        fitted_both = true;
      }
    } catch (const InputError&) {
      // Degenerate spread of predictions: the slowdown-only fit below.
    }
  }
  if (!fitted_both) {
    std::vector<double> ratios;
    for (size_t i = 0; i < measured.size(); ++i)
      if (predicted[i] > 0) ratios.push_back((measured[i] - launch) / predicted[i]);
    if (ratios.empty())
      throw_input_error("trace", "the base cluster predicts 0 s for every compute instruction");
    slowdown = std::max(1e-9, median_of(ratios));
    cal.compute_fit.coefficients = {launch, slowdown};
    fill_residuals(rows, measured, cal.compute_fit);
  }
  cal.compute_slowdown = slowdown;
  cal.launch_overhead_s = launch;
  ClusterSpec& c = cal.cluster;
  for (double& p : c.peak_flops_per_s) p /= slowdown;
  c.gelu_s_per_element *= slowdown;
  c.gelu_backward_s_per_element *= slowdown;
  c.input_generation_s_per_element *= slowdown;
  c.hbm_bandwidth_bytes_per_s /= slowdown;
  c.upload_bandwidth_bytes_per_s /= slowdown;
  for (const auto& [key, cost] : kCallCosts) c.*cost *= slowdown;
  c.launch_overhead_s = launch;

  std::map<std::string, std::vector<const ComputeObservation*>> by_kind;
  for (const ComputeObservation& o : obs.computes) by_kind[o.kind].push_back(&o);
  for (const auto& [kind, list] : by_kind) {
    std::vector<double> m, before, after;
    for (const ComputeObservation* o : list) {
      m.push_back(o->measured_s);
      before.push_back(base.launch_overhead_s + o->predicted_s);
      after.push_back(launch + slowdown * o->predicted_s);
    }
    cal.kinds[kind] = {static_cast<int>(list.size()), median_of(m), median_of(before),
                       median_of(after)};
  }

  // Transfers, per link class.
  const int dp = std::max(1, obs.dp);
  std::vector<std::pair<double, double>> intra, inter;
  for (const TransferObservation& t : obs.transfers)
    (actors_share_node(base, dp, t.from, t.to) ? intra : inter).push_back({t.bytes, t.seconds});
  LinkSpec intra_link = base.intra_node, inter_link = base.inter_node;
  intra_link.latency_s += base.p2p_overhead_s;  // p2p_overhead is folded into the latencies
  inter_link.latency_s += base.p2p_overhead_s;
  const bool fit_intra = fit_link(lower_quartile_by_size(intra), intra_link);
  const bool fit_inter = fit_link(lower_quartile_by_size(inter), inter_link);
  cal.fitted_transfers = fit_intra || fit_inter;
  if (cal.fitted_transfers) {
    c.intra_node = intra_link;
    c.inter_node = inter_link;
    c.p2p_overhead_s = 0;
    std::vector<double> m, before, after;
    for (const TransferObservation& t : obs.transfers) {
      m.push_back(t.seconds);
      const LinkSpec& b = link_between(base, dp, t.from, t.to);
      before.push_back(b.latency_s + base.p2p_overhead_s +
                       t.bytes / b.effective_bandwidth_bytes_per_s());
      const LinkSpec& a = link_between(c, dp, t.from, t.to);
      after.push_back(a.latency_s + t.bytes / a.effective_bandwidth_bytes_per_s());
    }
    cal.kinds["transfer"] = {static_cast<int>(m.size()), quantile_of(m, 0.25), median_of(before),
                             median_of(after)};
  }

  // All-reduce across dp replicas inside one node.
  if (dp > 1 && !obs.allreduces.empty() && std::clamp(c.devices_per_node, 1, dp) == dp) {
    std::vector<std::pair<double, double>> pts;
    for (const AllReduceSample& a : obs.allreduces) pts.push_back({a.bytes, a.seconds});
    std::vector<int> r;
    std::vector<double> n, t;
    for (const auto& [size, q] : lower_quartile_by_size(pts)) {
      if (!(q > 0)) continue;
      r.push_back(dp);
      n.push_back(size);
      t.push_back(q);
    }
    try {
      if (!t.empty()) {
        AllReduceFit f = fit_allreduce(r, n, t, c.intra_collective_latency_s());
        c.allreduce_bus_efficiency =
            clamp_fraction(f.bus_bandwidth_bytes_per_s / c.intra_node.bandwidth_bytes_per_s);
        cal.fitted_allreduce = true;
      }
    } catch (const InputError&) {
      // All-reduces no slower than their latency: keep the base's efficiency.
    }
    std::vector<double> m, before, after;
    for (const AllReduceSample& a : obs.allreduces) {
      m.push_back(a.seconds);
      before.push_back(ring_allreduce_time_s(base, dp, a.bytes));
      after.push_back(ring_allreduce_time_s(c, dp, a.bytes));
    }
    cal.kinds["allreduce"] = {static_cast<int>(m.size()), quantile_of(m, 0.25), median_of(before),
                              median_of(after)};
  }
  return cal;
}

nlohmann::json trace_calibration_to_json(const TraceCalibration& cal) {
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [k, s] : cal.kinds)
    kinds[k] = {{"count", s.count},
                {"measured_s", s.measured_s},
                {"predicted_before_s", s.predicted_before_s},
                {"predicted_after_s", s.predicted_after_s}};
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [k, v] : fitted_parameters(cal.cluster)) params[k] = v;
  return {{"compute_slowdown", cal.compute_slowdown},
          {"launch_overhead_s", cal.launch_overhead_s},
          {"compute_fit", fit_json(cal.compute_fit)},
          {"fitted_transfers", cal.fitted_transfers},
          {"fitted_allreduce", cal.fitted_allreduce},
          {"kinds", kinds},
          {"parameters", params},
          {"cluster", cluster_to_json(cal.cluster)}};
}

}  // namespace jaxpp
