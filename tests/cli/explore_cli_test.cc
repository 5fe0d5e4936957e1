// CLI tests of `jaxpp-sim explore`: JSON fields, byte-identical output across runs, threads and
// mpirun, the table, CSV, --explain, the best plan loading in validate and run, and one-line
// errors with exit code 2 for bad input.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp {
namespace {

using testing::CliResult;
using testing::make_temp_dir;
using testing::read_file;
using testing::run_cli;
using testing::run_cli_under_mpirun;

// A small space: GPT-3 1.3B on 8 GPUs, a few schedules; it simulates in well under a second.
// kSmall without --schedules, for the cases that give their own (a flag is given once).
const std::string kSmallAllSchedules =
    "explore --model gpt3-1.3b --cluster a100-80g --gpus 8 --global-batch 16 --pp 2,4 "
    "--tp 1,2 --microbatch-sizes 1,2 --virtual 1,2 --quiet ";
const std::string kSmall = kSmallAllSchedules + "--schedules 1f1b,zb-h1,interleaved ";

void expect_explore_error(const CliResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("jaxpp-sim explore: error: ", 0), 0u) << r.err;
  for (const std::string& n : needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << n << " in " << r.err;
}

TEST(ExploreCliTest, JsonHasEvaluatedFeasibleBestAndConfigs) {
  const CliResult r = run_cli(kSmall + "--json --top 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("model"), "gpt3-1.3b");
  EXPECT_EQ(j.at("gpus"), 8);
  const int64_t evaluated = j.at("evaluated").get<int64_t>();
  EXPECT_GT(evaluated, 20);
  EXPECT_GT(j.at("feasible").get<int64_t>(), 0);
  EXPECT_EQ(j.at("configs").size(), static_cast<size_t>(evaluated));
  EXPECT_EQ(j.at("top").size(), 3u);
  const nlohmann::json& best = j.at("best");
  EXPECT_GT(best.at("step_time_s").get<double>(), 0);
  EXPECT_EQ(best.at("config").at("gpus"), 8);
  for (const nlohmann::json& c : j.at("configs")) {
    EXPECT_GE(c.at("step_time_s").get<double>(), best.at("step_time_s").get<double>());
  }
  EXPECT_TRUE(j.at("pareto").at(0).at("pareto").get<bool>());
  EXPECT_TRUE(j.at("pruned").contains("memory"));
}

// Recompute op is searched only when asked for: the default space is none, selective and full.
TEST(ExploreCliTest, OpRecomputeOnlyWhenAskedFor) {
  const CliResult all = run_cli(kSmall + "--json");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const nlohmann::json configs = nlohmann::json::parse(all.out).at("configs");
  std::set<std::string> seen;
  for (const nlohmann::json& c : configs)
    seen.insert(c.at("config").at("recompute").get<std::string>());
  EXPECT_EQ(seen, (std::set<std::string>{"none", "selective", "full"}));
  const CliResult op = run_cli(kSmall + "--json --recompute op");
  ASSERT_EQ(op.exit_code, 0) << op.err;
  const nlohmann::json j = nlohmann::json::parse(op.out);
  ASSERT_GT(j.at("configs").size(), 0u);
  for (const nlohmann::json& c : j.at("configs")) EXPECT_EQ(c.at("config").at("recompute"), "op");
}

TEST(ExploreCliTest, JsonIsByteIdenticalAcrossRunsAndThreadCounts) {
  const CliResult a = run_cli(kSmall + "--json --explain --threads 1");
  const CliResult b = run_cli(kSmall + "--json --explain --threads 2");
  const CliResult c = run_cli(kSmall + "--json --explain --threads 2");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(b.out, c.out);
}

TEST(ExploreCliTest, MpirunSplitsTheSpaceAndRankZeroPrintsTheSameJson) {
  const CliResult single = run_cli(kSmall + "--json --explain");
  const CliResult mpi = run_cli_under_mpirun(2, kSmall + "--json --explain --threads 1");
  ASSERT_EQ(single.exit_code, 0) << single.err;
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err << mpi.out;
  EXPECT_EQ(mpi.out, single.out);
}

TEST(ExploreCliTest, MpirunBadInputIsReportedOnce) {
  const CliResult r = run_cli_under_mpirun(2, kSmallAllSchedules + "--schedules 1f1b,nope");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  size_t count = 0;
  for (size_t at = r.err.find("unknown schedule"); at != std::string::npos;
       at = r.err.find("unknown schedule", at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << r.err;
}

TEST(ExploreCliTest, TableShowsTopRowsAndParetoFront) {
  const CliResult r = run_cli(kSmall + "--top 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Top 4 by step time:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Pareto front, step time vs peak memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step_ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("best: pp "), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");  // --quiet, and stderr is not a terminal anyway
}

TEST(ExploreCliTest, CsvFileHasOneRowPerEvaluatedConfiguration) {
  const std::string path = make_temp_dir() + "/all.csv";
  const CliResult r = run_cli(kSmall + "--json --csv " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = read_file(path);
  EXPECT_EQ(csv.rfind("rank,id,pp,tp,cp,dp,", 0), 0u) << csv.substr(0, 100);
  const int64_t evaluated = nlohmann::json::parse(r.out).at("evaluated").get<int64_t>();
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), evaluated + 1);
  const CliResult stdout_csv = run_cli(kSmall + "--format csv");
  ASSERT_EQ(stdout_csv.exit_code, 0) << stdout_csv.err;
  EXPECT_EQ(stdout_csv.out, csv);
}

TEST(ExploreCliTest, ExplainListsPrunedConfigurationsWithReasons) {
  const CliResult r = run_cli(kSmall + "--explain --max-memory-gib 6");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Pruned configurations"), std::string::npos);
  EXPECT_NE(r.out.find("duplicate: ZeRO-1 with dp = 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dominated: ZeRO-1 on (dp = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("memory: needs "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("limit 6.00 GiB"), std::string::npos) << r.out;
  const CliResult j = run_cli(kSmall + "--json --explain");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  ASSERT_FALSE(doc.at("pruned_configs").empty());
  EXPECT_FALSE(doc.at("pruned_configs").at(0).at("reason").get<std::string>().empty());
}

TEST(ExploreCliTest, BestPlanLoadsInValidateAndRun) {
  const std::string path = make_temp_dir() + "/best.json";
  const CliResult r = run_cli(kSmall + "--json --plan " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json best = nlohmann::json::parse(r.out).at("best");
  const nlohmann::json plan = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(plan.at("format"), "jaxpp-sim-plan");
  EXPECT_EQ(plan.at("config"), best.at("config"));
  EXPECT_EQ(plan.at("predicted").at("step_time_s"), best.at("step_time_s"));
  const CliResult v = run_cli("validate " + path);
  EXPECT_EQ(v.exit_code, 0) << v.err << v.out;
  const CliResult run = run_cli("run " + path +
                                " --hidden 8 --seq 4 --layers-per-stage 1 --steps 2 --warmup 1 "
                                "--check --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(nlohmann::json::parse(run.out).at("check_passed").get<bool>());
}

TEST(ExploreCliTest, NothingFitsSaysWhatTheSmallestNeedsAndExits2) {
  const CliResult r = run_cli(
      "explore --model gpt3-175b --gpus 8 --global-batch 8 --schedules 1f1b "
      "--microbatch-sizes 1 --quiet");
  expect_explore_error(r, {"no configuration fits in 80 GiB; the smallest needs ", " GiB (pp "});
}

TEST(ExploreCliTest, NothingFitsWithJsonStillPrintsTheCounts) {
  const CliResult r = run_cli(
      "explore --model gpt3-175b --gpus 8 --global-batch 8 --schedules 1f1b "
      "--microbatch-sizes 1 --quiet --json");
  EXPECT_EQ(r.exit_code, 2);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("feasible"), 0);
  EXPECT_TRUE(j.at("best").is_null());
}

TEST(ExploreCliTest, BadInputGivesOneLineAndExitCode2) {
  expect_explore_error(run_cli(kSmallAllSchedules + "--schedules 1f1b,nope"),
                        {"--schedules: unknown schedule 'nope'"});
  expect_explore_error(run_cli(kSmall + "--format yaml"), {"--format", "yaml"});
  expect_explore_error(run_cli(kSmall + "--plan /nonexistent-dir/best.json"),
                        {"--plan", "/nonexistent-dir", "does not exist"});
  expect_explore_error(run_cli(kSmall + "--csv /nonexistent-dir/all.csv"),
                        {"--csv", "does not exist"});
  expect_explore_error(run_cli(kSmall + "--plan " + make_temp_dir()), {"--plan", "directory"});
  expect_explore_error(run_cli("explore --model gpt3-1.3b --gpus 8 --global-batch 16 --quiet --pp 2,x"), {"--pp", "positive integers"});
  expect_explore_error(run_cli(kSmall + "--recompute sometimes"), {"--recompute"});
  expect_explore_error(run_cli(kSmall + "--zero1 maybe"), {"--zero1"});
  expect_explore_error(run_cli(kSmall + "--threads -1"), {"--threads"});
  expect_explore_error(run_cli(kSmall + "--max-memory-gib -3"), {"--max-memory-gib"});
  expect_explore_error(run_cli(kSmall + "--cp 0"), {"--cp", "positive integers"});
  expect_explore_error(run_cli(kSmall + "--attention fancy"), {"--attention", "fancy"});
  expect_explore_error(run_cli(kSmall + "--tp-comm-overlap"),
                        {"--tp-comm-overlap", "needs --sequence-parallel"});
  expect_explore_error(run_cli("explore --model gpt3-1.3b --gpus 8"), {"--global-batch"});
  expect_explore_error(run_cli("explore --model no-such-model --gpus 8 --global-batch 8"),
                        {"no-such-model"});
}

// ---- Context parallelism and per-configuration options. -------------------------------------

// Llama 3 8B on 32k-token sequences, as a model file; 16 GPUs, a small space.
std::string long_sequence_explore(const std::string& dir) {
  const std::string model = dir + "/llama3-8b-32k.json";
  std::ofstream(model) << R"({"name": "llama3-8b-32k", "layers": 32, "hidden": 4096,
    "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "seq_len": 32768, "vocab": 128256,
    "tied_embeddings": false, "mlp": "swiglu"})";
  return "explore --model " + model +
         " --gpus 16 --global-batch 16 --pp 1,2 --tp 4,8 --microbatch-sizes 1 --schedules 1f1b "
         "--recompute selective --zero1 on --quiet ";
}

TEST(ExploreCliTest, CpFlagRestrictsTheDimensionAndTheTableShowsIt) {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(long_sequence_explore(dir) + "--cp 2,4 --json --explain");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::set<int> cps;
  for (const nlohmann::json& c : j.at("configs")) cps.insert(c.at("config").at("cp").get<int>());
  for (const nlohmann::json& c : j.at("pruned_configs"))
    cps.insert(c.at("config").at("cp").get<int>());
  EXPECT_EQ(cps, (std::set<int>{2, 4}));
  const CliResult table = run_cli(long_sequence_explore(dir) + "--cp 2");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find(" cp "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("best: pp "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(", cp 2, "), std::string::npos) << table.out;
}

TEST(ExploreCliTest, OptionFlagsReachEveryConfigurationAndThePlan) {
  const std::string dir = make_temp_dir();
  const std::string plan_path = dir + "/best.json";
  const CliResult r =
      run_cli(long_sequence_explore(dir) +
              "--cp 2 --sequence-parallel --tp-comm-overlap --overlap-grad-reduce --attention "
              "flash --json --plan " +
              plan_path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("options").at("tp_comm_overlap"), true);
  EXPECT_EQ(j.at("options").at("overlap_grad_reduce"), true);
  EXPECT_EQ(j.at("options").at("attention"), "flash");
  ASSERT_FALSE(j.at("configs").empty());
  for (const nlohmann::json& c : j.at("configs")) {
    const nlohmann::json& config = c.at("config");
    EXPECT_EQ(config.at("cp"), 2);
    EXPECT_EQ(config.at("sequence_parallel"), true);
    EXPECT_EQ(config.at("tp_comm_overlap"), true);  // tp is 4 or 8
    EXPECT_EQ(config.at("overlap_grad_reduce"), true);
  }
  const nlohmann::json plan = nlohmann::json::parse(read_file(plan_path));
  EXPECT_EQ(plan.at("config"), j.at("best").at("config"));
  EXPECT_EQ(plan.at("config").at("cp"), 2);
  EXPECT_EQ(plan.at("predicted").at("step_time_s"), j.at("best").at("step_time_s"));
  const CliResult v = run_cli("validate " + plan_path);
  EXPECT_EQ(v.exit_code, 0) << v.err << v.out;
}

// The plan explore writes for a cp 2 configuration and `simulate` with the same flags predict
// the same step time.
TEST(ExploreCliTest, CpPlanMatchesSimulateWithTheSameFlags) {
  const std::string dir = make_temp_dir();
  const std::string plan_path = dir + "/best.json";
  const CliResult r = run_cli(long_sequence_explore(dir) + "--cp 2 --json --plan " + plan_path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json c = nlohmann::json::parse(read_file(plan_path)).at("config");
  ASSERT_EQ(c.at("cp"), 2);
  const std::string args =
      "simulate --model " + dir + "/llama3-8b-32k.json --gpus 16 --global-batch 16 --pp " +
      std::to_string(c.at("pp").get<int>()) + " --tp " + std::to_string(c.at("tp").get<int>()) +
      " --dp " + std::to_string(c.at("dp").get<int>()) + " --cp 2 --microbatch-size " +
      std::to_string(c.at("microbatch_size").get<int>()) + " --schedule " +
      c.at("schedule").get<std::string>() + " --recompute " + c.at("recompute").get<std::string>() +
      (c.at("zero1").get<bool>() ? " --zero1" : "") + " --json";
  const CliResult sim = run_cli(args);
  ASSERT_EQ(sim.exit_code, 0) << args << "\n" << sim.err;
  EXPECT_EQ(nlohmann::json::parse(sim.out).at("step_time_s"),
            nlohmann::json::parse(r.out).at("best").at("step_time_s"));
}

}  // namespace
}  // namespace jaxpp
