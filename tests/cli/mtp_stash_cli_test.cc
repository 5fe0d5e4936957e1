// graph's stash column and simulate's memory model agree for a model with an MTP module
// (deepseek-v3: layer 61 the transformer layer the module's block copies, 62 the module, 63 the
// logits): each of the four stages of --partition 0,61,62,63 holds one part, and on one
// microbatch simulate's peak − static of each actor is its stage's stash.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

const char* const kMtpPartition = " --pp 4 --partition 0,61,62,63 --recompute selective";

TEST(MtpStashCli, GraphStashOfTheMtpModuleIsSimulatesMemoryModelToTheByte) {
  const nlohmann::json graph = run_json("graph --model deepseek-v3" + std::string(kMtpPartition));
  const auto stash = [&](int s) {
    return graph.at("stages").at(s).at("stash_bytes").get<int64_t>();
  };
  // The module: its block, its 2h projection input (4096 tokens × 2 × 7168, 16-bit) and the
  // shared head with its own loss (its input and the fp32 copy of 129280 logits per token).
  const int64_t projection = int64_t{4096} * 2 * 7168 * 2;
  EXPECT_EQ(projection, 117440512);
  EXPECT_EQ(stash(3), int64_t{4096} * (7168 * 2 + int64_t{129280} * 4));
  EXPECT_EQ(stash(2), stash(1) + stash(3) + projection);
  const nlohmann::json sim = run_json(
      "simulate --model deepseek-v3 --cluster h100-sxm --gpus 4 --dp 1 --global-batch 1 "
      "--schedule 1f1b --no-memory-check" +
      std::string(kMtpPartition));
  for (int r = 1; r < 4; ++r)
    EXPECT_EQ(sim.at("peak_memory_bytes").at(r).get<int64_t>() -
                  sim.at("actors").at(r).at("static_bytes").get<int64_t>(),
              stash(r))
        << r;
}

}  // namespace
}  // namespace jaxpp::testing
