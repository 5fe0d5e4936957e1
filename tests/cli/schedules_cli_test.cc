// CLI: jaxpp-sim schedules / show / validate, with exit codes (0 ok, 1 invalid, 2 bad input).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp {
namespace {

using testing::run_cli;
using testing::write_temp_file;

std::string schedule_data(const std::string& name) {
  return std::string(JAXPP_TEST_DATA_DIR) + "/schedules/" + name;
}

TEST(SchedulesCli, ListsEveryScheduleWithAliasesAndConstraints) {
  const auto r = run_cli("schedules");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name :
       {"GPipe", "Std1F1B", "Eager1F1B", "ZeroBubble", "Interleaved1F1B", "KimiK2",
        "InterleavedGPipe", "DualPipeV", "ZB-H2", "ZB-V", "LoopedBFS", "MegatronInterleaved"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
  EXPECT_NE(r.out.find("aliases: zb-h1, zb1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("constraints: S = p (linear), m >= S >= 2"), std::string::npos) << r.out;
}

TEST(SchedulesCli, JsonListHasNamesAliasesDescriptionsConstraints) {
  const auto r = run_cli("schedules --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 19u);
  EXPECT_EQ(j[1]["name"], "Std1F1B");
  EXPECT_EQ(j[1]["aliases"][0], "1f1b");
  EXPECT_FALSE(j[1]["description"].get<std::string>().empty());
  EXPECT_FALSE(j[1]["constraints"].get<std::string>().empty());
}

TEST(SchedulesCli, ShowPrintsTheGridAndTheUnitCostTimeline) {
  const auto r = run_cli("show --schedule 1F1B --pp 4 --microbatches 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("actor0: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("actor3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7\n"),
            std::string::npos);
  EXPECT_NE(r.out.find("makespan 33 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("actor0 |FFFF"), std::string::npos) << r.out;
}

TEST(SchedulesCli, ShowNoTimelineOmitsTheGantt) {
  const auto r = run_cli("show --schedule gpipe --pp 2 --microbatches 2 --no-timeline");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("makespan"), std::string::npos) << r.out;
}

TEST(SchedulesCli, ShowJsonHasTheDocumentedFields) {
  const auto r = run_cli("show --schedule zb-h1 --pp 4 --microbatches 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schedule"], "ZeroBubble");
  EXPECT_EQ(j["stage_to_actor"], nlohmann::json({0, 1, 2, 3}));
  EXPECT_EQ(j["actors"][1][3], "I0@s1");
  EXPECT_EQ(j["makespan_unit"], 27);
  EXPECT_EQ(j["peak_in_flight"], nlohmann::json({4, 3, 2, 1}));
}

TEST(SchedulesCli, ShowJsonJoinsFusedGroupsWithPlus) {
  const auto r = run_cli("show --schedule interleaved --pp 2 --stages 4 --microbatches 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["actors"][1][2], "F0@s3+B0@s3");
  EXPECT_EQ(j["stage_to_actor"], nlohmann::json({0, 1, 0, 1}));
}

TEST(SchedulesCli, ShowDefaultsToTwoPStagesForVSchedules) {
  const auto r = run_cli("show --schedule dualpipev --pp 2 --microbatches 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["stage_to_actor"], nlohmann::json({0, 1, 1, 0}));
}

TEST(SchedulesCli, ShowUnknownScheduleListsValidNamesAndExitsTwo) {
  const auto r = run_cli("show --schedule fancy --pp 4 --microbatches 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown schedule 'fancy' (valid: GPipe, Std1F1B"), std::string::npos)
      << r.err;
}

TEST(SchedulesCli, ShowTooFewMicrobatchesIsAPreciseErrorExitTwo) {
  const auto r = run_cli("show --schedule zb-h1 --pp 4 --microbatches 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "jaxpp-sim show: error: ZeroBubble needs m >= S (got m=2, S=4)\n");
}

TEST(SchedulesCli, ExportedCsvAndJsonValidateAndShowTheSameGrid) {
  const std::string dir = testing::make_temp_dir();
  const auto r = run_cli("show --schedule zb-v --pp 3 --microbatches 6 --export-csv " + dir +
                         "/s.csv --export-json " + dir + "/s.json --no-timeline");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto csv = run_cli("validate " + dir + "/s.csv");
  EXPECT_EQ(csv.exit_code, 0) << csv.out << csv.err;
  EXPECT_NE(csv.out.find("OK: "), std::string::npos);
  const auto shown = run_cli("show --schedule-file " + dir + "/s.json --no-timeline");
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const size_t grid = r.out.find("actor0:");
  const size_t grid_end = r.out.find("\n\n", grid);
  EXPECT_NE(shown.out.find(r.out.substr(grid, grid_end - grid)), std::string::npos) << shown.out;
}

TEST(SchedulesCli, ShowOfAnInvalidCustomScheduleExitsOneWithTheErrors) {
  const auto r = run_cli("show --schedule-file " + schedule_data("deadlock.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("crossed-1f1b is not a valid schedule"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("deadlock: no actor can make progress"), std::string::npos) << r.err;
}

TEST(SchedulesCli, ShowNeedsExactlyOneScheduleSource) {
  const auto both = run_cli("show --schedule 1f1b --schedule-file " + schedule_data("deadlock.json"));
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("give exactly one of --schedule NAME or --schedule-file FILE"),
            std::string::npos)
      << both.err;
  const auto no_pp = run_cli("show --schedule 1f1b --microbatches 4");
  EXPECT_EQ(no_pp.exit_code, 2);
  EXPECT_NE(no_pp.err.find("--pp: required"), std::string::npos) << no_pp.err;
}

TEST(SchedulesCli, ValidateCsvPrintsOkAndPeakInFlight) {
  const auto r = run_cli("validate " + schedule_data("1f1b_p2_m4.csv"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("peak in-flight activations per actor (stage-microbatches): 2 1"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("unit-cost makespan (F=1, B=2, I=W=1): 15"), std::string::npos) << r.out;
}

TEST(SchedulesCli, ValidateDeadlockExitsOneAndNamesEveryActor) {
  const auto r = run_cli("validate " + schedule_data("deadlock.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("actor 0: position 1 B0@s0 waits for B0@s1 (actor 1, position 3)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("actor 1: position 0 F1@s1 waits for F1@s0 (actor 0, position 2)"),
            std::string::npos)
      << r.out;
}

TEST(SchedulesCli, ValidateJsonReportsErrors) {
  const auto r = run_cli("validate --json " + schedule_data("missing_task.json"));
  EXPECT_EQ(r.exit_code, 1);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["errors"][0],
            "actor 1: task B1@s1 is missing (every stage-microbatch needs F and B)");
}

TEST(SchedulesCli, ValidateDuplicateExitsOne) {
  const auto r = run_cli("validate " + schedule_data("duplicate_task.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("B1@s1 is duplicated (first at actor 1, position 3)"), std::string::npos);
}

TEST(SchedulesCli, ValidateMalformedCsvExitsTwoNamingLineAndToken) {
  const auto r = run_cli("validate " + schedule_data("malformed.csv"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("malformed.csv: line 2 (actor 1), cell 1: bad action '1X1'"),
            std::string::npos)
      << r.err;
}

TEST(SchedulesCli, ValidateMalformedJsonExitsTwo) {
  const auto r = run_cli("validate " + schedule_data("malformed.json"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("malformed.json"), std::string::npos) << r.err;
}

TEST(SchedulesCli, ValidateMissingFileExitsTwo) {
  const auto r = run_cli("validate /nonexistent/schedule.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot read file: No such file"), std::string::npos) << r.err;
}

// A two-actor plan of a small model, as `simulate --plan` writes it (validate also checks that the
// program is the lowering of the file's own configuration: simulator/plan_check.h).
nlohmann::json tiny_plan() {
  const std::string dir = testing::make_temp_dir();
  const auto r = run_cli("simulate --model " + std::string(JAXPP_TEST_DATA_DIR) +
                         "/graph/tiny_transformer.json --gpus 2 --pp 2 --global-batch 2 "
                         "--schedule 1f1b --plan " +
                         dir + "/plan.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(testing::read_file(dir + "/plan.json"));
}

TEST(SchedulesCli, ValidatePlanChecksItsProgram) {
  const nlohmann::json plan = tiny_plan();
  const std::string good = write_temp_file("plan.json", plan.dump());
  const auto ok = run_cli("validate " + good);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("OK: "), std::string::npos) << ok.out;

  nlohmann::json broken = plan;
  for (nlohmann::json& ins : broken["program"]["actors"][1])
    if (ins["op"] == "recv") ins["tag"] = 7;  // the recvs no longer match the sends
  const std::string bad = write_temp_file("plan.json", broken.dump());
  const auto r = run_cli("validate --json " + bad);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "plan");
  EXPECT_EQ(j["ok"], false);
}

}  // namespace
}  // namespace jaxpp
