// jaxpp-sim validate-model through the binary, on the fixture corpus tests/data/corpus/small.json
// (six rows: two fit, four test; one marked expected_failure with an absurd measurement, one the
// simulator rejects): the table, the --json fields, --split, --rows-on, --cluster overrides,
// --out, --strict, the built-in corpus, and corpus errors (one line, exit 2, nothing written);
// the MoE fields of the report, and scripts/fit_costmodel.py keeping MoE rows apart.
// Predictions move with the cost model, so no test pins a predicted number.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixture = "validate-model --corpus " + data("corpus/small.json") + " ";


std::vector<std::string> ids(const json& report) {
  std::vector<std::string> out;
  for (const json& row : report["rows"]) out.push_back(row["id"]);
  return out;
}

const json* row_of(const json& report, const std::string& id) {
  for (const json& row : report["rows"])
    if (row["id"] == id) return &row;
  return nullptr;
}

// The fixture as JSON, its file-model row naming a preset so that a copy loads from anywhere.
json fixture() {
  json doc = json::parse(read_file(data("corpus/small.json")));
  doc["rows"][2]["model"] = "gpt3-1.3b";
  return doc;
}

void expect_bad_input(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("jaxpp-sim validate-model: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << needle << " in " << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(ValidateModelCli, TablePrintsEveryRowAndTheSummaries) {
  const CliResult r = run_cli(kFixture);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle :
       {"id",         "split",           "gpu",        "config",          "measured",
        "predicted",  "error",           "status",     "a-1.3b-pp2",      "a-1.3b-tp2",
        "b-tiny",     "b-1.3b-mfu",      "a-expected", "a-bad-tp",        "expected-fail",
        "120.0 TF/s", "40.0% MFU",       "50 tok/s",   "fit:  2 rows",    "test: 4 rows",
        "by source:", "paper-a: 4 rows", "by gpu:",    "h100-sxm: 2 rows"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("error in row 'a-bad-tp': configuration: tp 3 does not divide the 16 "
                       "attention heads of gpt3-1.3b"),
            std::string::npos)
      << r.out;
}

TEST(ValidateModelCli, JsonHasEveryRowWithItsPredictionAndError) {
  const json j = run_json(kFixture);
  EXPECT_EQ(j["corpus"], data("corpus/small.json"));
  EXPECT_DOUBLE_EQ(j["band"].get<double>(), 0.10);
  EXPECT_TRUE(j["cluster_override"].is_null());
  ASSERT_EQ(j["rows"].size(), 6u);
  for (const json& row : j["rows"]) {
    SCOPED_TRACE(row["id"].get<std::string>());
    for (const char* key :
         {"id", "source", "where", "split", "gpu", "cluster", "model", "config", "measured",
          "flops_convention", "measured_step_time_s", "status", "expected_failure"}) {
      EXPECT_TRUE(row.contains(key)) << key;
    }
    if (row["status"] == "error") {
      EXPECT_TRUE(row.contains("message"));
      continue;
    }
    for (const char* key :
         {"predicted_step_time_s", "error", "in_band", "predicted", "predicted_tflops_per_gpu",
          "predicted_mfu", "peak_memory_bytes", "device_memory_bytes", "fits"}) {
      EXPECT_TRUE(row.contains(key)) << key;
    }
    const double measured = row["measured_step_time_s"], predicted = row["predicted_step_time_s"];
    EXPECT_NEAR(row["error"].get<double>(), predicted / measured - 1, 1e-12);
    EXPECT_GT(row["predicted_tflops_per_gpu"].get<double>(), 0);
  }
  EXPECT_EQ((*row_of(j, "a-expected"))["status"], "expected-fail");
  EXPECT_EQ((*row_of(j, "a-expected"))["expected_failure"], "the source's run was throttled");
  EXPECT_EQ((*row_of(j, "a-bad-tp"))["status"], "error");
  EXPECT_EQ((*row_of(j, "b-1.3b-mfu"))["config"]["seq_len"], 1024);
  EXPECT_EQ((*row_of(j, "b-1.3b-mfu"))["measured"]["mfu"], 0.4);
  const json& test = j["summaries"]["test"];
  EXPECT_EQ(test["rows"], 4);
  EXPECT_EQ(test["scored"], 2);
  EXPECT_EQ(test["expected_failures"], 1);
  EXPECT_EQ(test["errors"], 1);
  EXPECT_EQ(j["summaries"]["fit"]["rows"], 2);
  EXPECT_EQ(j["summaries"]["by_source"]["paper-b"]["rows"], 2);
  EXPECT_EQ(j["summaries"]["by_cluster"]["a100-80g"]["rows"], 4);
}

TEST(ValidateModelCli, SummaryMeanAndMaxAreOverTheScoredRows) {
  const json j = run_json(kFixture + "--split fit");
  double sum = 0, max = 0;
  for (const json& row : j["rows"]) {
    sum += std::fabs(row["error"].get<double>());
    max = std::max(max, std::fabs(row["error"].get<double>()));
  }
  EXPECT_NEAR(j["summaries"]["fit"]["mean_abs_error"].get<double>(), sum / 2, 1e-12);
  EXPECT_NEAR(j["summaries"]["fit"]["max_abs_error"].get<double>(), max, 1e-12);
}

TEST(ValidateModelCli, SplitKeepsOnlyThatSplit) {
  EXPECT_EQ(ids(run_json(kFixture + "--split fit")),
            (std::vector<std::string>{"a-1.3b-pp2", "b-1.3b-mfu"}));
  EXPECT_EQ(ids(run_json(kFixture + "--split test")),
            (std::vector<std::string>{"a-1.3b-tp2", "b-tiny", "a-expected", "a-bad-tp"}));
}

TEST(ValidateModelCli, RowsOnKeepsTheRowsOfThatGpu) {
  EXPECT_EQ(ids(run_json(kFixture + "--rows-on h100-sxm")),
            (std::vector<std::string>{"b-tiny", "b-1.3b-mfu"}));
}

TEST(ValidateModelCli, ClusterOverrideChangesPredictionsButNotMeasurements) {
  const json base = run_json(kFixture + "--rows-on a100-80g --split fit");
  const json h100 = run_json(kFixture + "--rows-on a100-80g --split fit --cluster h100-sxm");
  const std::string slow_file =
      write_temp_file("slow.json", R"({"name": "slow-a100", "base": "a100-80g",
                                       "gemm_efficiency": {"max": 0.1}})");
  const json slow = run_json(kFixture + "--rows-on a100-80g --split fit --cluster " + slow_file);
  EXPECT_EQ(h100["cluster_override"], "h100-sxm");
  EXPECT_EQ(slow["cluster_override"], "slow-a100");
  const json& b = base["rows"][0];
  const json& h = h100["rows"][0];
  const json& s = slow["rows"][0];
  EXPECT_EQ(h["cluster"], "h100-sxm");
  EXPECT_EQ(h["gpu"], "a100-80g") << "the row keeps its own GPU";
  EXPECT_EQ(h["measured_step_time_s"], b["measured_step_time_s"]);
  EXPECT_LT(h["predicted_step_time_s"].get<double>(), b["predicted_step_time_s"].get<double>());
  EXPECT_GT(s["predicted_step_time_s"].get<double>(), b["predicted_step_time_s"].get<double>());
}

TEST(ValidateModelCli, CsvCorpusGivesTheSameReportAsJson) {
  json a = run_json(kFixture);
  json b = run_json("validate-model --corpus " + data("corpus/small.csv"));
  a.erase("corpus");
  b.erase("corpus");
  EXPECT_EQ(a, b);
}

TEST(ValidateModelCli, OutWritesTheJsonReport) {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(kFixture + "--out " + dir + "/report.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + dir + "/report.json"), std::string::npos);
  EXPECT_EQ(json::parse(read_file(dir + "/report.json")), run_json(kFixture));
  fs::remove_all(dir);
}

TEST(ValidateModelCli, StrictFailsOnlyWhenATestRowIsOutOfBandOrRejected) {
  // a-bad-tp (a test row the simulator rejects, not an expected failure) fails --strict.
  EXPECT_EQ(run_cli(kFixture + "--band 1e9 --strict").exit_code, 1);
  EXPECT_EQ(run_cli(kFixture + "--band 1e9").exit_code, 0) << "without --strict, 0 whenever it ran";
  // Without a-bad-tp, a fit row far out of band (a measured step of 1 µs, the shortest a row may
  // give: an error of about 1e5 against a band of 1e3, which every other row is within) does not
  // fail it: --strict looks at test rows only.
  json doc = fixture();
  doc["rows"].erase(5);
  doc["rows"][0]["measured"] = {{"step_time_s", 1e-6}};
  const std::string fit_out = write_temp_file("fit_out_of_band.json", doc.dump());
  const json j = run_json("validate-model --corpus " + fit_out + " --band 1e3");
  ASSERT_NE(row_of(j, "a-1.3b-pp2"), nullptr);
  EXPECT_EQ((*row_of(j, "a-1.3b-pp2"))["status"], "fail");
  EXPECT_EQ(run_cli("validate-model --corpus " + fit_out + " --band 1e3 --strict").exit_code, 0);
}

// --strict with --split fit could never fail: refused rather than ignored.
TEST(ValidateModelCli, StrictWithOnlyFitRowsIsRefused) {
  expect_bad_input(run_cli(kFixture + "--split fit --strict"),
                   "--strict: judges the test rows, but --split fit keeps none");
  EXPECT_EQ(run_cli(kFixture + "--split test --band 1e9 --strict").exit_code, 1);
}

TEST(ValidateModelCli, BuiltInCorpusIsUsedByDefault) {
  const json j = run_json("validate-model --split fit");
  EXPECT_EQ(j["corpus"], "corpus.json (built in)");
  EXPECT_GT(j["rows"].size(), 0u);
  for (const json& row : j["rows"]) EXPECT_EQ(row["split"], "fit");
}

// ---- MoE rows. ------------------------------------------------------------------------------

// The fixture plus two expert-parallel rows on H100 (qwen3-30b-a3b, 128 routed experts): a fit
// row with ep 8 and a test row with ep 4.
std::string fixture_with_moe_row() {
  json doc = fixture();
  doc["rows"].push_back(json::parse(R"({"id": "m-30b-ep8", "source": "paper-b",
      "where": "Table 9", "split": "fit", "cluster": "h100-sxm", "model": "qwen3-30b-a3b",
      "gpus": 8, "tp": 1, "pp": 1, "dp": 8, "ep": 8, "etp": 1, "moe_overlap": "none",
      "global_batch": 8, "seq_len": 1024, "schedule": "1f1b",
      "measured": {"step_time_s": 1}, "flops_convention": "none"})"));
  json test_row = doc["rows"].back();
  test_row["id"] = "m-30b-ep4";
  test_row["split"] = "test";
  test_row["ep"] = 4;
  doc["rows"].push_back(test_row);
  return write_temp_file("moe.json", doc.dump(1));
}

TEST(ValidateModelCli, JsonRowsSayWhetherTheModelHasExpertsAndTheirParallelism) {
  const json j = run_json("validate-model --corpus " + fixture_with_moe_row());
  const json* moe = row_of(j, "m-30b-ep8");
  ASSERT_NE(moe, nullptr);
  EXPECT_EQ((*moe)["moe"], true);
  EXPECT_EQ((*moe)["config"]["ep"], 8);
  EXPECT_EQ((*moe)["config"]["etp"], 1);
  EXPECT_EQ((*moe)["config"]["moe_overlap"], "none");
  EXPECT_EQ((*moe)["status"], "fail");  // a made-up 1 s step
  const json* dense = row_of(j, "b-1.3b-mfu");
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ((*dense)["moe"], false);
  EXPECT_EQ((*dense)["config"]["ep"], 1);
  EXPECT_EQ((*dense)["config"]["etp"], 2);  // tp
}

// scripts/fit_costmodel.py fits the dense constants on dense rows only and, with --moe-only, on
// the MoE rows only.
CliResult fit_script(const std::string& corpus, const std::string& extra) {
  const std::string script = data("../../scripts/fit_costmodel.py");
  return run_cli_with_launcher("python3 " + script + " --binary ",
                               "--corpus " + corpus + " --gpu h100-sxm --param " +
                                   "gemm_efficiency.max=0.5:0.7 --points 3 --rounds 1 --quiet " +
                                   extra);
}

TEST(FitScript, LeavesMoeRowsOutOfTheDenseFits) {
  const std::string corpus = fixture_with_moe_row();
  const CliResult dense = fit_script(corpus, "");
  ASSERT_EQ(dense.exit_code, 0) << dense.err;
  EXPECT_NE(dense.out.find("leaving out the 2 MoE rows"), std::string::npos) << dense.out;
  EXPECT_NE(dense.out.find("b-1.3b-mfu"), std::string::npos) << dense.out;
  EXPECT_EQ(dense.out.find("m-30b-ep"), std::string::npos) << dense.out;

  const CliResult moe = fit_script(corpus, "--moe-only");
  ASSERT_EQ(moe.exit_code, 0) << moe.err;
  EXPECT_EQ(moe.out.find("leaving out"), std::string::npos) << moe.out;
  EXPECT_NE(moe.out.find("m-30b-ep8"), std::string::npos) << moe.out;  // the fit row
  EXPECT_NE(moe.out.find("m-30b-ep4"), std::string::npos) << moe.out;  // the test row
  EXPECT_EQ(moe.out.find("b-1.3b-mfu"), std::string::npos) << moe.out;
  EXPECT_EQ(moe.out.find("b-tiny"), std::string::npos) << moe.out;
}

// ---- Bad input. -----------------------------------------------------------------------------

TEST(ValidateModelCli, CorpusErrorIsOneLineAndWritesNothing) {
  const std::string dir = make_temp_dir();
  json doc = fixture();
  doc["rows"][1]["gpus"] = 5;
  const std::string bad = write_temp_file("bad.json", doc.dump());
  const CliResult r = run_cli("validate-model --corpus " + bad + " --out " + dir + "/report.json");
  expect_bad_input(r, bad +
                          ": row 'a-1.3b-tp2': field 'tp': tp·pp·dp·cp = 2·2·1·1 = 4 does not "
                          "equal gpus 5");
  EXPECT_FALSE(fs::exists(dir + "/report.json"));
  fs::remove_all(dir);
}

TEST(ValidateModelCli, UnknownScheduleInTheCorpusIsACorpusError) {
  json doc = fixture();
  doc["rows"][0]["schedule"] = "fancy";
  const std::string bad = write_temp_file("bad.json", doc.dump());
  expect_bad_input(run_cli("validate-model --corpus " + bad),
                   bad + ": row 'a-1.3b-pp2': field 'schedule': unknown schedule 'fancy'");
}

TEST(ValidateModelCli, BadFlagsAreRejected) {
  expect_bad_input(run_cli(kFixture + "--split train"), "--split: expected fit, test or all");
  expect_bad_input(run_cli(kFixture + "--band 0"), "--band: expected a fraction > 0, got 0");
  expect_bad_input(run_cli(kFixture + "--rows-on b300"), "b300");
  expect_bad_input(run_cli(kFixture + "--rows-on h200"), "no row selected (--rows-on h200");
  expect_bad_input(run_cli(kFixture + "--cluster nowhere.json"), "nowhere.json");
}

// --gemms: the GEMM shape model on the measured H200 GEMMs (costmodel/gemm_corpus.h).
TEST(ValidateModelGemms, ScoresTheFitAndTestRowsOfMeasuredGemms) {
  const json j = run_json("validate-model --gemms " + data("kernels/h200_gemm_bf16.json"));
  EXPECT_EQ(j["cluster"], "h200");
  ASSERT_TRUE(j.contains("fit") && j.contains("test"));
  EXPECT_EQ(j["test"]["rows"].get<int>() + j["test"]["skipped_below_min_time"].get<int>(), 360);
  EXPECT_EQ(j["test"]["scored"].size(), j["test"]["rows"].get<size_t>());
  EXPECT_LT(j["test"]["mean_abs_error"].get<double>(), 0.09);
  const json only = run_json("validate-model --gemms " + data("kernels/h200_gemm_bf16.json") +
                             " --split test");
  EXPECT_FALSE(only.contains("fit"));
  // A cluster file overrides the preset: the constants before the H200 data do worse.
  const std::string old = write_temp_file(
      "old_shapes.json",
      R"({"base": "h200", "kernels": {"gemm_small_k": 32, "stream_k": {"min_k": 0}}})");
  const json before = run_json("validate-model --gemms " + data("kernels/h200_gemm_bf16.json") +
                               " --split test --cluster " + old);
  EXPECT_GT(before["test"]["mean_abs_error"].get<double>(),
            only["test"]["mean_abs_error"].get<double>());
  const CliResult table = run_cli("validate-model --gemms " + data("kernels/h200_gemm_bf16.json"));
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("test: 311 GEMMs (49 under 20 us not scored)"), std::string::npos)
      << table.out;
}

// --band applies to the GEMM score: the rows within it, in the table and the JSON.
TEST(ValidateModelGemms, BandCountsTheGemmsWithinIt) {
  const std::string gemms = "validate-model --gemms " + data("kernels/h200_gemm_bf16.json");
  const json ten = run_json(gemms + " --split test");
  const json five = run_json(gemms + " --split test --band 0.05");
  EXPECT_EQ(ten["band"], 0.10);
  EXPECT_EQ(five["band"], 0.05);
  EXPECT_EQ(five["test"]["band"], 0.05);
  const int in_ten = ten["test"]["in_band"], in_five = five["test"]["in_band"];
  EXPECT_GT(in_ten, 0);
  EXPECT_LT(in_five, in_ten);
  int marked = 0;
  for (const json& row : five["test"]["scored"]) {
    EXPECT_EQ(row["in_band"].get<bool>(), std::abs(row["error"].get<double>()) <= 0.05);
    marked += row["in_band"].get<bool>() ? 1 : 0;
  }
  EXPECT_EQ(marked, in_five);
  const CliResult table = run_cli(gemms + " --split test --band 0.05");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find(", " + std::to_string(in_five) + " within ±5%,"), std::string::npos)
      << table.out;
}

TEST(ValidateModelGemms, RefusesTheCorpusFlagsAndBadFiles) {
  const std::string gemms = "validate-model --gemms " + data("kernels/h200_gemm_bf16.json");
  expect_bad_input(run_cli(gemms + " --corpus " + data("corpus/small.json")), "--corpus");
  expect_bad_input(run_cli(gemms + " --rows-on h100-sxm"), "--rows-on");
  expect_bad_input(run_cli(gemms + " --split half"), "half");
  expect_bad_input(run_cli(gemms + " --band 0"), "--band: expected a fraction > 0, got 0");
  expect_bad_input(run_cli(gemms + " --strict"), "--strict: judges end-to-end corpus rows");
  const std::string bad = write_temp_file("bad_gemms.json", R"({"cluster": "h200", "fit": []})");
  expect_bad_input(run_cli("validate-model --gemms " + bad), "no rows");
}

}  // namespace
}  // namespace jaxpp::testing

namespace jaxpp::testing {
namespace {

// A corpus row's fp8_scaling reaches the prediction: the fixture's FP8 row moved to B200, once as
// MXFP8 and once with per-tensor current scaling, predicts two different step times, and the
// table names the MXFP8 row's recipe.
TEST(ValidateModelCli, Mxfp8RowIsPricedAsMxfp8AndTheTableSaysSo) {
  json doc = json::parse(read_file(data("corpus/small.json")));
  doc["rows"][2]["model"] = "gpt3-1.3b";
  json row;
  for (const json& r : doc["rows"])
    if (r["id"] == "b-1.3b-mfu") row = r;
  ASSERT_TRUE(row.value("fp8", false));
  row["cluster"] = "b200";
  row.erase("peak_tflops");
  json mx = row, cs = row;
  mx["id"] = "b-mx";
  mx["fp8_scaling"] = "mxfp8";
  cs["id"] = "b-cs";
  cs["fp8_scaling"] = "current";
  doc["rows"] = json::array({mx, cs});
  const std::string path = write_temp_file("mx_corpus.json", doc.dump(1));
  const json j = run_json("validate-model --corpus " + path);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["id"], "b-mx");
  const double mx_s = j["rows"][0]["predicted_step_time_s"].get<double>();
  const double cs_s = j["rows"][1]["predicted_step_time_s"].get<double>();
  EXPECT_GT(mx_s, cs_s) << "b200's MXFP8 GEMMs run at 0.852 of the per-tensor rate";
  const CliResult table = run_cli("validate-model --corpus " + path);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find(" mxfp8 "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" fp8 "), std::string::npos) << table.out;
}

}  // namespace
}  // namespace jaxpp::testing
