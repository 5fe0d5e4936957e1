// The explorer with a partition other than the FLOPs-balanced one (`explore --partition even`
// or `--partition balanced-time`): each pending configuration of a unit gets its plan from
// build_plan with that partition mode (balanced-time: the cost-aware search of
// simulator/partition_search.h, under the explorer's memory limit), simulated by simulate_plan
// (record_trace off). A configuration whose partition cannot be built or does not fit becomes
// kMemory ("no partition fits ...", or the peak against the limit) or kFailed (any other
// InputError) with the message as its reason. The metrics are simulate_plan's, so the ranking and
// `build_config_plan` (which builds the same partition) agree.
//
// balanced-time costs up to 4·S + 16 simulations per configuration (the search's bound) instead
// of one: restrict the space (--pp, --schedules, ...) for large models.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "simulator/explorer.h"
#include "simulator/plan_builder.h"

namespace jaxpp {

// "auto", "even", "explicit", "balanced-time".
std::string_view partition_mode_name(PartitionMode mode);

// Evaluates records[ids] (pending, sharing one schedule) with request.partition.
void evaluate_with_partition(const ExploreRequest& request, std::vector<ConfigRecord>& records,
                             const std::vector<int64_t>& ids, int64_t limit_bytes);

}  // namespace jaxpp
