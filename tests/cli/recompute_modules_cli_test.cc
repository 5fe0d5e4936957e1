// Megatron-Core's recompute modules (--recompute selective --recompute-modules ...) beyond
// simulate: graph's stash and recompute columns (the same rules and messages as simulate's
// memory model), explore's module-set choices (selective:a+b), computed by hand on
// qwen3-30b-a3b (48 MoE layers, h 2048, top 8 of 128 experts of ffn 768, s 4096, BF16).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

// What layernorm and moe_act free in qwen3-30b-a3b, one sequence: per layer and token the
// pre-MLP norm's output (2048 BF16 values; its attention norm is fused into the QKV linear) and
// the routed experts' activation output (8 × 768 BF16 values).
constexpr int64_t kModulesLayers = 48, kModulesTokens = 4096;
constexpr int64_t kModulesFreedPerLayer = kModulesTokens * (2048 * 2 + 8 * 768 * 2);  // 67,108,864

const char* const kModulesGraph = "graph --model qwen3-30b-a3b --pp 1 --recompute selective";

int64_t modules_stage_stash(const nlohmann::json& graph) {
  return graph.at("stages").at(0).at("stash_bytes").get<int64_t>();
}

// simulate's memory model on one GPU (pp 1, one sequence): peak − static is the stash.
int64_t modules_simulate_stash(const std::string& extra) {
  const nlohmann::json j = run_json(
      "simulate --model qwen3-30b-a3b --cluster h100-sxm --gpus 1 --pp 1 --dp 1 "
      "--global-batch 1 --schedule 1f1b --no-memory-check " +
      extra);
  return j.at("peak_memory_bytes").at(0).get<int64_t>() -
         j.at("actors").at(0).at("static_bytes").get<int64_t>();
}

// The error line without the command's prefix ("jaxpp-sim graph: error: ").
std::string modules_message(const CliResult& r) {
  const size_t at = r.err.find("error: ");
  return at == std::string::npos ? r.err : r.err.substr(at + 7);
}

TEST(RecomputeModulesCli, GraphStashIsSimulatesMemoryModelToTheByte) {
  const nlohmann::json plain = run_json(kModulesGraph);
  const nlohmann::json mods =
      run_json(std::string(kModulesGraph) + " --recompute-modules core_attn,layernorm,moe_act");
  EXPECT_FALSE(plain.contains("recompute_modules"));
  EXPECT_EQ(mods.at("recompute_modules"),
            nlohmann::json::array({"core_attn", "layernorm", "moe_act"}));
  EXPECT_EQ(modules_stage_stash(mods), modules_stage_stash(plain) - kModulesLayers * kModulesFreedPerLayer);
  EXPECT_EQ(kModulesLayers * kModulesFreedPerLayer, 3221225472);  // 3 GiB
  // Norms and activations are memory-bound: the recompute FLOPs stay the attention core's.
  EXPECT_EQ(mods.at("stages").at(0).at("recompute_flops"),
            plain.at("stages").at(0).at("recompute_flops"));
  // simulate (flash attention, tp 1) counts the same bytes, with and without the modules.
  EXPECT_EQ(modules_simulate_stash("--recompute selective"), modules_stage_stash(plain));
  EXPECT_EQ(modules_simulate_stash("--recompute selective --recompute-modules core_attn,layernorm,moe_act"),
            modules_stage_stash(mods));
  // Without core_attn the unfused attention keeps its scores as under none (graph's none column
  // counts them) and the attention core is not run again.
  const nlohmann::json none = run_json("graph --model qwen3-30b-a3b --pp 1 --recompute none");
  const nlohmann::json no_core =
      run_json(std::string(kModulesGraph) + " --recompute-modules layernorm,moe_act");
  EXPECT_EQ(modules_stage_stash(no_core), modules_stage_stash(none) - kModulesLayers * kModulesFreedPerLayer);
  EXPECT_EQ(no_core.at("stages").at(0).at("recompute_flops").get<double>(), 0.0);
  EXPECT_EQ(modules_simulate_stash("--recompute selective --recompute-modules layernorm,moe_act "
                           "--attention unfused"),
            modules_stage_stash(no_core));
  // core_attn alone is plain selective.
  EXPECT_EQ(run_json(std::string(kModulesGraph) + " --recompute-modules core_attn"), plain);
  // The table's first line.
  const CliResult t = run_cli(std::string(kModulesGraph) + " --recompute-modules layernorm,moe_act");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("recompute selective (modules layernorm,moe_act)\n"), std::string::npos)
      << t.out;
}

TEST(RecomputeModulesCli, GraphRefusesWithSimulatesLines) {
  const std::string sim =
      "simulate --model gpt3-1.3b --gpus 1 --pp 1 --dp 1 --global-batch 1 --schedule 1f1b";
  const std::string graph = "graph --model gpt3-1.3b --pp 1";
  for (const std::string bad :
       {" --recompute full --recompute-modules core_attn,layernorm",
        " --recompute selective --recompute-modules core_attn,norm",
        " --recompute selective --recompute-modules mlp",
        " --recompute selective --recompute-modules layernorm,layernorm",
        " --recompute selective --recompute-modules ,",
        " --recompute selective --recompute-modules moe_act",
        " --recompute selective --recompute-modules mla_up_proj"}) {
    const CliResult g = run_cli(graph + bad);
    const CliResult s = run_cli(sim + bad);
    EXPECT_EQ(g.exit_code, 2) << bad;
    EXPECT_EQ(s.exit_code, 2) << bad;
    EXPECT_EQ(modules_message(g), modules_message(s)) << bad;
    EXPECT_EQ(g.err.rfind("jaxpp-sim graph: error: --recompute-modules: ", 0), 0u) << g.err;
    EXPECT_EQ(g.out, "") << bad;
  }
  EXPECT_EQ(modules_message(run_cli(graph + " --recompute selective --recompute-modules moe_act")),
            "--recompute-modules: recompute module moe_act needs routed experts, which no layer "
            "of model 'gpt3-1.3b' has\n");
  // The partition planner's path checks before it prices anything.
  const CliResult even =
      run_cli("graph --model gpt3-1.3b --pp 2 --partition even --recompute selective "
              "--recompute-modules moe_act");
  EXPECT_EQ(even.exit_code, 2);
  EXPECT_EQ(modules_message(even),
            "--recompute-modules: recompute module moe_act needs routed experts, which no layer "
            "of model 'gpt3-1.3b' has\n");
}

// ---- explore --recompute selective:a+b ---------------------------------------------------------

constexpr double kModulesGiB = 1024.0 * 1024.0 * 1024.0;

const char* const kModulesExplore =
    "explore --model qwen3-30b-a3b --cluster h100-sxm --gpus 1 --global-batch 1 "
    "--microbatch-sizes 1 --tp 1 --schedules 1f1b --zero1 off --quiet ";

// simulate's peak on that one GPU.
int64_t modules_simulate_peak(const std::string& extra) {
  return run_json(
             "simulate --model qwen3-30b-a3b --cluster h100-sxm --gpus 1 --pp 1 --dp 1 "
             "--global-batch 1 --schedule 1f1b --no-memory-check " +
             extra)
      .at("peak_memory_bytes")
      .at(0)
      .get<int64_t>();
}

// A limit between the peak of plain selective (and of none: flash attention keeps no scores)
// and that of selective with layernorm and moe_act, 3 GiB lower: the module set is the only
// configuration of none, selective and selective:layernorm+moe_act that fits, and is chosen.
std::string module_limit_flag() {
  const int64_t selective = modules_simulate_peak("--recompute selective");
  const int64_t mods = modules_simulate_peak("--recompute selective --recompute-modules layernorm,moe_act");
  EXPECT_EQ(modules_simulate_peak("--recompute none"), selective);
  EXPECT_EQ(selective - mods, kModulesLayers * kModulesFreedPerLayer);
  char flag[64];
  std::snprintf(flag, sizeof flag, "--max-memory-gib %.9f ",
                (static_cast<double>(selective) + static_cast<double>(mods)) / 2 / kModulesGiB);
  return flag;
}

TEST(RecomputeModulesCli, ExploreChoosesTheOnlyModuleSetThatFits) {
  const std::string limit = module_limit_flag();
  const std::string space = std::string(kModulesExplore) + limit +
                            "--recompute none,selective,selective:layernorm+moe_act ";
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(space + "--json --explain --plan " + dir + "/plan.json --csv " +
                              dir + "/all.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("enumerated"), 3);
  ASSERT_EQ(j.at("pruned_configs").size(), 2u) << r.out;
  for (const nlohmann::json& p : j.at("pruned_configs")) {
    EXPECT_EQ(p.at("status"), "memory") << p.dump();
    EXPECT_FALSE(p.at("config").contains("recompute_modules")) << p.dump();
  }
  const nlohmann::json modules = nlohmann::json::array({"layernorm", "moe_act"});
  ASSERT_EQ(j.at("configs").size(), 1u) << r.out;
  EXPECT_EQ(j.at("best").at("config").at("recompute"), "selective");
  EXPECT_EQ(j.at("best").at("config").at("recompute_modules"), modules);
  EXPECT_EQ(j.at("best").at("peak_memory_bytes").get<int64_t>(),
            modules_simulate_peak("--recompute selective --recompute-modules layernorm,moe_act"));
  // The plan file carries the modules, and simulate runs it to the same step.
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  EXPECT_EQ(plan.at("config").at("recompute_modules"), modules);
  EXPECT_EQ(plan.at("predicted").at("step_time_s"), j.at("best").at("step_time_s"));
  // CSV: a recompute_modules column after recompute_layers.
  const std::string csv = read_file(dir + "/all.csv");
  EXPECT_NE(csv.find(",recompute,recompute_layers,recompute_modules,zero1,"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",selective,-1,layernorm+moe_act,0,"), std::string::npos) << csv;
  // The table: the recompute column as wide as the name; --explain names the pruned ones.
  const CliResult t = run_cli(space + "--explain");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find(" recompute                   zero1 "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(" selective:layernorm+moe_act off "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(", recompute selective: memory: "), std::string::npos) << t.out;
  std::filesystem::remove_all(dir);
}

// Under mpirun (its own test: the sanitizer stage runs mpirun-driven tests, whose names carry
// "Mpi", with the unwinder OpenMPI's leak suppressions need), rank 0 prints the JSON one process
// prints for the same module-set space.
TEST(RecomputeModulesCli, ExploreUnderMpirunPrintsTheSameJsonWithTheModuleSet) {
  const std::string space = std::string(kModulesExplore) + module_limit_flag() +
                            "--recompute none,selective,selective:layernorm+moe_act ";
  const CliResult mpi = run_cli_under_mpirun(2, space + "--json --explain --threads 1");
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err << mpi.out;
  const CliResult single = run_cli(space + "--json --explain");
  ASSERT_EQ(single.exit_code, 0) << single.err;
  EXPECT_EQ(mpi.out, single.out);
  EXPECT_NE(mpi.out.find("\"moe_act\""), std::string::npos) << mpi.out;
}

TEST(RecomputeModulesCli, ExploreDefaultOutputsHaveNoModuleColumn) {
  const std::string space =
      std::string(kModulesExplore) + "--max-memory-gib 1000 --recompute none,selective:core_attn ";
  const CliResult csv = run_cli(space + "--format csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(csv.out.find("recompute_modules"), std::string::npos) << csv.out;
  // selective:core_attn is plain selective.
  EXPECT_NE(csv.out.find(",selective,-1,0,"), std::string::npos) << csv.out;
  const CliResult t = run_cli(space);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find(" recompute zero1 "), std::string::npos) << t.out;
}

TEST(RecomputeModulesCli, ExploreRefusesBadModuleSetsInOneLine) {
  const std::string space = std::string(kModulesExplore) + "--recompute none,";
  const auto expect = [&](const std::string& item, const std::string& line) {
    const CliResult r = run_cli(space + item);
    EXPECT_EQ(r.exit_code, 2) << item;
    EXPECT_EQ(r.err, "jaxpp-sim explore: error: " + line + "\n") << item;
    EXPECT_EQ(r.out, "") << item;
  };
  expect("selective:layernorm+norm",
         "--recompute: 'selective:layernorm+norm': unknown recompute module \"norm\" (expected "
         "core_attn, layernorm, mla_up_proj or moe_act)");
  expect("selective:moe_act+moe_act",
         "--recompute: 'selective:moe_act+moe_act': names recompute module \"moe_act\" twice");
  expect("selective:",
         "--recompute: 'selective:': expected selective:a+b with recompute module names joined "
         "by '+' (core_attn, layernorm, mla_up_proj, moe_act)");
  expect("selective:mla_up_proj",
         "--recompute: 'selective:mla_up_proj': recompute module mla_up_proj needs multi-head "
         "latent attention, which no layer of model 'qwen3-30b-a3b' has");
  expect("none:layernorm",
         "--recompute: 'none:layernorm': only full takes a layer count (full:N, the first N "
         "transformer layers of each stage recomputed; selective takes recompute modules, "
         "selective:a+b)");
}

}  // namespace
}  // namespace jaxpp::testing
