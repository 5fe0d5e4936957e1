// The independent reference of `run --check` (runtime/reference.h) against numbers worked out by
// hand, against finite differences, and against the workload's own sequential run.
#include "runtime/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "runtime/moe_workload.h"

namespace jaxpp {
namespace {

// The worked examples below follow the formulas step by step in their comments; the 17-digit
// literals were evaluated at 30 significant digits (mpmath) and rounded.
//
// One block, hidden = ffn = 2, seq = 1:
//   x  = [1, -1]
//   W1 = [[0.5, -0.25], [0.25, 0.5]]   (rows: input features, columns: ffn units)
//   W2 = [[1, 0], [0, -1]]
//   t  = [1.5, -0.5]
reference::Mlp two_by_two() {
  return {.hidden = 2, .ffn = 2, .seq = 1, .w1 = {{0.5, -0.25, 0.25, 0.5}}, .w2 = {{1, 0, 0, -1}}};
}
const std::vector<double> kX = {1, -1};
const std::vector<double> kTarget = {1.5, -0.5};

// Relative closeness for values computed by hand to 17+ digits.
void expect_close(double actual, double expected, const char* what) {
  EXPECT_NEAR(actual, expected, 1e-14 * std::max(1.0, std::abs(expected))) << what;
}

TEST(Reference, GeluHasItsTextbookValues) {
  // 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))): 0 at 0; at 1, tanh(0.7978845608 x
  // 1.044715) = tanh(0.8335624) = 0.6823840, so 0.5 x 1.6823840 = 0.8411920.
  EXPECT_EQ(reference::gelu(0), 0);
  expect_close(reference::gelu(1), 0.84119199060827670, "gelu(1)");
  expect_close(reference::gelu(-1), -0.15880800939172330, "gelu(-1)");
  // gelu(u) - gelu(-u) = u for the tanh form (tanh is odd).
  expect_close(reference::gelu(2.5) - reference::gelu(-2.5), 2.5, "gelu(u) - gelu(-u)");
  EXPECT_DOUBLE_EQ(reference::gelu_derivative(0), 0.5);
  expect_close(reference::gelu_derivative(1), 1.0829640838457826, "gelu'(1)");
}

TEST(Reference, GeluDerivativeMatchesFiniteDifferences) {
  for (double u : {-3.0, -1.2, -0.3, 0.1, 0.7, 2.0, 4.5}) {
    const double h = 1e-6;
    const double fd = (reference::gelu(u + h) - reference::gelu(u - h)) / (2 * h);
    EXPECT_NEAR(reference::gelu_derivative(u), fd, 1e-9) << "u = " << u;
  }
}

TEST(Reference, OneTwoByTwoBlockForwardLossAndGradientsByHand) {
  // Forward: u = x W1 = [1 x 0.5 - 1 x 0.25, 1 x -0.25 - 1 x 0.5] = [0.25, -0.75]
  //   a = gelu(u) = [0.14967535070168500, -0.17003944483437970]
  //   y = x + a W2 = [1 + a0, -1 - a1] = [1.1496753507016850, -0.82996055516562030]
  // Loss: ((y0 - 1.5)^2 + (y1 + 0.5)^2) / 2 = (0.12272735... + 0.10887397...) / 2
  //   = 0.11580066393559588
  reference::Mlp mlp = two_by_two();
  const std::vector<double> y = reference::forward(mlp, kX);
  ASSERT_EQ(y.size(), 2u);
  expect_close(y[0], 1.1496753507016850, "y0");
  expect_close(y[1], -0.82996055516562030, "y1");
  expect_close(reference::mse(y, kTarget), 0.11580066393559588, "loss");

  // Backward with scale 1: gy = 2 (y - t) / 2 = [-0.35032464929831500, -0.32996055516562030]
  //   dW2[j][k] = a_j gy_k
  //   ga = gy W2^T = [gy0, -gy1];  gelu'(u) = [0.69535409515106043, 0.0010617438625857023]
  //   gu = ga * gelu'(u) = [-0.24359967952194240, 0.00035033359434246842]
  //   dW1[i][j] = x_i gu_j = [[gu0, gu1], [-gu0, -gu1]]
  reference::Gradients g = reference::zero_gradients(mlp);
  const double loss = reference::accumulate_gradients(mlp, kX, kTarget, 1.0, g);
  expect_close(loss, 0.11580066393559588, "loss");
  const std::vector<double> dw2 = {-0.052434964743170104, -0.049386961812136899,
                                   0.059569008878484247, 0.056106309617605792};
  const std::vector<double> dw1 = {-0.24359967952194240, 0.00035033359434246842,
                                   0.24359967952194240, -0.00035033359434246842};
  for (size_t i = 0; i < 4; ++i) {
    expect_close(g.w2[0][i], dw2[i], "dW2");
    expect_close(g.w1[0][i], dw1[i], "dW1");
  }
  // A second microbatch adds to the gradient; scale multiplies it.
  reference::accumulate_gradients(mlp, kX, kTarget, 0.5, g);
  expect_close(g.w1[0][0], 1.5 * dw1[0], "accumulated dW1[0,0]");
}

TEST(Reference, SgdStepByHand) {
  // w - 0.1 g with the gradients above, e.g. W1[0][0] = 0.5 + 0.1 x 0.2435996795 = 0.5243599680,
  // W2[1][1] = -1 - 0.1 x 0.0561063096 = -1.0056106310.
  reference::Mlp mlp = two_by_two();
  reference::Gradients g = reference::zero_gradients(mlp);
  reference::accumulate_gradients(mlp, kX, kTarget, 1.0, g);
  reference::sgd_step(mlp, g, 0.1);
  const std::vector<double> w1 = {0.52435996795219424, -0.25003503335943425, 0.22564003204780576,
                                  0.50003503335943425};
  const std::vector<double> w2 = {1.0052434964743170, 0.0049386961812136899, -0.0059569008878484247,
                                  -1.0056106309617606};
  for (size_t i = 0; i < 4; ++i) {
    expect_close(mlp.w1[0][i], w1[i], "W1 after SGD");
    expect_close(mlp.w2[0][i], w2[i], "W2 after SGD");
  }
}

TEST(Reference, AdamFirstStepByHand) {
  // Step t = 1 from zero moments: m = 0.1 g, v = 0.001 g^2, m^ = m / 0.1 = g,
  // v^ = v / 0.001 = g^2, so w - lr g / (|g| + 1e-8): a step of almost exactly lr against the
  // gradient's sign, shortened by 1e-8 / |g| relative. With lr 0.1:
  //   W1[0][0]: g = -0.2435996795, 0.5 + 0.1 x 0.2435996795 / 0.2435996895 = 0.59999999589490446
  //   W1[0][1]: g = 0.00035033359, -0.25 - 0.1 x (1 - 2.854e-5) = -0.34999714565924382
  reference::Mlp mlp = two_by_two();
  reference::Gradients g = reference::zero_gradients(mlp);
  reference::accumulate_gradients(mlp, kX, kTarget, 1.0, g);
  reference::AdamState state = reference::zero_adam_state(mlp);
  reference::adam_step(mlp, g, state, 0.1);
  EXPECT_EQ(state.t, 1);
  const std::vector<double> w1 = {0.59999999589490446, -0.34999714565924382, 0.15000000410509554,
                                  0.59999714565924382};
  const std::vector<double> w2 = {1.0999999809287598, 0.099999979751744978, -0.099999983212750204,
                                  -1.0999999821766958};
  for (size_t i = 0; i < 4; ++i) {
    expect_close(mlp.w1[0][i], w1[i], "W1 after Adam");
    expect_close(mlp.w2[0][i], w2[i], "W2 after Adam");
  }
  // The moments are the textbook ones.
  expect_close(state.m.w1[0][0], 0.1 * -0.24359967952194240, "m");
  expect_close(state.v.w1[0][0], 0.001 * 0.24359967952194240 * 0.24359967952194240, "v");
}

TEST(Reference, GradientsOfAStackMatchFiniteDifferences) {
  reference::Mlp mlp{.hidden = 3, .ffn = 5, .seq = 2, .w1 = {}, .w2 = {}};
  double v = 0.1;
  for (int b = 0; b < 3; ++b) {
    mlp.w1.emplace_back(15);
    mlp.w2.emplace_back(15);
    for (double& w : mlp.w1.back()) w = std::sin(v += 0.37);
    for (double& w : mlp.w2.back()) w = 0.5 * std::cos(v += 0.53);
  }
  const std::vector<double> x = {0.3, -0.8, 0.5, 1.1, 0.2, -0.4};
  const std::vector<double> t = {0.1, 0.2, -0.3, 0.0, 0.4, -0.5};
  reference::Gradients g = reference::zero_gradients(mlp);
  reference::accumulate_gradients(mlp, x, t, 1.0, g);
  const double h = 1e-6;
  for (int b = 0; b < 3; ++b) {
    for (auto [w, dw] : {std::pair{&mlp.w1[b], &g.w1[b]}, std::pair{&mlp.w2[b], &g.w2[b]}}) {
      for (size_t i = 0; i < w->size(); i += 4) {
        const double keep = (*w)[i];
        (*w)[i] = keep + h;
        const double plus = reference::mse(reference::forward(mlp, x), t);
        (*w)[i] = keep - h;
        const double minus = reference::mse(reference::forward(mlp, x), t);
        (*w)[i] = keep;
        EXPECT_NEAR((*dw)[i], (plus - minus) / (2 * h), 1e-8) << "block " << b << " index " << i;
      }
    }
  }
}

MlpConfig small_config(OptimizerKind optimizer) {
  MlpConfig c;
  c.hidden = 6;
  c.ffn = 10;
  c.seq = 3;
  c.layers_per_stage = 2;
  c.num_stages = 3;
  c.num_microbatches = 3;
  c.num_replicas = 2;
  c.optimizer = optimizer;
  return c;
}

// The two implementations of the model share only their inputs, so agreement to rounding is
// evidence that both compute the MLP of docs/runtime.md.
TEST(Reference, AgreesWithTheWorkloadsSequentialRunToRounding) {
  for (OptimizerKind opt : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
    const MlpConfig c = small_config(opt);
    const ReferenceResult naive = run_independent_reference(c, 4);
    const ReferenceResult same_code = run_reference(c, 4);
    ASSERT_EQ(naive.losses.size(), 4u);
    for (size_t s = 0; s < 4; ++s)
      EXPECT_NEAR(naive.losses[s], same_code.losses[s], 1e-13 * same_code.losses[s]);
    ASSERT_EQ(naive.stage_params.size(), 3u);
    for (int s = 0; s < 3; ++s) {
      const auto& a = naive.stage_params[s];
      const auto& b = same_code.stage_params[s];
      ASSERT_EQ(a.size(), b.size());
      double diff = 0;
      for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
      EXPECT_LE(diff, 1e-13) << to_string(opt) << " stage " << s;
      EXPECT_NE(a, initial_stage_params(c, s)) << "the weights were updated";
    }
    EXPECT_LT(naive.losses.back(), naive.losses.front()) << to_string(opt);
  }
}

TEST(Reference, ADifferentLearningRateIsNoticed) {
  // Guards the comparison above against vacuity: a changed hyper-parameter moves the weights
  // by far more than the tolerance.
  MlpConfig c = small_config(OptimizerKind::kSgd);
  const ReferenceResult a = run_independent_reference(c, 2);
  c.learning_rate = 0.05 * (1 + 1e-6);
  const ReferenceResult b = run_independent_reference(c, 2);
  double diff = 0;
  for (size_t i = 0; i < a.stage_params[0].size(); ++i)
    diff = std::max(diff, std::abs(a.stage_params[0][i] - b.stage_params[0][i]));
  EXPECT_GT(diff, 1e-10);
}

// The MoE reference's gradient (one SGD step with lr 1: w0 - w1) against central differences of
// its own loss, for router and expert weights, with both router scorings: the check that the
// hand-derived backward (softmax and sigmoid Jacobians, gates, experts) is the loss's gradient.
TEST(MoeReference, GradientMatchesCentralDifferencesOfTheLoss) {
  for (RouterScoring router : {RouterScoring::kSoftmax, RouterScoring::kSigmoid}) {
    MlpConfig c;
    c.hidden = 4;
    c.ffn = 6;
    c.seq = 3;
    c.layers_per_stage = 1;
    c.num_stages = 2;
    c.num_microbatches = 2;
    c.num_replicas = 1;
    c.experts = 4;
    c.top_k = 2;
    c.router = router;
    c.learning_rate = 1.0;
    std::vector<std::vector<double>> w0 = {moe_initial_stage_params(c, 0),
                                           moe_initial_stage_params(c, 1)};
    const ReferenceResult one = run_independent_moe_reference(c, 1, &w0);
    const MoeLayout layout(c);
    // Router weights of both stages, W1 and W2 of some experts.
    const std::vector<std::pair<int, size_t>> probes = {
        {0, layout.router(0) + 1}, {1, layout.router(0) + 6}, {0, layout.w1(0, 2) + 5},
        {1, layout.w2(0, 1) + 3},  {1, layout.w1(0, 3) + 0},  {0, layout.w2(0, 0) + 7}};
    int nonzero = 0;
    for (const auto& [s, i] : probes) {
      const double g = w0[s][i] - one.stage_params[s][i];
      const double h = 1e-5;
      std::vector<std::vector<double>> plus = w0, minus = w0;
      plus[s][i] += h;
      minus[s][i] -= h;
      const double fd = (run_independent_moe_reference(c, 1, &plus).losses[0] -
                         run_independent_moe_reference(c, 1, &minus).losses[0]) /
                        (2 * h);
      EXPECT_NEAR(g, fd, 1e-7 + 1e-5 * std::abs(fd))
          << to_string(router) << " stage " << s << " " << describe_stage_param(c, i);
      if (std::abs(g) > 1e-6) ++nonzero;
    }
    EXPECT_GE(nonzero, 4) << "the probes must see real gradients";
  }
}

}  // namespace
}  // namespace jaxpp
