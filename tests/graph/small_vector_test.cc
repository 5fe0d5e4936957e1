#include "graph/small_vector.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <utility>
#include <vector>

namespace jaxpp {
namespace {

using Ints = SmallVector<int, 2>;

TEST(SmallVector, KeepsElementsInOrderAcrossTheMoveToTheHeap) {
  Ints v;
  for (int i = 0; i < 5; ++i) v.push_back(i);
  EXPECT_EQ(v, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(v.size(), 5u);
  EXPECT_EQ(v.back(), 4);
}

TEST(SmallVector, CopiesAndMovesInlineAndHeapContents) {
  for (const std::vector<int>& values : {std::vector<int>{7}, std::vector<int>{1, 2, 3, 4}}) {
    Ints a = values;
    Ints copy = a;
    Ints moved = std::move(a);
    EXPECT_EQ(copy, values);
    EXPECT_EQ(moved, values);
    EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): a moved-from SmallVector is empty
    copy = moved;
    EXPECT_EQ(copy, values);
  }
}

TEST(SmallVector, AssignReplacesTheContents) {
  Ints v = {1, 2, 3};
  const int two[] = {8, 9};
  v.assign(two, two + 2);
  EXPECT_EQ(v, (std::vector<int>{8, 9}));
  v.clear();
  EXPECT_TRUE(v.empty());
}

TEST(SmallVector, AtThrowsOutOfRangeLikeStdVector) {
  const Ints v = {1};
  EXPECT_EQ(v.at(0), 1);
  EXPECT_THROW(v.at(1), std::out_of_range);
}

}  // namespace
}  // namespace jaxpp
