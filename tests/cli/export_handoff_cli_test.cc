// jaxpp-sim export --format megatron|torchtitan|jaxpp: files written through the CLI, the
// torchtitan schedule CSV validates and equals the plan's order, options a target cannot express
// exit 2 naming them and write nothing.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

std::string handoff_plan(const std::string& dir, const std::string& flags) {
  const std::string path = dir + "/plan.json";
  const CliResult r = run_cli("simulate --model gpt3-1.3b --cluster a100-80g --global-batch 64 " +
                              flags + " --plan " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

TEST(ExportHandoffCli, MegatronArgumentsAreWrittenForA1F1BPlan) {
  const std::string dir = make_temp_dir();
  const std::string plan =
      handoff_plan(dir, "--gpus 16 --pp 4 --tp 2 --dp 2 --schedule 1f1b --sequence-parallel");
  const nlohmann::json j =
      run_json("export --plan " + plan + " --format megatron -o " + dir + "/args.txt");
  EXPECT_EQ(j.at("schedule"), "Std1F1B");
  const std::string args = read_file(dir + "/args.txt");
  EXPECT_NE(args.find("--tensor-model-parallel-size 2 \\\n"), std::string::npos) << args;
  EXPECT_NE(args.find("--pipeline-model-parallel-size 4 \\\n"), std::string::npos) << args;
  EXPECT_NE(args.find("--sequence-parallel"), std::string::npos) << args;
}

TEST(ExportHandoffCli, TorchtitanWritesTheTomlAndTheScheduleCsvItLoads) {
  const std::string dir = make_temp_dir();
  const std::string plan = handoff_plan(dir, "--gpus 8 --pp 4 --dp 2 --schedule zb-h1");
  const CliResult r = run_cli("export --plan " + plan + " --format torchtitan -o " + dir +
                              "/job.toml --csv " + dir + "/zb.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(
      read_file(dir + "/job.toml").find("pipeline_parallel_schedule_csv = \"" + dir + "/zb.csv\""),
      std::string::npos);
  const CliResult v = run_cli("validate " + dir + "/zb.csv");
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  // The CSV is the plan's own order: simulating it gives the plan's step.
  const nlohmann::json from_plan = run_json(
      "simulate --model gpt3-1.3b --cluster a100-80g "
      "--global-batch 64 --gpus 8 --pp 4 --dp 2 --schedule zb-h1");
  const nlohmann::json from_csv = run_json(
      "simulate --model gpt3-1.3b --cluster a100-80g "
      "--global-batch 64 --gpus 8 --pp 4 --dp 2 --schedule-file " +
      dir + "/zb.csv");
  EXPECT_NEAR(from_csv.at("step_time_s").get<double>(), from_plan.at("step_time_s").get<double>(),
              1e-9 * from_plan.at("step_time_s").get<double>());
}

TEST(ExportHandoffCli, JaxppSnippetIsWritten) {
  const std::string dir = make_temp_dir();
  const std::string plan = handoff_plan(dir, "--gpus 8 --pp 4 --dp 2 --schedule zb-h1");
  ASSERT_EQ(run_cli("export --plan " + plan + " --format jaxpp -o " + dir + "/pp.py").exit_code, 0);
  EXPECT_NE(read_file(dir + "/pp.py").find("schedule = jaxpp.ZeroBubble(num_stages=NUM_STAGES)"),
            std::string::npos);
}

TEST(ExportHandoffCli, AScheduleMegatronCannotRunExitsTwoNamingItAndWritesNothing) {
  const std::string dir = make_temp_dir();
  const std::string plan = handoff_plan(dir, "--gpus 8 --pp 4 --dp 2 --schedule zb-h1");
  const CliResult r = run_cli("export --plan " + plan + " --format megatron -o " + dir + "/a.txt");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--format megatron: schedule ZeroBubble cannot be expressed"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read_file(dir + "/a.txt"), "");
}

TEST(ExportHandoffCli, TorchtitanNeedsCsvAndOtherFormatsRefuseIt) {
  const std::string dir = make_temp_dir();
  const std::string plan = handoff_plan(dir, "--gpus 8 --pp 4 --dp 2 --schedule zb-h1");
  const CliResult no_csv =
      run_cli("export --plan " + plan + " --format torchtitan -o " + dir + "/j.toml");
  EXPECT_EQ(no_csv.exit_code, 2);
  EXPECT_NE(no_csv.err.find("--csv: required with --format torchtitan"), std::string::npos);
  const CliResult csv = run_cli("export --plan " + plan + " --format jaxpp -o " + dir +
                                "/p.py --csv " + dir + "/s.csv");
  EXPECT_EQ(csv.exit_code, 2);
  EXPECT_NE(csv.err.find("--csv: only --format torchtitan"), std::string::npos) << csv.err;
}

}  // namespace
}  // namespace jaxpp::testing

namespace jaxpp::testing {
namespace {

// An MXFP8 model end to end: simulate on B200 prices its casts below current scaling's (one
// kernel, no amax pass), the plan carries the scaling, and export writes Megatron-LM's MXFP8
// flags; torchtitan refuses it and writes nothing; on H100 simulate refuses the model naming the
// field and the cluster.
TEST(ExportHandoffCli, Mxfp8ModelSimulatesOnBlackwellAndExportsItsRecipe) {
  const std::string dir = make_temp_dir();
  const std::string shape =
      R"("layers": 8, "hidden": 2048, "heads": 16, "seq_len": 2048, "vocab": 51200, "dtype": "fp8")";
  const std::string mx = write_temp_file("mx.json", R"({"name": "mx", )" + shape +
                                                        R"(, "fp8_scaling": "mxfp8"})");
  const std::string cs = write_temp_file("cs.json", R"({"name": "cs", )" + shape + "}");
  const std::string sim = " --cluster b200 --gpus 4 --pp 2 --dp 2 --global-batch 16 "
                          "--schedule 1f1b --breakdown";
  const nlohmann::json m = run_json("simulate --model " + mx + sim + " --plan " + dir + "/p.json");
  const nlohmann::json c = run_json("simulate --model " + cs + sim);
  EXPECT_LT(m["breakdown"][0]["elementwise_s"].get<double>(),
            c["breakdown"][0]["elementwise_s"].get<double>());
  EXPECT_NE(m["step_time_s"].get<double>(), c["step_time_s"].get<double>());
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/p.json"));
  EXPECT_EQ(plan["model"].value("fp8_scaling", ""), "mxfp8") << plan["model"].dump();

  run_json("export --plan " + dir + "/p.json --format megatron -o " + dir + "/args.txt");
  const std::string args = read_file(dir + "/args.txt");
  EXPECT_NE(args.find("--fp8-format e4m3 \\\n--fp8-recipe mxfp8 \\\n--fp8-param-gather"),
            std::string::npos)
      << args;
  const CliResult tt = run_cli("export --plan " + dir + "/p.json --format torchtitan -o " + dir +
                               "/job.toml --csv " + dir + "/s.csv");
  EXPECT_EQ(tt.exit_code, 2) << tt.err;
  EXPECT_NE(tt.err.find("--format torchtitan: MXFP8"), std::string::npos) << tt.err;
  EXPECT_TRUE(read_file(dir + "/job.toml").empty()) << "nothing written";

  const CliResult h100 = run_cli("simulate --model " + mx +
                                 " --cluster h100-sxm --gpus 4 --pp 2 --dp 2 --global-batch 16 "
                                 "--schedule 1f1b");
  EXPECT_EQ(h100.exit_code, 2);
  EXPECT_NE(h100.err.find("field 'fp8_scaling': mxfp8 needs block-scaled FP8 tensor cores"),
            std::string::npos)
      << h100.err;
  EXPECT_NE(h100.err.find("cluster 'h100-sxm'"), std::string::npos) << h100.err;
}

// A sharded plan from simulate hands off end to end: parameter sharding is torchtitan's FSDP2
// (shard degree dp = 2, replicate 1) and Megatron-FSDP's optim_grads_params; gradient sharding
// alone is Megatron-FSDP's optim_grads and has no torchtitan form (exit 2, nothing written).
TEST(ExportHandoffCli, ShardedPlansGoToFsdp) {
  const std::string dir = make_temp_dir();
  const std::string base = "--gpus 8 --pp 4 --dp 2 --schedule 1f1b --zero1 ";
  std::string plan = handoff_plan(dir, base + "--shard-params");
  CliResult r = run_cli("export --plan " + plan + " --format torchtitan -o " + dir +
                        "/job.toml --csv " + dir + "/s.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string toml = read_file(dir + "/job.toml");
  EXPECT_NE(toml.find("data_parallel_replicate_degree = 1\ndata_parallel_shard_degree = 2\n"
                      "fsdp_reshard_after_forward = \"always\"\n"),
            std::string::npos)
      << toml;
  ASSERT_EQ(run_cli("export --plan " + plan + " --format megatron -o " + dir + "/a.txt").exit_code,
            0);
  EXPECT_NE(read_file(dir + "/a.txt").find("--data-parallel-sharding-strategy optim_grads_params"),
            std::string::npos);
  plan = handoff_plan(dir, base + "--shard-grads");
  ASSERT_EQ(run_cli("export --plan " + plan + " --format megatron -o " + dir + "/b.txt").exit_code,
            0);
  const std::string args = read_file(dir + "/b.txt");
  EXPECT_NE(args.find("--use-megatron-fsdp \\\n--data-parallel-sharding-strategy optim_grads \\\n"),
            std::string::npos)
      << args;
  r = run_cli("export --plan " + plan + " --format torchtitan -o " + dir + "/z2.toml --csv " + dir +
              "/z2.csv");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--format torchtitan: gradient sharding (ZeRO-2) without parameter "
                       "sharding"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read_file(dir + "/z2.toml"), "");
}

}  // namespace
}  // namespace jaxpp::testing
