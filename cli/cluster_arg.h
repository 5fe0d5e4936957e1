// The --cluster (and calibrate --base) value: a cluster preset name or a path to a cluster JSON
// file (costmodel/cluster.h, load_cluster).
//
// load_cluster alone reports anything that is not a preset and not a regular file as an unknown
// preset; this front end says what was actually given:
//   h900: unknown cluster: not a preset and no such file (presets: a100-80g, ...)
//   clusters/: is a directory, not a file
//   pipe: is not a regular file (a FIFO)
#pragma once

#include <string>

#include "costmodel/cluster.h"

namespace jaxpp::cli {

ClusterSpec load_cluster_arg(const std::string& name_or_path);

}  // namespace jaxpp::cli
