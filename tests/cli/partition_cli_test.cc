// CLI tests of the cost-aware partition (`--partition balanced-time`, docs/partition.md): simulate
// reports and saves the partition, a memory limit no partition meets is one line naming the
// minimum (exit 2, nothing written), explore searches it, the Megatron-LM export carries the
// uneven layout.
#include <algorithm>
#include <filesystem>
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

// Llama 3 8B on 4 A100-80GB, 1F1B: its 128k-vocabulary LM head takes far more time than its
// FLOPs share, so the balanced-time partition differs from the FLOPs-balanced one.
const std::string kSimulateLlama =
    "simulate --model llama3-8b --cluster a100-80g --gpus 4 --pp 4 --global-batch 16 "
    "--schedule 1f1b ";

TEST(PartitionCliTest, SimulateReportsTheBalancedPartitionAndIsFasterThanAuto) {
  const CliResult balanced = run_cli(kSimulateLlama + "--partition balanced-time --json");
  const CliResult flops = run_cli(kSimulateLlama + "--json");
  ASSERT_EQ(balanced.exit_code, 0) << balanced.err;
  ASSERT_EQ(flops.exit_code, 0) << flops.err;
  const nlohmann::json b = nlohmann::json::parse(balanced.out);
  const nlohmann::json f = nlohmann::json::parse(flops.out);
  ASSERT_EQ(b.at("stage_begin").size(), 4u);
  EXPECT_EQ(b.at("stage_begin").at(0), 0);
  EXPECT_FALSE(f.contains("stage_begin"));
  EXPECT_LT(b.at("step_time_s").get<double>(), f.at("step_time_s").get<double>());
  const CliResult text = run_cli(kSimulateLlama + "--partition balanced-time");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("partition (balanced-time): stage starts 0,"), std::string::npos)
      << text.out;
}

TEST(PartitionCliTest, PlanRecordsTheStagesAndMegatronExportGivesTheLayout) {
  const std::string dir = make_temp_dir();
  const CliResult r =
      run_cli(kSimulateLlama + "--partition balanced-time --json --plan " + dir + "/plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  EXPECT_EQ(plan.at("partition").at("stage_begin"), nlohmann::json::parse(r.out).at("stage_begin"));
  const CliResult args =
      run_cli("export --plan " + dir + "/plan.json --format megatron -o " + dir + "/args.txt");
  ASSERT_EQ(args.exit_code, 0) << args.err;
  EXPECT_NE(read_file(dir + "/args.txt").find("--pipeline-model-parallel-layout"),
            std::string::npos);
}

TEST(PartitionCliTest, ImpossibleMemoryLimitIsOneLineWithTheMinimumAndWritesNothing) {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(kSimulateLlama + "--partition balanced-time --max-memory-gib 2 " +
                              "--plan " + dir + "/plan.json");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("jaxpp-sim simulate: error: --partition balanced-time: no partition fits "
                        "in 2.00 GiB per device; the least peak memory of any partition is ",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/plan.json"));
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(PartitionCliTest, MaxMemoryIsTheFitCheckOfSimulate) {
  // The FLOPs-balanced plan needs more than 40 GiB on some actor; the limit applies to it too.
  const CliResult r = run_cli(kSimulateLlama + "--max-memory-gib 20");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("does not fit"), std::string::npos) << r.err;
  // The message names the limit that was given, not the cluster's memory.
  EXPECT_NE(r.err.find("has 20.0 GiB (--max-memory-gib)"), std::string::npos) << r.err;
  const CliResult measured = run_cli(
      "simulate --schedule 1f1b --pp 4 --microbatches 8 --t-f 1 "
      "--t-b 2 --max-memory-gib 20");
  EXPECT_EQ(measured.exit_code, 2) << measured.err;
  EXPECT_NE(measured.err.find("--max-memory-gib"), std::string::npos) << measured.err;
}

const std::string kExploreLlama =
    "explore --model llama3-8b --cluster a100-80g --gpus 4 --global-batch 16 --pp 4 --tp 1 "
    "--microbatch-sizes 1 --schedules 1f1b,interleaved --virtual 1,2 --recompute none "
    "--zero1 off --quiet --json ";

TEST(PartitionCliTest, ExploreSearchesTheBalancedPartition) {
  const std::string dir = make_temp_dir();
  const CliResult balanced =
      run_cli(kExploreLlama + "--partition balanced-time --plan " + dir + "/best.json");
  const CliResult flops = run_cli(kExploreLlama);
  ASSERT_EQ(balanced.exit_code, 0) << balanced.err;
  ASSERT_EQ(flops.exit_code, 0) << flops.err;
  const nlohmann::json b = nlohmann::json::parse(balanced.out);
  const nlohmann::json f = nlohmann::json::parse(flops.out);
  EXPECT_EQ(b.at("options").at("partition"), "balanced-time");
  EXPECT_EQ(f.at("options").at("partition"), "auto");
  EXPECT_LT(b.at("best").at("step_time_s").get<double>(),
            f.at("best").at("step_time_s").get<double>());
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/best.json"));
  EXPECT_DOUBLE_EQ(plan.at("predicted").at("step_time_s").get<double>(),
                   b.at("best").at("step_time_s").get<double>());
}

// When no configuration's partition fits, explore names the smallest need: the least peak memory
// the partition search found (not 0, which a configuration without a fitting partition had before).
TEST(PartitionCliTest, ExploreWithNothingFittingNamesTheLeastPeakTheSearchFound) {
  const CliResult r = run_cli(
      "explore --model llama3-8b --cluster a100-80g --gpus 4 --global-batch 16 --pp 4 --tp 1 "
      "--microbatch-sizes 1 --schedules 1f1b --recompute none --zero1 off --quiet "
      "--partition balanced-time --max-memory-gib 2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::string prefix =
      "jaxpp-sim explore: error: no configuration fits in 2 GiB; the smallest needs ";
  ASSERT_EQ(r.err.rfind(prefix, 0), 0u) << r.err;
  const double need = std::stod(r.err.substr(prefix.size()));
  EXPECT_GT(need, 2.0) << r.err;
}

TEST(PartitionCliTest, ExploreTableNamesThePartitionMode) {
  const std::string table =
      "explore --model llama3-8b --cluster a100-80g --gpus 4 --global-batch 16 --pp 4 --tp 1 "
      "--microbatch-sizes 1 --schedules 1f1b --recompute none --zero1 off --quiet ";
  const CliResult balanced = run_cli(table + "--partition balanced-time");
  ASSERT_EQ(balanced.exit_code, 0) << balanced.err;
  EXPECT_NE(balanced.out.find("in every configuration: balanced-time partition"), std::string::npos)
      << balanced.out;
  const CliResult flops = run_cli(table);
  ASSERT_EQ(flops.exit_code, 0) << flops.err;
  EXPECT_EQ(flops.out.find("partition"), std::string::npos) << flops.out;
}

TEST(PartitionCliTest, ExploreRefusesExplicitStagesAndBoundPruning) {
  const CliResult stages = run_cli(kExploreLlama + "--partition 0,10,20,30");
  EXPECT_EQ(stages.exit_code, 2) << stages.err;
  EXPECT_NE(stages.err.find("--partition: explore takes auto, even or balanced-time"),
            std::string::npos)
      << stages.err;
  const CliResult bound = run_cli(kExploreLlama + "--partition balanced-time --bound-prune");
  EXPECT_EQ(bound.exit_code, 2) << bound.err;
  EXPECT_NE(bound.err.find("--bound-prune"), std::string::npos) << bound.err;
  const CliResult typo = run_cli(kSimulateLlama + "--partition balanced");
  EXPECT_EQ(typo.exit_code, 2) << typo.err;
  EXPECT_NE(typo.err.find("expected auto, even, balanced-time or"), std::string::npos) << typo.err;
}

// graph --partition balanced-time resolves the partition with simulate's planner: the same layer
// ranges for the same flags (the global batch is microbatches x microbatch size x dp).
nlohmann::json graph_partition_json(const std::string& flags) {
  const CliResult r = run_cli("graph --model llama3-8b --json " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(PartitionCliTest, GraphBalancedTimeGivesTheStagesSimulateRuns) {
  const nlohmann::json sim = nlohmann::json::parse(
      run_cli(kSimulateLlama + "--partition balanced-time --json").out);
  const nlohmann::json g = graph_partition_json(
      "--pp 4 --microbatches 16 --schedule 1f1b --cluster a100-80g --partition balanced-time");
  EXPECT_EQ(g.at("partition"), sim.at("stage_begin"));
  EXPECT_EQ(g.at("partition"), nlohmann::json::parse("[0, 10, 19, 27]"));  // docs/partition.md
  // Under a memory limit, with tp and dp, and on an interleaved schedule (loop placement).
  const nlohmann::json sim_limit = nlohmann::json::parse(
      run_cli(kSimulateLlama + "--partition balanced-time --max-memory-gib 66 --json").out);
  EXPECT_EQ(graph_partition_json("--pp 4 --microbatches 16 --schedule 1f1b --partition "
                                 "balanced-time --max-memory-gib 66")
                .at("partition"),
            sim_limit.at("stage_begin"));
  const std::string config =
      "--pp 2 --tp 2 --dp 2 --virtual 2 --schedule interleaved-1f1b --recompute selective "
      "--zero1 --sequence-parallel --partition balanced-time ";
  const nlohmann::json sim_v = nlohmann::json::parse(
      run_cli("simulate --model llama3-8b --gpus 8 --global-batch 16 --json " + config).out);
  const nlohmann::json g_v = graph_partition_json("--microbatches 8 " + config);
  ASSERT_EQ(sim_v.at("stage_begin").size(), 4u);
  EXPECT_EQ(g_v.at("partition"), sim_v.at("stage_begin"));
  EXPECT_EQ(g_v.at("placement"), "loop");
  // even: Megatron-LM's split, as simulate --partition even (docs/partition.md).
  EXPECT_EQ(graph_partition_json("--pp 4 --partition even").at("partition"),
            nlohmann::json::parse("[0, 9, 17, 25]"));
}

TEST(PartitionCliTest, GraphBalancedTimeFlagsAreCheckedAndOneLine) {
  const CliResult no_schedule = run_cli("graph --model llama3-8b --pp 4 --partition balanced-time");
  EXPECT_EQ(no_schedule.exit_code, 2);
  EXPECT_EQ(no_schedule.err,
            "jaxpp-sim graph: error: --schedule: required with --partition balanced-time (the "
            "schedule the partition is searched for)\n");
  EXPECT_EQ(no_schedule.out, "");
  const CliResult stray = run_cli("graph --model llama3-8b --pp 4 --tp 2");
  EXPECT_EQ(stray.exit_code, 2);
  EXPECT_NE(stray.err.find("--tp: prices the --partition balanced-time search, but --partition "
                           "is auto"),
            std::string::npos)
      << stray.err;
  const CliResult placement = run_cli(
      "graph --model llama3-8b --pp 4 --schedule 1f1b --partition balanced-time --placement v");
  EXPECT_EQ(placement.exit_code, 2);
  const CliResult tiny = run_cli(
      "graph --model llama3-8b --pp 4 --schedule 1f1b --partition balanced-time "
      "--max-memory-gib 2");
  EXPECT_EQ(tiny.exit_code, 2);
  EXPECT_NE(tiny.err.find("--partition balanced-time: no partition fits in 2.00 GiB"),
            std::string::npos)
      << tiny.err;
}

}  // namespace
}  // namespace jaxpp
