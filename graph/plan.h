// Plan: everything needed to simulate or run one configuration, as a versioned JSON file.
//
// plan.json = { "format": "jaxpp-sim-plan", "version": 1, "model": <model explicit form>,
//   "cluster": <ClusterSpec JSON, opaque to graph/>, "config": {...}, "partition": {...},
//   "placement": {...}, "program": {...}, "predicted": <metrics JSON, opaque to graph/> }
// `explore` and `simulate --plan` write it; `run` and `validate` read it. A file of another
// format or version is rejected with a clear error.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/program.h"

namespace jaxpp {

inline constexpr int kPlanVersion = 1;

struct ParallelConfig {
  int gpus = 1;
  int pp = 1;
  int tp = 1;
  int dp = 1;
  int virtual_stages = 1;  // v: stages per actor
  int microbatch_size = 1;
  int num_microbatches = 1;
  int global_batch = 1;  // sequences per iteration over all dp replicas
  std::string schedule = "1f1b";
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;
  bool zero1 = false;
  bool operator==(const ParallelConfig&) const = default;
};
nlohmann::json config_to_json(const ParallelConfig& c);
ParallelConfig config_from_json(const nlohmann::json& j, const std::string& where);

struct Plan {
  ModelSpec model;
  nlohmann::json cluster;  // parsed by costmodel/
  ParallelConfig config;
  Partition partition;
  Placement placement;
  Program program;
  nlohmann::json predicted;  // metrics written by the simulator; may be null
};

nlohmann::json plan_to_json(const Plan& plan);
Plan plan_from_json(const nlohmann::json& j, const std::string& source);
Plan load_plan(const std::string& path);
void save_plan(const Plan& plan, const std::string& path);  // atomic write

}  // namespace jaxpp
