#include "graph/release_at_exit.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <utility>
#include <vector>

namespace jaxpp {
namespace {

// Counts its destructions (of a value it still owns) in *destroyed.
struct ReleaseCounted {
  explicit ReleaseCounted(int* d) : destroyed(d), values(1000, 7) {}
  ReleaseCounted(ReleaseCounted&& other) noexcept
      : destroyed(std::exchange(other.destroyed, nullptr)), values(std::move(other.values)) {}
  ReleaseCounted& operator=(ReleaseCounted&&) = delete;
  ~ReleaseCounted() {
    if (destroyed != nullptr) ++*destroyed;
  }
  int* destroyed;
  std::vector<int> values;
};

TEST(ReleaseAtExit, DoesNothingUnlessEnabled) {
  // This test binary never enables it (only jaxpp-sim's main does).
  ASSERT_FALSE(release_at_exit_enabled());
  int destroyed = 0;
  {
    ReleaseCounted value(&destroyed);
    release_at_exit(std::move(value));
    EXPECT_EQ(value.destroyed, &destroyed);  // NOLINT(bugprone-use-after-move): not moved
    EXPECT_EQ(value.values.size(), 1000u);   // NOLINT(bugprone-use-after-move)
  }
  EXPECT_EQ(destroyed, 1);  // destroyed by its owner, as without the call
}

// Enabling is for the rest of the process, so it runs in a child process of its own.
void release_in_enabled_process() {
  enable_release_at_exit();
  if (!release_at_exit_enabled()) std::exit(2);
  int destroyed = 0;
  for (int i = 0; i < 3; ++i) {
    ReleaseCounted value(&destroyed);
    release_at_exit(std::move(value));
    // Moved into the kept storage: the owner is left with nothing to destroy.
    if (value.destroyed != nullptr || !value.values.empty()) std::exit(3);  // NOLINT
  }
  // None of the three kept values has been destroyed.
  std::exit(destroyed == 0 ? 0 : 4);
}

TEST(ReleaseAtExitDeathTest, KeepsTheValueUntilTheProcessEndsOnceEnabled) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(release_in_enabled_process(), testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace jaxpp
