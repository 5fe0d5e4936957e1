// PerturbedCost (costmodel/perturbed_cost.h): factors on one actor and one link, seeded
// deterministic jitter within its band, and spec parsing errors that name the item.
#include "costmodel/perturbed_cost.h"

#include <gtest/gtest.h>

#include "costmodel/stage_times_cost.h"
#include "graph/error.h"

namespace jaxpp {
namespace {

Instruction perturb_test_compute(TaskKind kind, int stage, int mb) {
  Instruction ins;
  ins.op = OpKind::kCompute;
  ins.stage = stage;
  ins.tasks.push_back(TaskRef{kind, stage, mb});
  return ins;
}

TEST(PerturbedCost, SlowActorScalesOnlyThatActorsCompute) {
  const StageTimesCost base(uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 1e-4));
  const PerturbedCost cost(base, parse_perturbation("slow-actor=2:1.5", "--perturb"));
  EXPECT_DOUBLE_EQ(cost.compute_s(2, perturb_test_compute(TaskKind::kF, 2, 0)), 1.5e-3);
  EXPECT_DOUBLE_EQ(cost.compute_s(1, perturb_test_compute(TaskKind::kF, 1, 0)), 1e-3);
}

TEST(PerturbedCost, SlowLinkScalesBothDirectionsOfThatLinkOnly) {
  const StageTimesCost base(uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 1e-4));
  const PerturbedCost cost(base, parse_perturbation("slow-link=1-2:3", "--perturb"));
  Instruction send = perturb_test_compute(TaskKind::kF, 1, 0);
  send.op = OpKind::kSend;
  EXPECT_DOUBLE_EQ(cost.transfer_latency_s(1, 2, send), 3e-4);
  EXPECT_DOUBLE_EQ(cost.transfer_latency_s(2, 1, send), 3e-4);
  EXPECT_DOUBLE_EQ(cost.transfer_latency_s(0, 1, send), 1e-4);
}

TEST(PerturbedCost, JitterIsWithinItsBandDeterministicAndDependsOnTheSeed) {
  const StageTimesCost base(uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 0));
  const PerturbedCost a(base, parse_perturbation("jitter=0.2,seed=1", "--perturb"));
  const PerturbedCost b(base, parse_perturbation("jitter=0.2,seed=1", "--perturb"));
  const PerturbedCost c(base, parse_perturbation("jitter=0.2,seed=2", "--perturb"));
  int differ = 0;
  for (int mb = 0; mb < 50; ++mb) {
    const Instruction ins = perturb_test_compute(TaskKind::kI, 1, mb);
    const double d = a.compute_s(1, ins);
    EXPECT_GE(d, 0.8e-3);
    EXPECT_LE(d, 1.2e-3);
    EXPECT_EQ(d, b.compute_s(1, ins));
    differ += d != c.compute_s(1, ins) ? 1 : 0;
  }
  EXPECT_GT(differ, 40);
}

TEST(PerturbedCost, MalformedSpecNamesTheItem) {
  try {
    parse_perturbation("slow-actor=2:1.5,jitter=1.5", "--perturb");
    FAIL() << "jitter 1.5 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--perturb: 'jitter=1.5'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_perturbation("slow=1", "--perturb"), InputError);
  EXPECT_THROW(parse_perturbation("slow-actor=2", "--perturb"), InputError);
  EXPECT_THROW(check_perturbation(parse_perturbation("slow-actor=9:2", "x"), 4, "x"), InputError);
}

}  // namespace
}  // namespace jaxpp
