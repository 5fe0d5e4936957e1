// The cost model against the real validation corpus (tests/validation/corpus.json, its sources and
// fit/test split in the file; docs/validation.md): every test row not marked expected_failure must
// be predicted within ±10 % of its measured step time — except the rows of kWiderBand, held to
// ±15 % and named with what the model misses there (a row of that list back within ±10 % fails
// too, so the list cannot go stale) — the mean |error| of those rows must be at most 5 %, and
// every row marked expected_failure must really be outside the band (an unexpected pass means the
// mark is stale). The fit rows are not held to the band here: they chose the
// cluster constants (scripts/fit_costmodel.py). The table is printed on every run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/corpus.h"
#include "simulator/model_validation.h"
#include "simulator/plan_builder.h"
#include "trace/trace.h"

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
    {"nemo2407-llama3-8B-8gpu",
     "-12.9 %: the NeMo 24.07 release ran this configuration (Llama 3 8B on 8 H100, tp 1 pp 1 "
     "cp 2, 32 microbatches of one 8192-token sequence, FP8) in 10.89 s; NeMo 24.09 ran the same "
     "configuration (Llama 3.1 8B, the same shape at 8192 tokens) in 9.67 s (dgxc-benchmarking "
     "llama3.1/README_8b.md, FP8 table), 12.6 % faster, and the model predicts 9.49 s: the gap is "
     "the older release's, not the FP8 factor's (its BF16 twin dgxc2024-llama3.1-8B-8gpu, 24.09, "
     "is +2.5 %)"},
    {"nemomixtral-mixtral-8x7B-64gpu-gb200-2504",
     "-10.5 %: -7.4 % until a GEMM's saturation curve was taken at the work it issues "
     "(2026-11-29): the curve's fixed cost had been paid once per idle SM, which priced the "
     "router's 8192 x 8 x 4096 GEMM at 168 µs per call on GB200 (19 µs now); that over-pricing "
     "had hidden 3 % of this MoE run's missing time. "
     "Its B200 twin (fit, NeMo 25.02) is -5.4 %; no MoE constant is fitted"},
    // mbridgemxfp8-llama3-8B-8gpu-b200-2509 was here (+11.4 %) until GB200 took B200's attention
    // fractions (2026-11-29): the model had put this B200 run 16 % behind the same run on GB200
    // where the tables measure 1-3 %; it is +7.9 % since.
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

// Rows are scored side by side (ModelValidationOptions::threads): each in its own place, so the
// report is the same for any thread count, error rows included (small.json's a-bad-tp).
TEST(CorpusValidation, TheReportIsTheSameForAnyNumberOfThreads) {
  const Corpus corpus = load_corpus(std::string(JAXPP_TEST_DATA_DIR) + "/corpus/small.json");
  ModelValidationOptions one, many;
  one.threads = 1;
  many.threads = 4;
  const ModelValidationReport a = validate_corpus(corpus, one);
  const ModelValidationReport b = validate_corpus(corpus, many);
  ASSERT_EQ(a.rows.size(), corpus.rows.size());
  for (size_t i = 0; i < corpus.rows.size(); ++i) EXPECT_EQ(b.rows[i].row, &corpus.rows[i]);
  EXPECT_EQ(validation_report_to_json(a).dump(), validation_report_to_json(b).dump());
  EXPECT_TRUE(std::any_of(b.rows.begin(), b.rows.end(),
                          [](const CorpusRowResult& r) { return !r.ran(); }));
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
// and keeps FP8 weights (179.8 GiB of 186; 206 GiB with the 16-bit inventory). Except the rows of
// kNotPredictedToFit, whose runs saved memory in a way the model does not represent: each must
// stay over its GPU's memory, by no more than its stated fraction (a row of the list predicted to
// fit fails, so the list cannot go stale).
struct NotPredictedToFitRow {
  const char* id;
  double max_over;  // predicted peak / GPU memory stays below this
  const char* reason;
};
constexpr NotPredictedToFitRow kNotPredictedToFit[] = {
    {"nemo2407-llama3-8B-8gpu", 1.10,
     "83.0 GiB of 80: NeMo 24.07's FP8 recipe keeps 16-bit weights (fp8_params false), so the "
     "model holds the 16-bit weight, TE's cached FP8 copy and its transpose (2 bytes per "
     "transformer-layer parameter more than in BF16); its BF16 twin (dgxc2024-llama3.1-8B-8gpu) "
     "is predicted at 74.1 GiB. llama3_8b.yaml's distributed_fused_adam keeps Apex's "
     "master-weight remainders (optimizer_state 'remainders', 1.9 GiB less than the fp32 "
     "state): not enough. Each term checked against the code (docs/validation.md, FP8 rows on "
     "H100): Apex's contiguous grad buffer in its fp32 default, TE's cached weight_fp8 and "
     "weight_t_fp8, the saved FP8 GEMM inputs; none is counted that the frameworks free. The "
     "table does not publish the run's settings: the launcher's GPT-3 FP8 performance recipes "
     "reduce gradients in bf16 (grad_sync_dtype bf16), llama3_8b.yaml does not; with bf16 "
     "gradients the row would be at 70.0 GiB (the row's assumptions, 2026-11-28)"},
    {"nemo2407-nemotron-340B-128gpu", 1.10,
     "84.5 GiB of 80: as above, the 16-bit weights plus TE's FP8 copy and transpose (fp8_params "
     "false); its BF16 twin (dgxc2024-nemotron4-340B-128gpu) is predicted at 79.5 GiB. "
     "nemotron_340b.yaml sets optim.dtype bf16 for mcore_distributed_optim, which NeMo does not "
     "pass to Megatron-Core's OptimizerConfig (setup_megatron_optimization: precision, lr, "
     "weight decay, betas, clipping and the overlap flags only), so the fp32 state stands. The "
     "recipe version with Apex's distributed_fused_adam and a bf16 state (4 bytes per parameter, "
     "63.0 GiB) has pp 12 and vp 8, not the table's layout"},
    // Since the loss's fp32 copy of the logits is counted (docs/validation.md, The loss's logits
    // in memory): three rows that fitted with the 16-bit logits counted no longer do. A fourth,
    // mbridge2511fsdp-llama3-70B-64gpu-gb200, fits again (185.6 GiB of 186) with Transformer
    // Engine's cross-entropy, which Megatron-Bridge's recipes select (cross_entropy_fusion_impl
    // "te"). The NeMo 25.04 performance scripts of the dgxc2025 row were not read at their
    // release commit, and the 4k row's NeMo 24.03 is NeMo 1.x: both keep the fp32 default.
    {"dgxc2025-nemotron4-15B-16gpu-h100", 1.05,
     "82.1 GiB of 80 (78.2 with the 16-bit logits counted): vocabulary 256000, microbatch 2 at "
     "tp 2, so Megatron-Core's cross-entropy keeps 2 x 4096 x 128000 fp32 exp_logits (3.9 GiB) "
     "and the BF16 logits (2.0 GiB) live beside them while the loss runs. NeMo's performance "
     "scripts (scripts/performance/helpers.py set_perf_optimization_configs) set "
     "cross_entropy_fusion_impl 'te' in the versions read, but the NeMo r2.3.0 commit the "
     "benchmark pins (b4148d21) was not readable: fp32 kept (with 'te': 80.1 GiB, still over). "
     "The same versions set use_precision_aware_optimizer for BF16 (Megatron-Core's "
     "store_param_remainders: 10 bytes per parameter instead of 12): with both, 78.3 GiB"},
    {"nemolongseq2504-llama2-7B-h100-4k", 1.02,
     "80.4 GiB of 80 (79.9 with the 16-bit logits counted): pp 1, one 4096-token microbatch, "
     "the fp32 copy of its 32000 logits per token (0.49 GiB) and the BF16 logits beside it "
     "(0.24 GiB) take it 0.4 GiB over; NeMo 24.03 (NeMo 1.x) has no Transformer Engine "
     "cross-entropy choice (with it: 80.1 GiB, still over)"},
    {"deepseek-v3-2048gpu-h800", 1.05,
     "81.0 GiB of 80 (79.0 with the 16-bit logits counted): the main head's and the MTP "
     "module's losses each keep 4096 x 129280 fp32 values; DeepSeek's HAI-LLM is not public, so "
     "the default (an fp32 copy, as Megatron-Core) is assumed, and the 16-bit logits beside it "
     "while a loss runs are counted once per actor, which is exact for this row "
     "(DeepSeekV3PeaksWhileItsLossStageRuns); with 16-bit saved logits, 79.98 GiB"},
    {"deepseek-v2-2048gpu-h800", 1.30,
     "95 GiB of 80: 'a portion of the operators are recomputed to save activation memory' "
     "(DeepSeek-V2 Section 3.1.3), which operators is not stated: not modelled (recompute none)"},
};

const NotPredictedToFitRow* not_predicted_to_fit(const std::string& id) {
  for (const NotPredictedToFitRow& n : kNotPredictedToFit)
    if (id == n.id) return &n;
  return nullptr;
}

TEST(CorpusValidation, EveryRunFitsItsGpu) {
  int fits = 0, named = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (!r.ran()) continue;
    const double gib = r.peak_memory_bytes / double(1 << 30);
    if (const NotPredictedToFitRow* n = not_predicted_to_fit(r.row->id)) {
      ++named;
      EXPECT_FALSE(r.fits) << r.row->id << " is predicted to fit (" << gib
                           << " GiB): remove it from kNotPredictedToFit";
      EXPECT_LT(r.peak_memory_bytes, n->max_over * r.device_memory_bytes)
          << r.row->id << ": " << n->reason;
      continue;
    }
    EXPECT_TRUE(r.fits) << r.row->id << ": predicted " << gib << " GiB, the run trained on the GPU";
    fits += r.fits;
  }
  EXPECT_EQ(named, static_cast<int>(std::size(kNotPredictedToFit)));
  EXPECT_GE(fits, 170);
}

// The corpus restricted to one GPU's rows.
Corpus rows_on(const Corpus& corpus, const std::string& gpu) {
  Corpus c = corpus;
  c.rows.clear();
  for (const CorpusRow& r : corpus.rows)
    if (r.cluster == gpu) c.rows.push_back(r);
  return c;
}

// The long-sequence rows (nemolongseq2504: 4K to 1024K tokens, context parallelism up to 32) have
// no trend with the sequence length: on each GPU the spread of their errors is within 10 points.
// At their first prediction it was 35 points on H100 (-8 % at 4K to -43 % at 1024K) and 19 on B200
// (-7 % to -27 %): the attention core, 95 % of the step at 1024K, was priced with the fused
// kernels' efficiencies of H100 (FlashAttention-3 fractions) where the H100 runs used
// FlashAttention-2 and the B200 runs a slower cuDNN (docs/validation.md, long sequences). Priced
// so again, the spread comes back, and this test fails.
double error_spread(const ModelValidationReport& rep, const std::string& gpu) {
  double lo = 1, hi = -1;
  for (const CorpusRowResult& r : rep.rows) {
    if (r.row->source != "nemolongseq2504" || r.row->cluster != gpu || !r.ran()) continue;
    lo = std::min(lo, r.error);
    hi = std::max(hi, r.error);
  }
  return hi - lo;
}

TEST(CorpusValidation, LongSequenceRowsHaveNoTrendWithSequenceLength) {
  EXPECT_LE(error_spread(report(), "h100-sxm"), 0.10);
  EXPECT_LE(error_spread(report(), "b200"), 0.10);
  static const Corpus corpus = load_corpus(kCorpus);
  Corpus fused = corpus;
  for (CorpusRow& r : fused.rows) r.config.attention = AttentionKernel::kFlash;
  ModelValidationOptions o;
  o.band = kBand;
  EXPECT_GT(error_spread(validate_corpus(rows_on(fused, "h100-sxm"), o), "h100-sxm"), 0.25)
      << "FlashAttention-2 on the NeMo 24.03 H100 rows";
  ClusterSpec b200 = load_cluster("b200");
  b200.attention_efficiency_forward = load_cluster("h100-sxm").attention_efficiency_forward;
  b200.attention_efficiency_backward = load_cluster("h100-sxm").attention_efficiency_backward;
  o.cluster_override = b200;
  EXPECT_GT(error_spread(validate_corpus(rows_on(corpus, "b200"), o), "b200"), 0.15)
      << "B200's own attention efficiency";
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
    {"a100-80g", 3}, {"h100-sxm", 3}, {"gb200-nvl72", 3}, {"b200", 3}, {"mi300x", 2}};

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

// The FP8 model is scored out of sample on both GPU generations it was built for: H100 and B200
// (each with a fitted factor); the band is checked above.
TEST(CorpusValidation, Fp8RowsAreScoredOnHopperAndBlackwell) {
  int h100 = 0, b200 = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (!r.row->fp8 || r.row->split != CorpusSplit::kTest || !r.ran()) continue;
    h100 += r.row->cluster == "h100-sxm";
    b200 += r.row->cluster == "b200";
  }
  EXPECT_GE(h100, 10);
  EXPECT_GE(b200, 1);
}

// The Hopper FP8 GEMM factor (costmodel/cluster.cc, kHopperFp8GemmEfficiency) is fitted on the
// H100 FP8 fit rows of the nemo2407 source (NeMo 24.07, delayed scaling): they are within ±5 %,
// at least as many H100 FP8 test rows are scored, and the kernel-benchmark value it replaced
// (0.94) predicts every NeMo 24.07 row too fast and the fit rows at more than twice the fitted
// mean error, so this test fails if the old value comes back. The rows are those the factor was
// fitted and scored on: the dense H100 FP8 rows of nemo2407 and mbridge2511 (the long-sequence
// rows, mostly attention, and the MoE rows are scored on their own).
TEST(CorpusValidation, TheHopperFp8FactorIsFittedOnH100Fp8Rows) {
  static const Corpus corpus = load_corpus(kCorpus);
  Corpus h100_fp8 = corpus;
  h100_fp8.rows.clear();
  for (const CorpusRow& r : corpus.rows)
    if (r.cluster == "h100-sxm" && r.fp8 && (r.source == "nemo2407" || r.source == "mbridge2511"))
      h100_fp8.rows.push_back(r);
  ModelValidationOptions o;
  o.band = kBand;
  const ModelValidationReport fitted = validate_corpus(h100_fp8, o);
  int fit = 0, test = 0, nemo = 0;
  for (const CorpusRowResult& r : fitted.rows) {
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    if (r.row->split == CorpusSplit::kFit) {
      ++fit;
      EXPECT_LE(std::fabs(r.error), 0.05) << r.row->id;
    } else {
      test += !r.row->expected_failure;
    }
    nemo += r.row->source == "nemo2407";
  }
  EXPECT_EQ(nemo, 12) << "the 12 rows of NeMo 24.07's pretraining table";
  EXPECT_GE(fit, 4);
  EXPECT_GE(test, fit);
  EXPECT_LE(fitted.fit.mean_abs_error, 0.025);
  // 7.1 % since the norm + quantization fusion (fp8_norm_fusion) made the FP8 rows up to 0.8 %
  // faster with the factor fitted before it; 6.9 % with the factor refitted (0.8875); 6.0 % since
  // FP8 GEMMs pay their short k at the FP8 rate (0.90).
  EXPECT_LE(fitted.test.mean_abs_error, 0.07);

  o.cluster_override = load_cluster("h100-sxm");
  o.cluster_override->fp8_gemm_efficiency = 0.94;
  const ModelValidationReport kernels = validate_corpus(h100_fp8, o);
  for (const CorpusRowResult& r : kernels.rows) {
    if (r.row->source == "nemo2407") {
      EXPECT_LT(r.error, 0.0) << r.row->id;
    }
  }
  // 3.6 % against 2.1 % (4.1 % against 2.0 % before FP8 GEMMs paid their short k at the FP8
  // rate). The kernels measured since (tests/data/kernels/h200_gemm_shapes_*.json, transformer
  // shapes rather than cubes) imply 0.89-0.91: tests/costmodel/gemm_corpus_test.cc.
  EXPECT_GT(kernels.fit.mean_abs_error, 1.5 * fitted.fit.mean_abs_error);
  EXPECT_GT(kernels.test.mean_abs_error, fitted.test.mean_abs_error);
}

// The MoE rows (source mbridgemoe, docs/validation.md "MoE rows"): expert parallelism, grouped
// GEMMs and the all-to-all against published runs. The GB200 BF16 rows are scored test rows,
// their predictions pinned (a change of the MoE physics must update these figures and the docs);
// the H100 FP8-CS rows run about twice as slow as modelled (fit rows and expected failures alike),
// and stay so until the cause is modelled.
struct PinnedMoeRow {
  const char* id;
  double predicted_step_s;
};
// 2026-11-28: 24.712 -> 25.335 and 19.911 -> 20.117 s when the rows' expert GEMMs became
// Transformer Engine's per-expert cuBLAS GEMMs over 4 streams (expert_gemm per_expert; on
// Blackwell too, TE's CUTLASS grouped path being Hopper-only and opt-in). 2026-11-29: 25.335 ->
// 26.013 and 20.117 -> 20.674 s when GB200's attention core took B200's fitted fractions (the
// same die) and GB200's GEMM constant was refitted with them (0.4473 -> 0.4516).
constexpr PinnedMoeRow kPinnedMoeRows[] = {
    {"mbridgemoe-qwen3-235B-a22B-256gpu-gb200-2511", 26.013},
    {"mbridgemoe-deepseek-v3-256gpu-gb200-2511", 20.674},
};

const CorpusRowResult* row_result(const std::string& id) {
  for (const CorpusRowResult& r : report().rows)
    if (r.row->id == id) return &r;
  return nullptr;
}

// A row pinned by a test: it is in the corpus, it ran, and it predicts `predicted_step_s` within
// 0.5 %. Returns the row for the test's own checks, or nullptr (the failure recorded) when it is
// missing or did not run.
const CorpusRowResult* pinned_row(const char* id, double predicted_step_s) {
  const CorpusRowResult* r = row_result(id);
  if (r == nullptr) {
    ADD_FAILURE() << id << ": not in the corpus";
    return nullptr;
  }
  if (!r->ran()) {
    ADD_FAILURE() << id << ": " << r->message;
    return nullptr;
  }
  EXPECT_NEAR(r->predicted_step_time_s, predicted_step_s, 0.005 * predicted_step_s) << id;
  return r;
}

TEST(CorpusValidation, MoeRowsAreExpertParallelAndSplitBeforePrediction) {
  int fit = 0, test = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->source != "mbridgemoe") continue;
    EXPECT_TRUE(r.row->model.moe.enabled()) << r.row->id;
    EXPECT_GT(r.row->config.ep, 1) << r.row->id;
    EXPECT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    EXPECT_TRUE(r.fits) << r.row->id;
    (r.row->split == CorpusSplit::kFit ? fit : test)++;
  }
  EXPECT_EQ(fit, 2);
  EXPECT_EQ(test, 4);
}

TEST(CorpusValidation, MoeRowsOnGb200ArePinnedAndWithinTheBand) {
  for (const PinnedMoeRow& p : kPinnedMoeRows) {
    const CorpusRowResult* r = pinned_row(p.id, p.predicted_step_s);
    if (r == nullptr) continue;
    EXPECT_EQ(r->row->split, CorpusSplit::kTest) << p.id;
    EXPECT_FALSE(r->row->expected_failure.has_value()) << p.id;
    EXPECT_LE(std::fabs(r->error), kBand) << p.id;
  }
  // The DeepSeek-V3 recipe's recompute_modules ["mla_up_proj"] (selective).
  const CorpusRowResult* v3 = row_result("mbridgemoe-deepseek-v3-256gpu-gb200-2511");
  ASSERT_NE(v3, nullptr);
  EXPECT_EQ(v3->row->config.recompute, Recompute::kSelective);
  EXPECT_EQ(v3->row->config.recompute_modules, recompute_module_bit(RecomputeModule::kMlaUpProj));
}

TEST(CorpusValidation, MoeRowsOnH100AreFarTooFastAsDocumented) {
  int rows = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->source != "mbridgemoe" || r.row->cluster != "h100-sxm") continue;
    ++rows;
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    EXPECT_TRUE(r.row->fp8) << r.row->id;
    EXPECT_LT(r.error, -0.40) << r.row->id << " is no longer 40 % short: update docs/validation.md";
    if (r.row->split == CorpusSplit::kTest) {
      EXPECT_TRUE(r.row->expected_failure.has_value()) << r.row->id;
    }
  }
  EXPECT_EQ(rows, 4);
}

// The DGX-GB300 MoE rows (source mbridgegb300, docs/validation.md "MoE on DGX-GB300"): seven rows,
// all test rows by the split rule (no MoE constant is fitted on GB300 rows), scored at the GB300
// rate fitted on the dense fit rows. Their predictions are pinned (a change of the MoE, MXFP8 or
// GB300 physics must update these figures and the docs; moved 1.3-3.6 % slower on 2026-11-29 with
// GB300's attention core scaled from B200's fractions and its rate refitted, 0.54 -> 0.5466; the
// Qwen3-30B-A3B pair 0.5-0.9 % faster later that day, when a GEMM's saturation curve was taken at
// the work it issues). The 26.02 DeepSeek-V3 run counts its
// MTP module (the table's FLOPs per token and the recipe's layout), the 25.11 runs do not.
constexpr PinnedMoeRow kPinnedGb300MoeRows[] = {
    {"mbridgegb300-deepseek-v3-256gpu-2602-mxfp8", 12.868},
    {"mbridgegb300-deepseek-v3-256gpu-2511", 17.296},
    {"mbridgegb300-deepseek-v3-256gpu-2511-mxfp8", 12.692},
    {"mbridgegb300-qwen3-30B-a3B-8gpu-2602-mxfp8", 6.705},
    {"mbridgegb300-qwen3-30B-a3B-8gpu-2511-mxfp8", 7.160},
    {"mbridgegb300-qwen3-235B-a22B-256gpu-2602-mxfp8", 17.564},
    {"mbridgegb300-qwen3-235B-a22B-256gpu-2511", 21.775},
};

TEST(CorpusValidation, Gb300MoeRowsAreTestRowsSplitBeforePredictionAndPinned) {
  int rows = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->source != "mbridgegb300" || !r.row->model.moe.enabled()) continue;
    ++rows;
    EXPECT_EQ(r.row->split, CorpusSplit::kTest) << r.row->id;
    EXPECT_EQ(r.row->cluster, "gb300-nvl72") << r.row->id;
    EXPECT_GT(r.row->config.ep, 1) << r.row->id;
    EXPECT_EQ(r.row->model.moe.expert_gemm, ExpertGemm::kPerExpert) << r.row->id;
    EXPECT_EQ(r.row->config.moe_dispatcher, MoeDispatcher::kDeepEP) << r.row->id << ": HybridEP";
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    EXPECT_TRUE(r.fits) << r.row->id;
    const bool deepseek = r.row->model.mla.kv_lora_rank > 0;
    const bool release_2602 = r.row->id.find("-2602") != std::string::npos;
    EXPECT_EQ(r.row->model.mtp_modules, deepseek && release_2602 ? 1 : 0) << r.row->id;
  }
  EXPECT_EQ(rows, static_cast<int>(std::size(kPinnedGb300MoeRows)));
  for (const PinnedMoeRow& p : kPinnedGb300MoeRows) pinned_row(p.id, p.predicted_step_s);
}

// The BF16 GB300 MoE rows are scored within the band; four of the five MXFP8 ones are 12-22 % too
// fast and expected failures (their reasons give the evidence; the fifth, DeepSeek-V3 26.02, is
// -9.4 % and scored since 2026-11-29): on the one layout run in both precisions
// (DeepSeek-V3, 25.11: PP 2, VP 4, EP 32, MBS 1) the runs measure MXFP8 1.13x faster than BF16,
// the model 1.36x. Fails once the MXFP8 MoE path is priced closer (update docs/validation.md and
// the rows' expected_failure then) or a BF16 row leaves the band.
TEST(CorpusValidation, Gb300MoeBf16RowsAreInTheBandAndMxfp8RowsTooFast) {
  int bf16 = 0, mxfp8 = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->source != "mbridgegb300" || !r.row->model.moe.enabled()) continue;
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    if (!r.row->fp8) {
      ++bf16;
      EXPECT_FALSE(r.row->expected_failure.has_value()) << r.row->id;
      EXPECT_LE(std::fabs(r.error), kBand) << r.row->id;
      continue;
    }
    ++mxfp8;
    EXPECT_EQ(r.row->model.fp8_scaling, Fp8Scaling::kMxfp8) << r.row->id;
    if (r.row->id == "mbridgegb300-deepseek-v3-256gpu-2602-mxfp8") {
      // Within the band (-9.4 %) since GB200's and GB300's attention core is priced at B200's
      // fitted fractions (2026-11-29); scored, no longer an expected failure.
      EXPECT_FALSE(r.row->expected_failure.has_value()) << r.row->id;
      EXPECT_LE(std::fabs(r.error), kBand) << r.row->id;
      continue;
    }
    EXPECT_TRUE(r.row->expected_failure.has_value()) << r.row->id;
    EXPECT_LT(r.error, -kBand) << r.row->id << " is no longer too fast: update docs/validation.md";
  }
  EXPECT_EQ(bf16, 2);
  EXPECT_EQ(mxfp8, 5);
  const CorpusRowResult* bf = row_result("mbridgegb300-deepseek-v3-256gpu-2511");
  const CorpusRowResult* mx = row_result("mbridgegb300-deepseek-v3-256gpu-2511-mxfp8");
  ASSERT_NE(bf, nullptr);
  ASSERT_NE(mx, nullptr);
  ASSERT_TRUE(bf->ran() && mx->ran());
  EXPECT_EQ(bf->row->config.pp, mx->row->config.pp);
  EXPECT_EQ(bf->row->config.ep, mx->row->config.ep);
  EXPECT_EQ(bf->row->config.microbatch_size, mx->row->config.microbatch_size);
  const double measured_gain = bf->measured_step_time_s / mx->measured_step_time_s;
  const double predicted_gain = bf->predicted_step_time_s / mx->predicted_step_time_s;
  EXPECT_NEAR(measured_gain, 1.13, 0.01);
  EXPECT_GT(predicted_gain, measured_gain + 0.15);
}

// The NeMo AutoModel rows (source automodel, docs/validation.md "MoE rows"): a second, independent
// framework (PyTorch FSDP2, DeepEP, torch pipelining) on H100 in BF16. Split by the written rule
// before any prediction: 2 fit, 3 test. Their predictions are pinned (a change of the MoE or FSDP
// physics must update these figures and the docs). The MoE rows are priced with DeepEP's volume
// and the benchmark's fake balanced gate (moe_dispatcher deepep, moe_routing contiguous: each
// token to one or two EP ranks of one node) and come out 12-30 % too fast, a second cause not
// modelled. The dense Llama 3.1 70B row (FSDP2 over 32 ranks, 4 microbatches) was +24.7 % while
// the model moved the whole stage per collective (4.44 s of exposed DP communication); with
// FSDP2's per-block collectives (costmodel/analytic_cost.h) it is +1.4 %, its compute alone +1.2 %.
constexpr PinnedMoeRow kPinnedAutomodelRows[] = {
    {"automodel-qwen3-30B-a3B-8gpu-h100", 19.169},
    {"automodel-llama3.1-70B-64gpu-h100", 19.160},
    {"automodel-deepseek-v3-256gpu-h100", 6.582},
    {"automodel-deepseek-v3-1024gpu-h100", 6.585},
    {"automodel-kimi-k2-256gpu-h100", 3.192},
};

TEST(CorpusValidation, AutomodelRowsAreSplitBeforePredictionAndPinned) {
  int fit = 0, test = 0, moe = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->source != "automodel") continue;
    EXPECT_EQ(r.row->cluster, "h100-sxm") << r.row->id;
    EXPECT_FALSE(r.row->fp8) << r.row->id;
    EXPECT_TRUE(r.row->config.shard_parameters) << r.row->id << ": FSDP2";
    EXPECT_TRUE(r.fits) << r.row->id;
    if (r.row->model.moe.enabled()) {
      ++moe;
      EXPECT_GT(r.row->config.ep, 1) << r.row->id;
      EXPECT_EQ(r.row->config.moe_dispatcher, MoeDispatcher::kDeepEP) << r.row->id;
      EXPECT_EQ(r.row->config.moe_routing, MoeRouting::kContiguous) << r.row->id;
    }
    (r.row->split == CorpusSplit::kFit ? fit : test)++;
  }
  EXPECT_EQ(fit, 2);
  EXPECT_EQ(test, 3);
  EXPECT_EQ(moe, 4);
  for (const PinnedMoeRow& p : kPinnedAutomodelRows) pinned_row(p.id, p.predicted_step_s);
}

TEST(CorpusValidation, AutomodelMoeRowsAreTooFastAndTheDenseRowIsWithinTheBand) {
  int moe = 0, dense = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->source != "automodel") continue;
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    if (!r.row->model.moe.enabled()) {
      ++dense;
      EXPECT_FALSE(r.row->expected_failure.has_value()) << r.row->id;
      EXPECT_LT(std::fabs(r.error), 0.05) << r.row->id << ": update docs/validation.md";
      continue;
    }
    ++moe;
    EXPECT_LT(r.error, -0.10) << r.row->id
                              << " is no longer predicted too fast: update docs/validation.md";
    EXPECT_TRUE(r.row->expected_failure.has_value()) << r.row->id;
  }
  EXPECT_EQ(moe, 4);
  EXPECT_EQ(dense, 1);
}

// The Mixtral rows of NVIDIA's NeMo Framework performance summary (source nemomixtral,
// docs/validation.md "Mixtral (NeMo 25.04)"): Megatron MoE with 8 large experts (top-2) in FP8 on
// Blackwell, NeMo 25.04 on DGX-GB200 (current scaling) and NeMo 25.02 on DGX-B200 (delayed
// scaling). Split by the written rule before any prediction: 1 fit (the 25.02 8x7B on B200), 3
// test. Their predictions are pinned (a change of the MoE, CP or FP8 physics must update these
// figures and the docs). Mixtral-8x7B (EP 8 over 64 data-parallel ranks, 16384 tokens per expert
// GEMM) is -5.4 % on B200 (fit) and -10.5 % on GB200 (test, held to ±15 % in kWiderBand);
// Mixtral-8x22B at 65536 tokens (CP 8, TP 2, PP 4 x VP 14, EP 8) is too fast on both, expected
// failures whose causes the rows cannot tell apart: 26-29 % until GB200's attention core took
// B200's fitted fractions (2026-11-29), GB200 -18.0 % and B200 -26.9 % then, -19.5 % and -28.1 %
// since a GEMM's saturation curve is taken at the work it issues (2026-11-29: the 8-expert router
// GEMM, 8192 x 8 x 4096, had been priced at 168 µs per call on GB200, now 19 µs; 8x7B 2.5-3.3 %
// and 8x22B 1.7-1.9 % faster).
constexpr PinnedMoeRow kPinnedMixtralRows[] = {
    {"nemomixtral-mixtral-8x7B-64gpu-gb200-2504", 0.7611},
    {"nemomixtral-mixtral-8x7B-64gpu-b200-2502", 1.0029},
    {"nemomixtral-mixtral-8x22B-256gpu-gb200-2504", 4.8290},
    {"nemomixtral-mixtral-8x22B-256gpu-b200-2502", 5.2770},
};

TEST(CorpusValidation, MixtralRowsAreSplitBeforePredictionAndPinned) {
  int fit = 0, test = 0, gb200 = 0, b200 = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->source != "nemomixtral") continue;
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    EXPECT_TRUE(r.row->model.moe.enabled()) << r.row->id;
    EXPECT_EQ(r.row->config.ep, 8) << r.row->id;
    EXPECT_EQ(r.row->config.moe_dispatcher, MoeDispatcher::kAllToAll) << r.row->id;
    EXPECT_EQ(r.row->config.moe_routing, MoeRouting::kRandom) << r.row->id << ": token drop, "
                                                              << "padded to capacity";
    EXPECT_TRUE(r.row->fp8) << r.row->id;
    // NeMo 25.04 states per-tensor current scaling; the 25.02 runs used the scripts' default,
    // delayed scaling.
    const bool release_2504 = r.row->id.ends_with("-2504");
    EXPECT_EQ(r.row->model.fp8_scaling,
              release_2504 ? Fp8Scaling::kCurrent : Fp8Scaling::kDelayed)
        << r.row->id;
    EXPECT_EQ(r.row->cluster, release_2504 ? "gb200-nvl72" : "b200") << r.row->id;
    EXPECT_TRUE(r.fits) << r.row->id;
    (r.row->cluster == "b200" ? b200 : gb200)++;
    (r.row->split == CorpusSplit::kFit ? fit : test)++;
  }
  EXPECT_EQ(fit, 1);
  EXPECT_EQ(test, 3);
  EXPECT_EQ(gb200, 2);
  EXPECT_EQ(b200, 2);
  const CorpusRowResult* fit_row = row_result("nemomixtral-mixtral-8x7B-64gpu-b200-2502");
  ASSERT_NE(fit_row, nullptr);
  EXPECT_EQ(fit_row->row->split, CorpusSplit::kFit);
  for (const PinnedMoeRow& p : kPinnedMixtralRows) pinned_row(p.id, p.predicted_step_s);
}

TEST(CorpusValidation, Mixtral8x7BIsWithinItsBandAnd8x22BIsTooFast) {
  int small = 0, large = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->source != "nemomixtral") continue;
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    if (r.row->model.name == "mixtral-8x7b") {
      ++small;
      EXPECT_FALSE(r.row->expected_failure.has_value()) << r.row->id;
      // The GB200 run is held to the wider band by name (kWiderBand), the B200 fit row to ±10 %.
      EXPECT_LE(std::fabs(r.error), wider_band(r.row->id) ? kWiderBandLimit : kBand)
          << r.row->id << ": update docs/validation.md";
      continue;
    }
    ++large;
    EXPECT_EQ(r.row->model.name, "mixtral-8x22b") << r.row->id;
    EXPECT_EQ(r.row->config.cp, 8) << r.row->id;
    EXPECT_EQ(r.row->split, CorpusSplit::kTest) << r.row->id;
    EXPECT_TRUE(r.row->expected_failure.has_value()) << r.row->id;
    EXPECT_LT(r.error, -0.15) << r.row->id
                              << " is no longer 15 % too fast: update docs/validation.md";
  }
  EXPECT_EQ(small, 2);
  EXPECT_EQ(large, 2);
}

// The FSDP rows of Megatron-Bridge (source mbridge2511fsdp: Megatron-FSDP, FP8-CS, Llama 3 8B on 8
// H100 and 70B on 64 GB200) are priced with per-block collectives (costmodel/analytic_cost.h):
// pinned, within the band, and with under 1 % of the step exposed as DP communication (with the
// whole stage per collective they were +5.8 % and +0.3 %). The 8B row recomputes the 5 layers its
// recipe states (recompute full, recompute_layers 5; with no recompute it was 9.510 s, +4.8 %).
constexpr PinnedMoeRow kPinnedMegatronFsdpRows[] = {
    {"mbridge2511fsdp-llama3-8B-8gpu-h100", 9.948},
    {"mbridge2511fsdp-llama3-70B-64gpu-gb200", 7.319},
};

TEST(CorpusValidation, MegatronFsdpRowsArePinnedAndWithinTheBand) {
  for (const PinnedMoeRow& p : kPinnedMegatronFsdpRows) {
    const CorpusRowResult* r = pinned_row(p.id, p.predicted_step_s);
    if (r == nullptr) continue;
    EXPECT_TRUE(r->row->config.shard_parameters) << p.id;
    EXPECT_FALSE(r->row->expected_failure.has_value()) << p.id;
    EXPECT_LE(std::fabs(r->error), kBand) << p.id;
  }
}

// H200's end-to-end rows (source torchtitanh200: torchtitan, Llama 3.1 8B, FP8, FSDP2 over 32 and
// 64 GPUs, one microbatch per step) run torchtitan's selective op checkpointing, encoded as
// recompute op, and FSDP2's collectives are priced one block at a time. Both are needed to bring
// them into the band: first predicted +26.6 % / +25.3 % with full recompute and whole-stage
// collectives, then +15.5 % / +13.5 % with per-block collectives and full recompute. This test
// pins the predictions (a change of the physics must update docs/validation.md) and checks why
// they are in the band: op saves at least the attention forward over full, and full recompute
// would put them outside it; the data-parallel communication left exposed is under 2 % of the
// step.
struct PinnedH200Row {
  const char* id;
  double predicted_step_s;
};
constexpr PinnedH200Row kPinnedH200Rows[] = {
    {"torchtitanh200-llama3.1-8B-32gpu-fp8", 1.607},
    {"torchtitanh200-llama3.1-8B-64gpu-fp8", 1.608},
};

// torchtitanh200's rows (the corpus's other H200 rows, source h200eager, are one-GPU steps).
Corpus h200_rows_with_recompute(const Corpus& corpus, Recompute recompute) {
  Corpus c = rows_on(corpus, "h200");
  std::erase_if(c.rows, [](const CorpusRow& r) { return r.source != "torchtitanh200"; });
  for (CorpusRow& r : c.rows) r.config.recompute = recompute;
  return c;
}

TEST(CorpusValidation, H200RowsAreInTheBandWithOpRecomputeAndPerBlockCollectives) {
  for (const PinnedH200Row& p : kPinnedH200Rows) {
    const CorpusRowResult* r = pinned_row(p.id, p.predicted_step_s);
    if (r == nullptr) continue;
    EXPECT_EQ(r->row->split, CorpusSplit::kTest) << p.id;
    EXPECT_FALSE(r->row->expected_failure.has_value()) << p.id;
    EXPECT_EQ(r->row->config.recompute, Recompute::kOp) << p.id;
    EXPECT_TRUE(r->row->config.shard_parameters) << p.id;
    EXPECT_LE(std::fabs(r->error), kBand) << p.id;
    EXPECT_TRUE(r->fits) << p.id;
  }

  static const Corpus corpus = load_corpus(kCorpus);
  ModelValidationOptions o;
  o.band = kBand;
  // The attention forward: selective (the attention core again) minus none, on the preset.
  // (The reports point into their corpora, which must outlive them.)
  const Corpus no_recompute = h200_rows_with_recompute(corpus, Recompute::kNone);
  const Corpus attention_recompute = h200_rows_with_recompute(corpus, Recompute::kSelective);
  const Corpus full_recompute = h200_rows_with_recompute(corpus, Recompute::kFull);
  const Corpus op_recompute = h200_rows_with_recompute(corpus, Recompute::kOp);
  const ModelValidationReport none = validate_corpus(no_recompute, o);
  const ModelValidationReport selective = validate_corpus(attention_recompute, o);
  const ModelValidationReport full = validate_corpus(full_recompute, o);
  // Nearly free data-parallel links (100x the bandwidth, no latency; the cluster file format
  // caps a link at 100 TB/s): what the per-block all-gathers and reduce-scatters still expose.
  ClusterSpec free_links = load_cluster("h200");
  free_links.intra_node.bandwidth_bytes_per_s *= 100;
  free_links.inter_node.bandwidth_bytes_per_s *= 100;
  free_links.intra_node.latency_s = 0;
  free_links.inter_node.latency_s = 0;
  ModelValidationOptions fast = o;
  fast.cluster_override = free_links;
  const ModelValidationReport op_fast = validate_corpus(op_recompute, fast);
  ASSERT_EQ(none.rows.size(), std::size(kPinnedH200Rows));
  for (size_t i = 0; i < none.rows.size(); ++i) {
    const CorpusRowResult& n = none.rows[i];
    const CorpusRowResult& s = selective.rows[i];
    const CorpusRowResult& fu = full.rows[i];
    const CorpusRowResult& f = op_fast.rows[i];
    const CorpusRowResult* pinned = row_result(n.row->id);
    ASSERT_NE(pinned, nullptr) << n.row->id;
    ASSERT_TRUE(n.ran() && s.ran() && fu.ran() && f.ran())
        << n.row->id << ": " << n.message << s.message << fu.message << f.message;
    const double attention_forward_s = s.predicted_step_time_s - n.predicted_step_time_s;
    const double measured = pinned->measured_step_time_s;
    // op keeps the attention output that full re-runs: it saves at least that forward (and the
    // FP8 weight casts full repeats), and is still slower than no recompute.
    EXPECT_GT(attention_forward_s / measured, 0.05) << n.row->id;
    EXPECT_GE(fu.predicted_step_time_s - pinned->predicted_step_time_s, attention_forward_s)
        << n.row->id;
    EXPECT_GT(pinned->predicted_step_time_s, n.predicted_step_time_s) << n.row->id;
    // Full recompute instead of op would put the row outside the band.
    EXPECT_GT(fu.predicted_step_time_s, (1 + kBand) * measured) << n.row->id;
    // The per-block collectives leave little exposed (free links change the prediction by under
    // 2 % of the step; the whole stage per collective exposed 180-194 ms).
    const double exposed_dp_s = pinned->predicted_step_time_s - f.predicted_step_time_s;
    EXPECT_GE(exposed_dp_s, 0) << n.row->id;
    EXPECT_LT(exposed_dp_s / measured, 0.02) << n.row->id;
  }
}

// DeepSeek's published pre-training cost on H800 (source deepseek, docs/validation.md "H800
// (DeepSeek)"): two test rows, split before any prediction, both predicted too fast. V2 is an
// expected failure; V3, with the low-precision storage of its report's Section 3.3.3 encoded, is
// within the band at its edge (-9.6 % since the FP8 refit of 2026-11-27; -9.8 % before it). Pinned, with the analysis behind the named causes:
// compute at 112 of 132 SMs (the 20 SMs DeepSeek-V3's all-to-all kernels take) keeps V3 in the
// band; without DualPipe's overlap of the all-to-all V3 would be too slow; node-limited routing
// shortens the all-to-all the model prices.
struct PinnedDeepSeekRow {
  const char* id;
  double predicted_step_s;
};
constexpr PinnedDeepSeekRow kPinnedDeepSeekRows[] = {
    {"deepseek-v2-2048gpu-h800", 9.135},
    {"deepseek-v3-2048gpu-h800", 17.999},
};

Corpus deepseek_rows(const Corpus& corpus) {
  Corpus c = corpus;
  c.rows.clear();
  for (const CorpusRow& r : corpus.rows)
    if (r.source == "deepseek") c.rows.push_back(r);
  return c;
}

TEST(CorpusValidation, DeepSeekH800RowsArePredictedTooFastForNamedCauses) {
  for (const PinnedDeepSeekRow& p : kPinnedDeepSeekRows) {
    const CorpusRowResult* r = pinned_row(p.id, p.predicted_step_s);
    if (r == nullptr) continue;
    EXPECT_EQ(r->row->split, CorpusSplit::kTest) << p.id;
    EXPECT_EQ(r->row->cluster, "h800") << p.id;
    EXPECT_LT(r->error, 0) << p.id << ": too fast";
    EXPECT_GT(r->error, -0.25) << p.id;
  }
  const CorpusRowResult* v3 = row_result("deepseek-v3-2048gpu-h800");
  const CorpusRowResult* v2 = row_result("deepseek-v2-2048gpu-h800");
  ASSERT_TRUE(v3 && v2);
  EXPECT_TRUE(v2->row->expected_failure.has_value());
  EXPECT_LT(v2->error, -kBand);
  EXPECT_FALSE(v3->row->expected_failure.has_value());
  EXPECT_GE(v3->error, -kBand);
  EXPECT_EQ(v3->row->config.schedule, "dualpipev");
  EXPECT_EQ(v3->row->config.ep, 64);
  EXPECT_EQ(v3->row->config.moe_node_limit, 4);
  EXPECT_EQ(v3->row->config.moe_dispatcher, MoeDispatcher::kDeepEP);
  EXPECT_TRUE(v3->row->fp8);
  EXPECT_EQ(v3->row->model.mtp_modules, 1);
  // Section 3.2.3: every RMSNorm and MLA up-projection recomputed (Megatron-Core's modules).
  EXPECT_EQ(v3->row->config.recompute, Recompute::kSelective);
  // Section 3.3.3: the SwiGLU output recomputed from its cached inputs (moe_act).
  EXPECT_EQ(v3->row->config.recompute_modules,
            recompute_module_bit(RecomputeModule::kLayernorm) |
                recompute_module_bit(RecomputeModule::kMlaUpProj) |
                recompute_module_bit(RecomputeModule::kMoeAct));
  // Section 3.3.3: bf16 moments with fp32 master weights, the attention output in E5M6 and the
  // routed experts' SwiGLU inputs in FP8.
  EXPECT_EQ(v3->row->config.optimizer_state, OptimizerState::kBf16Moments);
  EXPECT_EQ(v3->row->config.grad_dtype, GradDtype::kFp32);
  EXPECT_TRUE(v3->row->model.low_precision_attention_out);
  EXPECT_TRUE(v3->row->model.low_precision_moe_swiglu_input);
  // 79.0 GiB before the loss's fp32 logits were counted, 81.0 GiB of 80 since
  // (kNotPredictedToFit).
  EXPECT_FALSE(v3->fits) << v3->peak_memory_bytes / double(1 << 30) << " GiB";
  EXPECT_EQ(v2->row->config.recompute, Recompute::kNone);  // which operators: not stated
  EXPECT_EQ(v2->row->config.ep, 8);
  EXPECT_EQ(v2->row->config.moe_device_limit, 3);
  EXPECT_FALSE(v2->row->fp8);
  // Tokens per GPU-second from the GPU-hours per trillion tokens, at the full batch.
  EXPECT_NEAR(v3->measured_step_time_s, 15360.0 * 4096 / (1e12 / (180e3 * 3600) * 2048), 0.01);
  EXPECT_NEAR(v2->measured_step_time_s, 9216.0 * 4096 / (1e12 / (172.8e3 * 3600) * 2048), 0.01);

  static const Corpus corpus = load_corpus(kCorpus);
  const Corpus rows = deepseek_rows(corpus);
  ASSERT_EQ(rows.rows.size(), 2u);
  ModelValidationOptions o;
  o.band = kBand;
  // (1) Compute at 112/132 of the peak: V3 within the band.
  ClusterSpec fewer_sms = load_cluster("h800");
  for (double& peak : fewer_sms.peak_flops_per_s) peak *= 112.0 / 132.0;
  ModelValidationOptions sms = o;
  sms.cluster_override = fewer_sms;
  const ModelValidationReport with_fewer_sms = validate_corpus(rows, sms);
  // (2) The all-to-all serialised instead of overlapped by DualPipe's F&B pairs; (3) no node limit.
  Corpus serial = rows, unlimited = rows;
  for (CorpusRow& r : serial.rows) r.config.moe_overlap = MoeOverlap::kNone;
  for (CorpusRow& r : unlimited.rows) r.config.moe_node_limit = r.config.moe_device_limit = 0;
  const ModelValidationReport serialised = validate_corpus(serial, o);
  const ModelValidationReport no_limit = validate_corpus(unlimited, o);
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    const CorpusRowResult* pinned = row_result(rows.rows[i].id);
    ASSERT_NE(pinned, nullptr);
    const CorpusRowResult& f = with_fewer_sms.rows[i];
    const CorpusRowResult& s = serialised.rows[i];
    const CorpusRowResult& u = no_limit.rows[i];
    ASSERT_TRUE(f.ran() && s.ran() && u.ran()) << f.message << s.message << u.message;
    EXPECT_GT(f.predicted_step_time_s, pinned->predicted_step_time_s * 1.10) << f.row->id;
    EXPECT_GT(u.predicted_step_time_s, pinned->predicted_step_time_s) << u.row->id;
    if (pinned->row->id == "deepseek-v3-2048gpu-h800") {
      EXPECT_LE(std::fabs(f.error), kBand) << "compute at 112 SMs: " << f.error;
      EXPECT_GT(s.error, 0) << "the all-to-all serialised: too slow";
      EXPECT_GT(s.predicted_step_time_s - pinned->predicted_step_time_s, 4.0);
    } else {
      EXPECT_NEAR(s.predicted_step_time_s, pinned->predicted_step_time_s, 1e-9)
          << "V2's all-to-all is not overlapped in either";
    }
  }
}

// DeepSeek-V3 on DualPipeV: the first rank holds the first stage and the last (both losses). The
// memory model counts the 16-bit logits beside the losses' fp32 copies once on that actor for the
// whole step (costmodel/memory.h: exact when the actor's stash peaks while a loss runs, an upper
// bound otherwise). For this row it is exact: every interval at which the first rank is at its
// peak overlaps one of its compute events that runs a task of the last stage (the losses' forward
// or backward, paired with the first stage's work in DualPipeV's F&B pairs). Were the peak
// reached between the losses, the row would be over-counted by the 0.99 GiB of one head's 16-bit
// logits, and this test fails.
TEST(CorpusValidation, DeepSeekV3PeaksWhileItsLossStageRuns) {
  const CorpusRowResult* v3 = row_result("deepseek-v3-2048gpu-h800");
  ASSERT_NE(v3, nullptr);
  const RowExplanation e = explain_row(*v3->row, ModelValidationOptions{}, ExplainOptions{});
  ASSERT_TRUE(e.ran) << e.message;
  PlanSimOptions so;
  so.record_trace = true;
  so.check_memory = false;
  const SimulatedPlan sim = simulate_plan(e.plan, so);
  const Trace& trace = sim.result.trace;
  std::vector<MemorySample> samples;
  for (const MemorySample& m : trace.memory)
    if (m.actor == 0) samples.push_back(m);
  ASSERT_FALSE(samples.empty());
  int64_t peak = 0;
  for (const MemorySample& m : samples) peak = std::max(peak, m.bytes);
  EXPECT_EQ(peak, v3->peak_memory_bytes);  // actor 0 is the busiest
  int last_stage = 0;
  for (const TraceEvent& ev : trace.events)
    for (const TaskRef& t : ev.tasks) last_stage = std::max(last_stage, t.stage);
  auto loss_stage_runs = [&](double from, double to) {
    for (const TraceEvent& ev : trace.events) {
      if (ev.actor != 0 || ev.op != OpKind::kCompute || ev.start_s >= to || ev.end_s <= from)
        continue;
      for (const TaskRef& t : ev.tasks)
        if (t.stage == last_stage) return true;
    }
    return false;
  };
  int peak_intervals = 0;
  for (size_t i = 0; i + 1 < samples.size(); ++i) {
    if (samples[i].bytes != peak || samples[i + 1].time_s <= samples[i].time_s) continue;
    ++peak_intervals;
    EXPECT_TRUE(loss_stage_runs(samples[i].time_s, samples[i + 1].time_s))
        << "actor 0 is at its peak from " << samples[i].time_s << " s to "
        << samples[i + 1].time_s << " s with no task of stage " << last_stage << " running";
  }
  EXPECT_GT(peak_intervals, 0);
}

// The MXFP8 rows (source mbridgemxfp8, docs/validation.md "MXFP8 rows"): their model carries the
// row's fp8_scaling, they were split 3 fit / 7 test before any prediction, and the MXFP8 GEMM
// factor (costmodel/cluster.cc, kBlackwellMxfp8GemmEfficiency) fitted on the fit rows scores the
// test rows better than the per-tensor rate it replaced (factor 1): a lower mean |error| on each
// GPU's test rows and no fewer of them in the band (at factor 1 the B200 405B rows are 13 % and
// the GB200 rows 4-9 % too fast; before GB200 took B200's attention fractions most GB200 rows
// were more than 10 % too fast); priced as per-tensor FP8 (current scaling) the rows change.
TEST(CorpusValidation, Mxfp8RowsAreBlockScaledAndTheirFittedFactorBeatsThePerTensorRate) {
  static const Corpus corpus = load_corpus(kCorpus);
  Corpus mx = corpus;
  mx.rows.clear();
  for (const CorpusRow& r : corpus.rows)
    if (r.source == "mbridgemxfp8") mx.rows.push_back(r);
  ASSERT_EQ(mx.rows.size(), 10u);
  int fit = 0;
  for (const CorpusRow& r : mx.rows) {
    EXPECT_EQ(r.model.fp8_scaling, Fp8Scaling::kMxfp8) << r.id;
    EXPECT_TRUE(r.fp8) << r.id;
    EXPECT_TRUE(r.cluster == "b200" || r.cluster == "gb200-nvl72") << r.id;
    fit += r.split == CorpusSplit::kFit;
  }
  EXPECT_EQ(fit, 3);
  ModelValidationOptions o;
  o.band = kBand;
  const ModelValidationReport fitted = validate_corpus(mx, o);
  EXPECT_EQ(fitted.test.scored, 7);
  EXPECT_LE(fitted.test.mean_abs_error, 0.05);
  for (const char* gpu : {"b200", "gb200-nvl72"}) {
    ModelValidationOptions per_tensor_rate = o;
    per_tensor_rate.cluster_override = load_cluster(gpu);
    per_tensor_rate.cluster_override->mxfp8_gemm_efficiency = 1.0;
    const ModelValidationReport fitted_on = validate_corpus(rows_on(mx, gpu), o);
    const ModelValidationReport unfitted = validate_corpus(rows_on(mx, gpu), per_tensor_rate);
    EXPECT_GT(unfitted.test.mean_abs_error, fitted_on.test.mean_abs_error) << gpu;
    EXPECT_LE(unfitted.test.in_band, fitted_on.test.in_band) << gpu;
  }
  Corpus as_current = mx;
  for (CorpusRow& r : as_current.rows) r.model.fp8_scaling = Fp8Scaling::kCurrent;
  const ModelValidationReport current = validate_corpus(as_current, o);
  for (size_t i = 0; i < current.rows.size(); ++i)
    EXPECT_NE(current.rows[i].predicted_step_time_s, fitted.rows[i].predicted_step_time_s)
        << current.rows[i].row->id;
}

// The Megatron-Bridge rows reduce their gradients in bf16: the performance scripts that produced
// those tables set grad_reduce_in_fp32 False for every Llama 3/3.1, DeepSeek and Qwen3 config
// (docs/validation.md, "Megatron-Bridge gradients in bf16"). The rows had been encoded with the
// preset's fp32 gradients until 2026-11-29; with them the two GB300 MXFP8 runs with pipelines did
// not fit in memory (281.9 and 289.0 GiB). Both are checked here so that the encoding cannot
// drift back unnoticed.
TEST(CorpusValidation, MegatronBridgeRowsReduceGradientsInBf16) {
  static const Corpus corpus = load_corpus(kCorpus);
  int rows = 0;
  for (const CorpusRow& r : corpus.rows) {
    if (r.source.rfind("mbridge", 0) != 0) continue;
    ++rows;
    EXPECT_EQ(r.config.grad_dtype, GradDtype::kBf16) << r.id;
  }
  // mbridge2511 6, mbridge2511fsdp 2, mbridgemxfp8 10, mbridgemoe 6, mbridgegb300 15.
  EXPECT_EQ(rows, 39);
  for (const char* id : {"mbridgegb300-llama3-70B-64gpu-2602-mxfp8",
                         "mbridgegb300-llama3.1-405B-256gpu-2602-mxfp8"}) {
    const CorpusRowResult* r = row_result(id);
    ASSERT_NE(r, nullptr) << id;
    ASSERT_TRUE(r->ran()) << id << ": " << r->message;
    EXPECT_LE(r->peak_memory_bytes, r->device_memory_bytes) << id;
  }
}

// The dense GB300 rows (source mbridgegb300, docs/validation.md "GB300"): split 3 fit / 5 test
// before any prediction; GB300's one constant (costmodel/cluster.cc kGb300GemmEfficiency, the
// sustained tensor-core rate under its 1400 W limit, which scales the attention core with the
// GEMMs) fitted on the fit rows scores the test rows within the band, where GB200's constant,
// which the preset would otherwise inherit, predicts them 12-25 % too slow.
TEST(CorpusValidation, Gb300DenseRowsAreScoredByTheirOwnFittedConstantNotGb200s) {
  static const Corpus corpus = load_corpus(kCorpus);
  Corpus gb300 = corpus;
  gb300.rows.clear();
  for (const CorpusRow& r : corpus.rows)
    if (r.source == "mbridgegb300" && !r.model.moe.enabled()) gb300.rows.push_back(r);
  ASSERT_EQ(gb300.rows.size(), 8u);
  int fit = 0;
  for (const CorpusRow& r : gb300.rows) {
    EXPECT_EQ(r.cluster, "gb300-nvl72") << r.id;
    EXPECT_TRUE(r.fp8) << r.id;
    fit += r.split == CorpusSplit::kFit;
  }
  EXPECT_EQ(fit, 3);
  ModelValidationOptions o;
  o.band = kBand;
  const ModelValidationReport fitted = validate_corpus(gb300, o);
  EXPECT_EQ(fitted.test.scored, 5);
  EXPECT_EQ(fitted.test.in_band, 5);
  EXPECT_LE(fitted.test.mean_abs_error, 0.05);
  ModelValidationOptions as_gb200 = o;
  as_gb200.cluster_override = load_cluster("gb300-nvl72");
  const ClusterSpec gb200 = load_cluster("gb200-nvl72");
  as_gb200.cluster_override->gemm_efficiency_max = gb200.gemm_efficiency_max;
  as_gb200.cluster_override->attention_efficiency_forward = gb200.attention_efficiency_forward;
  as_gb200.cluster_override->attention_efficiency_backward = gb200.attention_efficiency_backward;
  const ModelValidationReport inherited = validate_corpus(gb300, as_gb200);
  EXPECT_GT(inherited.test.mean_abs_error, 0.15);
  EXPECT_LE(inherited.test.in_band, 1);
  for (size_t i = 0; i < inherited.rows.size(); ++i)
    EXPECT_GT(inherited.rows[i].predicted_step_time_s, fitted.rows[i].predicted_step_time_s)
        << inherited.rows[i].row->id;
}

// The MosaicML llm-foundry rows (source llmfoundry: MPT models trained by Composer with PyTorch
// FSDP, data parallel only, BF16; docs/validation.md "PyTorch FSDP: llm-foundry's MPT
// benchmarks"). Per GPU type and model the sequence-2048 row with the most GPUs, split 8 fit / 17
// test before any prediction. The inline MPT models count the table's NumParams less the final
// LayerNorm (2·d, which the model leaves out), FULL_SHARD rows shard parameters and the two
// SHARD_GRAD_OP rows gradients only, and the predictions are pinned.
struct PinnedFoundryRow {
  const char* id;
  double predicted_step_s;
  int64_t table_params;  // the table's NumParams
  int64_t hidden;
};
constexpr PinnedFoundryRow kPinnedFoundryRows[] = {
    {"llmfoundry-mpt-125m-8gpu-a100-80g", 0.8697, 125311488, 768},
    {"llmfoundry-mpt-125m-128gpu-a100-40g", 0.299, 125311488, 768},
    {"llmfoundry-mpt-350m-8gpu-a100-80g", 1.89, 355985408, 1024},
    {"llmfoundry-mpt-350m-128gpu-a100-40g", 0.5575, 355985408, 1024},
    {"llmfoundry-mpt-760m-8gpu-a100-80g", 2.752, 760470528, 1536},
    {"llmfoundry-mpt-760m-32gpu-h100", 0.5756, 760470528, 1536},
    {"llmfoundry-mpt-760m-128gpu-a100-40g", 0.7158, 760470528, 1536},
    {"llmfoundry-mpt-1b-8gpu-a100-80g", 5.273, 1315950592, 2048},
    {"llmfoundry-mpt-1b-128gpu-a100-40g", 0.969, 1315950592, 2048},
    {"llmfoundry-mpt-1b-512gpu-h100", 0.4639, 1315950592, 2048},
    {"llmfoundry-mpt-3b-8gpu-a100-80g", 3.675, 2651837440, 2560},
    {"llmfoundry-mpt-3b-128gpu-a100-40g", 1.131, 2651837440, 2560},
    {"llmfoundry-mpt-3b-512gpu-h100", 0.5927, 2651837440, 2560},
    {"llmfoundry-mpt-7b-8gpu-a100-80g", 5.239, 6658859008, 4096},
    {"llmfoundry-mpt-7b-128gpu-a100-40g", 10.44, 6658859008, 4096},
    {"llmfoundry-mpt-7b-512gpu-h100", 1.02, 6658859008, 4096},
    {"llmfoundry-mpt-13b-8gpu-a100-80g", 5.007, 12853954560, 5120},
    {"llmfoundry-mpt-13b-128gpu-a100-40g", 17.57, 12853954560, 5120},
    {"llmfoundry-mpt-13b-512gpu-h100", 6.63, 12853954560, 5120},
    {"llmfoundry-mpt-30b-8gpu-a100-80g", 156.8, 29975214080, 7168},
    {"llmfoundry-mpt-30b-128gpu-a100-40g", 15.03, 29975214080, 7168},
    {"llmfoundry-mpt-30b-512gpu-h100", 7.476, 29975214080, 7168},
    {"llmfoundry-mpt-70b-64gpu-a100-80g", 170.7, 64862437376, 8192},
    {"llmfoundry-mpt-70b-128gpu-a100-40g", 21.56, 64862437376, 8192},
    {"llmfoundry-mpt-70b-512gpu-h100", 15.99, 64862437376, 8192},
};

TEST(CorpusValidation, LlmFoundryRowsAreSplitBeforePredictionAndPinned) {
  int fit = 0, test = 0, h100 = 0, a100_80 = 0, a100_40 = 0, grad_only = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->source != "llmfoundry") continue;
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    (r.row->split == CorpusSplit::kFit ? fit : test)++;
    h100 += r.row->cluster == "h100-sxm";
    a100_80 += r.row->cluster == "a100-80g";
    a100_40 += r.row->cluster == "a100-40g";
    EXPECT_FALSE(r.row->fp8) << r.row->id;
    EXPECT_EQ(r.row->config.tp * r.row->config.pp * r.row->config.cp, 1) << r.row->id;
    EXPECT_TRUE(r.row->config.shard_gradients) << r.row->id;
    grad_only += !r.row->config.shard_parameters;
    EXPECT_EQ(r.row->config.attention, r.row->cluster == "h100-sxm" ? AttentionKernel::kFlash2
                                                                    : AttentionKernel::kFlash)
        << r.row->id;
    EXPECT_TRUE(r.fits) << r.row->id;
  }
  EXPECT_EQ(fit, 8);
  EXPECT_EQ(test, 17);
  EXPECT_EQ(h100, 7);
  EXPECT_EQ(a100_80, 9);
  EXPECT_EQ(a100_40, 9);
  EXPECT_EQ(grad_only, 2) << "the SHARD_GRAD_OP rows: 3b and 1b on 512 H100";
  for (const PinnedFoundryRow& p : kPinnedFoundryRows) {
    const CorpusRowResult* r = pinned_row(p.id, p.predicted_step_s);
    if (r == nullptr) continue;
    // L·(12d² + 13d) + V·d + s·d (learned positions), tied: the table's count less the final
    // LayerNorm's weight and bias.
    EXPECT_EQ(r->row->model.total_params(), p.table_params - 2 * p.hidden) << p.id;
    EXPECT_EQ(r->row->model.hidden, p.hidden) << p.id;
  }
}

// Every llm-foundry row run without activation checkpointing is predicted too fast, and exactly
// those of them outside the band are expected failures; every checkpointed test row is within
// it. Priced without the recompute (as if checkpointing cost nothing), each checkpointed test row
// would be more than 10 % too fast: the recompute's forward is part of what they measured.
TEST(CorpusValidation, LlmFoundryRowsWithoutCheckpointingAreTooFastAndTheOthersInTheBand) {
  int unchecked = 0, checked = 0, marked = 0;
  for (const CorpusRowResult& r : report().rows) {
    if (r.row->source != "llmfoundry") continue;
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    if (r.row->expected_failure) {
      ++marked;
      EXPECT_EQ(r.row->config.recompute, Recompute::kNone) << r.row->id;
      EXPECT_LT(r.error, -kBand) << r.row->id << ": update docs/validation.md";
    }
    if (r.row->config.recompute == Recompute::kNone) {
      ++unchecked;
      EXPECT_LT(r.error, 0) << r.row->id << " is no longer too fast: update docs/validation.md";
      continue;
    }
    EXPECT_EQ(r.row->config.recompute, Recompute::kFull) << r.row->id;
    ++checked;
    if (r.row->split == CorpusSplit::kTest) {
      EXPECT_LE(std::fabs(r.error), kBand) << r.row->id;
    }
  }
  EXPECT_EQ(unchecked, 16);
  EXPECT_EQ(checked, 9);
  EXPECT_EQ(marked, 11);

  static const Corpus corpus = load_corpus(kCorpus);
  Corpus free_recompute = corpus;
  free_recompute.rows.clear();
  for (const CorpusRow& r : corpus.rows)
    if (r.source == "llmfoundry" && r.config.recompute == Recompute::kFull &&
        r.split == CorpusSplit::kTest)
      free_recompute.rows.push_back(r);
  ASSERT_EQ(free_recompute.rows.size(), 7u);
  for (CorpusRow& r : free_recompute.rows) r.config.recompute = Recompute::kNone;
  ModelValidationOptions o;
  o.band = kBand;
  const ModelValidationReport none = validate_corpus(free_recompute, o);
  for (const CorpusRowResult& r : none.rows) {
    ASSERT_TRUE(r.ran()) << r.row->id << ": " << r.message;
    EXPECT_LT(r.error, -kBand) << r.row->id;
  }
}

// PyTorch-native FSDP runs (sources ibmfsdp2024: the PyTorch FSDP blog's Table 1, Llama 2 7B, 34B
// and 70B on 128 A100 and 96 H100; torchtitana100: torchtitan FSDP2 on 64 A100), docs/validation.md
// "PyTorch FSDP on A100 and H100". Every row shards parameters over all its GPUs with one
// microbatch per step; the predictions are pinned (a change of the physics must update the docs).
// What they show, with eager PyTorch's element-wise kernels priced (kernel_fusion eager): the rows
// with full recompute are within the band on A100 (-0.6 % to +6.3 %), those without the re-run
// forward (none, op) are all too fast on A100 (-6.6 % to -14.9 %), and every H100 row is too
// fast (-11.7 % to -29.5 %); the thinner networks of the IBM clusters (400
// and 800 Gbps per node, a quarter of the presets') are not the cause: at a quarter of the
// preset's inter-node bandwidth no prediction moves by 1 %.
struct PinnedFsdpRow {
  const char* id;
  double predicted_step_s;
  double measured_step_s;  // by hand: sequences per GPU x sequence length / tokens/s/GPU
};
constexpr PinnedFsdpRow kPinnedPytorchFsdpRows[] = {
    {"ibmfsdp2024-llama2-7B-96gpu-h100", 0.770, 2 * 4096 / 7500.0},
    {"ibmfsdp2024-llama2-7B-128gpu-a100", 1.884, 2 * 4096 / 3700.0},
    {"ibmfsdp2024-llama2-34B-96gpu-h100", 4.518, 2 * 4096 / 1550.0},
    {"ibmfsdp2024-llama2-34B-128gpu-a100", 11.629, 2 * 4096 / 700.0},
    {"ibmfsdp2024-llama2-70B-96gpu-h100", 9.045, 2 * 4096 / 800.0},
    {"ibmfsdp2024-llama2-70B-128gpu-a100", 23.527, 2 * 4096 / 370.0},
    {"torchtitana100-llama3-8b-64gpu-bs1-op", 2.538, 8192 / 2973.0},
    {"torchtitana100-llama3-8b-64gpu-bs1-layer", 2.627, 8192 / 2904.0},
    {"torchtitana100-llama2-13b-64gpu-bs2-op", 4.016, 2 * 4096 / 1904.0},
    {"torchtitana100-llama2-13b-64gpu-bs2-none", 3.541, 2 * 4096 / 2162.0},
    {"torchtitana100-llama2-13b-64gpu-bs2-layer", 4.117, 2 * 4096 / 1914.0},
    {"torchtitana100-llama2-70b-64gpu-bs2-full", 23.551, 2 * 4096 / 353.0},
    {"torchtitana100-llama2-70b-64gpu-bs1-op", 10.031, 4096 / 355.0},
    {"torchtitana100-llama3-70b-64gpu-bs1-full", 24.716, 8192 / 331.0},
};

TEST(CorpusValidation, PytorchFsdpRowsArePinnedAndFullRecomputeIsInTheBandOnA100) {
  int rows = 0, fit = 0;
  for (const CorpusRowResult& r : report().rows)
    if (r.row->source == "ibmfsdp2024" || r.row->source == "torchtitana100") {
      ++rows;
      fit += r.row->split == CorpusSplit::kFit;
    }
  EXPECT_EQ(rows, static_cast<int>(std::size(kPinnedPytorchFsdpRows)));
  EXPECT_EQ(fit, 4);  // the split rule: index 1 and 4 of each source's six rows
  for (const PinnedFsdpRow& p : kPinnedPytorchFsdpRows) {
    const CorpusRowResult* r = pinned_row(p.id, p.predicted_step_s);
    if (r == nullptr) continue;
    EXPECT_TRUE(r->row->config.shard_parameters) << p.id;
    EXPECT_EQ(r->row->config.dp, r->row->config.gpus) << p.id;
    EXPECT_EQ(r->row->config.global_batch, r->row->config.dp * r->row->config.microbatch_size)
        << p.id << ": one microbatch per step";
    EXPECT_TRUE(r->fits) << p.id;
    EXPECT_NEAR(r->measured_step_time_s, p.measured_step_s, 1e-9 * p.measured_step_s) << p.id;
    const bool full = r->row->config.recompute == Recompute::kFull;
    const bool some = full && r->row->config.recompute_layers >= 0;  // half the blocks
    const bool a100 = r->row->cluster == "a100-80g";
    if (a100 && some) {  // between: too fast, but within the band
      EXPECT_LT(r->error, 0.0) << p.id;
      EXPECT_LE(std::fabs(r->error), kBand) << p.id;
    } else if (a100 && full) {
      EXPECT_LE(std::fabs(r->error), kBand) << p.id;
    } else {
      EXPECT_LT(r->error, -0.06) << p.id << ": too fast";
    }
    // A test row outside the band is a named expected failure.
    if (r->row->split == CorpusSplit::kTest) {
      EXPECT_EQ(r->row->expected_failure.has_value(), std::fabs(r->error) > kBand) << p.id;
    }
  }

  // The IBM clusters' networks (400 Gbps per A100 node, 800 Gbps per H100 node: a quarter of the
  // presets') would not change the predictions: the per-block collectives stay hidden.
  static const Corpus corpus = load_corpus(kCorpus);
  Corpus ibm = corpus;
  ibm.rows.clear();
  for (const CorpusRow& r : corpus.rows)
    if (r.source == "ibmfsdp2024") ibm.rows.push_back(r);
  ASSERT_EQ(ibm.rows.size(), 6u);
  for (const char* gpu : {"a100-80g", "h100-sxm"}) {
    ModelValidationOptions thin;
    thin.band = kBand;
    thin.cluster_override = load_cluster(gpu);
    thin.cluster_override->inter_node.bandwidth_bytes_per_s /= 4;
    const Corpus on_gpu = rows_on(ibm, gpu);  // the report points into it
    const ModelValidationReport rep = validate_corpus(on_gpu, thin);
    ASSERT_EQ(rep.rows.size(), 3u) << gpu;
    for (const CorpusRowResult& t : rep.rows) {
      const CorpusRowResult* preset = row_result(t.row->id);
      ASSERT_NE(preset, nullptr) << t.row->id;
      ASSERT_TRUE(t.ran()) << t.row->id << ": " << t.message;
      EXPECT_GE(t.predicted_step_time_s, preset->predicted_step_time_s) << t.row->id;
      EXPECT_LT(t.predicted_step_time_s, 1.01 * preset->predicted_step_time_s) << t.row->id;
    }
  }
}

// Full recompute of some layers (recompute_layers; docs/validation.md "Full recompute of some
// layers"): the corpus rows that state it carry it, and each is predicted between the same row
// with no recompute and with every layer recomputed (the count reaches the cost model).
TEST(CorpusValidation, RecomputeLayerRowsLieBetweenNoneAndFull) {
  static const Corpus corpus = load_corpus(kCorpus);
  const std::pair<const char*, int> expected[] = {{"mbridge2511fsdp-llama3-8B-8gpu-h100", 5},
                                                  {"torchtitana100-llama3-8b-64gpu-bs1-layer", 16},
                                                  {"torchtitana100-llama2-13b-64gpu-bs2-layer", 20}};
  Corpus some = corpus, none = corpus, full = corpus;
  some.rows.clear();
  none.rows.clear();
  full.rows.clear();
  for (const auto& [id, layers] : expected) {
    for (const CorpusRow& r : corpus.rows) {
      if (r.id != id) continue;
      EXPECT_EQ(r.config.recompute, Recompute::kFull) << id;
      EXPECT_EQ(r.config.recompute_layers, layers) << id;
      some.rows.push_back(r);
      none.rows.push_back(r);
      none.rows.back().config.recompute = Recompute::kNone;
      none.rows.back().config.recompute_layers = -1;
      full.rows.push_back(r);
      full.rows.back().config.recompute_layers = -1;
    }
  }
  ASSERT_EQ(some.rows.size(), std::size(expected));
  ModelValidationOptions o;
  o.band = kBand;
  const ModelValidationReport s = validate_corpus(some, o), n = validate_corpus(none, o),
                              f = validate_corpus(full, o);
  for (size_t i = 0; i < std::size(expected); ++i) {
    ASSERT_TRUE(s.rows[i].ran() && n.rows[i].ran() && f.rows[i].ran()) << expected[i].first;
    EXPECT_GT(s.rows[i].predicted_step_time_s, n.rows[i].predicted_step_time_s) << expected[i].first;
    EXPECT_LT(s.rows[i].predicted_step_time_s, f.rows[i].predicted_step_time_s) << expected[i].first;
  }
}

// Eager PyTorch training steps measured by this project on one H200 (source h200eager,
// docs/validation.md "Eager PyTorch steps measured on one H200"; the raw measurement
// tests/data/kernels/h200_eager_steps.json, its harness scripts/measure_eager_steps.py): four
// model shapes of the corpus's eager-PyTorch sources without and with full recompute, no
// communication. All eight are test rows, split before any prediction, priced with eager
// PyTorch's element-wise kernels over fp32 parameters (kernel_fusion eager_fp32_params). The
// errors are pinned to ±0.5 points (a change of the physics must update the docs); MPT-1B with
// full recompute (+12.2 %) is the expected failure, for the GEMM time its profile shows (447 ms
// priced, 313 ms ran); and in every pair the model puts full recompute further above no
// recompute than measured.
struct PinnedEagerRow {
  const char* id;
  double error;  // (predicted - measured) / measured
  bool expected_failure;
};
constexpr PinnedEagerRow kPinnedEagerRows[] = {
    {"h200eager-mpt-1b-mb12-none", +0.0599, false},
    {"h200eager-mpt-1b-mb12-full", +0.1222, true},
    {"h200eager-mpt-350m-mb32-none", -0.0481, false},
    {"h200eager-mpt-350m-mb32-full", -0.0014, false},
    {"h200eager-llama2-13b-8l-mb2-none", +0.0372, false},
    {"h200eager-llama2-13b-8l-mb2-full", +0.0638, false},
    {"h200eager-llama3-8b-8l-mb1-none", +0.0600, false},
    {"h200eager-llama3-8b-8l-mb1-full", +0.0969, false},
};

TEST(CorpusValidation, EagerH200StepsArePinnedAndFullOverNoneIsOverPredicted) {
  int rows = 0;
  for (const CorpusRowResult& r : report().rows) rows += r.row->source == "h200eager";
  EXPECT_EQ(rows, static_cast<int>(std::size(kPinnedEagerRows)));
  for (const PinnedEagerRow& p : kPinnedEagerRows) {
    const CorpusRowResult* r = row_result(p.id);
    ASSERT_NE(r, nullptr) << p.id;
    ASSERT_TRUE(r->ran()) << p.id << ": " << r->message;
    EXPECT_EQ(r->row->split, CorpusSplit::kTest) << p.id;
    EXPECT_EQ(r->row->cluster, "h200") << p.id;
    EXPECT_EQ(r->row->config.gpus, 1) << p.id << ": one GPU, no communication";
    EXPECT_EQ(r->row->config.global_batch, r->row->config.microbatch_size) << p.id;
    EXPECT_EQ(r->row->config.attention, AttentionKernel::kFlash) << p.id << ": cuDNN ran";
    EXPECT_TRUE(r->fits) << p.id;
    EXPECT_NEAR(r->error, p.error, 0.005) << p.id;
    EXPECT_EQ(r->row->expected_failure.has_value(), p.expected_failure) << p.id;
    EXPECT_EQ(std::fabs(r->error) > kBand, p.expected_failure) << p.id;
  }
  // Each pair: the same shape with full recompute (odd entries) and without (even entries).
  for (size_t i = 0; i + 1 < std::size(kPinnedEagerRows); i += 2) {
    const CorpusRowResult* none = row_result(kPinnedEagerRows[i].id);
    const CorpusRowResult* full = row_result(kPinnedEagerRows[i + 1].id);
    ASSERT_TRUE(none && full);
    ASSERT_EQ(none->row->config.recompute, Recompute::kNone) << none->row->id;
    ASSERT_EQ(full->row->config.recompute, Recompute::kFull) << full->row->id;
    const double measured = full->measured_step_time_s / none->measured_step_time_s;
    const double predicted = full->predicted_step_time_s / none->predicted_step_time_s;
    EXPECT_LT(measured, predicted) << full->row->id;
    EXPECT_LT(predicted / measured, 1.07) << full->row->id << ": 2.5 to 5.9 % over";
  }
}

// The h200eager rows whose step time differs from tests/data/kernels/h200_eager_steps.json's
// step_s (run "name" is row "h200eager-name"), or that have no run there, and the runs with no
// row: the rows and the raw measurement cannot drift apart.
std::vector<std::string> eager_rows_disagreeing_with(const Corpus& corpus,
                                                     const nlohmann::json& raw) {
  std::map<std::string, double> step_s;
  for (const nlohmann::json& run : raw.at("runs"))
    step_s["h200eager-" + run.at("name").get<std::string>()] = run.at("step_s").get<double>();
  std::vector<std::string> bad;
  for (const CorpusRow& r : corpus.rows) {
    if (r.source != "h200eager") continue;
    const auto it = step_s.find(r.id);
    if (it == step_s.end()) {
      bad.push_back(r.id + ": no run in the raw file");
      continue;
    }
    if (r.measured_kind != MeasuredKind::kStepTime || r.measured_step_time_s != it->second)
      bad.push_back(r.id + ": step time differs from the raw file's");
    step_s.erase(it);
  }
  for (const auto& [id, s] : step_s) bad.push_back(id + ": a raw run without a corpus row");
  return bad;
}

TEST(CorpusValidation, EagerH200RowsCarryTheRawFilesStepTimes) {
  std::ifstream in(std::string(JAXPP_TEST_DATA_DIR) + "/kernels/h200_eager_steps.json");
  ASSERT_TRUE(in) << "tests/data/kernels/h200_eager_steps.json";
  const nlohmann::json raw = nlohmann::json::parse(in);
  EXPECT_EQ(raw.at("device"), "NVIDIA H200");
  ASSERT_EQ(raw.at("runs").size(), std::size(kPinnedEagerRows));
  const Corpus corpus = load_corpus(kCorpus);
  const std::vector<std::string> bad = eager_rows_disagreeing_with(corpus, raw);
  EXPECT_TRUE(bad.empty()) << bad.front();
  // On purpose: one step time off by one part in 10^9, one row dropped, one run renamed.
  Corpus changed = corpus, dropped = corpus;
  for (CorpusRow& r : changed.rows)
    if (r.id == "h200eager-llama3-8b-8l-mb1-full") r.measured_step_time_s *= 1 + 1e-9;
  std::erase_if(dropped.rows,
                [](const CorpusRow& r) { return r.id == "h200eager-mpt-1b-mb12-none"; });
  nlohmann::json renamed = raw;
  renamed["runs"][0]["name"] = "mpt-1b-mb13-none";
  EXPECT_EQ(eager_rows_disagreeing_with(changed, raw),
            std::vector<std::string>{"h200eager-llama3-8b-8l-mb1-full: step time differs from the "
                                     "raw file's"});
  EXPECT_EQ(eager_rows_disagreeing_with(dropped, raw),
            std::vector<std::string>{"h200eager-mpt-1b-mb12-none: a raw run without a corpus row"});
  EXPECT_EQ(eager_rows_disagreeing_with(corpus, renamed).size(), 2u);
}

// Eager PyTorch's element-wise kernels (kernel_fusion, graph/kernels.cc) against the profiled
// step of each h200eager run (docs/validation.md "Kernel time by category"): simulate
// --breakdown's element-wise time is 0.55-0.68 of the profile's element-wise + loss kernels in
// all eight runs (the kernels ran at 1-3 TB/s where the model streams at 85 % of 4.8 TB/s, and
// the harness's real-arithmetic RoPE runs more kernels than torchtitan's that the model lists);
// priced as fused kernels, 0.16-0.29. A kernel dropped from the inventory or counted twice moves
// a run out of [0.5, 0.75].
double eager_elementwise_ratio(const CorpusRow& row, const nlohmann::json& run) {
  const RowExplanation e = explain_row(row, {}, {});
  EXPECT_TRUE(e.ran) << row.id << ": " << e.message;
  if (!e.ran) return 0;
  const nlohmann::json& c = run.at("profile").at("by_category_s");
  const double measured = c.at("elementwise").get<double>() + c.value("loss", 0.0);
  return e.breakdown.at(0).at("elementwise_s").get<double>() / measured;
}

TEST(CorpusValidation, EagerElementwiseKernelsAreWithinTheProfilesBand) {
  std::ifstream in(std::string(JAXPP_TEST_DATA_DIR) + "/kernels/h200_eager_steps.json");
  ASSERT_TRUE(in) << "tests/data/kernels/h200_eager_steps.json";
  const nlohmann::json raw = nlohmann::json::parse(in);
  static const Corpus corpus = load_corpus(kCorpus);
  int runs = 0;
  for (const nlohmann::json& run : raw.at("runs")) {
    const std::string id = "h200eager-" + run.at("name").get<std::string>();
    const auto it = std::find_if(corpus.rows.begin(), corpus.rows.end(),
                                 [&](const CorpusRow& r) { return r.id == id; });
    ASSERT_NE(it, corpus.rows.end()) << id;
    EXPECT_EQ(it->model.kernel_fusion, KernelFusion::kEagerFp32Params) << id;
    const double ratio = eager_elementwise_ratio(*it, run);
    EXPECT_GE(ratio, 0.5) << id;
    EXPECT_LE(ratio, 0.75) << id;
    // On purpose: the same row priced with the fused kernels falls far below the band.
    CorpusRow fused = *it;
    fused.model.kernel_fusion = KernelFusion::kFused;
    EXPECT_LT(eager_elementwise_ratio(fused, run), 0.35) << id;
    ++runs;
  }
  EXPECT_EQ(runs, 8);
}

// A row naming a preset with eager kernels (ibmfsdp2024's llama2-7b): --explain's command
// simulates a model file carrying "kernel_fusion" (simulate has no flag for it), and says so.
TEST(CorpusValidation, ExplainOfAnEagerPresetRowWritesTheKernelFusionIntoItsModelFile) {
  static const Corpus corpus = load_corpus(kCorpus);
  const auto it = std::find_if(corpus.rows.begin(), corpus.rows.end(), [](const CorpusRow& r) {
    return r.id == "ibmfsdp2024-llama2-7B-96gpu-h100";
  });
  ASSERT_NE(it, corpus.rows.end());
  ASSERT_FALSE(it->model_inline);
  const RowExplanation e = explain_row(*it, {}, {});
  ASSERT_TRUE(e.ran) << e.message;
  EXPECT_FALSE(e.model_file.empty());
  EXPECT_EQ(e.model_json.at("kernel_fusion"), "eager");
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_NE(e.notes[0].find("kernel_fusion eager (simulate has no kernel-fusion flag)"),
            std::string::npos)
      << e.notes[0];
}

// A BF16 row naming a MoE preset whose expert GEMMs run per expert (the GB200 Qwen3-235B-A22B
// row, expert_gemm per_expert): --explain's command simulates a model file carrying
// "expert_gemm" (simulate has no flag for it), and says so; the file reproduces the prediction.
TEST(CorpusValidation, ExplainOfAPerExpertMoeRowWritesTheExpertGemmIntoItsModelFile) {
  static const Corpus corpus = load_corpus(kCorpus);
  const auto it = std::find_if(corpus.rows.begin(), corpus.rows.end(), [](const CorpusRow& r) {
    return r.id == "mbridgemoe-qwen3-235B-a22B-256gpu-gb200-2511";
  });
  ASSERT_NE(it, corpus.rows.end());
  ASSERT_FALSE(it->model_inline);
  ASSERT_FALSE(it->fp8);
  const RowExplanation e = explain_row(*it, {}, {});
  ASSERT_TRUE(e.ran) << e.message;
  EXPECT_FALSE(e.model_file.empty());
  EXPECT_EQ(e.model_json.at("expert_gemm"), "per_expert");
  EXPECT_EQ(model_from_json(e.model_json, "again").moe.expert_gemm, ExpertGemm::kPerExpert);
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_NE(e.notes[0].find("expert_gemm per_expert (simulate has no expert-GEMM flag)"),
            std::string::npos)
      << e.notes[0];
}

// The rerun on another H200 machine with the committed harness (docs/validation.md): each
// configuration within 2.5 % of the first run's step time, peak memory within 1 %.
TEST(CorpusValidation, EagerH200RerunAgreesWithTheFirstRun) {
  auto read = [](const std::string& name) {
    std::ifstream in(std::string(JAXPP_TEST_DATA_DIR) + "/kernels/" + name);
    EXPECT_TRUE(in) << name;
    return nlohmann::json::parse(in);
  };
  const nlohmann::json first = read("h200_eager_steps.json");
  const nlohmann::json rerun = read("h200_eager_steps_rerun.json");
  ASSERT_EQ(rerun.at("runs").size(), 3u);
  for (const nlohmann::json& r : rerun.at("runs")) {
    const auto same = std::find_if(first.at("runs").begin(), first.at("runs").end(),
                                   [&](const nlohmann::json& f) { return f["name"] == r["name"]; });
    ASSERT_NE(same, first.at("runs").end()) << r["name"];
    const double ratio = r.at("step_s").get<double>() / same->at("step_s").get<double>();
    EXPECT_NEAR(ratio, 1.0, 0.025) << r["name"];
    EXPECT_NEAR(r.at("peak_allocated_gib").get<double>() /
                    same->at("peak_allocated_gib").get<double>(),
                1.0, 0.01)
        << r["name"];
  }
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
