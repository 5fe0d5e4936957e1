// Regression tests for schedule-parser findings of the fuzzers and the bad-input catalogue
// (docs/hardening.md): each input used to overflow, exhaust memory, run for hours or escape as a
// non-InputError exception, and must now be a one-line InputError.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "graph/error.h"
#include "schedules/custom.h"
#include "schedules/registry.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

TEST(ScheduleParserRegression, JsonTokenWithTheLargestIntStageIsAnInputError) {
  // Was: `max_stage + 1` overflowed int (undefined behaviour) before any check.
  const std::string e =
      error_of([] { parse_schedule_json(R"({"actors": [["F0@s2147483647"]]})", "s.json"); });
  EXPECT_NE(e.find("s.json: 2147483648 stages is more than the limit of 16384"), std::string::npos)
      << e;
}

TEST(ScheduleParserRegression, JsonTokenWithTheLargestIntMicrobatchIsAnInputError) {
  const std::string e =
      error_of([] { parse_schedule_json(R"({"actors": [["F2147483647@s0"]]})", "s.json"); });
  EXPECT_NE(e.find("microbatches is more than the limit"), std::string::npos) << e;
}

TEST(ScheduleParserRegression, JsonWithAHugeDeclaredSizeIsAnInputError) {
  // Was: validate allocated per-microbatch state for 2e9 microbatches.
  const std::string e = error_of([] {
    parse_schedule_json(R"({"num_microbatches": 2000000000, "actors": [["F0@s0", "B0@s0"]]})",
                        "s.json");
  });
  EXPECT_NE(e.find("2000000000 microbatches is more than the limit"), std::string::npos) << e;
}

TEST(ScheduleParserRegression, CsvWithAHugeStageIsAnInputError) {
  // Was: placement inference allocated a vector of a billion stages.
  const std::string e = error_of([] { parse_schedule_csv("0F0,999999999F0\n", "s.csv"); });
  EXPECT_NE(e.find("s.csv: 1000000000 stages is more than the limit"), std::string::npos) << e;
}

TEST(ScheduleParserRegression, JsonNumberTooLargeForADoubleIsAnInputError) {
  // Was: nlohmann's out_of_range.406 escaped parse_schedule_json.
  const std::string e =
      error_of([] { parse_schedule_json(R"({"actors": [["F0@s0"]], "x": 1e999})", "s.json"); });
  EXPECT_NE(e.find("s.json: malformed JSON"), std::string::npos) << e;
}

TEST(ScheduleParserRegression, GeneratorsRefuseHugeSizesInsteadOfRunningForHours) {
  // Was: `show --schedule 1f1b --pp 4 --microbatches 2000000000` ran until killed.
  ScheduleParams p;
  p.num_actors = 4;
  p.num_microbatches = 2'000'000'000;
  EXPECT_NE(error_of([&] {
              generate_schedule("1f1b", p);
            }).find("Std1F1B: 2000000000 microbatches is more than the limit"),
            std::string::npos);
  p.num_actors = 2'000'000;
  p.num_microbatches = 1;
  EXPECT_NE(error_of([&] { generate_schedule("gpipe", p); }).find("stages is more than the limit"),
            std::string::npos);
  p.num_actors = 4;
  p.num_microbatches = 8;
  EXPECT_EQ(generate_schedule("1f1b", p).num_microbatches, 8);
}

}  // namespace
}  // namespace jaxpp
