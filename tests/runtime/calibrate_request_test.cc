// The calibrate inputs shared by the CLI and the Python module (runtime/calibrate_request.h): the
// timing flags' defaults and checks, and the checks of a --from-trace trace.
#include "runtime/calibrate_request.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
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

// A measured trace of one send of `bytes`, recording `workload` (none: an older trace).
std::string write_measured_trace(const std::string& name, int64_t bytes,
                                 std::optional<TraceWorkload> workload) {
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("jaxpp-calibrate-request-" + name + "-" + std::to_string(::getpid()) + ".json"))
          .string();
  Trace t;
  t.source = "measured:threads";
  t.num_actors = 2;
  TraceEvent e;
  e.op = OpKind::kSend;
  e.stream = {StreamKind::kSend, 1};
  e.tasks = {TaskRef{TaskKind::kF, 0, 0}};
  e.stage = 0;
  e.peer = 1;
  e.bytes = bytes;
  e.tag = 0;
  e.end_s = 1e-3;
  t.events.push_back(e);
  // Its receive on actor 1 (every actor a trace counts has events).
  TraceEvent r = e;
  r.actor = 1;
  r.op = OpKind::kRecv;
  r.stream = {StreamKind::kRecv, 0};
  r.peer = 0;
  t.events.push_back(r);
  t.workload = std::move(workload);
  std::ofstream f(path);
  f << trace_to_json(t).dump();
  return path;
}

TEST(CheckTraceRun, UnsetFlagsAreTheTracesRecordedWorkload) {
  const TraceWorkload w{
      .hidden = 16, .ffn = 40, .seq = 4, .layers_per_stage = 3, .optimizer = "adam", .dp = 2, .experts = 0, .top_k = 0, .ep = 1, .router = ""};
  const std::string path = write_measured_trace("recorded", 4 * 16 * 8, w);
  const CheckedTrace t = check_trace_run(path, {});
  std::filesystem::remove(path);
  EXPECT_EQ(t.mlp.hidden, 16);
  EXPECT_EQ(t.mlp.ffn, 40);
  EXPECT_EQ(t.mlp.seq, 4);
  EXPECT_EQ(t.mlp.layers_per_stage, 3);
  EXPECT_EQ(t.mlp.optimizer, OptimizerKind::kAdam);
  EXPECT_EQ(t.dp, 2);
}

TEST(CheckTraceRun, AGivenFlagMustBeTheRecordedOne) {
  const TraceWorkload w{
      .hidden = 16, .ffn = 0, .seq = 4, .layers_per_stage = 2, .optimizer = "sgd", .dp = 1, .experts = 0, .top_k = 0, .ep = 1, .router = ""};
  const std::string path = write_measured_trace("given", 4 * 16 * 8, w);
  TraceRunFlags run;
  run.hidden = 16;  // the run's: accepted
  EXPECT_EQ(calibrate_error_of([&] { check_trace_run(path, run); }), "");
  run.hidden = 8;  // seq 8 x hidden 8 would match the transfers: only the record tells
  run.seq = 8;
  const std::string hidden = calibrate_error_of([&] { check_trace_run(path, run); });
  run = {};
  run.layers_per_stage = 50;  // the transfers cannot tell
  const std::string layers = calibrate_error_of([&] { check_trace_run(path, run); });
  std::filesystem::remove(path);
  EXPECT_EQ(hidden, "--hidden 8: " + path +
                        " was recorded by a run with --hidden 16 (its field 'workload'); leave "
                        "the flag out or give the run's value");
  EXPECT_EQ(layers.rfind("--layers-per-stage 50: " + path +
                             " was recorded by a run with "
                             "--layers-per-stage 2",
                         0),
            0u)
      << layers;
}

TEST(CheckTraceRun, ATraceWithoutAWorkloadTakesTheDefaultsAndItsTransfersTell) {
  const std::string path = write_measured_trace("old", 8 * 32 * 8, std::nullopt);
  EXPECT_EQ(calibrate_error_of([&] { check_trace_run(path, {}); }), "");
  TraceRunFlags run;
  run.hidden = 64;
  const std::string message = calibrate_error_of([&] { check_trace_run(path, run); });
  std::filesystem::remove(path);
  EXPECT_EQ(message.rfind("--hidden/--seq: the trace's transfers carry 2048 bytes", 0), 0u)
      << message;
}

}  // namespace
}  // namespace jaxpp
