// Kernels of a layer: the work of one layer pass listed kernel by kernel (GEMM shapes, the
// attention core, element-wise kernels by the bytes they move, what the backward stashes), so
// costmodel/ can price each kernel for a GPU (costmodel/operator_cost.h). Hardware independent.
//
// Everything is per TOKEN of one sequence (a microbatch of b sequences of s tokens, split over cp
// devices, runs m = b·s/cp tokens per device), before tensor parallelism; `split` says what tensor
// parallelism (tp devices) does to it:
//   kColumn    the GEMM's output columns (n) are split (QKV, MLP up/gate, the LM head over the
//              vocabulary); for element-wise work and stashed bytes: divided by tp
//   kRow       the GEMM's inner dimension (k) is split (attention output projection, MLP down)
//   kSequence  element-wise work and stashed bytes on the full hidden state (norms, residual,
//              dropout, the inputs of column-parallel GEMMs): replicated on every tp device, or
//              divided by tp with sequence parallelism (Korthikanti et al. 2022)
// A forward GEMM computes out[m × n] = in[m × k] · W[k × n]; its input-gradient GEMM is
// (m, k, n) and its weight-gradient GEMM (k, n, m), each 2·m·n·k FLOPs.
//
// Transformer layers (GPT: LayerNorm, biases, GeLU MLP of ffn_hidden, dropout unless the model
// says "dropout": false; Llama: RMSNorm, RoPE, SwiGLU MLP with fused gate/up, GQA, no dropout):
//   GEMMs       qkv (n = (a + 2·g)·d, k = h) column · proj (n = h, k = a·d) row ·
//               mlp_up (n = f or 2f, k = h) column · mlp_down (n = h, k = f) row
//   attention   heads a, kv heads g, head dim d, causal (FlashAttention or unfused: the pricing
//               and the stash depend on ParallelConfig::attention)
//   element-wise  bytes read + written per token (16-bit activations, 1-byte dropout masks);
//               backward ≈ twice the forward's bytes (saved inputs and gradients read, gradients
//               written)
//   stash       Korthikanti et al. 2022's activation inventory without the s×s terms
//               (= 34·h bytes per token for GPT with f = 4h), split as above; unfused attention
//               adds 5 bytes per (head, key) per token (2 without dropout) unless selective or
//               full recompute.
// Mixture-of-experts layers (a transformer layer with `moe`; no expert parallelism: every tp rank
// holds every expert, split like a dense MLP): router (n = E, k = h, replicated), shared experts
// as one MLP of S·f_s (column, row), the routed experts as E GEMMs each over the top_k/E share of
// the tokens a balanced router sends it (count E, token_fraction top_k/E; column, row); the
// dispatch/combine permutation and the router's softmax/top-k as element-wise kernels.
// MLA attention (model.h): q_down (replicated) + q_up (column) or q (column), kv_down
// (replicated), kv_up (column), proj (row); the attention core with q/k head size
// qk_nope + qk_rope and v head size v_head_dim.
// Logits: the LM-head GEMM (n = V, k = h, vocabulary-parallel) and a fused cross-entropy reading
// the logits in fp32; the stash is the head's input and what the loss keeps of the logits
// (ModelSpec::cross_entropy: an fp32 copy, 4 bytes per vocabulary entry, or the 16-bit logits).
// Embedding: a gather (and, for GPT, learned positions and dropout).
// Eager PyTorch (ModelSpec::kernel_fusion kEager or kEagerFp32Params; graph/model.h): the
// element-wise list is instead what eager PyTorch under torch.autocast(bfloat16) runs, one kernel
// per operator (graph/kernels.cc eager_transformer_elementwise names each with its source): the
// norms in fp32, the casts of every autocast op's fp32 inputs to bf16 and of their gradients back,
// separate GeLU (or SiLU and the product), residual adds and bias-gradient reductions (the biases
// themselves are added in the GEMM's epilogue), the concatenation of dq, dk and dv into a fused
// qkv projection's gradient, torchtitan's fp32 RoPE, and the loss as an fp32 copy of the logits,
// log_softmax and nll_loss; with fp32 parameters also the per-forward weight casts
// (LayerKernels::weight_fwd_bytes_per_param).
// Activations are 16-bit (also for FP8 models: FP8 training keeps activations in 16 bits; the
// FP8 copies of GEMM operands and their casts are priced by costmodel/operator_cost.h).
// Layers of kind custom have no kernels (has_kernels false): costmodel/ prices their FLOPs with
// the cluster's efficiency curve.
#pragma once

#include <string_view>
#include <vector>

#include "graph/model.h"

namespace jaxpp {

enum class TpSplit { kNone, kColumn, kRow, kSequence };

struct GemmKernel {
  std::string_view name;
  double n = 0;  // output columns
  double k = 0;  // inner dimension
  TpSplit split = TpSplit::kNone;
  // The GEMM runs `count` times (one per routed expert), each over token_fraction of the tokens.
  double count = 1;
  double token_fraction = 1;
  // Paired with one of the layer's tensor-parallel collectives: the all-gather (sequence
  // parallelism) before the first GEMM of the attention or the MLP block, the reduce-scatter (or
  // all-reduce) after its last GEMM (kRow).
  bool tp_collective = false;
  // Runs in FP8 when the model trains in FP8 (Transformer Engine's linear layers: every GEMM of a
  // transformer layer but the MoE router); false for the LM head, which Megatron-LM keeps in 16
  // bits (its output layer is not a Transformer Engine module), and for the router.
  bool fp8 = true;
  // Recompute::kOp (torchtitan's op-level selective checkpointing): the share of this GEMM's
  // forward re-run in the backward when it runs in 16 bits. torchtitan saves the output of every
  // odd-numbered aten.mm of a block (in forward order wq, wk, wv, wo, w1, w3, w2: it re-runs wk,
  // wo and w3); an FP8 GEMM (torch._scaled_mm, not in the save list) is always re-run (share 1).
  double op_recompute = 1;
  // The GEMM's input is the output of the norm its Transformer Engine module runs first
  // (Megatron-Core's TELayerNormColumnParallelLinear: QKV of standard attention, the first GEMM
  // of a dense MLP; not MLA's projections or an MoE layer's, which read a separate TENorm). An
  // FP8 model with ModelSpec::fp8_norm_fusion prices its input's quantization as the norm's
  // (costmodel/operator_cost.h).
  bool norm_input = false;
};

struct ElementwiseKernel {
  std::string_view name;
  double fwd_bytes_per_token = 0;
  double bwd_bytes_per_token = 0;
  TpSplit split = TpSplit::kSequence;
};

struct AttentionWork {
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  bool causal = true;
  int v_head_dim = 0;  // 0 = head_dim (MLA: v has its own size)
  // FLOPs of the forward core for one query token against `keys` keys, before tp and the causal
  // halving: 2·keys·heads·(head_dim + v_head_dim) (QK^T and attention·V).
  double fwd_flops_per_token(double keys) const {
    if (v_head_dim == 0 || v_head_dim == head_dim) return 4.0 * keys * heads * head_dim;
    return 2.0 * keys * heads * (static_cast<double>(head_dim) + v_head_dim);
  }
};

struct LayerKernels {
  bool has_kernels = false;
  std::vector<GemmKernel> gemms;
  bool has_attention = false;
  AttentionWork attention;
  std::vector<ElementwiseKernel> elementwise;
  // Stashed for the backward, bytes per token: on the full hidden state (kSequence) and split by
  // tp (kColumn); the layer input kept under full recompute (kSequence; 0 = the layer is not
  // recomputed and keeps its whole stash, as the embedding and the logits).
  double stash_sequence_bytes_per_token = 0;
  double stash_split_bytes_per_token = 0;
  double stash_full_recompute_bytes_per_token = 0;
  // Recompute::kOp: kept per token on the full hidden state (the layer input; with sequence
  // parallelism the two reduce-scatter outputs), split by tp (the attention output and its fp32
  // log-sum-exp; the saved 16-bit GEMM outputs q, v and w1), and not split at all (the saved
  // 16-bit w2 output, a partial sum before the tp reduction). Only transformer layers.
  double stash_op_sequence_bytes_per_token = 0;
  double stash_op_split_bytes_per_token = 0;
  double stash_op_unsplit_bytes_per_token = 0;
  // Megatron-Core's recompute modules (graph/plan.h RecomputeModule; ParallelConfig::
  // recompute_modules with recompute selective), per token; 0 where the layer lacks the module.
  //   layernorm    the outputs of the layer's separate norms (an MLA layer's input norm, an MoE
  //                layer's pre-MLP norm; Transformer Engine fuses a dense attention's or MLP's
  //                norm into its linear layer), on the full hidden state (kSequence): h per norm
  //                at the bytes the stash inventory counts for a GEMM input (16-bit, or the FP8
  //                copy of an FP8 model), freed; `layernorm_fwd_bytes` = those norms' forward
  //                kernel bytes, run again; `layernorm_recast_elements`: FP8 models re-quantize
  //                the recomputed output for each FP8 GEMM reading it (h per GEMM; Megatron sets
  //                save_original_input on them)
  //   mla_up_proj  q, k and v of an MLA layer (2·a·(qk_nope + qk_rope) + a·v_head_dim elements,
  //                16-bit), split by tp, freed; the q_up and kv_up GEMMs, the RoPE and the latent
  //                norms run again
  //   moe_act      the routed experts' activation output (top_k·expert_ffn_hidden elements,
  //                mlp_down's input: 16-bit, or its FP8 copy), split by tp, freed;
  //                `moe_act_fwd_bytes` = the routed share of the SwiGLU kernel's forward bytes,
  //                run again, and FP8 models re-quantize the output (save_original_input)
  //   core_attn    the attention core (today's selective): nothing freed but the unfused scores
  int separate_norms = 0;  // layernorm: the norms recomputed (one kernel each)
  double layernorm_recompute_bytes_per_token = 0;
  double layernorm_fwd_bytes_per_token = 0;
  double layernorm_recast_elements_per_token = 0;
  double mla_up_proj_recompute_bytes_per_token = 0;
  double moe_act_recompute_bytes_per_token = 0;
  double moe_act_fwd_bytes_per_token = 0;
  double moe_act_elements_per_token = 0;
  // Unfused attention only: bytes per token per (head, key) stashed (softmax output, dropout
  // mask and output: 5 in 16-bit) unless selective or full recompute.
  double stash_scores_bytes_per_head_key = 0;
  // Unfused attention only: bytes the scale-mask-softmax (and GPT's dropout) kernels move per
  // (head, key) per token in the forward (read and write 16-bit scores: 4; dropout: read, write
  // and a 1-byte mask: 5 more); the backward moves twice as much.
  double scores_traffic_bytes_per_head_key = 0;
  // Bytes sent forward per token (the hidden state: the pipeline P2P and the tp collectives).
  double hidden_bytes_per_token = 0;
  // Per parameter of each GEMM's weight (split as the GEMM: n·k·count): the bytes moved by
  // element-wise kernels in each forward (and each recompute) and in each backward, beside the
  // per-token kernels above. Eager PyTorch under autocast with fp32 parameters
  // (KernelFusion::kEagerFp32Params): every forward casts the fp32 weight to bf16 (read 4, write 2:
  // autocast caches a cast only within one autocast region, and a checkpointed layer's recompute
  // opens a new one) and every backward casts the bf16 weight gradient back to fp32 (read 2,
  // write 4). A tied LM head adds the accumulation of its weight gradient into the embedding's
  // (read both, write one). 0 for fused kernels.
  double weight_fwd_bytes_per_param = 0;
  double weight_bwd_bytes_per_param = 0;
  // The loss only (logits layer): bytes per token, split by tp (kColumn, the vocabulary), that
  // live beside the stash while one microbatch's loss runs and are freed when it ends
  // (cross_entropy_transient_bytes_per_logit, graph/model.h: the 16-bit logits beside their
  // fp32 copy). Not stashed: the memory model adds them once per actor (costmodel/memory.h).
  double loss_transient_split_bytes_per_token = 0;
};

// The kernels of layer `index` of a model with a transformer shape (hidden, heads, seq_len and
// vocab known); has_kernels is false for custom layers and for models given layer by layer
// without a shape.
LayerKernels layer_kernels(const ModelSpec& model, int index);

}  // namespace jaxpp
