#include "simulator/explore_partition.h"

#include <cstdio>

#include "costmodel/memory.h"
#include "graph/error.h"
#include "simulator/partition_search.h"

namespace jaxpp {
namespace {

std::string gib_2f(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

std::string_view partition_mode_name(PartitionMode mode) {
  switch (mode) {
    case PartitionMode::kAuto:
      return "auto";
    case PartitionMode::kEven:
      return "even";
    case PartitionMode::kExplicit:
      return "explicit";
    case PartitionMode::kBalancedTime:
      return "balanced-time";
  }
  return "auto";
}

void evaluate_with_partition(const ExploreRequest& request, std::vector<ConfigRecord>& records,
                             const std::vector<int64_t>& ids, int64_t limit_bytes) {
  for (int64_t id : ids) {
    ConfigRecord& rec = records[id];
    PlanRequest req;
    req.model = request.model;
    req.cluster = request.cluster;
    req.config = rec.config;
    req.partition = request.partition;
    req.max_memory_bytes = limit_bytes;
    Plan plan;
    try {
      plan = build_plan(req);
    } catch (const PartitionDoesNotFit& e) {
      rec.status = ConfigStatus::kMemory;
      rec.peak_memory_bytes = e.least_peak_bytes;
      rec.peak_memory_actor = e.actor;
      rec.reason = e.what();
      continue;
    } catch (const InputError& e) {
      rec.status = ConfigStatus::kFailed;
      rec.reason = e.what();
      continue;
    }
    PlanSimOptions so;
    so.record_trace = false;
    so.check_memory = false;
    so.overlap_grad_reduce = rec.config.overlap_grad_reduce;
    SimulatedPlan sim;
    try {
      sim = simulate_plan(plan, so);
    } catch (const InputError& e) {
      rec.status = ConfigStatus::kFailed;
      rec.reason = std::string("simulation failed: ") + e.what();
      continue;
    }
    rec.peak_memory_bytes = 0;
    for (int r = 0; r < static_cast<int>(sim.result.actors.size()); ++r) {
      if (sim.result.actors[r].peak_memory_bytes > rec.peak_memory_bytes) {
        rec.peak_memory_bytes = sim.result.actors[r].peak_memory_bytes;
        rec.peak_memory_actor = r;
      }
    }
    if (rec.peak_memory_bytes > limit_bytes) {
      const int64_t static_bytes = sim.result.actors[rec.peak_memory_actor].static_bytes;
      rec.status = ConfigStatus::kMemory;
      rec.reason = "needs " + gib_2f(rec.peak_memory_bytes) + " GiB on actor " +
                   std::to_string(rec.peak_memory_actor) + " (static " + gib_2f(static_bytes) +
                   " GiB + stashed activations " + gib_2f(rec.peak_memory_bytes - static_bytes) +
                   " GiB), limit " + gib_2f(limit_bytes) + " GiB";
      continue;
    }
    if (sim.metrics.contains("host_offload_bytes")) {  // activation offloading (memory.h)
      const std::string excess = host_memory_excess(
          sim.metrics["host_offload_bytes"].get<std::vector<int64_t>>(), request.cluster);
      if (!excess.empty()) {
        rec.status = ConfigStatus::kMemory;
        rec.reason = "does not fit in host memory: " + excess;
        continue;
      }
    }
    const nlohmann::json& m = sim.metrics;
    rec.status = ConfigStatus::kSimulated;
    rec.step_time_s = m.at("step_time_s").get<double>();
    rec.bubble_rate = m.at("bubble_rate").get<double>();
    rec.tokens_per_s = m.at("tokens_per_s").get<double>();
    rec.tflops_per_gpu = m.at("tflops_per_gpu").get<double>();
    rec.mfu = m.at("mfu").get<double>();
    rec.fits = true;
  }
}

}  // namespace jaxpp
