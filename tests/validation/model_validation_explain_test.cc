// validate-model's row selection (--row), --band parsing and --explain (simulator/
// model_validation.h) on the fixture corpus tests/data/corpus/small.json, without the binary:
// the explained plan, read back from its plan.json text, simulates to the row's prediction; the
// memory split adds up to the worst actor's peak.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "costmodel/corpus.h"
#include "graph/plan.h"
#include "simulator/model_validation.h"
#include "simulator/plan_builder.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

const std::string kSmall = std::string(JAXPP_TEST_DATA_DIR) + "/corpus/small.json";

const CorpusRow& row_named(const Corpus& corpus, const std::string& id) {
  for (const CorpusRow& row : corpus.rows)
    if (row.id == id) return row;
  throw std::runtime_error("no row " + id);
}

TEST(ValidateModelRows, RowIdsSelectAndUnknownIdsSuggestTheClosest) {
  const Corpus corpus = load_corpus(kSmall);
  const Corpus two = select_corpus_rows(corpus, "", "all", {"b-tiny", "a-1.3b-pp2"});
  ASSERT_EQ(two.rows.size(), 2u);
  EXPECT_EQ(two.rows[0].id, "a-1.3b-pp2") << "corpus order";
  EXPECT_EQ(two.rows[1].id, "b-tiny");
  // Edit distances to "b-tinny": b-tiny 1, a-bad-tp 7, b-1.3b-mfu 8, the others 9 or more.
  EXPECT_EQ(error_of([&] { select_corpus_rows(corpus, "", "all", {"b-tinny"}); }),
            kSmall + ": unknown row 'b-tinny' (--row; closest: b-tiny, a-bad-tp, b-1.3b-mfu)");
  EXPECT_EQ(error_of([&] { select_corpus_rows(corpus, "h100-sxm", "all", {"a-1.3b-pp2"}); }),
            kSmall + ": no row selected (--rows-on h100-sxm, --split all, --row a-1.3b-pp2)");
}

TEST(ValidateModelRows, BandIsADecimalFractionAboveZero) {
  EXPECT_EQ(parse_validation_band("0.05"), 0.05);
  EXPECT_EQ(parse_validation_band("1e9"), 1e9);
  for (const char* bad : {"nan", "inf", "-inf", "abc", "0", "-0.1", "0x10", "1e999", "", "0.1x"})
    EXPECT_EQ(error_of([&] { parse_validation_band(bad); }),
              std::string("--band: expected a fraction > 0, got ") + bad)
        << bad;
}

TEST(ValidateModelExplain, FileStemAndShellQuoting) {
  EXPECT_EQ(explain_file_stem("a-1.3b_x"), "a-1.3b_x");
  EXPECT_EQ(explain_file_stem("a/b c"), "a_b_c");
  EXPECT_EQ(explain_file_stem(".."), "_..");
  EXPECT_EQ(shell_command({"simulate", "--model", "dir with space/m.json", "--x", "it's"}),
            "jaxpp-sim simulate --model 'dir with space/m.json' --x 'it'\\''s'");
}

// The plan of an explained row, written as plan.json text and read back, simulates to the row's
// predicted step time; the memory terms add up to the peak.
TEST(ValidateModelExplain, PlanTextReproducesThePredictionAndMemoryAddsUp) {
  const Corpus corpus = load_corpus(kSmall);
  for (const char* id : {"a-1.3b-pp2", "a-1.3b-tp2", "b-1.3b-mfu"}) {
    SCOPED_TRACE(id);
    const CorpusRow& row = row_named(corpus, id);
    const CorpusRowResult result = validate_row(row, {});
    ASSERT_TRUE(result.ran()) << result.message;
    const RowExplanation e = explain_row(row, {}, {});
    ASSERT_TRUE(e.ran) << e.message;
    EXPECT_TRUE(e.complete);
    EXPECT_EQ(e.step_time_s, result.predicted_step_time_s);
    const Plan back = plan_from_json(nlohmann::json::parse(plan_to_text(e.plan)), "plan");
    PlanSimOptions so;
    so.record_trace = false;
    so.check_memory = false;
    EXPECT_EQ(simulate_plan(back, so).result.step_time_s, result.predicted_step_time_s);
    const MemoryBreakdown& m = e.memory;
    EXPECT_EQ(m.weights + m.gathered_weights + m.gradients + m.transient_gradients +
                  m.optimizer_state + m.activations,
              m.peak);
    EXPECT_EQ(m.peak, result.peak_memory_bytes);
    EXPECT_EQ(m.device, result.device_memory_bytes);
    EXPECT_GT(m.activations, 0);
  }
}

// A row with no sharding keeps whole gradients and weights: the optimizer state is 12 bytes and
// the gradients 4 bytes per parameter of the actor (the presets' fp32 master, m, v and fp32 main
// gradients), weights 2 bytes.
TEST(ValidateModelExplain, MemoryTermsPerParameterWithoutSharding) {
  const Corpus corpus = load_corpus(kSmall);
  const RowExplanation e = explain_row(row_named(corpus, "a-1.3b-pp2"), {}, {});
  ASSERT_TRUE(e.ran);
  const MemoryBreakdown& m = e.memory;
  EXPECT_EQ(m.gathered_weights, 0);
  EXPECT_EQ(m.transient_gradients, 0);
  EXPECT_NEAR(static_cast<double>(m.gradients), 2.0 * m.weights, 2.0);
  EXPECT_NEAR(static_cast<double>(m.optimizer_state), 6.0 * m.weights, 6.0);
}

}  // namespace
}  // namespace jaxpp
