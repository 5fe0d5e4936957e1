// Fuzzes the model JSON parser (graph/model.h: both the transformer and the explicit form).
#include "graph/model.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return jaxpp::fuzz::with_json(data, size, [](const nlohmann::json& doc) {
    const jaxpp::ModelSpec model = jaxpp::model_from_json(doc, "model.json");
    (void)model.total_params();
    (void)jaxpp::model_to_json(model);
  });
}
