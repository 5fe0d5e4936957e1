// Regression tests for trace-parser findings of the bad-input catalogue (docs/hardening.md).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "graph/limits.h"
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

}  // namespace
}  // namespace jaxpp
