// Human-readable explorer output shared by `jaxpp-sim explore` and `jaxpp-sim demo`: the ranked
// table, the Pareto front and the list of pruned configurations (docs/explore.md).
// Step times are printed in milliseconds, memory in GiB (2^30 bytes), MFU and bubble in percent.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "simulator/explorer.h"

namespace jaxpp::cli {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// printf-style formatting of one number ("%.2f" -> "3.14").
std::string fmt(const char* format, double value);

// One row per configuration id (rank column from res.ranking when with_rank).
void print_explore_rows(std::ostream& out, const ExploreResult& res,
                        const std::vector<int64_t>& ids, bool with_rank);

// Header (model, cluster, counts, pruning summary, throughput over wall_s), the top `top`
// configurations by step time and the Pareto front of step time vs peak memory.
void print_explore_table(std::ostream& out, const ExploreRequest& req, const ExploreResult& res,
                         int top, double wall_s);

// Every configuration that is not feasible, with its reason.
void print_explore_explain(std::ostream& out, const ExploreResult& res);

}  // namespace jaxpp::cli
