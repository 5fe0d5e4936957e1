// The CUDA device (runtime/cuda, through the plugin) against the host device (OpenBLAS and loops) on the same inputs:
// every GEMM layout the workload uses and the fourth, on non-square shapes with and without
// padded leading dimensions, and the GeLU, loss, SGD and Adam kernels on sizes that span several
// blocks and are no multiple of the block size. fp64 on both sides: the results differ only by
// summation order and the last bits of tanh/sqrt, so the bound is 1e-12 of the largest value.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/cuda_plugin.h"
#include "runtime/device.h"
#include "runtime/workload.h"
#include "tests/gpu/gpu_env.h"

namespace jaxpp {
namespace {

constexpr double kRelTolerance = 1e-12;

std::vector<double> random_values(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-scale, scale);
  std::vector<double> v(n);
  for (double& x : v) x = uniform(rng);
  return v;
}

// max |a - b| over max |b|: the difference relative to the reference's magnitude.
double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

class DeviceVsHost : public ::testing::Test {
 protected:
  void SetUp() override {
    JAXPP_REQUIRE_GPUS(1);
    gpu_ = cuda_plugin().make_device(0);
  }

  std::unique_ptr<Device> gpu_;  // GPU 0; null when the test skipped
  Device& host_ = host_device();
};

struct GemmCase {
  bool trans_a, trans_b;
  int m, n, k;
  int pad;  // extra columns in every leading dimension
  double beta;
};

// "NT 29x61x17 pad 3 beta 1": the layout and shape, for ctest's test names and failure messages.
std::string describe(const GemmCase& c) {
  return std::string(c.trans_a ? "T" : "N") + (c.trans_b ? "T" : "N") + "_" + std::to_string(c.m) +
         "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + "_pad" + std::to_string(c.pad) +
         (c.beta != 0 ? "_accumulate" : "");
}

void PrintTo(const GemmCase& c, std::ostream* os) { *os << describe(c); }

class GemmLayouts : public DeviceVsHost, public ::testing::WithParamInterface<GemmCase> {};

TEST_P(GemmLayouts, MatchTheHostOnNonSquareShapes) {
  const GemmCase c = GetParam();
  // Row-major storage: op(A) is m x k, so A is m x k (lda >= k) or k x m (lda >= m).
  const int a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const int b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  const int lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
  const auto a = random_values(static_cast<size_t>(a_rows) * lda, 1);
  const auto b = random_values(static_cast<size_t>(b_rows) * ldb, 2);
  const auto c0 = random_values(static_cast<size_t>(c.m) * ldc, 3);
  std::vector<double> out[2];
  Device* devices[2] = {gpu_.get(), &host_};
  for (int d = 0; d < 2; ++d) {
    DeviceArray da = devices[d]->upload(a), db = devices[d]->upload(b);
    DeviceArray dc = devices[d]->upload(c0);
    devices[d]->gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, da.data(), lda, db.data(), ldb, c.beta,
                     dc.data(), ldc);
    out[d] = devices[d]->download(dc);
  }
  EXPECT_LE(max_rel_diff(out[0], out[1]), kRelTolerance);
  // The padding columns of C are not C: neither device may write them.
  for (int i = 0; i < c.m; ++i)
    for (int j = c.n; j < ldc; ++j)
      ASSERT_EQ(out[0][static_cast<size_t>(i) * ldc + j], c0[static_cast<size_t>(i) * ldc + j])
          << "row " << i << ", padding column " << j;
}

INSTANTIATE_TEST_SUITE_P(
    AllLayouts, GemmLayouts,
    ::testing::Values(GemmCase{false, false, 37, 19, 53, 0, 0.0},  // forward: x W1
                      GemmCase{false, false, 37, 19, 53, 0, 1.0},  // forward: y += a W2
                      GemmCase{false, true, 29, 61, 17, 0, 0.0},   // backward input: dy W2^T
                      GemmCase{false, true, 29, 61, 17, 3, 1.0},
                      GemmCase{true, false, 45, 23, 71, 0, 0.0},  // weight gradient: a^T dy
                      GemmCase{true, false, 45, 23, 71, 2, 1.0},  // accumulated
                      GemmCase{true, true, 13, 41, 7, 0, 0.0},
                      GemmCase{true, true, 13, 41, 7, 5, 1.0},
                      GemmCase{false, false, 1, 257, 3, 1, 0.0}),  // one row, odd width
    [](const ::testing::TestParamInfo<GemmCase>& info) { return describe(info.param); });

// Several blocks of 256 threads and a partial last one.
constexpr size_t kElements = 70001;

// The GPU's total memory (what `calibrate --backend cuda` writes as hbm_gib): between the 16 GiB of
// the smallest data-centre GPU the project targets and 1 TiB, and never the host's.
TEST_F(DeviceVsHost, ReportsTheGpusTotalMemory) {
  const int64_t bytes = gpu_->memory_bytes();
  EXPECT_GE(bytes, int64_t{16} << 30);
  EXPECT_LT(bytes, int64_t{1} << 40);
  EXPECT_NE(bytes, host_.memory_bytes());
}

TEST_F(DeviceVsHost, GeluMatchesTheHost) {
  const auto u = random_values(kElements, 4, 4.0);
  std::vector<double> out[2];
  Device* devices[2] = {gpu_.get(), &host_};
  for (int d = 0; d < 2; ++d) {
    DeviceArray du = devices[d]->upload(u), a = devices[d]->alloc(u.size());
    devices[d]->gelu(du, a);
    out[d] = devices[d]->download(a);
  }
  EXPECT_LE(max_rel_diff(out[0], out[1]), kRelTolerance);
}

TEST_F(DeviceVsHost, GeluBackwardMatchesTheHost) {
  const auto u = random_values(kElements, 5, 4.0), da = random_values(kElements, 6);
  std::vector<double> out[2];
  Device* devices[2] = {gpu_.get(), &host_};
  for (int d = 0; d < 2; ++d) {
    DeviceArray du_in = devices[d]->upload(u), dda = devices[d]->upload(da);
    DeviceArray du = devices[d]->alloc(u.size());
    devices[d]->gelu_backward(dda, du_in, du);
    out[d] = devices[d]->download(du);
  }
  EXPECT_LE(max_rel_diff(out[0], out[1]), kRelTolerance);
}

TEST_F(DeviceVsHost, MseLossAndItsGradientMatchTheHost) {
  const size_t n = 3001;  // one block of 256 threads, each summing 11 or 12 terms
  const auto y = random_values(n, 7), t = random_values(n, 8);
  const double scale = 2.0 / static_cast<double>(n) / 6.0;
  double loss[2];
  std::vector<double> dy[2];
  Device* devices[2] = {gpu_.get(), &host_};
  for (int d = 0; d < 2; ++d) {
    DeviceArray dy_in = devices[d]->upload(y), dt = devices[d]->upload(t);
    DeviceArray g = devices[d]->alloc(n);
    loss[d] = devices[d]->mse_loss(dy_in, dt, scale, g);
    dy[d] = devices[d]->download(g);
  }
  EXPECT_NEAR(loss[0], loss[1], kRelTolerance * std::abs(loss[1]));
  EXPECT_GT(loss[1], 0.1);  // two independent uniform vectors: about 2/3
  EXPECT_LE(max_rel_diff(dy[0], dy[1]), kRelTolerance);
}

TEST_F(DeviceVsHost, SgdStepMatchesTheHost) {
  const auto p = random_values(kElements, 9), g = random_values(kElements, 10);
  std::vector<double> out[2];
  Device* devices[2] = {gpu_.get(), &host_};
  for (int d = 0; d < 2; ++d) {
    DeviceArray dp = devices[d]->upload(p), dg = devices[d]->upload(g);
    devices[d]->sgd_step(dp, dg, 0.05);
    out[d] = devices[d]->download(dp);
  }
  EXPECT_LE(max_rel_diff(out[0], out[1]), kRelTolerance);
  EXPECT_GT(max_rel_diff(out[1], p), 1e-3);  // the step moved the weights
}

TEST_F(DeviceVsHost, ThreeAdamStepsMatchTheHost) {
  const auto p = random_values(kElements, 11);
  std::vector<double> weights[2], first[2], second[2];
  Device* devices[2] = {gpu_.get(), &host_};
  for (int d = 0; d < 2; ++d) {
    DeviceArray dp = devices[d]->upload(p);
    DeviceArray m = devices[d]->zeros(p.size()), v = devices[d]->zeros(p.size());
    for (int step = 0; step < 3; ++step) {
      DeviceArray g = devices[d]->upload(random_values(kElements, 20 + step));
      AdamStep s;
      s.lr = 1e-3;
      s.bias_correction1 = 1 - std::pow(s.beta1, step + 1);
      s.bias_correction2 = 1 - std::pow(s.beta2, step + 1);
      devices[d]->adam_step(dp, g, m, v, s);
    }
    weights[d] = devices[d]->download(dp);
    first[d] = devices[d]->download(m);
    second[d] = devices[d]->download(v);
  }
  EXPECT_LE(max_rel_diff(weights[0], weights[1]), kRelTolerance);
  EXPECT_LE(max_rel_diff(first[0], first[1]), kRelTolerance);
  EXPECT_LE(max_rel_diff(second[0], second[1]), kRelTolerance);
}

TEST_F(DeviceVsHost, UploadCopyZeroAndDownloadRoundTrip) {
  const auto x = random_values(kElements, 12);
  DeviceArray a = gpu_->upload(x);
  DeviceArray b = gpu_->copy(a);
  gpu_->fill_zero(a);
  EXPECT_EQ(gpu_->download(b), x);
  EXPECT_EQ(gpu_->download(a), std::vector<double>(x.size(), 0.0));
  EXPECT_EQ(a.device(), gpu_.get());
  EXPECT_FALSE(a.on_host());
}

TEST_F(DeviceVsHost, WarmUpAtTheWorkloadShapesLeavesTheDeviceCorrect) {
  MlpConfig mlp;
  mlp.hidden = 48;
  mlp.ffn = 80;
  mlp.seq = 24;
  mlp.optimizer = OptimizerKind::kAdam;
  cuda_plugin().warm_up_compute(*gpu_, mlp);
  // The device still computes what the host computes.
  const auto a = random_values(24 * 48, 13), w = random_values(48 * 80, 14);
  std::vector<double> out[2];
  Device* devices[2] = {gpu_.get(), &host_};
  for (int d = 0; d < 2; ++d) {
    DeviceArray da = devices[d]->upload(a), dw = devices[d]->upload(w);
    DeviceArray c = devices[d]->alloc(24 * 80);
    devices[d]->gemm(false, false, 24, 80, 48, da.data(), 48, dw.data(), 80, 0.0, c.data(), 80);
    out[d] = devices[d]->download(c);
  }
  EXPECT_LE(max_rel_diff(out[0], out[1]), kRelTolerance);
}

}  // namespace
}  // namespace jaxpp
