// jaxpp-sim calibrate: fit a ClusterSpec from microbenchmarks on a backend, or from a measured
// run trace, and write it as a cluster JSON file that simulate, explore and run --compare load
// with --cluster (see docs/calibrate.md).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

#include <cxxopts.hpp>

#include "cli/cluster_arg.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "cli/report_output.h"
#include "costmodel/calibration.h"
#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/limits.h"
#include "runtime/calibrate_request.h"
#include "runtime/microbench.h"
#include "runtime/mpi_backend.h"
#include "runtime/run.h"
#include "trace/trace.h"

namespace jaxpp::cli {
namespace {

// --name: the fitted cluster's name, which later messages quote ("has 11.8 GiB ()" for "").
std::string cluster_name_flag(const cxxopts::ParseResult& args, const std::string& fallback) {
  return args.count("name") ? checked_cluster_name(args["name"].as<std::string>()) : fallback;
}

std::string fmt_time(double s) {
  char buf[32];
  const double a = std::abs(s);
  if (a >= 1)
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (a >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else if (a >= 1e-6)
    std::snprintf(buf, sizeof buf, "%.3f us", s * 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f ns", s * 1e9);
  return buf;
}

std::string fmt_si(double v, const char* unit) {
  char buf[32];
  const char* prefix[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  std::snprintf(buf, sizeof buf, "%.3g %s%s", v, prefix[i], unit);
  return buf;
}

std::string fmt_pct(double r) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * r);
  return buf;
}

std::string fmt_magnitude_pct(double r) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * r);
  return buf;
}

// Where the human report goes: stdout, or stderr when -o - puts the cluster JSON on stdout.
FILE* g_report = stdout;

void write_cluster(const ClusterSpec& c, OutputFiles& out) {
  if (!out.has("-o")) return;
  out.set("-o", cluster_to_json(c).dump(2) + "\n");
  out.write_all();
}

void print_fit_row(const std::string& fit, const std::string& parameter, const std::string& value,
                   const LinearFit* residuals) {
  std::fprintf(g_report, "%-14s %-28s %16s", fit.c_str(), parameter.c_str(), value.c_str());
  if (residuals)
    std::fprintf(g_report, "   rms %6s  max %6s",
                 fmt_magnitude_pct(residuals->rms_residual).c_str(),
                 fmt_magnitude_pct(residuals->max_abs_residual).c_str());
  std::fprintf(g_report, "\n");
}

void print_residual(const std::string& point, double measured_s, const LinearFit& fit, size_t i) {
  std::fprintf(g_report, "  %-30s %12s %12s %8s%s\n", point.c_str(), fmt_time(measured_s).c_str(),
               fmt_time(fit.fitted[i]).c_str(), fmt_pct(fit.residuals[i]).c_str(),
               fit.is_rejected(i) ? "  rejected (outlier)" : "");
}

void print_calibration(const Calibration& cal, const Measurements& m) {
  std::fprintf(g_report, "calibrate: backend %s, device %s, %d ranks (%d per host)\n",
               m.backend.c_str(), m.device.c_str(), m.ranks, m.ranks_per_host);
  std::fprintf(g_report, "%-14s %-28s %16s   %s\n", "fit", "parameter", "value",
               "relative residuals");
  print_fit_row("GEMM curve", "rate (peak x max eff)", fmt_si(cal.gemm.rate_flops_per_s, "FLOP/s"),
                &cal.gemm.fit);
  print_fit_row("", "half saturation", fmt_si(cal.gemm.half_saturation_flops, "FLOP"), nullptr);
  print_fit_row("", "call overhead", fmt_time(cal.gemm.call_overhead_s), nullptr);
  // The fixed cost per call of each (the fit's intercept, 0 when negative) is what the cluster
  // keeps and predictions add per call.
  const ClusterSpec& c = cal.cluster;
  print_fit_row("GeLU", "per element", fmt_time(cal.gelu.s_per_element), &cal.gelu.fit);
  print_fit_row("", "per call", fmt_time(c.gelu_call_s), nullptr);
  print_fit_row("GeLU gradient", "per element", fmt_time(cal.gelu_backward.s_per_element),
                &cal.gelu_backward.fit);
  print_fit_row("", "per call", fmt_time(c.gelu_backward_call_s), nullptr);
  if (cal.has_input_generation) {
    print_fit_row("input gen.", "per element", fmt_time(cal.input_generation.s_per_element),
                  &cal.input_generation.fit);
    print_fit_row("", "per call", fmt_time(c.input_generation_call_s), nullptr);
  }
  print_fit_row("copy", "memory bandwidth", fmt_si(cal.copy.bandwidth_bytes_per_s, "B/s"),
                &cal.copy.fit);
  print_fit_row("", "per call", fmt_time(c.copy_call_s), nullptr);
  if (cal.has_upload) {
    print_fit_row("upload", "host -> device bandwidth",
                  fmt_si(cal.upload.bandwidth_bytes_per_s, "B/s"), &cal.upload.fit);
    print_fit_row("", "per call", fmt_time(c.upload_call_s), nullptr);
  }
  if (cal.has_p2p) {
    print_fit_row("point-to-point", "latency", fmt_time(cal.p2p.latency_s), &cal.p2p.fit);
    print_fit_row("", "bandwidth", fmt_si(cal.p2p.bandwidth_bytes_per_s, "B/s"), nullptr);
  } else {
    print_fit_row("point-to-point", "(not measured: base cluster)", "", nullptr);
  }
  if (cal.has_allreduce) {
    print_fit_row("all-reduce", "step latency", fmt_time(cal.allreduce.latency_s),
                  &cal.allreduce.fit);
    if (cal.allreduce_unbounded)
      print_fit_row("", "no growth with size: eff.", "1", nullptr);
    else
      print_fit_row("", "bus bandwidth", fmt_si(cal.allreduce.bus_bandwidth_bytes_per_s, "B/s"),
                    nullptr);
    print_fit_row("", "bus efficiency", fmt_si(cal.cluster.allreduce_bus_efficiency, ""), nullptr);
  }
  print_fit_row("launch", "per compute instruction", fmt_time(cal.launch_overhead_s), nullptr);

  std::fprintf(g_report,
               "\nresiduals per point (measured median, fitted, (measured - fitted) / fitted)\n");
  for (size_t i = 0; i < m.gemm.size(); ++i) {
    const GemmSample& g = m.gemm[i];
    print_residual("GEMM " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
                       std::to_string(g.k) + (g.trans_a ? " T" : " N") + (g.trans_b ? "T" : "N") +
                       (g.accumulate ? " +=" : ""),
                   g.seconds, cal.gemm.fit, i);
  }
  std::fprintf(
      g_report,
      "  GEMM measured table (mean over the shapes of a size; predictions interpolate it)\n");
  for (const GemmPoint& g : cal.gemm_measured) {
    const double curve_s = cal.gemm.time_s(g.flops);
    std::fprintf(g_report, "  %-30s %12s %12s %8s   %s\n",
                 ("GEMM " + fmt_si(g.flops, "FLOP")).c_str(), fmt_time(g.mean_s).c_str(),
                 fmt_time(curve_s).c_str(), fmt_pct(g.mean_s / curve_s - 1).c_str(),
                 fmt_si(g.rate_flops_per_s, "FLOP/s").c_str());
  }
  for (size_t i = 0; i < m.gelu.size(); ++i)
    print_residual("GeLU " + fmt_si(m.gelu[i].size, ""), m.gelu[i].seconds, cal.gelu.fit, i);
  for (size_t i = 0; i < m.gelu_backward.size(); ++i)
    print_residual("GeLU gradient " + fmt_si(m.gelu_backward[i].size, ""),
                   m.gelu_backward[i].seconds, cal.gelu_backward.fit, i);
  for (size_t i = 0; i < m.copy.size(); ++i)
    print_residual("copy " + fmt_si(m.copy[i].size, "B"), m.copy[i].seconds, cal.copy.fit, i);
  if (cal.has_upload)
    for (size_t i = 0; i < m.upload.size(); ++i)
      print_residual("upload " + fmt_si(m.upload[i].size, "B"), m.upload[i].seconds,
                     cal.upload.fit, i);
  if (cal.has_input_generation)
    for (size_t i = 0; i < m.input_generation.size(); ++i)
      print_residual("input gen. " + fmt_si(m.input_generation[i].size, ""),
                     m.input_generation[i].seconds, cal.input_generation.fit, i);
  if (cal.has_p2p)
    for (size_t i = 0; i < m.p2p.size(); ++i)
      print_residual("p2p " + fmt_si(m.p2p[i].size, "B"), m.p2p[i].seconds, cal.p2p.fit, i);
  if (cal.has_allreduce)
    for (size_t i = 0; i < m.allreduce.size(); ++i)
      print_residual("all-reduce " + std::to_string(m.allreduce[i].ranks) + " ranks " +
                         fmt_si(m.allreduce[i].bytes, "B"),
                     m.allreduce[i].seconds, cal.allreduce.fit, i);
}

void print_trace_calibration(const TraceCalibration& cal, const std::string& trace_path) {
  std::fprintf(g_report, "calibrate: from trace %s\n", trace_path.c_str());
  std::fprintf(g_report,
               "compute: measured = launch %s + %.4g x base kernel time (rms residual %s)\n",
               fmt_time(cal.launch_overhead_s).c_str(), cal.compute_slowdown,
               fmt_magnitude_pct(cal.compute_fit.rms_residual).c_str());
  std::fprintf(g_report,
               "(measured: median; for transfer and allreduce the lower quartile, as fitted)\n");
  std::fprintf(g_report, "%-10s %6s %14s %14s %14s %8s\n", "kind", "count", "measured", "base",
               "fitted", "err");
  for (const auto& [kind, s] : cal.kinds) {
    const double err =
        s.predicted_after_s > 0 ? (s.measured_s - s.predicted_after_s) / s.predicted_after_s : 0.0;
    std::fprintf(g_report, "%-10s %6d %14s %14s %14s %8s\n", kind.c_str(), s.count,
                 fmt_time(s.measured_s).c_str(), fmt_time(s.predicted_before_s).c_str(),
                 fmt_time(s.predicted_after_s).c_str(), fmt_pct(err).c_str());
  }
  if (!cal.fitted_transfers)
    std::fprintf(g_report, "transfers: none matched; links kept from the base\n");
}

int calibrate_from_trace_file(const cxxopts::ParseResult& args, const std::string& output,
                              OutputFiles& out) {
  const std::string path = args["from-trace"].as<std::string>();
  // Flags not given: the ones the trace records, else the run's defaults (TraceRunFlags).
  TraceRunFlags run;
  if (args.count("hidden")) run.hidden = args["hidden"].as<int>();
  if (args.count("ffn")) run.ffn = args["ffn"].as<int>();
  if (args.count("seq")) run.seq = args["seq"].as<int>();
  if (args.count("layers-per-stage")) run.layers_per_stage = args["layers-per-stage"].as<int>();
  if (args.count("optimizer")) run.optimizer = args["optimizer"].as<std::string>();
  if (args.count("dp")) run.dp = args["dp"].as<int>();
  if (args.count("skip-steps")) run.skip_steps = args["skip-steps"].as<int>();
  const CheckedTrace checked = check_trace_run(path, run);
  ClusterSpec base = args.count("base") ? load_cluster_arg(args["base"].as<std::string>())
                                        : reference_host_cluster();
  const std::string name = cluster_name_flag(args, "fitted-from-trace");
  TraceCalibration cal = calibrate_checked_trace(checked, base, name);
  write_cluster(cal.cluster, out);
  if (args.count("json")) {
    nlohmann::json j = trace_calibration_to_json(cal);
    j["trace"] = path;
    if (!output.empty()) j["output"] = output;
    std::cout << j.dump(2) << "\n";
  } else {
    print_trace_calibration(cal, path);
    for (const std::string& p : out.written_files())
      std::fprintf(g_report, "wrote %s\n", p.c_str());
  }
  return kExitOk;
}

int run_calibrate(int argc, char** argv) {
  cxxopts::Options options("jaxpp-sim calibrate",
                           "Fit a cluster JSON (ClusterSpec) from microbenchmarks on a backend "
                           "or from a measured run trace");
  // clang-format off
  options.add_options()
      ("backend", "threads | mpi | cuda (mpi: run under mpirun -n K)", cxxopts::value<std::string>()->default_value("threads"))
      ("o,output", "write the fitted cluster JSON to FILE", cxxopts::value<std::string>())
      ("from-trace", "fit from a measured trace (jaxpp-sim run --trace FILE) instead of microbenchmarks", cxxopts::value<std::string>())
      ("base", "cluster (preset or JSON) for what is not measured (cuda: links), or the model a trace refines", cxxopts::value<std::string>())
      ("name", "name of the fitted cluster", cxxopts::value<std::string>())
      ("quick", "fewer sizes and repetitions")
      ("hot", "compute benchmarks reuse the same (cache-hot) operands instead of cold ones")
      ("repeats", "timed repetitions per point (median; default 7, --quick 5)", cxxopts::value<int>())
      ("warmup", "untimed repetitions per point", cxxopts::value<int>()->default_value("2"))
      ("rounds", "rounds of the whole suite; a point's value is the lower quartile over them (default 5, --quick 1)", cxxopts::value<int>())
      ("repetition-ms", "a timed repetition loops a kernel at least this long (default 5, --quick 2)", cxxopts::value<double>())
      ("ranks", "threads: workers of the communication benchmarks", cxxopts::value<int>()->default_value("2"))
      ("timeout-s", "give up on a message or collective after this many seconds", cxxopts::value<double>()->default_value("60"))
      ("hidden", "--from-trace: the run's --hidden (default: the trace's, else 32)", cxxopts::value<int>())
      ("ffn", "--from-trace: the run's --ffn (default: the trace's, else 0)", cxxopts::value<int>())
      ("seq", "--from-trace: the run's --seq (default: the trace's, else 8)", cxxopts::value<int>())
      ("layers-per-stage", "--from-trace: the run's --layers-per-stage (default: the trace's, else 2)", cxxopts::value<int>())
      ("optimizer", "--from-trace: the run's --optimizer (default: the trace's, else sgd)", cxxopts::value<std::string>())
      ("dp", "--from-trace: the run's --dp (default: the trace's, else 1)", cxxopts::value<int>())
      ("skip-steps", "--from-trace: leading (warm-up) steps to ignore (default 1 when the trace has more than one)", cxxopts::value<int>())
      ("json", "print the fits, parameters and residuals as JSON")
      ("h,help", "show this help");
  // clang-format on
  const std::optional<cxxopts::ParseResult> parsed = parse_flags(options, argc, argv, "calibrate");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  const std::string output = args.count("output") ? args["output"].as<std::string>() : "";
  // The output is checked before any work (cli/report_output.h): never an input file, "-" is
  // stdout (the report then goes to stderr).
  OutputFiles out("calibrate");
  for (const char* flag : {"from-trace", "base"})
    if (args.count(flag)) out.input(args[flag].as<std::string>(), std::string("--") + flag);
  if (args.count("output")) out.output(output, "-o");
  out.check_json_flag(args.count("json") > 0);
  g_report = out.to_stdout() ? stderr : stdout;
  // Flags of the other mode are refused, not ignored (issue 16, class 5).
  if (args.count("from-trace")) {
    refuse_flags(args, {"backend", "quick", "hot", "repeats", "warmup", "rounds", "repetition-ms",
                        "ranks", "timeout-s"},
                 "a microbenchmark flag, but --from-trace fits from a trace");
    return calibrate_from_trace_file(args, output, out);
  }
  refuse_flags(args, {"hidden", "ffn", "seq", "layers-per-stage", "optimizer", "dp", "skip-steps"},
               "describes the run of a --from-trace trace; not used by microbenchmarks");

  MicrobenchOptions mo;
  mo.backend = parse_backend_kind(args["backend"].as<std::string>(), "--backend");
  refuse_threads_backend_under_mpirun(mo.backend, "calibrate");
  MicrobenchFlags flags;
  flags.backend = mo.backend;
  flags.quick = args.count("quick") > 0;
  flags.hot = args.count("hot") > 0;
  if (args.count("repeats")) flags.repeats = args["repeats"].as<int>();
  flags.warmup = args["warmup"].as<int>();
  if (args.count("rounds")) flags.rounds = args["rounds"].as<int>();
  if (args.count("repetition-ms")) flags.repetition_ms = args["repetition-ms"].as<double>();
  flags.ranks = args["ranks"].as<int>();
  flags.timeout_s = args["timeout-s"].as<double>();
  mo = microbench_options(flags);
  ClusterSpec base =
      args.count("base")
          ? load_cluster_arg(args["base"].as<std::string>())
          : cluster_preset(mo.backend == BackendKind::kCuda ? "h100-sxm" : "a100-80g");
  const std::string name =
      cluster_name_flag(args, "calibrated-" + std::string(to_string(mo.backend)));
  const bool tty = isatty(STDERR_FILENO) && !args.count("json");
  auto progress = [&](const std::string& line) {
    if (tty) std::fprintf(stderr, "calibrate: %s\n", line.c_str());
  };

  MicrobenchResult r;
  if (mo.backend == BackendKind::kMpi) {
    refuse_flags(args, {"ranks"}, "threads backend only (under mpi the ranks are mpirun's -n)");
    mo.ranks = MpiSession::get().size();
    try {
      r = run_microbenchmarks(mo, progress);
    } catch (const InputError&) {
      throw;  // thrown alike on every rank before any communication
    } catch (const std::exception& e) {
      mpi_abort("jaxpp-sim calibrate: error: rank " + std::to_string(MpiSession::get().rank()) +
                    ": " + e.what(),
                kExitFailure);
    }
    if (!r.root) return kExitOk;
  } else {
    r = run_microbenchmarks(mo, progress);
  }
  Calibration cal = calibrate(r.measurements, base, name);
  write_cluster(cal.cluster, out);
  if (args.count("json")) {
    nlohmann::json j = calibration_to_json(cal);
    j["backend"] = r.measurements.backend;
    j["ranks"] = r.measurements.ranks;
    if (!output.empty()) j["output"] = output;
    std::cout << j.dump(2) << "\n";
  } else {
    print_calibration(cal, r.measurements);
    for (const std::string& p : out.written_files())
      std::fprintf(g_report, "wrote %s\n", p.c_str());
  }
  std::cout.flush();
  return kExitOk;
}

const CommandRegistration kCalibrateCommand{"calibrate",
                               "Fit a cluster JSON from microbenchmarks on a backend or from a "
                               "measured run trace",
                               run_calibrate};

}  // namespace
}  // namespace jaxpp::cli
