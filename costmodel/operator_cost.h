// OperatorCost: the time of each layer pass as the sum of its kernels (graph/kernels.h) on one
// device of a ClusterSpec, with the tensor- and context-parallel communication each pass exposes.
// AnalyticCost builds the simulator's task durations from it; `simulate --breakdown` reports it.
//
// Per layer pass (m = microbatch_size · seq_len / cp tokens on a device, tp-split shapes):
//   GEMM         t = max(2mnk / (peak · e), bytes / (hbm · hbm_efficiency)) + kernel_overhead,
//                routed experts (graph/kernels.h: E = count GEMMs of m' = m·top_k/E tokens each,
//                a balanced router, no expert parallelism) as the model's MoeSpec::expert_gemm
//                runs them: grouped = one grouped GEMM, 2·E·m'·n·k FLOPs at the efficiency of the
//                stacked (E·m') × n problem, every expert's weights read; per_expert =
//                Transformer Engine's GroupedLinear, one cuBLAS GEMM per expert over S =
//                expert_gemm_streams streams: E · (max(t_1 / c, bytes_1 / hbm) + overhead / c),
//                t_1 the single-GEMM compute at (m', n, k), c = min(S, E, SMs / the SMs one
//                GEMM's chosen tiles occupy; stream-K: all) GEMMs at once, 1 without an SM count
//                (expert_gemms_s); FP8: each expert's input, output gradient and weight cast by
//                its own kernels (expert_casts_s; delayed scaling's inputs and output gradients
//                in one multi-cast kernel),
//                e = eff(2mnk) (cluster.h's curve or measured table) · q(m, n) · k / (k + 32),
//                q = tile quantization · wave quantization of ⌈m/Tm⌉·⌈n/Tn⌉ output tiles over
//                the GPU's SMs, for the best of the tiles Tm×Tn, Tn×Tm, Tm×Tn/2, Tn/2×Tm (at
//                0.95 of the rate) and Tm/2×Tn/2 (0.85), as GEMM libraries choose the tile per
//                shape; 1 when the cluster has no SM count
//                forward (m, n, k); input gradient (m, k, n); weight gradient (k, n, m)
//   attention    FlashAttention: forward 4·m·keys·(a/tp)·d FLOPs, halved when causal (keys = s),
//                at attention_efficiency_forward · peak · wave quantization of the query tiles
//                (128 rows per block) · k/(k + 128) for the k = keys (causal: s/2) each query
//                sees; backward 2.5× the forward's FLOPs (dS, dP, dQ, dK, dV and the recomputed
//                scores) at attention_efficiency_backward. Unfused (Megatron before
//                FlashAttention): QK^T and attention·V as batched GEMMs over all s keys and the
//                scale-mask-softmax(+dropout) kernels on the s×s scores, from their bytes.
//   element-wise bytes per token (graph/kernels.h) · m / (hbm · hbm_efficiency) + overhead;
//                the backward runs in the input-gradient pass.
//   TP comm      per transformer layer 2 all-reduces of the m×h hidden state in the forward and 2
//                in the backward (ring: 2(t−1)/t · bytes / (link · allreduce_bus_efficiency) +
//                2(t−1) step latencies); with sequence parallelism all-gather + reduce-scatter of
//                the same volume, plus the backward's re-gather of the sharded GEMM inputs (hidden
//                under the input-gradient GEMMs where they are longer). With tp_comm_overlap each
//                collective is pipelined in t chunks with its GEMM: exposed = c/t + (t−1)/t ·
//                max(0, c − g). NVLink when tp <= devices_per_node, the network otherwise.
//                A fused backward (B = I then W) hides the input-gradient collectives of the
//                column-parallel GEMMs under their weight-gradient GEMMs (Megatron's asynchronous
//                all-reduce): fused_backward_hidden_s, subtracted from B.
//   CP comm      ring attention: cp − 1 steps, each sending the local K and V (and in the backward
//                their gradients too) to the next rank while one block of attention computes:
//                exposed = (cp − 1) · max(0, step transfer − attention / cp).
//   recompute    none: nothing; selective: the attention core's forward again; full: the whole
//                forward again, its TP communication included. Selective with recompute_modules
//                (Megatron-Core's --recompute-modules, graph/plan.h RecomputeModule): the forward
//                kernels of each module: core_attn the attention core; layernorm the separate
//                norms (element-wise, on the sequence-parallel hidden state) and, FP8, a cast of
//                their output per FP8 GEMM reading it; mla_up_proj the q_up (or q) and kv_up
//                GEMMs (FP8: their input casts) and the rope and latent_norm kernels; moe_act the
//                routed share of the SwiGLU kernel (FP8: a cast of its output). No TP or EP
//                communication. Stash: each module's freed bytes (graph/kernels.h) subtracted;
//                without core_attn, unfused attention keeps its scores. Full with recompute_layers = N
//                (ParallelConfig): the first N transformer layers of each stage chunk as full,
//                every later one as none (its forward's activations kept, nothing recomputed).
//   custom       layers without kernels: FLOPs / (peak · eff(FLOPs)), as a whole (other_s).
//   offload      activation offloading (ParallelConfig::offload_layers = N, Megatron Core's CPU
//                offloading through Transformer Engine): the first N transformer layers' stash
//                (their stash_bytes, X in all) is copied to the host during the forward and back
//                during the backward, over ClusterSpec::host_link_bandwidth_bytes_per_s (h),
//                beside the compute (Transformer Engine's double-buffered offload handler):
//                exposed = max(0, X/h − forward) in the forward and max(0, X/h − backward) in the
//                input-gradient pass (other_s). On the device the stage keeps the stash of its
//                other layers and of the two largest offloaded ones (the one copied out while
//                the next computes, and in the backward the one copied back while the next
//                computes).
// Expert parallelism (ParallelConfig::ep, etp, moe_imbalance; docs/simulate.md): a device holds
//                E/ep routed experts, each split over etp devices (column/row as a dense MLP),
//                and receives the tokens of its ep group routed to them: the routed GEMMs run as
//                E/ep groups of m·(etp/tp)·top_k·ep/E tokens each (× the imbalance f on the
//                busiest rank, which the pipeline waits for). Per MoE layer and pass (forward;
//                input gradient; full recompute) a dispatch and a combine all-to-all, each of
//                V = m·(etp/tp)·top_k·h·bytes·f bytes per device, (ep−1)/ep of it leaving the
//                device; bytes = alltoall_bytes_per_element of MoeSpec::dispatch_dtype for the
//                dispatch (and the backward's output gradients, token → expert), of
//                combine_dtype for the combine (and the backward's input gradients, expert →
//                token), the activations' type when unset. The ep group spans g = clamp(devices_per_node/etp, 1, ep) devices per
//                node on k = ⌈ep/g⌉ nodes:
//                  flat          max(V(g−1)/ep / bw_nvlink, V(ep−g)/ep / bw_net) + latencies
//                  hierarchical  V·d/top_k / bw_net + V(g−1)/g / bw_nvlink + latencies, d =
//                                (k−1)(1 − (1 − 1/k)^top_k) distinct remote nodes per token
//                                (a token crosses the network once per destination node)
//                the cheaper of the two (bw = LinkSpec::effective_bandwidth_bytes_per_s);
//                moe_routing contiguous takes d = N·(k−1)/k from moe_destinations().
//                moe_dispatcher deepep sends a token once per destination rank and once per
//                destination node over the network (R, N = moe_destinations(), U = V/top_k):
//                  max(U·(R(g−1)/ep + R(ep−g)/ep·(g−1)/g) / bw_nvlink,
//                      U·N(k−1)/k / bw_net) + latencies
// Optimizer step: per-device parameters (÷ dp·cp with the distributed optimizer) ·
//   optimizer_traffic_bytes_per_param / (hbm · hbm_efficiency).
// FP8 models (dtype fp8), as Transformer Engine trains them with per-tensor scaling:
//   GEMMs        every GEMM of a transformer layer (graph/kernels.h GemmKernel::fp8: not the LM
//                head, not the MoE router) in FP8, forward, input gradient and weight gradient
//                alike (TE's HYBRID format: E4M3 forward, E5M2 gradients), at the fp8 peak with
//                ClusterSpec::fp8_gemm_efficiency · the BF16 efficiency (cluster.h); operands
//                read as 1 byte, the output written in 16 bits. The LM head, the router and the
//                attention core (flash or unfused) stay at the BF16 peak.
//   casts        memory-bound element-wise kernels (breakdown: element-wise) quantizing each FP8
//                GEMM's 16-bit operands, each into an FP8 copy and its transpose (the
//                input-gradient and weight-gradient GEMMs reuse them, the weight-gradient pass
//                casts nothing): per element read 2 bytes, write 1 + 1 (1 without the transpose
//                on a GPU whose FP8 GEMMs take every layout: ClusterSpec::fp8_transpose_copy
//                false, Blackwell); current scaling first reads the tensor once more for its
//                amax (a second kernel): 6 (5) bytes and 2 kernels, delayed scaling 4 (3) bytes
//                and 1 kernel (ModelSpec::fp8_scaling "current" / "delayed").
//                MXFP8 ("mxfp8": one E8M0 scale per 32 consecutive elements; Transformer
//                Engine's MXFP8BlockScaling, E4M3 in both passes): one kernel computes each
//                block's scale from its own 32 elements (no amax pass) and writes a row-wise and
//                a column-wise FP8 copy, each with its scales (1 byte per 32 elements): the
//                column-wise copy's blocks run down the columns, so it is quantized from the
//                16-bit tensor, not transposed, on every GPU: read 2, write 2 · (1 + 1/32) =
//                4.0625 bytes per element, 1 kernel. Its GEMMs read the scales with their
//                operands (1 + 1/32 bytes per element) and run at the same fp8 peak and
//                fp8_gemm_efficiency as per-tensor FP8 (the scales are applied inside the
//                tensor-core MMA). Needs ClusterSpec::fp8_block_scaling (Blackwell): on other
//                GPUs the constructor throws an InputError naming the model's fp8_scaling and
//                the cluster.
//                Forward: the GEMM's input (tokens × k), and its weight (k × n) once per step
//                (TE caches the FP8 weight across the microbatches of a step: Megatron-Core
//                passes is_first_microbatch), priced as 1/num_microbatches of it per
//                microbatch. Input gradient: the output gradient (tokens × n).
//   norm fusion  (ModelSpec::fp8_norm_fusion, default true: Transformer Engine.) The input of a
//                GEMM whose TE module runs its own norm first (graph/kernels.h
//                GemmKernel::norm_input: QKV, a dense MLP's first GEMM; Megatron-Core's
//                TELayerNormColumnParallelLinear) is quantized by that norm (TE's
//                LayerNormLinear passes it the input quantizer; pytorch/csrc/extensions/
//                normalization.cpp): delayed scaling: the norm writes the FP8 copy (1 byte,
//                graph/kernels.cc) and only the transpose is left, read 1 + write 1 and 1 kernel
//                (nothing without fp8_transpose_copy); current scaling: the norm computes the
//                amax (TE PR #2013, 2025), one cast kernel without the amax pass (read 2, write 1 + 1 or
//                1); MXFP8: the separate cast (TE's default norm writes 16 bits). Every other
//                input and every output gradient keeps its separate cast. false: all separate
//                (torchao, DeepSeek's framework, current scaling with TE before that PR).
//   unchanged    activations, the stash, the TP/CP/EP communication and the optimizer stay in
//                their 16-bit (or fp32) sizes.
//   BF16 (and fp16, fp32) models price exactly as before: no cast, no fp8 term.
// Units: seconds, bytes, FLOPs.
//
// Lifetime: an OperatorCost keeps its own copies of the model, configuration and cluster it is
// built from, so it may outlive them (a temporary, or a fixture's members). A copy costs far
// less than the construction's own work (listing and pricing each layer kind's kernels).
//
// Usage:
//   OperatorCost op(model, config, cluster);
//   StageBreakdown b = op.stage(first_layer, num_layers);
//   double f = b.pass[static_cast<int>(Pass::kForward)].total_s();
#pragma once

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "costmodel/cluster.h"
#include "graph/kernels.h"
#include "graph/model.h"
#include "graph/plan.h"

namespace jaxpp {

enum class Pass { kForward = 0, kBackwardInput = 1, kBackwardWeight = 2, kRecompute = 3 };

// Time of a pass on one device by what runs, in seconds.
struct PassBreakdown {
  double gemm_s = 0;
  double attention_s = 0;
  double elementwise_s = 0;
  double tp_comm_s = 0;  // exposed
  double cp_comm_s = 0;  // exposed
  double other_s = 0;    // custom layers priced by the efficiency curve
  // Expert-parallel all-to-all (dispatch + combine of every MoE layer), serialised; how much of
  // it a schedule hides is the cost provider's business (AnalyticCost, MoeOverlap).
  double ep_comm_s = 0;
  double total_s() const {
    return gemm_s + attention_s + elementwise_s + tp_comm_s + cp_comm_s + other_s + ep_comm_s;
  }
  PassBreakdown& operator+=(const PassBreakdown& o);
};

struct StageBreakdown {
  std::array<PassBreakdown, 4> pass;  // indexed by Pass
  double fused_backward_hidden_s = 0;
  double optimizer_s = 0;
  const PassBreakdown& at(Pass p) const { return pass[static_cast<int>(p)]; }
};

// Devices the optimizer state is sharded over: dp · cp with the distributed optimizer, else 1.
inline int optimizer_shards(const ParallelConfig& c) {
  return c.zero1 ? c.dp * std::max(1, c.cp) : 1;
}

class OperatorCost {
 public:
  // InputError when the configuration cannot run the model (cp > 1 with unfused attention, cp
  // not dividing the sequence, the cluster lacking the model's dtype).
  OperatorCost(const ModelSpec& model, const ParallelConfig& config, const ClusterSpec& cluster);

  // The copies this OperatorCost prices with (Lifetime above): valid as long as it is.
  const ModelSpec& model() const { return model_; }
  const ParallelConfig& config() const { return config_; }
  const ClusterSpec& cluster() const { return cluster_; }

  // Layers [first_layer, first_layer + num_layers) with `params` parameters (whole stage,
  // before tp) for the optimizer step. With recompute_layers >= 0 the range is one stage chunk:
  // its first recompute_layers transformer layers priced as full, the others as none.
  StageBreakdown stage(int first_layer, int num_layers, double params) const;
  // Bytes one device stashes for one microbatch of `layer` under the configuration's recompute
  // policy and parallelism; the layer's own stash_bytes (scaled by the legacy tp rule) for
  // layers without kernels. With recompute_layers >= 0: as a recomputed (full) layer.
  double stash_bytes(int layer) const;
  // The stash of one microbatch of the stage chunk [first_layer, first_layer + num_layers) on the
  // device: the sum of its layers' stash_bytes, each under layer_recompute (graph/plan.h); with
  // activation offloading, of the layers kept plus the two largest offloaded ones (in flight).
  double stage_stash_bytes(int first_layer, int num_layers) const;
  // Activation offloading: the stash_bytes of the range's offloaded layers (0 without it).
  double offloaded_stash_bytes(int first_layer, int num_layers) const;
  // Bytes one device holds beside the stash while one microbatch's loss of `layer` runs (the
  // logits layer, or an MTP module's own loss on the shared head): tokens · vocab / tp ·
  // cross_entropy_transient_bytes_per_logit (graph/model.h), freed when the loss ends; 0 for
  // every other layer and for layers without kernels.
  double loss_transient_bytes(int layer) const;

  // One GEMM out[m×n] = in[m×k]·W[k×n] on one device. `fp8_capable` false: a GEMM FP8 training
  // keeps in 16 bits (the LM head, the router, the attention core); it matters for FP8 models only.
  double gemm_s(double m, double n, double k, bool fp8_capable = true) const;
  // Its fraction of peak: shape · eff(2mnk / shape), the cluster's curve at the work the GEMM
  // issues (ClusterSpec, cluster.h "Kernel model"), so no dimension shrinking makes it slower.
  double gemm_efficiency(double m, double n, double k, bool fp8_capable = true) const;
  // `count` GEMMs of one shape in one launch (grouped GEMM, as MoE expert kernels run); gemm_s
  // for count 1.
  double grouped_gemm_s(double count, double m, double n, double k,
                        bool fp8_capable = true) const;
  // The `count` local routed experts' GEMMs of one shape as the model's MoeSpec::expert_gemm runs
  // them: grouped_gemm_s for kGrouped (or count <= 1); for kPerExpert one GEMM per expert on
  // S = expert_gemm_streams streams (the header: routed experts).
  double expert_gemms_s(double count, double m, double n, double k, bool fp8_capable = true) const;
  // How many of those per-expert GEMMs run at once: min(S, count, SMs / the SMs one GEMM's
  // output tiles occupy), at least 1; 1 for kGrouped and on a cluster without an SM count.
  double expert_gemm_concurrency(double count, double m, double n, double k,
                                 bool fp8_capable = true) const;
  // FP8 models: quantizing the `count` local experts' tensors of `elements_each` values each
  // (their inputs, output gradients, or with `weights` their weights): one fp8_cast_s over all of
  // them for kGrouped; for kPerExpert one per expert (tex.split_quantize quantizes each split on
  // its own), except the inputs and output gradients under delayed scaling, which Transformer
  // Engine casts in one nvte_multi_cast_transpose.
  double expert_casts_s(double count, double elements_each, bool weights) const;
  // FP8 models: quantizing `elements` 16-bit values into an FP8 copy (and its transpose where the
  // cluster needs it), the amax pass included under current scaling; 0 for other models.
  double fp8_cast_s(double elements) const;
  // FP8 models: what quantizing `elements` of a GEMM input its module's own norm wrote
  // (GemmKernel::norm_input) costs beside the norm, per ModelSpec::fp8_scaling when
  // ModelSpec::fp8_norm_fusion (the header: casts); fp8_cast_s without the fusion.
  double fp8_norm_cast_s(double elements) const;
  // A ring collective moving `bytes` per device over a group of `n` devices within the
  // tensor-parallel link: all-reduce (2(n−1)/n of the bytes) or all-gather / reduce-scatter.
  double tp_allreduce_s(double bytes) const;
  double tp_gather_s(double bytes) const;  // all-gather or reduce-scatter
  // One expert-parallel all-to-all (dispatch or combine) of `bytes` per device (V above).
  double moe_alltoall_s(double bytes) const;
  // Expected distinct destination ranks and nodes of one token's top_k experts over the ep group
  // (g ranks per node, ⌈ep/g⌉ nodes), for ParallelConfig::moe_routing: random = ep·(1 −
  // C(E − E/ep, top_k)/C(E, top_k)) ranks and nodes·(1 − C(E − g·E/ep, top_k)/C(E, top_k)) nodes;
  // contiguous = the ranks and nodes a window of top_k consecutive experts starting at t·top_k
  // mod E covers, averaged over t. Random routing limited to M nodes (moe_node_limit): M uniform
  // nodes, top_k experts from their P = M·g·E/ep: ranks M·g·(1 − C(P − E/ep, top_k)/C(P, top_k)),
  // nodes M·(1 − C(P − g·E/ep, top_k)/C(P, top_k)); to M ranks (moe_device_limit): P = M·E/ep,
  // ranks M·(1 − C(P − E/ep, top_k)/C(P, top_k)), nodes those of M uniform ranks,
  // nodes·(1 − C(ep − g, M)/C(ep, M)), at most the unlimited count.
  struct MoeDestinations {
    double ranks = 0;
    double nodes = 0;
  };
  MoeDestinations moe_destinations() const;
  // V above of one MoE layer and microbatch: the dispatch (token → expert) or the combine
  // (expert → token) all-to-all, in bytes per device.
  double moe_alltoall_bytes(bool dispatch) const;
  // Parameters one device holds of layers [first_layer, first_layer + num_layers) whose whole
  // count is `params`: the routed experts ÷ (ep·etp), the rest ÷ tp; with `optimizer_sharded`
  // also ÷ the distributed optimizer's shards (experts over their edp replicas).
  double device_params(int first_layer, int num_layers, double params,
                       bool optimizer_sharded) const;

 private:
  struct LayerCache {
    std::array<PassBreakdown, 4> pass;
    double fused_hidden_s = 0;
    double stash_bytes = 0;
  };
  PassBreakdown layer_pass(int layer, Pass pass, double* fused_hidden_s) const;
  // The recompute pass of a transformer layer under recompute selective: the forward kernels of
  // the configuration's recompute modules (the header).
  PassBreakdown selective_recompute(int layer) const;
  // The model that prices `layer` of the chunk starting at first_layer: this one, or kept_ for a
  // transformer layer past the chunk's first recompute_layers.
  const OperatorCost& pricing(int first_layer, int layer) const;
  double compute_stash_bytes(int layer) const;
  // gemm_efficiency and the streaming multiprocessors the output tiles of the shape it chose
  // occupy (min(SMs, tiles); every SM for stream-K; 0 without an SM count).
  struct GemmFit {
    double efficiency = 0;
    double occupied_sms = 0;
  };
  GemmFit gemm_fit(double m, double n, double k, bool fp8_capable) const;
  double elementwise_s(double bytes) const;
  // The FP8 input cast of GEMM g: fp8_norm_cast_s for a norm-fed input, fp8_cast_s otherwise.
  double input_cast_s(const GemmKernel& g, double elements) const;
  // The attention core of one pass (forward or backward), flash or unfused per the config.
  double attention_s(const LayerKernels& k, bool forward) const;
  double curve_s(double flops) const;  // custom work: flops / (peak · eff(flops))

  ModelSpec model_;  // copies: see Lifetime above
  ParallelConfig config_;
  ClusterSpec cluster_;
  double peak_ = 0;                    // GEMMs, FLOP/s in the model's dtype
  double attention_peak_ = 0;          // attention: 16-bit even for FP8 models
  bool fp8_ = false;                   // the model trains in FP8
  double gemm16_peak_ = 0;             // GEMMs kept in 16 bits: the BF16 peak for FP8 models
  double tokens_ = 0;                  // m: tokens of one microbatch on one device
  double db_ = 2;                      // bytes per activation element
  std::vector<LayerKernels> kernels_;  // per layer
  std::vector<int> cached_;            // per layer: index into cache_, -1 = priced on demand
  std::vector<LayerCache> cache_;      // one per layer kind (dense or MoE) with kernels
  // recompute full with recompute_layers >= 0: the same configuration with recompute none, for
  // the layers that keep their activations; null otherwise.
  std::shared_ptr<const OperatorCost> kept_;
  std::vector<char> offloaded_;  // per layer: its activations are offloaded (offload_layers)
  // Per layer: for an MTP module of a model with kernels, the transformer layer its block copies
  // and the logits layer whose head it shares ({-1, -1} otherwise); see mtp_pass.
  std::vector<std::pair<int, int>> mtp_parts_;
  // An MTP module (DeepSeek-V3 report, Sec. 2.2) kernel by kernel: its block priced as the
  // layer it copies, the 2h -> h projection and its two RMSNorms and concatenation, and the
  // shared output head and loss priced as the logits layer (not in the recompute pass); with
  // tp > 1 the projection's collectives (Megatron-Core's eh_proj: output gathered along the
  // hidden dimension, with sp the input gathered along the sequence; mirrored in the backward).
  PassBreakdown mtp_pass(int layer, Pass pass, double* fused_hidden_s) const;
};

}  // namespace jaxpp
