// Activation offloading across the tool: simulate's host-memory check (the cluster's
// host_memory_gib_per_gpu), graph --offload-layers (the stash kept and the bytes on the host, as
// simulate's memory model counts them) and explore --offload-layers (numbers and auto: the fewest
// layers that fit, only where Megatron allows offloading; the plan, JSON, CSV and table carry it;
// the default space is unchanged).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

constexpr double kOffloadGiB = 1024.0 * 1024.0 * 1024.0;

// gpt3-1.3b (24 transformer layers, alike) on one A100 80GB, 8 sequences in one microbatch.
std::string offload_simulate_args(int offload, const std::string& cluster = "a100-80g") {
  return "simulate --model gpt3-1.3b --cluster " + cluster +
         " --gpus 1 --pp 1 --dp 1 --global-batch 8 --microbatch-size 8 --schedule 1f1b" +
         (offload > 0 ? " --offload-layers " + std::to_string(offload) : "");
}

double offload_peak(int offload) {
  return json_sum(
      run_json(offload_simulate_args(offload) + " --no-memory-check").at("peak_memory_bytes"));
}

const char* const kOffloadExplore =
    "explore --model gpt3-1.3b --cluster a100-80g --gpus 1 --global-batch 8 --microbatch-sizes 8 "
    "--tp 1 --schedules 1f1b --zero1 off --quiet";

TEST(OffloadSearchCli, SimulateRefusesOffloadedActivationsAboveTheHostMemory) {
  // The host holds every offloaded layer's stash (two of them are in flight on the device too).
  const double layer = offload_peak(0) - offload_peak(3);
  ASSERT_GT(layer, 1e9);
  const nlohmann::json eight = run_json(offload_simulate_args(8));
  ASSERT_EQ(eight.at("host_offload_bytes").size(), 1u);
  EXPECT_NEAR(eight.at("host_offload_bytes").at(0).get<double>(), 8 * layer, 8.0);
  EXPECT_FALSE(run_json(offload_simulate_args(0)).contains("host_offload_bytes"));
  // The table's row.
  const CliResult table = run_cli(offload_simulate_args(8));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  char row[96];
  std::snprintf(row, sizeof row, "%.2f GiB per GPU (worst actor)", 8 * layer / kOffloadGiB);
  EXPECT_NE(table.out.find("host offload"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(row), std::string::npos) << table.out;
  // A host with less: one line, exit 2, nothing written.
  const std::string small = write_temp_file(
      "small-host.json", R"({"base": "a100-80g", "name": "a100-small-host",
                            "host_memory_gib_per_gpu": 4})");
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(offload_simulate_args(8, small) + " --plan " + dir + "/plan.json");
  EXPECT_EQ(r.exit_code, 2);
  char expected[256];
  std::snprintf(expected, sizeof expected,
                "jaxpp-sim simulate: error: does not fit in host memory: actor 0 offloads %.1f "
                "GiB of activations per GPU, the host has 4.0 GiB per GPU (a100-small-host "
                "host_memory_gib_per_gpu)\n",
                eight.at("host_offload_bytes").at(0).get<double>() / kOffloadGiB);
  EXPECT_EQ(r.err, expected);
  EXPECT_FALSE(std::filesystem::exists(dir + "/plan.json"));
  // Fewer layers fit; without offloading the host is not checked; --no-memory-check skips it.
  EXPECT_EQ(run_cli(offload_simulate_args(3, small)).exit_code, 0);
  EXPECT_EQ(run_cli(offload_simulate_args(0, small)).exit_code, 0);
  EXPECT_EQ(run_cli(offload_simulate_args(8, small) + " --no-memory-check").exit_code, 0);
}

// graph --offload-layers: the stash column keeps the other layers and the two in flight, the host
// column has the offloaded layers' stash; both equal simulate's memory model at tp 1 (with the
// unfused attention whose scores graph's recompute-none stash counts).
TEST(OffloadSearchCli, GraphShowsTheStashKeptAndTheBytesOnTheHost) {
  // One transformer layer's stash: a stage of layer 1 alone.
  const nlohmann::json single =
      run_json("graph --model gpt3-1.3b --pp 3 --partition 0,1,2 --microbatch-size 8");
  const int64_t layer = single.at("stages").at(1).at("stash_bytes").get<int64_t>();
  const nlohmann::json none = run_json("graph --model gpt3-1.3b --pp 1 --microbatch-size 8");
  const nlohmann::json ten =
      run_json("graph --model gpt3-1.3b --pp 1 --microbatch-size 8 --offload-layers 10");
  EXPECT_EQ(ten.at("offload_layers"), 10);
  EXPECT_FALSE(none.contains("offload_layers"));
  EXPECT_FALSE(none.at("stages").at(0).contains("offloaded_stash_bytes"));
  const nlohmann::json& stage = ten.at("stages").at(0);
  EXPECT_EQ(stage.at("offloaded_stash_bytes").get<int64_t>(), 10 * layer);
  EXPECT_EQ(stage.at("stash_bytes").get<int64_t>(),
            none.at("stages").at(0).at("stash_bytes").get<int64_t>() - 8 * layer);
  // simulate's memory model gives the same bytes at tp 1 with the attention graph's model
  // inventory counts (recompute none keeps the unfused attention's scores; flash keeps the
  // selective figure): the stash (peak − static), its drop, and the host bytes.
  const auto unfused = [](int offload) {
    return run_json(offload_simulate_args(offload) + " --attention unfused --no-memory-check");
  };
  const nlohmann::json u0 = unfused(0), u10 = unfused(10);
  const auto stash = [](const nlohmann::json& j) {
    return j.at("peak_memory_bytes").at(0).get<int64_t>() -
           j.at("actors").at(0).at("static_bytes").get<int64_t>();
  };
  EXPECT_EQ(stash(u0), none.at("stages").at(0).at("stash_bytes").get<int64_t>());
  EXPECT_EQ(stash(u10), stage.at("stash_bytes").get<int64_t>());
  EXPECT_EQ(u10.at("host_offload_bytes").at(0).get<int64_t>(), 10 * layer);
  EXPECT_FALSE(u0.contains("host_offload_bytes"));
  // The table: the first line and the host column.
  const CliResult t = run_cli("graph --model gpt3-1.3b --pp 1 --offload-layers 10");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("recompute none, offload 10 transformer layer(s) to host memory\n"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find(" stash MiB   host MiB\n"), std::string::npos) << t.out;
  const CliResult plain = run_cli("graph --model gpt3-1.3b --pp 1");
  EXPECT_EQ(plain.out.find("host MiB"), std::string::npos) << plain.out;
}

TEST(OffloadSearchCli, GraphRefusesWhatMegatronRefuses) {
  CliResult r = run_cli("graph --model gpt3-1.3b --pp 2 --offload-layers 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "jaxpp-sim graph: error: --offload-layers: activation offloading needs pp 1 (Megatron "
            "Core has no support for pipeline parallelism with CPU offloading), got pp 2\n");
  r = run_cli("graph --model gpt3-1.3b --pp 1 --offload-layers 24");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "jaxpp-sim graph: error: --offload-layers: offloads 24 layers but model 'gpt3-1.3b' "
            "has 24 transformer layers (Megatron offloads fewer than all of them)\n");
  r = run_cli("graph --model gpt3-1.3b --pp 1 --offload-layers 4 --recompute selective");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--offload-layers: activation offloading needs recompute none"),
            std::string::npos)
      << r.err;
  r = run_cli("graph --model gpt3-1.3b --pp 1 --offload-layers -1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "jaxpp-sim graph: error: --offload-layers: expected a number of layers >= 0, "
                   "got -1\n");
  r = run_cli("graph --model gpt3-1.3b --pp 2 --partition even --offload-layers 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--offload-layers: activation offloading needs pp 1"), std::string::npos)
      << r.err;
}

// explore --offload-layers 0,4,auto with a limit 5.5 layers below the peak without offloading:
// 0 and 4 do not fit, auto finds 2 + ⌈5.5⌉ = 8 (two offloaded layers are in flight and save
// nothing), which simulate confirms (8 fits, 7 does not); recompute full gets no offloading.
TEST(OffloadSearchCli, ExploreFindsTheFewestOffloadedLayersThatFit) {
  const double p0 = offload_peak(0);
  const double layer = p0 - offload_peak(3);
  const double limit = p0 - 5.5 * layer;
  ASSERT_LE(offload_peak(8), limit);
  ASSERT_GT(offload_peak(7), limit);
  char limit_flag[64];
  std::snprintf(limit_flag, sizeof limit_flag, " --max-memory-gib %.9f", limit / kOffloadGiB);
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli(std::string(kOffloadExplore) + limit_flag +
                              " --recompute none,full --offload-layers 0,4,auto --explain --json "
                              "--plan " + dir + "/plan.json --csv " + dir + "/all.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // none with 0, 4 and auto; full with nothing offloaded.
  EXPECT_EQ(j.at("enumerated"), 4);
  int pruned = 0;
  for (const nlohmann::json& p : j.at("pruned_configs")) {
    EXPECT_EQ(p.at("status"), "memory") << p.dump();
    EXPECT_EQ(p.at("config").at("recompute"), "none");
    EXPECT_NE(p.at("config").value("offload_layers", 0), 8);
    ++pruned;
  }
  EXPECT_EQ(pruned, 2);
  const nlohmann::json* found = nullptr;
  for (const nlohmann::json& c : j.at("configs")) {
    if (c.value("offload_auto", false)) found = &c;
    if (c.at("config").at("recompute") == "full") {
      EXPECT_FALSE(c.at("config").contains("offload_layers")) << c.dump();
    }
  }
  ASSERT_NE(found, nullptr) << r.out;
  EXPECT_EQ(found->at("config").at("offload_layers"), 8);
  EXPECT_TRUE(found->at("fits").get<bool>());
  EXPECT_NEAR(found->at("peak_memory_bytes").get<double>(), offload_peak(8), 1.0);
  // The best plan carries its offloading when it is the auto one, and its metrics are the plan's.
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir + "/plan.json"));
  EXPECT_EQ(plan.at("config").value("offload_layers", 0),
            j.at("best").at("config").value("offload_layers", 0));
  EXPECT_EQ(j.at("best").at("step_time_s"), plan.at("predicted").at("step_time_s"));
  // CSV: the offloading columns after recompute_layers.
  const std::string csv = read_file(dir + "/all.csv");
  EXPECT_NE(csv.find(",recompute,recompute_layers,offload_layers,offload_auto,zero1,"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",Std1F1B,none,-1,8,1,0,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",Std1F1B,full,-1,0,0,0,"), std::string::npos) << csv;
  // The table: an offload column with auto:8.
  const CliResult t = run_cli(std::string(kOffloadExplore) + limit_flag +
                              " --recompute none,full --offload-layers 0,4,auto");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find(" recompute offload zero1 "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(" none      auto:8  off "), std::string::npos) << t.out;
  std::filesystem::remove_all(dir);
}

// The host memory prunes offloading configurations with simulate's words.
TEST(OffloadSearchCli, ExplorePrunesWhatTheHostCannotHold) {
  const double p0 = offload_peak(0);
  const double layer = p0 - offload_peak(3);
  char flags[160];
  std::snprintf(flags, sizeof flags, " --max-memory-gib %.9f --recompute none,full "
                "--offload-layers auto --explain --json", (p0 - 5.5 * layer) / kOffloadGiB);
  const std::string small = write_temp_file(
      "small-host.json", R"({"base": "a100-80g", "name": "a100-small-host",
                            "host_memory_gib_per_gpu": 4})");
  std::string args = kOffloadExplore;
  args.replace(args.find("--cluster a100-80g"), 18, "--cluster " + small);
  const CliResult r = run_cli(args + flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("pruned_configs").size(), 1u) << r.out;
  const nlohmann::json& p = j.at("pruned_configs").at(0);
  EXPECT_EQ(p.at("status"), "memory");
  EXPECT_EQ(p.at("config").at("offload_layers"), 8);
  char reason[200];
  std::snprintf(reason, sizeof reason,
                "does not fit in host memory: actor 0 offloads %.1f GiB of activations per GPU, "
                "the host has 4.0 GiB per GPU (a100-small-host host_memory_gib_per_gpu)",
                8 * layer / kOffloadGiB);
  EXPECT_EQ(p.at("reason"), reason);
  EXPECT_EQ(j.at("best").at("config").at("recompute"), "full");
}

// Only pp-1 configurations offload; the default space and an explicit 0 are the same search.
TEST(OffloadSearchCli, ExploreOffloadsOnlyWhereMegatronAllowsAndTheDefaultIsUnchanged) {
  const std::string two =
      "explore --model gpt3-1.3b --cluster a100-80g --gpus 2 --global-batch 16 "
      "--microbatch-sizes 8 --schedules 1f1b --zero1 off --recompute none --quiet --explain";
  const nlohmann::json j = run_json(two + " --offload-layers 6");
  int pp1 = 0;
  for (const char* list : {"configs", "pruned_configs"})
    for (const nlohmann::json& c : j.at(list)) {
      const nlohmann::json& cfg = c.at("config");
      if (cfg.at("pp") == 1) {
        EXPECT_EQ(cfg.at("offload_layers"), 6) << c.dump();
        ++pp1;
      } else {
        EXPECT_FALSE(cfg.contains("offload_layers")) << c.dump();
      }
    }
  EXPECT_EQ(pp1, 4);  // tp 1, 2 and (pruned: 2 GPUs) 4, 8
  // --offload-layers 0 is the default search, byte for byte (JSON, CSV; the table but its time).
  EXPECT_EQ(run_cli(two + " --json").out, run_cli(two + " --json --offload-layers 0").out);
  EXPECT_EQ(run_cli(two + " --format csv").out,
            run_cli(two + " --format csv --offload-layers 0").out);
  const std::string csv = run_cli(two + " --format csv").out;
  EXPECT_EQ(csv.find("offload"), std::string::npos) << csv;
}

TEST(OffloadSearchCli, ExploreRefusesBadChoices) {
  CliResult r = run_cli(std::string(kOffloadExplore) + " --offload-layers 4,x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "jaxpp-sim explore: error: --offload-layers: 'x': expected a number of layers "
                   ">= 0 or auto\n");
  r = run_cli(std::string(kOffloadExplore) + " --offload-layers 24");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "jaxpp-sim explore: error: --offload-layers: offloads 24 layers but model "
                   "'gpt3-1.3b' has 24 transformer layers (Megatron offloads fewer than all of "
                   "them)\n");
  r = run_cli(std::string(kOffloadExplore) + " --offload-layers auto --partition even");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--offload-layers: auto searches the offloaded layers over the automatic "
                       "partition's memory model; not with --partition even"),
            std::string::npos)
      << r.err;
  const std::string no_link = write_temp_file(
      "no-link.json", R"({"base": "a100-80g", "name": "no-link", "host_link_gb_per_s": 0})");
  std::string args = kOffloadExplore;
  args.replace(args.find("--cluster a100-80g"), 18, "--cluster " + no_link);
  r = run_cli(args + " --offload-layers 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "jaxpp-sim explore: error: --offload-layers: activation offloading copies "
                   "over the host link, but cluster 'no-link' has no host_link_gb_per_s\n");
}

}  // namespace
}  // namespace jaxpp::testing
