// Fuzzes the custom schedule JSON parser (schedules/custom.h) and the validator that
// `jaxpp-sim validate` and `show` run on what it returns.
#include "schedules/custom.h"
#include "schedules/validate.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return jaxpp::fuzz::with_text(data, size, [](const std::string& text) {
    const jaxpp::Schedule s = jaxpp::parse_schedule_json(text, "schedule.json");
    (void)jaxpp::validate_schedule(s);
  });
}
