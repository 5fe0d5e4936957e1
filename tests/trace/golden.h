// Golden-file comparison for the trace/ tests.
// To regenerate after an intended change of the output, run the test binary with
//   JAXPP_UPDATE_GOLDEN=1 ./build-trace/bin/trace_tests
// which rewrites tests/data/trace/<name> from the current output; review the diff before
// committing it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace jaxpp::testing {

inline void expect_matches_golden(const std::string& actual, const std::string& name) {
  const std::string path = std::string(JAXPP_TEST_DATA_DIR) + "/trace/" + name;
  if (const char* update = std::getenv("JAXPP_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing golden file " << path
                         << " (run with JAXPP_UPDATE_GOLDEN=1 to create it)";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str()) << "output differs from " << path
                                    << " (JAXPP_UPDATE_GOLDEN=1 regenerates it)";
}

}  // namespace jaxpp::testing
