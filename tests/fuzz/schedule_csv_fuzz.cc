// Fuzzes the PyTorch pipelining CSV parser (schedules/custom.h) and the validator that
// `jaxpp-sim validate` and `show` run on what it returns.
#include "schedules/custom.h"
#include "schedules/validate.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return jaxpp::fuzz::expect_value_or_input_error([&] {
    const jaxpp::Schedule s =
        jaxpp::parse_schedule_csv(jaxpp::fuzz::as_text(data, size), "schedule.csv");
    (void)jaxpp::validate_schedule(s);
  });
}
