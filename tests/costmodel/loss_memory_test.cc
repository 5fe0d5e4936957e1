// What the loss keeps of the logits (graph/model.h CrossEntropy, costmodel/memory.h): the fp32
// copy Megatron-Core's vocab-parallel cross-entropy saves for its backward (4 bytes per token and
// vocabulary entry ÷ tp), or the 16-bit logits flash-attn's and Transformer Engine's fused
// kernels save; the 16-bit logits beside the fp32 copy while one loss runs, once per actor; and
// an MTP module's stash (its block, its 2h projection input, the shared head's), the same in
// graph's layer list and in the memory model. Bytes computed by hand on llama3-8b (h 4096,
// V 128256, s 8192, BF16) and deepseek-v3 (h 7168, V 129280, s 4096).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/memory.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"

namespace jaxpp {
namespace {

// llama3-8b: layer 0 the embedding, 1..32 transformer, 33 the logits.
constexpr int kLossLogits = 33;
constexpr int64_t kLossTokens = 8192, kLossHidden = 4096, kLossVocab = 128256;

struct LossFixture {
  ModelSpec model = load_model("llama3-8b");
  ClusterSpec cluster = cluster_preset("h100-sxm");
  ParallelConfig config;
  LossFixture() { config.tp = 2; }
};

TEST(LossMemory, TheLossKeepsAnFp32CopyOfItsVocabularySliceForTheBackward) {
  LossFixture f;
  ASSERT_EQ(f.model.layers[kLossLogits].kind, LayerKind::kLogits);
  const OperatorCost op(f.model, f.config, f.cluster);
  // The head's 16-bit input (replicated without sequence parallelism) and the fp32 softmax of
  // the device's V/2 vocabulary entries.
  const int64_t stash = kLossTokens * (kLossHidden * 2 + kLossVocab / 2 * 4);
  EXPECT_EQ(stash, 2168455168);
  EXPECT_EQ(op.stash_bytes(kLossLogits), stash);
  // Whatever the recompute policy: the loss is never recomputed.
  for (const Recompute r : {Recompute::kSelective, Recompute::kFull, Recompute::kOp}) {
    ParallelConfig c = f.config;
    c.recompute = r;
    EXPECT_EQ(OperatorCost(f.model, c, f.cluster).stash_bytes(kLossLogits), stash)
        << to_string(r);
  }
  // graph's layer list (tp 1) counts the same bytes per token.
  EXPECT_EQ(f.model.layers[kLossLogits].stash_bytes[0],
            kLossTokens * (kLossHidden * 2 + kLossVocab * 4));
}

TEST(LossMemory, AFusedKernelSavingTheLogitsInTheirDtypeKeepsTwoBytesPerEntry) {
  LossFixture f;
  f.model.cross_entropy = CrossEntropy::kLogitsDtype;
  const OperatorCost op(f.model, f.config, f.cluster);
  EXPECT_EQ(op.stash_bytes(kLossLogits), kLossTokens * (kLossHidden * 2 + kLossVocab / 2 * 2));
  EXPECT_EQ(op.stash_bytes(kLossLogits), 1117782016);
  // Its transient: the 16-bit gradient flash-attn writes beside the saved logits.
  EXPECT_EQ(op.loss_transient_bytes(kLossLogits), kLossTokens * kLossVocab / 2 * 2);
}

TEST(LossMemory, TheSixteenBitLogitsBesideTheFp32CopyCountOnceOnTheActorHoldingTheLoss) {
  LossFixture f;
  const OperatorCost op(f.model, f.config, f.cluster);
  const int64_t transient = kLossTokens * kLossVocab / 2 * 2;  // BF16 logits of V/2 entries
  EXPECT_EQ(transient, 1050673152);
  EXPECT_EQ(op.loss_transient_bytes(kLossLogits), transient);
  for (int l = 0; l < kLossLogits; ++l) EXPECT_EQ(op.loss_transient_bytes(l), 0) << l;
  const Partition p = partition_from_starts({0, 17}, f.model.num_layers());
  const Placement place = make_placement(PlacementKind::kLinear, 2, 2);
  for (const int microbatch_size : {1, 2}) {
    ParallelConfig c = f.config;
    c.microbatch_size = microbatch_size;
    const MemoryModel mem = build_memory_model(f.model, p, place, c, f.cluster);
    const ActorMemory& first = mem.actors[0];
    const ActorMemory& last = mem.actors[1];
    EXPECT_EQ(first.loss_transient_bytes, 0);
    EXPECT_EQ(last.loss_transient_bytes, microbatch_size * transient);
    // Counted with the static bytes, not per stashed microbatch.
    EXPECT_EQ(last.static_bytes(), last.weight_bytes + last.grad_bytes + last.optimizer_bytes +
                                       microbatch_size * transient);
    // The stage's stash: its 16 transformer layers and the loss's fp32 copy, per microbatch.
    EXPECT_EQ(mem.stash_bytes_per_stage[1],
              std::llround(microbatch_size *
                           (16 * op.stash_bytes(1) + op.stash_bytes(kLossLogits))));
  }
}

TEST(LossMemory, BytesPerLogitFollowTheFrameworksCrossEntropy) {
  EXPECT_EQ(cross_entropy_saved_bytes_per_logit(CrossEntropy::kFp32, Dtype::kBf16), 4);
  EXPECT_EQ(cross_entropy_saved_bytes_per_logit(CrossEntropy::kFp32, Dtype::kFp8), 4);
  EXPECT_EQ(cross_entropy_saved_bytes_per_logit(CrossEntropy::kLogitsDtype, Dtype::kBf16), 2);
  EXPECT_EQ(cross_entropy_saved_bytes_per_logit(CrossEntropy::kLogitsDtype, Dtype::kFp8), 2);
  EXPECT_EQ(cross_entropy_transient_bytes_per_logit(CrossEntropy::kFp32, Dtype::kBf16), 2);
  // An fp32 model's .float() is the logits themselves: nothing beside them.
  EXPECT_EQ(cross_entropy_transient_bytes_per_logit(CrossEntropy::kFp32, Dtype::kFp32), 0);
  EXPECT_EQ(cross_entropy_transient_bytes_per_logit(CrossEntropy::kLogitsDtype, Dtype::kBf16), 2);
}

TEST(LossMemory, TheModelJsonNamesItsCrossEntropy) {
  nlohmann::json doc = {{"name", "m"},    {"layers", 2},   {"hidden", 256}, {"heads", 4},
                        {"seq_len", 128}, {"vocab", 1000}, {"mlp", "gelu"}};
  EXPECT_EQ(model_from_json(doc, "m.json").cross_entropy, CrossEntropy::kFp32);
  EXPECT_FALSE(model_shape_to_json(model_from_json(doc, "m.json")).contains("cross_entropy"));
  doc["cross_entropy"] = "logits_dtype";
  const ModelSpec m = model_from_json(doc, "m.json");
  EXPECT_EQ(m.cross_entropy, CrossEntropy::kLogitsDtype);
  EXPECT_EQ(m.layers.back().stash_bytes[0], 128 * (256 * 2 + 1000 * 2));
  EXPECT_EQ(model_shape_to_json(m).at("cross_entropy"), "logits_dtype");
  EXPECT_EQ(model_from_json(model_shape_to_json(m), "back.json").cross_entropy,
            CrossEntropy::kLogitsDtype);
  doc["cross_entropy"] = "bf16";
  try {
    model_from_json(doc, "m.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cross_entropy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected \"fp32\" or \"logits_dtype\", got \"bf16\""),
              std::string::npos)
        << e.what();
  }
}

// deepseek-v3: layer 62 the MTP module, 61 the transformer layer its block copies, 63 the logits.
TEST(LossMemory, AnMtpModulesStashIsItsBlockItsProjectionInputAndTheHeadsInGraphAndCostModel) {
  const ModelSpec model = load_model("deepseek-v3");
  const int mtp = model.num_layers() - 2, block = mtp - 1, head = mtp + 1;
  ASSERT_GE(model.mtp_block(mtp), 0);
  const int64_t tokens = 4096, hidden = 7168, vocab = 129280;
  const int64_t projection = tokens * 2 * hidden * 2;  // the 2h concatenation, 16-bit
  EXPECT_EQ(projection, 117440512);
  EXPECT_EQ(model.layers[head].stash_bytes[0], tokens * (hidden * 2 + vocab * 4));
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(model.layers[mtp].stash_bytes[r],
              model.layers[block].stash_bytes[r] + model.layers[head].stash_bytes[r] + projection)
        << r;
  // The memory model at tp 1 (selective recompute, flash attention: graph's selective column).
  ParallelConfig c;
  c.recompute = Recompute::kSelective;
  const OperatorCost op(model, c, cluster_preset("h100-sxm"));
  EXPECT_EQ(op.stash_bytes(mtp), model.layers[mtp].stash_bytes[1]);
  EXPECT_EQ(op.stash_bytes(mtp), op.stash_bytes(block) + op.stash_bytes(head) + projection);
  // Its own loss has the head's transient.
  EXPECT_EQ(op.loss_transient_bytes(mtp), tokens * vocab * 2);
  EXPECT_EQ(op.loss_transient_bytes(mtp), op.loss_transient_bytes(head));
}

}  // namespace
}  // namespace jaxpp
