// Start-up cost of the jaxpp-sim binary: wall time of a whole process (fork, exec, dynamic
// loading, static initialisation, the command, exit) and its peak resident memory, for commands
// that need no CUDA library. The CUDA backend is a plugin opened only by --backend cuda, so these
// load none of CUDA, cuBLAS, cuBLASLt or NCCL (targets: `schedules` under 10 ms and 30 MB).
// Counters: peak_rss_MiB = the largest ru_maxrss of the measured children (wait4), in MiB;
// child_cpu_ms = the children's user + system CPU time per run (less sensitive than the wall
// time to other load on the machine).
// The binary is this build's jaxpp-sim; JAXPP_SIM=/path/to/jaxpp-sim measures another one (e.g.
// an older build, for a before/after figure).
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

void BM_Startup(benchmark::State& state, std::vector<std::string> args) {
  long peak_kib = 0;
  double cpu_s = 0;
  for (auto _ : state) {
    const ChildUsage usage = run_once(args);
    if (usage.peak_rss_kib < 0) {
      state.SkipWithError(("jaxpp-sim failed or was not found: " + startup_binary()).c_str());
      return;
    }
    peak_kib = std::max(peak_kib, usage.peak_rss_kib);
    cpu_s += usage.cpu_s;
  }
  state.counters["peak_rss_MiB"] = static_cast<double>(peak_kib) / 1024.0;
  state.counters["child_cpu_ms"] =
      benchmark::Counter(1e3 * cpu_s, benchmark::Counter::kAvgIterations);
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

}  // namespace

BENCHMARK_MAIN();
