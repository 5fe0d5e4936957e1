// The calibrate inputs shared by the CLI and the Python module (runtime/calibrate_request.h): the
// timing flags' defaults and checks, and the checks of a --from-trace trace.
#include "runtime/calibrate_request.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "graph/error.h"
#include "trace/trace.h"

namespace jaxpp {
namespace {

std::string calibrate_error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(MicrobenchOptions, DefaultsDependOnQuickAsTheClisDo) {
  MicrobenchFlags flags;
  MicrobenchOptions o = microbench_options(flags);
  EXPECT_EQ(o.timing.repeats, 7);
  EXPECT_EQ(o.timing.rounds, 5);
  EXPECT_DOUBLE_EQ(o.timing.min_repetition_s, 5e-3);
  EXPECT_GT(o.timing.cold_pool_bytes, 0);
  flags.quick = true;
  flags.hot = true;
  o = microbench_options(flags);
  EXPECT_EQ(o.timing.repeats, 5);
  EXPECT_EQ(o.timing.rounds, 1);
  EXPECT_DOUBLE_EQ(o.timing.min_repetition_s, 2e-3);
  EXPECT_EQ(o.timing.cold_pool_bytes, 0);
}

TEST(MicrobenchOptions, RefusesOutOfRangeFlagsNamingThem) {
  MicrobenchFlags flags;
  flags.rounds = 0;
  EXPECT_EQ(calibrate_error_of([&] { microbench_options(flags); }),
            "--rounds: expected 1..1000, got 0");
  flags.rounds.reset();
  flags.warmup = -1;
  EXPECT_EQ(calibrate_error_of([&] { microbench_options(flags); }), "--warmup: expected >= 0");
  flags.warmup = 2;
  flags.ranks = 5000;
  EXPECT_NE(calibrate_error_of([&] { microbench_options(flags); }).find("--ranks"),
            std::string::npos);
}

TEST(CheckTraceRun, RefusesATraceThatIsNotMeasured) {
  // Per process: two suites on one host do not share it.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("jaxpp-calibrate-request-sim-" + std::to_string(::getpid()) + ".json"))
                               .string();
  {
    Trace simulated;
    simulated.source = "simulated";
    simulated.num_actors = 1;
    std::ofstream f(path);
    f << trace_to_json(simulated).dump();
  }
  const std::string message = calibrate_error_of([&] { check_trace_run(path, {}); });
  std::filesystem::remove(path);
  EXPECT_NE(message.find("expected a measured trace"), std::string::npos) << message;
}

}  // namespace
}  // namespace jaxpp
