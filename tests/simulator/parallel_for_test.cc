#include "simulator/parallel_for.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace jaxpp {
namespace {

TEST(ParallelFor, RunsEveryItemOnceForAnyThreadCount) {
  for (int threads : {0, 1, 2, 3, 64}) {
    std::vector<std::atomic<int>> visits(257);
    parallel_for(visits.size(), threads, [&](size_t i) { visits[i].fetch_add(1); });
    for (size_t i = 0; i < visits.size(); ++i)
      ASSERT_EQ(visits[i].load(), 1) << "item " << i << " with " << threads << " threads";
  }
}

TEST(ParallelFor, NoItemsRunsNothing) {
  bool called = false;
  parallel_for(0, 4, [&](size_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(ParallelFor, UsesAtMostTheThreadsAskedAndTheCaller) {
  std::mutex mutex;
  std::set<std::thread::id> seen;
  parallel_for(64, 2, [&](size_t) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard lock(mutex);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_LE(seen.size(), 2u);
  seen.clear();
  const std::thread::id caller = std::this_thread::get_id();
  parallel_for(8, 1, [&](size_t) { seen.insert(std::this_thread::get_id()); });
  EXPECT_EQ(seen, std::set<std::thread::id>{caller});
}

TEST(ParallelFor, RethrowsTheErrorOfTheLowestIndexAfterEveryItemRan) {
  for (int threads : {1, 4}) {
    std::atomic<int> ran{0};
    try {
      parallel_for(100, threads, [&](size_t i) {
        ran.fetch_add(1);
        if (i == 70 || i == 30 || i == 99) throw std::runtime_error("item " + std::to_string(i));
      });
      FAIL() << "no exception with " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "item 30");
    }
    EXPECT_EQ(ran.load(), 100) << "an error does not stop the other items";
  }
}

TEST(ParallelFor, ResolveThreads) {
  EXPECT_EQ(resolve_threads(4, 2), 2);
  EXPECT_EQ(resolve_threads(4, 0), 1);
  EXPECT_EQ(resolve_threads(3, 100), 3);
  EXPECT_GE(resolve_threads(0, 100), 1);
  EXPECT_EQ(resolve_threads(-5, 1), 1);
}

}  // namespace
}  // namespace jaxpp
