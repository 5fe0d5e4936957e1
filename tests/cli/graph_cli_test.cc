// CLI tests of `jaxpp-sim graph`: output fields and one-line errors.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/model.h"
#include "graph/partition.h"
#include "graph/task_graph.h"
#include "tests/cli/cli_runner.h"

namespace jaxpp {
namespace {

using testing::read_file;
using testing::run_cli;
using testing::write_temp_file;

const std::string kData = std::string(JAXPP_TEST_DATA_DIR) + "/graph/";

// Bad input: exit code 2 and exactly one line on stderr that contains every `needle`.
void expect_graph_error(const testing::CliResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("jaxpp-sim graph: error: ", 0), 0u) << r.err;
  for (const std::string& n : needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << n << " in " << r.err;
}

TEST(GraphCliTest, JsonHasParamsStagesAndTaskCount) {
  const auto r = run_cli("graph --model gpt3-13b --pp 4 --microbatches 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const ModelSpec m = load_model("gpt3-13b");
  EXPECT_EQ(j["model"], "gpt3-13b");
  EXPECT_EQ(j["params"].get<int64_t>(), m.total_params());
  ASSERT_EQ(j["stages"].size(), 4u);
  int64_t params = 0;
  int next_layer = 0;
  for (const auto& s : j["stages"]) {
    EXPECT_EQ(s["layers"][0].get<int>(), next_layer);
    next_layer = s["layers"][1].get<int>();
    params += s["params"].get<int64_t>();
    EXPECT_GT(s["fwd_flops"].get<double>(), 0);
  }
  EXPECT_EQ(next_layer, m.num_layers());
  EXPECT_EQ(params, m.total_params());
  const Partition p = auto_partition(m, {.num_stages = 4});
  TaskGraphOptions o;
  o.num_microbatches = 8;
  const TaskGraph g = TaskGraph::build(m, p, make_placement(PlacementKind::kLinear, 4, 4), o);
  EXPECT_EQ(j["tasks"].get<int>(), g.num_nodes());
  EXPECT_EQ(j["edges"].get<int>(), g.num_edges());
  EXPECT_EQ(j["task_counts"]["F"].get<int>(), 32);
}

TEST(GraphCliTest, JsonReportsTotalActiveAndMtpParamsOfAHuggingFaceConfig) {
  const auto r = run_cli("graph --model " + std::string(JAXPP_TEST_DATA_DIR) +
                         "/hf/deepseek-v3.json --pp 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const ModelSpec m = load_model("deepseek-v3");
  EXPECT_EQ(j["params"].get<int64_t>(), m.total_params());
  EXPECT_EQ(j["active_params"].get<int64_t>(), m.active_params());
  EXPECT_EQ(j["mtp_params"].get<int64_t>(), m.mtp_params());
  EXPECT_LT(j["active_params"].get<int64_t>(), j["params"].get<int64_t>() / 10);
  int64_t stage_params = 0;
  for (const auto& s : j["stages"]) stage_params += s["params"].get<int64_t>();
  EXPECT_EQ(stage_params, m.total_params() + m.mtp_params());  // every expert, the MTP module
}

TEST(GraphCliTest, DenseModelsReportActiveEqualToTotal) {
  const auto r = run_cli("graph --model llama3-8b --pp 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["active_params"], j["params"]);
  EXPECT_EQ(j["mtp_params"], 0);
}

TEST(GraphCliTest, VirtualStagesWithVPlacementAndSplitBackward) {
  const auto r = run_cli(
      "graph --model megatron-1.7b --pp 2 --virtual 2 --placement v --split-backward "
      "--microbatches 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["stages"].size(), 4u);
  std::vector<int> actors;
  for (const auto& s : j["stages"]) actors.push_back(s["actor"].get<int>());
  EXPECT_EQ(actors, (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ(j["task_counts"]["I"].get<int>(), 16);
  EXPECT_EQ(j["task_counts"]["W"].get<int>(), 16);
  EXPECT_EQ(j["task_counts"]["B"].get<int>(), 0);
  EXPECT_EQ(j["task_counts"]["transfer"].get<int>(), 2 * 2 * 4);
}

TEST(GraphCliTest, ExplicitPartitionIsUsed) {
  const auto r =
      run_cli("graph --model " + kData + "tiny_transformer.json --pp 3 --partition 0,2,4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["partition"], nlohmann::json({0, 2, 4}));
  EXPECT_EQ(j["stages"][2]["layers"], nlohmann::json({4, 6}));
}

TEST(GraphCliTest, TableNamesStagesAndTaskCounts) {
  const auto r = run_cli("graph --model llama3-8b --pp 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("llama3-8b"), std::string::npos);
  EXPECT_NE(r.out.find("F GFLOP"), std::string::npos);
  EXPECT_NE(r.out.find("tasks: "), std::string::npos);
}

// Golden files pin the human-readable table; regenerate with the command in the test when the
// format changes on purpose.
TEST(GraphCliTest, TableMatchesGoldenFileForLinearPlacement) {
  const auto r = run_cli("graph --model gpt3-13b --pp 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(kData + "gpt3-13b_pp4.txt"));
}

TEST(GraphCliTest, TableMatchesGoldenFileForVPlacementWithSplitBackward) {
  const auto r = run_cli(
      "graph --model megatron-1.7b --pp 2 --virtual 2 --placement v --split-backward "
      "--recompute selective --microbatches 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(kData + "megatron-1.7b_pp2_v.txt"));
}

TEST(GraphCliTest, DotFileIsWritten) {
  const std::string dir = testing::make_temp_dir();
  const auto r =
      run_cli("graph --model bert-large --pp 2 --microbatches 2 --dot " + dir + "/g.dot");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir + "/g.dot");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str().rfind("digraph", 0), 0u);
  EXPECT_NE(ss.str().find("xfer F0@s0 a0->a1"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(GraphCliTest, UnwritableDotPathIsAnError) {
  expect_graph_error(run_cli("graph --model bert-large --pp 2 --dot /nonexistent-dir/g.dot"),
                        {"--dot /nonexistent-dir/g.dot", "does not exist"});
}

TEST(GraphCliTest, MalformedJsonNamesFileAndLine) {
  const std::string path =
      write_temp_file("bad.json", "{\n  \"name\": \"x\",\n  \"layers\": 4,,\n}\n");
  expect_graph_error(run_cli("graph --model " + path + " --pp 2"),
                        {path + ":3:", "malformed JSON"});
}

TEST(GraphCliTest, MissingFieldIsNamed) {
  const std::string path = write_temp_file(
      "m.json", R"({"name": "x", "layers": 4, "hidden": 64, "heads": 4, "vocab": 100})");
  expect_graph_error(run_cli("graph --model " + path + " --pp 2"),
                        {path, "'seq_len'", "missing"});
}

TEST(GraphCliTest, NegativeFieldIsNamed) {
  const std::string path = write_temp_file(
      "m.json",
      R"({"name": "x", "layers": -3, "hidden": 64, "heads": 4, "seq_len": 8, "vocab": 100})");
  expect_graph_error(run_cli("graph --model " + path + " --pp 2"), {path, "'layers'", "-3"});
}

TEST(GraphCliTest, MoreStagesThanLayersIsAnError) {
  // tiny_transformer.json: 4 transformer layers + embedding + logits = 6 layers.
  expect_graph_error(run_cli("graph --model " + kData + "tiny_transformer.json --pp 7"),
                        {"7 stages", "only 6 layers"});
}

TEST(GraphCliTest, UnknownPresetIsAnError) {
  expect_graph_error(run_cli("graph --model gpt5-10t --pp 2"),
                        {"gpt5-10t", "unknown model", "gpt3-175b"});
}

TEST(GraphCliTest, UnreadableFileIsAnError) {
  const std::string dir = testing::make_temp_dir();
  expect_graph_error(run_cli("graph --model " + dir + " --pp 2"), {dir, "directory"});
  std::filesystem::remove_all(dir);
}

TEST(GraphCliTest, BadPartitionListsAreErrors) {
  expect_graph_error(run_cli("graph --model gpt3-1.3b --pp 3 --partition 0,9,5"),
                        {"partition entry 2", "strictly increasing"});
  expect_graph_error(run_cli("graph --model gpt3-1.3b --pp 3 --partition 0,9"),
                        {"--partition", "2 stage starts"});
  expect_graph_error(run_cli("graph --model gpt3-1.3b --pp 2 --partition 0,x"),
                        {"--partition", "'x'"});
}

TEST(GraphCliTest, BadParallelShapesAreErrors) {
  expect_graph_error(run_cli("graph --model gpt3-1.3b --pp 0"), {"--pp"});
  expect_graph_error(run_cli("graph --model gpt3-1.3b --pp 2 --virtual 3 --placement v"),
                        {"placement v", "6 stages on 2 actors"});
  expect_graph_error(run_cli("graph --model gpt3-1.3b --pp 2 --recompute most"),
                        {"--recompute"});
  expect_graph_error(run_cli("graph --pp 2"), {"--model"});
}

// --recompute-layers N (with --recompute full): only the first N transformer layers of each
// stage are recomputed, the others keep their activations. gpt3-1.3b split 0,13: stage 0 holds
// the embedding and 12 transformer layers, stage 1 12 transformer layers and the LM head, whose
// stash does not depend on the policy. With 4 of 12 recomputed, each stage stashes 4 layers as
// under full and 8 as under none: 12·some = 4·full + 8·none, and recomputes a third of full's
// FLOPs.
TEST(GraphCliTest, RecomputeLayersShrinkTheRecomputeAndGrowTheStash) {
  const std::string base = "graph --model gpt3-1.3b --pp 2 --partition 0,13 --json --recompute ";
  auto stages = [&](const std::string& flags) {
    const auto r = run_cli(base + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const nlohmann::json none = stages("none"), full = stages("full"),
                       some = stages("full --recompute-layers 4");
  EXPECT_EQ(some["recompute_layers"], 4);
  EXPECT_FALSE(full.contains("recompute_layers"));
  for (int s = 0; s < 2; ++s) {
    const int64_t n = none["stages"][s]["stash_bytes"].get<int64_t>();
    const int64_t f = full["stages"][s]["stash_bytes"].get<int64_t>();
    const int64_t p = some["stages"][s]["stash_bytes"].get<int64_t>();
    EXPECT_LT(f, p) << "stage " << s;
    EXPECT_LT(p, n) << "stage " << s;
    EXPECT_EQ(12 * p, 4 * f + 8 * n) << "stage " << s;
    const double rf = full["stages"][s]["recompute_flops"].get<double>();
    const double rp = some["stages"][s]["recompute_flops"].get<double>();
    EXPECT_GT(rf, 0);
    EXPECT_NEAR(rp, rf / 3, rf * 1e-12) << "stage " << s;
    EXPECT_EQ(none["stages"][s]["recompute_flops"].get<double>(), 0);
  }
  // N at least the stage's transformer layers is full; 0 is none (the stash).
  const nlohmann::json all = stages("full --recompute-layers 12"),
                       zero = stages("full --recompute-layers 0");
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(all["stages"][s]["stash_bytes"], full["stages"][s]["stash_bytes"]);
    EXPECT_EQ(zero["stages"][s]["stash_bytes"], none["stages"][s]["stash_bytes"]);
  }
  // The table says it.
  const auto text = run_cli("graph --model gpt3-1.3b --pp 2 --recompute full --recompute-layers 4");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("recompute full (first 4 transformer layer(s) of each stage)"),
            std::string::npos)
      << text.out;
}

// simulate's validation and messages; balanced-time refuses it as simulate does.
TEST(GraphCliTest, RecomputeLayersErrorsAreSimulates) {
  const std::string base = "graph --model gpt3-1.3b --pp 2 ";
  auto r = run_cli(base + "--recompute selective --recompute-layers 4");
  EXPECT_EQ(r.err,
            "jaxpp-sim graph: error: --recompute-layers: counts fully recomputed layers and "
            "needs recompute full (recompute is selective)\n");
  r = run_cli(base + "--recompute-layers 4");
  EXPECT_EQ(r.err,
            "jaxpp-sim graph: error: --recompute-layers: counts fully recomputed layers and "
            "needs recompute full (recompute is none)\n");
  r = run_cli(base + "--recompute full --recompute-layers -1");
  EXPECT_EQ(r.err,
            "jaxpp-sim graph: error: --recompute-layers: expected a number of layers >= 0, got "
            "-1\n");
  expect_graph_error(run_cli(base + "--partition balanced-time --schedule 1f1b --recompute full "
                                    "--recompute-layers 4"),
                     {"--partition balanced-time: balanced-time prices each layer on its own"});
}

TEST(GraphCliTest, HelpExitsZero) {
  const auto r = run_cli("graph --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--partition"), std::string::npos);
}

}  // namespace
}  // namespace jaxpp
