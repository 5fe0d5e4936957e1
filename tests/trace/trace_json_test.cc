// Trace JSON: round trip, file helpers, and one clear error per malformed field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "graph/error.h"
#include "tests/trace/trace_fixture.h"
#include "trace/trace.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;
using testing::small_trace;

void expect_same(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.num_actors, b.num_actors);
  EXPECT_EQ(a.num_steps, b.num_steps);
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    const TraceEvent& x = a.events[i];
    const TraceEvent& y = b.events[i];
    EXPECT_EQ(x.actor, y.actor) << i;
    EXPECT_EQ(x.instruction, y.instruction) << i;
    EXPECT_EQ(x.step, y.step) << i;
    EXPECT_EQ(x.op, y.op) << i;
    EXPECT_EQ(x.stream, y.stream) << i;
    EXPECT_EQ(x.tasks, y.tasks) << i;
    EXPECT_EQ(x.stage, y.stage) << i;
    EXPECT_EQ(x.peer, y.peer) << i;
    EXPECT_EQ(x.bytes, y.bytes) << i;
    EXPECT_EQ(x.tag, y.tag) << i;
    EXPECT_DOUBLE_EQ(x.start_s, y.start_s) << i;
    EXPECT_DOUBLE_EQ(x.end_s, y.end_s) << i;
  }
  ASSERT_EQ(a.memory.size(), b.memory.size());
  for (size_t i = 0; i < a.memory.size(); ++i) {
    EXPECT_EQ(a.memory[i].actor, b.memory[i].actor);
    EXPECT_DOUBLE_EQ(a.memory[i].time_s, b.memory[i].time_s);
    EXPECT_EQ(a.memory[i].bytes, b.memory[i].bytes);
  }
}

std::string trace_error_of(const nlohmann::json& j) {
  try {
    trace_from_json(j, "t.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TraceJson, RoundTripsEveryField) {
  const Trace t = small_trace();
  const nlohmann::json j = trace_to_json(t);
  EXPECT_EQ(j.at("format"), "jaxpp-sim-trace");
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("events").size(), t.events.size());
  expect_same(t, trace_from_json(j, "t.json"));
}

TEST(TraceJson, RoundTripsThroughTextAndFile) {
  const Trace t = small_trace();
  expect_same(t, trace_from_json(nlohmann::json::parse(trace_to_json(t).dump()), "t.json"));
  const auto path = std::filesystem::temp_directory_path() /
                    ("jaxpp_trace_roundtrip_" + std::to_string(::getpid()) + ".json");
  save_trace(t, path.string());
  expect_same(t, load_trace(path.string()));
  std::filesystem::remove(path);
}

TEST(TraceJson, WritesStreamsAndTasksAsText) {
  const nlohmann::json j = trace_to_json(small_trace());
  const nlohmann::json& send = j.at("events").at(1);
  EXPECT_EQ(send.at("op"), "send");
  EXPECT_EQ(send.at("stream"), "send->1");
  EXPECT_EQ(send.at("tasks"), nlohmann::json::array({"F0@s0"}));
}

TEST(TraceJson, LoadSortsEventsByStartTime) {
  nlohmann::json j = trace_to_json(small_trace());
  std::swap(j["events"][0], j["events"][5]);
  const Trace t = trace_from_json(j, "t.json");
  for (size_t i = 1; i < t.events.size(); ++i) EXPECT_LE(t.events[i - 1].start_s, t.events[i].start_s);
}

TEST(TraceJson, EventNamesFollowInstructionText) {
  const Trace t = small_trace();
  EXPECT_EQ(t.events[0].name(), "F0@s0");
  EXPECT_THAT(t.events[1].name(), HasSubstr("send"));
  EXPECT_THAT(t.events[1].name(), HasSubstr("F0@s0"));
}

TEST(TraceJson, RejectsAnotherFormatOrVersion) {
  nlohmann::json j = trace_to_json(small_trace());
  j["format"] = "jaxpp-sim-plan";
  EXPECT_THAT(trace_error_of(j), HasSubstr("field 'format'"));
  j = trace_to_json(small_trace());
  j["version"] = 7;
  EXPECT_THAT(trace_error_of(j), HasSubstr("field 'version'"));
  EXPECT_THAT(trace_error_of(nlohmann::json::array()), HasSubstr("expected a JSON object"));
}

TEST(TraceJson, NamesTheMissingOrBadTopLevelField) {
  nlohmann::json j = trace_to_json(small_trace());
  j.erase("num_actors");
  EXPECT_THAT(trace_error_of(j), HasSubstr("field 'num_actors'"));
  j = trace_to_json(small_trace());
  j["events"] = "none";
  EXPECT_THAT(trace_error_of(j), HasSubstr("field 'events': expected an array"));
  j = trace_to_json(small_trace());
  j["colour"] = "blue";
  EXPECT_THAT(trace_error_of(j), HasSubstr("field 'colour': unknown field"));
}

TEST(TraceJson, NamesTheEventIndexAndFieldOfAMalformedEvent) {
  nlohmann::json j = trace_to_json(small_trace());
  j["events"][3]["end_s"] = 0.0;
  const std::string err = trace_error_of(j);
  EXPECT_THAT(err, HasSubstr("t.json: events[3]: field 'end_s'"));
  EXPECT_THAT(err, HasSubstr(">= start_s"));

  j = trace_to_json(small_trace());
  j["events"][2]["actor"] = 5;
  EXPECT_THAT(trace_error_of(j), HasSubstr("events[2]: field 'actor': expected an integer in [0, 1]"));

  j = trace_to_json(small_trace());
  j["events"][0]["op"] = "jump";
  EXPECT_THAT(trace_error_of(j), HasSubstr("events[0]: field 'op'"));

  j = trace_to_json(small_trace());
  j["events"][1]["stream"] = "send=>1";
  EXPECT_THAT(trace_error_of(j), HasSubstr("events[1]: field 'stream'"));

  j = trace_to_json(small_trace());
  j["events"][0]["tasks"] = {"X9"};
  EXPECT_THAT(trace_error_of(j), HasSubstr("events[0]: field 'tasks'[0]"));

  j = trace_to_json(small_trace());
  j["events"][0]["start_s"] = "early";
  EXPECT_THAT(trace_error_of(j), HasSubstr("events[0]: field 'start_s': expected a number"));
}

TEST(TraceJson, NamesTheMemorySampleOfAMalformedSample) {
  nlohmann::json j = trace_to_json(small_trace());
  j["memory"][4]["bytes"] = -1;
  EXPECT_THAT(trace_error_of(j), HasSubstr("memory[4]: field 'bytes'"));
}

TEST(TraceJson, LoadTraceNamesAnUnreadableOrMalformedFile) {
  try {
    load_trace("/nonexistent/dir/trace.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/dir/trace.json"));
  }
  const auto path = std::filesystem::temp_directory_path() /
                    ("jaxpp_trace_bad_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << "{\"format\": \"jaxpp-sim-trace\", \"version\": 1, \"num_actors\": 0, "
                         "\"events\": []}";
  try {
    load_trace(path.string());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string() + ": field 'num_actors'"));
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace jaxpp
