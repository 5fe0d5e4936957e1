// Fuzzes the plan.json parser (graph/plan.h) and the program check that `jaxpp-sim validate`
// runs on what it returns.
#include "graph/plan.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return jaxpp::fuzz::with_json(data, size, [](const nlohmann::json& doc) {
    const jaxpp::Plan plan = jaxpp::plan_from_json(doc, "plan.json");
    jaxpp::check_program(plan.program);
  });
}
