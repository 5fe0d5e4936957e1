// Fuzzes the cluster JSON parser (costmodel/cluster.h), with and without a "base" preset.
#include "costmodel/cluster.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return jaxpp::fuzz::with_json(data, size, [](const nlohmann::json& doc) {
    (void)jaxpp::cluster_from_json(doc, "cluster.json");
  });
}
