#include "cli/explore_report.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "simulator/explore_partition.h"

namespace jaxpp::cli {

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

void print_explore_rows(std::ostream& out, const ExploreResult& res,
                        const std::vector<int64_t>& ids, bool with_rank) {
  char line[320];
  // Expert-parallel columns only when some configuration uses them (MoE models).
  const bool experts =
      std::any_of(res.records.begin(), res.records.end(),
                  [](const ConfigRecord& r) { return r.config.ep > 1 || r.config.etp > 0; });
  // Activation offloading's column (after recompute) only when some configuration uses it.
  const bool offload = explore_searched_offload(res);
  // The recompute column: 9 wide, or as wide as the longest selective:a+b name when some
  // configuration names recompute modules.
  int recompute_width = 9;
  if (explore_searched_recompute_modules(res))
    for (const ConfigRecord& r : res.records)
      recompute_width =
          std::max(recompute_width, static_cast<int>(recompute_choice_name(r.config).size()));
  std::snprintf(line, sizeof line, "  %4s %4s %3s %3s %4s %2s %2s %5s  %-19s %-*s", "rank", "pp",
                "tp", "cp", "dp", "v", "b", "m", "schedule", recompute_width, "recompute");
  std::string header = line;
  if (offload) header += " offload";
  std::snprintf(line, sizeof line, " %-5s %11s %6s %8s %8s %6s\n", "zero1", "step_ms", "MFU%",
                "mem_GiB", "bubble%", "id");
  header += line;
  if (experts) header.insert(header.find("  dp") + 5, "   ep etp");
  out << header;
  std::map<int64_t, size_t> rank_of;
  for (size_t i = 0; i < res.ranking.size(); ++i) rank_of[res.ranking[i]] = i + 1;
  for (int64_t id : ids) {
    const ConfigRecord& r = res.records[id];
    const ParallelConfig& c = r.config;
    const auto found = rank_of.find(id);
    const std::string rank =
        with_rank && found != rank_of.end() ? std::to_string(found->second) : "-";
    std::snprintf(line, sizeof line, "  %4s %4d %3d %3d %4d %2d %2d %5d  %-19s %-*s",
                  rank.c_str(), c.pp, c.tp, c.cp, c.dp, c.virtual_stages, c.microbatch_size,
                  c.num_microbatches, c.schedule.c_str(), recompute_width,
                  recompute_choice_name(c).c_str());
    std::string row = line;
    if (offload) {
      std::snprintf(line, sizeof line, " %-7s", offload_choice_name(r).c_str());
      row += line;
    }
    std::snprintf(line, sizeof line, " %-5s %11.2f %6.1f %8.2f %8.2f %6lld\n",
                  c.shard_parameters ? "on+sp" : c.shard_gradients ? "on+sg" : c.zero1 ? "on" : "off",
                  r.step_time_s * 1e3, r.mfu * 100,
                  static_cast<double>(r.peak_memory_bytes) / kGiB, r.bubble_rate * 100,
                  static_cast<long long>(r.id));
    row += line;
    if (experts) {
      char ep[32];
      std::snprintf(ep, sizeof ep, " %4d %3d", c.ep, c.expert_tp());
      // After the dp column: "  rank pp tp cp dp" is 4+1+4+1+3+1+3+1+4 characters after 2.
      row.insert(2 + 4 + 1 + 4 + 1 + 3 + 1 + 3 + 1 + 4, ep);
    }
    out << row;
  }
}

void print_explore_table(std::ostream& out, const ExploreRequest& req, const ExploreResult& res,
                         int top, double wall_s) {
  out << "explore " << req.model.name << " on " << req.cluster.name << ": " << req.gpus
      << " GPUs, global batch " << req.global_batch << ", memory limit "
      << fmt("%.4g", static_cast<double>(res.max_memory_bytes) / kGiB) << " GiB\n";
  std::string options;
  const auto add = [&options](bool on, const std::string& name) {
    if (on) options += (options.empty() ? "" : ", ") + name;
  };
  add(req.space.sequence_parallel, "sequence parallelism");
  add(req.space.attention != AttentionKernel::kFlash,
      std::string(to_string(req.space.attention)) + " attention");
  add(req.space.tp_comm_overlap, "tp communication overlap");
  add(req.overlap_grad_reduce, "overlapped gradient reduction");
  add(req.partition != PartitionMode::kAuto,
      std::string(partition_mode_name(req.partition)) + " partition");
  if (!options.empty()) out << "  in every configuration: " << options << "\n";
  std::string pruned;
  for (ConfigStatus s : kAllConfigStatuses) {
    if (s == ConfigStatus::kPending || s == ConfigStatus::kSimulated) continue;
    const int64_t n = res.by_status[static_cast<size_t>(s)];
    if (n > 0)
      pruned += (pruned.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(to_string(s));
  }
  out << "  " << res.records.size() << " configurations, " << res.evaluated << " simulated, "
      << res.feasible << " feasible" << (pruned.empty() ? "" : "; pruned: " + pruned) << "\n";
  out << "  " << fmt("%.2f", wall_s) << " s, "
      << fmt("%.0f", wall_s > 0 ? static_cast<double>(res.evaluated) / wall_s : 0.0)
      << " configurations/s\n\n";
  const std::vector<int64_t> top_ids(
      res.ranking.begin(),
      res.ranking.begin() + std::min<size_t>(res.ranking.size(), static_cast<size_t>(top)));
  out << "Top " << top_ids.size() << " by step time:\n";
  print_explore_rows(out, res, top_ids, /*with_rank=*/true);
  out << "\nPareto front, step time vs peak memory (" << res.pareto.size() << " configurations):\n";
  print_explore_rows(out, res, res.pareto, /*with_rank=*/true);
}

void print_explore_explain(std::ostream& out, const ExploreResult& res) {
  out << "\nPruned configurations (id: configuration: reason):\n";
  for (const ConfigRecord& r : res.records) {
    if (r.simulated() && r.fits) continue;
    const std::string why = r.simulated() ? "simulated peak memory above the limit"
                                          : std::string(to_string(r.status)) + ": " + r.reason;
    out << "  " << r.id << ": " << describe_config(r.config) << ": " << why << "\n";
  }
}

}  // namespace jaxpp::cli
