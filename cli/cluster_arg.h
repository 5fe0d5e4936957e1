// The --cluster (and calibrate --base) value: a cluster preset name or a path to a cluster JSON
// file, read by costmodel's load_cluster_arg (costmodel/cluster.h), which names what was given
// when it is neither (shared with the Python module).
#pragma once

#include "cli/report_output.h"
#include "costmodel/cluster.h"
#include "costmodel/hetero_cluster.h"

namespace jaxpp::cli {

using ::jaxpp::load_cluster_arg;

// The cluster files a heterogeneous cluster's kinds name ("file") are inputs too: no output may
// replace one ("--plan k1.json: is also the input --cluster kind 'h100'; ...").
inline void add_kind_files(OutputFiles& out, const HeteroCluster& cluster) {
  for (const ClusterKind& k : cluster.kinds)
    if (!k.file.empty()) out.input(k.file, "--cluster kind '" + k.name + "'");
}

}  // namespace jaxpp::cli
