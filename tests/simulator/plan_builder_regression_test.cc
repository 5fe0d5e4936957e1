// Regression tests for configuration findings of the bad-input catalogue (docs/hardening.md).
#include <string>

#include <gtest/gtest.h>

#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/model.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

PlanRequest request_with_tp(int tp) {
  PlanRequest req;
  req.model = load_model("gpt3-1.3b");  // 16 attention heads
  req.cluster = load_cluster("a100-80g");
  req.config.gpus = 2 * tp;
  req.config.pp = 2;
  req.config.tp = tp;
  req.config.global_batch = 4;
  req.config.schedule = "1f1b";
  return req;
}

TEST(PlanBuilderRegression, TensorParallelismThatDoesNotDivideTheHeadsIsAnInputError) {
  // Was: tp 3 on 16 heads was simulated as if it were possible.
  try {
    build_plan(request_with_tp(3));
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "configuration: tp 3 does not divide the 16 attention heads of gpt3-1.3b");
  }
  EXPECT_EQ(build_plan(request_with_tp(4)).config.tp, 4);
}

TEST(PlanBuilderRegression, HugeGlobalBatchIsAnInputErrorInsteadOfHoursOfWork) {
  PlanRequest req = request_with_tp(1);
  req.config.global_batch = 2'000'000'000;
  EXPECT_THROW(build_plan(req), InputError);
}

}  // namespace
}  // namespace jaxpp
