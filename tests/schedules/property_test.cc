// Property: every built-in schedule over a sampled grid (p <= 16, m <= 64, v <= 4) validates,
// lowers to a Program, and that program passes check_program with one recv per send.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "graph/error.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "schedules/validate.h"

namespace jaxpp {
namespace {

struct Case {
  int p, v, m;
};

// A deterministic sample of the grid: all small shapes plus a few large corners.
std::vector<Case> grid() {
  std::vector<Case> cases;
  for (int p : {1, 2, 3, 4, 5}) {
    for (int v : {1, 2, 3, 4}) {
      for (int m : {1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 16}) cases.push_back({p, v, m});
    }
  }
  for (int p : {8, 16}) {
    for (int v : {1, 2, 4}) {
      for (int m : {p, 2 * p, 33, 64}) cases.push_back({p, v, m});
    }
  }
  return cases;
}

int stages_for(const std::string& name, const Case& c) {
  if (name == "DualPipeV" || name == "ZB-V") return 2 * c.p;
  if (name == "Interleaved1F1B" || name == "KimiK2" || name == "InterleavedGPipe" ||
      name == "LoopedBFS" || name == "MegatronInterleaved" || name == "Circular" ||
      name == "CircularWithReversedBackward") {
    return c.v * c.p;
  }
  return c.p;
}

bool uses_v(const std::string& name) {
  return name == "DualPipeV" || name == "ZB-V" || name == "Interleaved1F1B" || name == "KimiK2" ||
         name == "InterleavedGPipe" || name == "LoopedBFS" || name == "MegatronInterleaved" ||
         name == "Circular" || name == "CircularWithReversedBackward";
}

TEST(SchedulesProperty, EveryBuiltinValidatesAndLowersOverTheGrid) {
  std::map<std::string, int> checked;
  for (const ScheduleInfo& info : all_schedules()) {
    for (const Case& c : grid()) {
      if (c.v > 1 && !uses_v(info.name)) continue;
      if ((info.name == "DualPipeV" || info.name == "ZB-V") && c.v > 1) continue;
      for (bool fuse : {false, true}) {
        if (fuse && info.name != "Interleaved1F1B" && info.name != "KimiK2") continue;
        ScheduleParams params{.num_actors = c.p,
                              .num_stages = stages_for(info.name, c),
                              .num_microbatches = c.m,
                              .fuse_steady_state = fuse};
        Schedule s;
        try {
          s = info.generate(params);
        } catch (const InputError&) {
          continue;  // outside this schedule's stated constraints
        }
        const std::string label = info.name + " p=" + std::to_string(c.p) +
                                  " S=" + std::to_string(s.num_stages) +
                                  " m=" + std::to_string(c.m) + (fuse ? " fused" : "");
        const ValidationReport report = validate_schedule(s);
        ASSERT_TRUE(report.ok()) << label << ": " << report.errors[0];
        Program prog;
        ASSERT_NO_THROW(prog = lower(s, {})) << label;
        // Every send has exactly one recv with its tag on the peer (check_program does the
        // full check; count them independently here).
        std::map<int64_t, int> sends, recvs;
        int64_t computes = 0;
        for (int r = 0; r < prog.num_actors; ++r) {
          for (const Instruction& ins : prog.actors[r]) {
            if (ins.op == OpKind::kSend) ++sends[ins.tag];
            if (ins.op == OpKind::kRecv) ++recvs[ins.tag];
            if (ins.op == OpKind::kCompute) ++computes;
          }
        }
        EXPECT_EQ(sends, recvs) << label;
        int64_t items = 0;
        for (const auto& a : s.actors) items += static_cast<int64_t>(a.size());
        EXPECT_EQ(computes, items) << label;
        ++checked[info.name];
      }
    }
  }
  for (const ScheduleInfo& info : all_schedules()) {
    EXPECT_GT(checked[info.name], 10) << info.name << " was checked on too few grid points";
  }
}

}  // namespace
}  // namespace jaxpp
