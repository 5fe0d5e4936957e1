// The inputs of `jaxpp-sim calibrate` and of the Python module's calibrate(), checked with the
// CLI's order and messages (flag names):
//
// Microbenchmarks: the timing flags (--quick, --hot, --repeats, --warmup, --rounds,
// --repetition-ms, --ranks, --timeout-s) -> MicrobenchOptions (runtime/microbench.h).
//
// calibrate --from-trace: a measured run trace (jaxpp-sim run --trace) of the MLP workload,
// checked against the run's flags, then fitted on top of a base cluster (costmodel/calibration.h
// calibrate_from_trace). Shared by `jaxpp-sim calibrate --from-trace` and the Python module's
// calibrate(from_trace=...), with the CLI's checks, order and messages (flag names).
//
// Usage:
//   TraceRunFlags run;  run.hidden = 32;  run.seq = 8;
//   CheckedTrace t = check_trace_run("trace.json", run);   // InputError for a bad trace or flag
//   TraceCalibration cal = calibrate_checked_trace(t, reference_host_cluster(), "fitted");
#pragma once

#include <optional>
#include <string>

#include "costmodel/calibration.h"
#include "costmodel/cluster.h"
#include "runtime/backend.h"
#include "runtime/microbench.h"
#include "runtime/workload.h"
#include "trace/trace.h"

namespace jaxpp {

// calibrate --name: a name for the fitted cluster, written into its file and printed in
// reports: not empty or blank, no control character, UTF-8 (InputError naming --name otherwise,
// before any work). Returns it.
std::string checked_cluster_name(const std::string& name);

// The timing flags of a microbenchmark calibration; unset = the CLI's default (which depends on
// quick).
struct MicrobenchFlags {
  BackendKind backend = BackendKind::kThreads;
  bool quick = false;
  bool hot = false;  // cache-hot operands (no cold pool)
  std::optional<int> repeats;
  int warmup = 2;
  std::optional<int> rounds;
  std::optional<double> repetition_ms;
  int ranks = 2;
  double timeout_s = 60;
};
MicrobenchOptions microbench_options(const MicrobenchFlags& flags);

// The flags of the run that recorded the trace (jaxpp-sim run's --hidden, --ffn, --seq,
// --layers-per-stage, --optimizer, --dp) and the leading steps to ignore (default 1 when the
// trace has more than one step). A flag left unset is the one the trace records (its field
// 'workload', written by runs since sweep 5), else the run's default (32, 0, 8, 2, sgd, 1); a
// flag given must be the recorded one.
struct TraceRunFlags {
  std::optional<int> hidden;
  std::optional<int> ffn;
  std::optional<int> seq;
  std::optional<int> layers_per_stage;
  std::optional<std::string> optimizer;
  std::optional<int> dp;
  std::optional<int> skip_steps;
};

struct CheckedTrace {
  std::string path;
  Trace trace;
  MlpConfig mlp;
  int num_stages = 0;
  int dp = 1;
  int first_step = 0;
};

// Loads and checks the trace: measured, with staged instructions, --dp and --skip-steps in
// range, the MLP flags in range, agreeing with the trace's recorded workload (InputError
// "--hidden 64: run.json was recorded by a run with --hidden 32 ...") and with its transfer
// sizes.
CheckedTrace check_trace_run(const std::string& path, const TraceRunFlags& run);

// The trace's observations (observe_trace) fitted on top of `base`, named `name`.
TraceCalibration calibrate_checked_trace(const CheckedTrace& checked, const ClusterSpec& base,
                                         const std::string& name);

}  // namespace jaxpp
