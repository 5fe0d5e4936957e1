// CLI: Shardy:MPMD's schedules through `show --json`, token for token as Shardy's own examples.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp {
namespace {

using nlohmann::json;
using testing::run_cli;
using testing::run_json;

TEST(ShardyCli, OneFOneBFourMeshesSixMicrobatchesIsShardysExample) {
  const json j = run_json("show --schedule 1F1B --pp 4 --microbatches 6");
  EXPECT_EQ(j["actors"], json({{"F0@s0", "F1@s0", "F2@s0", "F3@s0", "B0@s0", "F4@s0", "B1@s0",
                                "F5@s0", "B2@s0", "B3@s0", "B4@s0", "B5@s0"},
                               {"F0@s1", "F1@s1", "F2@s1", "B0@s1", "F3@s1", "B1@s1", "F4@s1",
                                "B2@s1", "F5@s1", "B3@s1", "B4@s1", "B5@s1"},
                               {"F0@s2", "F1@s2", "B0@s2", "F2@s2", "B1@s2", "F3@s2", "B2@s2",
                                "F4@s2", "B3@s2", "F5@s2", "B4@s2", "B5@s2"},
                               {"F0@s3", "B0@s3", "F1@s3", "B1@s3", "F2@s3", "B2@s3", "F3@s3",
                                "B3@s3", "F4@s3", "B4@s3", "F5@s3", "B5@s3"}}));
}

TEST(ShardyCli, GPipeBut1F1BForLastMeshThreeMeshesFourMicrobatchesIsShardysExample) {
  const json j = run_json("show --schedule gpipebut1f1bforlastmesh --pp 3 --microbatches 4");
  EXPECT_EQ(j["schedule"], "GPipeBut1F1BForLastMesh");
  EXPECT_EQ(j["actors"],
            json({{"F0@s0", "F1@s0", "F2@s0", "F3@s0", "B0@s0", "B1@s0", "B2@s0", "B3@s0"},
                  {"F0@s1", "F1@s1", "F2@s1", "F3@s1", "B0@s1", "B1@s1", "B2@s1", "B3@s1"},
                  {"F0@s2", "B0@s2", "F1@s2", "B1@s2", "F2@s2", "B2@s2", "F3@s2", "B3@s2"}}));
}

TEST(ShardyCli, ZeroBubbleH1FourMeshesFiveMicrobatchesIsShardysExample) {
  const json j = run_json("show --schedule ZEROBUBBLEH1 --pp 4 --microbatches 5");
  EXPECT_EQ(j["schedule"], "ZeroBubbleH1");
  EXPECT_EQ(j["split_backward"], json({false, true, true, true}));
  EXPECT_EQ(j["actors"],
            json({{"F0@s0", "F1@s0", "F2@s0", "F3@s0", "B0@s0", "F4@s0", "B1@s0", "B2@s0", "B3@s0",
                   "B4@s0"},
                  {"F0@s1", "F1@s1", "F2@s1", "I0@s1", "F3@s1", "I1@s1", "W0@s1", "F4@s1", "I2@s1",
                   "W1@s1", "I3@s1", "W2@s1", "I4@s1", "W3@s1", "W4@s1"},
                  {"F0@s2", "F1@s2", "I0@s2", "F2@s2", "I1@s2", "F3@s2", "I2@s2", "W0@s2", "F4@s2",
                   "I3@s2", "W1@s2", "I4@s2", "W2@s2", "W3@s2", "W4@s2"},
                  {"F0@s3", "I0@s3", "F1@s3", "I1@s3", "F2@s3", "I2@s3", "F3@s3", "I3@s3", "W0@s3",
                   "F4@s3", "I4@s3", "W1@s3", "W2@s3", "W3@s3", "W4@s3"}}));
}

TEST(ShardyCli, CircularForwardsFollowShardysPhaseExample) {
  const json j = run_json("show --schedule circular --pp 2 --stages 4 --microbatches 4");
  EXPECT_EQ(j["stage_to_actor"], json({0, 1, 0, 1}));
  const json forwards0 =
      json(std::vector<json>(j["actors"][0].begin(), j["actors"][0].begin() + 8));
  EXPECT_EQ(forwards0,
            json({"F0@s0", "F1@s0", "F0@s2", "F1@s2", "F2@s0", "F3@s0", "F2@s2", "F3@s2"}));
}

TEST(ShardyCli, EveryShardyNameIsListedAndShows) {
  const auto list = run_cli("schedules");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  for (const char* name :
       {"Circular", "CircularWithReversedBackward", "GPipeBut1F1BForLastMesh", "ZeroBubbleH1",
        "ZeroBubbleH2ZeroTxLatency", "ZeroBubbleH2HalfTxLatency", "ZeroBubbleH2FullTxLatency"}) {
    EXPECT_NE(list.out.find(name), std::string::npos) << name;
    const auto shown =
        run_cli(std::string("show --schedule ") + name + " --pp 3 --microbatches 6 --no-timeline");
    EXPECT_EQ(shown.exit_code, 0) << name << ": " << shown.err;
  }
}

TEST(ShardyCli, SimulatesAShardyScheduleUnderStageTimes) {
  const json j = run_json(
      "simulate --schedule ZeroBubbleH2HalfTxLatency --pp 4 --microbatches 8 --t-f 1 --t-b 1 "
      "--t-w 1");
  EXPECT_GT(j["step_time_s"].get<double>(), 0.0) << j.dump();
}

TEST(ShardyCli, AMisspelledShardyNameSuggestsTheNearestAndExitsTwo) {
  const auto r = run_cli("show --schedule ZeroBubbleH1x --pp 4 --microbatches 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown schedule 'ZeroBubbleH1x'; did you mean ZeroBubbleH1?"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(ShardyCli, ParallelPipelinesWithWrapAroundIsShownNotSimulated) {
  const json j = run_json("show --schedule parallelpipelineswithwraparound --pp 3");
  EXPECT_EQ(j["forward_only"], true);
  EXPECT_EQ(j["actors"], json({{"F0@s0", "F2@s1", "F1@s2"},
                               {"F1@s0", "F0@s1", "F2@s2"},
                               {"F2@s0", "F1@s1", "F0@s2"}}));
  const auto text = run_cli("show --schedule ParallelPipelinesWithWrapAround --pp 3");
  EXPECT_NE(text.out.find("actor0: F0@s0 F2@s1 F1@s2\n"), std::string::npos) << text.out;
  const auto sim = run_cli(
      "simulate --schedule ParallelPipelinesWithWrapAround --pp 3 --microbatches 3 --t-f 1 --t-b "
      "1");
  EXPECT_EQ(sim.exit_code, 2);
  EXPECT_NE(sim.err.find("only `jaxpp-sim show` prints it"), std::string::npos) << sim.err;
  const auto bad_m =
      run_cli("show --schedule ParallelPipelinesWithWrapAround --pp 3 --microbatches 4");
  EXPECT_EQ(bad_m.exit_code, 2);
  EXPECT_NE(bad_m.err.find("needs m = p"), std::string::npos) << bad_m.err;
}

// Rule-based custom schedule files.

TEST(ShardyCli, RuleFileShowsValidatesAndSimulatesLikeAnyScheduleFile) {
  const std::string file = testing::data("schedules/rules_1f1b.json");
  const json shown = run_json("show --schedule-file " + file);
  EXPECT_EQ(shown["schedule"], "rules-1f1b");
  EXPECT_EQ(shown["actors"][0][4], "B0@s0");
  EXPECT_EQ(shown["makespan_unit"], 33);  // Std1F1B(4), m = 8
  const auto valid = run_cli("validate " + file);
  EXPECT_EQ(valid.exit_code, 0) << valid.err;
  const json sim = run_json("simulate --schedule-file " + file +
                            " --pp 4 --microbatches 8 --t-f 1 --t-b 2 --t-w 1");
  EXPECT_GT(sim["step_time_s"].get<double>(), 0.0);
}

TEST(ShardyCli, RuleFileExportsItsExpandedOrders) {
  const std::string dir = testing::make_temp_dir();
  const auto r = run_cli("show --schedule-file " + testing::data("schedules/rules_1f1b.json") +
                         " --no-timeline --export-csv " + dir + "/o.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = testing::read_file(dir + "/o.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "0F0,0F1,0F2,0F3,0B0,0F4,0B1,0F5,0B2,0F6,0B3,0F7,0B4,0B5,0B6,0B7");
}

TEST(ShardyCli, BadRuleFilesExitTwoWithOneLineNamingTheRuleAndWriteNothing) {
  const std::string dir = testing::make_temp_dir();
  const std::map<std::string, std::string> cases = {
      {"rules_cycle.json",
       "rules[1] (\"backward first\"): puts B1@s0 before F1@s0, which closes a cycle"},
      {"rules_missing_task.json", "rules[0] (\"input gradients first\"): names I tasks"},
      {"rules_unordered.json", "the rules leave B0@s0 and F1@s0 on actor 0 unordered"}};
  for (const auto& [file, message] : cases) {
    for (const std::string& command :
         {std::string("show --export-csv ") + dir + "/x.csv --schedule-file ",
          std::string("validate "),
          std::string("simulate --pp 2 --microbatches 2 --t-f 1 --t-b 1 --schedule-file ")}) {
      const auto r = run_cli(command + testing::data("schedules/" + file));
      EXPECT_EQ(r.exit_code, 2) << command << file;
      EXPECT_NE(r.err.find(message), std::string::npos) << command << file << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
  EXPECT_TRUE(testing::read_file(dir + "/x.csv").empty());
}

}  // namespace
}  // namespace jaxpp
