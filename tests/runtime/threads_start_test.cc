// run_on_threads when the system cannot start every worker thread: the world is aborted with a
// message naming the thread, and the workers already started are woken and joined (it was
// std::terminate: "terminate called without an active exception", SIGABRT).
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/threads_backend.h"

// GCC defines __SANITIZE_*__; clang (the sanitizer builds) answers __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define JAXPP_TEST_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define JAXPP_TEST_UNDER_SANITIZER 1
#endif
#endif
#ifndef JAXPP_TEST_UNDER_SANITIZER
#define JAXPP_TEST_UNDER_SANITIZER 0
#endif

namespace jaxpp {
namespace {

// This process's address space now, in bytes (/proc/self/statm's first field, in pages).
size_t address_space_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  return pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

void start_too_many_threads() {
  // Room for a few threads' 8 MiB stacks, not for 512.
  const rlimit limit{address_space_bytes() + (64u << 20), address_space_bytes() + (64u << 20)};
  if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
  ThreadsWorld world(512, 1);
  run_on_threads(world, [&](int, int) {
    while (world.abort_reason().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  const std::string why = world.abort_reason();
  std::fprintf(stderr, "%s\n", why.c_str());
  // _exit: no exit handlers (OpenBLAS joins its threads at exit, which the limit can stall).
  _exit(why.rfind("cannot start worker thread ", 0) == 0 &&
                    why.find(" of 512 (") != std::string::npos &&
                    why.find("--backend mpi") != std::string::npos
                ? 0
                : 1);
}

TEST(RunOnThreadsDeathTest, AThreadTheSystemCannotStartAbortsTheWorldWithItsReason) {
#if JAXPP_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "an address-space limit breaks the sanitizers' own allocators";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(start_too_many_threads(), testing::ExitedWithCode(0), "cannot start worker thread");
#endif
}

// run_together (the calibration's compute round): a thread that cannot start releases the ones
// started, which return without running, and the call throws naming it (it was std::terminate: a
// joinable thread destroyed while its siblings waited at a barrier).
void start_too_many_together() {
  const rlimit limit{address_space_bytes() + (64u << 20), address_space_bytes() + (64u << 20)};
  if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
  std::atomic<int> ran{0};
  try {
    run_together(512, [&](int) { ran.fetch_add(1); });
  } catch (const RuntimeFailure& e) {
    std::fprintf(stderr, "%s\n", e.what());
    const std::string why = e.what();
    _exit(why.rfind("cannot start thread ", 0) == 0 && why.find(" of 512 (") != std::string::npos &&
                  ran.load() == 0
              ? 0
              : 1);
  }
  _exit(2);  // every thread started: the limit did not bite
}

TEST(RunTogetherDeathTest, AThreadTheSystemCannotStartIsAnErrorAndNoThreadRuns) {
#if JAXPP_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "an address-space limit breaks the sanitizers' own allocators";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(start_too_many_together(), testing::ExitedWithCode(0), "cannot start thread ");
#endif
}

TEST(RunTogether, RunsEveryIndexOnce) {
  std::vector<std::atomic<int>> seen(5);
  run_together(5, [&](int i) { seen[static_cast<size_t>(i)].fetch_add(1); });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

TEST(RunOnThreads, RunsEveryWorkerOnce) {
  ThreadsWorld world(3, 2);
  std::vector<std::atomic<int>> seen(6);
  run_on_threads(world, [&](int a, int r) { seen[static_cast<size_t>(r * 3 + a)].fetch_add(1); });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
  EXPECT_EQ(world.abort_reason(), "");
}

}  // namespace
}  // namespace jaxpp
