// Graphviz timeline: pinned DOT text (golden), rendering to SVG and PNG through libgvc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "graph/error.h"
#include "tests/trace/golden.h"
#include "tests/trace/trace_fixture.h"
#include "trace/graphviz_render.h"
#include "trace/timeline_dot.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::small_trace;

TimelineOptions options(double width_pt, bool per_stream = false, std::string title = "") {
  TimelineOptions o;
  o.width_pt = width_pt;
  o.per_stream = per_stream;
  o.title = std::move(title);
  return o;
}

int count_matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re),
                                        std::sregex_iterator()));
}

TEST(TimelineDot, MatchesGoldenText) {
  testing::expect_matches_golden(timeline_to_dot(small_trace(), options(600)),
                                 "timeline_small.dot");
}

TEST(TimelineDot, MatchesGoldenTextPerStream) {
  testing::expect_matches_golden(
      timeline_to_dot(small_trace(), options(600, true, "per stream")),
      "timeline_small_per_stream.dot");
}

TEST(TimelineDot, PinsOneBoxPerEventWithItsDuration) {
  const Trace t = small_trace();
  const std::string dot = timeline_to_dot(t, options(1100));
  EXPECT_EQ(count_matches(dot, R"(\n  e\d+ \[)"), static_cast<int>(t.events.size()));
  // The run ends at 11 ms, drawn over 1100 pt: 1 ms is 100 pt = 1.3889 in.
  EXPECT_THAT(dot, HasSubstr("e0 [width=1.3889, height=0.2500, fillcolor=\"#4e79a7\", "
                             "label=\"F0@s0\""));
  EXPECT_THAT(dot, HasSubstr("pos=\"150.00,"));  // centre of F0@s0: 100 pt label column + 50
  EXPECT_EQ(count_matches(dot, R"(pos="[0-9.]+,[0-9.]+!")"), count_matches(dot, "pos="));
}

TEST(TimelineDot, HasALegendEntryPerCategoryAndTimeTicks) {
  const std::string dot = timeline_to_dot(small_trace(), {});
  for (const char* name : {"F", "B", "I", "W", "comm", "allreduce", "optimizer"}) {
    EXPECT_THAT(dot, HasSubstr(std::string("label=\"") + name + "\"")) << name;
  }
  EXPECT_THAT(dot, HasSubstr("label=\"0 ms\""));
  EXPECT_THAT(dot, HasSubstr("label=\"10 ms\""));  // ticks every 1 ms up to 11 ms
  EXPECT_GE(count_matches(dot, R"(tick\d+ \[)"), 5);
}

TEST(TimelineDot, PerStreamGivesEachStreamARow) {
  const std::string dot = timeline_to_dot(small_trace(), options(1000, true));
  EXPECT_THAT(dot, HasSubstr("label=\"actor 0 send->1\""));
  EXPECT_THAT(dot, HasSubstr("label=\"actor 1 collective\""));
  EXPECT_EQ(count_matches(dot, R"(row\d+ \[)"), 8);
}

TEST(TimelineRender, ProducesAnSvgDocument) {
  const std::string svg = render_dot(timeline_to_dot(small_trace(), {}), "svg", kTimelineLayoutEngine);
  EXPECT_THAT(svg, StartsWith("<?xml"));
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  EXPECT_THAT(svg, HasSubstr("F0@s0"));
  EXPECT_THAT(svg, HasSubstr("#4e79a7"));
}

TEST(TimelineRender, ProducesAPng) {
  const std::string png = render_dot(timeline_to_dot(small_trace(), {}), "png", kTimelineLayoutEngine);
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST(TimelineRender, KeepsPinnedPositions) {
  // Two boxes 300 pt apart must stay 300 pt apart in the SVG (nop engine, no re-layout).
  const std::string dot =
      "digraph g { node [shape=box, fixedsize=true, width=0.5, height=0.5];"
      " a [pos=\"100,100!\"]; b [pos=\"400,100!\"]; }";
  const std::string svg = render_dot(dot, "svg", kTimelineLayoutEngine);
  const std::regex polygon(R"(<title>(a|b)</title>\s*<polygon[^>]*points="(-?[0-9.]+),)");
  std::vector<double> xs;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), polygon); it != std::sregex_iterator(); ++it) {
    xs.push_back(std::stod((*it)[2]));
  }
  ASSERT_EQ(xs.size(), 2u) << svg;
  EXPECT_NEAR(xs[1] - xs[0], 300.0, 0.5);
}

TEST(TimelineRender, RejectsMalformedDotAndUnknownFormats) {
  EXPECT_THROW(render_dot("digraph { a -> ", "svg", "nop"), InputError);
  EXPECT_THROW(render_dot("digraph { a }", "no-such-format", "nop"), InputError);
  EXPECT_THROW(render_dot("digraph { a }", "svg", "no-such-engine"), InputError);
}

}  // namespace
}  // namespace jaxpp
