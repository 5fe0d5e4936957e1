// export --view taskgraph: DOT at any size; SVG and PNG only up to kMaxRenderedTaskGraphNodes
// tasks (sweep 5: Graphviz's layout of a pp 8, m 128 plan took 26 s, m 512 did not finish in a
// minute).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/cli/cli_runner.h"
#include "trace/plan_task_graph.h"

namespace jaxpp::testing {
namespace {

// A pp 8 1F1B plan of GPT-3 1.3B with `microbatches` microbatches, in `dir`.
std::string tiny_plan(const std::string& dir, int microbatches) {
  const std::string path = dir + "/p" + std::to_string(microbatches) + ".json";
  const CliResult r = run_cli("simulate --model gpt3-1.3b --gpus 8 --pp 8 --global-batch " +
                              std::to_string(microbatches) + " --schedule 1f1b --plan " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

int dot_nodes(const std::string& dot) {
  int n = 0;
  for (size_t at = dot.find("label="); at != std::string::npos; at = dot.find("label=", at + 1))
    ++n;
  return n;
}

TEST(TaskGraphExport, SvgAboveTheLimitIsRefusedAndDotIsNot) {
  const std::string dir = make_temp_dir();
  const std::string big = tiny_plan(dir, 128);
  const CliResult svg =
      run_cli("export --plan " + big + " --view taskgraph --format svg -o " + dir + "/g.svg");
  EXPECT_EQ(svg.exit_code, 2) << svg.err;
  EXPECT_NE(svg.err.find("--view taskgraph: the plan's task graph has "), std::string::npos)
      << svg.err;
  EXPECT_NE(svg.err.find("write --format dot"), std::string::npos) << svg.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/g.svg"));
  const CliResult dot = run_cli("export --plan " + big + " --view taskgraph --format dot -o -");
  ASSERT_EQ(dot.exit_code, 0) << dot.err;
  EXPECT_GT(dot_nodes(dot.out), kMaxRenderedTaskGraphNodes);
}

TEST(TaskGraphExport, SvgAtOrBelowTheLimitIsDrawn) {
  const std::string dir = make_temp_dir();
  const std::string small = tiny_plan(dir, 16);
  const CliResult svg =
      run_cli("export --plan " + small + " --view taskgraph --format svg -o " + dir + "/g.svg");
  EXPECT_EQ(svg.exit_code, 0) << svg.err;
  EXPECT_NE(read_file(dir + "/g.svg").find("<svg"), std::string::npos);
}

}  // namespace
}  // namespace jaxpp::testing
