// HeteroCluster: a cluster of several device kinds (for example 8 H100 and 8 A100 GPUs), each
// kind a full ClusterSpec (costmodel/cluster.h) with its GPU count, and the link between kinds.
//
// JSON form (a file given to --cluster; docs/hardware.md "Heterogeneous clusters"):
//   { "name": "mixed",                                        (optional; default: the file name)
//     "kinds": [ {"preset": "h100-sxm", "gpus": 8},
//                {"file": "my-a100.json", "gpus": 8},          (relative to this file's folder)
//                {"cluster": {"base": "a100-80g", "hbm_gib": 40}, "gpus": 8, "name": "a100-40"} ],
//     "inter_kind": {"bandwidth_gb_per_s": 25, "latency_us": 20, "efficiency": 1.0} }
// Each kind gives exactly one of "preset" (a preset name), "file" (a cluster JSON file) or
// "cluster" (a cluster object, with "base" + overrides as a cluster file); "gpus" >= 1 is
// required; "name" (the device kind's name, used by --actor-kinds and plan.json's "meshes")
// defaults to the preset name or the cluster's own name and must be unique. "inter_kind" is
// optional: absent, transfers between actors of different kinds use the slower kind's inter_node
// link (the one of least effective bandwidth; the first on a tie).
// A document is heterogeneous when it has "kinds" (or "inter_kind"); every other cluster file and
// every preset is read by load_cluster as before.
//
// Usage:
//   std::optional<HeteroCluster> h = load_hetero_cluster_arg("mixed.json");  // nullopt: plain
//   int k = h->kind_index("a100-80g");                                       // -1: none
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"

namespace jaxpp {

struct ClusterKind {
  std::string name;  // the device kind's name (unique in the cluster)
  ClusterSpec spec;
  int gpus = 0;
  std::string file;  // the cluster file the kind was read from ("file"); empty otherwise
  bool operator==(const ClusterKind&) const = default;
};

struct HeteroCluster {
  std::string name;
  std::vector<ClusterKind> kinds;  // file order
  LinkSpec inter_kind;             // between actors of different kinds
  int total_gpus() const;
  int kind_index(const std::string& name) const;  // -1 when the cluster has no such kind
  std::string kind_names() const;                 // "h100-sxm, a100-80g"
  bool operator==(const HeteroCluster&) const = default;
};

// True when `doc` is a heterogeneous cluster document (an object with "kinds" or "inter_kind").
bool is_hetero_cluster_doc(const nlohmann::json& doc);

// Parses the JSON form above. `source` names the document in errors; `folder` resolves relative
// "file" paths ("" = the working directory). InputError (one line naming the file and the key):
//   mixed.json: kinds[1]: field 'preset': unknown preset 'h900' (expected one of: ...)
//   mixed.json: kinds[0]: field 'gpus': expected a positive integer, got 0
//   mixed.json: field 'kinds': expected at least one device kind
HeteroCluster hetero_cluster_from_json(const nlohmann::json& doc, const std::string& source,
                                       const std::string& folder = "");
// The full form ("cluster": cluster_to_json of each kind, "inter_kind" explicit), which
// hetero_cluster_from_json reads back to an equal HeteroCluster.
nlohmann::json hetero_cluster_to_json(const HeteroCluster& cluster);

// A --cluster value: nullopt for a preset or a plain cluster file (load_cluster_arg reads those),
// the heterogeneous cluster for a file whose JSON has "kinds".
std::optional<HeteroCluster> load_hetero_cluster_arg(const std::string& name_or_path);

}  // namespace jaxpp
