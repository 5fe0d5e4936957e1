// PerturbedCost (costmodel/perturbed_cost.h): factors on one actor and one link, seeded
// deterministic jitter within its band, and spec parsing errors that name the item.
#include "costmodel/perturbed_cost.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>

#include "costmodel/stage_times_cost.h"
#include "graph/error.h"
#include "graph/limits.h"

namespace jaxpp {
namespace {

Instruction perturb_test_compute(TaskKind kind, int stage, int mb) {
  Instruction ins;
  ins.op = OpKind::kCompute;
  ins.stage = stage;
  ins.tasks.push_back(TaskRef{kind, stage, mb});
  return ins;
}

// PerturbedCost keeps its base cost by reference: a temporary base is a compile error, an lvalue
// binds.
static_assert(!std::is_constructible_v<PerturbedCost, StageTimesCost&&, Perturbation>,
              "a temporary base would dangle");
static_assert(!std::is_constructible_v<PerturbedCost, const CostProvider&&, Perturbation>,
              "a temporary base would dangle");
static_assert(std::is_constructible_v<PerturbedCost, const StageTimesCost&, Perturbation>);

TEST(PerturbedCost, SlowActorScalesOnlyThatActorsCompute) {
  const StageTimesCost base(uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 1e-4));
  const PerturbedCost cost(base, parse_perturbation("slow-actor=2:1.5", "--perturb"));
  EXPECT_DOUBLE_EQ(cost.compute_s(2, perturb_test_compute(TaskKind::kF, 2, 0)), 1.5e-3);
  EXPECT_DOUBLE_EQ(cost.compute_s(1, perturb_test_compute(TaskKind::kF, 1, 0)), 1e-3);
}

TEST(PerturbedCost, SlowLinkScalesBothDirectionsOfThatLinkOnly) {
  const StageTimesCost base(uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 1e-4));
  const PerturbedCost cost(base, parse_perturbation("slow-link=1-2:3", "--perturb"));
  Instruction send = perturb_test_compute(TaskKind::kF, 1, 0);
  send.op = OpKind::kSend;
  EXPECT_DOUBLE_EQ(cost.transfer_latency_s(1, 2, send), 3e-4);
  EXPECT_DOUBLE_EQ(cost.transfer_latency_s(2, 1, send), 3e-4);
  EXPECT_DOUBLE_EQ(cost.transfer_latency_s(0, 1, send), 1e-4);
}

TEST(PerturbedCost, JitterIsWithinItsBandDeterministicAndDependsOnTheSeed) {
  const StageTimesCost base(uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 0));
  const PerturbedCost a(base, parse_perturbation("jitter=0.2,seed=1", "--perturb"));
  const PerturbedCost b(base, parse_perturbation("jitter=0.2,seed=1", "--perturb"));
  const PerturbedCost c(base, parse_perturbation("jitter=0.2,seed=2", "--perturb"));
  int differ = 0;
  for (int mb = 0; mb < 50; ++mb) {
    const Instruction ins = perturb_test_compute(TaskKind::kI, 1, mb);
    const double d = a.compute_s(1, ins);
    EXPECT_GE(d, 0.8e-3);
    EXPECT_LE(d, 1.2e-3);
    EXPECT_EQ(d, b.compute_s(1, ins));
    differ += d != c.compute_s(1, ins) ? 1 : 0;
  }
  EXPECT_GT(differ, 40);
}

TEST(PerturbedCost, MalformedSpecNamesTheItem) {
  try {
    parse_perturbation("slow-actor=2:1.5,jitter=1.5", "--perturb");
    FAIL() << "jitter 1.5 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--perturb: 'jitter=1.5'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_perturbation("slow=1", "--perturb"), InputError);
  EXPECT_THROW(parse_perturbation("slow-actor=2", "--perturb"), InputError);
  EXPECT_THROW(check_perturbation(parse_perturbation("slow-actor=9:2", "x"), 4, 8, "x"), InputError);
}

// The message of the InputError `spec` raises (empty when it parses).
std::string seq_len_error(const std::string& spec) {
  try {
    parse_perturbation(spec, "--perturb");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(PerturbedCost, SeqLensParseRunsAndPrintBackTheSameSpec) {
  const Perturbation p = parse_perturbation("seq-lens=1024*3:4096:1024,nominal-seq-len=2048", "x");
  EXPECT_EQ(p.seq_lens, (std::vector<int>{1024, 1024, 1024, 4096, 1024}));
  EXPECT_EQ(p.nominal_seq_len, 2048);
  EXPECT_FALSE(p.empty());
  EXPECT_EQ(p.to_string(), "seq-lens=1024*3:4096:1024,nominal-seq-len=2048");
  EXPECT_EQ(parse_perturbation(p.to_string(), "x").seq_lens, p.seq_lens);
}

TEST(PerturbedCost, SeqLensFromAFile) {
  // Per process: two suites on one host do not share it.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("jaxpp_perturb_seq_lens_" + std::to_string(::getpid()) + ".json"))
                               .string();
  std::ofstream(path) << "[2048, 2048,\n 8192*2]\n";
  EXPECT_EQ(parse_perturbation("seq-lens=@" + path, "x").seq_lens,
            (std::vector<int>{2048, 2048, 8192, 8192}));
  std::ofstream(path) << "2048 0\n";
  const std::string bad = seq_len_error("seq-lens=@" + path);
  EXPECT_NE(bad.find("the length of microbatch 1 in " + path), std::string::npos) << bad;
  std::remove(path.c_str());
  EXPECT_NE(seq_len_error("seq-lens=@" + path).find("--perturb: 'seq-lens=@"), std::string::npos);
}

TEST(PerturbedCost, ASeedIsDigitsAndNeedsJitter) {
  // stoull read "-1" as 2^64 - 1, and "seed=-1" alone gave an empty label that perturbed nothing.
  for (const char* bad : {"jitter=0.1,seed=-1", "jitter=0.1,seed= 3", "jitter=0.1,seed=+3",
                          "jitter=0.1,seed=", "jitter=0.1,seed=18446744073709551616"})
    EXPECT_NE(seq_len_error(bad).find("expected a non-negative integer seed"), std::string::npos)
        << bad << ": " << seq_len_error(bad);
  EXPECT_EQ(seq_len_error("seed=3"),
            "--perturb: seed needs jitter=J > 0 (it seeds the jitter's draws)");
  EXPECT_EQ(parse_perturbation("jitter=0.1,seed=18446744073709551615", "x").seed,
            18446744073709551615ull);
}

TEST(PerturbedCost, BadSeqLensNameTheItemAndTheMicrobatch) {
  EXPECT_NE(seq_len_error("seq-lens=2048:0").find(
                "--perturb: 'seq-lens=2048:0': the length of microbatch 1 must be in [1, "),
            std::string::npos)
      << seq_len_error("seq-lens=2048:0");
  const std::string huge = "seq-lens=" + std::to_string(kMaxSeqLen + 1);
  EXPECT_NE(seq_len_error(huge).find("microbatch 0 must be in [1, " + std::to_string(kMaxSeqLen) +
                                     "] tokens, got " + std::to_string(kMaxSeqLen + 1)),
            std::string::npos)
      << seq_len_error(huge);
  EXPECT_NE(seq_len_error("seq-lens=-5").find("microbatch 0 must be in"), std::string::npos);
  for (const char* bad : {"seq-lens=2k", "seq-lens=-", "seq-lens=2048*", "seq-lens=1-2",
                          "seq-lens=2048*x", "seq-lens=1e3"})
    EXPECT_NE(seq_len_error(bad).find("expected a length or LENGTH*COUNT"), std::string::npos)
        << bad << ": " << seq_len_error(bad);
  EXPECT_NE(seq_len_error("seq-lens=2048*0").find("the count must be >= 1"), std::string::npos);
  EXPECT_NE(seq_len_error("seq-lens=").find("no lengths"), std::string::npos);
  EXPECT_NE(seq_len_error("nominal-seq-len=0,seq-lens=5").find("'nominal-seq-len=0'"),
            std::string::npos);
  EXPECT_NE(seq_len_error("nominal-seq-len=512").find("nominal-seq-len needs seq-lens"),
            std::string::npos);
  const Perturbation three = parse_perturbation("seq-lens=1:2:3", "--perturb");
  try {
    check_perturbation(three, 4, 8, "--perturb");
    FAIL() << "3 lengths accepted for 8 microbatches";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "--perturb: seq-lens gives 3 lengths but there are 8 microbatches (one length "
                 "per microbatch)");
  }
  EXPECT_NO_THROW(check_perturbation(three, 4, 3, "--perturb"));
}

TEST(PerturbedCost, SeqLensScaleEachTaskOfAGroupAndItsTransfersLinearly) {
  // Stage times: F = 1 ms, I = 2 ms, W = 0.5 ms, T_comm = 0.1 ms at the nominal 1000 tokens.
  const StageTimesCost base(uniform_stage_times(4, 1e-3, 2e-3, 0.5e-3, 1e-4));
  const PerturbedCost cost(base,
                           parse_perturbation("seq-lens=1000:3000,nominal-seq-len=1000", "x"));
  EXPECT_DOUBLE_EQ(cost.compute_s(0, perturb_test_compute(TaskKind::kF, 0, 0)), 1e-3);
  EXPECT_DOUBLE_EQ(cost.compute_s(0, perturb_test_compute(TaskKind::kF, 0, 1)), 3e-3);
  // A fused group of F of microbatch 1 (x3) and B of microbatch 0 (x1): 3 + 2.5 ms.
  Instruction group = perturb_test_compute(TaskKind::kF, 0, 1);
  group.tasks.push_back(TaskRef{TaskKind::kB, 0, 0});
  EXPECT_DOUBLE_EQ(cost.compute_s(0, group), 5.5e-3);
  Instruction send = perturb_test_compute(TaskKind::kF, 0, 1);
  send.op = OpKind::kSend;
  EXPECT_DOUBLE_EQ(cost.transfer_latency_s(0, 1, send), 3e-4);
  // Without a nominal length nothing is scaled here (model mode prices the lengths itself).
  const PerturbedCost no_nominal(base, parse_perturbation("seq-lens=1000:3000", "x"));
  EXPECT_DOUBLE_EQ(no_nominal.compute_s(0, perturb_test_compute(TaskKind::kF, 0, 1)), 1e-3);
}

}  // namespace
}  // namespace jaxpp
