// MlpWorkload numerics: gradients against finite differences, split backward equals full
// backward, and the sequential reference.
#include "runtime/workload.h"

#include <gtest/gtest.h>

#include <cmath>

namespace jaxpp {
namespace {

MlpConfig tiny_config(int stages) {
  MlpConfig c;
  c.hidden = 6;
  c.ffn = 10;
  c.seq = 3;
  c.layers_per_stage = 2;
  c.num_stages = stages;
  c.num_microbatches = 1;
  c.num_replicas = 1;
  return c;
}

double loss_of(const MlpConfig& c, const std::vector<double>& params) {
  MlpWorkload w(c, 0, 0, {0});
  w.mutable_params(0) = params;
  w.run_task({TaskKind::kF, 0, 0}, 0);
  return w.losses().at(0).at(0);
}

TEST(MlpWorkload, WeightGradientsMatchFiniteDifferences) {
  MlpConfig c = tiny_config(1);
  MlpWorkload w(c, 0, 0, {0});
  w.run_task({TaskKind::kF, 0, 0}, 0);
  w.run_task({TaskKind::kB, 0, 0}, 0);
  std::vector<double> grads(w.grads(0).begin(), w.grads(0).end());
  std::vector<double> p = w.params(0);
  const double eps = 1e-6;
  for (size_t i = 0; i < p.size(); i += 7) {
    std::vector<double> plus = p, minus = p;
    plus[i] += eps;
    minus[i] -= eps;
    double fd = (loss_of(c, plus) - loss_of(c, minus)) / (2 * eps);
    EXPECT_NEAR(grads[i], fd, 1e-7 + 1e-5 * std::abs(fd)) << "parameter " << i;
  }
}

TEST(MlpWorkload, SplitBackwardEqualsFullBackward) {
  MlpConfig c = tiny_config(2);
  c.num_microbatches = 2;
  MlpWorkload full(c, 0, 0, {0, 0});
  MlpWorkload split(c, 0, 0, {0, 0});
  for (int mb = 0; mb < 2; ++mb) {
    for (MlpWorkload* w : {&full, &split}) {
      w->run_task({TaskKind::kF, 0, mb}, 0);
      w->run_task({TaskKind::kF, 1, mb}, 0);
    }
    full.run_task({TaskKind::kB, 1, mb}, 0);
    full.run_task({TaskKind::kB, 0, mb}, 0);
    split.run_task({TaskKind::kI, 1, mb}, 0);
    split.run_task({TaskKind::kI, 0, mb}, 0);
  }
  for (int mb = 0; mb < 2; ++mb) {
    split.run_task({TaskKind::kW, 0, mb}, 0);
    split.run_task({TaskKind::kW, 1, mb}, 0);
  }
  for (int s = 0; s < 2; ++s) {
    auto a = full.grads(s);
    auto b = split.grads(s);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_DOUBLE_EQ(a[i], b[i]);
  }
  // Everything stashed was freed at its last use: only parameters and gradients remain.
  EXPECT_EQ(split.bytes_held(), full.bytes_held());
  EXPECT_EQ(full.bytes_held(), 2 * 2 * c.params_per_stage() * 8);
}

TEST(MlpWorkload, ReferenceTrainingLowersTheLoss) {
  MlpConfig c = tiny_config(3);
  c.num_microbatches = 4;
  c.num_replicas = 2;
  ReferenceResult r = run_reference(c, 5);
  ASSERT_EQ(r.losses.size(), 5u);
  EXPECT_LT(r.losses.back(), r.losses.front());
  ASSERT_EQ(r.stage_params.size(), 3u);
  EXPECT_NE(r.stage_params[0], initial_stage_params(c, 0));
}

TEST(MlpWorkload, AdamReferenceLowersTheLoss) {
  MlpConfig c = tiny_config(2);
  c.num_microbatches = 2;
  c.optimizer = OptimizerKind::kAdam;
  c.learning_rate = 1e-2;
  ReferenceResult r = run_reference(c, 5);
  EXPECT_LT(r.losses.back(), r.losses.front());
}

TEST(MlpWorkload, DeepStacksStartFiniteAndLearnAtTheDefaultRate) {
  // Output weights shrink as sqrt(8 / blocks) past 8 blocks: 100 blocks started with a loss of
  // 1.4e5 and went to inf/NaN in the next step; up to 8 blocks keep their weights.
  for (int stages : {4, 50}) {
    MlpConfig c = tiny_config(stages);
    c.num_microbatches = 2;
    const ReferenceResult r = run_reference(c, 4);
    for (double l : r.losses) ASSERT_TRUE(std::isfinite(l)) << stages << " stages";
    EXPECT_LT(r.losses.front(), 2.0) << stages << " stages";
    EXPECT_LT(r.losses.back(), r.losses.front()) << stages << " stages";
  }
  MlpConfig shallow = tiny_config(4), deep = tiny_config(50);
  const std::vector<double> a = initial_stage_params(shallow, 0), b = initial_stage_params(deep, 0);
  const size_t w2 = static_cast<size_t>(shallow.hidden) * shallow.ffn_size();  // w1's size
  EXPECT_EQ(std::vector<double>(a.begin(), a.begin() + w2),
            std::vector<double>(b.begin(), b.begin() + w2));  // input weights unchanged
  EXPECT_NEAR(b[w2] / a[w2], std::sqrt(8.0 / 100), 1e-12);     // output weights scaled
}

TEST(MlpWorkload, InitialWeightsAreDeterministicAndDifferPerStage) {
  MlpConfig c = tiny_config(2);
  EXPECT_EQ(initial_stage_params(c, 1), initial_stage_params(c, 1));
  EXPECT_NE(initial_stage_params(c, 0), initial_stage_params(c, 1));
}

}  // namespace
}  // namespace jaxpp
