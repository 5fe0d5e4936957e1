// CLI: name-to-actor assignments (--assign) in simulate, show, explore and plan.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp {
namespace {

using nlohmann::json;
using testing::make_temp_dir;
using testing::read_file;
using testing::run_cli;
using testing::run_json;
using testing::write_temp_file;

// embedding, layer0 ... layer7, logits.
std::string assign_model() {
  return write_temp_file("tiny8.json", R"({"name": "tiny8", "layers": 8, "hidden": 256,
    "heads": 4, "ffn_hidden": 1024, "seq_len": 128, "vocab": 1000})");
}

std::string circular_assignment() {
  return write_temp_file("circular.json",
                         R"({"assignment": {"embedding": 0, "layer{i}": "i mod 4", "logits": 3}})");
}

// Three stages on two actors: not linear, loop or V.
std::string split_assignment() {
  return write_temp_file(
      "split.json",
      R"({"assignment": {"embedding-layer2": 0, "layer3-layer5": 1, "layer6-logits": 0}})");
}

std::string model_args(int pp) {
  return "simulate --model " + assign_model() + " --cluster a100-80g --gpus " + std::to_string(pp) +
         " --pp " + std::to_string(pp) + " --global-batch 8";
}

TEST(AssignCli, CircularAssignmentIsTheLoopPlacementWithCircularsStepTime) {
  const json a = run_json(model_args(4) + " --schedule Circular --assign " + circular_assignment());
  const json b =
      run_json(model_args(4) + " --schedule Circular --virtual 2 --partition 0,2,3,4,5,6,7,8");
  EXPECT_EQ(a["assignment"]["placement"]["kind"], "loop");
  EXPECT_EQ(a["assignment"]["placement"]["stage_to_actor"], json({0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(a["assignment"]["stage_begin"], json({0, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(a["config"]["virtual_stages"], 2);
  EXPECT_GT(a["step_time_s"].get<double>(), 0);
  EXPECT_EQ(a["step_time_s"], b["step_time_s"]);
  EXPECT_EQ(a["peak_memory_bytes"], b["peak_memory_bytes"]);
}

TEST(AssignCli, CircularAssignmentGivesInterleavedItsOwnStepTime) {
  const json a =
      run_json(model_args(4) + " --schedule interleaved --assign " + circular_assignment());
  const json b =
      run_json(model_args(4) + " --schedule interleaved --virtual 2 --partition 0,2,3,4,5,6,7,8");
  EXPECT_EQ(a["assignment"]["placement"]["kind"], "loop");
  EXPECT_EQ(a["step_time_s"], b["step_time_s"]);
  EXPECT_EQ(a["tasks"], b["tasks"]);
}

TEST(AssignCli, ContiguousRuleIsTheLinearPlacementWithStd1F1BsStepTime) {
  const std::string file = write_temp_file(
      "blocks.json", R"({"assignment": {"embedding": 0, "layer{i}": "i / 2", "logits": 3}})");
  const json a = run_json(model_args(4) + " --schedule 1f1b --assign " + file);
  const json b = run_json(model_args(4) + " --schedule 1f1b --partition 0,3,5,7");
  EXPECT_EQ(a["assignment"]["placement"]["kind"], "linear");
  EXPECT_EQ(a["step_time_s"], b["step_time_s"]);
}

TEST(AssignCli, VAssignmentGivesDualPipeVItsOwnStepTime) {
  const std::string file =
      write_temp_file("v.json", R"({"assignment": {"embedding-layer1": 0, "layer2-layer3": 1,
                   "layer4-layer5": {"actor": 1, "new_stage": true}, "layer6-logits": 0}})");
  const json a = run_json(model_args(2) + " --schedule dualpipev --assign " + file);
  const json b = run_json(model_args(2) + " --schedule dualpipev --partition 0,3,5,7");
  EXPECT_EQ(a["assignment"]["placement"]["kind"], "v");
  EXPECT_EQ(a["assignment"]["placement"]["stage_to_actor"], json({0, 1, 1, 0}));
  EXPECT_EQ(a["step_time_s"], b["step_time_s"]);
}

TEST(AssignCli, NonContiguousAssignmentSimulatesWithItsStageCount) {
  for (const char* schedule : {"1f1b", "gpipe", "ZeroBubbleH1", "GPipeBut1F1BForLastMesh"}) {
    const json j =
        run_json(model_args(2) + " --schedule " + schedule + " --assign " + split_assignment());
    EXPECT_EQ(j["assignment"]["num_stages"], 3) << schedule;
    EXPECT_EQ(j["assignment"]["placement"]["kind"], "explicit") << schedule;
    EXPECT_EQ(j["assignment"]["placement"]["stage_to_actor"], json({0, 1, 0})) << schedule;
    EXPECT_EQ(j["config"]["virtual_stages"], 2) << schedule;
    EXPECT_EQ(j["actors"].size(), 2u) << schedule;
    EXPECT_GT(j["step_time_s"].get<double>(), 0) << schedule;
  }
}

TEST(AssignCli, TheTextReportShowsTheAssignedStages) {
  const testing::CliResult r =
      run_cli(model_args(2) + " --schedule 1f1b --assign " + split_assignment());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("assignment             3 stages, explicit placement, actor of each "
                       "stage: 0 1 0"),
            std::string::npos)
      << r.out;
}

// One line on stderr naming the file and `needle`; exit 2; the --plan file not written.
void expect_bad_assignment(const std::string& assignment_json, int pp, const std::string& needle) {
  const std::string file = write_temp_file("bad.json", assignment_json);
  const std::string plan = make_temp_dir() + "/plan.json";
  const testing::CliResult r =
      run_cli(model_args(pp) + " --schedule 1f1b --assign " + file + " --plan " + plan);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(file + ": " + needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(plan));
}

TEST(AssignCli, AMissingLayerIsOneLineAndExitTwo) {
  expect_bad_assignment(R"({"assignment": {"embedding-layer7": 0, "layer8": 1, "logits": 1}})", 2,
                        "field 'assignment.layer8': no layer named 'layer8' in tiny8");
}

TEST(AssignCli, ALayerAssignedTwiceIsOneLineAndExitTwo) {
  expect_bad_assignment(R"({"assignment": {"embedding-layer3": 0, "layer3-logits": 1}})", 2,
                        "field 'assignment.layer3-logits': layer3 is also assigned by "
                        "'embedding-layer3'");
}

TEST(AssignCli, ALayerNotAssignedIsOneLineAndExitTwo) {
  expect_bad_assignment(R"({"assignment": {"embedding-layer3": 0, "layer4-layer7": 1}})", 2,
                        "field 'assignment': layer 'logits' is not assigned");
}

TEST(AssignCli, AnActorOutOfRangeIsOneLineAndExitTwo) {
  expect_bad_assignment(R"({"assignment": {"embedding-layer3": 0, "layer4-logits": 2}})", 2,
                        "field 'assignment.layer4-logits': actor 2 is out of range 0..1 (2 "
                        "actors)");
  expect_bad_assignment(R"({"assignment": {"embedding": 0, "layer{i}": "i mod 3", "logits": 1}})",
                        2, "field 'assignment.layer{i}': 'i mod 3' gives actor 2 for layer2");
}

TEST(AssignCli, AnActorWithNothingIsOneLineAndExitTwo) {
  expect_bad_assignment(R"({"assignment": {"embedding-layer3": 0, "layer4-logits": 2}})", 3,
                        "field 'assignment': actor 1 gets no layer (3 actors)");
}

TEST(AssignCli, AnUnknownFieldOfTheFileIsOneLineAndExitTwo) {
  expect_bad_assignment(R"({"assignment": {"embedding-logits": 0}, "actors": 2})", 2,
                        "field 'actors': unknown field");
}

TEST(AssignCli, AFileWithoutAnAssignmentIsOneLineAndExitTwo) {
  expect_bad_assignment(R"({"assigment": {"embedding-logits": 0}})", 2,
                        "field 'assigment': unknown field (expected one of: assignment)");
  expect_bad_assignment(R"({})", 2, "missing field 'assignment'");
}

TEST(AssignCli, APlanWithoutAnAssignmentIsRefusedAsAnAssignmentFile) {
  const std::string plan = make_temp_dir() + "/plain.json";
  run_json(model_args(2) + " --schedule 1f1b --plan " + plan);
  const testing::CliResult r = run_cli(model_args(2) + " --schedule 1f1b --assign " + plan);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(plan + ": the plan has no 'assignment' field"), std::string::npos) << r.err;
}

TEST(AssignCli, AScheduleThatDoesNotFitNamesTheFileAndTheSchedule) {
  const std::string file = circular_assignment();
  const std::string plan = make_temp_dir() + "/plan.json";
  const testing::CliResult r =
      run_cli(model_args(4) + " --schedule dualpipev --assign " + file + " --plan " + plan);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(file + ": field 'assignment': schedule 'DualPipeV' does not fit the "
                              "assignment (8 stages on 4 actors, loop placement)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("schedules that fit: Interleaved1F1B"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(plan));
}

TEST(AssignCli, AssignIsRefusedWithPartitionVirtualOrAScheduleFile) {
  for (const char* extra : {" --partition even", " --virtual 2"}) {
    const testing::CliResult r =
        run_cli(model_args(4) + " --schedule 1f1b --assign " + circular_assignment() + extra);
    EXPECT_EQ(r.exit_code, 2) << extra;
    EXPECT_NE(r.err.find("--assign"), std::string::npos) << r.err;
  }
  const testing::CliResult m = run_cli(
      "simulate --schedule 1f1b --pp 4 --microbatches 8 --t-f 1 "
      "--t-b 1 --assign " +
      circular_assignment());
  EXPECT_EQ(m.exit_code, 2);
  EXPECT_NE(m.err.find("--assign"), std::string::npos) << m.err;
}

TEST(AssignCli, PlanKeepsTheAssignmentAndReadsBack) {
  const std::string dir = make_temp_dir();
  const std::string plan = dir + "/plan.json";
  const json a = run_json(model_args(2) + " --schedule 1f1b --assign " + split_assignment() +
                          " --plan " + plan);
  const json doc = json::parse(read_file(plan));
  EXPECT_EQ(doc["assignment"],
            json({{"embedding-layer2", 0}, {"layer3-layer5", 1}, {"layer6-logits", 0}}));
  EXPECT_EQ(doc["placement"]["stage_to_actor"], json({0, 1, 0}));
  // validate reads it back (the assignment checked against partition and placement, the
  // program against the schedule on that placement).
  const testing::CliResult v = run_cli("validate " + plan);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  // --assign takes the plan itself: the same stages, the same step time.
  const json b = run_json(model_args(2) + " --schedule 1f1b --assign " + plan);
  EXPECT_EQ(a["step_time_s"], b["step_time_s"]);
  EXPECT_EQ(b["assignment"]["placement"]["stage_to_actor"], json({0, 1, 0}));
}

TEST(AssignCli, APlanWhoseAssignmentContradictsItsPlacementIsRefused) {
  const std::string dir = make_temp_dir();
  const std::string plan = dir + "/plan.json";
  run_json(model_args(2) + " --schedule 1f1b --assign " + split_assignment() + " --plan " + plan);
  json doc = json::parse(read_file(plan));
  doc["assignment"] = {{"embedding-layer3", 0}, {"layer4-layer5", 1}, {"layer6-logits", 0}};
  const std::string edited = write_temp_file("edited.json", doc.dump());
  const testing::CliResult v = run_cli("validate " + edited);
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_NE(v.err.find(edited + ": field 'assignment': gives 3 stages that differ from the plan's "
                                "partition and placement"),
            std::string::npos)
      << v.err;
}

TEST(AssignCli, ShowPrintsTheScheduleOnTheAssignedStages) {
  const json j = run_json("show --schedule 1f1b --pp 2 --microbatches 4 --model " + assign_model() +
                          " --assign " + split_assignment());
  EXPECT_EQ(j["stage_to_actor"], json({0, 1, 0}));
  EXPECT_EQ(j["assignment"]["stage_layers"],
            json({"embedding-layer2", "layer3-layer5", "layer6-logits"}));
  EXPECT_EQ(j["actors"][1],
            json({"F0@s1", "B0@s1", "F1@s1", "B1@s1", "F2@s1", "B2@s1", "F3@s1", "B3@s1"}));
  const json c = run_json("show --schedule circular --pp 4 --microbatches 8 --model " +
                          assign_model() + " --assign " + circular_assignment());
  const json own = run_json("show --schedule circular --pp 4 --stages 8 --microbatches 8");
  EXPECT_EQ(c["actors"], own["actors"]);
  const testing::CliResult bad =
      run_cli("show --schedule 1f1b --pp 2 --microbatches 4 --assign " + split_assignment());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--model: required with --assign"), std::string::npos) << bad.err;
}

TEST(AssignCli, ExploreWithAnAssignmentEvaluatesTheSchedulesThatFit) {
  const std::string dir = make_temp_dir();
  const std::string plan = dir + "/best.json";
  const json j = run_json("explore --model " + assign_model() +
                          " --cluster a100-80g --gpus 4 --global-batch 8 --pp 4 --tp 1 "
                          "--microbatch-sizes 1 --recompute none --zero1 off --quiet --explain "
                          "--assign " +
                          circular_assignment() + " --plan " + plan);
  std::set<std::string> simulated;
  for (const json& row : j["configs"])
    simulated.insert(row["config"]["schedule"].get<std::string>());
  EXPECT_TRUE(simulated.count("Interleaved1F1B")) << j["configs"].dump();
  EXPECT_TRUE(simulated.count("Circular"));
  EXPECT_TRUE(simulated.count("Std1F1B"));  // Shardy's 1F1B rule on the loop placement
  EXPECT_FALSE(simulated.count("DualPipeV"));
  EXPECT_FALSE(simulated.count("ZeroBubble"));
  bool zero_bubble_pruned = false;
  for (const json& p : j["pruned_configs"])
    if (p["config"]["schedule"] == "ZeroBubble") {
      EXPECT_EQ(p["status"], "schedule");
      EXPECT_NE(p["reason"].get<std::string>().find("does not fit the assignment"),
                std::string::npos);
      zero_bubble_pruned = true;
    }
  EXPECT_TRUE(zero_bubble_pruned) << j["pruned_configs"].dump();
  EXPECT_EQ(j["assignment"]["stage_to_actor"], json({0, 1, 2, 3, 0, 1, 2, 3}));
  const json doc = json::parse(read_file(plan));
  EXPECT_EQ(doc["placement"]["stage_to_actor"], json({0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_TRUE(doc.contains("assignment"));
  const testing::CliResult v = run_cli("validate " + plan);
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

TEST(AssignCli, ExploreWithAnAssignmentNeedsOnePp) {
  const testing::CliResult r =
      run_cli("explore --model " + assign_model() + " --gpus 4 --global-batch 8 --quiet --assign " +
              circular_assignment());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--pp: with --assign: one number of actors"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace jaxpp
