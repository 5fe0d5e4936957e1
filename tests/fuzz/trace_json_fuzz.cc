// Fuzzes the trace JSON parser (trace/trace.h) and the text Gantt chart that
// `jaxpp-sim export -o out.txt` draws from what it returns.
#include "tests/fuzz/fuzz_util.h"
#include "trace/export.h"
#include "trace/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return jaxpp::fuzz::with_json(data, size, [](const nlohmann::json& doc) {
    const jaxpp::Trace trace = jaxpp::trace_from_json(doc, "trace.json");
    (void)jaxpp::export_trace(trace, jaxpp::ExportFormat::kText, {});
  });
}
