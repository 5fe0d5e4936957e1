// Regression tests for findings of the corpus fuzz targets (tests/fuzz/corpus_json_fuzz.cc,
// corpus_csv_fuzz.cc, gemm_corpus_json_fuzz.cc) and of the adversarial sweep of validate-model
// --corpus (docs/hardening.md, "Findings fixed"). Each failed before its fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "costmodel/corpus.h"
#include "costmodel/gemm_corpus.h"
#include "graph/error.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// gpt3-1.3b (seq_len 2048) on 8 GPUs, global batch 16: 32768 tokens per step.
json corpus_row() {
  return json::parse(R"({"id": "r1", "source": "s", "where": "Table 1", "split": "fit",
      "cluster": "a100-80g", "model": "gpt3-1.3b", "gpus": 8, "tp": 2, "pp": 2, "dp": 2,
      "global_batch": 16, "schedule": "1f1b", "measured": {"step_time_s": 2},
      "flops_convention": "none"})");
}

json corpus_of(const json& rows) {
  return {{"format", "jaxpp-sim-corpus"},
          {"version", 1},
          {"split_rule", "by hand"},
          {"sources", {{"s", {{"citation", "c"}, {"url", "u"}}}}},
          {"rows", rows}};
}

std::string json_error(const json& rows) {
  return error_of([&] { corpus_from_json(corpus_of(rows), "corpus.json", ""); });
}

std::string row_error(const std::string& key, const json& value) {
  json row = corpus_row();
  row[key] = value;
  return json_error(json::array({row}));
}

std::string csv_error(const std::string& text) {
  return error_of([&] { corpus_from_csv(text, "c.csv", ""); });
}

const std::string kCsvHeader =
    "id,source,where,split,cluster,model,gpus,tp,pp,dp,global_batch,schedule,"
    "measured_step_time_s,flops_convention\n";
const std::string kCsvRow = "r1,s,T1,fit,a100-80g,gpt3-1.3b,8,2,2,2,16,1f1b,2,none\n";

TEST(CorpusRegression, DenormalTokensPerSecondGaveAnInfiniteStepTime) {
  // Was: 1e-320 passed "> 0"; the step time 16·2048 / (1e-320·8) was inf, accepted and scored.
  EXPECT_THAT(row_error("measured", {{"tokens_per_s_per_gpu", 1e-320}}),
              HasSubstr("corpus.json: row 'r1': field 'measured': gives a step time of inf s "
                        "(tokens_per_s_per_gpu "));
  // 1e-300 tokens/s: 4.096e303 s, finite but beyond any training step.
  EXPECT_THAT(row_error("measured", {{"tokens_per_s_per_gpu", 1e-300}}),
              HasSubstr("field 'measured': gives a step time of 4.096e+303 s"));
}

TEST(CorpusRegression, StepTimeOutsideOneMicrosecondToAMillionSeconds) {
  EXPECT_THAT(row_error("measured", {{"step_time_s", 1e-9}}),
              HasSubstr("field 'measured': gives a step time of 1e-09 s (step_time_s "));
  EXPECT_THAT(row_error("measured", {{"step_time_s", 1e300}}),
              HasSubstr("field 'measured': gives a step time of 1e+300 s"));
  // The edges are accepted.
  EXPECT_EQ(row_error("measured", {{"step_time_s", 1e-6}}), "<no error>");
  EXPECT_EQ(row_error("measured", {{"step_time_s", 1e6}}), "<no error>");
}

TEST(CorpusRegression, HugePeakTflopsGaveAStepTimeOfZero) {
  // Was: an MFU row with peak_tflops 1e300: peak 1e312 FLOP/s = inf, step time 0.
  json row = corpus_row();
  row["measured"] = {{"mfu", 0.5}};
  row["flops_convention"] = "six_n";
  row["peak_tflops"] = 1e300;
  EXPECT_EQ(json_error(json::array({row})),
            "corpus.json: row 'r1': field 'peak_tflops': expected 1e-06 to 1e+06 TFLOP/s "
            "(1 MFLOP/s to 1 EFLOP/s), got 1e+300");
  row["peak_tflops"] = 1e-9;
  EXPECT_THAT(json_error(json::array({row})), HasSubstr("field 'peak_tflops': expected 1e-06"));
  row["peak_tflops"] = 312;
  EXPECT_EQ(json_error(json::array({row})), "<no error>");
}

TEST(CorpusRegression, ControlCharactersInAnIdAreRefused) {
  // Was: accepted; the id "a\nb" split the table row and every message naming it in two lines.
  EXPECT_EQ(row_error("id", "a\nb"),
            "corpus.json: rows[0]: field 'id': contains a control character (it is printed in "
            "tables and messages), got \"a\\nb\"");
  EXPECT_THAT(row_error("id", std::string("a\x1b[2Jb")), HasSubstr("contains a control character"));
}

TEST(CorpusRegression, SourceWithAControlCharacterAndAnEmptyWhereAreRefused) {
  // Was: a CSV source "a\rb" (no sources table to check it against) was printed raw in the
  // "by source" summary, and "where": "" (no citation) was accepted.
  EXPECT_EQ(csv_error(kCsvHeader + "r1,a\rb,T1,fit,a100-80g,gpt3-1.3b,8,2,2,2,16,1f1b,2,none\n"),
            "c.csv: row 'r1': field 'source': contains a control character (it is printed in "
            "tables and messages), got \"a\\rb\"");
  EXPECT_EQ(row_error("where", " "),
            "corpus.json: row 'r1': field 'where': expected where in the source the row is from "
            "(a table, a figure, a page), got \" \"");
  EXPECT_EQ(row_error("id", " "), "corpus.json: rows[0]: field 'id': expected a non-empty string");
}

TEST(CorpusRegression, EchoedFieldValuesKeepTheErrorOnOneLine) {
  // Was: an unknown cluster "x\ny" was echoed raw: a two-line error.
  const std::string e = row_error("cluster", "x\ny\r\x01");
  EXPECT_THAT(e, HasSubstr("field 'cluster': unknown cluster preset 'x\\ny\\r\\x01'"));
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_EQ(one_line("a\tb\x7f"), "a\\tb\\x7f");
  EXPECT_EQ(one_line("kept: µ·≠"), "kept: µ·≠");
  EXPECT_STREQ(InputError("two\nlines").what(), "two\\nlines");
}

TEST(CorpusRegression, EmptyRowsAreRefusedAtLoad) {
  // Was: loaded; validate-model then said "no row selected (--rows-on any, --split all)".
  EXPECT_EQ(json_error(json::array()), "corpus.json: field 'rows': no rows (expected at least one)");
  EXPECT_EQ(csv_error(kCsvHeader + "\n\n"), "c.csv: line 1: a header row but no data rows");
}

TEST(CorpusRegression, DuplicateIdsNameBothPositions) {
  // Was: "rows 0 and 1" for both forms: 0-based indices, not the CSV's lines.
  EXPECT_EQ(json_error(json::array({corpus_row(), corpus_row()})),
            "corpus.json: row 'r1': field 'id': duplicate id (rows[0] and rows[1])");
  EXPECT_EQ(csv_error(kCsvHeader + kCsvRow + "\n" + kCsvRow),
            "c.csv: row 'r1': field 'id': duplicate id (line 2 and line 4)");
}

TEST(CorpusRegression, CsvWithAByteOrderMarkCrlfAndTrailingEmptyLinesLoads) {
  // Was: the BOM became part of the first column: "column '\xEF\xBB\xBFid': unknown field".
  std::string text = "\xEF\xBB\xBF" + kCsvHeader + kCsvRow + "\n\n";
  for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 2))
    text.insert(at, "\r");
  const Corpus c = corpus_from_csv(text, "c.csv", "");
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.rows[0].id, "r1");
  EXPECT_EQ(c.rows[0].config.num_microbatches, 8);  // 16 / (dp 2 · microbatch 1)
  EXPECT_DOUBLE_EQ(c.rows[0].measured_step_time_s, 2);
}

TEST(CorpusRegression, CsvNumbersAreDecimalOnly) {
  // Was: strtod read "0x8" as 8 (and "0x1p3" as 8): a hexadecimal GPU count was accepted.
  std::string row = kCsvRow;
  row.replace(row.find(",8,"), 3, ",0x8,");
  EXPECT_EQ(csv_error(kCsvHeader + row),
            "c.csv: row 'r1': field 'gpus': expected an integer, got \"0x8\"");
  for (const char* bad : {"nan", "inf", "1e999", "0x1p1", "2.", "1e", "+", ".", "2 s"}) {
    std::string r = kCsvRow;
    r.replace(r.find(",2,none"), 7, std::string(",") + bad + ",none");
    SCOPED_TRACE(bad);
    if (std::string(bad) == "2.") {
      EXPECT_EQ(csv_error(kCsvHeader + r), "<no error>");  // "2." is a decimal number
    } else {
      EXPECT_THAT(csv_error(kCsvHeader + r),
                  HasSubstr("field 'measured': field 'step_time_s': expected a number, got"));
    }
  }
}

TEST(CorpusRegression, CsvQuotesOnlyAroundAWholeField) {
  // Was: ab"c,d" read as one field ab"c,d" -> abc,d (the quote opened mid-field), and "a"b as ab.
  EXPECT_EQ(csv_error(kCsvHeader + "r1,s,ab\"c,d\"\n"),
            "c.csv: line 2: field 3: a quote inside an unquoted field (quote the whole field, \"\" "
            "for a quote inside it)");
  EXPECT_EQ(csv_error(kCsvHeader + "r1,s,\"T1\"x,fit\n"),
            "c.csv: line 2: field 3: text after the closing quote (quote the whole field)");
  EXPECT_EQ(csv_error(kCsvHeader + "r1,s,\"T1\n"), "c.csv: line 2: field 3: unterminated quoted field");
  // A whole quoted field, with a comma, an escaped quote and spaces around the quotes, is read.
  std::string row = kCsvRow;
  row.replace(row.find("T1"), 2, " \"Table 1, \"\"row\"\" 3\" ");
  const Corpus c = corpus_from_csv(kCsvHeader + row, "c.csv", "");
  EXPECT_EQ(c.rows.at(0).where, "Table 1, \"row\" 3");
}

TEST(CorpusRegression, CsvOfInvalidUtf8IsRefusedAtTheByte) {
  // Was (corpus_csv fuzz target): a Latin-1 byte in a cell became a JSON string of invalid UTF-8;
  // the row's error message dumped it and nlohmann threw type_error.316, which is no InputError
  // (exit 1, no file named).
  std::string row = kCsvRow;
  row.replace(row.find(",16,"), 4, ",1\xe9" "6,");
  EXPECT_EQ(csv_error(kCsvHeader + row),
            "c.csv:2:41: is not valid UTF-8 (byte 0xe9 at byte offset 150); input files must be "
            "UTF-8 text");
  // A value built from raw bytes (not parsed) is shown with U+FFFD instead of throwing.
  EXPECT_EQ(row_error("gpus", std::string("\xe9")),
            "corpus.json: row 'r1': field 'gpus': expected an integer, got \"\xEF\xBF\xBD\"");
}

// ---- The measured-GEMM file. -----------------------------------------------------------------

json gemm_file() {
  return json::parse(R"({"cluster": "h200", "dtype": "bf16", "min_time_s": 2e-5,
      "fit": [[4096, 4096, 4096, "NN", 0.0012]], "test": [[8192, 8192, 8192, "TN", 0.009]]})");
}

TEST(GemmCorpusRegression, MinTimeThatWouldScoreNoRowIsRefusedAtLoad) {
  // Was: loaded; every split then failed to score with "no fit row at or above min_time_s".
  json g = gemm_file();
  g["min_time_s"] = 1e300;
  EXPECT_EQ(error_of([&] { gemm_corpus_from_json(g, "g.json"); }),
            "g.json: field 'min_time_s': expected seconds in [0, 1e4), got 1e+300");
}

TEST(GemmCorpusRegression, FreeTextFieldsMustBeText) {
  // Was: "description": 5 or "split": {...} were accepted and ignored.
  for (const char* key : {"description", "min_time_reason", "split"}) {
    json g = gemm_file();
    g[key] = 5;
    EXPECT_EQ(error_of([&] { gemm_corpus_from_json(g, "g.json"); }),
              "g.json: field '" + std::string(key) + "': expected a string, got 5");
  }
  EXPECT_EQ(gemm_corpus_from_json(gemm_file(), "g.json").rows.size(), 2u);
}

}  // namespace
}  // namespace jaxpp
