// The GEMM shape model against GEMMs measured on an H200 (tests/data/kernels/h200_gemm_bf16.json): the
// constants fitted on the fit rows (scripts/fit_gemm_shapes.py) predict the held-out test rows,
// the model without them does worse on the same rows, and bad files are one-line errors.
#include "costmodel/gemm_corpus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "costmodel/operator_cost.h"
#include "graph/error.h"

namespace jaxpp {
namespace {

const std::string kH200Gemms = std::string(JAXPP_TEST_DATA_DIR) + "/kernels/h200_gemm_bf16.json";

TEST(GemmCorpus, TheH200FileHoldsItsSplitAndItsHarnessBoundRows) {
  const GemmCorpus g = load_gemm_corpus(kH200Gemms);
  EXPECT_EQ(g.cluster, "h200");
  EXPECT_EQ(g.dtype, Dtype::kBf16);
  int fit = 0, test = 0;
  for (const GemmRow& r : g.rows) (r.test ? test : fit)++;
  EXPECT_EQ(fit, 264);
  EXPECT_EQ(test, 360);
  const GemmScore s = score_gemms(g, cluster_preset("h200"), "test", 0.10);
  EXPECT_EQ(s.rows + s.skipped, 360);
  EXPECT_EQ(s.skipped, 49);  // under 20 us
}

// Fitted on the fit rows: 8.3 % there; the test rows, never used in the fit, 7.9 %.
TEST(GemmCorpus, TheFittedShapeModelPredictsTheHeldOutGemms) {
  const GemmCorpus g = load_gemm_corpus(kH200Gemms);
  const ClusterSpec h200 = cluster_preset("h200");
  const GemmScore fit = score_gemms(g, h200, "fit", 0.10);
  const GemmScore test = score_gemms(g, h200, "test", 0.10);
  EXPECT_LE(fit.mean_abs_error, 0.09);
  EXPECT_LE(test.mean_abs_error, 0.09);
  // The preset's large-GEMM efficiency is an end-to-end constant: a kernel alone runs faster.
  EXPECT_GT(test.scale, 0.7);
  EXPECT_LT(test.scale, 0.95);
}

// The model before the H200 data (small-k constant 32, no stream-K) is worse on the same held-out
// rows: 11.8 % mean |error|. The check above fails for it.
TEST(GemmCorpus, WithoutStreamKAndTheShortKConstantTheTestRowsAreWorse) {
  const GemmCorpus g = load_gemm_corpus(kH200Gemms);
  ClusterSpec before = cluster_preset("h200");
  before.gemm_small_k = 32;
  before.stream_k_min_k = 0;
  const GemmScore test = score_gemms(g, before, "test", 0.10);
  EXPECT_GT(test.mean_abs_error, 0.10);
  EXPECT_GT(test.mean_abs_error,
            score_gemms(g, cluster_preset("h200"), "test", 0.10).mean_abs_error);
}

// The band counts the scored rows whose |error| (after the scale) is within it, and marks them.
TEST(GemmCorpus, TheBandCountsTheRowsWithinIt) {
  const GemmCorpus g = load_gemm_corpus(kH200Gemms);
  const ClusterSpec h200 = cluster_preset("h200");
  const GemmScore ten = score_gemms(g, h200, "test", 0.10);
  const GemmScore five = score_gemms(g, h200, "test", 0.05);
  EXPECT_EQ(ten.band, 0.10);
  int marked = 0;
  for (const GemmScoredRow& r : ten.scored) {
    EXPECT_EQ(r.in_band, std::abs(r.error) <= 0.10) << r.error;
    marked += r.in_band ? 1 : 0;
  }
  EXPECT_EQ(ten.in_band, marked);
  EXPECT_GT(ten.in_band, 0);
  EXPECT_LT(ten.in_band, ten.rows) << "the largest test errors exceed 10 %";
  EXPECT_LT(five.in_band, ten.in_band);
  EXPECT_EQ(score_gemms(g, h200, "test", 10).in_band, ten.rows);
}

// Stream-K lifts a GEMM of too few tiles for one wave; a full wave gains nothing from it.
TEST(GemmCorpus, StreamKLiftsPartialWavesOnly) {
  const GemmCorpus g = load_gemm_corpus(kH200Gemms);
  ClusterSpec on = cluster_preset("h200"), off = on;
  off.stream_k_min_k = 0;
  ModelSpec model;
  const OperatorCost with(model, ParallelConfig{}, on), without(model, ParallelConfig{}, off);
  // 1024 x 2560: 8 x 10 = 80 tiles of 128 x 256 on 132 SMs.
  EXPECT_GT(with.gemm_efficiency(1024, 2560, 8192), 1.3 * without.gemm_efficiency(1024, 2560, 8192));
  // 2048 x 16896: 16 x 66 = 1056 tiles = 8 full waves.
  EXPECT_DOUBLE_EQ(with.gemm_efficiency(2048, 16896, 4096),
                   without.gemm_efficiency(2048, 16896, 4096));
}

void expect_bad_file(const std::string& text, const std::string& needle) {
  const std::string path = ::testing::TempDir() + "/gemms_bad.json";
  std::ofstream(path) << text;
  try {
    load_gemm_corpus(path);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(GemmCorpus, BadFilesNameTheFieldAndTheReason) {
  const std::string row = R"([128, 256, 512, "NN", 1e-4])";
  expect_bad_file(R"({"cluster": "h200", "test": [)" + row + "]}", "fit");
  expect_bad_file(R"({"cluster": "h200", "fit": [], "test": [)" + row + "]}", "no rows");
  expect_bad_file(R"({"cluster": "h201", "fit": [)" + row + "], \"test\": [" + row + "]}",
                  "cluster");
  expect_bad_file(R"({"cluster": "h200", "fit": [[128, 256, 512, "XN", 1e-4]], "test": [)" + row +
                      "]}",
                  "layout");
  expect_bad_file(R"({"cluster": "h200", "fit": [[128, 0, 512, "NN", 1e-4]], "test": [)" + row +
                      "]}",
                  "fit[0]");
  expect_bad_file(R"({"cluster": "h200", "fit": [[128, 256, 512, "NN", -1]], "test": [)" + row +
                      "]}",
                  "seconds");
  expect_bad_file(R"({"cluster": "h200", "fit": [[128, 256]], "test": [)" + row + "]}",
                  "expected [m, n, k, layout, seconds]");
  expect_bad_file(R"({"cluster": "h200", "dtype": "int3", "fit": [)" + row + "], \"test\": [" +
                      row + "]}",
                  "dtype");
  expect_bad_file(R"({"cluster": "h200", "fits": [)" + row + "], \"test\": [" + row + "]}",
                  "fits");
}

TEST(GemmCorpus, TheShapeConstantsRoundTripAndAreRangeChecked) {
  ClusterSpec c = cluster_preset("h200");
  c.gemm_small_k = 48;
  c.stream_k_min_k = 2048;
  c.stream_k_rate = 0.9;
  const ClusterSpec back = cluster_from_json(cluster_to_json(c), "c.json");
  EXPECT_EQ(back.gemm_small_k, 48);
  EXPECT_EQ(back.stream_k_min_k, 2048);
  EXPECT_EQ(back.stream_k_rate, 0.9);
  nlohmann::json bad = {{"base", "h200"}, {"kernels", {{"stream_k", {{"rate", 1.5}}}}}};
  EXPECT_THROW(cluster_from_json(bad, "c.json"), InputError);
  bad = {{"base", "h200"}, {"kernels", {{"stream_k", {{"min", 1}}}}}};
  EXPECT_THROW(cluster_from_json(bad, "c.json"), InputError);
}

// BF16 and FP8 GEMMs of the same transformer shapes, measured in one run per GPU on an H200 and
// an H100 (scripts/measure_gemms.py; its split fixed in the script before any use). Neither file
// was used to fit anything: they check the shape model (its constants fitted on
// h200_gemm_bf16.json) and the FP8 factor fitted on whole NeMo runs.
struct ShapeFiles {
  const char* gpu;  // file prefix
  const char* preset;
};
constexpr ShapeFiles kShapeFiles[] = {{"h200", "h200"}, {"h100", "h100-sxm"}};

GemmCorpus shapes(const ShapeFiles& f, const std::string& dtype) {
  return load_gemm_corpus(std::string(JAXPP_TEST_DATA_DIR) + "/kernels/" + f.gpu +
                          "_gemm_shapes_" + dtype + ".json");
}

TEST(GemmShapes, TheBf16AndFp8FilesHoldTheSameShapes) {
  for (const ShapeFiles& files : kShapeFiles) {
    SCOPED_TRACE(files.gpu);
    const GemmCorpus b = shapes(files, "bf16");
    const GemmCorpus f = shapes(files, "fp8");
    EXPECT_EQ(b.cluster, files.preset);
    EXPECT_EQ(b.dtype, Dtype::kBf16);
    EXPECT_EQ(f.dtype, Dtype::kFp8);
    ASSERT_EQ(b.rows.size(), f.rows.size());
    int test = 0;
    for (size_t i = 0; i < b.rows.size(); ++i) {
      EXPECT_EQ(b.rows[i].m, f.rows[i].m);
      EXPECT_EQ(b.rows[i].n, f.rows[i].n);
      EXPECT_EQ(b.rows[i].k, f.rows[i].k);
      EXPECT_EQ(b.rows[i].test, f.rows[i].test);
      EXPECT_EQ(f.rows[i].layout, "NT") << "Hopper's FP8 GEMMs take one layout";
      test += b.rows[i].test ? 1 : 0;
    }
    EXPECT_EQ(test, 222);
    EXPECT_EQ(b.rows.size() - test, 342u);
  }
}

// The BF16 shape model, fitted on the older H200 file, on these held-out shapes: test rows 3.1 %
// (H200) and 3.0 % (H100) mean |error|, the grids 4.1 % and 3.4 %.
TEST(GemmShapes, TheBf16ShapeModelPredictsTheNewShapesOnBothGpus) {
  for (const ShapeFiles& files : kShapeFiles) {
    SCOPED_TRACE(files.gpu);
    const GemmCorpus g = shapes(files, "bf16");
    const ClusterSpec c = cluster_preset(files.preset);
    EXPECT_LE(score_gemms(g, c, "test", 0.10).mean_abs_error, 0.04);
    EXPECT_LE(score_gemms(g, c, "fit", 0.10).mean_abs_error, 0.05);
  }
}

// An FP8 k-loop runs at twice the BF16 rate, so the fixed cost per tile is twice as deep in k
// (OperatorCost::gemm_efficiency). Test rows, H200: 6.1 % mean, 150 of 180 within ±10 %; with the
// BF16 depth 7.4 %, 137. H100: 4.7 %, 158 of 177; with the BF16 depth 5.9 %, 149.
TEST(GemmShapes, Fp8GemmsPayTheirShortKAtTheFp8Rate) {
  const struct {
    ShapeFiles files;
    double mean;
    int within;
  } cases[] = {{kShapeFiles[0], 0.065, 145}, {kShapeFiles[1], 0.052, 154}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.files.gpu);
    const GemmCorpus g = shapes(c.files, "fp8");
    const GemmScore test = score_gemms(g, cluster_preset(c.files.preset), "test", 0.10);
    EXPECT_LE(test.mean_abs_error, c.mean);
    EXPECT_GE(test.in_band, c.within);
    // The BF16 depth: the same file scored with half the short-k constant for FP8.
    ClusterSpec bf16_depth = cluster_preset(c.files.preset);
    bf16_depth.gemm_small_k /= 2;
    const GemmScore before = score_gemms(g, bf16_depth, "test", 0.10);
    EXPECT_GT(before.mean_abs_error, c.mean);
    EXPECT_LT(before.in_band, c.within);
  }
}

// The Hopper FP8 factor (0.90) is fitted on four whole NeMo runs. The kernels give it
// independently: if FP8 GEMMs ran at the factor the preset says, measured / predicted would be
// the same for the FP8 and the BF16 file; the factor the kernels imply is the preset's times the
// ratio of the two scales: H200 0.895 on the grid, 0.893 on the test shapes; H100 0.899, 0.886.
TEST(GemmShapes, TheFittedHopperFp8FactorAgreesWithTheMeasuredKernels) {
  for (const ShapeFiles& files : kShapeFiles) {
    SCOPED_TRACE(files.gpu);
    const GemmCorpus b = shapes(files, "bf16");
    const GemmCorpus f = shapes(files, "fp8");
    const auto implied = [&](const ClusterSpec& c, const std::string& split) {
      return c.fp8_gemm_efficiency * score_gemms(b, c, split, 0.1).scale /
             score_gemms(f, c, split, 0.1).scale;
    };
    const ClusterSpec preset = cluster_preset(files.preset);
    for (const char* split : {"fit", "test"})
      EXPECT_NEAR(implied(preset, split) / preset.fp8_gemm_efficiency, 1.0, 0.03) << split;
    // The kernels' figure does not follow the preset: a factor 10 % off is found out.
    ClusterSpec off = preset;
    off.fp8_gemm_efficiency *= 1.1;
    EXPECT_NEAR(implied(off, "test"), implied(preset, "test"), 0.01);
    EXPECT_GT(std::fabs(implied(off, "test") / off.fp8_gemm_efficiency - 1.0), 0.08);
  }
}

}  // namespace
}  // namespace jaxpp
