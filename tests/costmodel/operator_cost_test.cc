// The operator-level cost model (costmodel/operator_cost.h): each assertion recomputes a kernel's
// time from its formula, so a change of shape, count or efficiency rule fails here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/kernels.h"
#include "graph/partition.h"
#include "graph/placement.h"

namespace jaxpp {
namespace {

using ::testing::HasSubstr;

constexpr int kLayer = 1;  // the first transformer layer (0 is the embedding)

struct Fixture {
  ModelSpec model = load_model("gpt3-1.3b");  // h 2048, 16 heads, s 2048, f 8192
  ParallelConfig config;
  ClusterSpec cluster = cluster_preset("a100-80g");
  Fixture() { cluster.kernel_overhead_s = 0; }
  OperatorCost op() const { return OperatorCost(model, config, cluster); }
  PassBreakdown layer(Pass p) const { return op().stage(kLayer, 1, 0).at(p); }
};

TEST(OperatorCost, GemmRunsAtTheCurvesRateWithoutAShapeModel) {
  Fixture s;
  s.cluster.num_sms = 0;
  s.cluster.gemm_half_saturation_flops = 0;
  const double n = 4096;
  EXPECT_NEAR(s.op().gemm_s(n, n, n), 2 * n * n * n / (312e12 * s.cluster.gemm_efficiency_max),
              1e-15);
}

TEST(OperatorCost, SkinnyGemmIsBoundByMemory) {
  Fixture s;
  s.cluster.num_sms = 0;
  s.cluster.gemm_half_saturation_flops = 0;
  const double bytes = (1 * 4096 + 4096.0 * 4096 + 1 * 4096) * 2;
  EXPECT_NEAR(s.op().gemm_s(1, 4096, 4096),
              bytes / (s.cluster.hbm_bandwidth_bytes_per_s * s.cluster.hbm_efficiency), 1e-15);
}

// A GEMM's efficiency is shape · curve(FLOPs / shape): the shape factor (tile and wave
// quantization, the short-k loss) times the saturation curve at the work the GEMM issues.
TEST(OperatorCost, AFullLastWaveIsFasterPerFlopThanOneExtraRowOfTiles) {
  Fixture s;  // 108 SMs, 128×256 tiles
  s.cluster.stream_k_min_k = 0;  // tile waves only
  const OperatorCost op = s.op();
  const double k = 4096;
  const double short_k = k / (k + s.cluster.gemm_small_k);
  // 12 × 9 = 108 tiles of 128×256: one full wave, no quantization loss.
  const double full = op.gemm_efficiency(1536, 2304, k);
  EXPECT_NEAR(full, s.cluster.gemm_efficiency(2 * 1536.0 * 2304 * k / short_k) * short_k, 1e-12);
  // One more row of tiles: the best tile (64×128 at 0.85: 26 × 18 = 468 tiles in 5 waves of
  // 108) keeps 0.85 · 468/540 of the rate.
  const double shape = 0.85 * 468 / 540 * short_k;
  const double ragged = op.gemm_efficiency(1664, 2304, k);
  EXPECT_NEAR(ragged / s.cluster.gemm_efficiency(2 * 1664.0 * 2304 * k / shape) / short_k,
              0.85 * 468 / 540, 1e-12);
  EXPECT_LT(ragged, full);
}

TEST(OperatorCost, StreamKSpreadsARaggedLastWaveOverTheSms) {
  Fixture s;  // 108 SMs, 128×256 tiles, stream-K on (min_k 1024, rate 1)
  const OperatorCost op = s.op();
  const double k = 4096;
  // 13 × 9 = 117 tiles: 117 · 4096 / 108 = 4437 k-iterations per SM ≥ min_k, so every SM runs
  // at the full rate on a depth of min(k, 4437) = k.
  const double streamed = s.cluster.stream_k_rate * k / (k + s.cluster.gemm_small_k);
  const double ragged = op.gemm_efficiency(1664, 2304, k);
  EXPECT_NEAR(ragged / s.cluster.gemm_efficiency(2 * 1664.0 * 2304 * k / streamed), streamed,
              1e-12);
  // 256 × 512 with k 512: the best is 16 quarter tiles (64×128 at 0.85) in one partial wave;
  // stream-K would give each SM 16 · 512 / 108 = 76 iterations, 7 % of min_k: not taken.
  const double shape = 0.85 * 16 / 108 * 512 / (512 + s.cluster.gemm_small_k);
  const double few = op.gemm_efficiency(256, 512, 512);
  EXPECT_NEAR(few / s.cluster.gemm_efficiency(2 * 256.0 * 512 * 512 / shape), shape, 1e-12);
}

// The saturation curve's fixed cost (its half-saturation work) is paid once per GEMM: a GEMM of
// one tile costs about that fixed time (4 µs of work at the curve's maximum rate on an H100, plus
// the kernel overhead), not that time once per idle SM and per idle row of the tile (it was
// priced at 10.5 ms for 32 × 64 × 64); and no dimension shrinking makes a GEMM slower.
TEST(OperatorCost, SmallGemmsCostTheirFixedTimeAndNeverMoreThanALargerOne) {
  const ClusterSpec h100 = cluster_preset("h100-sxm");
  Fixture s;
  s.cluster = h100;
  const OperatorCost op = s.op();
  const double fixed = h100.gemm_half_saturation_flops /
                       (h100.peak_flops(Dtype::kBf16) * h100.gemm_efficiency_max);
  for (const auto& [m, n, k] : {std::array{32.0, 64.0, 64.0}, std::array{1.0, 2048.0, 2048.0},
                                std::array{2048.0, 2048.0, 1.0}}) {
    const double t = op.gemm_s(m, n, k);
    EXPECT_GT(t, fixed) << m << " x " << n << " x " << k;
    EXPECT_LT(t, 3 * fixed + h100.kernel_overhead_s) << m << " x " << n << " x " << k;
  }
  // Monotone in every dimension on a grid of powers of two (1 to 16384).
  for (double m = 1; m <= 16384; m *= 4)
    for (double n = 1; n <= 16384; n *= 4)
      for (double k = 1; k <= 16384; k *= 4) {
        const double t = op.gemm_s(m, n, k);
        EXPECT_LE(t, op.gemm_s(2 * m, n, k) * (1 + 1e-12)) << m << " " << n << " " << k;
        EXPECT_LE(t, op.gemm_s(m, 2 * n, k) * (1 + 1e-12)) << m << " " << n << " " << k;
        EXPECT_LE(t, op.gemm_s(m, n, 2 * k) * (1 + 1e-12)) << m << " " << n << " " << k;
      }
}

TEST(OperatorCost, LayerForwardGemmsAreQkvProjectionAndMlp) {
  Fixture s;
  const OperatorCost op = s.op();
  const double m = 2048, h = 2048, f = 8192;
  EXPECT_NEAR(s.layer(Pass::kForward).gemm_s,
              op.gemm_s(m, 3 * h, h) + op.gemm_s(m, h, h) + op.gemm_s(m, f, h) + op.gemm_s(m, h, f),
              1e-15);
  // Input gradients (m, k, n); weight gradients (k, n, m).
  EXPECT_NEAR(s.layer(Pass::kBackwardInput).gemm_s,
              op.gemm_s(m, h, 3 * h) + op.gemm_s(m, h, h) + op.gemm_s(m, h, f) + op.gemm_s(m, f, h),
              1e-15);
  EXPECT_NEAR(s.layer(Pass::kBackwardWeight).total_s(),
              op.gemm_s(h, 3 * h, m) + op.gemm_s(h, h, m) + op.gemm_s(h, f, m) + op.gemm_s(f, h, m),
              1e-15);
}

TEST(OperatorCost, TensorParallelismSplitsColumnsAndRows) {
  Fixture s;
  s.config.tp = 4;
  const OperatorCost op = s.op();
  const double m = 2048, h = 2048, f = 8192;
  EXPECT_NEAR(s.layer(Pass::kForward).gemm_s,
              op.gemm_s(m, 3 * h / 4, h) + op.gemm_s(m, h, h / 4) + op.gemm_s(m, f / 4, h) +
                  op.gemm_s(m, h, f / 4),
              1e-15);
}

TEST(OperatorCost, GatedMlpHasFusedGateAndUpProjections) {
  Fixture s;
  s.model = load_model("llama3-8b");  // h 4096, 32 heads, 8 kv heads, f 14336, s 8192
  const OperatorCost op = s.op();
  const double m = 8192, h = 4096, kv = 1024, f = 14336;
  EXPECT_NEAR(s.layer(Pass::kForward).gemm_s,
              op.gemm_s(m, h + 2 * kv, h) + op.gemm_s(m, h, h) + op.gemm_s(m, 2 * f, h) +
                  op.gemm_s(m, h, f),
              1e-15);
}

TEST(OperatorCost, FlashAttentionDoesHalfTheScoresWhenCausal) {
  Fixture s;
  s.cluster.num_sms = 0;  // no wave quantization
  const double sq = 2048, heads = 16, d = 128, keys = sq / 2;
  const double fwd_flops = 4 * sq * sq * heads * d / 2;
  const double rate = 312e12 * keys / (keys + 128);
  EXPECT_NEAR(s.layer(Pass::kForward).attention_s,
              fwd_flops / (rate * s.cluster.attention_efficiency_forward), 1e-15);
  EXPECT_NEAR(s.layer(Pass::kBackwardInput).attention_s,
              2.5 * fwd_flops / (rate * s.cluster.attention_efficiency_backward), 1e-15);
  EXPECT_EQ(s.layer(Pass::kBackwardWeight).attention_s, 0);
}

// The FlashAttention-2 library kernels (`attention: flash2`) run the same causal FLOPs at the
// cluster's flash2 efficiencies; a cluster without them (0) prices them as its fused kernels.
TEST(OperatorCost, FlashAttention2RunsAtItsOwnEfficiencies) {
  Fixture s;
  s.cluster.num_sms = 0;
  s.cluster.flash2_attention_efficiency_forward = 0.3;
  s.cluster.flash2_attention_efficiency_backward = 0.2;
  const double fused_fwd = s.layer(Pass::kForward).attention_s;
  const double fused_bwd = s.layer(Pass::kBackwardInput).attention_s;
  s.config.attention = AttentionKernel::kFlash2;
  EXPECT_NEAR(s.layer(Pass::kForward).attention_s,
              fused_fwd * s.cluster.attention_efficiency_forward / 0.3, 1e-15);
  EXPECT_NEAR(s.layer(Pass::kBackwardInput).attention_s,
              fused_bwd * s.cluster.attention_efficiency_backward / 0.2, 1e-15);
  EXPECT_NEAR(s.layer(Pass::kRecompute).attention_s, 0, 0) << "no recompute configured";
  s.cluster.flash2_attention_efficiency_forward = 0;
  s.cluster.flash2_attention_efficiency_backward = 0;
  EXPECT_DOUBLE_EQ(s.layer(Pass::kForward).attention_s, fused_fwd);
  EXPECT_DOUBLE_EQ(s.layer(Pass::kBackwardInput).attention_s, fused_bwd);
  // Ring attention runs on either flash kernel.
  s.config.cp = 2;
  EXPECT_NO_THROW(s.op());
}

TEST(OperatorCost, UnfusedAttentionRunsBatchedGemmsAndTheSoftmaxOverAllScores) {
  Fixture s;
  s.config.attention = AttentionKernel::kUnfused;
  const OperatorCost op = s.op();
  const double sq = 2048, rows = 16 * sq, d = 128;
  const double softmax_bytes = rows * sq * 9;  // GPT: softmax (4) + dropout (5) per score
  EXPECT_NEAR(s.layer(Pass::kForward).attention_s,
              op.gemm_s(rows, sq, d) + op.gemm_s(rows, d, sq) +
                  softmax_bytes / (s.cluster.hbm_bandwidth_bytes_per_s * s.cluster.hbm_efficiency),
              1e-15);
}

TEST(OperatorCost, ElementwiseKernelsMoveTheirBytesAtHbmBandwidth) {
  Fixture s;
  const double m = 2048, h = 2048, f = 8192, db = 2;
  // norm ×2, bias+dropout+add ×2, bias+GeLU.
  const double bytes = m * (2 * 2 * h * db + 2 * (3 * h * db + h) + 2 * f * db);
  EXPECT_NEAR(s.layer(Pass::kForward).elementwise_s,
              bytes / (s.cluster.hbm_bandwidth_bytes_per_s * s.cluster.hbm_efficiency), 1e-15);
  EXPECT_NEAR(s.layer(Pass::kBackwardInput).elementwise_s,
              2 * s.layer(Pass::kForward).elementwise_s, 1e-15);
}

TEST(OperatorCost, ForwardHasTwoTensorParallelAllReducesPerLayer) {
  Fixture s;
  s.config.tp = 8;
  const OperatorCost op = s.op();
  const double bytes = 2048.0 * 2048 * 2;
  EXPECT_NEAR(s.layer(Pass::kForward).tp_comm_s, 2 * op.tp_allreduce_s(bytes), 1e-15);
  EXPECT_NEAR(
      op.tp_allreduce_s(bytes),
      2.0 * 7 / 8 * bytes /
              (s.cluster.intra_node.bandwidth_bytes_per_s * s.cluster.allreduce_bus_efficiency) +
          14 * s.cluster.intra_collective_latency_s(),
      1e-15);
  // Sequence parallelism: all-gather + reduce-scatter of the same volume.
  s.config.sequence_parallel = true;
  EXPECT_NEAR(s.layer(Pass::kForward).tp_comm_s, 4 * op.tp_gather_s(bytes), 1e-15);
  // Overlapped with the GEMMs: less exposed, never negative.
  s.config.tp_comm_overlap = true;
  const double overlapped = s.layer(Pass::kForward).tp_comm_s;
  EXPECT_LT(overlapped, 4 * op.tp_gather_s(bytes));
  EXPECT_GT(overlapped, 0);
}

TEST(OperatorCost, ContextParallelismSplitsTheAttentionWorkAndExposesSlowTransfers) {
  Fixture s;
  s.cluster.num_sms = 0;
  const double one = s.layer(Pass::kForward).attention_s;
  s.config.cp = 2;
  EXPECT_NEAR(s.layer(Pass::kForward).attention_s, one / 2, 1e-15);
  const double kv_bytes = 1024.0 * 2 * 2048 * 2;  // m · (K and V) · h · bf16
  const auto step_s = [&] {
    return s.cluster.intra_node.latency_s +
           kv_bytes / s.cluster.intra_node.effective_bandwidth_bytes_per_s();
  };
  // One ring step (cp − 1 = 1) overlapping one block of the attention (a half of this rank's).
  EXPECT_NEAR(s.layer(Pass::kForward).cp_comm_s, std::max(0.0, step_s() - one / 2 / 2), 1e-12);
  EXPECT_LT(s.layer(Pass::kForward).cp_comm_s, step_s()) << "partly hidden under compute";
  s.cluster.intra_node.bandwidth_bytes_per_s = 1e6;  // a crawling link
  EXPECT_NEAR(s.layer(Pass::kForward).cp_comm_s, step_s() - one / 2 / 2, 1e-12);
}

TEST(OperatorCost, ContextParallelismNeedsFlashAttentionAndADivisibleSequence) {
  Fixture s;
  s.config.cp = 2;
  s.config.attention = AttentionKernel::kUnfused;
  EXPECT_THAT([&] { s.op(); }, ::testing::ThrowsMessage<InputError>(HasSubstr("flash attention")));
  s.config.attention = AttentionKernel::kFlash;
  s.config.cp = 3;
  EXPECT_THAT([&] { s.op(); }, ::testing::ThrowsMessage<InputError>(HasSubstr("seq_len 2048")));
}

TEST(OperatorCost, FlashStashIsKorthikantisInventoryWithoutTheScores) {
  Fixture s;
  const double sh = 2048.0 * 2048;
  EXPECT_NEAR(s.op().stash_bytes(kLayer), 34 * sh, 1e-3);
  s.config.tp = 4;  // norms, GEMM inputs and dropout masks stay whole: (10 + 24/t)·s·h
  EXPECT_NEAR(s.op().stash_bytes(kLayer), (10 + 24.0 / 4) * sh, 1e-3);
  s.config.sequence_parallel = true;
  EXPECT_NEAR(s.op().stash_bytes(kLayer), 34 * sh / 4, 1e-3);
  s.config.recompute = Recompute::kFull;
  EXPECT_NEAR(s.op().stash_bytes(kLayer), 2 * sh / 4, 1e-3);
  s.config.sequence_parallel = false;
  EXPECT_NEAR(s.op().stash_bytes(kLayer), 2 * sh, 1e-3);
}

TEST(OperatorCost, UnfusedAttentionStashesFiveBytesPerScoreUnlessRecomputed) {
  Fixture s;
  s.config.attention = AttentionKernel::kUnfused;
  const double sh = 2048.0 * 2048, scores = 16.0 * 2048 * 2048;
  EXPECT_NEAR(s.op().stash_bytes(kLayer), 34 * sh + 5 * scores, 1e-3);
  s.config.recompute = Recompute::kSelective;
  EXPECT_NEAR(s.op().stash_bytes(kLayer), 34 * sh, 1e-3);
  EXPECT_GT(s.layer(Pass::kRecompute).attention_s, 0) << "selective recompute redoes the core";
}

TEST(OperatorCost, ContextParallelismDividesTheStash) {
  Fixture s;
  const double whole = s.op().stash_bytes(kLayer);
  s.config.cp = 4;
  EXPECT_NEAR(s.op().stash_bytes(kLayer), whole / 4, 1e-3);
}

// An FP8 twin of a BF16 fixture on H100 without the shape model (GEMMs at the curve's maximum).
struct Fp8Pair {
  Fixture bf16, fp8;
  Fp8Pair() {
    for (Fixture* f : {&bf16, &fp8}) {
      f->cluster = cluster_preset("h100-sxm");
      f->cluster.kernel_overhead_s = 0;
      f->cluster.num_sms = 0;
      f->cluster.gemm_half_saturation_flops = 0;
      f->cluster.fp8_gemm_efficiency = 0.8;
      f->config.num_microbatches = 4;
    }
    fp8.model.dtype = Dtype::kFp8;
  }
  double hbm() const { return fp8.cluster.hbm_bandwidth_bytes_per_s * fp8.cluster.hbm_efficiency; }
};

TEST(OperatorCost, Fp8GemmPlusItsCastsTakeTheHandComputedTime) {
  Fp8Pair p;
  p.fp8.cluster.kernel_overhead_s = 2e-6;
  const OperatorCost op = p.fp8.op();
  const double m = 8192, n = 8192, k = 4096;
  // The GEMM at the fp8 peak (1979 TFLOP/s) · fp8_gemm_efficiency · the BF16 efficiency, plus one
  // kernel overhead.
  const double gemm = 2 * m * n * k / (1979e12 * 0.8 * p.fp8.cluster.gemm_efficiency_max) + 2e-6;
  EXPECT_NEAR(op.gemm_s(m, n, k), gemm, 1e-12);
  // Its input's cast under current scaling: amax read (2 bytes), cast read (2) and FP8 copy plus
  // transpose written (1 + 1): 6 bytes per element, two kernels.
  const double cast = 6 * m * k / p.hbm() + 2 * 2e-6;
  EXPECT_NEAR(op.fp8_cast_s(m * k), cast, 1e-12);
  EXPECT_GT(op.gemm_s(m, n, k) + op.fp8_cast_s(m * k), 1.0001 * gemm)
      << "the cast is not free: dropping it fails here";
}

TEST(OperatorCost, Fp8DelayedScalingCastsWithoutTheAmaxPass) {
  Fp8Pair p;
  p.fp8.cluster.kernel_overhead_s = 2e-6;
  p.fp8.model.fp8_scaling = Fp8Scaling::kDelayed;
  EXPECT_NEAR(p.fp8.op().fp8_cast_s(1e6), 4 * 1e6 / p.hbm() + 2e-6, 1e-15);
}

TEST(OperatorCost, Fp8CastWritesNoTransposeWhereFp8GemmsTakeEveryLayout) {
  Fp8Pair p;
  p.fp8.cluster.fp8_transpose_copy = false;  // Blackwell
  EXPECT_NEAR(p.fp8.op().fp8_cast_s(1e6), 5 * 1e6 / p.hbm(), 1e-15);  // amax 2, read 2, write 1
  p.fp8.model.fp8_scaling = Fp8Scaling::kDelayed;
  EXPECT_NEAR(p.fp8.op().fp8_cast_s(1e6), 3 * 1e6 / p.hbm(), 1e-15);
}

// MXFP8 on Blackwell (b200 preset: fp8_block_scaling, no transpose copy for per-tensor FP8): one
// kernel per cast, no amax pass, both a row-wise and a column-wise copy with 1 scale byte per 32
// elements each: read 2 + write 2 · 33/32 = 4.0625 bytes per element. Per-tensor on the same GPU:
// current 2 + 2 + 1 = 5 bytes and 2 kernels, delayed 2 + 1 = 3 bytes and 1 kernel.
TEST(OperatorCost, Mxfp8CastWritesBothOrientationsWithTheirScalesInOneKernel) {
  Fixture s;
  s.cluster = cluster_preset("b200");
  s.cluster.kernel_overhead_s = 2e-6;
  s.model.dtype = Dtype::kFp8;
  const double hbm = s.cluster.hbm_bandwidth_bytes_per_s * s.cluster.hbm_efficiency;
  const double n = 3e6;
  const auto cast = [&](Fp8Scaling scaling) {
    Fixture f = s;
    f.model.fp8_scaling = scaling;
    return f.op().fp8_cast_s(n);
  };
  EXPECT_NEAR(cast(Fp8Scaling::kCurrent), 5 * n / hbm + 2 * 2e-6, 1e-15);
  EXPECT_NEAR(cast(Fp8Scaling::kDelayed), 3 * n / hbm + 2e-6, 1e-15);
  EXPECT_NEAR(cast(Fp8Scaling::kMxfp8), 4.0625 * n / hbm + 2e-6, 1e-15);
  // Even where per-tensor FP8 would write a transposed copy, MXFP8 writes the same two copies.
  s.cluster.fp8_transpose_copy = true;
  EXPECT_NEAR(cast(Fp8Scaling::kMxfp8), 4.0625 * n / hbm + 2e-6, 1e-15);
}

// The GEMMs of an MXFP8 model run at mxfp8_gemm_efficiency (b200: 0.875) of the per-tensor FP8
// rate (a compute-bound shape takes 1/0.875 the time; with the factor 1, the same time); a
// memory-bound one reads the scales too: (m·k + k·n)·(1 + 1/32) + 2·m·n.
TEST(OperatorCost, Mxfp8GemmRunsAtTheFp8RateAndReadsItsScales) {
  Fixture s;
  s.cluster = cluster_preset("b200");
  s.cluster.kernel_overhead_s = 0;
  s.cluster.num_sms = 0;  // no tile quantization: the skinny GEMM below is clearly memory bound
  s.cluster.gemm_half_saturation_flops = 0;
  s.model.dtype = Dtype::kFp8;
  Fixture mx = s;
  mx.model.fp8_scaling = Fp8Scaling::kMxfp8;
  EXPECT_NEAR(mx.op().gemm_s(8192, 8192, 8192), s.op().gemm_s(8192, 8192, 8192) / 0.875, 1e-12);
  Fixture other = s;
  other.cluster.mxfp8_gemm_efficiency = 0.5;
  EXPECT_DOUBLE_EQ(other.op().gemm_s(8192, 8192, 8192), s.op().gemm_s(8192, 8192, 8192))
      << "the per-tensor model ignores the MXFP8 factor";
  Fixture one = mx;
  one.cluster.mxfp8_gemm_efficiency = 1.0;
  EXPECT_DOUBLE_EQ(one.op().gemm_s(8192, 8192, 8192), s.op().gemm_s(8192, 8192, 8192));
  const double m = 16, n = 16384, k = 16384;  // a skinny GEMM: weight-read bound
  const double hbm = s.cluster.hbm_bandwidth_bytes_per_s * s.cluster.hbm_efficiency;
  EXPECT_NEAR(mx.op().gemm_s(m, n, k), ((m * k + k * n) * 33 / 32 + 2 * m * n) / hbm, 1e-15);
  EXPECT_NEAR(s.op().gemm_s(m, n, k), (m * k + k * n + 2 * m * n) / hbm, 1e-15);
}

// A whole layer pass: the MXFP8 step differs from current scaling's only in its casts' bytes and
// kernels (forward: inputs each microbatch, weights once a step; input gradient: the output
// gradients), and the weight-gradient pass casts nothing in either. Current scaling's QKV and
// mlp_up inputs come from Transformer Engine's norm with their amax (fp8_norm_fusion): 3 bytes
// (read 2, write 1) against MXFP8's 4.0625, which quantizes them separately.
TEST(OperatorCost, Mxfp8LayerDiffersFromCurrentScalingOnlyInItsCasts) {
  Fixture cur;
  cur.cluster = cluster_preset("b200");
  cur.cluster.kernel_overhead_s = 0;
  cur.cluster.mxfp8_gemm_efficiency = 1.0;  // the GEMMs at the per-tensor rate: casts alone differ
  cur.config.num_microbatches = 4;
  cur.model.dtype = Dtype::kFp8;
  Fixture mx = cur;
  mx.model.fp8_scaling = Fp8Scaling::kMxfp8;
  const double hbm = cur.cluster.hbm_bandwidth_bytes_per_s * cur.cluster.hbm_efficiency;
  const double m = 2048, h = 2048, f = 8192;  // gpt3-1.3b, one sequence, tp 1
  const double norm_inputs = m * (h + h);  // qkv, mlp_up
  const double inputs = m * (h + f);        // proj, mlp_down
  const double weights = (h * 3 * h + h * h + h * f + f * h) / 4;
  const double grads = m * (3 * h + h + f + h);
  EXPECT_NEAR(mx.layer(Pass::kForward).elementwise_s - cur.layer(Pass::kForward).elementwise_s,
              ((4.0625 - 3) * norm_inputs + (4.0625 - 5) * (inputs + weights)) / hbm, 1e-12);
  EXPECT_NEAR(mx.layer(Pass::kBackwardInput).elementwise_s -
                  cur.layer(Pass::kBackwardInput).elementwise_s,
              (4.0625 - 5) * grads / hbm, 1e-12);
  EXPECT_EQ(mx.layer(Pass::kBackwardWeight).elementwise_s, 0);
  EXPECT_DOUBLE_EQ(mx.layer(Pass::kForward).gemm_s, cur.layer(Pass::kForward).gemm_s);
  EXPECT_DOUBLE_EQ(mx.layer(Pass::kForward).attention_s, cur.layer(Pass::kForward).attention_s);
}

// MXFP8 needs block-scaled FP8 tensor cores: refused on Hopper (and on a GPU with no FP8 at all),
// naming the model's field and the cluster; accepted on both Blackwell presets.
TEST(OperatorCost, Mxfp8IsRefusedOnGpusWithoutBlockScaledFp8) {
  Fixture s;
  s.model.dtype = Dtype::kFp8;
  s.model.fp8_scaling = Fp8Scaling::kMxfp8;
  for (const char* gpu : {"h100-sxm", "h200", "h800"}) {
    s.cluster = cluster_preset(gpu);
    try {
      (void)s.op();
      ADD_FAILURE() << gpu << " accepted mxfp8";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'fp8_scaling'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string("'") + gpu + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("block-scaled"), std::string::npos) << msg;
    }
  }
  for (const char* gpu : {"a100-80g", "mi300x"}) {
    s.cluster = cluster_preset(gpu);
    EXPECT_THROW((void)s.op(), InputError) << gpu;
  }
  s.cluster = cluster_preset("h100-sxm");
  s.cluster.fp8_block_scaling = true;  // a calibrated cluster that declares it
  EXPECT_NO_THROW((void)s.op());
  for (const char* gpu : {"b200", "gb200-nvl72"}) {
    s.cluster = cluster_preset(gpu);
    EXPECT_TRUE(s.cluster.fp8_block_scaling) << gpu;
    EXPECT_NO_THROW((void)s.op()) << gpu;
  }
  EXPECT_FALSE(cluster_preset("h100-sxm").fp8_block_scaling);
  EXPECT_FALSE(cluster_preset("mi300x").fp8_block_scaling);
}

TEST(OperatorCost, Fp8ForwardCastsEachGemmInputAndOnceAStepItsWeight) {
  Fp8Pair p;
  const double m = 2048, h = 2048, f = 8192;  // gpt3-1.3b, one sequence, tp 1
  // qkv (k h, n 3h), proj (h, h), mlp_up (h, f), mlp_down (f, h): the inputs m·k each
  // microbatch, the weights k·n over the step's 4 microbatches. Current scaling: 6 bytes per
  // element (amax 2, read 2, write 1 + 1), but the qkv and mlp_up inputs, whose amax Transformer
  // Engine's norm computes (fp8_norm_fusion): 4.
  const double norm_inputs = m * (h + h);
  const double inputs = m * (h + f);
  const double weights = (h * 3 * h + h * h + h * f + f * h) / 4;
  const double extra = p.fp8.layer(Pass::kForward).elementwise_s -
                       p.bf16.layer(Pass::kForward).elementwise_s;
  EXPECT_NEAR(extra, (4 * norm_inputs + 6 * (inputs + weights)) / p.hbm(), 1e-12);
  // Every input cast separately: 6 bytes each.
  p.fp8.model.fp8_norm_fusion = false;
  EXPECT_NEAR(p.fp8.layer(Pass::kForward).elementwise_s -
                  p.bf16.layer(Pass::kForward).elementwise_s,
              6 * (norm_inputs + inputs + weights) / p.hbm(), 1e-12);
}

TEST(OperatorCost, Fp8InputGradientCastsTheOutputGradientsAndWeightGradientNothing) {
  Fp8Pair p;
  const double m = 2048, h = 2048, f = 8192;
  const double grads = m * (3 * h + h + f + h);  // the n of qkv, proj, mlp_up, mlp_down
  EXPECT_NEAR(p.fp8.layer(Pass::kBackwardInput).elementwise_s -
                  p.bf16.layer(Pass::kBackwardInput).elementwise_s,
              6 * grads / p.hbm(), 1e-12);
  EXPECT_EQ(p.fp8.layer(Pass::kBackwardWeight).elementwise_s, 0);
  // The weight-gradient GEMMs run in FP8 too: 1979 / 989 faster at 0.8 of the efficiency.
  EXPECT_NEAR(p.fp8.layer(Pass::kBackwardWeight).gemm_s * 1979 * 0.8,
              p.bf16.layer(Pass::kBackwardWeight).gemm_s * 989, 1e-9);
}

TEST(OperatorCost, Fp8KeepsAttentionAndTheLmHeadIn16Bits) {
  Fp8Pair p;
  EXPECT_DOUBLE_EQ(p.fp8.layer(Pass::kForward).attention_s,
                   p.bf16.layer(Pass::kForward).attention_s);
  // The stash shrinks only by its 1-byte GEMM inputs (Fp8StashesTheGemmInputsInOneByte).
  EXPECT_LT(p.fp8.op().stash_bytes(kLayer), p.bf16.op().stash_bytes(kLayer));
  const int logits = p.fp8.model.num_layers() - 1;
  EXPECT_DOUBLE_EQ(p.fp8.op().stage(logits, 1, 0).at(Pass::kForward).gemm_s,
                   p.bf16.op().stage(logits, 1, 0).at(Pass::kForward).gemm_s);
  EXPECT_DOUBLE_EQ(p.fp8.op().gemm_s(4096, 4096, 4096, /*fp8_capable=*/false),
                   p.bf16.op().gemm_s(4096, 4096, 4096));
}

TEST(OperatorCost, Fp8ConstantsDoNotTouchA16BitModel) {
  Fixture a, b;
  a.cluster = b.cluster = cluster_preset("h100-sxm");
  b.cluster.fp8_gemm_efficiency = 0.3;
  EXPECT_EQ(a.op().gemm_s(4096, 8192, 2048), b.op().gemm_s(4096, 8192, 2048));
  EXPECT_EQ(a.layer(Pass::kForward).total_s(), b.layer(Pass::kForward).total_s());
  EXPECT_EQ(b.op().fp8_cast_s(1e6), 0);
}

TEST(OperatorCost, CustomLayersFallBackToTheEfficiencyCurve) {
  Fixture s;
  ModelSpec m;
  m.name = "custom";
  LayerWork w;
  w.name = "blob";
  w.fwd_flops = 1e12;
  w.bwd_input_flops = 2e12;
  w.bwd_weight_flops = 1e12;
  m.layers = {w};
  s.model = m;
  const StageBreakdown b = s.op().stage(0, 1, 0);
  EXPECT_NEAR(b.at(Pass::kForward).other_s, 1e12 / (312e12 * s.cluster.gemm_efficiency(1e12)),
              1e-15);
  EXPECT_EQ(b.at(Pass::kForward).gemm_s, 0);
}

TEST(OperatorCost, OptimizerStepIsShardedByTheDistributedOptimizer) {
  Fixture s;
  s.config.dp = 4;
  s.config.cp = 2;
  const double plain = s.op().stage(kLayer, 1, 1e9).optimizer_s;
  EXPECT_NEAR(plain, 1e9 * 36 / (s.cluster.hbm_bandwidth_bytes_per_s * s.cluster.hbm_efficiency),
              1e-12);
  s.config.zero1 = true;
  EXPECT_NEAR(s.op().stage(kLayer, 1, 1e9).optimizer_s, plain / 8, 1e-12);
}

// Transformer Engine saves the FP8 cast of a linear layer's input for its weight gradient: the
// norm outputs feeding qkv and mlp_up (h each) and the GeLU output feeding mlp_down (f) are
// stashed in 1 byte instead of 2, and the attention output, which the attention backward still
// reads in 16 bits, gains a 1-byte copy for the projection (q). gpt3-1.3b: h = q = 2048, f = 8192.
TEST(OperatorCost, Fp8StashesTheGemmInputsInOneByte) {
  Fixture s;
  const LayerKernels bf16 = layer_kernels(s.model, kLayer);
  s.model.dtype = Dtype::kFp8;
  const LayerKernels fp8 = layer_kernels(s.model, kLayer);
  const double h = 2048, q = 2048, f = 8192;
  EXPECT_DOUBLE_EQ(bf16.stash_sequence_bytes_per_token - fp8.stash_sequence_bytes_per_token,
                   2 * h);
  EXPECT_DOUBLE_EQ(bf16.stash_split_bytes_per_token - fp8.stash_split_bytes_per_token, f - q);
  EXPECT_DOUBLE_EQ(fp8.stash_full_recompute_bytes_per_token,
                   bf16.stash_full_recompute_bytes_per_token)
      << "the layer input checkpoint stays 16-bit";
}

// An FP8 model's transformer-layer weights: stored in FP8 (fp8_params, 1 byte) or 16-bit plus
// Transformer Engine's cached FP8 copy (3 bytes), each plus a transpose where the GPU needs one;
// the embedding and the LM head stay 16-bit.
TEST(OperatorCost, Fp8WeightsAreCountedAsStoredAndCached) {
  Fixture s;
  s.cluster = cluster_preset("h100-sxm");
  s.config.pp = 1;
  const Partition p = auto_partition(s.model, {1, 0, 0});
  const Placement place = make_placement(PlacementKind::kLinear, 1, 1);
  double transformer = 0;
  for (const LayerWork& l : s.model.layers)
    if (l.kind == LayerKind::kTransformer) transformer += static_cast<double>(l.params);
  const auto weights = [&](bool fp8_params, bool transpose) {
    Fixture f = s;
    f.model.dtype = Dtype::kFp8;
    f.model.fp8_params = fp8_params;
    f.cluster.fp8_transpose_copy = transpose;
    return static_cast<double>(
        build_memory_model(f.model, p, place, f.config, f.cluster).actors[0].weight_bytes);
  };
  const double bf16 = static_cast<double>(
      build_memory_model(s.model, p, place, s.config, s.cluster).actors[0].weight_bytes);
  EXPECT_NEAR(weights(true, true) - bf16, 0, 2) << "FP8 weight and transpose: 2 bytes, as bf16";
  EXPECT_NEAR(bf16 - weights(true, false), transformer, 2) << "FP8 weight alone: 1 byte";
  EXPECT_NEAR(weights(false, true) - bf16, 2 * transformer, 2) << "bf16 + FP8 copy + transpose";
  EXPECT_NEAR(weights(false, false) - bf16, transformer, 2) << "bf16 + FP8 copy";
  // MXFP8 (on a GPU with block-scaled FP8): a row-wise and a column-wise copy, each with one
  // scale byte per 32 elements, whatever fp8_transpose_copy says.
  const auto mxfp8 = [&](bool fp8_params) {
    Fixture f = s;
    f.cluster.fp8_block_scaling = true;
    f.model.dtype = Dtype::kFp8;
    f.model.fp8_scaling = Fp8Scaling::kMxfp8;
    f.model.fp8_params = fp8_params;
    return static_cast<double>(
        build_memory_model(f.model, p, place, f.config, f.cluster).actors[0].weight_bytes);
  };
  EXPECT_NEAR(mxfp8(true) - bf16, transformer / 16, 2) << "2 · 33/32 bytes instead of 2";
  EXPECT_NEAR(mxfp8(false) - bf16, 2 * 33.0 / 32 * transformer, 2) << "bf16 + both MXFP8 copies";
}

// Recompute op (torchtitan's op-level selective checkpointing) on a Llama block (h 4096, 32 heads,
// 8 KV heads of 128, SwiGLU f 14336, s 8192): in 16 bits torchtitan keeps the outputs of wq, wv,
// w1 and w2 (the odd-numbered matmuls) and re-runs wk, wo and w3, every element-wise kernel, not
// the attention core; in FP8 every GEMM runs again (torch._scaled_mm is not in its save list).
struct LlamaFixture : Fixture {
  LlamaFixture() {
    model = load_model("llama3-8b");
    cluster.num_sms = 0;
    cluster.gemm_half_saturation_flops = 0;
  }
};

TEST(OperatorCost, OpRecomputeRerunsWkWoW3AndTheElementwiseKernels) {
  LlamaFixture s;
  const double m = 8192, h = 4096;
  const PassBreakdown fwd = s.layer(Pass::kForward);
  EXPECT_EQ(s.layer(Pass::kRecompute).total_s(), 0) << "none re-runs nothing";
  s.config.recompute = Recompute::kOp;
  const OperatorCost op = s.op();
  const PassBreakdown rc = s.layer(Pass::kRecompute);
  const double wk = op.gemm_s(m, 6144, h) * 1024 / 6144;  // the k share of the fused qkv GEMM
  const double wo = op.gemm_s(m, h, h);
  const double w3 = op.gemm_s(m, 2 * 14336, h) / 2;  // half of the fused w1|w3 GEMM
  EXPECT_NEAR(rc.gemm_s, wk + wo + w3, 1e-12);
  EXPECT_LT(rc.gemm_s, 0.5 * fwd.gemm_s);
  EXPECT_EQ(rc.attention_s, 0) << "the attention output is kept";
  EXPECT_GT(fwd.attention_s, 0);
  EXPECT_NEAR(rc.elementwise_s, fwd.elementwise_s, 1e-15);
  // Full re-runs the whole forward, selective only the attention core.
  s.config.recompute = Recompute::kFull;
  EXPECT_NEAR(s.layer(Pass::kRecompute).total_s(), fwd.total_s(), 1e-12);
  s.config.recompute = Recompute::kSelective;
  EXPECT_NEAR(s.layer(Pass::kRecompute).total_s(), fwd.attention_s, 1e-12);
}

TEST(OperatorCost, OpRecomputeInFp8RerunsEveryGemmAndItsInputCast) {
  LlamaFixture s;
  s.model.dtype = Dtype::kFp8;
  s.cluster = cluster_preset("h100-sxm");
  s.cluster.kernel_overhead_s = 0;
  s.cluster.num_sms = 0;
  s.cluster.gemm_half_saturation_flops = 0;
  s.config.num_microbatches = 4;
  const PassBreakdown fwd = s.layer(Pass::kForward);
  s.config.recompute = Recompute::kOp;
  const OperatorCost op = s.op();
  const PassBreakdown rc = s.layer(Pass::kRecompute);
  EXPECT_NEAR(rc.gemm_s, fwd.gemm_s, 1e-12) << "every FP8 GEMM again";
  EXPECT_EQ(rc.attention_s, 0);
  // The forward casts each weight once per step (a quarter per microbatch); op casts only the
  // inputs again: qkv 4096x6144, proj 4096x4096, w1|w3 4096x28672, w2 14336x4096.
  const double weights = op.fp8_cast_s(4096.0 * 6144) + op.fp8_cast_s(4096.0 * 4096) +
                         op.fp8_cast_s(4096.0 * 28672) + op.fp8_cast_s(14336.0 * 4096);
  EXPECT_NEAR(rc.elementwise_s, fwd.elementwise_s - weights / 4, 1e-12);
}

TEST(OperatorCost, OpRecomputeKeepsLessThanSelectiveAndMoreThanFull) {
  LlamaFixture s;
  const double m = 8192, h = 4096, q = 4096, kv = 1024, f = 14336, a = 32;
  s.config.recompute = Recompute::kOp;
  // Input h, attention output q and its fp32 log-sum-exp, wq (q), wv (kv), w1 (f), w2 (h).
  const double op16 = m * (2 * h + (2 * q + 4 * a) + 2 * (q + kv) + 2 * f + 2 * h);
  EXPECT_NEAR(s.op().stash_bytes(kLayer), op16, 1e-3);
  s.config.recompute = Recompute::kSelective;
  const double selective = s.op().stash_bytes(kLayer);
  s.config.recompute = Recompute::kFull;
  const double full = s.op().stash_bytes(kLayer);
  EXPECT_GT(op16, full);
  EXPECT_LT(op16, selective);
  // FP8 (on a GPU with FP8 tensor cores): no matmul output kept.
  s.model.dtype = Dtype::kFp8;
  s.cluster = cluster_preset("h100-sxm");
  s.config.recompute = Recompute::kOp;
  EXPECT_NEAR(s.op().stash_bytes(kLayer), m * (2 * h + 2 * q + 4 * a), 1e-3);
  // tp 2 with sequence parallelism: the input and the two reduce-scatter outputs split along the
  // sequence, the attention output by heads.
  s.config.tp = 2;
  s.config.sequence_parallel = true;
  EXPECT_NEAR(s.op().stash_bytes(kLayer), m * (3 * 2 * h / 2 + (2 * q + 4 * a) / 2), 1e-3);
}

TEST(OperatorCost, OpRecomputeFlopsAndStashOfTheModel) {
  const ModelSpec m = load_model("llama3-8b");
  const LayerWork& l = m.layers[kLayer];
  const double s = 8192, h = 4096, q = 4096, kv = 1024, f = 14336;
  const double attention = l.recompute_flops[static_cast<int>(Recompute::kSelective)];
  const double saved = 2 * s * h * (q + kv) + 2 * s * h * f * 2;  // wq, wv, w1, w2
  EXPECT_NEAR(l.recompute_flops[static_cast<int>(Recompute::kOp)], l.fwd_flops - attention - saved,
              1);
  EXPECT_NEAR(static_cast<double>(l.stash_bytes[static_cast<int>(Recompute::kOp)]),
              s * (2 * h + (2 * q + 4 * 32) + 2 * (q + kv) + 2 * f + 2 * h), 1);
  EXPECT_EQ(to_string(Recompute::kOp), "op");
  EXPECT_EQ(parse_recompute("OP", "--recompute"), Recompute::kOp);
  try {
    parse_recompute("opp", "--recompute");
    FAIL() << "an unknown policy must be refused";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--recompute"));
    EXPECT_THAT(e.what(), HasSubstr("none, selective, full or op"));
  }
}

// An OperatorCost keeps copies of what it is built from: it prices the same after its model and
// cluster change or go away (it used to hold references to them; ASan found an OperatorCost
// outliving the test fixture that owned its model and cluster).
TEST(OperatorCost, PricesTheSameAfterItsModelAndClusterChange) {
  Fixture s;
  s.config.tp = 2;
  const OperatorCost op = s.op();
  const double gemm = op.gemm_s(4096, 4096, 4096);
  const double allreduce = op.tp_allreduce_s(1 << 20);
  const double params = op.device_params(kLayer, 1, 1e6, false);
  const double forward = op.stage(kLayer, 1, 0).at(Pass::kForward).total_s();
  s.cluster = cluster_preset("h100-sxm");
  s.cluster.intra_node.bandwidth_bytes_per_s /= 10;
  s.model = load_model("gpt3-13b");
  EXPECT_EQ(op.gemm_s(4096, 4096, 4096), gemm);
  EXPECT_EQ(op.tp_allreduce_s(1 << 20), allreduce);
  EXPECT_EQ(op.device_params(kLayer, 1, 1e6, false), params);
  EXPECT_EQ(op.stage(kLayer, 1, 0).at(Pass::kForward).total_s(), forward);
}

// Under ASan (scripts/build.sh sanitize) a reference to the temporaries would be a
// stack-use-after-scope here.
TEST(OperatorCost, OneBuiltFromTemporariesPricesAsOneBuiltFromLvalues) {
  const Fixture s;
  const OperatorCost from_temporaries(load_model("gpt3-1.3b"), ParallelConfig{},
                                      [] {
                                        ClusterSpec c = cluster_preset("a100-80g");
                                        c.kernel_overhead_s = 0;
                                        return c;
                                      }());
  EXPECT_EQ(from_temporaries.stage(kLayer, 1, 0).at(Pass::kForward).total_s(),
            s.op().stage(kLayer, 1, 0).at(Pass::kForward).total_s());
  EXPECT_EQ(from_temporaries.tp_allreduce_s(1 << 20), s.op().tp_allreduce_s(1 << 20));
}

}  // namespace
}  // namespace jaxpp
