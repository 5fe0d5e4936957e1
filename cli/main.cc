// jaxpp-sim: one binary, subcommands (see `jaxpp-sim --help`).
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "graph/error.h"
#include "graph/release_at_exit.h"
#include "runtime/comm_plan.h"
#include "runtime/cuda_plugin.h"
#include "runtime/mpi_backend.h"

// Set by cli/CMakeLists.txt for this file.
#ifndef JAXPP_VERSION
#error "JAXPP_VERSION must be defined"
#endif

// OpenBLAS, linked for the runtime's host GEMMs (which run it with one thread,
// openblas_set_num_threads(1)), starts a pool of worker threads when the library is loaded, one
// per core. Each spins, yielding, for about 0.1 s before it sleeps: CPU time on every other core
// for every command, as much as a whole `simulate` run per core. main() stops the pool; OpenBLAS
// starts it again if a call ever needs it. Weak: a BLAS without the pool (serial OpenBLAS) has
// no such function, and then there is nothing to stop.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace {

// The heap of a short command-line process: large and written once (a lowered program of half a
// million instructions is 36 MB in one block per actor, each above malloc's mmap threshold, so
// each 4 KiB page costs a page fault: 9,000 of them for that program alone). Here the heap
// grows in one step of kHeapReserveBytes of address space, marked MADV_HUGEPAGE so that the
// kernel backs it with 2 MiB pages where it can (one fault per 2 MiB; pages never touched are
// never backed), and blocks up to malloc's largest mmap threshold come from it. A hint: without
// transparent huge pages, or when it fails, the heap behaves as before.
void reserve_huge_page_heap() {
  constexpr size_t kHeapReserveBytes = size_t{256} << 20;
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  // Blocks up to 32 MiB (glibc's largest threshold) from the heap, which is never trimmed.
  if (mallopt(M_MMAP_THRESHOLD, 32 << 20) == 0 || mallopt(M_TRIM_THRESHOLD, INT_MAX) == 0 ||
      mallopt(M_TOP_PAD, static_cast<int>(kHeapReserveBytes)) == 0)
    return;
  void* const probe = malloc(1 << 20);  // more than the heap has free: it grows once, padded
  const uintptr_t end = reinterpret_cast<uintptr_t>(sbrk(0));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(probe) + kHugePage - 1) & ~(kHugePage - 1);
  if (probe != nullptr && end > begin + kHugePage) {
#ifdef MADV_HUGEPAGE
    madvise(reinterpret_cast<void*>(begin), (end - begin) & ~(kHugePage - 1), MADV_HUGEPAGE);
#endif
  }
  free(probe);
  mallopt(M_TOP_PAD, 128 << 10);  // glibc's default: later growth (beyond the reserve) as usual
}

}  // namespace

namespace jaxpp::cli {
namespace {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

void print_usage(std::ostream& out) {
  out << "jaxpp-sim: plan, simulate and run MPMD pipeline-parallel training\n\n"
         "Usage: jaxpp-sim <command> [options]   (jaxpp-sim <command> --help for its options)\n\n"
         "Commands:\n";
  for (const Command& c : commands()) {
    out << "  " << c.name << std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ')
        << c.summary << "\n";
  }
}

// `jaxpp-sim --version`: the version, then one line per build option. The CUDA plugin is looked
// for (as `--backend cuda` would) but not loaded, so this works without the CUDA libraries.
void print_version(std::ostream& out) {
  out << "jaxpp-sim " << JAXPP_VERSION << "\n"
      << "build type: " << JAXPP_BUILD_TYPE << "\n"
      << "mpi backend: " << jaxpp::mpi_library_version() << "\n";
  const jaxpp::CudaPluginStatus cuda = jaxpp::find_cuda_plugin();
  const std::string cuda_build = JAXPP_CUDA_BUILD;
  out << "cuda plugin: ";
  if (!cuda.path.empty()) {
    out << "available, " << cuda.path;
    if (!cuda_build.empty()) out << " (built with " << cuda_build << ")";
    out << "; loaded by --backend cuda\n";
  } else if (cuda.built) {
    std::string dirs;
    for (const std::string& d : cuda.searched) dirs += (dirs.empty() ? "" : ", ") + d;
    out << "not available: built with " << cuda_build << ", but " << jaxpp::kCudaPluginFileName
        << " is not in " << (dirs.empty() ? "any directory" : dirs) << "\n";
  } else {
    out << "not available: not built (JAXPP_WITH_CUDA=OFF or no CUDA 13 toolkit with NCCL at "
           "configure time)\n";
  }
  out << "cuda plugin abi: " << jaxpp::kCudaPluginAbiVersion << "\n";
}

}  // namespace

const std::vector<Command>& commands() {
  static const bool sorted = [] {
    std::sort(registry().begin(), registry().end(),
              [](const Command& a, const Command& b) { return a.name < b.name; });
    return true;
  }();
  (void)sorted;
  return registry();
}

CommandRegistration::CommandRegistration(std::string name, std::string summary, CommandFn run) {
  registry().push_back({std::move(name), std::move(summary), std::move(run)});
}

}  // namespace jaxpp::cli

namespace {

// `rc`, or kExitFailure with a message when the standard output could not be written (a full disk,
// a closed descriptor): what a command printed there is its result, and a result lost must not
// end in success. The output is flushed here, so a write that fails only at exit is caught too.
int checked_stdout(int rc, const std::string& name) {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return rc;
  std::cerr << "jaxpp-sim " << name << ": error: cannot write the standard output"
            << (error != 0 ? std::string(" (") + std::strerror(error) + ")" : std::string())
            << "\n";
  return rc == jaxpp::cli::kExitOk ? jaxpp::cli::kExitFailure : rc;
}

// Only run, calibrate and explore split their work over the processes an MPI launcher starts;
// every other command would run once per process, each writing the same files.
void refuse_copies_under_mpirun(const std::string& name) {
  if (name == "run" || name == "calibrate" || name == "explore") return;
  const int size = jaxpp::mpi_launcher_world_size();
  if (size <= 1) return;
  jaxpp::throw_input_error("", "this process is one of " + std::to_string(size) +
                                   " that an MPI launcher started, and " + name +
                                   " runs in one process (each would run it whole and write the "
                                   "same files; only run, calibrate and explore use MPI ranks): "
                                   "start it without mpirun");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace jaxpp::cli;
  if (blas_thread_shutdown_ != nullptr) blas_thread_shutdown_();
  reserve_huge_page_heap();
  if (argc < 2) {
    print_usage(std::cerr);
    return kExitBadInput;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(std::cout);
    return kExitOk;
  }
  if (name == "--version") {
    print_version(std::cout);
    return kExitOk;
  }
  // The process ends when the command returns: large results need not be freed one block at a
  // time (graph/release_at_exit.h).
  jaxpp::enable_release_at_exit();
  for (const Command& c : commands()) {
    if (c.name != name) continue;
    try {
      refuse_copies_under_mpirun(name);
      return checked_stdout(c.run(argc - 1, argv + 1), name);
    } catch (const jaxpp::InputError& e) {
      std::cerr << "jaxpp-sim " << name << ": error: " << e.what() << "\n";
      return kExitBadInput;
    } catch (const cxxopts::exceptions::exception& e) {
      std::cerr << "jaxpp-sim " << name << ": error: " << e.what()
                << " (see jaxpp-sim " << name << " --help)\n";
      return kExitBadInput;
    } catch (const std::bad_alloc&) {
      std::cerr << "jaxpp-sim " << name << ": error: out of memory\n";
      return kExitFailure;
    } catch (const std::exception& e) {
      std::cerr << "jaxpp-sim " << name << ": error: " << e.what() << "\n";
      return kExitFailure;
    }
  }
  std::cerr << "jaxpp-sim: error: unknown command '" << name
            << "' (run jaxpp-sim --help for the list)\n";
  return kExitBadInput;
}
