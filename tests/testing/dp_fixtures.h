// Test helpers for the data-parallel collectives (gradient and parameter sharding): a model of
// equal blocks and a cluster whose collective times are easy to compute by hand.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "graph/model.h"

namespace jaxpp {

// `n` equal custom layers of `params` parameters, each pass `flops` FLOPs.
inline ModelSpec equal_blocks_model(int n, double params, double flops) {
  nlohmann::json layers = nlohmann::json::array();
  for (int i = 0; i < n; ++i)
    layers.push_back({{"name", "block" + std::to_string(i)},
                      {"fwd_flops", flops},
                      {"bwd_input_flops", flops},
                      {"bwd_weight_flops", flops},
                      {"params", static_cast<int64_t>(params)},
                      {"output_bytes", 4096},
                      {"stash_bytes", 1024}});
  return model_from_json({{"name", "blocks"}, {"layers_list", layers}}, "test");
}

// One node of 8 devices, collectives at 100 GB/s with no latency: a reduce-scatter or an
// all-gather of v bytes per device over dp 8 takes 7/8 · v / 1e11 s, an all-reduce twice that.
inline ClusterSpec known_link_cluster() {
  ClusterSpec c = cluster_preset("a100-80g");
  c.devices_per_node = 8;
  c.intra_node.bandwidth_bytes_per_s = 100e9;
  c.intra_node.latency_s = 0;
  c.collective_step_latency_s = 0;
  c.allreduce_bus_efficiency = 1.0;
  return c;
}

}  // namespace jaxpp
