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
#include <fstream>
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
// The line validate-model writes to stderr for the fixture's rejected row.
const std::string kBadTpLine =
    data("corpus/small.json") +
    ": row 'a-bad-tp': configuration: tp 3 does not divide the 16 attention heads of gpt3-1.3b\n";

// validate-model --json on a selection that keeps the fixture's rejected row a-bad-tp: the whole
// report on stdout, exit 1 and the row's one line on stderr.
json run_json_with_bad_row(const std::string& args) {
  const CliResult r = run_cli(args + " --json");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, kBadTpLine);
  return json::parse(r.out);
}


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
  ASSERT_EQ(r.exit_code, 1) << r.err;  // a-bad-tp is rejected
  EXPECT_EQ(r.err, kBadTpLine);
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
  const json j = run_json_with_bad_row(kFixture);
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
  EXPECT_EQ(ids(run_json_with_bad_row(kFixture + "--split test")),
            (std::vector<std::string>{"a-1.3b-tp2", "b-tiny", "a-expected", "a-bad-tp"}));
}

TEST(ValidateModelCli, RowsOnKeepsTheRowsOfThatGpu) {
  EXPECT_EQ(ids(run_json(kFixture + "--rows-on h100-sxm")),
            (std::vector<std::string>{"b-tiny", "b-1.3b-mfu"}));
  // Preset names are matched as rows name their cluster, in any case.
  EXPECT_EQ(ids(run_json(kFixture + "--rows-on H100-SXM")),
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
  json a = run_json_with_bad_row(kFixture);
  const CliResult csv = run_cli("validate-model --corpus " + data("corpus/small.csv") + " --json");
  EXPECT_EQ(csv.exit_code, 1);
  EXPECT_EQ(csv.err, data("corpus/small.csv") +
                         ": row 'a-bad-tp': configuration: tp 3 does not divide the 16 attention "
                         "heads of gpt3-1.3b\n");
  json b = json::parse(csv.out);
  a.erase("corpus");
  b.erase("corpus");
  EXPECT_EQ(a, b);
}

TEST(ValidateModelCli, OutWritesTheJsonReport) {
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(kFixture + "--out " + dir + "/report.json");
  ASSERT_EQ(r.exit_code, 1) << r.err;  // the report is written, then a-bad-tp fails the run
  EXPECT_NE(r.out.find("wrote " + dir + "/report.json"), std::string::npos);
  EXPECT_EQ(json::parse(read_file(dir + "/report.json")), run_json_with_bad_row(kFixture));
  fs::remove_all(dir);
}

TEST(ValidateModelCli, StrictFailsOnlyWhenATestRowIsOutOfBandOrRejected) {
  // a-bad-tp (a test row the simulator rejects, not an expected failure) fails --strict, and
  // fails the run without it too (any selected row the simulator rejects).
  EXPECT_EQ(run_cli(kFixture + "--band 1e9 --strict").exit_code, 1);
  EXPECT_EQ(run_cli(kFixture + "--band 1e9").exit_code, 1);
  json doc = fixture();
  doc["rows"].erase(5);
  const std::string good = write_temp_file("good.json", doc.dump());
  EXPECT_EQ(run_cli("validate-model --corpus " + good + " --band 1e9 --strict").exit_code, 0);
  EXPECT_EQ(run_cli("validate-model --corpus " + good + " --band 0.001").exit_code, 0)
      << "without --strict, out-of-band rows do not fail the run";
  EXPECT_EQ(run_cli("validate-model --corpus " + good + " --band 0.001 --strict").exit_code, 1);
  // Without a-bad-tp, a fit row far out of band (a measured step of 1 µs, the shortest a row may
  // give: an error of about 1e5 against a band of 1e3, which every other row is within) does not
  // fail it: --strict looks at test rows only.
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

// ---- Rows the simulator rejects. ------------------------------------------------------------

// The table (or JSON) first, then one line per rejected row on stderr, exit 1; a selection that
// leaves the row out exits 0. Was: exit 0 with the row's status "error" in the table only.
TEST(ValidateModelCli, RejectedRowFailsTheRunWithOneLinePerRow) {
  const CliResult table = run_cli(kFixture);
  EXPECT_EQ(table.exit_code, 1);
  EXPECT_EQ(table.err, kBadTpLine);
  EXPECT_NE(table.out.find("by gpu:"), std::string::npos) << "the whole table is printed";
  // Two rejected rows: two lines, in corpus order.
  json doc = fixture();
  json second = doc["rows"][5];
  second["id"] = "a-bad-tp-2";
  second["split"] = "fit";
  doc["rows"].push_back(second);
  const std::string two = write_temp_file("two_bad.json", doc.dump());
  const CliResult r = run_cli("validate-model --corpus " + two + " --json");
  EXPECT_EQ(r.exit_code, 1);
  const std::string reason = "configuration: tp 3 does not divide the 16 attention heads of "
                             "gpt3-1.3b\n";
  EXPECT_EQ(r.err, two + ": row 'a-bad-tp': " + reason + two + ": row 'a-bad-tp-2': " + reason);
  EXPECT_EQ(json::parse(r.out)["rows"].size(), 7u);
  // Left out by the selection: exit 0.
  for (const char* selection : {"--split fit", "--rows-on h100-sxm", "--row a-1.3b-pp2"}) {
    const CliResult kept = run_cli(kFixture + selection);
    EXPECT_EQ(kept.exit_code, 0) << selection << ": " << kept.err;
    EXPECT_EQ(kept.err, "") << selection;
  }
  // A rejected row marked expected_failure does not fail the run (as --strict).
  json marked = fixture();
  marked["rows"][5]["expected_failure"] = "the source's tp does not divide the heads";
  const std::string path = write_temp_file("marked.json", marked.dump());
  const CliResult m = run_cli("validate-model --corpus " + path);
  EXPECT_EQ(m.exit_code, 0) << m.err;
  EXPECT_NE(m.out.find("error in row 'a-bad-tp'"), std::string::npos) << m.out;
}

// ---- --row. ---------------------------------------------------------------------------------

TEST(ValidateModelCli, RowKeepsTheNamedRowsInCorpusOrder) {
  EXPECT_EQ(ids(run_json(kFixture + "--row b-tiny")), (std::vector<std::string>{"b-tiny"}));
  const std::vector<std::string> two = {"a-1.3b-pp2", "b-tiny"};
  EXPECT_EQ(ids(run_json(kFixture + "--row b-tiny,a-1.3b-pp2")), two);
  EXPECT_EQ(ids(run_json(kFixture + "--row b-tiny --row a-1.3b-pp2")), two);
  EXPECT_EQ(ids(run_json(kFixture + "--row=b-tiny --row a-1.3b-pp2")), two);
  // Combined with --split and --rows-on.
  EXPECT_EQ(ids(run_json(kFixture + "--row b-tiny,a-1.3b-pp2 --split test")),
            (std::vector<std::string>{"b-tiny"}));
  EXPECT_EQ(ids(run_json(kFixture + "--row b-tiny,a-1.3b-pp2 --rows-on a100-80g")),
            (std::vector<std::string>{"a-1.3b-pp2"}));
  expect_bad_input(run_cli(kFixture + "--row b-tiny --split fit"),
                   "no row selected (--rows-on any, --split fit, --row b-tiny)");
}

TEST(ValidateModelCli, UnknownRowNamesTheCorpusAndTheClosestIds) {
  expect_bad_input(run_cli(kFixture + "--row a-1.3b-pp3"),
                   data("corpus/small.json") +
                       ": unknown row 'a-1.3b-pp3' (--row; closest: a-1.3b-pp2, a-1.3b-tp2, "
                       "b-1.3b-mfu)");  // edit distances 1, 2, 4
  expect_bad_input(run_cli(kFixture + "--row b-tiny,nothing"), "unknown row 'nothing'");
  expect_bad_input(run_cli(kFixture + "--row b-tiny,"), "--row: expected row ids");
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
  doc["rows"].erase(5);  // a-bad-tp: a rejected row fails validate-model (exit 1)
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
  // Was: cxxopts' own message for abc, and nan, inf read as numbers.
  for (const char* band : {"nan", "inf", "abc", "-0.1", "0x1", "1e999", "infinity", ""})
    expect_bad_input(run_cli(kFixture + "--band '" + band + "'"),
                     std::string("--band: expected a fraction > 0, got ") + band + "\n");
  expect_bad_input(run_cli(kFixture + "--rows-on b300"), "b300");
  expect_bad_input(run_cli(kFixture + "--rows-on h200"), "no row selected (--rows-on h200");
  expect_bad_input(run_cli(kFixture + "--cluster nowhere.json"), "nowhere.json");
}

// A band whose percentage overflows (1e308 · 100) is shown as the fraction, never as "inf".
TEST(ValidateModelCli, AHugeBandIsShownAsAFraction) {
  const CliResult r = run_cli(kFixture + "--band 1e308");
  EXPECT_NE(r.out.find("within ±1e+308 (fraction)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("inf"), std::string::npos) << r.out;
  EXPECT_NE(run_cli(kFixture + "--band 0.25").out.find("within ±25%"), std::string::npos);
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
  EXPECT_GT(mx_s, cs_s) << "b200's MXFP8 GEMMs run at 0.875 of the per-tensor rate";
  const CliResult table = run_cli("validate-model --corpus " + path);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find(" mxfp8 "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" fp8 "), std::string::npos) << table.out;
}

}  // namespace
}  // namespace jaxpp::testing

namespace jaxpp::testing {
namespace {

// ---- --explain, --plan-out. -----------------------------------------------------------------

// The fixture (without its rejected row) plus an MoE row and an FSDP row (parameter sharding,
// bf16 gradients, overlapped reduction) of gpt3-1.3b on 4 A100s.
std::string explain_fixture() {
  json doc = fixture();
  doc["rows"].erase(5);
  doc["rows"].push_back(json::parse(R"({"id": "m-30b-ep8", "source": "paper-b",
      "where": "Table 9", "split": "fit", "cluster": "h100-sxm", "model": "qwen3-30b-a3b",
      "gpus": 8, "tp": 1, "pp": 1, "dp": 8, "ep": 8, "etp": 1, "moe_overlap": "none",
      "moe_dispatcher": "deepep", "global_batch": 8, "seq_len": 1024, "schedule": "1f1b",
      "measured": {"step_time_s": 1}, "flops_convention": "none"})"));
  doc["rows"].push_back(json::parse(R"({"id": "a-fsdp", "source": "paper-a",
      "where": "Table 5", "split": "test", "cluster": "a100-80g", "model": "gpt3-1.3b",
      "gpus": 4, "tp": 1, "pp": 2, "dp": 2, "global_batch": 16, "schedule": "1f1b",
      "distributed_optimizer": true, "shard_parameters": true, "grad_dtype": "bf16",
      "overlap_grad_reduce": true, "measured": {"step_time_s": 0.5},
      "flops_convention": "none"})"));
  doc["rows"].push_back(json::parse(R"({"id": "h-offload", "source": "paper-a",
      "where": "Table 6", "split": "test", "cluster": "h100-sxm", "model": "gpt3-1.3b",
      "gpus": 8, "tp": 1, "pp": 1, "dp": 8, "global_batch": 32, "microbatch_size": 4,
      "schedule": "1f1b", "offload_layers": 10, "measured": {"step_time_s": 0.5},
      "flops_convention": "none"})"));
  return write_temp_file("explain.json", doc.dump(1));
}

// The printed command without its "jaxpp-sim " prefix, for run_cli.
std::string simulate_args_of(const json& explain) {
  const std::string command = explain["simulate_command"];
  EXPECT_EQ(command.rfind("jaxpp-sim simulate ", 0), 0u) << command;
  return command.substr(std::string("jaxpp-sim ").size());
}

// Each explained row's command, run: simulate's step time is validate-model's prediction, its
// breakdown the explanation's, its worst actor's peak the explained peak; the plan written by
// --plan-out is byte for byte the plan `simulate <command> --plan` writes, and `validate`
// accepts it. Rows: dense with full recompute, sequence parallelism, interleaving and unfused
// attention (a preset); MoE with ep, etp, overlap and dispatcher; FSDP; FP8 with a seq_len (a
// model file written by --plan-out).
TEST(ValidateModelExplain, EachRowsCommandReproducesItsPrediction) {
  const std::string corpus = explain_fixture();
  const std::string dir = make_temp_dir();
  const std::string rows = "a-1.3b-tp2,m-30b-ep8,a-fsdp,b-1.3b-mfu,h-offload";
  const CliResult r = run_cli("validate-model --corpus " + corpus + " --row " + rows +
                              " --explain --plan-out " + dir + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(r.out);
  ASSERT_EQ(report["rows"].size(), 5u);
  for (const json& row : report["rows"]) {
    const std::string id = row["id"];
    SCOPED_TRACE(id);
    const json& e = row["explain"];
    EXPECT_EQ(e["complete"], true);
    const double predicted = row["predicted_step_time_s"];
    EXPECT_NEAR(e["step_time_s"].get<double>(), predicted, 1e-9 * predicted);
    const std::string plan_again = dir + "/again-" + id + ".plan.json";
    const CliResult sim = run_cli(simulate_args_of(e) + " --json --plan " + plan_again);
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    const json m = json::parse(sim.out);
    EXPECT_NEAR(m["step_time_s"].get<double>(), predicted, 1e-9 * predicted);
    EXPECT_EQ(m["breakdown"], e["breakdown"]);
    const json& mem = e["memory"];
    const int actor = mem["actor"];
    EXPECT_EQ(m["peak_memory_bytes"][actor], mem["peak_bytes"]);
    EXPECT_EQ(mem["peak_bytes"], row["peak_memory_bytes"]);
    EXPECT_EQ(mem["weights_bytes"].get<int64_t>() + mem["gathered_weights_bytes"].get<int64_t>() +
                  mem["gradients_bytes"].get<int64_t>() +
                  mem["transient_gradients_bytes"].get<int64_t>() +
                  mem["optimizer_state_bytes"].get<int64_t>() +
                  mem["activations_bytes"].get<int64_t>(),
              mem["peak_bytes"].get<int64_t>());
    const std::string plan = dir + "/" + id + ".plan.json";
    ASSERT_TRUE(fs::exists(plan));
    EXPECT_EQ(read_file(plan), read_file(plan_again));
    const CliResult valid = run_cli("validate " + plan);
    EXPECT_EQ(valid.exit_code, 0) << valid.out << valid.err;
    EXPECT_NEAR(json::parse(read_file(plan))["predicted"]["step_time_s"].get<double>(), predicted,
                1e-9 * predicted);
  }
  const json& dense = (*row_of(report, "a-1.3b-tp2"))["explain"];
  EXPECT_EQ(dense["simulate_command"],
            "jaxpp-sim simulate --model gpt3-1.3b --cluster a100-80g --gpus 4 --pp 2 --tp 2 "
            "--dp 1 --virtual 2 --global-batch 8 --microbatch-size 2 --schedule megatron "
            "--partition even --recompute full --sequence-parallel --attention unfused "
            "--breakdown");
  EXPECT_TRUE(dense["model_file"].is_null());
  const std::string moe = (*row_of(report, "m-30b-ep8"))["explain"]["simulate_command"];
  EXPECT_NE(moe.find(" --ep 8 --etp 1 --moe-overlap none --moe-dispatcher deepep "),
            std::string::npos)
      << moe;
  EXPECT_NE(moe.find("--model " + dir + "/m-30b-ep8.model.json"), std::string::npos)
      << moe << ": seq_len 1024 is not qwen3-30b-a3b's";
  const std::string fsdp = (*row_of(report, "a-fsdp"))["explain"]["simulate_command"];
  EXPECT_NE(fsdp.find(" --zero1 --shard-params --overlap-grad-reduce --grad-dtype bf16 "),
            std::string::npos)
      << fsdp;
  // Activation offloading: its flag, and 10 layers of GPT-3 1.3B outlast the forward on PCIe.
  const json& offload = (*row_of(report, "h-offload"))["explain"];
  const std::string offload_command = offload["simulate_command"];
  EXPECT_NE(offload_command.find(" --offload-layers 10 "), std::string::npos) << offload_command;
  EXPECT_EQ((*row_of(report, "h-offload"))["config"]["offload_layers"], 10);
  EXPECT_GT(offload["breakdown"][0]["other_s"].get<double>(), 0.0);
  const json& fsdp_mem = (*row_of(report, "a-fsdp"))["explain"]["memory"];
  EXPECT_GT(fsdp_mem["gathered_weights_bytes"].get<int64_t>(), 0);
  EXPECT_GT(fsdp_mem["transient_gradients_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(dense["memory"]["gathered_weights_bytes"], 0);
  EXPECT_EQ(dense["memory"]["transient_gradients_bytes"], 0);
  // The FP8 row at seq_len 1024: a model file, and the note says why.
  const json& fp8 = (*row_of(report, "b-1.3b-mfu"))["explain"];
  EXPECT_EQ(fp8["model_file"], dir + "/b-1.3b-mfu.model.json");
  ASSERT_TRUE(fs::exists(dir + "/b-1.3b-mfu.model.json"));
  const json model = json::parse(read_file(dir + "/b-1.3b-mfu.model.json"));
  EXPECT_EQ(model["dtype"], "fp8");
  ASSERT_EQ(fp8["notes"].size(), 1u);
  const std::string note = fp8["notes"][0];
  EXPECT_NE(note.find("seq_len 1024 (gpt3-1.3b has 2048; simulate has no sequence-length flag)"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("dtype fp8 (\"fp8\": true; simulate has no FP8 flag)"), std::string::npos)
      << note;
  EXPECT_FALSE(fs::exists(dir + "/a-1.3b-tp2.model.json")) << "a preset needs no model file";
  fs::remove_all(dir);
}

// The table form: after the summaries, the command, the breakdown header and the memory line.
TEST(ValidateModelExplain, TablePrintsTheCommandBreakdownAndMemory) {
  const CliResult r = run_cli(kFixture + "--row a-1.3b-tp2 --explain");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle :
       {"\nexplain a-1.3b-tp2 (test, a100-80g: predicted ",
        "  reproduce: jaxpp-sim simulate --model gpt3-1.3b --cluster a100-80g --gpus 4 ",
        "step breakdown (ms and % of the ", "gemm", "attention", "elementw.", "tp_exp.",
        "p2p_exp.", "dp_exp.", "bubble", "optimizer", "peak memory of actor ", "GiB of 80.00 GiB",
        "), in GiB: weights ", ", gradients ", ", optimizer state ", ", gathered weights 0.00",
        ", activations in flight ", ", transient gradients 0.00"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  }
  EXPECT_LT(r.out.find("by gpu:"), r.out.find("explain a-1.3b-tp2")) << "after the table";
}

// Without --plan-out the command names the model file by its name and the note says how to get
// it; a rejected row shows its command and the simulator's reason.
TEST(ValidateModelExplain, WithoutPlanOutAndForARejectedRow) {
  const json j = run_json(kFixture + "--row b-1.3b-mfu --explain");
  const json& e = j["rows"][0]["explain"];
  EXPECT_EQ(e["model_file"], "b-1.3b-mfu.model.json");
  EXPECT_NE(e["notes"][0].get<std::string>().find(
                "--plan-out DIR writes it as DIR/b-1.3b-mfu.model.json"),
            std::string::npos)
      << e["notes"];
  const CliResult bad = run_cli(kFixture + "--row a-bad-tp --explain");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, kBadTpLine);
  EXPECT_NE(bad.out.find("  reproduce: jaxpp-sim simulate --model gpt3-1.3b --cluster a100-80g "
                         "--gpus 3 --pp 1 --tp 3 --dp 1 --global-batch 4"),
            std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find("  rejected by the simulator: configuration: tp 3 does not divide"),
            std::string::npos)
      << bad.out;
}

// The cluster override is repeated in the command, and reproduces the override's prediction.
TEST(ValidateModelExplain, ClusterOverrideIsInTheCommand) {
  const json j = run_json(kFixture + "--row a-1.3b-pp2 --cluster h100-sxm --explain");
  const json& row = j["rows"][0];
  const std::string command = row["explain"]["simulate_command"];
  EXPECT_NE(command.find(" --cluster h100-sxm "), std::string::npos) << command;
  const json m = run_json(simulate_args_of(row["explain"]));
  const double predicted = row["predicted_step_time_s"];
  EXPECT_NEAR(m["step_time_s"].get<double>(), predicted, 1e-9 * predicted);
}

TEST(ValidateModelExplain, BadCombinationsAreRefused) {
  expect_bad_input(run_cli("validate-model --split fit --explain"),
                   " rows selected; it explains at most 8 unless --row names them");
  expect_bad_input(run_cli(kFixture + "--plan-out /tmp"),
                   "--plan-out: writes the plans of the explained rows: give --explain");
  expect_bad_input(run_cli(kFixture + "--row b-tiny --explain --plan-out /nonexistent/dir"),
                   "--plan-out /nonexistent/dir: not an existing directory");
  expect_bad_input(run_cli("validate-model --gemms " + data("kernels/h200_gemm_bf16.json") +
                           " --explain"),
                   "--explain: selects rows of the end-to-end corpus");
}

// ---- Model files of rows. -------------------------------------------------------------------

// A row's model file is relative to the corpus file's directory, not to the working directory.
// Was: the working directory first, so a file of the same name there (here a broken one) won.
TEST(ValidateModelCli, RowModelFileIsRelativeToTheCorpusDirectory) {
  const std::string corpus_dir = make_temp_dir(), cwd = make_temp_dir();
  json doc = json::parse(read_file(data("corpus/small.json")));
  doc["rows"] = json::array({doc["rows"][2]});  // b-tiny: "model": "tiny_transformer.json"
  ASSERT_EQ(doc["rows"][0]["model"], "tiny_transformer.json");
  std::ofstream(corpus_dir + "/corpus.json") << doc.dump(1);
  std::ofstream(corpus_dir + "/tiny_transformer.json")
      << read_file(data("corpus/tiny_transformer.json"));
  std::ofstream(cwd + "/tiny_transformer.json") << "{\"not\": \"a model\"}";
  const CliResult r = run_cli_with_launcher(
      "cd " + cwd + " && ", "validate-model --corpus " + corpus_dir + "/corpus.json --json --explain");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_NE(j["rows"][0]["explain"]["simulate_command"].get<std::string>().find(
                "--model " + corpus_dir + "/tiny_transformer.json "),
            std::string::npos)
      << j["rows"][0]["explain"]["simulate_command"];
  // Missing next to the corpus: an error naming the path looked at, even with one in the cwd.
  fs::remove(corpus_dir + "/tiny_transformer.json");
  std::ofstream(cwd + "/tiny_transformer.json") << read_file(data("corpus/tiny_transformer.json"));
  const CliResult missing = run_cli_with_launcher(
      "cd " + cwd + " && ", "validate-model --corpus " + corpus_dir + "/corpus.json");
  expect_bad_input(missing, corpus_dir + "/corpus.json: row 'b-tiny': field 'model': unknown "
                            "model 'tiny_transformer.json' (not a preset, and no such file " +
                                corpus_dir + "/tiny_transformer.json: a model file is relative "
                                             "to the corpus file's directory");
  fs::remove_all(corpus_dir);
  fs::remove_all(cwd);
}

}  // namespace
}  // namespace jaxpp::testing

namespace jaxpp::testing {
namespace {

// ---- Activation offloading's host memory. -------------------------------------------------------

// One offloading row (gpt3-1.3b on one A100, 8 sequences in one microbatch, 8 layers offloaded)
// run on a host with 4 GiB per GPU: simulate refuses it ("does not fit in host memory: ..."), so
// validate-model reports the row as not fitting, with simulate's line, and still predicts it
// (as it predicts rows above the device memory); --explain's command adds --no-memory-check.
TEST(ValidateModelHostMemory, OffloadRowAboveTheHostMemoryDoesNotFit) {
  json doc = fixture();
  doc["rows"] = json::array();
  doc["rows"].push_back(json::parse(R"({"id": "h-host", "source": "paper-a",
      "where": "Table 7", "split": "test", "cluster": "a100-80g", "model": "gpt3-1.3b",
      "gpus": 1, "tp": 1, "pp": 1, "dp": 1, "global_batch": 8, "microbatch_size": 8,
      "schedule": "1f1b", "offload_layers": 8, "measured": {"step_time_s": 0.5},
      "flops_convention": "none"})"));
  const std::string corpus = write_temp_file("host.json", doc.dump(1));
  const std::string small = write_temp_file(
      "small-host.json", R"({"base": "a100-80g", "name": "a100-small-host",
                            "host_memory_gib_per_gpu": 4})");
  const std::string simulate =
      "simulate --model gpt3-1.3b --gpus 1 --pp 1 --dp 1 --global-batch 8 --microbatch-size 8 "
      "--schedule 1f1b --offload-layers 8 --cluster ";
  // simulate's refusal and its figures without the check.
  const CliResult refused = run_cli(simulate + small);
  ASSERT_EQ(refused.exit_code, 2);
  const std::string prefix = "jaxpp-sim simulate: error: ";
  ASSERT_EQ(refused.err.rfind(prefix + "does not fit in host memory: actor 0 offloads ", 0), 0u)
      << refused.err;
  const std::string line = refused.err.substr(prefix.size(), refused.err.size() - prefix.size() - 1);
  const json sim = run_json(simulate + small + " --no-memory-check");

  const CliResult r = run_cli("validate-model --corpus " + corpus + " --cluster " + small + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json row = json::parse(r.out)["rows"][0];
  EXPECT_NE(row["status"], "error");
  EXPECT_EQ(row["predicted_step_time_s"], sim["step_time_s"]);
  EXPECT_FALSE(row["fits"].get<bool>());
  EXPECT_FALSE(row["fits_host"].get<bool>());
  EXPECT_EQ(row["host_message"], line);
  EXPECT_EQ(row["host_offload_bytes"], sim["host_offload_bytes"][0]);
  EXPECT_EQ(row["host_memory_bytes"].get<int64_t>(), int64_t{4} << 30);
  EXPECT_LE(row["peak_memory_bytes"].get<int64_t>(), row["device_memory_bytes"].get<int64_t>());
  // The table: "host OOM" in the memory column and simulate's line under it.
  const CliResult t = run_cli("validate-model --corpus " + corpus + " --cluster " + small);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("/80 host OOM "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("row 'h-host' " + line + "\n"), std::string::npos) << t.out;
  // --explain: the command simulate runs needs --no-memory-check, and runs.
  const CliResult e =
      run_cli("validate-model --corpus " + corpus + " --cluster " + small + " --explain --json");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const std::string command = json::parse(e.out)["rows"][0]["explain"]["simulate_command"];
  EXPECT_NE(command.find(" --no-memory-check"), std::string::npos) << command;
  EXPECT_EQ(run_cli(command.substr(std::string("jaxpp-sim ").size())).exit_code, 0) << command;

  // On the preset's host (a100-80g) the same row fits: its fields say so, no message.
  const json fits = json::parse(run_cli("validate-model --corpus " + corpus + " --json").out);
  const json& ok = fits["rows"][0];
  EXPECT_TRUE(ok["fits"].get<bool>());
  EXPECT_TRUE(ok["fits_host"].get<bool>());
  EXPECT_FALSE(ok.contains("host_message"));
  EXPECT_EQ(ok["host_offload_bytes"], sim["host_offload_bytes"][0]);
  EXPECT_GT(ok["host_memory_bytes"].get<int64_t>(), ok["host_offload_bytes"].get<int64_t>());
  // A row without offloading has no host fields.
  doc["rows"][0].erase("offload_layers");
  const std::string plain = write_temp_file("plain.json", doc.dump(1));
  const json p = json::parse(run_cli("validate-model --corpus " + plain + " --json").out);
  EXPECT_FALSE(p["rows"][0].contains("fits_host"));
  EXPECT_FALSE(p["rows"][0].contains("host_offload_bytes"));
}

}  // namespace
}  // namespace jaxpp::testing
