// jaxpp-sim simulate through the binary: bad input (one line on stderr naming the file, field or
// flag and the reason, exit code 2, nothing on stdout, no output file left behind), the --json
// fields of both modes, SCHEDULES.md's unit-cost makespans in measured mode, --plan files that
// `validate` accepts, and --timeline in every format.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

namespace fs = std::filesystem;

// Small, fast configurations of each mode.
const std::string kModel = "simulate --model gpt3-1.3b --schedule 1f1b ";
const std::string kMeasuredMode = "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 ";


size_t files_in(const std::string& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

// Exit code 2, exactly one line "jaxpp-sim simulate: error: ..." on stderr containing every
// needle, and an empty stdout.
void expect_bad_input(const CliResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("jaxpp-sim simulate: error: ", 0), 0u) << r.err;
  for (const std::string& n : needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << n << " in " << r.err;
  EXPECT_EQ(r.out, "") << "bad input must not print a result";
}


// ---- Bad input: configuration. --------------------------------------------------------------

// Under an MPI launcher only run, calibrate and explore split their work over the processes;
// the others ran once per process, each writing the same files (sweep 6). The launcher is told by
// its environment (OMPI_COMM_WORLD_SIZE), so no mpirun is needed to test it.
TEST(SimulateCli, CommandsThatRunInOneProcessRefuseCopiesUnderAnMpiLauncher) {
  const std::string dir = make_temp_dir();
  for (const std::string& args :
       {"simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 --trace " + dir +
            "/t.json",
        std::string("schedules"), std::string("graph --model gpt3-1.3b --pp 2")}) {
    const CliResult r = run_cli_with_launcher("env OMPI_COMM_WORLD_SIZE=2 ", args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("error: this process is one of 2 that an MPI launcher started"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("start it without mpirun"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/t.json"));
  // One process is no copy.
  EXPECT_EQ(run_cli_with_launcher("env OMPI_COMM_WORLD_SIZE=1 ", "schedules").exit_code, 0);
}

TEST(SimulateCli, GpusThatAreNotPpTimesTpTimesDpAreRejected) {
  expect_bad_input(run_cli(kModel + "--gpus 8 --pp 4 --tp 4 --global-batch 16"),
                   {"configuration: pp·tp·dp = 4·4·1 = 16 does not equal --gpus 8"});
}

TEST(SimulateCli, GlobalBatchNotDivisibleByDpTimesMicrobatchSizeIsRejected) {
  expect_bad_input(run_cli(kModel + "--gpus 4 --pp 2 --dp 2 --global-batch 6 --microbatch-size 2"),
                   {"global batch 6 is not divisible by dp·microbatch_size = 2·2 = 4"});
}

TEST(SimulateCli, PlanThatDoesNotFitNamesTheActorAndBothSizes) {
  const CliResult r =
      run_cli("simulate --model gpt3-175b --schedule 1f1b --gpus 8 --pp 8 --global-batch 16");
  expect_bad_input(r, {});
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex("error: does not fit: actor [0-7] needs [0-9]+\\.[0-9] GiB, has 80\\.0 "
                        "GiB \\(a100-80g\\)\n$")))
      << r.err;
}

TEST(SimulateCli, NoMemoryCheckReportsAPlanThatDoesNotFit) {
  const auto j = run_json(
      "simulate --model gpt3-175b --schedule 1f1b --gpus 8 --pp 8 --global-batch 16 "
      "--no-memory-check");
  const double hbm_bytes = 80.0 * 1024 * 1024 * 1024;
  EXPECT_GT(j["peak_memory_bytes"][0].get<double>(), hbm_bytes);
}

TEST(SimulateCli, MicrobatchesFewerThanStagesAreRejectedWhereTheScheduleNeedsThem) {
  expect_bad_input(run_cli("simulate --schedule zb-h1 --pp 4 --microbatches 2 --t-f 1 --t-b 1"),
                   {"ZeroBubble needs m >= S (got m=2, S=4)"});
  expect_bad_input(run_cli("simulate --schedule dualpipev --pp 4 --microbatches 6 --t-f 1 --t-b 1"),
                   {"DualPipeV needs m >= 2p (got m=6, p=4)"});
}

TEST(SimulateCli, MicrobatchesFewerThanStagesAreFineForOneFOneB) {
  const auto j = run_json("simulate --schedule 1f1b --pp 4 --microbatches 2 --t-f 1 --t-b 1");
  EXPECT_GT(j["step_time_s"].get<double>(), 0);
}

TEST(SimulateCli, UnknownScheduleListsTheValidNames) {
  expect_bad_input(run_cli("simulate --schedule 1f2b --pp 2 --microbatches 4 --t-f 1 --t-b 1"),
                   {"unknown schedule '1f2b'", "Std1F1B", "ZeroBubble"});
}

// The h800 preset: listed in --help and in the unknown-preset message; an unknown name is still
// refused as before.
TEST(SimulateCli, H800PresetIsListedAndAnUnknownPresetIsStillRefused) {
  const auto help = run_cli("simulate --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("h200, h800, b200"), std::string::npos) << help.out;
  expect_bad_input(run_cli(kModel + "--gpus 2 --pp 2 --global-batch 4 --cluster h900"),
                   {"h900: unknown cluster", "presets: ", "h200, h800, b200"});
  const auto ok = run_cli(kModel + "--gpus 2 --pp 2 --global-batch 4 --cluster h800 --json");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST(SimulateCli, CustomScheduleFileThatDeadlocksNamesTheFileAndTheBlockedTasks) {
  const std::string file = data("schedules/deadlock.json");
  expect_bad_input(
      run_cli("simulate --schedule-file " + file + " --pp 2 --microbatches 2 --t-f 1 --t-b 1"),
      {file + ": invalid schedule: deadlock", "actor 0: position 1 B0@s0 waits for B0@s1"});
}

// ---- Bad input: files. ----------------------------------------------------------------------

TEST(SimulateCli, ClusterFileWithAMisspelledKeyIsRejectedNamingTheKey) {
  const std::string file =
      write_temp_file("typo.json", R"({"name": "c", "base": "a100-80g", "hbm_gb": 40})");
  expect_bad_input(run_cli(kModel + "--gpus 2 --pp 2 --global-batch 4 --cluster " + file),
                   {file + ": field 'hbm_gb': unknown field", "hbm_gib"});
}

TEST(SimulateCli, NestedMisspelledClusterKeyIsNamedWithItsParent) {
  const std::string file = write_temp_file(
      "typo.json", R"({"name": "c", "base": "a100-80g", "intra_node": {"bandwith_gb_per_s": 80}})");
  expect_bad_input(run_cli(kModel + "--gpus 2 --pp 2 --global-batch 4 --cluster " + file),
                   {"field 'intra_node': field 'bandwith_gb_per_s': unknown field"});
}

TEST(SimulateCli, MalformedClusterJsonNamesTheFileAndPosition) {
  const std::string file = write_temp_file("c.json", "{\"name\": \"c\", \"base\": \"a100-80g\",");
  expect_bad_input(run_cli(kModel + "--gpus 2 --pp 2 --global-batch 4 --cluster " + file),
                   {file + ":1:34: malformed JSON"});
}

TEST(SimulateCli, MalformedModelJsonNamesTheFileAndPosition) {
  const std::string file = write_temp_file("m.json", R"({"name": "m", "layers": 2,, })");
  expect_bad_input(
      run_cli("simulate --model " + file + " --schedule 1f1b --gpus 2 --pp 2 --global-batch 4"),
      {file + ":1:27: malformed JSON"});
}

TEST(SimulateCli, MalformedStageTimesJsonNamesTheFile) {
  const std::string file = write_temp_file("t.json", R"({"t_f_ms": 1, "t_b_ms": )");
  expect_bad_input(
      run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times " + file),
      {file + ":", "malformed JSON"});
}

TEST(SimulateCli, StageTimesFileWithAZeroForwardIsRejected) {
  const std::string file = write_temp_file("t.json", R"({"t_f_ms": 0, "t_b_ms": 1})");
  expect_bad_input(
      run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times " + file),
      {file + ": field 't_f_ms': expected a number > 0, got 0"});
}

// ---- Bad input: flags. ----------------------------------------------------------------------

TEST(SimulateCli, NegativeForwardTimeIsRejectedNamingTheFlag) {
  expect_bad_input(run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f -1 --t-b 1"),
                   {"--t-f: expected a time in milliseconds > 0, got -1"});
}

TEST(SimulateCli, ZeroBackwardTimeIsRejectedNamingTheFlag) {
  expect_bad_input(run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 0"),
                   {"--t-b: expected a time in milliseconds > 0, got 0"});
}

TEST(SimulateCli, NegativeCommunicationTimeIsRejectedButZeroIsFine) {
  expect_bad_input(run_cli(kMeasuredMode + "--t-comm -0.5"),
                   {"--t-comm: expected a time in milliseconds >= 0, got -0.5"});
  EXPECT_EQ(run_cli(kMeasuredMode + "--t-comm 0 --t-w 0").exit_code, 0);
}

TEST(SimulateCli, ZeroMicrobatchesAreRejected) {
  expect_bad_input(run_cli("simulate --schedule 1f1b --pp 2 --microbatches 0 --t-f 1 --t-b 1"),
                   {"--microbatches: must be >= 1, got 0"});
}

// ---- Outputs: --json, measured mode, --plan. ------------------------------------------------

TEST(SimulateCli, ModelModeJsonHasTheDocumentedMetrics) {
  const auto j = run_json(kModel + "--gpus 8 --pp 4 --dp 2 --global-batch 16");
  for (const char* key : {"step_time_s", "makespan_s", "bubble_rate", "tasks", "tflops_per_gpu",
                          "mfu", "hfu", "tokens_per_s", "p2p_bytes", "collective_bytes"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_TRUE(j[key].is_number()) << key;
  }
  EXPECT_GT(j["step_time_s"].get<double>(), 0);
  EXPECT_GT(j["tflops_per_gpu"].get<double>(), 0);
  EXPECT_GT(j["mfu"].get<double>(), 0);
  EXPECT_LT(j["mfu"].get<double>(), 1);
  // tokens/s = global batch · sequence length / step time.
  EXPECT_NEAR(j["tokens_per_s"].get<double>() * j["step_time_s"].get<double>(), 16.0 * 2048,
              1e-6 * 16 * 2048);
  ASSERT_EQ(j["peak_memory_bytes"].size(), 4u);
  for (const auto& bytes : j["peak_memory_bytes"]) EXPECT_GT(bytes.get<double>(), 1e9);
  ASSERT_EQ(j["actors"].size(), 4u);
  EXPECT_EQ(j["actors"][2]["peak_memory_bytes"], j["peak_memory_bytes"][2]);
}

TEST(SimulateCli, MeasuredModeReproducesTheUnitCostMakespansOfSchedulesMd) {
  // --t-b is the input-gradient backward (I); a full backward B takes T_B + T_W. With
  // T_F = T_B = T_W = 1 ms: F = 1, B = 2, I = W = 1, as in SCHEDULES.md.
  const std::string unit = " --pp 4 --microbatches 8 --t-f 1 --t-b 1 --t-w 1";
  for (const char* name : {"Std1F1B", "Eager1F1B", "GPipe"}) {
    const auto j = run_json(std::string("simulate --schedule ") + name + unit);
    EXPECT_NEAR(j["step_time_s"].get<double>(), 33e-3, 1e-12) << name;
  }
  const auto zb = run_json("simulate --schedule ZeroBubble" + unit);
  EXPECT_NEAR(zb["step_time_s"].get<double>(), 27e-3, 1e-12);
  EXPECT_EQ(zb["schedule"], "ZeroBubble");
  EXPECT_EQ(zb["num_microbatches"], 8);
}

TEST(SimulateCli, MeasuredModeBubbleRateIsPMinusOneOverMPlusPMinusOneForOneFOneB) {
  const auto j = run_json("simulate --schedule 1f1b --pp 4 --microbatches 8 --t-f 1 --t-b 1");
  EXPECT_NEAR(j["bubble_rate"].get<double>(), 3.0 / 11.0, 1e-12);
}

TEST(SimulateCli, PlanFileIsAcceptedByValidateAndHoldsThePrediction) {
  const std::string dir = make_temp_dir();
  const std::string plan = dir + "/plan.json";
  const CliResult r = run_cli(kModel + "--gpus 4 --pp 2 --dp 2 --global-batch 8 --plan " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + plan), std::string::npos) << r.out;
  const CliResult v = run_cli("validate " + plan);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("OK"), std::string::npos) << v.out;
  const auto j = nlohmann::json::parse(read_file(plan));
  EXPECT_GT(j["predicted"]["step_time_s"].get<double>(), 0);
  fs::remove_all(dir);
}

TEST(SimulateCli, TraceAndTimelineDoNotChangeTheMetrics) {
  const std::string dir = make_temp_dir();
  const std::string args =
      "simulate --schedule zb-h1 --pp 4 --microbatches 8 --t-f 1 --t-b 1.2 "
      "--t-w 0.7 --t-comm 0.05";
  const auto plain = run_json(args);
  const auto traced = run_json(args + " --trace " + dir + "/t.json --timeline " + dir + "/t.txt");
  EXPECT_EQ(plain, traced);
  fs::remove_all(dir);
}

// ---- --timeline. ----------------------------------------------------------------------------

TEST(SimulateCli, TimelineFormatFollowsTheExtension) {
  const std::string dir = make_temp_dir();
  for (const char* ext : {"svg", "png", "dot", "json", "txt"}) {
    const std::string path = dir + "/timeline." + ext;
    const CliResult r = run_cli(kMeasuredMode + "--timeline " + path);
    ASSERT_EQ(r.exit_code, 0) << ext << ": " << r.err;
    EXPECT_NE(r.out.find("wrote " + path), std::string::npos) << r.out;
  }
  EXPECT_NE(read_file(dir + "/timeline.svg").find("<svg"), std::string::npos);
  EXPECT_EQ(read_file(dir + "/timeline.png").substr(0, 4), "\x89PNG");
  EXPECT_EQ(read_file(dir + "/timeline.dot").rfind("digraph", 0), 0u);
  const auto chrome = nlohmann::json::parse(read_file(dir + "/timeline.json"));
  EXPECT_FALSE(chrome["traceEvents"].empty());
  EXPECT_NE(read_file(dir + "/timeline.txt").find("actor 1 |"), std::string::npos);
  fs::remove_all(dir);
}

TEST(SimulateCli, JsonTimelineEqualsExportingTheTraceAsPerfetto) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(
      run_cli(kMeasuredMode + "--trace " + dir + "/t.json --timeline " + dir + "/a.json").exit_code, 0);
  ASSERT_EQ(run_cli("export --trace " + dir + "/t.json --format perfetto -o " + dir + "/b.json")
                .exit_code,
            0);
  EXPECT_EQ(read_file(dir + "/a.json"), read_file(dir + "/b.json"));
  fs::remove_all(dir);
}

TEST(SimulateCli, TimelineWithAnUnknownExtensionIsRejectedAndWritesNothing) {
  const std::string dir = make_temp_dir();
  expect_bad_input(run_cli(kMeasuredMode + "--timeline " + dir + "/t.xyz --trace " + dir + "/t.json"),
                   {"--timeline " + dir + "/t.xyz: unknown extension '.xyz'", ".svg", ".txt"});
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

TEST(SimulateCli, TimelineIntoAMissingDirectoryIsRejectedAndWritesNothing) {
  const std::string dir = make_temp_dir();
  expect_bad_input(
      run_cli(kMeasuredMode + "--trace " + dir + "/t.json --timeline " + dir + "/missing/t.svg"),
      {"--timeline " + dir + "/missing/t.svg: directory", "does not exist"});
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

TEST(SimulateCli, TimelineOntoADirectoryIsRejected) {
  const std::string dir = make_temp_dir();
  fs::create_directory(dir + "/t.svg");
  expect_bad_input(run_cli(kMeasuredMode + "--timeline " + dir + "/t.svg"), {"is a directory"});
  fs::remove_all(dir);
}

TEST(SimulateCli, FailedSimulationLeavesNoOutputFiles) {
  const std::string dir = make_temp_dir();
  expect_bad_input(
      run_cli("simulate --model gpt3-175b --schedule 1f1b --gpus 8 --pp 8 "
              "--global-batch 16 --trace " +
              dir + "/t.json --timeline " + dir + "/t.svg --plan " + dir + "/plan.json"),
      {"does not fit"});
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace jaxpp::testing
