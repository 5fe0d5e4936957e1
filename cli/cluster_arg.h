// The --cluster (and calibrate --base) value: a cluster preset name or a path to a cluster JSON
// file, read by costmodel's load_cluster_arg (costmodel/cluster.h), which names what was given
// when it is neither (shared with the Python module).
#pragma once

#include "costmodel/cluster.h"

namespace jaxpp::cli {

using ::jaxpp::load_cluster_arg;

}  // namespace jaxpp::cli
