// jaxpp-sim synthesize: the JSON report, outputs that validate, simulate to the reported step and
// run with --check on threads, determinism, plan mode, and bad input (exit 2, nothing written).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

const std::string kSynthMeasured =
    "synthesize --pp 4 --microbatches 8 --t-f 1 --t-b 1.2 --t-w 0.8 --t-comm 0.05 ";

TEST(SynthesizeCli, JsonGivesStepTimeBubbleRateAndPeakStashedPerActorWithinTheBudget) {
  const nlohmann::json j = run_json(kSynthMeasured + "--memory-limit-microbatches 6");
  EXPECT_GT(j.at("step_time_s").get<double>(), 0);
  EXPECT_GE(j.at("bubble_rate").get<double>(), 0);
  EXPECT_LT(j.at("bubble_rate").get<double>(), 1);
  ASSERT_EQ(j.at("peak_stashed").size(), 4u);
  for (const auto& k : j.at("peak_stashed")) EXPECT_LE(k.get<int>(), 6);
  EXPECT_EQ(j.at("memory_limit_microbatches"), nlohmann::json({6, 6, 6, 6}));
  // Never slower than a fitting built-in schedule.
  for (const auto& c : j.at("named")) {
    if (!c.at("fits").get<bool>()) continue;
    EXPECT_LE(j.at("step_time_s").get<double>(), c.at("step_time_s").get<double>() * (1 + 1e-12))
        << c.at("name");
  }
}

// The time budget counts from the start of the synthesis and bounds the constructions too (it
// bounded the local search only: p 256, m 2048 took 42 s with a 1-s budget). Budget 0: the first
// construction only, no search, and still a valid result never slower than a fitting built-in.
TEST(SynthesizeCli, TimeBudgetBoundsTheConstructionsAfterTheFirst) {
  const nlohmann::json all = run_json(kSynthMeasured);
  EXPECT_EQ(all.at("search").at("constructions").get<int>(), 60);
  const nlohmann::json none = run_json(kSynthMeasured + "--time-budget-s 0");
  EXPECT_EQ(none.at("search").at("constructions").get<int>(), 1);
  EXPECT_EQ(none.at("search").at("evaluations").get<int>(), 0);
  EXPECT_EQ(none.at("search").at("stopped_by").get<std::string>(), "time-budget");
  EXPECT_LE(all.at("step_time_s").get<double>(), none.at("step_time_s").get<double>());
  for (const auto& c : none.at("named")) {
    if (!c.at("fits").get<bool>()) continue;
    EXPECT_LE(none.at("step_time_s").get<double>(),
              c.at("step_time_s").get<double>() * (1 + 1e-12))
        << c.at("name");
  }
  EXPECT_NE(run_cli(kSynthMeasured + "--time-budget-s 0").out.find("1 of 60 (the time budget"),
            std::string::npos);
}

TEST(SynthesizeCli, OutputsValidateSimulateToTheReportedStepAndRunWithCheckOnThreads) {
  const std::string dir = make_temp_dir();
  const nlohmann::json j = run_json(kSynthMeasured + "--memory-limit-microbatches 8 --out " + dir +
                                    "/s.json --csv " + dir + "/s.csv");
  for (const char* file : {"/s.json", "/s.csv"}) {
    const CliResult v = run_cli("validate " + dir + file);
    EXPECT_EQ(v.exit_code, 0) << file << ": " << v.out << v.err;
  }
  const nlohmann::json sim =
      run_json("simulate --schedule-file " + dir +
               "/s.json --pp 4 --microbatches 8 --t-f 1 --t-b 1.2 --t-w 0.8 --t-comm 0.05");
  EXPECT_NEAR(sim.at("step_time_s").get<double>(), j.at("step_time_s").get<double>(), 1e-12);
  EXPECT_EQ(sim.at("bubble_rate").get<double>(), j.at("bubble_rate").get<double>());
  const CliResult run = run_cli("run --schedule-file " + dir +
                                "/s.csv --dp 2 --check --json --hidden 8 --seq 4 "
                                "--layers-per-stage 1 --steps 2 --warmup 1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(nlohmann::json::parse(run.out).at("check_passed").get<bool>());
}

TEST(SynthesizeCli, SameInputWritesTheSameFiles) {
  const std::string a = make_temp_dir(), b = make_temp_dir();
  const std::string flags = "--stage-times " + data("schedules/synth_uneven_stage_times.json") +
                            " --pp 4 --microbatches 12 --memory-limit-microbatches 5 "
                            "--max-evaluations 2000 --quiet";
  ASSERT_EQ(
      run_cli("synthesize " + flags + " --out " + a + "/s.json --csv " + a + "/s.csv").exit_code,
      0);
  ASSERT_EQ(
      run_cli("synthesize " + flags + " --out " + b + "/s.json --csv " + b + "/s.csv").exit_code,
      0);
  EXPECT_FALSE(read_file(a + "/s.json").empty());
  EXPECT_EQ(read_file(a + "/s.json"), read_file(b + "/s.json"));
  EXPECT_EQ(read_file(a + "/s.csv"), read_file(b + "/s.csv"));
}

TEST(SynthesizeCli, TableNamesTheResultAndTheBuiltInSchedules) {
  const CliResult r = run_cli(kSynthMeasured + "--memory-limit-microbatches 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("step time"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak stashed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ZeroBubble"), std::string::npos) << r.out;
}

// At p 64 a built-in schedule's peaks overran the 256-byte line, which lost its newline: the
// schedules' lines ran together. One line per applicable built-in schedule, each whole.
TEST(SynthesizeCli, TableKeepsOneLinePerBuiltInScheduleAtManyActors) {
  const std::string flags =
      "synthesize --pp 64 --microbatches 64 --t-f 1 --t-b 1 --t-w 1 --time-budget-s 0";
  const nlohmann::json j = run_json(flags);
  const CliResult r = run_cli(flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t lines = 0, pos = 0;
  while ((pos = r.out.find("peak stashed ", pos)) != std::string::npos) {
    const size_t end = r.out.find('\n', pos);
    ASSERT_NE(end, std::string::npos);
    // Each line ends with its last actor's peak (actor 63) and holds one schedule.
    EXPECT_EQ(r.out.substr(pos, end - pos).find(" ms  bubble"), std::string::npos);
    ++lines;
    pos = end;
  }
  // The result's own "peak stashed" line, then one per applicable built-in schedule.
  EXPECT_EQ(lines, 1 + j.at("named").size()) << r.out;
}

TEST(SynthesizeCli, PlanModeWritesAPlanThatValidatesAndRunsWithCheck) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_cli("simulate --model gpt3-1.3b --schedule 1f1b --gpus 4 --pp 4 --global-batch 8 "
                    "--plan " +
                    dir + "/p.json")
                .exit_code,
            0);
  const nlohmann::json j = run_json("synthesize --plan " + dir + "/p.json --plan-out " + dir +
                                    "/q.json --memory-limit-microbatches 4");
  ASSERT_EQ(j.at("peak_stashed").size(), 4u);
  ASSERT_EQ(j.at("peak_memory_bytes").size(), 4u);
  const nlohmann::json v = run_json("validate " + dir + "/q.json");
  EXPECT_TRUE(v.at("ok").get<bool>());
  const nlohmann::json one = run_json(
      "simulate --model gpt3-1.3b --schedule 1f1b --gpus 4 --pp 4 "
      "--global-batch 8");
  EXPECT_LE(j.at("step_time_s").get<double>(), one.at("step_time_s").get<double>() * (1 + 1e-12));
  const CliResult run = run_cli("run " + dir +
                                "/q.json --check --json --hidden 8 --seq 4 --layers-per-stage 1 "
                                "--steps 2 --warmup 1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(nlohmann::json::parse(run.out).at("check_passed").get<bool>());
}

TEST(SynthesizeCli, PlanModeBudgetInBytesBelowTheStaticMemoryNamesTheMinimum) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_cli("simulate --model gpt3-1.3b --schedule 1f1b --gpus 4 --pp 4 --global-batch 8 "
                    "--plan " +
                    dir + "/p.json")
                .exit_code,
            0);
  const CliResult r = run_cli("synthesize --plan " + dir +
                              "/p.json --memory-limit-bytes 1000 "
                              "--plan-out " +
                              dir + "/q.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--memory-limit-bytes: 1000 is below the minimum of actor 0"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read_file(dir + "/q.json"), "");
}

TEST(SynthesizeCli, BudgetOfZeroIsRefusedWithTheMinimumAndNothingIsWritten) {
  const std::string dir = make_temp_dir();
  const CliResult r =
      run_cli(kSynthMeasured + "--memory-limit-microbatches 0 --out " + dir + "/s.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "jaxpp-sim synthesize: error: --memory-limit-microbatches: 0 is below the minimum of 1 "
            "stashed microbatch per stage (one stage per actor)\n");
  EXPECT_EQ(read_file(dir + "/s.json"), "");
}

TEST(SynthesizeCli, StageTimesOfTheWrongLengthOrNonPositiveNameTheField) {
  const CliResult wrong_length = run_cli("synthesize --pp 3 --microbatches 6 --stage-times " +
                                         data("schedules/synth_uneven_stage_times.json"));
  EXPECT_EQ(wrong_length.exit_code, 2);
  EXPECT_NE(wrong_length.err.find("stages"), std::string::npos) << wrong_length.err;
  const CliResult negative = run_cli("synthesize --pp 2 --microbatches 4 --t-f -1 --t-b 1");
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("--t-f"), std::string::npos) << negative.err;
}

TEST(SynthesizeCli, FlagsOfTheOtherModeAreRefused) {
  const CliResult r = run_cli(kSynthMeasured + "--memory-limit-bytes 100");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--memory-limit-bytes: a plan-mode flag"), std::string::npos) << r.err;
}

const std::string kSynthExplore =
    "explore --model gpt3-1.3b --cluster a100-80g --gpus 8 --global-batch 128 --tp 1 --pp 4 "
    "--recompute none --zero1 on --schedules 1f1b,zb-h1,zb-h2 --quiet ";

TEST(SynthesizeCli, ExploreSynthesizeAddsFasterSynthesizedConfigurationsAndWritesTheirPlan) {
  const std::string dir = make_temp_dir();
  const nlohmann::json plain = run_json(kSynthExplore);
  const nlohmann::json j = run_json(kSynthExplore + "--synthesize --plan " + dir + "/best.json");
  EXPECT_GE(j.at("synthesis").at("considered").get<int>(), 1);
  EXPECT_GE(j.at("synthesis").at("improved").get<int>(), 1);
  EXPECT_FALSE(plain.contains("synthesis"));
  // The best is now a synthesized schedule, faster than the best registry schedule.
  EXPECT_EQ(j.at("best").at("config").at("schedule"), "synthesized") << j.at("best");
  EXPECT_LT(j.at("best").at("step_time_s").get<double>(),
            plain.at("best").at("step_time_s").get<double>());
  const nlohmann::json v = run_json("validate " + dir + "/best.json");
  EXPECT_TRUE(v.at("ok").get<bool>());
  const CliResult run = run_cli("run " + dir +
                                "/best.json --check --json --hidden 8 --seq 4 --layers-per-stage 1 "
                                "--steps 2 --warmup 1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(nlohmann::json::parse(run.out).at("check_passed").get<bool>());
}

TEST(SynthesizeCli, ExploreSynthesizeFlagsNeedSynthesize) {
  const CliResult r = run_cli(kSynthExplore + "--synthesize-top 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--synthesize-top: needs --synthesize"), std::string::npos) << r.err;
}

// The Zero Bubble paper's 28.3B setting (tests/data/zero_bubble/paper_tables.json: Table 9's
// times, Table 5's ZB-2p bubble rate 0.0038) end to end: budget 2p reaches it, and the schedule
// written simulates to the reported bubble rate.
TEST(SynthesizeCli, ZeroBubblePaper28BSettingReachesThePapersZb2pBubbleRate) {
  const std::string dir = make_temp_dir();
  const std::string times =
      "--pp 32 --microbatches 96 --t-f 10.419 --t-b 10.207 --t-w 7.715 "
      "--t-comm 0.408 ";
  const nlohmann::json j = run_json("synthesize " + times +
                                    "--memory-limit-microbatches 64 --max-evaluations 3000 "
                                    "--quiet --out " +
                                    dir + "/zb.json");
  const double bubble = j.at("bubble_rate").get<double>();
  EXPECT_NEAR(bubble, 0.0038, 0.005);
  EXPECT_LE(bubble, 0.0038 + 2e-4);
  for (const auto& k : j.at("peak_stashed")) EXPECT_LE(k.get<int>(), 64);
  const nlohmann::json sim = run_json("simulate --schedule-file " + dir + "/zb.json " + times);
  EXPECT_NEAR(sim.at("bubble_rate").get<double>(), bubble, 1e-12);
}

TEST(SynthesizeCli, APlanItCannotTakeIsNamedByItsPath) {
  // The library's checks say "plan: ..." (sweep 5: the error named no file).
  const std::string dir = make_temp_dir();
  const CliResult plan = run_cli("simulate --model gpt3-1.3b --gpus 4 --pp 2 --dp 2 --virtual 2 "
                                 "--global-batch 8 --schedule interleaved --plan " + dir +
                                 "/pi.json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const CliResult r = run_cli("synthesize --plan " + dir + "/pi.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "jaxpp-sim synthesize: error: " + dir +
                       "/pi.json: synthesize needs one stage per actor (linear placement); the "
                       "plan has 4 stages on 2 actors\n");
}

}  // namespace
}  // namespace jaxpp::testing
