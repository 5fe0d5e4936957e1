// The cost model against the real validation corpus (tests/validation/corpus.json, its sources and
// fit/test split in the file; docs/validation.md): every test row not marked expected_failure must
// be predicted within ±10 % of its measured step time — except the rows of kWiderBand, held to
// ±15 % and named with what the model misses there (a row of that list back within ±10 % fails
// too, so the list cannot go stale) — the mean |error| of those rows must be at most 5 %, and
// every row marked expected_failure must really be outside the band (an unexpected pass means the
// mark is stale). The fit rows are not held to the band here: they chose the
// cluster constants (scripts/fit_costmodel.py). The table is printed on every run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>

#include "costmodel/cluster.h"
#include "costmodel/corpus.h"
#include "simulator/model_validation.h"

namespace jaxpp {
namespace {

constexpr double kBand = 0.10;
constexpr double kWiderBandLimit = 0.15;
constexpr double kMaxMeanAbsError = 0.05;

// Test rows outside ±10 % with the fitted constants of 2026-11-26 (refitted after the GEMM
// shape constants), and why.
struct WiderBandRow {
  const char* id;
  const char* reason;
};
constexpr WiderBandRow kWiderBand[] = {
    {"korthikanti2022-1T-full",
     "+13.9 %: pp 64 with two layers per stage; the last stage's LM head makes it 6 % heavier "
     "than the others and it paces the 1F1B steady state (its selective twin, a fit row, is "
     "+12.6 %); with the GEMM shape constants fitted on measured H200 GEMMs (stream-K, "
     "gemm_small_k 96) and A100's constant refitted, the 1T rows' large GEMMs lose no wave "
     "quantization and the refit lowered the constant for the smaller models' rows"},
    {"mbridge2511-llama3.1-405B-1024gpu-h100",
     "-12.4 %: H100's FP8 GEMM factor (0.94) comes from kernel benchmarks, no H100 FP8 row is a "
     "fit row; the same pipeline (tp 8 pp 8 cp 2 v 8, 64 microbatches) in BF16 "
     "(dgxc2025-llama3.1-405B-512gpu-h100, -1.9 %) ran 1.41x slower than this FP8 run, the model "
     "predicts 1.58x: it overstates the FP8 gain of the 405B's large GEMMs on Hopper"},
};

const WiderBandRow* wider_band(const std::string& id) {
  for (const WiderBandRow& w : kWiderBand)
    if (id == w.id) return &w;
  return nullptr;
}

const std::string kCorpus = std::string(JAXPP_TEST_DATA_DIR) + "/../validation/corpus.json";

const ModelValidationReport& report() {
  static const Corpus corpus = load_corpus(kCorpus);
  static const ModelValidationReport r = [] {
    ModelValidationOptions o;
    o.band = kBand;
    ModelValidationReport rep = validate_corpus(corpus, o);
    std::printf("%-40s %-5s %-9s %10s %10s %8s  %s\n", "id", "split", "gpu", "measured_s",
                "predicted", "error", "status");
    for (const CorpusRowResult& row : rep.rows) {
      std::printf("%-40s %-5s %-9s %10.3f %10.3f %+7.1f%%  %s%s\n", row.row->id.c_str(),
                  std::string(to_string(row.row->split)).c_str(), row.row->cluster.c_str(),
                  row.measured_step_time_s, row.predicted_step_time_s, row.error * 100,
                  std::string(to_string(row.status)).c_str(),
                  row.ran() ? "" : (": " + row.message).c_str());
    }
    std::printf("fit:  %d scored, %d in band, mean |error| %.1f%%, max %.1f%% (%s)\n",
                rep.fit.scored, rep.fit.in_band, rep.fit.mean_abs_error * 100,
                rep.fit.max_abs_error * 100, rep.fit.max_row.c_str());
    std::printf("test: %d scored, %d in band, mean |error| %.1f%%, max %.1f%% (%s)\n",
                rep.test.scored, rep.test.in_band, rep.test.mean_abs_error * 100,
                rep.test.max_abs_error * 100, rep.test.max_row.c_str());
    return rep;
  }();
  return r;
}

TEST(CorpusValidation, EveryTestRowIsWithinTenPercentOrItsNamedWiderBand) {
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->split != CorpusSplit::kTest || r.row->expected_failure) continue;
    EXPECT_TRUE(r.ran()) << r.row->id << ": rejected by the simulator: " << r.message;
    if (!r.ran()) continue;
    if (const WiderBandRow* w = wider_band(r.row->id)) {
      EXPECT_LE(std::fabs(r.error), kWiderBandLimit) << r.row->id << ": " << w->reason;
      EXPECT_GT(std::fabs(r.error), kBand)
          << r.row->id << " is back within ±10 %: remove it from kWiderBand";
      continue;
    }
    EXPECT_LE(std::fabs(r.error), kBand)
        << r.row->id << ": predicted " << r.predicted_step_time_s << " s, measured "
        << r.measured_step_time_s << " s (" << r.row->where << ")";
  }
}

TEST(CorpusValidation, MeanAbsoluteErrorOfTheTestRowsIsAtMostFivePercent) {
  ASSERT_GT(report().test.scored, 0) << "the corpus has no scored test row";
  EXPECT_LE(report().test.mean_abs_error, kMaxMeanAbsError);
}

TEST(CorpusValidation, EveryExpectedFailureIsReallyOutsideTheBand) {
  for (const CorpusRowResult& r : report().rows) {
    if (!r.row->expected_failure) continue;
    EXPECT_NE(r.status, CorpusRowStatus::kUnexpectedPass)
        << r.row->id << " is marked expected_failure (" << *r.row->expected_failure
        << ") but is predicted within the band (error " << r.error * 100 << " %): remove the mark";
  }
}

// Every run trained on its GPU, so every run is predicted to fit. The Llama 3 405B rows fit since
// their gradients were sharded as the paper states (78.1 and 71.3 GiB of 80; 88.3 and 81.6 GiB
// with full gradient buffers); the FP8 405B run on 256 GB200 since FP8 stashes 1-byte GEMM inputs
// and keeps FP8 weights (179.8 GiB of 186; 206 GiB with the 16-bit inventory).
// Except the rows below, whose runs saved memory in a way the model does not represent; each is
// held to not fitting, so a mark the model outgrows fails.
struct DoesNotFitRow {
  const char* id;
  const char* reason;
};
constexpr DoesNotFitRow kDoesNotFit[] = {
    {"mbridge2511fsdp-llama3-70B-64gpu-gb200",
     "319.5 GiB of 186: the recipe offloads the activations of 40 of the 80 layers to the host "
     "(cpu_offloading_num_layers=40), which the model does not represent; about 150 GiB of the "
     "stash stays on the GPU with it"},
};

const DoesNotFitRow* does_not_fit(const std::string& id) {
  for (const DoesNotFitRow& d : kDoesNotFit)
    if (id == d.id) return &d;
  return nullptr;
}

TEST(CorpusValidation, EveryRunFitsItsGpu) {
  int fits = 0, marked = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (!r.ran()) continue;
    if (const DoesNotFitRow* d = does_not_fit(r.row->id)) {
      ++marked;
      EXPECT_FALSE(r.fits) << r.row->id << " is marked as not fitting (" << d->reason
                           << ") but is predicted to fit: remove the mark";
      continue;
    }
    EXPECT_TRUE(r.fits) << r.row->id << ": predicted " << r.peak_memory_bytes / double(1 << 30)
                        << " GiB, the run trained on the GPU";
    fits += r.fits;
  }
  EXPECT_GE(fits, 72);
  EXPECT_EQ(marked, static_cast<int>(std::size(kDoesNotFit)));
}

TEST(CorpusValidation, HardwareFlopsMatchNarayanansFormula) {
  // F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per iteration with full recompute: the count the
  // narayanan2021 rows' TFLOP/s use, and the simulator's hardware FLOPs.
  const ModelSpec m = load_model("megatron-18.4b");
  const double B = 1, s = 2048, l = 40, h = 6144, V = 51200;
  const double paper = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(m.hardware_flops_per_sequence(Recompute::kFull) / paper, 1.0, 0.01);
}

TEST(CorpusValidation, WiderBandRowsAreTestRowsOfTheCorpus) {
  for (const WiderBandRow& w : kWiderBand) {
    bool found = false;
    for (const CorpusRowResult& r : report().rows)
      found |= r.row->id == w.id && r.row->split == CorpusSplit::kTest;
    EXPECT_TRUE(found) << w.id;
  }
}

// Each GPU whose preset carries a constant fitted on its own corpus rows (costmodel/cluster.cc)
// is also scored out of sample: at least three of its test rows run and are not expected
// failures, so a fitted constant cannot stand on its fit rows alone. MI300X is the one exception,
// held to two: its only published source with a configuration stated well enough to simulate
// (primuspipe2026, docs/validation_sources.md) has three encodable rows, which the split rule
// divides into one fit and two test rows; docs/validation.md says so next to its figures.
struct FittedGpu {
  const char* gpu;
  int min_scored_test_rows;
};
constexpr FittedGpu kFittedGpus[] = {
    {"a100-80g", 3}, {"h100-sxm", 3}, {"gb200-nvl72", 3}, {"mi300x", 2}};

int scored_test_rows(const ModelValidationReport& rep, const std::string& gpu) {
  int scored = 0;
  for (const CorpusRowResult& r : rep.rows)
    scored += r.row->cluster == gpu && r.row->split == CorpusSplit::kTest &&
              !r.row->expected_failure && r.ran();
  return scored;
}

TEST(CorpusValidation, EveryFittedGpuHasScoredTestRows) {
  for (const FittedGpu& f : kFittedGpus)
    EXPECT_GE(scored_test_rows(report(), f.gpu), f.min_scored_test_rows) << f.gpu;
}

// The corpus restricted to one GPU's rows.
Corpus rows_on(const Corpus& corpus, const std::string& gpu) {
  Corpus c = corpus;
  c.rows.clear();
  for (const CorpusRow& r : corpus.rows)
    if (r.cluster == gpu) c.rows.push_back(r);
  return c;
}

// The MI300X rows are what moved its constant off H100's: with the H100 value the preset used to
// borrow, every one of them is predicted far outside the band (about 50 % too fast), so the band
// test above would fail if the borrowed constant came back.
TEST(CorpusValidation, Mi300xRowsRejectTheBorrowedH100Constant) {
  static const Corpus corpus = load_corpus(kCorpus);
  const Corpus mi300x = rows_on(corpus, "mi300x");
  ASSERT_EQ(mi300x.rows.size(), 3u);
  ModelValidationOptions o;
  o.band = kBand;
  o.cluster_override = load_cluster("mi300x");
  o.cluster_override->gemm_efficiency_max = load_cluster("h100-sxm").gemm_efficiency_max;
  const ModelValidationReport borrowed = validate_corpus(mi300x, o);
  ASSERT_EQ(borrowed.rows.size(), 3u);
  for (const CorpusRowResult& r : borrowed.rows) {
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    EXPECT_LT(r.error, -0.40) << r.row->id;
    EXPECT_FALSE(r.status == CorpusRowStatus::kPass) << r.row->id;
  }
  // The fitted preset brings the same rows into the band.
  const ModelValidationReport fitted = validate_corpus(mi300x, ModelValidationOptions{});
  for (const CorpusRowResult& r : fitted.rows)
    EXPECT_LE(std::fabs(r.error), kBand) << r.row->id;
}

// The Blackwell FP8 GEMM factor (costmodel/cluster.cc, kBlackwellFp8GemmEfficiency) is fitted
// jointly on the FP8 fit rows of B200 and GB200: it is scored on at least as many FP8 test rows
// of those GPUs, one per GPU at least. (B200 has 2 rows in all, so it is not in the list above.)
TEST(CorpusValidation, TheFittedFp8FactorHasScoredTestRowsOnEachOfItsGpus) {
  int fit = 0, test = 0;
  for (const char* gpu : {"b200", "gb200-nvl72"}) {
    int on_gpu = 0;
    for (const CorpusRowResult& r : report().rows) {
      if (r.row->cluster != gpu || !r.row->fp8) continue;
      if (r.row->split == CorpusSplit::kFit) ++fit;
      const bool scored = r.row->split == CorpusSplit::kTest && !r.row->expected_failure && r.ran();
      on_gpu += scored;
      test += scored;
    }
    EXPECT_GE(on_gpu, 1) << gpu;
  }
  EXPECT_GE(fit, 1);
  EXPECT_GE(test, fit);
}

// The FP8 model is scored out of sample on both GPU generations it was built for: H100 (its FP8
// factor from kernel benchmarks) and B200 (fitted); the band is checked above.
TEST(CorpusValidation, Fp8RowsAreScoredOnHopperAndBlackwell) {
  int h100 = 0, b200 = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (!r.row->fp8 || r.row->split != CorpusSplit::kTest || !r.ran()) continue;
    h100 += r.row->cluster == "h100-sxm";
    b200 += r.row->cluster == "b200";
  }
  EXPECT_GE(h100, 2);
  EXPECT_GE(b200, 1);
}

TEST(CorpusValidation, EnoughRowsSourcesAndHopperRows) {
  const ModelValidationReport& rep = report();
  EXPECT_GE(rep.rows.size(), 40u);
  EXPECT_GE(rep.by_source.size(), 5u);
  int hopper = 0;
  for (const CorpusRowResult& r : rep.rows) hopper += r.row->cluster.rfind("h", 0) == 0;
  EXPECT_GE(hopper * 3, static_cast<int>(rep.rows.size())) << "a third on H100-class GPUs";
}

}  // namespace
}  // namespace jaxpp
