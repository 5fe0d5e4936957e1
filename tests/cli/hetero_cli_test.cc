// CLI tests of heterogeneous clusters (docs/hardware.md "Heterogeneous clusters"): a cluster of
// 8 H100 and 8 A100 GPUs, actors with their own device kind and tp, the per-kind balanced-time
// split in simulate and explore, the plan's meshes, and every bad input as one line with exit 2.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp {
namespace {

using testing::CliResult;
using testing::make_temp_dir;
using testing::read_file;
using testing::run_cli;
using testing::run_json;
using testing::write_temp_file;

const char* const kMixedCluster =
    R"({"name": "mixed", "kinds": [{"preset": "h100-sxm", "gpus": 8},
                                   {"preset": "a100-80g", "gpus": 8}]})";

std::string mixed_cluster_file() { return write_temp_file("mixed.json", kMixedCluster); }

// The layers of the actors of one kind (the "meshes" metric of simulate and explore).
std::vector<int> hetero_layers_of(const nlohmann::json& meshes, const std::string& kind) {
  std::vector<int> out;
  for (const auto& m : meshes)
    if (m.at("kind") == kind) out.push_back(m.at("layers").get<int>());
  return out;
}

// Every actor of the slower kind holds fewer layers than every actor of the faster one.
void expect_a100_fewer_layers(const nlohmann::json& meshes) {
  const std::vector<int> h100 = hetero_layers_of(meshes, "h100-sxm");
  const std::vector<int> a100 = hetero_layers_of(meshes, "a100-80g");
  ASSERT_FALSE(h100.empty()) << meshes.dump();
  ASSERT_FALSE(a100.empty()) << meshes.dump();
  EXPECT_LT(*std::max_element(a100.begin(), a100.end()),
            *std::min_element(h100.begin(), h100.end()))
      << meshes.dump();
}

// An error of the CLI: exit 2, one line naming `needle`, nothing on stdout.
void expect_one_line_error(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(HeteroCliTest, OneKindClusterPricesExactlyAsTheHomogeneousCluster) {
  const std::string one =
      write_temp_file("one.json", R"({"kinds": [{"preset": "h100-sxm", "gpus": 16}]})");
  const std::string tail = " --tp 2 --dp 2 --global-batch 32 --schedule 1f1b --partition even";
  const nlohmann::json hetero = run_json("simulate --model gpt3-13b --cluster " + one + tail);
  const nlohmann::json plain =
      run_json("simulate --model gpt3-13b --cluster h100-sxm --gpus 16 --pp 4" + tail);
  EXPECT_DOUBLE_EQ(hetero.at("step_time_s").get<double>(), plain.at("step_time_s").get<double>());
  EXPECT_EQ(hetero.at("peak_memory_bytes"), plain.at("peak_memory_bytes"));
  EXPECT_DOUBLE_EQ(hetero.at("mfu").get<double>(), plain.at("mfu").get<double>());
  EXPECT_EQ(hetero.at("meshes").size(), 4u);
}

TEST(HeteroCliTest, SimulateGivesTheSlowerKindFewerLayersAndBeatsTheEvenSplit) {
  const std::string mixed = mixed_cluster_file();
  const std::string base = "simulate --model megatron-39.1b --cluster " + mixed +
                           " --kind-tp 4,4 --global-batch 64 --schedule 1f1b ";
  const nlohmann::json balanced = run_json(base + "--partition balanced-time");
  const nlohmann::json even = run_json(base + "--partition even");
  const nlohmann::json& meshes = balanced.at("meshes");
  ASSERT_EQ(meshes.size(), 4u);
  EXPECT_EQ(meshes[0].at("kind"), "h100-sxm");  // the first actors on the first kind
  EXPECT_EQ(meshes[1].at("kind"), "h100-sxm");
  EXPECT_EQ(meshes[2].at("kind"), "a100-80g");
  EXPECT_EQ(meshes[3].at("kind"), "a100-80g");
  expect_a100_fewer_layers(meshes);
  EXPECT_LT(balanced.at("step_time_s").get<double>(), even.at("step_time_s").get<double>());
  EXPECT_EQ(balanced.at("gpus"), 16);
  const CliResult text = run_cli(base + "--partition balanced-time");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("a100-80g, tp 4"), std::string::npos) << text.out;
}

TEST(HeteroCliTest, ExplicitActorKindsAndDifferentTpsReshardBetweenKinds) {
  const std::string mixed = mixed_cluster_file();
  // A100 actors first, then H100 (explicit placement), tp 2 on H100 and 4 on A100.
  const nlohmann::json r =
      run_json("simulate --model megatron-39.1b --cluster " + mixed +
               " --kind-tp 2,4 --actor-kinds a100-80g,a100-80g,h100-sxm,h100-sxm,h100-sxm,h100-sxm "
               "--global-batch 64 --schedule 1f1b --partition balanced-time");
  const nlohmann::json& meshes = r.at("meshes");
  ASSERT_EQ(meshes.size(), 6u);
  EXPECT_EQ(meshes[0].at("kind"), "a100-80g");
  EXPECT_EQ(meshes[0].at("tp"), 4);
  EXPECT_EQ(meshes[5].at("kind"), "h100-sxm");
  EXPECT_EQ(meshes[5].at("tp"), 2);
  EXPECT_EQ(r.at("config").at("pp"), 6);
}

// The issue's target: on 8 H100 + 8 A100, the best heterogeneous plan gives the A100 actors
// fewer layers, and beats both the best even partition on the mixed cluster and the best plan on
// the 8 H100s alone (Qwen3 32B, which fits 8 H100s) or the 8 H100s do not fit at all (a 39B
// Megatron model).
TEST(HeteroCliTest, TargetQwen32BBeatsTheEvenSplitAndEightH100sAlone) {
  const std::string mixed = mixed_cluster_file();
  const nlohmann::json hetero = run_json(
      "explore --model qwen3-32b --cluster " + mixed +
      " --global-batch 64 --schedules 1f1b,zb-h1 --microbatch-sizes 1 --recompute none,full "
      "--zero1 off");
  const nlohmann::json& best = hetero.at("best");
  expect_a100_fewer_layers(best.at("meshes"));
  const double hetero_s = best.at("step_time_s").get<double>();
  ASSERT_FALSE(hetero.at("best_even").is_null());
  EXPECT_LT(hetero_s, hetero.at("best_even").at("even_step_time_s").get<double>());
  const nlohmann::json h100 = run_json(
      "explore --model qwen3-32b --cluster h100-sxm --gpus 8 --global-batch 64 --quiet "
      "--partition balanced-time");
  const double h100_s = h100.at("best").at("step_time_s").get<double>();
  EXPECT_LT(hetero_s, h100_s);
}

TEST(HeteroCliTest, TargetMegatron39BDoesNotFitEightH100sButFitsTheMixedCluster) {
  const CliResult h100 = run_cli(
      "explore --model megatron-39.1b --cluster h100-sxm --gpus 8 --global-batch 64 --quiet");
  EXPECT_EQ(h100.exit_code, 2) << h100.out;
  EXPECT_NE(h100.err.find("no configuration fits"), std::string::npos) << h100.err;
  const nlohmann::json hetero =
      run_json("explore --model megatron-39.1b --cluster " + mixed_cluster_file() +
               " --global-batch 64 --schedules 1f1b --microbatch-sizes 1 --recompute none,full "
               "--zero1 off");
  const nlohmann::json& best = hetero.at("best");
  expect_a100_fewer_layers(best.at("meshes"));
  ASSERT_FALSE(hetero.at("best_even").is_null());
  EXPECT_LT(best.at("step_time_s").get<double>(),
            hetero.at("best_even").at("even_step_time_s").get<double>());
  for (const auto& peak : best.at("peak_memory_bytes"))
    EXPECT_LE(peak.get<double>(), 80.0 * (1 << 30));
}

TEST(HeteroCliTest, PlanCarriesTheMeshesAndIsReadBack) {
  const std::string dir = make_temp_dir();
  const std::string mixed = mixed_cluster_file();
  const std::string plan = dir + "/plan.json";
  const CliResult r = run_cli("simulate --model megatron-39.1b --cluster " + mixed +
                              " --kind-tp 4,2 --global-batch 64 --schedule 1f1b "
                              "--partition balanced-time --json --plan " +
                              plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(read_file(plan));
  const nlohmann::json& meshes = doc.at("meshes");
  ASSERT_EQ(meshes.size(), 6u);
  EXPECT_EQ(meshes[0], (nlohmann::json{{"kind", "h100-sxm"}, {"tp", 4}}));
  EXPECT_EQ(meshes[5], (nlohmann::json{{"kind", "a100-80g"}, {"tp", 2}}));
  EXPECT_EQ(doc.at("cluster").at("kinds").size(), 2u);
  // Read back: a timeline of the plan is simulated on the meshes (same step time).
  const CliResult timeline = run_cli("export --plan " + plan + " -o " + dir + "/t.json");
  ASSERT_EQ(timeline.exit_code, 0) << timeline.err;
  EXPECT_FALSE(read_file(dir + "/t.json").empty());
  // A trainer handoff takes one tp for every stage: refused in one line.
  expect_one_line_error(
      run_cli("export --plan " + plan + " --format megatron -o " + dir + "/args.txt"),
      "heterogeneous cluster");
  EXPECT_FALSE(std::filesystem::exists(dir + "/args.txt"));
  // A mesh whose device kind the cluster lacks.
  nlohmann::json bad = doc;
  bad["meshes"][2]["kind"] = "v100";
  const std::string bad_plan = write_temp_file("bad_kind_plan.json", bad.dump());
  expect_one_line_error(run_cli("export --plan " + bad_plan + " -o " + dir + "/u.json"),
                        "field 'meshes'[2]: device kind 'v100' is not in cluster mixed");
  // A mesh list of the wrong length.
  bad = doc;
  bad["meshes"].erase(bad["meshes"].size() - 1);
  const std::string short_plan = write_temp_file("short_plan.json", bad.dump());
  expect_one_line_error(run_cli("export --plan " + short_plan + " -o " + dir + "/v.json"),
                        "field 'meshes': has 5 entries but config.pp is 6");
  // An empty device kind, and a GPU count that is not the cluster's.
  bad = doc;
  bad["meshes"][0]["kind"] = "";
  const std::string empty_plan = write_temp_file("empty_kind_plan.json", bad.dump());
  expect_one_line_error(run_cli("export --plan " + empty_plan + " -o " + dir + "/x.json"),
                        "field 'meshes'[0]: field 'kind': empty device kind");
  bad = doc;
  bad["config"]["gpus"] = 12;
  const std::string gpus_plan = write_temp_file("gpus_plan.json", bad.dump());
  expect_one_line_error(run_cli("export --plan " + gpus_plan + " -o " + dir + "/y.json"),
                        "field 'config': gpus 12 is not the cluster's 16");
  // A mesh tp that no longer uses the kind's GPUs.
  bad = doc;
  bad["meshes"][0]["tp"] = 2;
  const std::string tp_plan = write_temp_file("tp_plan.json", bad.dump());
  expect_one_line_error(run_cli("export --plan " + tp_plan + " -o " + dir + "/w.json"),
                        "the actors of kind h100-sxm use 6 GPUs");
}

TEST(HeteroCliTest, ExploreWritesTheBestPlan) {
  const std::string dir = make_temp_dir();
  const nlohmann::json r =
      run_json("explore --model megatron-39.1b --cluster " + mixed_cluster_file() +
               " --global-batch 64 --schedules 1f1b --microbatch-sizes 1 "
               "--recompute none --zero1 off --tp 4 --plan " +
               dir + "/best.json");
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/best.json"));
  EXPECT_EQ(plan.at("partition").at("stage_begin"), r.at("best").at("stage_begin"));
  EXPECT_EQ(plan.at("meshes").size(), r.at("best").at("meshes").size());
  EXPECT_DOUBLE_EQ(plan.at("predicted").at("step_time_s").get<double>(),
                   r.at("best").at("step_time_s").get<double>());
}

// Bad cluster files: one line naming the file and the key, exit 2, nothing written.
TEST(HeteroCliTest, BadClusterFilesAreOneLineNamingFileAndKey) {
  const std::string dir = make_temp_dir();
  const std::string tail =
      " --model gpt3-13b --global-batch 16 --schedule 1f1b --plan " + dir + "/p.json";
  struct Case {
    const char* name;
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"unknown_preset.json",
       R"({"kinds": [{"preset": "h100-sxm", "gpus": 8}, {"preset": "h900", "gpus": 8}]})",
       "unknown_preset.json: kinds[1]: field 'preset': unknown preset 'h900'"},
      {"zero_gpus.json", R"({"kinds": [{"preset": "h100-sxm", "gpus": 0}]})",
       "zero_gpus.json: kinds[0]: field 'gpus': expected a positive integer, got 0"},
      {"negative_gpus.json", R"({"kinds": [{"preset": "a100-80g", "gpus": -8}]})",
       "negative_gpus.json: kinds[0]: field 'gpus': expected a positive integer, got -8"},
      {"missing_gpus.json", R"({"kinds": [{"preset": "a100-80g"}]})",
       "missing_gpus.json: kinds[0]: field 'gpus': missing"},
      {"no_kinds.json",
       R"({"name": "x", "inter_kind": {"bandwidth_gb_per_s": 25, "latency_us": 20}})",
       "no_kinds.json: field 'kinds': missing"},
      {"empty_kinds.json", R"({"kinds": []})",
       "empty_kinds.json: field 'kinds': expected at least one device kind"},
      {"kinds_not_list.json", R"({"kinds": "h100-sxm"})",
       "kinds_not_list.json: field 'kinds': expected an array"},
      {"no_source.json", R"({"kinds": [{"gpus": 8}]})",
       "no_source.json: kinds[0]: give the device kind as \"preset\", \"file\" or \"cluster\""},
      {"two_sources.json",
       R"({"kinds": [{"preset": "h100-sxm", "cluster": {"base": "h100-sxm"}, "gpus": 8}]})",
       "two_sources.json: kinds[0]: give only one of"},
      {"duplicate.json",
       R"({"kinds": [{"preset": "h100-sxm", "gpus": 8}, {"preset": "H100-SXM", "gpus": 8}]})",
       "duplicate.json: kinds[1]: device kind 'h100-sxm' appears twice"},
      {"unknown_key.json", R"({"kinds": [{"preset": "h100-sxm", "gpus": 8, "gpu": 8}]})",
       "unknown_key.json: kinds[0]"},
      {"bad_link.json",
       R"({"kinds": [{"preset": "h100-sxm", "gpus": 8}], "inter_kind": {"bandwidth_gb_per_s": 0, "latency_us": 1}})",
       "bad_link.json: field 'inter_kind': field 'bandwidth_gb_per_s'"},
      {"bad_override.json",
       R"({"kinds": [{"cluster": {"base": "a100-80g", "hbm_gib": -1}, "gpus": 8}]})",
       "bad_override.json: kinds[0]: field 'cluster'"},
      {"negative_latency.json",
       R"({"kinds": [{"preset": "h100-sxm", "gpus": 8}], "inter_kind": {"bandwidth_gb_per_s": 25, "latency_us": -1}})",
       "negative_latency.json: field 'inter_kind': field 'latency_us'"},
      // No lower bound: 1e-300 GB/s priced a transfer at 8e298 s (exit 0), 1e-300 us accepted.
      // The bounds are a cluster file's links' (link_from_json).
      {"tiny_bandwidth.json",
       R"({"kinds": [{"preset": "h100-sxm", "gpus": 8}], "inter_kind": {"bandwidth_gb_per_s": 1e-300, "latency_us": 1}})",
       "tiny_bandwidth.json: field 'inter_kind': field 'bandwidth_gb_per_s': out of range: expected "
       "1 kB/s to 100 TB/s, got 1e-300"},
      {"huge_bandwidth.json",
       R"({"kinds": [{"preset": "h100-sxm", "gpus": 8}], "inter_kind": {"bandwidth_gb_per_s": 5e5, "latency_us": 1}})",
       "huge_bandwidth.json: field 'inter_kind': field 'bandwidth_gb_per_s': out of range: expected "
       "1 kB/s to 100 TB/s, got 500000.0"},
      {"tiny_latency.json",
       R"({"kinds": [{"preset": "h100-sxm", "gpus": 8}], "inter_kind": {"bandwidth_gb_per_s": 25, "latency_us": 1e-300}})",
       "tiny_latency.json: field 'inter_kind': field 'latency_us': out of range: expected 0, or "
       "1 ps to 1 s, got 1e-300"},
      {"comma_name.json", R"({"kinds": [{"preset": "h100-sxm", "gpus": 8, "name": "a,b"}]})",
       "comma_name.json: kinds[0]: field 'name': device kind 'a,b': a name cannot hold ','"},
      {"empty_name.json", R"({"kinds": [{"preset": "h100-sxm", "gpus": 8, "name": ""}]})",
       "empty_name.json: kinds[0]: field 'name': a device kind needs a non-empty name"},
      {"missing_file.json", R"({"kinds": [{"file": "nowhere.json", "gpus": 8}]})",
       "missing_file.json: kinds[0]: field 'file': no such file"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = write_temp_file(c.name, c.text);
    expect_one_line_error(run_cli("simulate --cluster " + path + tail), c.needle);
    EXPECT_FALSE(std::filesystem::exists(dir + "/p.json"));
  }
}

TEST(HeteroCliTest, KindsFromFilesAndInlineOverridesAndTheInterKindLink) {
  // A kind from a cluster file next to the heterogeneous file (a relative "file").
  const std::string dir = make_temp_dir();
  std::ofstream(dir + "/a100_40.json")
      << R"({"name": "a100-40", "base": "a100-80g", "hbm_gib": 40})";
  const std::string mixed = dir + "/files.json";
  std::ofstream(mixed) << R"({"kinds": [{"preset": "h100-sxm", "gpus": 8},
                                        {"file": "a100_40.json", "gpus": 8}],
                              "inter_kind": {"bandwidth_gb_per_s": 1, "latency_us": 20}})";
  const std::string fast = write_temp_file(
      "files_fast.json",
      std::string(
          R"({"kinds": [{"preset": "h100-sxm", "gpus": 8}, {"cluster": {"base": "a100-80g", "name": "a100-40", "hbm_gib": 40}, "gpus": 8}], "inter_kind": {"bandwidth_gb_per_s": 400, "latency_us": 20}})"));
  const std::string tail =
      " --model gpt3-13b --kind-tp 4,4 --global-batch 32 --schedule 1f1b --partition even";
  const nlohmann::json slow_link = run_json("simulate --cluster " + mixed + tail);
  const nlohmann::json fast_link = run_json("simulate --cluster " + fast + tail);
  EXPECT_EQ(slow_link.at("meshes")[2].at("kind"), "a100-40");
  // The only difference is the link between the kinds (1 GB/s against 400 GB/s).
  EXPECT_GT(slow_link.at("step_time_s").get<double>(), fast_link.at("step_time_s").get<double>());
}

TEST(HeteroCliTest, BadMeshFlagsAreOneLine) {
  const std::string mixed = mixed_cluster_file();
  const std::string base =
      "simulate --model gpt3-13b --global-batch 16 --schedule 1f1b --cluster " + mixed;
  expect_one_line_error(run_cli(base + " --actor-kinds h100-sxm,v100"),
                        "--actor-kinds[1]: device kind 'v100' is not in cluster mixed (kinds: "
                        "h100-sxm, a100-80g)");
  expect_one_line_error(run_cli(base + " --tp 8 --actor-kinds h100-sxm,h100-sxm"),
                        "--actor-kinds: the actors of kind h100-sxm use 16 GPUs");
  expect_one_line_error(run_cli(base + " --kind-tp 4"),
                        "--kind-tp: gives 1 tps but cluster mixed has 2");
  // Named the kind only: neither the flag that gave it tp 3 nor the cluster.
  expect_one_line_error(run_cli(base + " --kind-tp 3,4"),
                        "--kind-tp: cluster mixed: device kind h100-sxm: 8 GPUs are not a "
                        "multiple of tp·dp·cp = 3");
  expect_one_line_error(run_cli(base + " --tp 3"),
                        "--tp: cluster mixed: device kind h100-sxm: 8 GPUs are not a multiple");
  expect_one_line_error(run_cli(base + " --kind-tp 4,x"), "--kind-tp: expected a comma-separated");
  // "," said "expected a comma-separated list of names"; "+4" and " 4" were read as 4.
  for (const char* list : {",", "4,", "+4,4", "4,0"})
    expect_one_line_error(run_cli(base + " --kind-tp '" + list + "'"),
                          std::string("--kind-tp: expected a comma-separated list of positive "
                                      "integers, got '") + list + "'");
  expect_one_line_error(run_cli(base + " --kind-tp 4,4 --tp 2"), "--kind-tp and --tp");
  expect_one_line_error(run_cli(base + " --tp 4 --pp 3"),
                        "--pp: 3 but the meshes of cluster mixed give 4");
  expect_one_line_error(run_cli(base + " --tp 4 --gpus 8"), "--gpus: 8 but cluster mixed has 16");
  expect_one_line_error(run_cli(base + " --tp 4 --breakdown"), "--breakdown: is not supported");
  expect_one_line_error(run_cli(base + " --tp 4 --assign x.json"), "--assign: is not supported");
  expect_one_line_error(run_cli(base + " --tp 4 --pp 0"), "--pp: must be >= 1");
  expect_one_line_error(
      run_cli("explore --model gpt3-13b --global-batch 16 --format csv --cluster " + mixed),
      "--format: csv is not supported on a heterogeneous --cluster");
  // A kind given as a file that is itself heterogeneous.
  const std::string dir = make_temp_dir();
  std::ofstream(dir + "/inner.json") << kMixedCluster;
  std::ofstream(dir + "/outer.json") << R"({"kinds": [{"file": "inner.json", "gpus": 8}]})";
  expect_one_line_error(
      run_cli("simulate --model gpt3-13b --global-batch 16 --schedule 1f1b "
              "--cluster " +
              dir + "/outer.json"),
      "kinds[0]: field 'file': " + dir + "/inner.json is itself a heterogeneous cluster");
  // tp 2 on the H100s next to tp 3 on the A100s: a reshard of 2 slices into 3 is not priced.
  const std::string six = write_temp_file(
      "six.json",
      R"({"kinds": [{"preset": "h100-sxm", "gpus": 6}, {"preset": "a100-80g", "gpus": 6}]})");
  expect_one_line_error(run_cli("simulate --model gpt3-175b --global-batch 16 --schedule 1f1b "
                                "--kind-tp 2,3 --cluster " +
                                six),
                        "stage 2 on actor 2 (tp 2) sends to actor 3 (tp 3): neighbouring tps "
                        "must be multiples of each other");
  expect_one_line_error(run_cli("simulate --model gpt3-13b --cluster h100-sxm --gpus 8 --pp 8 "
                                "--global-batch 16 --schedule 1f1b --kind-tp 1"),
                        "--kind-tp: needs a heterogeneous --cluster");
  expect_one_line_error(
      run_cli("explore --model gpt3-13b --global-batch 16 --pp 4 --cluster " + mixed),
      "--pp: is not supported by explore on a heterogeneous --cluster");
  expect_one_line_error(run_cli("validate-model --cluster " + mixed),
                        "field 'kinds': a heterogeneous cluster (several device kinds) is read by "
                        "simulate and explore only");
}

}  // namespace
}  // namespace jaxpp
