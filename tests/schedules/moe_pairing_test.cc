// Megatron-style combined 1F1B for the MoE all-to-all overlap (schedules/moe_pairing.h): pairing
// keeps every actor's task order and only groups a backward with the forward after it.
#include <gtest/gtest.h>

#include "schedules/moe_pairing.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace jaxpp {
namespace {

Schedule make_for_pairing(const std::string& name, int p, int stages, int m) {
  ScheduleParams params;
  params.num_actors = p;
  params.num_stages = stages;
  params.num_microbatches = m;
  return generate_schedule(name, params);
}

std::vector<std::vector<TaskRef>> flat_orders(const Schedule& s) {
  std::vector<std::vector<TaskRef>> out;
  for (const auto& items : s.actors) {
    out.emplace_back();
    for (const ScheduleItem& item : items)
      out.back().insert(out.back().end(), item.begin(), item.end());
  }
  return out;
}

TEST(MoePairing, OneFOneBPairsEachSteadyStateBackwardWithTheNextForward) {
  const Schedule s = make_for_pairing("1f1b", 4, 4, 8);
  const Schedule paired = pair_backward_forward(s, "test");
  EXPECT_EQ(flat_orders(paired), flat_orders(s)) << "the task order must stay JaxPP's";
  // SCHEDULES.md's Std1F1B(4), m = 8: actor 0 runs B0 F4 B1 F5 B2 F6 B3 F7 in its steady state.
  EXPECT_EQ(to_text(paired).substr(0, to_text(paired).find('\n')),
            "actor0: F0 F1 F2 F3 [B0+F4] [B1+F5] [B2+F6] [B3+F7] B4 B5 B6 B7");
  // Last actor: F0 [B0+F1] ... [B6+F7] B7 (a backward never pairs with its own forward).
  EXPECT_EQ(actor_to_text(paired, 3),
            "F0 [B0+F1] [B1+F2] [B2+F3] [B3+F4] [B4+F5] [B5+F6] [B6+F7] B7");
  EXPECT_EQ(count_backward_forward_pairs(s), 4 + 5 + 6 + 7);
}

TEST(MoePairing, EveryBuiltInScheduleStaysDeadlockFreeAndInOrder) {
  for (const char* name :
       {"1f1b", "eager1f1b", "zb-h1", "interleaved1f1b", "kimik2", "dualpipev"}) {
    const int stages = std::string(name).find("interleaved") != std::string::npos ||
                               std::string(name) == "kimik2" || std::string(name) == "dualpipev"
                           ? 8
                           : 4;
    const Schedule s = make_for_pairing(name, 4, stages, 16);
    const Schedule paired = pair_backward_forward(s, name);
    EXPECT_TRUE(validate_schedule(paired).ok()) << name;
    EXPECT_EQ(flat_orders(paired), flat_orders(s)) << name;
  }
}

TEST(MoePairing, DualPipeVKeepsItsOwnFAndBGroups) {
  const Schedule s = make_for_pairing("dualpipev", 4, 8, 16);
  int fused_before = 0, fused_after = 0;
  for (const auto& items : s.actors)
    for (const ScheduleItem& item : items) fused_before += item.size() > 1 ? 1 : 0;
  const Schedule paired = pair_backward_forward(s, "dualpipev");
  for (const auto& items : paired.actors)
    for (const ScheduleItem& item : items) fused_after += item.size() > 1 ? 1 : 0;
  EXPECT_GE(fused_after, fused_before);
  EXPECT_EQ(fused_after - fused_before, count_backward_forward_pairs(s));
}

}  // namespace
}  // namespace jaxpp
