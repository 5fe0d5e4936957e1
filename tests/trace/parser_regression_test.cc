// Regression tests for trace-parser findings of the bad-input catalogue (docs/hardening.md).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "graph/limits.h"
#include "tests/trace/trace_fixture.h"
#include "trace/export.h"
#include "trace/trace.h"

namespace jaxpp {
namespace {

nlohmann::json empty_trace(int64_t num_actors) {
  return {{"format", "jaxpp-sim-trace"},
          {"version", 1},
          {"source", "simulated"},
          {"num_actors", num_actors},
          {"events", nlohmann::json::array()}};
}

TEST(TraceParserRegression, HugeActorCountIsAnInputError) {
  // Was: `export --trace t.json -o x.txt` drew 2e9 empty rows until killed.
  try {
    trace_from_json(empty_trace(2'000'000'000), "t.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("t.json: field 'num_actors': too large: 2000000000"),
              std::string::npos)
        << e.what();
  }
}

TEST(TraceParserRegression, ActorCountAtTheLimitIsAccepted) {
  const Trace t = trace_from_json(empty_trace(kMaxStages), "t.json");
  EXPECT_EQ(t.num_actors, kMaxStages);
}

// --- Physically impossible traces (issue 16, class 7): `export` drew them and
// `calibrate --from-trace` fitted them. ---------------------------------------------------------

std::string error_of(const nlohmann::json& j) {
  try {
    trace_from_json(j, "t.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// The fixture's events in file order include: [0] actor 0 compute 0..1 ms, [1] actor 0 send->1
// 1..1.25 ms, [2] actor 0 compute 1..2 ms, [3] actor 1 recv<-0 1..1.25 ms, [4] actor 1 compute
// 1.25..2.25 ms, [5] actor 0 send->1 2..2.25 ms, [6] actor 1 recv<-0 2..2.25 ms.
nlohmann::json fixture() { return trace_to_json(testing::small_trace()); }

TEST(TraceParserRegression, OverlappingComputeEventsOfOneActorAreRejected) {
  nlohmann::json j = fixture();
  j["events"][2]["start_s"] = 0.0005;  // starts before events[0] (0 .. 1 ms) ends
  const std::string err = error_of(j);
  EXPECT_NE(err.find("t.json: events[2]: field 'start_s': overlaps events[0] on stream compute of "
                     "actor 0"),
            std::string::npos)
      << err;
}

TEST(TraceParserRegression, OverlappingSendsOnOneStreamAreRejected) {
  nlohmann::json j = fixture();
  j["events"][5]["start_s"] = 0.0012;  // send->1 of actor 0 while events[1] (1 .. 1.25 ms) runs
  const std::string err = error_of(j);
  EXPECT_NE(err.find("events[5]: field 'start_s': overlaps events[1] on stream send->1"),
            std::string::npos)
      << err;
}

TEST(TraceParserRegression, EventsThatOnlyTouchAreAccepted) {
  // events[2] starts exactly when events[0] ends (1 ms): back to back, not overlapping.
  EXPECT_EQ(error_of(fixture()), "(no error)");
}

TEST(TraceParserRegression, ReceivesPostedTogetherMayOverlap) {
  nlohmann::json j = fixture();
  j["events"][6]["start_s"] = 0.001;  // both receives of actor 1 from actor 0 posted at 1 ms
  EXPECT_EQ(error_of(j), "(no error)");
}

TEST(TraceParserRegression, NegativeDurationNamesTheEventAndField) {
  nlohmann::json j = fixture();
  j["events"][4]["end_s"] = 0.001;  // starts at 1.25 ms
  const std::string err = error_of(j);
  EXPECT_NE(err.find("t.json: events[4]: field 'end_s'"), std::string::npos) << err;
  EXPECT_NE(err.find("negative duration"), std::string::npos) << err;
}

TEST(TraceParserRegression, IntegersThatWouldWrapInAnIntAreRejected) {
  // 2^32 + 1 used to become 1 after the cast to int.
  for (const char* key : {"instruction", "stage", "peer", "step"}) {
    nlohmann::json j = fixture();
    j["events"][1][key] = 4294967297LL;
    const std::string err = error_of(j);
    EXPECT_NE(err.find(std::string("events[1]: field '") + key + "': expected an integer in"),
              std::string::npos)
        << key << ": " << err;
  }
}

TEST(TraceParserRegression, StepBeyondNumStepsIsRejected) {
  nlohmann::json j = fixture();
  j["events"][2]["step"] = 1;  // num_steps is 1
  EXPECT_NE(error_of(j).find("events[2]: field 'step': expected an integer in [0, 0], got 1"),
            std::string::npos);
}

TEST(TraceParserRegression, AnInstructionRecordedTwiceIsRejected) {
  nlohmann::json j = fixture();
  j["events"].push_back(j["events"][0]);
  j["events"].back()["start_s"] = 0.02;
  j["events"].back()["end_s"] = 0.021;
  const std::string err = error_of(j);
  EXPECT_NE(err.find("field 'instruction': actor 0, step 0, instruction 0 is recorded twice (also "
                     "events[0])"),
            std::string::npos)
      << err;
}

TEST(TraceParserRegression, StreamThatContradictsTheOpIsRejected) {
  nlohmann::json j = fixture();
  j["events"][0]["stream"] = "send->1";  // a compute
  EXPECT_NE(error_of(j).find("events[0]: field 'stream': a compute with peer -1 runs on stream "
                             "\"compute\", got \"send->1\""),
            std::string::npos);
}

TEST(TraceParserRegression, SendToItselfOrWithoutPeerIsRejected) {
  nlohmann::json j = fixture();
  j["events"][1]["peer"] = 0;  // actor 0 sending to actor 0
  j["events"][1].erase("stream");
  EXPECT_NE(error_of(j).find("events[1]: field 'peer': a send needs a peer actor other than its "
                             "own (0), got 0"),
            std::string::npos);
  j["events"][1]["peer"] = -1;
  EXPECT_NE(error_of(j).find("events[1]: field 'peer'"), std::string::npos);
}

TEST(TraceParserRegression, TimesBeyondABillionSecondsAreRejected) {
  nlohmann::json j = fixture();
  j["events"][19]["end_s"] = 1e302;
  EXPECT_NE(error_of(j).find("events[19]: field 'end_s': expected a time in seconds <= 1e9"),
            std::string::npos);
  j = fixture();
  j["memory"][0]["time_s"] = 1e300;
  EXPECT_NE(error_of(j).find("memory[0]: field 'time_s'"), std::string::npos);
}

TEST(TraceParserRegression, TagBelowMinusOneIsRejected) {
  nlohmann::json j = fixture();
  j["events"][1]["tag"] = -7;
  EXPECT_NE(error_of(j).find("events[1]: field 'tag': expected -1 or a tag >= 0, got -7"),
            std::string::npos);
}

}  // namespace
}  // namespace jaxpp
