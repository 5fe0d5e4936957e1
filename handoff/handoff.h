// Hand-off of a plan (graph/plan.h) to the trainer that will run it, as text:
//
//   megatron_arguments   Megatron-LM command-line arguments (megatron/training/arguments.py of
//                        NVIDIA/Megatron-LM at commit 000c4ac2, 2025):
//                        --tensor-model-parallel-size,
//                        --pipeline-model-parallel-size, --context-parallel-size (cp > 1),
//                        --num-virtual-stages-per-pipeline-rank (v > 1, even partition) or
//                        --pipeline-model-parallel-layout (any other partition: "Et*3|t*4|...L"),
//                        --micro-batch-size, --global-batch-size, --recompute-granularity
//                        (+ --recompute-method uniform --recompute-num-layers 1 for full;
//                        --recompute-method block --recompute-num-layers N with
//                        recompute_layers N: the first N layers of each stage chunk;
//                        --recompute-modules m1 m2 ... with selective recompute_modules),
//                        --sequence-parallel, --use-distributed-optimizer, --overlap-grad-reduce
//                        (+ --overlap-param-gather with the distributed optimizer), for
//                        gradient sharding Megatron-FSDP: --use-megatron-fsdp
//                        --data-parallel-sharding-strategy optim_grads (optim_grads_params with
//                        parameter sharding) --ckpt-format fsdp_dtensor
//                        --no-gradient-accumulation-fusion,
//                        --tp-comm-overlap, for an FP8 model --fp8-format (hybrid; e4m3 for
//                        MXFP8) and --fp8-recipe (tensorwise = current scaling, delayed, mxfp8)
//                        (+ --fp8-param-gather with fp8_params), --attention-backend, and the
//                        model's architecture (add_megatron_model_flags in handoff.cc; the
//                        table in docs/export.md): --bf16/--fp16, --num-layers, --hidden-size,
//                        --ffn-hidden-size, --num-attention-heads, GQA, --kv-channels, SwiGLU,
//                        norm, biases, positions, --seq-length, --max-position-embeddings,
//                        dropout, untied embeddings, --vocab-size, the MoE and MLA arguments.
//                        A model field with no Megatron-LM argument (eager kernels, an FP8
//                        all-to-all payload, ...) is refused.
//                        One flag per line, shell continuations, comments first.
//   torchtitan_toml      a torchtitan job config (pytorch/torchtitan
//   torchtitan/config/job_config.py
//                        at commit 6404b932): [parallelism] (degrees: replicated data
//                        parallelism as data_parallel_replicate_degree = dp, parameter sharding
//                        as FSDP2, data_parallel_shard_degree = dp with
//                        fsdp_reshard_after_forward = "always"; ZeRO-1 or ZeRO-2 alone refused;
//                        pipeline_parallel_schedule
//                        naming the stage placement, pipeline_parallel_schedule_csv = the CSV the
//                        caller writes, pipeline_parallel_microbatch_size,
//                        module_fqns_per_model_part with torchtitan's Llama module names),
//                        [training] (local/global batch, seq_len), [activation_checkpoint] mode
//                        (recompute_layers N on one stage of L blocks: mode selective,
//                        selective_ac_option k with floor(L/k) = N, else refused; Megatron's
//                        recompute_modules refused).
//   jaxpp_snippet        a Python snippet for JaxPP (NVIDIA/jaxpp src/jaxpp/api.py at commit
//                        01dfbd9c): the MpmdMesh of shape (pp, dp, tp), the schedule class and its
//                        arguments, where to call pipeline_enter_stage, treduce.
//   An MXFP8 model cannot be expressed by the torchtitan and JaxPP hand-offs (InputError).
//   Every writer escapes user text: names in comment lines (control characters as \n, \xNN),
//   TOML strings as TOML requires (\n, \t, \uXXXX, ...).
//
// `schedule` is the canonical registry name of the plan's schedule (schedules/registry.h; the
// caller resolves aliases), or the plan's own name for a custom or synthesized program.
// An option the target cannot express throws InputError naming the target and the option, e.g.
//   --format megatron: schedule ZeroBubble cannot be expressed (Megatron-LM runs 1F1B, or
//   interleaved 1F1B with virtual stages)
//
// parse_megatron_arguments reads the text of megatron_arguments back (the round trip of the
// tests: arguments -> configuration and partition -> the same plan).
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "graph/plan.h"

namespace jaxpp {

enum class HandoffTarget { kMegatron, kTorchtitan, kJaxpp };
inline constexpr std::array kAllHandoffTargets = {
    HandoffTarget::kMegatron, HandoffTarget::kTorchtitan, HandoffTarget::kJaxpp};
std::string_view to_string(HandoffTarget t);  // "megatron", "torchtitan", "jaxpp"
// nullopt-like: false when `text` names no target.
bool parse_handoff_target(std::string_view text, HandoffTarget& out);

std::string megatron_arguments(const Plan& plan, const std::string& schedule);
std::string torchtitan_toml(const Plan& plan, const std::string& schedule,
                            const std::string& csv_path);
std::string jaxpp_snippet(const Plan& plan, const std::string& schedule);

// What Megatron-LM's model arguments say about the model (MegatronSettings::model); each field
// is the argument's value, or Megatron-LM's default when the argument is absent.
struct MegatronModel {
  Dtype dtype = Dtype::kFp32;                 // --bf16, --fp16 (FP8 is MegatronSettings::fp8)
  int hidden = 0, ffn_hidden = 0, heads = 0;  // --hidden-size, --ffn-hidden-size, ...
  int query_groups = 0;  // --num-query-groups with --group-query-attention; 0 = MHA
  int kv_channels = 0;   // --kv-channels; 0 = hidden / heads
  bool swiglu = false;
  bool rmsnorm = false;     // --normalization RMSNorm (default LayerNorm)
  bool bias_linear = true;  // false: --disable-bias-linear
  bool qkv_bias = false;    // --add-qkv-bias
  bool qk_layernorm = false;
  bool rope = false;  // --position-embedding-type rope (default learned_absolute)
  int seq_len = 0, max_position_embeddings = 0;
  bool dropout = true;            // false: --attention-dropout 0 and --hidden-dropout 0
  bool untied = false;            // --untie-embeddings-and-output-weights
  int vocab = 0;                  // --vocab-size
  bool te_cross_entropy = false;  // --cross-entropy-loss-fusion --cross-entropy-fusion-impl te
  int mtp_layers = 0;             // --mtp-num-layers
  // MoE: --num-experts (0 = dense), --moe-router-topk (default 2), --moe-ffn-hidden-size,
  // --moe-shared-expert-intermediate-size (all shared experts), --moe-layer-freq of the form
  // "([0]*K+[1]*M)" (K dense layers first), --moe-router-score-function sigmoid,
  // --moe-grouped-gemm, --moe-use-legacy-grouped-gemm.
  int experts = 0, top_k = 2, moe_ffn_hidden = 0, shared_expert_size = 0, first_dense_layers = 0;
  bool sigmoid_router = false, grouped_gemm = false, legacy_grouped_gemm = false;
  // MLA: --multi-latent-attention, --q-lora-rank (0 = none), --kv-lora-rank, --qk-head-dim (the
  // part without RoPE), --qk-pos-emb-head-dim, --v-head-dim.
  bool mla = false;
  int q_lora_rank = 0, kv_lora_rank = 0, qk_head_dim = 0, qk_pos_emb_head_dim = 0, v_head_dim = 0;
};

// What Megatron-LM arguments say about a plan.
struct MegatronSettings {
  ParallelConfig config;          // pp, tp, cp, v, microbatch_size, global_batch, recompute,
                                  // sequence_parallel, zero1, overlap_grad_reduce,
                                  // tp_comm_overlap, attention, schedule (Std1F1B or
                                  // MegatronInterleaved); gpus and dp are not in the arguments
  int num_layers = 0;             // transformer layers
  std::vector<int> stage_layers;  // from the layout: model layers (E, t, L) per stage; empty
                                  // when there is no layout (Megatron's even split)
  bool fp8 = false;               // --fp8-format given (e4m3 or hybrid)
  // --fp8-recipe: tensorwise (current scaling), delayed (Megatron-LM's default) or mxfp8.
  Fp8Scaling fp8_scaling = Fp8Scaling::kDelayed;
  bool fp8_param_gather = false;  // --fp8-param-gather
  MegatronModel model;            // the architecture (num_layers above)
  // config.zero1, shard_gradients and shard_parameters also come from Megatron-FSDP's
  // --data-parallel-sharding-strategy (optim, optim_grads, optim_grads_params; it needs
  // --use-megatron-fsdp, which needs --ckpt-format fsdp_dtensor).
};
// InputError naming `where` and the flag for an unknown flag or a bad value.
MegatronSettings parse_megatron_arguments(const std::string& text, const std::string& where);

}  // namespace jaxpp
