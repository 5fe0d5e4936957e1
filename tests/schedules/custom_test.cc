// Custom schedule formats: JSON and PyTorch pipelining CSV, round trips and precise errors.
#include <gtest/gtest.h>

#include <string>

#include "graph/error.h"
#include "schedules/custom.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

std::string data(const std::string& name) {
  return std::string(JAXPP_TEST_DATA_DIR) + "/schedules/" + name;
}

std::vector<std::vector<TaskRef>> flattened(const Schedule& s) {
  std::vector<std::vector<TaskRef>> out;
  for (const auto& items : s.actors) {
    std::vector<TaskRef> flat;
    for (const auto& item : items) flat.insert(flat.end(), item.begin(), item.end());
    out.push_back(flat);
  }
  return out;
}

TEST(CustomSchedules, JsonRoundTripKeepsEveryBuiltinExactly) {
  for (const ScheduleInfo& info : all_schedules()) {
    const bool v_shape = info.name == "DualPipeV" || info.name == "ZB-V";
    const bool loop = info.name == "Interleaved1F1B" || info.name == "KimiK2" ||
                      info.name == "InterleavedGPipe" || info.name == "LoopedBFS" ||
                      info.name == "MegatronInterleaved" || info.name == "Circular" ||
                      info.name == "CircularWithReversedBackward";
    const Schedule s = info.generate({.num_actors = 3,
                                      .num_stages = v_shape ? 6
                                                    : loop  ? 6
                                                            : 3,
                                      .num_microbatches = 6});
    const Schedule back = parse_schedule_json(schedule_to_json_text(s), "roundtrip.json");
    EXPECT_EQ(back, s) << info.name;
  }
}

TEST(CustomSchedules, CsvRoundTripKeepsOrdersAndPlacement) {
  for (const char* name : {"Std1F1B", "ZeroBubble", "DualPipeV", "ZB-V", "LoopedBFS"}) {
    const Schedule s = generate_schedule(name, {.num_actors = 3, .num_microbatches = 6});
    const Schedule back = parse_schedule_csv(schedule_to_csv(s), "roundtrip.csv");
    EXPECT_EQ(flattened(back), flattened(s)) << name;
    // Kind may differ when mappings coincide (loop with S = p is linear); the mapping may not.
    EXPECT_EQ(back.placement.stage_to_actor, s.placement.stage_to_actor) << name;
    EXPECT_EQ(back.split_backward, s.split_backward) << name;
    EXPECT_EQ(back.num_microbatches, s.num_microbatches) << name;
  }
}

TEST(CustomSchedules, CsvOfStd1F1BUsesPyTorchCells) {
  const Schedule s = generate_schedule("1f1b", {.num_actors = 2, .num_microbatches = 2});
  EXPECT_EQ(schedule_to_csv(s), "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
}

TEST(CustomSchedules, CsvWithIdleCellsLoadsAndValidates) {
  const Schedule s = load_schedule_file(data("1f1b_p2_m4.csv"));
  EXPECT_EQ(s.num_actors(), 2);
  EXPECT_EQ(s.num_stages, 2);
  EXPECT_EQ(s.num_microbatches, 4);
  EXPECT_EQ(s.placement.kind, PlacementKind::kLinear);
  EXPECT_EQ(to_text(s),
            to_text(generate_schedule("1f1b", {.num_actors = 2, .num_microbatches = 4})));
  EXPECT_TRUE(validate_schedule(s).ok());
}

TEST(CustomSchedules, CsvWithSplitBackwardInfersSplitStages) {
  const Schedule s = load_schedule_file(data("zero_bubble_p2_m2.csv"));
  EXPECT_EQ(s.split_backward, (std::vector<bool>{false, true}));
  EXPECT_TRUE(validate_schedule(s).ok());
}

TEST(CustomSchedules, CsvFusedExtensionKeepsTheGroup) {
  const Schedule s = parse_schedule_csv("0F0,0B0\n", "x.csv");
  EXPECT_EQ(s.actors[0].size(), 2u);
  const Schedule fused = parse_schedule_csv("0F0+0B0\n", "x.csv");
  ASSERT_EQ(fused.actors[0].size(), 1u);
  EXPECT_EQ(fused.actors[0][0].size(), 2u);
}

TEST(CustomSchedules, LoopPlacementIsInferredFromRows) {
  const Schedule s =
      generate_schedule("interleaved", {.num_actors = 2, .num_stages = 4, .num_microbatches = 4});
  const Schedule back = parse_schedule_csv(schedule_to_csv(s), "i.csv");
  EXPECT_EQ(back.placement.kind, PlacementKind::kLoop);
}

TEST(CustomSchedules, MalformedCsvNamesLineActorCellAndToken) {
  EXPECT_EQ(error_of([] { load_schedule_file(data("malformed.csv")); }),
            data("malformed.csv") +
                ": line 2 (actor 1), cell 1: bad action '1X1' (expected "
                "<stage><F|I|W|B><microbatch>, e.g. 0F3; only the compute_only dialect is "
                "supported)");
}

TEST(CustomSchedules, CommunicationActionsAreRejected) {
  const std::string e = error_of([] { parse_schedule_csv("0F0,0SEND_F0\n", "c.csv"); });
  EXPECT_NE(e.find("c.csv: line 1 (actor 0), cell 1: bad action '0SEND_F0'"), std::string::npos)
      << e;
}

TEST(CustomSchedules, MalformedJsonNamesTheFileAndPosition) {
  const std::string e = error_of([] { load_schedule_file(data("malformed.json")); });
  EXPECT_NE(e.find("malformed.json"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
}

TEST(CustomSchedules, BadJsonTokenNamesActorAndPosition) {
  const std::string e =
      error_of([] { parse_schedule_json(R"({"actors": [["F0@s0", "X1@s0"]]})", "t.json"); });
  EXPECT_EQ(e,
            "t.json: field 'actors': actor 0, position 1: bad task token 'X1@s0' (expected "
            "<F|B|I|W><microbatch>@s<stage>, e.g. F3@s2; fused groups joined by '+')");
}

TEST(CustomSchedules, StageOnTwoActorsIsRejectedWithoutExplicitPlacement) {
  const std::string e = error_of(
      [] { parse_schedule_json(R"({"actors": [["F0@s0", "B0@s0"], ["F0@s0"]]})", "t.json"); });
  EXPECT_NE(e.find("stage 0 appears on two actors (actor 0 position 0 and actor 1 position 0"),
            std::string::npos)
      << e;
}

TEST(CustomSchedules, UnknownJsonFieldIsRejected) {
  const std::string e = error_of([] {
    parse_schedule_json(R"({"actors": [["F0@s0", "B0@s0"]], "microbatches": 1})", "t.json");
  });
  EXPECT_NE(e.find("field 'microbatches': unknown field"), std::string::npos) << e;
}

TEST(CustomSchedules, MissingFileSaysItCannotBeRead) {
  EXPECT_EQ(error_of([] { load_schedule_file("/nonexistent/s.json"); }),
            "/nonexistent/s.json: cannot read file: No such file or directory");
}

TEST(CustomSchedules, FormatIsDetectedByExtensionThenContent) {
  EXPECT_EQ(detect_schedule_format("a.CSV", "{"), ScheduleFileFormat::kCsv);
  EXPECT_EQ(detect_schedule_format("a.json", "0F0"), ScheduleFileFormat::kJson);
  EXPECT_EQ(detect_schedule_format("a.txt", "  {\"actors\": []}"), ScheduleFileFormat::kJson);
  EXPECT_EQ(detect_schedule_format("a.txt", "0F0,0B0"), ScheduleFileFormat::kCsv);
}

}  // namespace
}  // namespace jaxpp
