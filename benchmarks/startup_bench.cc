// Start-up cost of the jaxpp-sim binary: wall time of a whole process (fork, exec, dynamic
// loading, static initialisation, the command, exit) and its peak resident memory, for commands
// that need no CUDA library. The CUDA backend is a plugin opened only by --backend cuda, so these
// load none of CUDA, cuBLAS, cuBLASLt or NCCL (targets: `schedules` under 10 ms and 30 MB).
// Counters: peak_rss_MiB = the largest ru_maxrss of the measured children (wait4), in MiB;
// child_cpu_ms = the children's user + system CPU time per run (less sensitive than the wall
// time to other load on the machine).
// The binary is this build's jaxpp-sim; JAXPP_SIM=/path/to/jaxpp-sim measures another one (e.g.
// an older build, for a before/after figure).
//
// BM_SimulateProcess: the whole `jaxpp-sim simulate --schedule ZeroBubble --pp 64
// --microbatches 1024 --t-f 1 --t-b 1 --t-w 1` process (unit-time measured mode; Arg 1 adds
// --json), the case of the simulate speed target (>= 4 million simulated instructions per
// second of the whole process). Counters: instructions (of the lowered program, counted in
// this process), instructions_per_s (per second of wall time) and instructions_per_cpu_s (per
// second of the child's CPU time, the figure to compare on a loaded machine).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "schedules/lower.h"
#include "schedules/registry.h"

extern char** environ;

namespace {

std::string startup_binary() {
  const char* env = std::getenv("JAXPP_SIM");
  return env != nullptr && *env != '\0' ? env : JAXPP_SIM_BINARY;
}

struct ChildUsage {
  long peak_rss_kib = -1;  // -1: it did not run or did not exit with 0
  double cpu_s = 0;
};

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * t.tv_usec; }

// Runs the binary with `args`, stdout and stderr to /dev/null.
ChildUsage run_once(const std::vector<std::string>& args) {
  const std::string binary = startup_binary();
  std::vector<char*> argv{const_cast<char*>(binary.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return {};
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid) return {};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
  return {usage.ru_maxrss, seconds(usage.ru_utime) + seconds(usage.ru_stime)};
}

// Runs the process once per iteration; returns the children's total CPU time, or -1 after
// SkipWithError.
double run_processes(benchmark::State& state, const std::vector<std::string>& args) {
  long peak_kib = 0;
  double cpu_s = 0;
  for (auto _ : state) {
    const ChildUsage usage = run_once(args);
    if (usage.peak_rss_kib < 0) {
      state.SkipWithError(("jaxpp-sim failed or was not found: " + startup_binary()).c_str());
      return -1;
    }
    peak_kib = std::max(peak_kib, usage.peak_rss_kib);
    cpu_s += usage.cpu_s;
  }
  state.counters["peak_rss_MiB"] = static_cast<double>(peak_kib) / 1024.0;
  state.counters["child_cpu_ms"] =
      benchmark::Counter(1e3 * cpu_s, benchmark::Counter::kAvgIterations);
  return cpu_s;
}

void BM_Startup(benchmark::State& state, std::vector<std::string> args) {
  run_processes(state, args);
}

void BM_SimulateProcess(benchmark::State& state) {
  const int pp = 64, microbatches = 1024;
  std::vector<std::string> args = {"simulate",      "--schedule", "ZeroBubble",
                                   "--pp",          std::to_string(pp),
                                   "--microbatches", std::to_string(microbatches),
                                   "--t-f",         "1",
                                   "--t-b",         "1",
                                   "--t-w",         "1"};
  if (state.range(0) != 0) args.emplace_back("--json");
  // The program the command simulates (measured mode lowers without all-reduces).
  jaxpp::ScheduleParams params;
  params.num_actors = pp;
  params.num_microbatches = microbatches;
  jaxpp::LoweringOptions lowering;
  lowering.emit_grad_reduce = false;
  const auto n = static_cast<double>(
      jaxpp::lower(jaxpp::generate_schedule("ZeroBubble", params), lowering).num_instructions());
  const double cpu_s = run_processes(state, args);
  if (cpu_s <= 0) return;
  state.counters["instructions"] = n;
  state.counters["instructions_per_s"] =
      benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["instructions_per_cpu_s"] =
      n * static_cast<double>(state.iterations()) / cpu_s;
}

BENCHMARK_CAPTURE(BM_Startup, schedules, std::vector<std::string>{"schedules"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Startup, version, std::vector<std::string>{"--version"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Startup, show_1f1b,
                  std::vector<std::string>{"show", "--schedule", "1f1b", "--pp", "4",
                                           "--microbatches", "8"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_SimulateProcess)->ArgName("json")->Arg(0)->Arg(1)->UseRealTime()->Unit(
    benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
