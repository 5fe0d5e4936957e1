// Lowering pinned by golden programs: for several schedules, with a distinct activation and
// gradient byte size per stage, lower() must produce exactly the program stored in
// tests/data/schedules/lowered/<name>.json (instructions, order, tags, deps, bytes).
//
// To regenerate after an intended change of the lowering rules, run the test with
// JAXPP_UPDATE_GOLDEN=1 in the environment and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "schedules/lower.h"
#include "schedules/registry.h"

namespace jaxpp {
namespace {

struct GoldenCase {
  std::string file;  // under tests/data/schedules/lowered/
  std::string schedule;
  ScheduleParams params;
  bool emit_grad_reduce = true;
};

std::string golden_path(const std::string& file) {
  return std::string(JAXPP_TEST_DATA_DIR) + "/schedules/lowered/" + file;
}

// Activation bytes 1000 * (s + 1) + 7, gradient bytes 100 * (s + 1) + 3: distinct per stage and
// distinct from each other, so a send carrying the wrong stage's size is caught.
LoweringOptions distinct_bytes(int num_stages, bool emit_grad_reduce) {
  LoweringOptions lo;
  for (int s = 0; s < num_stages; ++s) {
    lo.activation_bytes.push_back(1000 * (s + 1) + 7);
    lo.grad_bytes.push_back(100 * (s + 1) + 3);
  }
  lo.emit_grad_reduce = emit_grad_reduce;
  return lo;
}

class LowerGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(LowerGolden, ProgramMatchesTheStoredJson) {
  const GoldenCase& c = GetParam();
  const Schedule s = generate_schedule(c.schedule, c.params);
  const Program prog = lower(s, distinct_bytes(s.num_stages, c.emit_grad_reduce));
  const std::string actual = program_to_json(prog).dump(1) + "\n";
  const std::string path = golden_path(c.file);
  if (std::getenv("JAXPP_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << actual;
    GTEST_SKIP() << "wrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden file " << path;
  std::stringstream expected;
  expected << in.rdbuf();
  ASSERT_EQ(actual, expected.str()) << "lowered program differs from " << path;
  // The stored file also reads back as the same program.
  EXPECT_EQ(program_from_json(nlohmann::json::parse(expected.str()), path), prog);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, LowerGolden,
    ::testing::Values(
        GoldenCase{"std1f1b_p4_m8.json", "Std1F1B", {.num_actors = 4, .num_microbatches = 8}},
        GoldenCase{"zerobubble_p4_m8.json", "ZeroBubble", {.num_actors = 4, .num_microbatches = 8}},
        GoldenCase{"interleaved_p2_s4_m4.json",
                   "Interleaved1F1B",
                   {.num_actors = 2, .num_stages = 4, .num_microbatches = 4}},
        GoldenCase{"dualpipev_p2_m4.json", "DualPipeV", {.num_actors = 2, .num_microbatches = 4}},
        GoldenCase{"zbv_p2_m4.json", "ZB-V", {.num_actors = 2, .num_microbatches = 4}},
        GoldenCase{"zbh2_p3_m6.json", "ZB-H2", {.num_actors = 3, .num_microbatches = 6}},
        GoldenCase{"megatron_p2_s4_m4.json",
                   "MegatronInterleaved",
                   {.num_actors = 2, .num_stages = 4, .num_microbatches = 4}},
        GoldenCase{
            "kimik2_fused_p2_s4_m4.json",
            "KimiK2",
            {.num_actors = 2, .num_stages = 4, .num_microbatches = 4, .fuse_steady_state = true}},
        GoldenCase{"gpipe_p3_m4_no_reduce.json",
                   "GPipe",
                   {.num_actors = 3, .num_microbatches = 4},
                   /*emit_grad_reduce=*/false}),
    [](const ::testing::TestParamInfo<GoldenCase>& info) {
      std::string name = info.param.file.substr(0, info.param.file.find('.'));
      return name;
    });

}  // namespace
}  // namespace jaxpp
