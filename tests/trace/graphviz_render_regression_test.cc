// Regression test for a sanitizer finding in the libgvc wrapper (docs/hardening.md).
#include <string>

#include <gtest/gtest.h>

#include "trace/graphviz_render.h"

namespace jaxpp {
namespace {

TEST(GraphvizRenderRegression, RenderingTextTwiceInOneProcessGivesTheSamePicture) {
  // Was: each call created and freed its own libgvc context; the pango plugin kept a pointer to
  // the freed font name, so the second layout of a text label read freed memory (ASan
  // heap-use-after-free in strcmp under textspan_size).
  const std::string dot = "digraph g { a [label=\"F0@s0\"]; b [label=\"B0@s1\"]; a -> b; }";
  const std::string first = render_dot(dot, "svg", "dot");
  const std::string second = render_dot(dot, "svg", "dot");
  EXPECT_NE(first.find("<svg"), std::string::npos);
  EXPECT_EQ(first, second);
}

}  // namespace
}  // namespace jaxpp
