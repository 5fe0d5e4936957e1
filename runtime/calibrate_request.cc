#include "runtime/calibrate_request.h"

#include <algorithm>
#include <cctype>
#include <type_traits>
#include <vector>

#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/limits.h"
#include "graph/range_check.h"
#include "runtime/microbench.h"

namespace jaxpp {
namespace {

constexpr int kMaxThreadsRanks = 128;

template <typename T>
std::string flag_text(const T& v) {
  if constexpr (std::is_same_v<T, std::string>)
    return v;
  else
    return std::to_string(v);
}

template <typename T>
std::optional<T> recorded(const std::optional<TraceWorkload>& workload, T TraceWorkload::*field) {
  if (!workload) return std::nullopt;
  return (*workload).*field;
}

// A run flag given must be the one the trace records (checked after its range, so that an
// impossible value gets the range's message).
template <typename T>
void check_recorded(const std::optional<T>& given, const std::optional<TraceWorkload>& workload,
                    T TraceWorkload::*field, const std::string& flag, const std::string& path) {
  const std::optional<T> was = recorded(workload, field);
  if (!given || !was || *given == *was) return;
  throw_input_error(flag + " " + flag_text(*given),
                    path + " was recorded by a run with " + flag + " " + flag_text(*was) +
                        " (its field 'workload'); leave the flag out or give the run's value");
}

MlpConfig checked_mlp(const TraceRunFlags& run, const std::optional<TraceWorkload>& workload,
                      const std::string& path) {
  // Each flag not given: the recorded one, else the run's default.
  const auto value = [&](const auto& given, auto field, auto fallback) {
    return given ? *given : recorded(workload, field).value_or(fallback);
  };
  MlpConfig mlp;
  mlp.hidden = value(run.hidden, &TraceWorkload::hidden, 32);
  mlp.ffn = value(run.ffn, &TraceWorkload::ffn, 0);
  mlp.seq = value(run.seq, &TraceWorkload::seq, 8);
  mlp.layers_per_stage = value(run.layers_per_stage, &TraceWorkload::layers_per_stage, 2);
  mlp.optimizer = parse_optimizer_kind(
      value(run.optimizer, &TraceWorkload::optimizer, std::string("sgd")), "--optimizer");
  if (mlp.hidden < 1 || mlp.seq < 1 || mlp.layers_per_stage < 1 || mlp.ffn < 0)
    throw_input_error("--hidden/--seq/--layers-per-stage", "must be >= 1 (--ffn >= 0)");
  // The limits of graph/limits.h, so that seq x hidden x 8 transfer bytes cannot overflow.
  check_int_in(mlp.hidden, "--hidden", 1, kMaxHidden, "a width");
  check_int_in(mlp.ffn, "--ffn", 0, kMaxFfnHidden, "a width (0 = 4 x hidden)");
  check_int_in(mlp.seq, "--seq", 1, kMaxSeqLen, "a number of tokens");
  check_int_in(mlp.layers_per_stage, "--layers-per-stage", 1, kMaxLayers, "a layer count");
  check_recorded(run.hidden, workload, &TraceWorkload::hidden, "--hidden", path);
  check_recorded(run.ffn, workload, &TraceWorkload::ffn, "--ffn", path);
  check_recorded(run.seq, workload, &TraceWorkload::seq, "--seq", path);
  check_recorded(run.layers_per_stage, workload, &TraceWorkload::layers_per_stage,
                 "--layers-per-stage", path);
  check_recorded(run.optimizer, workload, &TraceWorkload::optimizer, "--optimizer", path);
  return mlp;
}

}  // namespace

std::string checked_cluster_name(const std::string& name) {
  if (name.empty() || std::all_of(name.begin(), name.end(), [](unsigned char c) {
        return std::isspace(c) != 0;
      }))
    throw_input_error("--name", "expected a cluster name, got '" + name + "'");
  // Written into the cluster file, whose reader refuses control characters in it.
  check_utf8("--name", name);
  if (has_control_character(name))
    throw_input_error("--name", "contains a control character (it is printed in reports and "
                                "written into plans), got " +
                                    nlohmann::json(name).dump());
  return name;
}

MicrobenchOptions microbench_options(const MicrobenchFlags& flags) {
  MicrobenchOptions mo;
  mo.backend = flags.backend;
  mo.quick = flags.quick;
  mo.timing.repeats = flags.repeats.value_or(mo.quick ? 5 : 7);
  mo.timing.warmup = flags.warmup;
  mo.timing.rounds = flags.rounds.value_or(mo.quick ? 1 : 5);
  if (mo.timing.rounds < 1 || mo.timing.rounds > 1000)
    throw_input_error("--rounds", "expected 1..1000, got " + std::to_string(mo.timing.rounds));
  mo.timing.min_repetition_s = 1e-3 * flags.repetition_ms.value_or(mo.quick ? 2 : 5);
  if (!(mo.timing.min_repetition_s >= 0)) throw_input_error("--repetition-ms", "expected >= 0");
  mo.timing.cold_pool_bytes = flags.hot ? 0 : default_cold_pool_bytes();
  mo.timeout_s = flags.timeout_s;
  mo.ranks = flags.ranks;
  if (mo.timing.repeats < 1) throw_input_error("--repeats", "expected >= 1");
  if (mo.timing.warmup < 0) throw_input_error("--warmup", "expected >= 0");
  // Upper bounds after the messages above: a timeout of 1 ms to a day, a repetition of at most
  // 10 s, at most 1000 repeats and warm-up runs (a calibration that ends this year).
  if (mo.timeout_s > 0)
    check_double_in(flags.timeout_s, "--timeout-s", kMinTimeoutS, kMaxTimeoutS, "seconds");
  // Threads workers: the message buffers of every pair of workers grow as ranks² (256 workers held
  // 10.5 GB and ran 77 s on a 2-core host; 1024 aborted when the host ran out of memory), and a
  // world of more threads than cores measures the scheduler rather than the copies.
  if (mo.ranks > 2)
    check_int_in(flags.ranks, "--ranks", 2, kMaxThreadsRanks, "a number of workers");
  if (flags.repetition_ms)
    check_double_in(*flags.repetition_ms, "--repetition-ms", 0, 10000, "milliseconds");
  if (flags.repeats) check_int_in(*flags.repeats, "--repeats", 1, 1000, "a count");
  check_int_in(flags.warmup, "--warmup", 0, 1000, "a count");
  return mo;
}

CheckedTrace check_trace_run(const std::string& path, const TraceRunFlags& run) {
  CheckedTrace out;
  out.path = path;
  out.trace = load_trace(path);
  const Trace& trace = out.trace;
  if (!trace.source.starts_with("measured"))
    throw_input_error(path,
                      "field 'source': expected a measured trace (jaxpp-sim run --trace), "
                      "got '" +
                          trace.source + "'");
  // An MoE run's compute and transfers are not the dense MLP's that the fit prices (router,
  // top-k experts, all-to-all): fitting them as the MLP's would give a wrong cluster.
  if (trace.workload && trace.workload->moe()) {
    const TraceWorkload& w = *trace.workload;
    throw_input_error(path, "field 'workload': the trace is of a mixture-of-experts run (" +
                                std::to_string(w.experts) + " experts, top-" +
                                std::to_string(w.top_k) + ", ep " + std::to_string(w.ep) +
                                "); calibrate --from-trace fits the dense MLP workload only: "
                                "give the trace of a run of a dense plan or of stage times");
  }
  for (const TraceEvent& e : trace.events) {
    out.num_stages = std::max(out.num_stages, e.stage + 1);
    for (const TaskRef& t : e.tasks) out.num_stages = std::max(out.num_stages, t.stage + 1);
  }
  if (out.num_stages == 0) throw_input_error(path, "field 'events': no instruction with a stage");
  out.dp = run.dp ? *run.dp : recorded(trace.workload, &TraceWorkload::dp).value_or(1);
  if (out.dp < 1) throw_input_error("--dp", "expected >= 1");
  check_int_in(out.dp, "--dp", 1, kMaxStages, "a number of replicas");
  check_recorded(run.dp, trace.workload, &TraceWorkload::dp, "--dp", path);
  out.first_step = run.skip_steps.value_or(trace.num_steps > 1 ? 1 : 0);
  if (out.first_step < 0 || out.first_step >= trace.num_steps)
    throw_input_error("--skip-steps", "expected 0.." + std::to_string(trace.num_steps - 1));
  // The trace must be of the run the flags describe: its recorded workload (above), and its
  // transfers carry seq x hidden doubles (what an older trace, without a workload, can tell; its
  // dp cannot be told: a run of dp 1 records its no-op all-reduces too).
  out.mlp = checked_mlp(run, trace.workload, path);
  const int64_t transfer_bytes = mlp_transfer_bytes(out.mlp);
  for (const TraceEvent& e : trace.events) {
    if (e.op == OpKind::kSend && e.bytes > 0 && e.bytes != transfer_bytes)
      throw_input_error("--hidden/--seq", "the trace's transfers carry " + std::to_string(e.bytes) +
                                              " bytes, but --seq " + std::to_string(out.mlp.seq) +
                                              " x --hidden " + std::to_string(out.mlp.hidden) +
                                              " doubles are " + std::to_string(transfer_bytes) +
                                              " (pass the run's flags)");
  }
  return out;
}

TraceCalibration calibrate_checked_trace(const CheckedTrace& checked, const ClusterSpec& base,
                                         const std::string& name) {
  const std::vector<StageKernels> kernels = mlp_stage_kernels(checked.mlp, checked.num_stages);
  const TraceObservations obs =
      observe_trace(checked.trace, kernels, base, checked.dp, checked.first_step);
  return calibrate_from_trace(obs, base, name);
}

}  // namespace jaxpp
