// Calibration figures: how well a calibrated cluster predicts real runs, and how repeatable a
// calibration is. It drives the jaxpp-sim binary exactly as a user would:
//
//   1. calibrate twice in a row on each backend (threads; mpi under mpirun -n 8) and compare every
//      fitted parameter of the two files (relative difference |a - b| / mean(a, b));
//   2. run GPipe, Std1F1B, ZeroBubble and Interleaved1F1B with `run --compare --json --cluster` on
//        threads, real compute (the fp64 MLP workload), p = 2
//        mpi, emulated compute (stage times), p = 8
//      and collect prediction_error = (measured - predicted) / predicted of every run;
//   3. print one table per backend, the median absolute error, and the parameter agreement, with
//      the targets (median |error| <= 5%, parameters within 10%).
//
// Timings on a shared machine are noisy: the figures are as good as the machine is quiet. Run it
// when nothing else computes (the output says the load average it saw).
//
// Usage (from the build directory):
//   bin/calibration_bench                         # both backends, writes ./calibration-figures/
//   bin/calibration_bench --skip-mpi --runs 3     # threads only, 3 runs per schedule
//   bin/calibration_bench --mpirun "mpirun --oversubscribe" --jaxpp-sim bin/jaxpp-sim
//   bin/calibration_bench --calibrate-flags "--repetition-ms 20"   # longer repetitions
//   bin/calibration_bench --skip-mpi --hidden 64 --seq 64          # another threads workload size
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

struct Options {
  std::string jaxpp_sim;
  std::string mpirun;
  std::string out_dir = "calibration-figures";
  int runs = 1;  // runs per schedule and backend
  bool skip_threads = false;
  bool skip_mpi = false;
  bool quick = false;
  std::string calibrate_flags;  // extra flags for every calibrate
  int hidden = 128;             // the threads workload: features per token
  int seq = 128;                // and tokens per microbatch
};

struct Case {
  std::string schedule;  // registry name
  std::string label;
  std::string extra;  // schedule-specific flags
};

const std::vector<Case> kCases = {{"gpipe", "GPipe", ""},
                                  {"1f1b", "Std1F1B", ""},
                                  {"zb-h1", "ZeroBubble", ""},
                                  {"interleaved", "Interleaved1F1B", " --virtual 2"}};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command; stdout is returned, stderr goes to `log`. Throws on a non-zero exit.
std::string run(const std::string& command, const std::string& log) {
  const std::string out = log + ".stdout";
  const std::string cmd = command + " >" + out + " 2>" + log + " </dev/null";
  std::fprintf(stderr, "calibration_bench: %s\n", command.c_str());
  const int status = std::system(cmd.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("command failed (" + std::to_string(WEXITSTATUS(status)) +
                             "): " + command + "\n" + slurp(log));
  return slurp(out);
}

// Busy CPU seconds of the whole host so far (/proc/stat: user, nice, system, irq, softirq, steal).
double host_busy_s() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return (user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds used by the finished children of this process (every jaxpp-sim it ran).
double children_cpu_s() {
  rusage r{};
  getrusage(RUSAGE_CHILDREN, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct BackendFigures {
  std::string name;
  std::vector<std::pair<std::string, nlohmann::json>> runs;     // (schedule label, run JSON)
  std::map<std::string, std::pair<double, double>> parameters;  // name -> (first, second)
  double median_abs_error = 0;
  double worst_parameter_difference = 0;
};

BackendFigures figures_for(const Options& o, const std::string& backend) {
  BackendFigures f;
  f.name = backend;
  const bool mpi = backend == "mpi";
  const std::string launcher = mpi ? o.mpirun + " -n 8 " : "";
  const std::string dir = o.out_dir + "/" + backend;
  std::filesystem::create_directories(dir);
  const std::string quick = (o.quick ? " --quick" : "") + std::string(" ") + o.calibrate_flags;

  // Two calibrations in a row.
  std::vector<nlohmann::json> fits;
  for (const char* which : {"a", "b"}) {
    const std::string file = dir + "/cluster-" + which + ".json";
    const std::string out = run(
        launcher + o.jaxpp_sim + " calibrate --backend " + backend + quick + " --json -o " + file,
        dir + "/calibrate-" + which + ".log");
    const nlohmann::json j = nlohmann::json::parse(out);
    nlohmann::json params = j.at("parameters");
    // The measured GEMM efficiency table is calibrated too: one entry per size.
    const nlohmann::json& gemm = j.at("cluster").at("gemm_efficiency");
    if (gemm.contains("measured"))
      for (const nlohmann::json& point : gemm.at("measured")) {
        char name[64];
        std::snprintf(name, sizeof name, "gemm_efficiency@%.3gGFLOP",
                      point.at("gflops").get<double>());
        params[name] = point.at("efficiency").get<double>();
      }
    fits.push_back(params);
  }
  for (const auto& [name, a] : fits[0].items()) {
    if (!fits[1].contains(name)) continue;
    const double x = a.get<double>(), y = fits[1].at(name).get<double>();
    f.parameters[name] = {x, y};
    const double mean = 0.5 * (std::abs(x) + std::abs(y));
    if (mean > 0)
      f.worst_parameter_difference = std::max(f.worst_parameter_difference, std::abs(x - y) / mean);
  }

  // Runs predicted from the second calibration.
  const std::string cluster = dir + "/cluster-b.json";
  const std::string workload =
      mpi ? " --backend mpi --compute emulated --pp 8 --microbatches 16 --time-scale 4"
          : " --backend threads --compute real --pp 2 --microbatches 8 --hidden " +
                std::to_string(o.hidden) + " --seq " + std::to_string(o.seq) +
                " --layers-per-stage 2";
  std::vector<double> abs_errors;
  for (const Case& c : kCases)
    for (int r = 0; r < o.runs; ++r) {
      const std::string out =
          run(launcher + o.jaxpp_sim + " run --schedule " + c.schedule + c.extra + workload +
                  " --steps 9 --warmup 1 --compare --json --cluster " + cluster,
              dir + "/run-" + c.schedule + "-" + std::to_string(r) + ".log");
      nlohmann::json j = nlohmann::json::parse(out);
      abs_errors.push_back(std::abs(j.at("prediction_error").get<double>()));
      f.runs.push_back({c.label, j});
    }
  f.median_abs_error = median(abs_errors);
  return f;
}

void print_figures(const BackendFigures& f, const Options& o) {
  if (f.name == "threads")
    std::printf("\n== threads (real compute, p = 2, m = 8, hidden %d, seq %d) ==\n", o.hidden,
                o.seq);
  else
    std::printf("\n== %s ==\n", f.name.c_str());
  std::printf("%-16s %14s %14s %10s\n", "schedule", "predicted_s", "measured_s", "error");
  for (const auto& [label, j] : f.runs)
    std::printf("%-16s %14.6f %14.6f %+9.1f%%\n", label.c_str(),
                j.at("predicted_step_time_s").get<double>(), j.at("step_time_s").get<double>(),
                100 * j.at("prediction_error").get<double>());
  std::printf("median |error|: %.1f%% (target <= 5%%: %s)\n", 100 * f.median_abs_error,
              f.median_abs_error <= 0.05 ? "met" : "NOT met");
  // Per instruction kind, the median over the runs of (measured - predicted) / predicted of the
  // mean duration: which part of the prediction is off.
  std::map<std::string, std::vector<double>> by_kind;
  for (const auto& [label, j] : f.runs)
    if (j.contains("kinds"))
      for (const auto& [kind, k] : j.at("kinds").items())
        if (k.at("predicted_s").get<double>() > 0)
          by_kind[kind].push_back(k.at("error_pct").get<double>());
  std::printf("per kind, median error over the runs:");
  for (const auto& [kind, errors] : by_kind)
    std::printf(" %s %+.1f%%", kind.c_str(), median(errors));
  std::printf("\n");
  std::printf("%-30s %14s %14s %8s\n", "fitted parameter", "calibration 1", "calibration 2",
              "diff");
  for (const auto& [name, v] : f.parameters) {
    const double mean = 0.5 * (std::abs(v.first) + std::abs(v.second));
    std::printf("%-30s %14.6g %14.6g %7.1f%%\n", name.c_str(), v.first, v.second,
                mean > 0 ? 100 * std::abs(v.first - v.second) / mean : 0.0);
  }
  std::printf("largest parameter difference: %.1f%% (target <= 10%%: %s)\n",
              100 * f.worst_parameter_difference,
              f.worst_parameter_difference <= 0.10 ? "met" : "NOT met");
}

nlohmann::json to_json(const BackendFigures& f) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& [label, j] : f.runs)
    runs.push_back({{"schedule", label},
                    {"predicted_step_time_s", j.at("predicted_step_time_s")},
                    {"step_time_s", j.at("step_time_s")},
                    {"prediction_error", j.at("prediction_error")}});
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [name, v] : f.parameters) params[name] = {v.first, v.second};
  return {{"runs", runs},
          {"median_abs_prediction_error", f.median_abs_error},
          {"parameters", params},
          {"largest_parameter_difference", f.worst_parameter_difference}};
}

std::string default_mpirun() {
  std::string m = "mpirun --oversubscribe";
  if (geteuid() == 0) m += " --allow-run-as-root";
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.jaxpp_sim = (std::filesystem::path(argv[0]).parent_path() / "jaxpp-sim").string();
  o.mpirun = default_mpirun();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "calibration_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--jaxpp-sim") {
      o.jaxpp_sim = value();
    } else if (a == "--mpirun") {
      o.mpirun = value();
    } else if (a == "--out") {
      o.out_dir = value();
    } else if (a == "--runs") {
      o.runs = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--skip-threads") {
      o.skip_threads = true;
    } else if (a == "--skip-mpi") {
      o.skip_mpi = true;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--calibrate-flags") {
      o.calibrate_flags = value();
    } else if (a == "--hidden") {
      o.hidden = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--seq") {
      o.seq = std::max(1, std::atoi(value().c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: calibration_bench [--jaxpp-sim PATH] [--mpirun CMD] [--out DIR] "
                   "[--runs N] [--skip-threads] [--skip-mpi] [--quick] [--calibrate-flags "
                   "'...'] [--hidden N] [--seq N]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  try {
    nlohmann::json summary;
    summary["load_average_before"] = load_average();
    const double busy0 = host_busy_s(), mine0 = children_cpu_s();
    const auto wall0 = std::chrono::steady_clock::now();
    std::vector<BackendFigures> all;
    if (!o.skip_threads) all.push_back(figures_for(o, "threads"));
    if (!o.skip_mpi) all.push_back(figures_for(o, "mpi"));
    summary["load_average_after"] = load_average();
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    // Cores the rest of the host kept busy meanwhile: the load that timings of a shared machine
    // carry (the load average counts this benchmark's own threads too).
    summary["other_processes_cores"] =
        std::max(0.0, (host_busy_s() - busy0) - (children_cpu_s() - mine0)) / wall_s;
    std::printf("load average (1 min): %.2f before, %.2f after, on %u hardware threads\n",
                summary["load_average_before"].get<double>(),
                summary["load_average_after"].get<double>(),
                std::max(1u, static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN))));
    std::printf("other processes kept %.2f cores busy on average over %.0f s\n",
                summary["other_processes_cores"].get<double>(), wall_s);
    for (const BackendFigures& f : all) {
      print_figures(f, o);
      summary[f.name] = to_json(f);
      if (f.name == "threads") summary[f.name]["workload"] = {{"hidden", o.hidden}, {"seq", o.seq}};
    }
    std::ofstream(o.out_dir + "/summary.json") << summary.dump(2) << "\n";
    std::printf("\nwrote %s/summary.json\n", o.out_dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "calibration_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
