// Text Gantt: golden output and the meaning of cells.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "tests/trace/golden.h"
#include "tests/trace/trace_fixture.h"
#include "trace/text_gantt.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;
using testing::small_trace;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string row_cells(const std::string& gantt, const std::string& label) {
  for (const std::string& line : lines_of(gantt)) {
    if (line.rfind(label + " ", 0) == 0 || line.rfind(label + "|", 0) == 0) {
      const auto open = line.find('|');
      return line.substr(open + 1, line.rfind('|') - open - 1);
    }
  }
  return "";
}

TEST(TextGantt, MatchesGoldenText) {
  testing::expect_matches_golden(text_gantt(small_trace(), {.width = 44}), "gantt_small.txt");
}

TEST(TextGantt, MatchesGoldenTextPerStream) {
  testing::expect_matches_golden(text_gantt(small_trace(), {.width = 44, .per_stream = true}),
                                 "gantt_small_per_stream.txt");
}

TEST(TextGantt, RowsHaveTheRequestedWidth) {
  const std::string g = text_gantt(small_trace(), {.width = 37});
  EXPECT_EQ(row_cells(g, "actor 0").size(), 37u);
  EXPECT_EQ(row_cells(g, "actor 1").size(), 37u);
}

TEST(TextGantt, CellsShowWhatRanThere) {
  // 44 columns over 11 ms: a column is 0.25 ms, so fixture time t ms is column 4t.
  const std::string a0 = row_cells(text_gantt(small_trace(), {.width = 44}), "actor 0");
  ASSERT_EQ(a0.size(), 44u);
  EXPECT_EQ(a0.substr(0, 8), "FFFFFFFF");   // F0, F1 on [0, 2)
  EXPECT_EQ(a0.substr(8, 1), "-");          // send of F1 on [2, 2.25), compute idle
  EXPECT_EQ(a0.substr(9, 7), ".......");    // nothing on [2.25, 4.25)
  EXPECT_EQ(a0.substr(18, 8), "BBBBBBBB");  // B0@s0 on [4.5, 6.5)
  EXPECT_EQ(a0.substr(38, 4), "AAAA");      // all-reduce on [9.5, 10.5)
  EXPECT_EQ(a0.substr(42, 2), "OO");        // optimizer on [10.5, 11)
}

TEST(TextGantt, HasATimeAxisAndLegend) {
  const std::string g = text_gantt(small_trace(), {.width = 44});
  EXPECT_THAT(g, HasSubstr("+---------+"));
  EXPECT_THAT(g, HasSubstr("0 ms"));
  EXPECT_THAT(g, HasSubstr("F forward"));
  EXPECT_THAT(g, HasSubstr(". idle"));
}

TEST(TextGantt, PerStreamShowsCommunicationRows) {
  const std::string g = text_gantt(small_trace(), {.width = 44, .per_stream = true});
  const std::string send = row_cells(g, "actor 0 send->1");
  ASSERT_EQ(send.size(), 44u);
  EXPECT_EQ(send.substr(4, 1), "-");
  EXPECT_EQ(send.substr(0, 4), "....");
}

}  // namespace
}  // namespace jaxpp
