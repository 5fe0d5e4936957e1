// Regression tests for cluster-parser findings of the bad-input catalogue (docs/hardening.md).
#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "graph/error.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

nlohmann::json based_on_a100(double hbm_gib) {
  return {{"name", "c"}, {"base", "a100-80g"}, {"hbm_gib", hbm_gib}};
}

TEST(ClusterParserRegression, HbmTooLargeForInt64BytesIsAnInputError) {
  // Was: 1e300 GiB was cast to int64 (undefined behaviour) and came back as a negative size.
  EXPECT_NE(error_of([] {
              cluster_from_json(based_on_a100(1e300), "c.json");
            }).find("c.json: field 'hbm_gib': out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { cluster_from_json(based_on_a100(5e9), "c.json"); }).find("out of range"),
            std::string::npos);
}

TEST(ClusterParserRegression, HbmBelowOneByteIsAnInputError) {
  // Was: accepted as 0 bytes, then rejected with a confusing message when a plan re-read it.
  EXPECT_NE(error_of([] {
              cluster_from_json(based_on_a100(1e-12), "c.json");
            }).find("field 'hbm_gib': out of range"),
            std::string::npos);
}

TEST(ClusterParserRegression, LargeButRepresentableHbmRoundTrips) {
  const ClusterSpec c = cluster_from_json(based_on_a100(1e6), "c.json");
  EXPECT_EQ(c.hbm_bytes, int64_t{1'000'000} * 1024 * 1024 * 1024);
  EXPECT_EQ(cluster_from_json(cluster_to_json(c), "again"), c);
}

}  // namespace
}  // namespace jaxpp
