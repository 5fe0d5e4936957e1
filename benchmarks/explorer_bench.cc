// Explorer throughput: configurations explored per second, and where the time of one
// configuration goes.
//
//   BM_ExploreGpt3_175b_1024   every configuration of GPT-3 175B (preset gpt3-175b) on 1024
//                              A100-80GB with a global batch of 1536 sequences (GPT-3's 3.2M
//                              tokens), default space, 2 worker threads
//   BM_ExploreGpt3_13b_64      GPT-3 13B on 64 GPUs, global batch 512, 2 threads
//   BM_ExploreGpt3_1_3b_8      GPT-3 1.3B on 8 GPUs, global batch 64, 1 and 2 threads
//   BM_ExploreLlama3_8b_32k_64 Llama 3 8B on 32k-token sequences (seq_len >= 16384, so the
//                              default space includes cp 1, 2, 4, 8) on 64 A100s, global batch
//                              64 sequences (2M tokens), sequence parallelism, 2 threads
//   BM_ExploreDeepseekV3_2048  DeepSeek-V3 (preset deepseek-v3, MoE: ep 1..256 searched) on
//                              2048 H100s, global batch 15360 sequences of 4096 tokens, default
//                              space, 2 threads; Arg 1: with --bound-prune (branch and bound,
//                              the first 10 of the ranking and the Pareto front kept exact, as
//                              `explore --bound-prune` with the default --top 10), Arg 0: the
//                              full search
//   BM_Unit*                   the steps of one typical configuration of the 175B space
//                              (pp 16, tp 8, dp 8, b 1, m 192, ZeroBubble, selective
//                              recompute, ZeRO-1): generate the schedule, validate it, lower
//                              it, check the program, simulate it; items = instructions
//
// Counters: configs_per_s (simulated configurations per second of wall time), enumerated,
// evaluated (simulated), feasible, programs (lowered), bound_pruned and sims_stopped (pruned by
// the bound before, or while, simulating), the share of worker time per phase
// (schedule generation, memory pre-check, lowering, simulation) and simulated instructions per
// second of engine time, and process_cpu_s_per_run (CPU time of all threads per exploration).
#include <benchmark/benchmark.h>

#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "costmodel/analytic_cost.h"
#include "costmodel/cluster.h"
#include "costmodel/memory.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "schedules/lower.h"
#include "schedules/validate.h"
#include "simulator/engine.h"
#include "simulator/explorer.h"
#include "simulator/plan_builder.h"

namespace {

using jaxpp::ExploreRequest;
using jaxpp::ExploreResult;

void report(benchmark::State& state, const ExploreResult& res, int64_t runs) {
  const auto& t = res.timings;
  const double worker_s = t.schedule_s + t.memory_s + t.lower_s + t.simulate_s;
  state.counters["configs_per_s"] =
      benchmark::Counter(static_cast<double>(res.evaluated * runs), benchmark::Counter::kIsRate);
  state.counters["enumerated"] = static_cast<double>(res.records.size());
  state.counters["evaluated"] = static_cast<double>(res.evaluated);
  state.counters["feasible"] = static_cast<double>(res.feasible);
  state.counters["programs"] = static_cast<double>(t.programs_lowered);
  state.counters["bound_pruned"] =
      static_cast<double>(res.by_status[static_cast<size_t>(jaxpp::ConfigStatus::kBound)]);
  int64_t stopped = 0;  // bound-pruned after their simulation started
  for (const jaxpp::ConfigRecord& r : res.records)
    if (r.status == jaxpp::ConfigStatus::kBound && r.reason.rfind("takes more than", 0) == 0)
      ++stopped;
  state.counters["sims_stopped"] = static_cast<double>(stopped);
  if (worker_s > 0) {
    state.counters["schedule_share"] = t.schedule_s / worker_s;
    state.counters["memory_share"] = t.memory_s / worker_s;
    state.counters["lower_share"] = t.lower_s / worker_s;
    state.counters["simulate_share"] = t.simulate_s / worker_s;
  }
  if (t.simulate_s > 0) {
    state.counters["engine_instr_per_s"] =
        static_cast<double>(t.simulated_instructions) / t.simulate_s;
  }
}

// Process CPU time (all threads), in seconds: the machine may be shared, so wall time alone
// does not say what the exploration costs.
double process_cpu_s() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

void run(benchmark::State& state, ExploreRequest req) {
  ExploreResult res;
  int64_t runs = 0;
  const double cpu0 = process_cpu_s();
  for (auto _ : state) {
    res = jaxpp::explore(req);
    benchmark::DoNotOptimize(res.ranking.data());
    ++runs;
  }
  if (res.feasible == 0) state.SkipWithError("nothing feasible");
  report(state, res, runs);
  state.counters["process_cpu_s_per_run"] = (process_cpu_s() - cpu0) / static_cast<double>(runs);
}

// The default space of `model` on `gpus` A100s at `global_batch`, explored on state.range(0)
// threads.
ExploreRequest request(const benchmark::State& state, const std::string& model, int gpus,
                       int global_batch) {
  ExploreRequest req;
  req.model = jaxpp::load_model(model);
  req.cluster = jaxpp::load_cluster("a100-80g");
  req.gpus = gpus;
  req.global_batch = global_batch;
  req.threads = static_cast<int>(state.range(0));
  return req;
}

void BM_ExploreGpt3_175b_1024(benchmark::State& state) {
  run(state, request(state, "gpt3-175b", 1024, 1536));
}
BENCHMARK(BM_ExploreGpt3_175b_1024)->Arg(2)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

void BM_ExploreGpt3_13b_64(benchmark::State& state) {
  run(state, request(state, "gpt3-13b", 64, 512));
}
BENCHMARK(BM_ExploreGpt3_13b_64)->Arg(2)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

void BM_ExploreGpt3_1_3b_8(benchmark::State& state) {
  run(state, request(state, "gpt3-1.3b", 8, 64));
}
BENCHMARK(BM_ExploreGpt3_1_3b_8)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ExploreDeepseekV3_2048(benchmark::State& state) {
  ExploreRequest req;
  req.model = jaxpp::load_model("deepseek-v3");
  req.cluster = jaxpp::load_cluster("h100-sxm");
  req.gpus = 2048;
  req.global_batch = 15360;
  req.threads = 2;
  req.bound_prune = state.range(0) != 0;
  run(state, req);
}
BENCHMARK(BM_ExploreDeepseekV3_2048)
    ->Arg(1)
    ->Arg(0)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

void BM_ExploreLlama3_8b_32k_64(benchmark::State& state) {
  ExploreRequest req = request(state, "llama3-8b", 64, 64);
  req.model = jaxpp::model_from_json({{"name", "llama3-8b-32k"},
                                      {"layers", 32},
                                      {"hidden", 4096},
                                      {"heads", 32},
                                      {"kv_heads", 8},
                                      {"ffn_hidden", 14336},
                                      {"seq_len", 32768},
                                      {"vocab", 128256},
                                      {"tied_embeddings", false},
                                      {"mlp", "swiglu"}},
                                     "llama3-8b-32k");
  req.space.sequence_parallel = true;
  run(state, req);
}
BENCHMARK(BM_ExploreLlama3_8b_32k_64)
    ->Arg(2)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

// One configuration of the 175B space, step by step.
struct Unit {
  jaxpp::ModelSpec model = jaxpp::load_model("gpt3-175b");
  jaxpp::ClusterSpec cluster = jaxpp::load_cluster("a100-80g");
  jaxpp::ParallelConfig config;
  jaxpp::Schedule schedule;
  jaxpp::Partition partition;
  jaxpp::LoweringOptions lowering;
  jaxpp::Program program;

  Unit() {
    config.gpus = 1024;
    config.pp = 16;
    config.tp = 8;
    config.dp = 8;
    config.microbatch_size = 1;
    config.global_batch = 1536;
    config.num_microbatches = 192;
    config.schedule = "ZeroBubble";
    config.recompute = jaxpp::Recompute::kSelective;
    config.zero1 = true;
    schedule = generate();
    partition = jaxpp::auto_partition(model, {.num_stages = schedule.num_stages});
    const jaxpp::AnalyticCost cost(model, partition, schedule.placement, config, cluster);
    for (int s = 0; s < schedule.num_stages; ++s) {
      lowering.activation_bytes.push_back(cost.activation_bytes(s));
      lowering.grad_bytes.push_back(cost.grad_bytes(s));
    }
    program = jaxpp::lower(schedule, lowering);
  }
  jaxpp::Schedule generate() const {
    return jaxpp::make_schedule(config.schedule, "", config.pp, 0, config.num_microbatches, false);
  }
};

const Unit& unit() {
  static const Unit u;
  return u;
}

void set_items(benchmark::State& state) {
  state.SetItemsProcessed(state.iterations() * unit().program.num_instructions());
}

void BM_UnitGenerateSchedule(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(unit().generate());
  set_items(state);
}
BENCHMARK(BM_UnitGenerateSchedule)->Unit(benchmark::kMillisecond);

void BM_UnitValidateSchedule(benchmark::State& state) {
  for (auto _ : state) jaxpp::validate_or_throw(unit().schedule);
  set_items(state);
}
BENCHMARK(BM_UnitValidateSchedule)->Unit(benchmark::kMillisecond);

void BM_UnitLower(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(jaxpp::lower(unit().schedule, unit().lowering));
  set_items(state);
}
BENCHMARK(BM_UnitLower)->Unit(benchmark::kMillisecond);

void BM_UnitCheckProgram(benchmark::State& state) {
  for (auto _ : state) jaxpp::check_program(unit().program);
  set_items(state);
}
BENCHMARK(BM_UnitCheckProgram)->Unit(benchmark::kMillisecond);

void BM_UnitSimulate(benchmark::State& state) {
  const Unit& u = unit();
  const jaxpp::AnalyticCost cost(u.model, u.partition, u.schedule.placement, u.config, u.cluster);
  const jaxpp::MemoryModel mem =
      jaxpp::build_memory_model(u.model, u.partition, u.schedule.placement, u.config, u.cluster);
  jaxpp::SimOptions so;
  so.record_trace = false;
  so.static_bytes_per_actor = mem.static_bytes_per_actor();
  so.stash_bytes_per_stage = mem.stash_bytes_per_stage;
  for (auto _ : state) benchmark::DoNotOptimize(jaxpp::simulate(u.program, cost, so));
  set_items(state);
}
BENCHMARK(BM_UnitSimulate)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
