// The Megatron-LM hand-off of a cost-aware (balanced-time) partition: the uneven layout is
// exported as --pipeline-model-parallel-layout and reads back to the same stage sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "costmodel/cluster.h"
#include "graph/model.h"
#include "handoff/handoff.h"
#include "simulator/plan_builder.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Plan balanced_llama_plan(int pp, int v, const std::string& schedule) {
  PlanRequest req;
  req.model = load_model("llama3-8b");
  req.cluster = load_cluster("a100-80g");
  req.config.gpus = pp;
  req.config.pp = pp;
  req.config.virtual_stages = v;
  req.config.global_batch = 16;
  req.config.microbatch_size = 1;
  req.config.schedule = schedule;
  req.partition = PartitionMode::kBalancedTime;
  return build_plan(req);
}

TEST(BalancedPartitionHandoff, MegatronExportGivesTheUnevenLayoutAndReadsBack) {
  for (const auto& [v, schedule, name] :
       {std::tuple{1, "1f1b", "Std1F1B"}, std::tuple{2, "megatron", "MegatronInterleaved"}}) {
    SCOPED_TRACE(name);
    const Plan plan = balanced_llama_plan(4, v, schedule);
    const std::string args = megatron_arguments(plan, name);
    EXPECT_THAT(args, HasSubstr("--pipeline-model-parallel-layout"));
    EXPECT_THAT(args, Not(HasSubstr("--num-virtual-stages-per-pipeline-rank")));
    const MegatronSettings back = parse_megatron_arguments(args, "args");
    ASSERT_EQ(static_cast<int>(back.stage_layers.size()), plan.partition.num_stages());
    for (int s = 0; s < plan.partition.num_stages(); ++s)
      EXPECT_EQ(back.stage_layers[s], plan.partition.size(s)) << "stage " << s;
  }
}

}  // namespace
}  // namespace jaxpp
