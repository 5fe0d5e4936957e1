// Per-message latency of the mpi backend: a ping-pong of small messages between rank pairs
// through Backend::send_message / wait_message (the executor's path), as `calibrate --backend mpi`
// measures it, in two settings:
//
//   back to back   the peer answers at once: the receiver has waited only a few microseconds
//                  (the spinning phase of MpiBackend's waits)
//   after 1 ms     each side computes 1 ms (spinning) before it sends: the receiver has waited
//                  about 1 ms, as a pipeline's receiver waits for a task
//
// and, per setting, the CPU time each rank used as a share of the wall time. After 1 ms, each rank
// computes half of the time and waits the other half: 50% means its waits used no CPU, 100% that
// they spun throughout (CPU a rank computing on the same core would have lost). One-way time =
// (round trip - compute) / 2, median of 101 round trips per size, after 10 untimed ones.
//
// Usage (from the build directory):
//   mpirun --oversubscribe -n 2 bin/mpi_latency_bench
//   mpirun --oversubscribe -n 8 bin/mpi_latency_bench      # 4 pairs on an oversubscribed host
#include <time.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "runtime/microbench.h"
#include "runtime/mpi_backend.h"

namespace {

double cpu_time_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main() {
  using namespace jaxpp;
  try {
    MpiSession& mpi = MpiSession::get();
    MpiBackend backend(mpi.size(), 1);
    Timing timing;
    timing.warmup = 10;
    timing.repeats = 101;
    const std::vector<int64_t> sizes = {8, 512, 4096};
    struct Setting {
      const char* name;
      double think_s;
    };
    for (const Setting& s : {Setting{"back to back", 0.0}, Setting{"after 1 ms", 1e-3}}) {
      const double wall0 = backend.now_s(), cpu0 = cpu_time_s();
      std::vector<SizeSample> samples =
          bench_p2p(backend, sizes, timing, s.think_s, /*spin=*/true, /*timeout_s=*/60);
      const double wall = backend.now_s() - wall0, cpu = cpu_time_s() - cpu0;
      for (const SizeSample& p : samples)
        std::printf("%-13s %6.0f B  one-way %8.2f us\n", s.name, p.size, 1e6 * p.seconds);
      std::printf("%-13s rank %d of %d: cpu %.0f%% of %.2f s wall\n", s.name, mpi.rank(),
                  mpi.size(), 100 * cpu / wall, wall);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_latency_bench: %s\n", e.what());
    mpi_abort("mpi_latency_bench failed", 1);
  }
  return 0;
}
