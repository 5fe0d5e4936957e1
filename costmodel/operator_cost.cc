#include "costmodel/operator_cost.h"

#include <algorithm>
#include <cmath>

#include "graph/error.h"

namespace jaxpp {
namespace {

constexpr double kAttentionBlockRows = 128;  // query rows per FlashAttention thread block
constexpr double kAttentionHalfKeys = 128;   // keys per query at which attention runs at half rate
constexpr double kFlashBackwardFlops = 2.5;  // backward FLOPs / forward FLOPs (FlashAttention-2)
// Rate of a half-size and a quarter-size output tile relative to the full tile (assumed, not
// fitted: a smaller tile reloads its operands more often per FLOP).
constexpr double kHalfTileRate = 0.95;
constexpr double kQuarterTileRate = 0.85;

// Fraction of the issued tile work that is useful: tile quantization (partial edge tiles) times
// wave quantization (the last wave of tiles leaves SMs idle).
double quantization(double m, double n, double tm, double tn, int sms) {
  const double tiles_m = std::ceil(m / tm), tiles_n = std::ceil(n / tn);
  const double tiles = tiles_m * tiles_n;
  const double tile_util = (m * n) / (tiles * tm * tn);
  const double waves = std::ceil(tiles / sms);
  return tile_util * tiles / (waves * sms);
}

double wave_util(double blocks, int sms) {
  if (sms <= 0 || blocks <= 0) return 1;
  return blocks / (std::ceil(blocks / sms) * sms);
}

}  // namespace

PassBreakdown& PassBreakdown::operator+=(const PassBreakdown& o) {
  gemm_s += o.gemm_s;
  attention_s += o.attention_s;
  elementwise_s += o.elementwise_s;
  tp_comm_s += o.tp_comm_s;
  cp_comm_s += o.cp_comm_s;
  other_s += o.other_s;
  ep_comm_s += o.ep_comm_s;
  return *this;
}

OperatorCost::OperatorCost(const ModelSpec& model, const ParallelConfig& config,
                           const ClusterSpec& cluster)
    : model_(model), config_(config), cluster_(cluster) {
  peak_ = cluster.peak_flops(model.dtype);  // throws if the dtype is unsupported
  // FP8 runs its GEMMs in FP8; attention and activations stay in 16 bits (Transformer Engine).
  const bool fp8 = model.dtype == Dtype::kFp8;
  fp8_ = fp8;
  if (fp8 && model.fp8_scaling == Fp8Scaling::kMxfp8 && !cluster.fp8_block_scaling)
    throw_input_error("model '" + model.name + "': field 'fp8_scaling'",
                      "mxfp8 needs block-scaled FP8 tensor cores (Blackwell: b200, gb200-nvl72, gb300-nvl72); "
                      "cluster '" + cluster.name +
                          "' has none (kernels.fp8_block_scaling false); use \"current\" or "
                          "\"delayed\"");
  attention_peak_ = fp8 ? cluster.peak_flops(Dtype::kBf16) : peak_;
  gemm16_peak_ = attention_peak_;
  db_ = fp8 ? 2 : dtype_bytes(model.dtype);
  const int cp = std::max(1, config.cp);
  if (cp > 1 && config.attention == AttentionKernel::kUnfused)
    throw_input_error("configuration",
                      "context parallelism (cp " + std::to_string(cp) +
                          ") needs flash attention (ring attention exchanges K/V blocks)");
  if (cp > 1 && model.seq_len > 0 && model.seq_len % (2 * cp) != 0)
    throw_input_error("configuration", "cp " + std::to_string(cp) + " does not divide seq_len " +
                                           std::to_string(model.seq_len) +
                                           " into 2·cp load-balanced chunks");
  tokens_ = static_cast<double>(config.microbatch_size) * model.tokens_per_sequence() / cp;
  check_recompute_layers(config, "configuration: recompute_layers");
  check_recompute_modules(config, "configuration: recompute_modules", &model);
  check_offload_layers(model, config, "configuration: offload_layers");
  if (config.offload_layers > 0 && !(cluster.host_link_bandwidth_bytes_per_s > 0))
    throw_input_error("configuration: offload_layers",
                      "activation offloading copies over the host link, but cluster '" +
                          cluster.name + "' has no host_link_gb_per_s");
  // Activation offloading: the model's first offload_layers transformer layers.
  offloaded_.assign(model.layers.size(), 0);
  for (int l = 0, n = 0; l < model.num_layers() && n < config.offload_layers; ++l)
    if (model.layers[l].kind == LayerKind::kTransformer) offloaded_[l] = 1, ++n;
  if (config.recompute == Recompute::kFull && config.recompute_layers >= 0) {
    ParallelConfig kept = config;
    kept.recompute = Recompute::kNone;
    kept.recompute_layers = -1;
    kept_ = std::make_shared<const OperatorCost>(model, kept, cluster);
  }
  // Layers of one kind (dense or MoE for transformer layers) share their kernels: list and
  // price each kind once.
  kernels_.reserve(model.layers.size());
  mtp_parts_.assign(model.layers.size(), {-1, -1});  // set below, once the kernels are listed
  std::array<int, 8> first_of_kind = {-1, -1, -1, -1, -1, -1, -1, -1};
  for (int l = 0; l < model.num_layers(); ++l) {
    const int kind = static_cast<int>(model.layers[l].kind) * 2 + (model.layers[l].moe ? 1 : 0);
    if (model.layers[l].kind != LayerKind::kCustom && first_of_kind[kind] >= 0) {
      kernels_.push_back(kernels_[first_of_kind[kind]]);
      cached_.push_back(cached_[first_of_kind[kind]]);
      continue;
    }
    kernels_.push_back(layer_kernels(model, l));
    cached_.push_back(-1);
    if (kernels_.back().has_kernels) {
      first_of_kind[kind] = l;
      cached_.back() = static_cast<int>(cache_.size());
      LayerCache c;
      for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight, Pass::kRecompute})
        c.pass[static_cast<int>(p)] =
            layer_pass(l, p, p == Pass::kBackwardInput ? &c.fused_hidden_s : nullptr);
      c.stash_bytes = compute_stash_bytes(l);
      cache_.push_back(c);
    }
  }
  // MTP modules (ModelSpec::mtp_block: the transformer layer each block copies); the shared head
  // is the logits layer after them.
  for (int l = 0; l < model.num_layers(); ++l) {
    const int block = model.mtp_block(l);
    if (block < 0) continue;
    int logits = -1;
    for (int i = l + 1; i < model.num_layers() && logits < 0; ++i)
      if (model.layers[static_cast<size_t>(i)].kind == LayerKind::kLogits) logits = i;
    if (logits >= 0 && kernels_[static_cast<size_t>(block)].has_kernels &&
        kernels_[static_cast<size_t>(logits)].has_kernels)
      mtp_parts_[static_cast<size_t>(l)] = {block, logits};
  }
}

PassBreakdown OperatorCost::mtp_pass(int layer, Pass pass, double* fused_hidden_s) const {
  const std::pair<int, int> parts = mtp_parts_[static_cast<size_t>(layer)];
  PassBreakdown out = layer_pass(parts.first, pass, fused_hidden_s);
  if (pass == Pass::kRecompute) return out;  // the block's recompute policy; the head keeps
  out += layer_pass(parts.second, pass, nullptr);  // its activations
  // The projection of [norm(h); norm(embedding)] (2h) to h, column-parallel (Megatron-Core's
  // eh_proj), in FP8 with the block's linear layers.
  const double h = model_.hidden, m = tokens_, tp = config_.tp;
  switch (pass) {
    case Pass::kForward:
      out.gemm_s += gemm_s(m, h / tp, 2 * h);
      out.elementwise_s += fp8_cast_s(m * 2 * h);
      break;
    case Pass::kBackwardInput:
      out.gemm_s += gemm_s(m, 2 * h, h / tp);
      out.elementwise_s += fp8_cast_s(m * h / tp);
      break;
    case Pass::kBackwardWeight:
      out.gemm_s += gemm_s(2 * h, h / tp, m);
      break;
    case Pass::kRecompute:
      break;
  }
  if (config_.tp > 1 && pass != Pass::kBackwardWeight) {
    // Its tensor-parallel communication (Megatron-Core multi_token_prediction.py: eh_proj is
    // column-parallel with gather_output false, followed by
    // gather_from_tensor_model_parallel_region and, with sequence parallelism,
    // scatter_to_sequence_parallel_region). Forward: with sp the 2h-wide input is all-gathered
    // along the sequence; the h/tp-wide output is all-gathered along the hidden dimension. The
    // backward mirrors it: the gather's gradient is a split (no communication), the scatter's an
    // all-gather of the h-wide gradient (sp), and the input gradient is reduce-scattered (sp) or
    // all-reduced; with sp the weight gradient's re-gather of the input runs under the
    // input-gradient GEMM.
    const bool sp = config_.sequence_parallel;
    const double hidden_bytes = m * h * db_;
    if (pass == Pass::kForward) {
      out.tp_comm_s += tp_gather_s(hidden_bytes) + (sp ? tp_gather_s(2 * hidden_bytes) : 0);
    } else {
      out.tp_comm_s += sp ? tp_gather_s(hidden_bytes) + tp_gather_s(2 * hidden_bytes) +
                                std::max(0.0, tp_gather_s(2 * hidden_bytes) -
                                                  gemm_s(m, 2 * h, h / tp))
                          : tp_allreduce_s(2 * hidden_bytes);
    }
  }
  if (pass != Pass::kBackwardWeight) {
    // Two RMSNorms (read h, write h each) and the concatenation (read 2h, write 2h) on the full
    // hidden state (split by tp with sequence parallelism); the backward moves twice as much.
    const bool sp = config_.sequence_parallel && config_.tp > 1;
    const double bytes = 8 * h * db_ * m / (sp ? tp : 1.0);
    out.elementwise_s += elementwise_s(pass == Pass::kForward ? bytes : 2 * bytes);
  }
  return out;
}

double OperatorCost::gemm_efficiency(double m, double n, double k, bool fp8_capable) const {
  return gemm_fit(m, n, k, fp8_capable).efficiency;
}

OperatorCost::GemmFit OperatorCost::gemm_fit(double m, double n, double k, bool fp8_capable) const {
  // Shape: the fraction of the work the GEMM issues that is useful (tile and wave quantization,
  // the short-k loss), and the SMs its tiles occupy. 1 (and 0 SMs) without an SM count.
  double shape = 1, occupied = 0;
  if (cluster_.num_sms > 0) {
    // The library picks the tile that wastes least: the cluster's large tile either way round,
    // or half or a quarter of it, which run at a lower rate of their own (less reuse per load).
    const double tm = cluster_.gemm_tile_m, tn = cluster_.gemm_tile_n;
    const struct {
      double tm, tn, rate;
    } tiles[] = {{tm, tn, 1.0},
                 {tn, tm, 1.0},
                 {tm, tn / 2, kHalfTileRate},
                 {tn / 2, tm, kHalfTileRate},
                 {tm / 2, tn / 2, kQuarterTileRate}};
    // The short-k loss is a fixed cost per output tile (the pipeline's prologue and the
    // epilogue) expressed as the k depth that takes as long: an FP8 k-loop runs at the FP8 peak,
    // so the same fixed time is that many times deeper in k (2x on Hopper and Blackwell).
    // Measured on an H200 (tests/data/kernels/h200_gemm_shapes_fp8.json): with the BF16 depth
    // the FP8 GEMMs with k <= 1024 ran 12-25 % slower than priced and those with k >= 8192 4-6 %
    // faster.
    const bool fp8 = fp8_ && fp8_capable;
    const double sms = cluster_.num_sms,
                 small_k = cluster_.gemm_small_k * (fp8 ? peak_ / gemm16_peak_ : 1.0);
    double best = 0;
    for (const auto& t : tiles) {
      const double count = std::ceil(m / t.tm) * std::ceil(n / t.tn);
      const double tiled =
          t.rate * quantization(m, n, t.tm, t.tn, cluster_.num_sms) * k / (k + small_k);
      if (tiled > best) {
        best = tiled;
        occupied = std::min(sms, count);
      }
      if (cluster_.stream_k_min_k > 0 && std::fmod(count, sms) != 0) {
        // Stream-K: the tiles' k-iterations spread evenly over the SMs, no partial wave. Each SM
        // runs depth = tiles · k / SMs iterations, but takes at least stream_k_min_k iterations'
        // time (below that its share is too short to run at its rate), plus the short-k cost of
        // each tile segment it works on (max(1, tiles / SMs) of them): time in iterations
        // max(depth, min_k) + small_k · max(1, tiles / SMs), which only grows with m, n and k.
        // From min_k of depth on this is the rate · min(k, depth) / (min(k, depth) + small_k) of
        // whole tiles.
        const double tile_util = (m * n) / (count * t.tm * t.tn);
        const double depth = count * k / sms;
        const double time =
            std::max(depth, cluster_.stream_k_min_k) + small_k * std::max(1.0, count / sms);
        const double streamed = t.rate * tile_util * cluster_.stream_k_rate * depth / time;
        if (streamed > best) {
          best = streamed;
          occupied = sms;
        }
      }
    }
    shape = best;
  }
  // Rate: the saturation curve (ClusterSpec::gemm_efficiency) at the work the GEMM issues, its
  // FLOPs divided by the shape factor, so that the curve's fixed cost (launch and ramp, the
  // half-saturation work) is paid once per GEMM and not scaled by the shape: a GEMM of one tile
  // costs about the curve's fixed time, not that time once per idle SM. Issued work only grows
  // with m, n and k, so the time never rises as a dimension shrinks. For the large GEMMs of
  // training (shape near 1, FLOPs far above the half-saturation work) this is the curve at the
  // GEMM's FLOPs.
  // An FP8 GEMM: its fraction of the BF16 efficiency, the curve at the FLOPs of its time at the
  // BF16 peak.
  // MXFP8 (block-scaled operands): mxfp8_gemm_efficiency of the per-tensor FP8 fraction.
  const double fp8_factor =
      model_.fp8_scaling == Fp8Scaling::kMxfp8
          ? cluster_.fp8_gemm_efficiency * cluster_.mxfp8_gemm_efficiency
          : cluster_.fp8_gemm_efficiency;
  const double issued = 2.0 * m * n * k / shape;
  const double e = fp8_ && fp8_capable
                       ? fp8_factor * cluster_.gemm_efficiency(issued * gemm16_peak_ / peak_)
                       : cluster_.gemm_efficiency(issued);
  return {e * shape, occupied};
}

double OperatorCost::gemm_s(double m, double n, double k, bool fp8_capable) const {
  return grouped_gemm_s(1, m, n, k, fp8_capable);
}

double OperatorCost::grouped_gemm_s(double count, double m, double n, double k,
                                    bool fp8_capable) const {
  if (count <= 0 || m <= 0 || n <= 0 || k <= 0) return 0;
  const bool fp8 = fp8_ && fp8_capable;
  // One launch: the groups' output tiles share the SMs (efficiency of the stacked count·m × n
  // problem); every group reads its own weights.
  const double flops = 2.0 * count * m * n * k;
  const double compute_s =
      flops / ((fp8 ? peak_ : gemm16_peak_) * gemm_efficiency(count * m, n, k, fp8_capable));
  // FP8: 1-byte operands (MXFP8: plus one E8M0 scale byte per 32 elements), a 16-bit output.
  const double operand = model_.fp8_scaling == Fp8Scaling::kMxfp8 ? 1.0 + 1.0 / 32 : 1.0;
  const double bytes = fp8 ? count * ((m * k + k * n) * operand + m * n * db_)
                           : count * (m * k + k * n + m * n) * db_;
  const double memory_s = bytes / (cluster_.hbm_bandwidth_bytes_per_s * cluster_.hbm_efficiency);
  return std::max(compute_s, memory_s) + cluster_.kernel_overhead_s;
}

double OperatorCost::expert_gemm_concurrency(double count, double m, double n, double k,
                                             bool fp8_capable) const {
  if (model_.moe.expert_gemm != ExpertGemm::kPerExpert || count <= 1) return 1;
  const double occupied = gemm_fit(m, n, k, fp8_capable).occupied_sms;
  if (occupied <= 0) return 1;  // no SM count: the streams' GEMMs cannot be placed
  // Each stream runs its experts one after another; the GEMMs of different streams share the SMs
  // their tiles leave free (the block scheduler places a kernel's tiles as SMs free up, so in
  // steady state SMs / occupied of them run at once, fractions included).
  const double streams = std::max(1, model_.moe.expert_gemm_streams);
  return std::max(1.0, std::min({streams, count, cluster_.num_sms / occupied}));
}

double OperatorCost::expert_gemms_s(double count, double m, double n, double k,
                                    bool fp8_capable) const {
  if (model_.moe.expert_gemm != ExpertGemm::kPerExpert || count <= 1)
    return grouped_gemm_s(count, m, n, k, fp8_capable);
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  // One cuBLAS GEMM per expert (Transformer Engine's multi_stream_cublas_gemm): each at the
  // single-GEMM efficiency of its own shape, c of them at once; each reads its operands and
  // writes its output, and together they cannot stream faster than the HBM.
  const bool fp8 = fp8_ && fp8_capable;
  const double c = expert_gemm_concurrency(count, m, n, k, fp8_capable);
  const double compute_s =
      2.0 * m * n * k / ((fp8 ? peak_ : gemm16_peak_) * gemm_efficiency(m, n, k, fp8_capable));
  const double operand = model_.fp8_scaling == Fp8Scaling::kMxfp8 ? 1.0 + 1.0 / 32 : 1.0;
  const double bytes =
      fp8 ? (m * k + k * n) * operand + m * n * db_ : (m * k + k * n + m * n) * db_;
  const double memory_s = bytes / (cluster_.hbm_bandwidth_bytes_per_s * cluster_.hbm_efficiency);
  return count * (std::max(compute_s / c, memory_s) + cluster_.kernel_overhead_s / c);
}

double OperatorCost::expert_casts_s(double count, double elements_each, bool weights) const {
  if (!fp8_ || count <= 0 || elements_each <= 0) return 0;
  const bool fused = model_.moe.expert_gemm != ExpertGemm::kPerExpert || count <= 1 ||
                     (!weights && model_.fp8_scaling == Fp8Scaling::kDelayed);
  if (fused) return fp8_cast_s(count * elements_each);
  return count * fp8_cast_s(elements_each);
}

double OperatorCost::fp8_cast_s(double elements) const {
  if (!fp8_ || elements <= 0) return 0;
  const double hbm = cluster_.hbm_bandwidth_bytes_per_s * cluster_.hbm_efficiency;
  if (model_.fp8_scaling == Fp8Scaling::kMxfp8) {
    // MXFP8: one kernel reads 2 bytes and writes the row-wise and the column-wise FP8 copies
    // with their E8M0 scales (1 byte per 32 elements each): the two copies' scales cover
    // different blocks, so the column-wise copy is quantized, not transposed, on every GPU. No
    // amax pass: each block's scale comes from its own 32 elements inside the cast.
    return elements * (2.0 + 2.0 * (1.0 + 1.0 / 32)) / hbm + cluster_.kernel_overhead_s;
  }
  // Per tensor: read 2 bytes, write the FP8 copy (and its transpose where the GPU's FP8 GEMMs
  // need the TN layout); current scaling reads the tensor first for its amax, in a kernel of its
  // own.
  const bool delayed = model_.fp8_scaling == Fp8Scaling::kDelayed;
  const double written = cluster_.fp8_transpose_copy ? 2.0 : 1.0;
  const double bytes = elements * (2.0 + written + (delayed ? 0.0 : 2.0));
  const double kernels = delayed ? 1 : 2;
  return bytes / hbm + kernels * cluster_.kernel_overhead_s;
}

double OperatorCost::fp8_norm_cast_s(double elements) const {
  if (!fp8_ || elements <= 0) return 0;
  if (!model_.fp8_norm_fusion) return fp8_cast_s(elements);
  const double hbm = cluster_.hbm_bandwidth_bytes_per_s * cluster_.hbm_efficiency;
  switch (model_.fp8_scaling) {
    case Fp8Scaling::kDelayed:
      // The norm wrote the FP8 copy (graph/kernels.cc: its output at 1 byte); what is left is
      // the transpose where the GPU's FP8 GEMMs need one (TE's nvte_transpose after the norm, or
      // of the gathered input in the backward with sequence parallelism): read 1, write 1.
      if (!cluster_.fp8_transpose_copy) return 0;
      return elements * 2.0 / hbm + cluster_.kernel_overhead_s;
    case Fp8Scaling::kCurrent: {
      // The norm wrote 16 bits and its amax (TE PR #2013: create_hp_tensor_with_amax): one cast
      // kernel, no amax pass.
      const double written = cluster_.fp8_transpose_copy ? 2.0 : 1.0;
      return elements * (2.0 + written) / hbm + cluster_.kernel_overhead_s;
    }
    case Fp8Scaling::kMxfp8:
      break;  // TE's default norm writes 16 bits; the MXFP8 cast follows as for any input
  }
  return fp8_cast_s(elements);
}

double OperatorCost::input_cast_s(const GemmKernel& g, double elements) const {
  return g.norm_input ? fp8_norm_cast_s(elements) : fp8_cast_s(elements);
}

double OperatorCost::elementwise_s(double bytes) const {
  if (bytes <= 0) return 0;
  return bytes / (cluster_.hbm_bandwidth_bytes_per_s * cluster_.hbm_efficiency) +
         cluster_.kernel_overhead_s;
}

double OperatorCost::curve_s(double flops) const {
  if (flops <= 0) return 0;
  return flops / (peak_ * cluster_.gemm_efficiency(flops));
}

double OperatorCost::tp_allreduce_s(double bytes) const {
  const int t = config_.tp;
  if (t <= 1 || bytes <= 0) return 0;
  const bool intra = t <= cluster_.devices_per_node;
  const LinkSpec& link = intra ? cluster_.intra_node : cluster_.inter_node;
  const double latency = intra ? cluster_.intra_collective_latency_s() : link.latency_s;
  return 2.0 * (t - 1) / t * bytes /
             (link.bandwidth_bytes_per_s * cluster_.allreduce_bus_efficiency) +
         2.0 * (t - 1) * latency;
}

double OperatorCost::tp_gather_s(double bytes) const { return tp_allreduce_s(bytes) / 2; }

namespace {

// P(a token's top_k experts, drawn without replacement from `experts`, miss a given set of
// `held` of them) = C(experts − held, top_k) / C(experts, top_k).
double routing_miss_probability(int experts, int held, int top_k) {
  double p = 1;
  for (int i = 0; i < top_k; ++i) {
    const double num = static_cast<double>(experts - held - i);
    if (num <= 0) return 0;
    p *= num / (experts - i);
  }
  return p;
}

}  // namespace

OperatorCost::MoeDestinations OperatorCost::moe_destinations() const {
  const int ep = std::max(1, config_.ep);
  const int experts = std::max(1, model_.moe.experts);
  const int top_k = std::clamp(model_.moe.top_k, 1, experts);
  const int g = std::clamp(cluster_.devices_per_node / std::max(1, config_.expert_tp()), 1, ep);
  const int nodes = (ep + g - 1) / g;
  const int per_rank = std::max(1, experts / ep);
  MoeDestinations d;
  if (config_.moe_routing == MoeRouting::kRandom) {
    const int per_node = std::min(experts, per_rank * g);
    if (config_.moe_node_limit > 0 && config_.moe_node_limit < nodes) {
      // Node-limited: the token's M nodes drawn uniformly (a balanced gate), its top_k experts
      // uniformly from their M·per_node experts (M raised to what top_k needs).
      const int m = std::max(config_.moe_node_limit, (top_k + per_node - 1) / per_node);
      const int pool = std::min(experts, m * per_node);
      d.ranks = m * g * (1 - routing_miss_probability(pool, per_rank, top_k));
      d.nodes = m * (1 - routing_miss_probability(pool, per_node, top_k));
      return d;
    }
    if (config_.moe_device_limit > 0 && config_.moe_device_limit < ep) {
      // Device-limited: M ranks drawn uniformly, top_k experts from their M·per_rank experts;
      // the nodes are those of the M ranks (each holds an expert of the token but for the
      // misses, so this bounds them), at most as many as unlimited routing reaches.
      const int m = config_.moe_device_limit;
      const int pool = std::min(experts, m * per_rank);
      d.ranks = m * (1 - routing_miss_probability(pool, per_rank, top_k));
      d.nodes = std::min(nodes * (1 - routing_miss_probability(ep, std::min(ep, g), m)),
                         nodes * (1 - routing_miss_probability(experts, per_node, top_k)));
      return d;
    }
    d.ranks = ep * (1 - routing_miss_probability(experts, per_rank, top_k));
    d.nodes = nodes * (1 - routing_miss_probability(experts, per_node, top_k));
    return d;
  }
  // Contiguous: token t starts at expert t·top_k mod E; the starts repeat with period
  // E / gcd(E, top_k), which divides E, so tokens 0 … E−1 weigh every start alike.
  double ranks = 0, node_count = 0;
  for (int t = 0; t < experts; ++t) {
    const int start = static_cast<int>((static_cast<int64_t>(t) * top_k) % experts);
    int last_rank = -1, last_node = -1, first_rank = -1, first_node = -1;
    for (int i = 0; i < top_k; ++i) {
      const int rank = ((start + i) % experts) / per_rank;
      const int node = rank / g;
      // A window is a run of consecutive experts (wrapping once): count each change of rank and
      // of node, and the wrap back onto the window's first rank or node only once.
      if (rank != last_rank && rank != first_rank) ++ranks;
      if (node != last_node && node != first_node) ++node_count;
      if (first_rank < 0) first_rank = rank, first_node = node;
      last_rank = rank;
      last_node = node;
    }
  }
  d.ranks = ranks / experts;
  d.nodes = node_count / experts;
  return d;
}

double OperatorCost::moe_alltoall_s(double bytes) const {
  const int ep = std::max(1, config_.ep);
  if (ep <= 1 || bytes <= 0) return 0;
  const int etp = config_.expert_tp();
  const int g = std::clamp(cluster_.devices_per_node / std::max(1, etp), 1, ep);
  const int k = (ep + g - 1) / g;
  const double bw_intra = cluster_.intra_node.effective_bandwidth_bytes_per_s();
  const double bw_inter = cluster_.inter_node.effective_bandwidth_bytes_per_s();
  const double lat_intra = g > 1 ? cluster_.intra_node.latency_s : 0;
  const double lat_inter = k > 1 ? cluster_.inter_node.latency_s : 0;
  const double top_k = std::max(1, model_.moe.top_k);
  if (config_.moe_dispatcher == MoeDispatcher::kDeepEP) {
    // One copy per destination rank: R/ep of the destinations are the device itself, R(g−1)/ep
    // other devices of its node (NVLink), R(ep−g)/ep on other nodes, reached over the network
    // once per destination node (N(k−1)/k of them) and forwarded over NVLink there unless the
    // receiving device is the destination ((g−1)/g of them); NVLink and network run at once.
    const MoeDestinations d = moe_destinations();
    const double per_token = bytes / top_k;
    const double nvlink = per_token * (d.ranks * (g - 1) / ep +
                                       d.ranks * (ep - g) / ep * (g - 1) / std::max(1, g));
    const double network = k > 1 ? per_token * d.nodes * (k - 1) / k : 0.0;
    return std::max(nvlink / bw_intra, network / bw_inter) + lat_intra + lat_inter;
  }
  const double intra_bytes = bytes * (g - 1) / ep;
  const double inter_bytes = bytes * (ep - g) / ep;
  const double flat = std::max(intra_bytes / bw_intra, k > 1 ? inter_bytes / bw_inter : 0.0) +
                      lat_intra + lat_inter;
  if (k <= 1) return flat;
  // The nodes a token's experts are on (routing, node and device limits: moe_destinations), each
  // remote with probability (k−1)/k.
  const double remote_nodes = moe_destinations().nodes * (k - 1) / k;
  const double hierarchical = bytes * remote_nodes / top_k / bw_inter +
                              (g > 1 ? bytes * (g - 1) / g / bw_intra : 0.0) + lat_intra +
                              lat_inter;
  return std::min(flat, hierarchical);
}

double OperatorCost::moe_alltoall_bytes(bool dispatch) const {
  const std::optional<Dtype>& dtype =
      dispatch ? model_.moe.dispatch_dtype : model_.moe.combine_dtype;
  const double element_bytes = dtype ? alltoall_bytes_per_element(*dtype) : db_;
  const double etp_over_tp = static_cast<double>(config_.expert_tp()) / config_.tp;
  return tokens_ * etp_over_tp * model_.moe.top_k * model_.hidden * element_bytes *
         config_.moe_imbalance;
}

double OperatorCost::device_params(int first_layer, int num_layers, double params,
                                   bool optimizer_sharded) const {
  double experts = 0;
  for (int l = first_layer; l < first_layer + num_layers; ++l)
    experts += static_cast<double>(model_.routed_expert_params(l));
  const double dense = std::max(0.0, params - experts);
  const double expert_devices = static_cast<double>(std::max(1, config_.ep)) * config_.expert_tp();
  if (!optimizer_sharded || !config_.zero1) return dense / config_.tp + experts / expert_devices;
  return dense / config_.tp / optimizer_shards(config_) +
         experts / expert_devices / std::max(1, config_.expert_dp());
}

double OperatorCost::attention_s(const LayerKernels& k, bool forward) const {
  const AttentionWork& a = k.attention;
  const double tp = config_.tp, cp = std::max(1, config_.cp);
  const double s = model_.tokens_per_sequence();
  const double heads = a.heads / tp;
  if (config_.attention == AttentionKernel::kUnfused) {
    const double d = a.head_dim;
    const double rows = config_.microbatch_size * heads * s;
    const double traffic = rows * s * k.scores_traffic_bytes_per_head_key;
    // Forward: QK^T, softmax(+dropout), attention·V. Backward: dP = dO·V^T, dV = P^T·dO,
    // dQ = dS·K, dK = dS^T·Q; softmax and dropout gradients.
    // 16-bit even for FP8 models (Transformer Engine's FP8 covers the linear layers).
    if (forward)
      return gemm_s(rows, s, d, false) + gemm_s(rows, d, s, false) + elementwise_s(traffic);
    return gemm_s(rows, s, d, false) + 3 * gemm_s(rows, d, s, false) +
           elementwise_s(2 * traffic);
  }
  const double causal = a.causal ? 0.5 : 1.0;
  // Per device: its m query tokens against all s keys, causal-halved (cp ranks balance the
  // causal work with 2·cp chunks).
  const double flops =
      (forward ? 1.0 : kFlashBackwardFlops) * tokens_ * a.fwd_flops_per_token(s) / tp * causal;
  double efficiency =
      forward ? cluster_.attention_efficiency_forward : cluster_.attention_efficiency_backward;
  if (config_.attention == AttentionKernel::kFlash2) {
    const double flash2 = forward ? cluster_.flash2_attention_efficiency_forward
                                  : cluster_.flash2_attention_efficiency_backward;
    if (flash2 > 0) efficiency = flash2;
  }
  if (efficiency <= 0) return curve_s(flops);
  const double blocks = config_.microbatch_size * heads * std::ceil(s / cp / kAttentionBlockRows);
  const double keys = s * causal;
  const double e =
      efficiency * wave_util(blocks, cluster_.num_sms) * keys / (keys + kAttentionHalfKeys);
  return flops / (attention_peak_ * e) + cluster_.kernel_overhead_s;
}

PassBreakdown OperatorCost::layer_pass(int layer, Pass pass, double* fused_hidden_s) const {
  PassBreakdown out;
  const LayerWork& work = model_.layers[layer];
  const LayerKernels& k = kernels_[layer];
  const double tp = config_.tp;
  const bool sp = config_.sequence_parallel && config_.tp > 1;
  const double m = tokens_;
  const Recompute rc = config_.recompute;

  if (mtp_parts_[static_cast<size_t>(layer)].first >= 0) return mtp_pass(layer, pass, fused_hidden_s);
  if (!k.has_kernels) {  // custom layer: FLOPs with the efficiency curve
    const double mb = static_cast<double>(config_.microbatch_size) / tp;
    switch (pass) {
      case Pass::kForward:
        out.other_s = curve_s(work.fwd_flops * mb);
        break;
      case Pass::kBackwardInput:
        out.other_s = curve_s(work.bwd_input_flops * mb);
        break;
      case Pass::kBackwardWeight:
        out.other_s = curve_s(work.bwd_weight_flops * mb);
        break;
      case Pass::kRecompute:
        // Selective without core_attn (recompute_modules): the other modules are not in a
        // custom layer.
        if (rc != Recompute::kSelective || recomputes_module(config_, RecomputeModule::kCoreAttn))
          out.other_s = curve_s(work.recompute_flops[static_cast<int>(rc)] * mb);
        break;
    }
    if (pass == Pass::kForward || pass == Pass::kBackwardInput ||
        (pass == Pass::kRecompute && (rc == Recompute::kFull || rc == Recompute::kOp))) {
      if (work.tp_allreduce_bytes > 0 && tp > 1)
        out.tp_comm_s = 2 * tp_allreduce_s(work.tp_allreduce_bytes * mb * tp / 2);
    }
    return out;
  }

  if (pass == Pass::kRecompute) {
    if (rc == Recompute::kNone || work.kind != LayerKind::kTransformer) return out;
    if (rc == Recompute::kSelective) return selective_recompute(layer);
    if (rc == Recompute::kFull) {  // the forward again
      double unused = 0;
      return layer_pass(layer, Pass::kForward, &unused);
    }
    // Op (torchtitan's op-level selective checkpointing): the forward's kernels again but the
    // attention core (its output is kept) and the share of each 16-bit GEMM whose output is kept
    // (GemmKernel::op_recompute); the element-wise kernels, the FP8 input casts, the expert
    // dispatch and the tensor-parallel all-gathers (all-reduces without sp) run again, the
    // reduce-scatters' outputs are kept. Below, kRecompute means op.
  }

  // Routed experts (count > 1): split over etp, E/ep of them per device, each over the tokens
  // of the ep group routed to it (× the imbalance on the busiest rank).
  const double etp = config_.expert_tp();
  const double ep = std::max(1, config_.ep);
  const auto routed = [](const GemmKernel& g) { return g.count > 1; };
  const auto split_of = [&](const GemmKernel& g) { return routed(g) ? etp : tp; };
  const auto split_n = [&](const GemmKernel& g) {
    return g.split == TpSplit::kColumn ? g.n / split_of(g) : g.n;
  };
  const auto split_k = [&](const GemmKernel& g) {
    return g.split == TpSplit::kRow ? g.k / split_of(g) : g.k;
  };
  const auto group_count = [&](const GemmKernel& g) { return routed(g) ? g.count / ep : g.count; };
  const auto group_tokens = [&](const GemmKernel& g) {
    if (!routed(g)) return m * g.token_fraction;
    return m * g.token_fraction * ep * (etp / tp) * config_.moe_imbalance;
  };

  // GEMMs and, per GEMM, the one that pairs with each TP collective.
  std::vector<double> gemm_times;
  double fp8_casts_s = 0;
  for (const GemmKernel& g : k.gemms) {
    const double n = split_n(g), kk = split_k(g);
    // Routed experts: `count` GEMMs, each over its share of the tokens.
    const double gm = group_tokens(g), count = group_count(g);
    // Routed experts: as the model's framework runs them (grouped or one GEMM and one set of
    // casts per expert; expert_gemms_s and expert_casts_s are grouped_gemm_s and one cast for
    // count 1).
    const double per_step = std::max(1, config_.num_microbatches);
    double t = 0;
    switch (pass) {
      case Pass::kForward:
        t = expert_gemms_s(count, gm, n, kk, g.fp8);
        // FP8: the input's cast (what is left of it when the norm quantizes), and the
        // weight's once per step.
        if (fp8_ && g.fp8)
          fp8_casts_s += (routed(g) ? expert_casts_s(count, gm * kk, false)
                                    : input_cast_s(g, count * gm * kk)) +
                         expert_casts_s(count, kk * n, true) / per_step;
        break;
      case Pass::kBackwardInput:
        t = expert_gemms_s(count, gm, kk, n, g.fp8);
        if (fp8_ && g.fp8) fp8_casts_s += expert_casts_s(count, gm * n, false);  // output grad
        break;
      case Pass::kBackwardWeight:
        t = expert_gemms_s(count, kk, n, gm, g.fp8);
        break;
      case Pass::kRecompute:  // op
        t = expert_gemms_s(count, gm, n, kk, g.fp8) * g.op_recompute;
        if (fp8_ && g.fp8 && g.op_recompute > 0)
          fp8_casts_s +=
              routed(g) ? expert_casts_s(count, gm * kk, false) : input_cast_s(g, count * gm * kk);
        break;
    }
    gemm_times.push_back(t);
    out.gemm_s += t;
    // Eager PyTorch with fp32 parameters (graph/kernels.h weight_*_bytes_per_param): the weight's
    // bf16 cast in every forward (and recompute), its gradient's fp32 cast in the backward; one
    // kernel per weight.
    const double weight_bytes = pass == Pass::kBackwardWeight ? k.weight_bwd_bytes_per_param
                                : pass == Pass::kBackwardInput ? 0.0
                                                                : k.weight_fwd_bytes_per_param;
    if (weight_bytes > 0) out.elementwise_s += count * elementwise_s(n * kk * weight_bytes);
  }
  out.elementwise_s += fp8_casts_s;
  if (pass == Pass::kBackwardWeight) return out;

  // Element-wise kernels.
  for (const ElementwiseKernel& e : k.elementwise) {
    const double div =
        e.split == TpSplit::kColumn || (e.split == TpSplit::kSequence && sp) ? tp : 1;
    const double per_token = pass == Pass::kBackwardInput ? e.bwd_bytes_per_token
                                                          : e.fwd_bytes_per_token;
    out.elementwise_s += elementwise_s(per_token * m / div);
  }

  // Expert-parallel dispatch and combine (forward; the input-gradient pass sends the gradients
  // back the same way).
  if (work.moe && model_.moe.enabled() && config_.ep > 1)
    out.ep_comm_s =
        moe_alltoall_s(moe_alltoall_bytes(true)) + moe_alltoall_s(moe_alltoall_bytes(false));

  // Attention core.
  if (k.has_attention && pass != Pass::kRecompute) {
    out.attention_s = attention_s(k, pass == Pass::kForward);
    // Ring attention: cp − 1 steps, each overlapping one block's compute.
    const int cp = std::max(1, config_.cp);
    if (cp > 1) {
      const double kv_bytes =
          m * 2.0 * std::max(1.0, k.attention.kv_heads / tp) * k.attention.head_dim * db_;
      const double bytes = pass == Pass::kForward ? kv_bytes : 2 * kv_bytes;
      const bool intra = static_cast<int64_t>(config_.tp) * cp <= cluster_.devices_per_node;
      const LinkSpec& link = intra ? cluster_.intra_node : cluster_.inter_node;
      const double step_s = link.latency_s + bytes / link.effective_bandwidth_bytes_per_s();
      out.cp_comm_s = (cp - 1) * std::max(0.0, step_s - out.attention_s / cp);
    }
  }

  // Tensor-parallel communication.
  if (config_.tp > 1) {
    const double bytes = m * k.hidden_bytes_per_token;
    const bool overlap = config_.tp_comm_overlap && sp;
    const auto exposed = [&](double comm_s, double gemm_s_) {
      if (!overlap) return comm_s;
      return comm_s / tp + (tp - 1) / tp * std::max(0.0, comm_s - gemm_s_);
    };
    if (work.kind == LayerKind::kTransformer) {
      // Forward: (all-gather →) qkv, proj (→ reduce-scatter), (all-gather →) mlp_up,
      // mlp_down (→ reduce-scatter); without sp each pair is one all-reduce after the row GEMM.
      // Backward: the mirror image (the column GEMMs' input gradients are reduced). The GEMMs
      // flagged tp_collective (graph/kernels.h) pair with the collectives; the block's first
      // ones (qkv or MLA's first projection, mlp_up or expert_up) consume the gathered input.
      const double one = sp ? tp_gather_s(bytes) : tp_allreduce_s(bytes) / 2;
      std::vector<size_t> block_inputs;
      double comm = 0;
      for (size_t i = 0; i < gemm_times.size(); ++i) {
        if (!k.gemms[i].tp_collective) continue;
        // Op recompute: the reduce-scatters' outputs are kept.
        if (pass == Pass::kRecompute && sp && k.gemms[i].split == TpSplit::kRow) continue;
        comm += exposed(one, gemm_times[i]);
        if (k.gemms[i].split != TpSplit::kRow) block_inputs.push_back(i);
      }
      if (sp && pass == Pass::kBackwardInput) {
        // Re-gather of the sharded inputs of qkv and mlp_up for their weight gradients, issued
        // while the input-gradient GEMMs run.
        for (size_t i : block_inputs) comm += std::max(0.0, one - gemm_times[i]);
      }
      out.tp_comm_s = comm;
      if (pass == Pass::kBackwardInput && fused_hidden_s != nullptr) {
        // In a fused backward, the input-gradient collective of each column GEMM (qkv, mlp_up)
        // runs under its weight-gradient GEMM.
        for (size_t i : block_inputs) {
          const GemmKernel& g = k.gemms[i];
          const double wgrad =
              expert_gemms_s(group_count(g), split_k(g), split_n(g), group_tokens(g), g.fp8);
          *fused_hidden_s += std::min(exposed(one, gemm_times[i]), wgrad);
        }
      }
    } else if (pass == Pass::kRecompute) {
      // Only transformer layers are recomputed.
    } else if (work.kind == LayerKind::kLogits) {
      // Vocabulary-parallel head: sp all-gathers its input (forward) and reduce-scatters the
      // input gradient; without sp the input gradient is all-reduced.
      if (pass == Pass::kForward)
        out.tp_comm_s = sp ? tp_gather_s(bytes) : 0;
      else
        out.tp_comm_s = sp ? tp_gather_s(bytes) : tp_allreduce_s(bytes);
    } else if (work.kind == LayerKind::kEmbedding && pass == Pass::kForward) {
      // Vocabulary-parallel embedding: partial rows reduced (reduce-scatter with sp).
      out.tp_comm_s = sp ? tp_gather_s(bytes) : tp_allreduce_s(bytes);
    }
  }
  return out;
}

PassBreakdown OperatorCost::selective_recompute(int layer) const {
  // Megatron-Core's recompute modules (graph/plan.h RecomputeModule, graph/kernels.h): each
  // module's forward kernels again in the backward.
  PassBreakdown out;
  const LayerKernels& k = kernels_[layer];
  const uint32_t modules = effective_recompute_modules(config_);
  const auto has = [&](RecomputeModule m) { return (modules & recompute_module_bit(m)) != 0; };
  if (has(RecomputeModule::kCoreAttn))  // the attention core's forward again
    out.attention_s = attention_s(k, /*forward=*/true);
  if (modules == recompute_module_bit(RecomputeModule::kCoreAttn)) return out;
  const double tp = config_.tp, m = tokens_;
  const double seq_div = config_.sequence_parallel && config_.tp > 1 ? tp : 1.0;
  if (has(RecomputeModule::kLayernorm) && k.separate_norms > 0) {
    // Each separate norm's forward on the (sequence-parallel) hidden state; FP8: its output
    // quantized again for each FP8 GEMM that reads it (the full sequence after the gather).
    for (int i = 0; i < k.separate_norms; ++i)
      out.elementwise_s +=
          elementwise_s(k.layernorm_fwd_bytes_per_token / k.separate_norms * m / seq_div);
    if (k.layernorm_recast_elements_per_token > 0)
      out.elementwise_s += fp8_cast_s(k.layernorm_recast_elements_per_token * m);
  }
  if (has(RecomputeModule::kMlaUpProj) && k.mla_up_proj_recompute_bytes_per_token > 0) {
    // qkv_up_proj_and_rope_apply: q_up (or q without a q latent) and kv_up with their fused
    // latent norms, then RoPE; FP8: each GEMM's input cast again (the weights' casts are cached).
    const bool q_latent = model_.mla.q_lora_rank > 0;
    for (const GemmKernel& g : k.gemms) {
      if (g.name != "kv_up" && g.name != (q_latent ? "q_up" : "q")) continue;
      const double n = g.split == TpSplit::kColumn ? g.n / tp : g.n;
      out.gemm_s += grouped_gemm_s(g.count, m * g.token_fraction, n, g.k, g.fp8);
      if (fp8_ && g.fp8) out.elementwise_s += fp8_cast_s(g.count * m * g.token_fraction * g.k);
    }
    for (const ElementwiseKernel& e : k.elementwise) {
      if (e.name != "rope" && e.name != "latent_norm") continue;
      const double div = e.split == TpSplit::kColumn ? tp : 1.0;
      out.elementwise_s += elementwise_s(e.fwd_bytes_per_token * m / div);
    }
  }
  if (has(RecomputeModule::kMoeAct) && k.moe_act_fwd_bytes_per_token > 0) {
    // The routed experts' activation (split as the SwiGLU kernel); FP8: its output quantized
    // again for linear_fc2's weight gradient.
    out.elementwise_s += elementwise_s(k.moe_act_fwd_bytes_per_token * m / tp);
    if (fp8_) {
      // Re-quantized as linear_fc2's input: per local expert with per-expert GEMMs.
      const double local =
          std::max(1.0, static_cast<double>(model_.moe.experts) / std::max(1, config_.ep));
      out.elementwise_s +=
          expert_casts_s(local, k.moe_act_elements_per_token * m / tp / local, false);
    }
  }
  return out;
}

const OperatorCost& OperatorCost::pricing(int first_layer, int layer) const {
  if (kept_ && layer_recompute(model_, config_, first_layer, layer) == Recompute::kNone)
    return *kept_;
  return *this;
}

StageBreakdown OperatorCost::stage(int first_layer, int num_layers, double params) const {
  StageBreakdown b;
  for (int l = first_layer; l < first_layer + num_layers; ++l) {
    const OperatorCost& src = pricing(first_layer, l);
    if (src.cached_[l] >= 0) {
      const LayerCache& c = src.cache_[src.cached_[l]];
      for (size_t p = 0; p < b.pass.size(); ++p) b.pass[p] += c.pass[p];
      b.fused_backward_hidden_s += c.fused_hidden_s;
      continue;
    }
    double hidden = 0;
    for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight, Pass::kRecompute})
      b.pass[static_cast<int>(p)] +=
          src.layer_pass(l, p, p == Pass::kBackwardInput ? &hidden : nullptr);
    b.fused_backward_hidden_s += hidden;
  }
  // Activation offloading (the header): the offloaded layers' activations cross the host link
  // during the forward and back during the backward, beside the compute; what the compute does
  // not hide is exposed, as other work of the pass.
  const double offloaded = offloaded_stash_bytes(first_layer, num_layers);
  if (offloaded > 0) {
    const double copy_s = offloaded / cluster_.host_link_bandwidth_bytes_per_s;
    PassBreakdown& f = b.pass[static_cast<int>(Pass::kForward)];
    PassBreakdown& i = b.pass[static_cast<int>(Pass::kBackwardInput)];
    const double backward = i.total_s() + b.at(Pass::kBackwardWeight).total_s();
    const double forward = f.total_s();
    f.other_s += std::max(0.0, copy_s - forward);
    i.other_s += std::max(0.0, copy_s - backward);
  }
  const double local_params =
      device_params(first_layer, num_layers, params, /*optimizer_sharded=*/true);
  const double hbm_eff = cluster_.num_sms > 0 ? cluster_.hbm_efficiency : 1.0;
  b.optimizer_s = local_params *
                  optimizer_traffic_bytes_per_param(config_.optimizer_state,
                                                    cluster_.optimizer_state_bytes_per_param,
                                                    cluster_.optimizer_traffic_bytes_per_param) /
                  (cluster_.hbm_bandwidth_bytes_per_s * hbm_eff);
  return b;
}

double OperatorCost::stash_bytes(int layer) const {
  return cached_[layer] >= 0 ? cache_[cached_[layer]].stash_bytes : compute_stash_bytes(layer);
}

double OperatorCost::stage_stash_bytes(int first_layer, int num_layers) const {
  // Offloaded layers' activations live on the host, but for the two in flight (the header).
  double bytes = 0, largest = 0, second = 0;
  for (int l = first_layer; l < first_layer + num_layers; ++l) {
    const double stash = pricing(first_layer, l).stash_bytes(l);
    if (!offloaded_[l]) {
      bytes += stash;
    } else if (stash > largest) {
      second = largest;
      largest = stash;
    } else {
      second = std::max(second, stash);
    }
  }
  return bytes + largest + second;
}

double OperatorCost::offloaded_stash_bytes(int first_layer, int num_layers) const {
  double bytes = 0;
  for (int l = first_layer; l < first_layer + num_layers; ++l)
    if (offloaded_[l]) bytes += pricing(first_layer, l).stash_bytes(l);
  return bytes;
}

double OperatorCost::loss_transient_bytes(int layer) const {
  const std::pair<int, int> parts = mtp_parts_[static_cast<size_t>(layer)];
  const int head = parts.first >= 0 ? parts.second : layer;
  return tokens_ * kernels_[static_cast<size_t>(head)].loss_transient_split_bytes_per_token /
         config_.tp;
}

double OperatorCost::compute_stash_bytes(int layer) const {
  if (mtp_parts_[static_cast<size_t>(layer)].first >= 0) {
    // An MTP module: its block's stash, the projection's 2h input (on the full hidden state) and
    // the head's; graph/model.cc's mtp_layer counts the same three parts.
    const std::pair<int, int> parts = mtp_parts_[static_cast<size_t>(layer)];
    const bool sp = config_.sequence_parallel && config_.tp > 1;
    return compute_stash_bytes(parts.first) + compute_stash_bytes(parts.second) +
           tokens_ *
               static_cast<double>(
                   mtp_projection_input_bytes_per_token(model_.hidden, model_.dtype)) /
               (sp ? config_.tp : 1.0);
  }
  const LayerWork& work = model_.layers[layer];
  const LayerKernels& k = kernels_[layer];
  const double tp = config_.tp;
  const bool sp = config_.sequence_parallel && config_.tp > 1;
  const Recompute rc = config_.recompute;
  if (!k.has_kernels) {
    // Korthikanti et al. 2022's tp rule on the layer's own stash.
    double factor = 1.0 / tp;
    if (!sp)
      factor = rc == Recompute::kFull || rc == Recompute::kOp ? 1.0 : (10.0 + 24.0 / tp) / 34.0;
    return static_cast<double>(work.stash_bytes[static_cast<int>(rc)]) *
           static_cast<double>(config_.microbatch_size) * factor;
  }
  const double seq_div = sp ? tp : 1.0;
  const double m = tokens_;
  if (rc == Recompute::kFull && k.stash_full_recompute_bytes_per_token > 0)
    return m * k.stash_full_recompute_bytes_per_token / seq_div;
  if (rc == Recompute::kOp && k.stash_op_sequence_bytes_per_token > 0) {
    // With sequence parallelism the two reduce-scatter outputs are kept too.
    const double scattered = sp ? 2 * k.hidden_bytes_per_token : 0;
    return m * ((k.stash_op_sequence_bytes_per_token + scattered) / seq_div +
                k.stash_op_split_bytes_per_token / tp + k.stash_op_unsplit_bytes_per_token);
  }
  double bytes =
      m * (k.stash_sequence_bytes_per_token / seq_div + k.stash_split_bytes_per_token / tp);
  // Selective: what each recompute module discards (graph/kernels.h); without core_attn the
  // unfused attention keeps its scores as under none.
  const uint32_t modules = effective_recompute_modules(config_);
  const auto has = [&](RecomputeModule mod) { return (modules & recompute_module_bit(mod)) != 0; };
  if (has(RecomputeModule::kLayernorm))
    bytes -= m * k.layernorm_recompute_bytes_per_token / seq_div;
  if (has(RecomputeModule::kMlaUpProj)) bytes -= m * k.mla_up_proj_recompute_bytes_per_token / tp;
  if (has(RecomputeModule::kMoeAct)) bytes -= m * k.moe_act_recompute_bytes_per_token / tp;
  const bool scores_kept =
      rc == Recompute::kNone || (rc == Recompute::kSelective && !has(RecomputeModule::kCoreAttn));
  if (config_.attention == AttentionKernel::kUnfused && scores_kept && k.has_attention)
    bytes += m * (k.attention.heads / tp) * model_.tokens_per_sequence() *
             k.stash_scores_bytes_per_head_key;
  return bytes;
}

}  // namespace jaxpp
