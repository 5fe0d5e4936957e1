// Fuzzes the stage-times JSON parser (costmodel/stage_times_cost.h). The first byte picks the
// number of stages the file must describe (1..8), the rest is the file.
#include "costmodel/stage_times_cost.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int num_stages = 1 + data[0] % 8;
  return jaxpp::fuzz::with_json(data + 1, size - 1, [&](const nlohmann::json& doc) {
    const jaxpp::StageTimes t = jaxpp::stage_times_from_json(doc, "times.json", num_stages);
    const jaxpp::StageTimesCost cost(t);
    (void)cost.p2p_latency_s(0, 1);
  });
}
