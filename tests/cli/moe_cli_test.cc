// Expert parallelism on the command line (issue 13, items 4, 5 and 8): --ep, --etp,
// --moe-imbalance and --moe-overlap in simulate, explore and plan.json; every bad input is one
// line naming the flag or field, exit code 2 and nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

const std::string kMixtral =
    "simulate --model mixtral-8x7b --cluster h100-sxm --gpus 32 --pp 4 --dp 8 --global-batch 64 "
    "--schedule 1f1b --no-memory-check ";

void expect_moe_bad_input(const CliResult& r, const std::string& command,
                          const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("jaxpp-sim " + command + ": error: ", 0), 0u) << r.err;
  for (const std::string& n : needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << n << " in " << r.err;
  EXPECT_EQ(r.out, "") << "bad input must not print a result";
}

TEST(MoeCli, EpOnADenseModelIsRejected) {
  expect_moe_bad_input(run_cli("simulate --model gpt3-1.3b --schedule 1f1b --gpus 4 --pp 2 --dp 2 "
                               "--global-batch 8 --ep 2"),
                       "simulate", {"--ep", "no routed experts"});
}

// Accepted and ignored before: --moe-overlap on a dense model (written into the plan), --etp
// equal to tp on a dense model (--etp 1 was refused), every MoE flag on a model whose MoE fields
// leave no layer with routed experts, and --moe-overlap in measured mode without all-to-all times.
TEST(MoeCli, MoeFlagsThatCannotApplyAreRefused) {
  const std::string dense =
      "simulate --model gpt3-1.3b --schedule 1f1b --gpus 4 --pp 2 --tp 2 --global-batch 8 ";
  expect_moe_bad_input(run_cli(dense + "--moe-overlap dualpipe"), "simulate",
                       {"--moe-overlap: overlaps the all-to-all of gpt3-1.3b, which has no "
                        "routed experts"});
  expect_moe_bad_input(run_cli(dense + "--etp 2"), "simulate",
                       {"--etp: expert tensor parallelism on gpt3-1.3b"});
  nlohmann::json hf = nlohmann::json::parse(
      read_file(std::string(JAXPP_TEST_DATA_DIR) + "/hf/deepseek-v3.json"));
  hf["first_k_dense_replace"] = hf["num_hidden_layers"];  // every layer dense
  const std::string all_dense = write_temp_file("config.json", hf.dump());
  expect_moe_bad_input(
      run_cli("simulate --model " + all_dense +
              " --schedule 1f1b --gpus 8 --pp 2 --dp 4 --global-batch 8 --ep 4 --no-memory-check"),
      "simulate", {"--ep: ep 4 on", "which has no routed experts"});
  expect_moe_bad_input(
      run_cli("simulate --model mixtral-8x7b --cluster h100-sxm --gpus 16 --pp 2 --dp 8 "
              "--global-batch 16 --schedule 1f1b --ep 8 --a2a-dtype fp8,bf16,fp8"),
      "simulate", {"--a2a-dtype: expected D or DISPATCH,COMBINE (at most two types), got "
                   "'fp8,bf16,fp8'"});
  expect_moe_bad_input(run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 "
                               "--moe-overlap none"),
                       "simulate", {"--moe-overlap: none overlaps the MoE all-to-all, but no "
                                    "stage has one"});
}

TEST(MoeCli, EpNotDividingTheExpertsIsRejected) {
  expect_moe_bad_input(
      run_cli("simulate --model mixtral-8x7b --cluster h100-sxm --gpus 24 --pp 4 --dp 6 "
              "--global-batch 48 --schedule 1f1b --ep 3"),
      "simulate", {"--ep", "does not divide the 8 routed experts"});
}

TEST(MoeCli, EpNotDividingTheDevicesOfAStageIsRejected) {
  expect_moe_bad_input(
      run_cli("simulate --model qwen3-30b-a3b --cluster h100-sxm --gpus 24 --pp 4 --dp 6 "
              "--global-batch 48 --schedule 1f1b --ep 4"),
      "simulate", {"--ep", "does not divide the tp·cp·dp = 6 devices"});
}

TEST(MoeCli, EtpTimesEpNotDividingTheDevicesIsRejected) {
  expect_moe_bad_input(run_cli(kMixtral + "--ep 8 --etp 2"), "simulate",
                       {"--etp", "ep·etp = 8·2", "tp·cp·dp = 8"});
}

TEST(MoeCli, ImbalanceBelowOneOrAboveEpIsRejected) {
  expect_moe_bad_input(run_cli(kMixtral + "--ep 8 --moe-imbalance 0.5"), "simulate",
                       {"--moe-imbalance", ">= 1"});
  expect_moe_bad_input(run_cli(kMixtral + "--ep 2 --moe-imbalance 3"), "simulate",
                       {"--moe-imbalance", "larger than ep"});
}

TEST(MoeCli, UnknownOverlapModeIsRejected) {
  expect_moe_bad_input(run_cli(kMixtral + "--ep 8 --moe-overlap always"), "simulate",
                       {"--moe-overlap", "auto, dualpipe, 1f1b or none", "always"});
}

TEST(MoeCli, ExpertFlagsInMeasuredModeAreRefused) {
  expect_moe_bad_input(
      run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 --ep 2"),
      "simulate", {"--ep", "measured mode"});
}

TEST(MoeCli, TopKLargerThanTheExpertsIsRejectedNamingTheFile) {
  const std::string file = write_temp_file(
      "topk.json", R"({"name": "m", "layers": 4, "hidden": 256, "heads": 4, "seq_len": 128,
                      "vocab": 1000, "experts": 4, "top_k": 6, "expert_ffn_hidden": 512})");
  expect_moe_bad_input(
      run_cli("simulate --model " + file + " --schedule 1f1b --gpus 2 --pp 2 --global-batch 4"),
      "simulate", {file, "top_k", "larger than experts"});
}

TEST(MoeCli, ExpertParallelismShrinksMemoryAndAddsAllToAll) {
  const nlohmann::json one = run_json(kMixtral);
  const nlohmann::json eight = run_json(kMixtral + "--ep 8");
  EXPECT_FALSE(one.contains("alltoall_s"));
  ASSERT_TRUE(eight.contains("alltoall_s"));
  EXPECT_GT(eight["alltoall_s"].get<double>(), 0);
  // The 8 experts' weights, grads and optimizer state are spread over 8 devices.
  EXPECT_LT(eight["actors"][1]["static_bytes"].get<double>(),
            0.3 * one["actors"][1]["static_bytes"].get<double>());
  EXPECT_EQ(eight["config"]["ep"], 8);
}

TEST(MoeCli, TheTimelineShowsTheAllToAllAsItsOwnStream) {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(kMixtral + "--ep 8 --trace " + dir + "/t.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir + "/t.json"));
  int a2a = 0;
  for (const auto& e : trace["events"])
    if (e["stream"] == "alltoall") ++a2a;
  // One per F and B of every MoE stage: 4 actors x 8 microbatches x 2.
  EXPECT_EQ(a2a, 4 * 8 * 2);
  // The trace reads back (export accepts it) and the Perfetto file names the stream.
  const CliResult p =
      run_cli("export --trace " + dir + "/t.json --format perfetto -o " + dir + "/p.json");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const std::string perfetto = read_file(dir + "/p.json");
  EXPECT_NE(perfetto.find("\"alltoall\""), std::string::npos);
  EXPECT_NE(perfetto.find("a2a F0@s1"), std::string::npos);
}

TEST(MoeCli, DeepEpAndContiguousRoutingShrinkTheAllToAllAndReachThePlan) {
  const nlohmann::json alltoall = run_json(kMixtral + "--ep 4");
  const nlohmann::json deepep = run_json(kMixtral + "--ep 4 --moe-dispatcher deepep");
  const nlohmann::json gate =
      run_json(kMixtral + "--ep 4 --moe-dispatcher deepep --moe-routing contiguous");
  // Top 2 of 8 experts on 4 ranks of 2: 2 copies (alltoall), 4·(1 − C(6,2)/C(8,2)) = 13/7
  // ranks (deepep), 1 rank (contiguous: experts 2t and 2t+1 share a rank).
  const double a = alltoall["alltoall_s"].get<double>();
  const double d = deepep["alltoall_s"].get<double>();
  const double g = gate["alltoall_s"].get<double>();
  // Bytes in those ratios; each all-to-all's fixed NVLink latency lifts them a little.
  EXPECT_NEAR(d / a, 13.0 / 14, 0.01);
  EXPECT_GT(g / d, 7.0 / 13 - 0.001);
  EXPECT_LT(g / d, 7.0 / 13 + 0.04);
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(kMixtral + "--ep 4 --moe-dispatcher deepep --moe-routing "
                                         "contiguous --plan " + dir + "/p.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/p.json"));
  EXPECT_EQ(plan["config"]["moe_dispatcher"], "deepep");
  EXPECT_EQ(plan["config"]["moe_routing"], "contiguous");
  EXPECT_EQ(run_cli("validate " + dir + "/p.json").exit_code, 0);
}

// DeepSeek's group-limited routing on the command line: a device limit of 1 puts both of a
// token's experts on one of the 4 ranks (R = 1, as the contiguous gate), the plan keeps it, and
// the flags are refused on a dense model and in measured mode.
TEST(MoeCli, RoutingLimitsShrinkTheAllToAllAndReachThePlan) {
  const nlohmann::json deepep = run_json(kMixtral + "--ep 4 --moe-dispatcher deepep");
  const nlohmann::json limited =
      run_json(kMixtral + "--ep 4 --moe-dispatcher deepep --moe-device-limit 1");
  const double ratio = limited["alltoall_s"].get<double>() / deepep["alltoall_s"].get<double>();
  EXPECT_GT(ratio, 7.0 / 13 - 0.001);
  EXPECT_LT(ratio, 7.0 / 13 + 0.04);
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(kMixtral + "--ep 4 --moe-dispatcher deepep --moe-device-limit 1 "
                                         "--plan " + dir + "/p.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/p.json"));
  EXPECT_EQ(plan["config"]["moe_device_limit"], 1);
  EXPECT_EQ(run_cli("validate " + dir + "/p.json").exit_code, 0);
  expect_moe_bad_input(run_cli("simulate --model gpt3-1.3b --schedule 1f1b --gpus 4 --pp 2 --dp 2 "
                               "--global-batch 8 --moe-node-limit 2"),
                       "simulate", {"--moe-node-limit", "no routed experts"});
  expect_moe_bad_input(run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 "
                               "--moe-node-limit 2"),
                       "simulate", {"--moe-node-limit", "model-mode flag"});
}

TEST(MoeCli, ExploreAppliesTheDispatcherAndRoutingToEveryConfiguration) {
  const std::string base =
      "explore --model mixtral-8x7b --cluster h100-sxm --gpus 16 --global-batch 32 --pp 2 --tp 1 "
      "--ep 4 --schedules 1f1b --microbatch-sizes 1 --zero1 on --format json --top 1 ";
  const CliResult r = run_cli(base + "--moe-dispatcher deepep --moe-routing contiguous");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["options"]["moe_dispatcher"], "deepep");
  EXPECT_EQ(j["options"]["moe_routing"], "contiguous");
  ASSERT_FALSE(j["top"].empty());
  EXPECT_EQ(j["top"][0]["config"]["moe_dispatcher"], "deepep");
  EXPECT_EQ(j["top"][0]["config"]["moe_routing"], "contiguous");
  const CliResult plain = run_cli(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const nlohmann::json p = nlohmann::json::parse(plain.out);
  EXPECT_EQ(p["options"]["moe_dispatcher"], "alltoall");
  EXPECT_LT(j["top"][0]["step_time_s"].get<double>(), p["top"][0]["step_time_s"].get<double>());
}

TEST(MoeCli, DispatcherFlagsInMeasuredModeAreRefused) {
  expect_moe_bad_input(run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 "
                               "--moe-dispatcher deepep"),
                       "simulate", {"--moe-dispatcher", "model-mode flag"});
}

TEST(MoeCli, PlanJsonKeepsTheExpertFieldsAndValidatesThem) {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(kMixtral + "--ep 4 --moe-overlap none --plan " + dir + "/p.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/p.json"));
  EXPECT_EQ(plan["config"]["ep"], 4);
  EXPECT_EQ(plan["config"]["moe_overlap"], "none");
  const CliResult ok = run_cli("validate " + dir + "/p.json");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  plan["config"]["ep"] = 3;
  const std::string bad = write_temp_file("bad_ep_plan.json", plan.dump());
  const CliResult v = run_cli("validate " + bad);
  EXPECT_EQ(v.exit_code, 2) << v.err;
  EXPECT_NE(v.err.find("field 'config.ep'"), std::string::npos) << v.err;
  EXPECT_NE(v.err.find("does not divide the 8 routed experts"), std::string::npos) << v.err;
}

TEST(MoeCli, APlanPairedForOneFOneBOverlapValidatesAndRunsTheCheck) {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(
      "simulate --model mixtral-8x7b --cluster h100-sxm --gpus 4 --pp 2 --dp 2 --ep 2 "
      "--global-batch 8 --schedule 1f1b --moe-overlap 1f1b --no-memory-check --plan " +
      dir + "/p.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/p.json"));
  // The last actor runs F0 [B0+F1] [B1+F2] [B2+F3] B3: three paired groups.
  int pairs = 0;
  for (const auto& ins : plan["program"]["actors"][1])
    if (ins["op"] == "compute" && ins["tasks"].get<std::string>().find('+') != std::string::npos)
      ++pairs;
  EXPECT_EQ(pairs, 3);
  const CliResult v = run_cli("validate " + dir + "/p.json");
  EXPECT_EQ(v.exit_code, 0) << v.err;
  const CliResult check = run_cli("run " + dir + "/p.json --check");
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("PASS"), std::string::npos) << check.out;
}

TEST(MoeCli, ExploreRefusesEpOnADenseModel) {
  expect_moe_bad_input(run_cli("explore --model gpt3-1.3b --gpus 8 --global-batch 16 --ep 2"),
                       "explore", {"--ep", "no routed experts"});
}

TEST(MoeCli, ExploreSearchesEpAndShowsItsColumns) {
  const std::string args =
      "explore --model mixtral-8x7b --cluster h100-sxm --gpus 32 --global-batch 64 "
      "--schedules 1f1b,dualpipev --recompute full --microbatch-sizes 1 --threads 2 --top 3 ";
  const CliResult r = run_cli(args + "--bound-prune");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("   ep etp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" bound"), std::string::npos) << r.out;
  const nlohmann::json full = run_json(args);
  const nlohmann::json bound = run_json(args + "--bound-prune");
  EXPECT_EQ(full["best"], bound["best"]);
  // The --top 3 list and the Pareto front are the full search's (the ranks of front entries
  // after the top 3 count only simulated configurations).
  EXPECT_EQ(full["top"], bound["top"]);
  ASSERT_EQ(full["pareto"].size(), bound["pareto"].size());
  for (size_t i = 0; i < full["pareto"].size(); ++i) {
    EXPECT_EQ(full["pareto"][i]["id"], bound["pareto"][i]["id"]);
    EXPECT_EQ(full["pareto"][i]["step_time_s"], bound["pareto"][i]["step_time_s"]);
  }
  EXPECT_LT(bound["evaluated"].get<int>(), full["evaluated"].get<int>());
  EXPECT_GT(bound["pruned"]["bound"].get<int>(), 0);
}

// ---- Measured mode: the all-to-all given per stage -------------------------------------------

const std::string kMeasuredMoe =
    "simulate --schedule dualpipev --pp 4 --microbatches 16 --t-f 1 --t-b 1 --t-w 1 ";

TEST(MoeCli, MeasuredModeModelsTheAllToAllAndItsOverlap) {
  const nlohmann::json plain = run_json(kMeasuredMoe);
  const nlohmann::json overlapped = run_json(kMeasuredMoe + "--t-a2a-f 0.8 --t-a2a-b 0.8");
  const nlohmann::json serial =
      run_json(kMeasuredMoe + "--t-a2a-f 0.8 --t-a2a-b 0.8 --moe-overlap none");
  EXPECT_FALSE(plain.contains("alltoall_s"));
  // 8 stages x 16 microbatches, 0.8 ms in every F and every B.
  EXPECT_NEAR(serial["alltoall_s"].get<double>(), 8 * 16 * 1.6e-3, 1e-9);
  EXPECT_DOUBLE_EQ(serial["alltoall_exposed_s"].get<double>(), serial["alltoall_s"].get<double>());
  EXPECT_LT(overlapped["alltoall_exposed_s"].get<double>(),
            0.5 * overlapped["alltoall_s"].get<double>());
  EXPECT_LT(overlapped["step_time_s"].get<double>(), serial["step_time_s"].get<double>());
  EXPECT_GT(overlapped["step_time_s"].get<double>(), plain["step_time_s"].get<double>());
  EXPECT_EQ(serial["moe_overlap"], "none");
}

TEST(MoeCli, MeasuredAllToAllFromAStageTimesFileMatchesTheFlags) {
  const std::string file = write_temp_file(
      "a2a_times.json",
      R"({"t_f_ms": 1, "t_b_ms": 1, "t_w_ms": 1, "t_a2a_f_ms": 0.8, "t_a2a_b_ms": 0.4})");
  const nlohmann::json from_file = run_json(
      "simulate --schedule 1f1b --pp 4 --microbatches 8 --moe-overlap 1f1b --stage-times " + file);
  const nlohmann::json from_flags =
      run_json("simulate --schedule 1f1b --pp 4 --microbatches 8 --moe-overlap 1f1b --t-f 1 "
               "--t-b 1 --t-w 1 --t-a2a-f 0.8 --t-a2a-b 0.4");
  EXPECT_DOUBLE_EQ(from_file["step_time_s"].get<double>(), from_flags["step_time_s"].get<double>());
  EXPECT_NEAR(from_file["alltoall_s"].get<double>(), 4 * 8 * 1.2e-3, 1e-9);
  // 1f1b pairs Std1F1B's steady-state B with the next F: part of the all-to-all hides.
  EXPECT_LT(from_file["alltoall_exposed_s"].get<double>(),
            from_file["alltoall_s"].get<double>());
}

TEST(MoeCli, BadMeasuredAllToAllTimesAreRefused) {
  expect_moe_bad_input(run_cli(kMeasuredMoe + "--t-a2a-f -1"), "simulate",
                       {"--t-a2a-f", ">= 0"});
  const std::string file = write_temp_file("a2a_uniform.json", R"({"t_f_ms": 1, "t_b_ms": 1})");
  expect_moe_bad_input(
      run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times " + file +
              " --t-a2a-b 1"),
      "simulate", {"--t-a2a-b", "not both"});
  expect_moe_bad_input(run_cli(kMeasuredMoe + "--t-a2a-f 1 --moe-overlap always"), "simulate",
                       {"--moe-overlap", "always"});
  expect_moe_bad_input(run_cli(kMixtral + "--ep 8 --t-a2a-f 1"), "simulate",
                       {"--t-a2a-f", "measured-mode flag"});
  const std::string bad =
      write_temp_file("a2a_bad.json", R"({"t_f_ms": 1, "t_b_ms": 1, "t_a2a_b_ms": "x"})");
  expect_moe_bad_input(
      run_cli("simulate --schedule 1f1b --pp 2 --microbatches 4 --stage-times " + bad),
      "simulate", {"t_a2a_b_ms"});
}

// ---- The all-to-all payload type -------------------------------------------------------------

const std::string kDeepSeek =
    "simulate --model deepseek-v3 --cluster h100-sxm --gpus 512 --pp 8 --dp 64 --ep 32 "
    "--global-batch 1024 --schedule 1f1b --moe-overlap none --no-memory-check ";

TEST(MoeCli, DeepSeekV3DispatchesInFp8AndTheFlagOverridesIt) {
  const std::string dir = make_temp_dir();
  const nlohmann::json paper = run_json(kDeepSeek + "--plan " + dir + "/p.json");
  const nlohmann::json bf16 = run_json(kDeepSeek + "--a2a-dtype bf16");
  const nlohmann::json fp8 = run_json(kDeepSeek + "--a2a-dtype fp8");
  // Bytes per element: fp8,bf16 = 1.03125 + 2, bf16 = 2 + 2, fp8 = 1.03125 + 1.03125.
  const double a_paper = paper["alltoall_s"].get<double>();
  const double a_bf16 = bf16["alltoall_s"].get<double>();
  const double a_fp8 = fp8["alltoall_s"].get<double>();
  EXPECT_LT(a_fp8, a_paper);
  EXPECT_LT(a_paper, a_bf16);
  EXPECT_NEAR(a_paper / a_bf16, (1.03125 + 2) / 4, 0.03) << "time follows the bytes";
  EXPECT_LT(paper["step_time_s"].get<double>(), bf16["step_time_s"].get<double>());
  // plan.json keeps the model's payload types.
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/p.json"));
  EXPECT_EQ(plan["model"]["a2a_dispatch_dtype"], "fp8");
  EXPECT_EQ(plan["model"]["a2a_combine_dtype"], "bf16");
}

TEST(MoeCli, BadAllToAllDtypesAreRefused) {
  expect_moe_bad_input(run_cli(kMixtral + "--ep 8 --a2a-dtype fp4"), "simulate",
                       {"--a2a-dtype", "fp4"});
  expect_moe_bad_input(
      run_cli("simulate --model gpt3-1.3b --schedule 1f1b --gpus 4 --pp 2 --dp 2 "
              "--global-batch 8 --a2a-dtype fp8"),
      "simulate", {"--a2a-dtype", "no routed experts"});
  expect_moe_bad_input(run_cli(kMeasuredMoe + "--a2a-dtype fp8"), "simulate",
                       {"--a2a-dtype", "measured mode"});
  expect_moe_bad_input(run_cli("explore --model mixtral-8x7b --cluster h100-sxm --gpus 16 "
                               "--global-batch 32 --a2a-dtype e5m2"),
                       "explore", {"--a2a-dtype", "e5m2"});
}

}  // namespace
}  // namespace jaxpp::testing
