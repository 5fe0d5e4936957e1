#include "simulator/explorer.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "costmodel/analytic_cost.h"
#include "costmodel/memory.h"
#include "graph/error.h"
#include "graph/limits.h"
#include "graph/partition.h"
#include "graph/range_check.h"
#include "graph/task_graph.h"
#include "schedules/assigned.h"
#include "schedules/lower.h"
#include "schedules/registry.h"
#include "simulator/engine.h"
#include "simulator/explore_partition.h"
#include "simulator/parallel_for.h"
#include "simulator/plan_builder.h"

namespace jaxpp {

int64_t max_memory_bytes_from_gib(double g) {
  constexpr double kGiBBytes = 1024.0 * 1024.0 * 1024.0;
  char text[64];
  std::snprintf(text, sizeof text, "%g", g);
  if (!(g > 0)) throw_input_error("--max-memory-gib", std::string("must be > 0, got ") + text);
  const double bytes = g * kGiBBytes;
  if (!(bytes >= 1024.0 * 1024.0 && bytes <= 1024.0 * 1024.0 * kGiBBytes)) {
    throw_input_error(
        "--max-memory-gib",
        std::string("expected 1 MiB to 1 PiB (0.0009765625 to 1048576), got ") + text);
  }
  return static_cast<int64_t>(bytes);
}
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string gib(int64_t bytes, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, static_cast<double>(bytes) / kGiB);
  return buf;
}

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// Sorted, deduplicated, every value >= 1.
std::vector<int> checked_list(std::vector<int> values, const char* flag) {
  for (int v : values) {
    if (v < 1) throw_input_error(flag, "values must be >= 1, got " + std::to_string(v));
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// The stages-per-actor a schedule's placement allows: linear 1, V 2, loop any.
enum class Layout { kLinear, kLoop, kV };

struct ScheduleChoice {
  std::string name;  // canonical
  Layout layout = Layout::kLinear;
};

Layout probe_layout(const ScheduleInfo& info) {
  const Schedule s = info.generate({.num_actors = 2, .num_stages = 0, .num_microbatches = 8});
  switch (s.placement.kind) {
    case PlacementKind::kLinear:
      return Layout::kLinear;
    case PlacementKind::kLoop:
      return Layout::kLoop;
    case PlacementKind::kV:
      return Layout::kV;
    case PlacementKind::kExplicit:
      break;
  }
  assert(false && "registry schedules use linear, loop or V placement");
  return Layout::kLinear;
}

// every_schedule: with no names, every registry schedule (a fixed assignment: those that do not
// fit it are pruned with the reason), else those searched by default.
std::vector<ScheduleChoice> schedule_choices(const std::vector<std::string>& names,
                                             bool every_schedule) {
  std::vector<const ScheduleInfo*> infos;
  if (names.empty()) {
    for (const ScheduleInfo& info : all_schedules())
      if (info.searched_by_default || every_schedule) infos.push_back(&info);
  } else {
    for (const std::string& name : names) {
      const ScheduleInfo* info = nullptr;
      try {
        info = &schedule_or_throw(name);
      } catch (const InputError& e) {
        throw_input_error("--schedules", e.what());
      }
      if (std::find(infos.begin(), infos.end(), info) == infos.end()) infos.push_back(info);
    }
  }
  std::vector<ScheduleChoice> out;
  for (const ScheduleInfo* info : infos) out.push_back({info->name, probe_layout(*info)});
  return out;
}

int64_t limit_bytes(const ExploreRequest& request) {
  return request.max_memory_bytes > 0 ? request.max_memory_bytes : request.cluster.hbm_bytes;
}

// Peak bytes of one device of every actor, as the engine accounts it: static bytes, plus the
// stash of each F from its start, minus the stash of each B or I from its end, along the
// actor's compute order.
std::vector<int64_t> peak_memory_per_actor(const Schedule& schedule, const MemoryModel& mem) {
  std::vector<int64_t> peak;
  peak.reserve(schedule.actors.size());
  for (size_t r = 0; r < schedule.actors.size(); ++r) {
    const int64_t base = mem.actors[r].static_bytes();
    int64_t current = base, best = base;
    for (const ScheduleItem& item : schedule.actors[r]) {
      for (const TaskRef& t : item) {
        if (t.kind == TaskKind::kF) current += mem.stash_bytes_per_stage[t.stage];
      }
      best = std::max(best, current);
      for (const TaskRef& t : item) {
        if (t.kind == TaskKind::kB || t.kind == TaskKind::kI)
          current -= mem.stash_bytes_per_stage[t.stage];
      }
    }
    peak.push_back(best);
  }
  return peak;
}

// peak_memory_per_actor for many memory models of one schedule: per actor, the stashed
// microbatches of each of its stages at every moment the stash can peak (after an item's
// forwards are added), reduced to the count vectors no other one reaches or exceeds in every
// stage. With stash sizes >= 0 the largest stash is at one of them, so the peaks are exactly
// those of the walk, in O(candidates x stages) per model instead of O(items).
class StashPeaks {
 public:
  explicit StashPeaks(const Schedule& schedule) : schedule_(schedule) {
    actors_.resize(schedule.actors.size());
    for (size_t r = 0; r < schedule.actors.size(); ++r) {
      Actor& a = actors_[r];
      std::vector<int> local(schedule.num_stages, -1);  // stage -> index in a.stages
      for (const ScheduleItem& item : schedule.actors[r])
        for (const TaskRef& t : item)
          if (t.kind == TaskKind::kF && local[t.stage] < 0) {
            local[t.stage] = static_cast<int>(a.stages.size());
            a.stages.push_back(t.stage);
          }
      // Counts only grow between two items that free a stash, so only the counts just before
      // each such item (and at the end) can be the largest of a run.
      std::vector<int64_t> count(a.stages.size(), 0), last;
      std::set<std::vector<int64_t>> seen;
      bool grown = false;
      auto keep = [&] {
        if (grown && count != last) {  // a steady state repeats one vector: insert it once
          seen.insert(count);
          last = count;
        }
        grown = false;
      };
      for (const ScheduleItem& item : schedule.actors[r]) {
        bool frees = false;
        for (const TaskRef& t : item) {
          if (t.kind == TaskKind::kF) {
            ++count[local[t.stage]];
            grown = true;
          } else if (t.kind == TaskKind::kB || t.kind == TaskKind::kI) {
            frees = frees || local[t.stage] >= 0;
          }
        }
        if (!frees) continue;
        keep();
        for (const TaskRef& t : item)
          if ((t.kind == TaskKind::kB || t.kind == TaskKind::kI) && local[t.stage] >= 0)
            --count[local[t.stage]];
      }
      keep();
      // Keep the vectors that no other one covers (>= in every stage); a long list is kept
      // whole, which is as exact and only slower per model.
      const std::vector<std::vector<int64_t>> all(seen.begin(), seen.end());
      if (all.size() > 256) {
        a.candidates = all;
        continue;
      }
      for (size_t i = 0; i < all.size(); ++i) {
        bool covered = false;
        for (size_t j = 0; j < all.size() && !covered; ++j) {
          if (i == j) continue;
          bool ge = true;
          for (size_t k = 0; k < all[i].size() && ge; ++k) ge = all[j][k] >= all[i][k];
          covered = ge && (all[j] != all[i]);
        }
        if (!covered) a.candidates.push_back(all[i]);
      }
    }
  }

  std::vector<int64_t> per_actor(const MemoryModel& mem) const {
    for (int64_t bytes : mem.stash_bytes_per_stage)
      if (bytes < 0) return peak_memory_per_actor(schedule_, mem);
    std::vector<int64_t> peak;
    peak.reserve(actors_.size());
    for (size_t r = 0; r < actors_.size(); ++r) {
      const Actor& a = actors_[r];
      int64_t most = 0;
      for (const std::vector<int64_t>& c : a.candidates) {
        int64_t bytes = 0;
        for (size_t k = 0; k < c.size(); ++k) bytes += c[k] * mem.stash_bytes_per_stage[a.stages[k]];
        most = std::max(most, bytes);
      }
      peak.push_back(mem.actors[r].static_bytes() + most);
    }
    return peak;
  }

 private:
  struct Actor {
    std::vector<int> stages;                        // stages with forwards here
    std::vector<std::vector<int64_t>> candidates;  // stashed microbatches per stage
  };
  const Schedule& schedule_;
  std::vector<Actor> actors_;
};

// Activation offloading "auto" (ExploreSpace::offload_layers): the fewest offloaded layers, 0 to
// the model's transformer layers − 1 (Megatron's range), whose worst actor's peak fits `limit`,
// by bisection (the peak does not grow with N: each further offloaded layer leaves the device
// but for the two largest in flight); the most when none fits (its check then says why).
int fewest_offload_layers(const ExploreRequest& request, const Partition& partition,
                          const Placement& placement, const StashPeaks& peaks, int64_t limit,
                          ParallelConfig c) {
  const int most = std::max(0, request.model.num_transformer_layers - 1);
  const auto fits = [&](int n) {
    c.offload_layers = n;
    const std::vector<int64_t> peak = peaks.per_actor(
        build_memory_model(request.model, partition, placement, c, request.cluster));
    return *std::max_element(peak.begin(), peak.end()) <= limit;
  };
  if (fits(0)) return 0;
  if (most == 0 || !fits(most)) return most;
  int lo = 0, hi = most;  // lo does not fit, hi fits
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  return hi;
}

// Activation offloading: "" when the offloaded activations of every actor (the most microbatches
// stashed at once along its compute order, as the device peak counts them) fit the cluster's
// host memory per GPU, else why not (memory.h host_memory_excess).
std::string host_memory_check(const ExploreRequest& request, const StashPeaks& peaks,
                              const MemoryModel& mem) {
  if (request.cluster.host_memory_bytes_per_gpu <= 0) return "";
  MemoryModel host;
  host.actors.resize(mem.actors.size());  // no static bytes on the host
  host.stash_bytes_per_stage = mem.offloaded_bytes_per_stage;
  const std::string excess = host_memory_excess(peaks.per_actor(host), request.cluster);
  return excess.empty() ? "" : "does not fit in host memory: " + excess;
}

// Metrics of simulate_plan (plan_builder.cc), computed the same way.
void fill_metrics(const ExploreRequest& request, const Partition& partition, const SimResult& sim,
                  ConfigRecord& record) {
  const ParallelConfig& c = record.config;
  const double step_s = sim.step_time_s;
  const double batch = c.global_batch;
  const double model_flops = request.model.model_flops_per_sequence() * batch;
  // As simulate_plan: the model's figure, or with recompute_layers the recomputed layers of
  // each stage only.
  const double hw_flops =
      hardware_flops_per_sequence(request.model, partition, c.recompute, c.recompute_layers,
                                  c.recompute_modules) *
      batch;
  const double peak = request.cluster.peak_flops(request.model.dtype);
  const double tokens = batch * request.model.tokens_per_sequence();
  record.step_time_s = step_s;
  record.bubble_rate = sim.bubble_rate;
  record.tokens_per_s = tokens / step_s;
  record.tflops_per_gpu = hw_flops / step_s / c.gpus / 1e12;
  record.mfu = model_flops / step_s / (c.gpus * peak);
  record.peak_memory_bytes = 0;
  for (int r = 0; r < static_cast<int>(sim.actors.size()); ++r) {
    if (sim.actors[r].peak_memory_bytes > record.peak_memory_bytes) {
      record.peak_memory_bytes = sim.actors[r].peak_memory_bytes;
      record.peak_memory_actor = r;
    }
  }
}

struct UnitTimings {
  double schedule_s = 0, memory_s = 0, lower_s = 0, simulate_s = 0;
  int64_t instructions = 0;
  int64_t lowered = 0;
};

// A program lowered once with stage markers as byte sizes (activation_bytes[s] = grad_bytes[s] =
// s + 1); lower() only copies those values into instructions, so real sizes are substituted
// in place for each (tp, b) without lowering again. `each_microbatch`: lowered with one gradient
// reduction per microbatch (gradient sharding, LoweringOptions::reduce_each_microbatch).
class ProgramTemplate {
 public:
  explicit ProgramTemplate(const Schedule& schedule, bool each_microbatch = false,
                           bool gather_params = false) {
    LoweringOptions lo;
    lo.reduce_each_microbatch = each_microbatch;
    lo.gather_params = gather_params;
    for (int s = 0; s < schedule.num_stages; ++s) {
      lo.activation_bytes.push_back(s + 1);
      lo.grad_bytes.push_back(s + 1);
      if (gather_params) lo.param_bytes.push_back(s + 1);
    }
    lo.emit_grad_reduce = true;
    program_ = lower(schedule, lo);
    for (const std::vector<Instruction>& list : program_.actors) {
      for (const Instruction& in : list) marker_.push_back(static_cast<int32_t>(in.bytes) - 1);
    }
  }

  // The program with the byte sizes of `cost` (as build_plan lowers it).
  const Program& with_bytes(const AnalyticCost& cost) {
    const int stages = program_.num_stages;
    std::vector<int64_t> act(stages), grad(stages), param(stages);
    for (int s = 0; s < stages; ++s) {
      act[s] = cost.activation_bytes(s);
      grad[s] = cost.grad_bytes(s);
      param[s] = cost.param_bytes(s);
    }
    size_t i = 0;
    for (std::vector<Instruction>& list : program_.actors) {
      for (Instruction& in : list) {
        const int32_t m = marker_[i++];
        if (in.op == OpKind::kSend || in.op == OpKind::kRecv) in.bytes = act[m];
        if (in.op == OpKind::kAllReduce) in.bytes = grad[m];
        if (in.op == OpKind::kAllGather) in.bytes = param[m];
      }
    }
    return program_;
  }

 private:
  Program program_;
  std::vector<int32_t> marker_;  // per instruction (actors concatenated): stage index or -1
};

// Compute-stream work of a schedule's program, per actor: each distinct compute instruction
// (tasks by kind and stage, and whether it is an overlapped F&B pair) with its count, and the
// optimizer steps; the stage of the latest forward in the actor's first item; and, for every
// stage s whose input-gradient task (B or I) the actor runs, the counts of the instructions up
// to and including the last item holding one. They give a lower bound on the step time, as the
// largest over actors r of
//   head(r) + max(busy(r), max over such s of (prefix(r, s) + chain(s)))
// where busy(r) is the sum of r's compute durations; head(r) the forwards of stages 0..h-1 that
// the first item's forward of stage h waits for; prefix(r, s) the durations up to the end of that
// last item; chain(s) the input-gradient tasks of stages s-1..0 of the same microbatch, which
// wait for it one after another (schedules/replay.h). A task counts in a chain for its time less
// its all-to-all: the least it adds to any group it runs in (costmodel/analytic_cost.h). Without
// overlap_grad_reduce, busy(r) also gains the shortest gradient all-reduce of r's stages: every
// all-reduce waits for r's last compute and every optimizer step (the last compute-stream
// instructions) for its all-reduce. The compute stream runs one instruction at a time, transfers
// take no less than nothing, so no schedule beats the bound.
struct ComputeSignatures {
  struct Entry {
    Instruction rep;
    int64_t count = 0;
  };
  std::vector<std::vector<Entry>> actors;
  std::vector<int> head_stage;  // per actor: latest forward stage in its first item, or -1
  // Per actor: (stage s, counts of actors[r]'s entries up to the last item with B or I of s).
  std::vector<std::vector<std::pair<int, std::vector<int64_t>>>> backward_prefix;
  std::vector<std::vector<int>> stages_of;  // per actor
  int num_stages = 0;

  explicit ComputeSignatures(const Schedule& schedule) : num_stages(schedule.num_stages) {
    actors.resize(schedule.actors.size());
    head_stage.assign(schedule.actors.size(), -1);
    backward_prefix.resize(schedule.actors.size());
    for (size_t r = 0; r < schedule.actors.size(); ++r) {
      std::map<std::string, size_t> index;
      std::map<int, size_t> prefix_of;  // stage -> index in backward_prefix[r]
      for (const ScheduleItem& item : schedule.actors[r]) {
        std::string key;
        bool fwd = false, bwd = false, same = false;
        for (const TaskRef& t : item) {
          key += static_cast<char>(t.kind);
          key.append(reinterpret_cast<const char*>(&t.stage), sizeof t.stage);
          (t.kind == TaskKind::kF ? fwd : bwd) = true;
          for (const TaskRef& u : item)
            if (t.kind == TaskKind::kF && u.kind != TaskKind::kF && u.stage == t.stage &&
                u.microbatch == t.microbatch)
              same = true;
        }
        key += fwd && bwd && !same ? 'p' : 's';
        const auto [it, inserted] = index.emplace(key, actors[r].size());
        if (inserted) {
          Entry e;
          e.rep.op = OpKind::kCompute;
          e.rep.tasks.assign(item.begin(), item.end());
          e.rep.stage = item.front().stage;
          actors[r].push_back(std::move(e));
        }
        ++actors[r][it->second].count;
        if (&item == &schedule.actors[r].front())
          for (const TaskRef& t : item)
            if (t.kind == TaskKind::kF) head_stage[r] = std::max(head_stage[r], t.stage);
        for (const TaskRef& t : item) {
          if (t.kind != TaskKind::kB && t.kind != TaskKind::kI) continue;
          const auto [p, added] = prefix_of.emplace(t.stage, backward_prefix[r].size());
          if (added) backward_prefix[r].emplace_back(t.stage, std::vector<int64_t>());
          std::vector<int64_t>& counts = backward_prefix[r][p->second].second;
          counts.resize(actors[r].size());
          for (size_t e = 0; e < counts.size(); ++e) counts[e] = actors[r][e].count;
        }
      }
    }
    for (int s = 0; s < schedule.num_stages; ++s) {
      Entry e;
      e.rep.op = OpKind::kOptimizer;
      e.rep.stage = s;
      e.count = 1;
      actors[schedule.placement.actor_of(s)].push_back(std::move(e));
    }
    stages_of.resize(schedule.actors.size());
    for (int s = 0; s < schedule.num_stages; ++s)
      stages_of[schedule.placement.actor_of(s)].push_back(s);
  }

  double lower_bound_s(const AnalyticCost& cost, double overhead_s,
                       bool overlap_grad_reduce) const {
    // forward[s], backward[s]: the chains of stages 0..s-1 (forwards; input gradients).
    std::vector<double> forward(num_stages + 1, 0), backward(num_stages + 1, 0);
    auto least = [&](TaskKind kind, int s) {
      return std::max(0.0, cost.task_s(kind, s) - cost.alltoall_task_s(kind, s));
    };
    for (int s = 0; s < num_stages; ++s) {
      forward[s + 1] = forward[s] + least(TaskKind::kF, s);
      backward[s + 1] =
          backward[s] + std::min(least(TaskKind::kB, s), least(TaskKind::kI, s));
    }
    double best = 0;
    std::vector<double> duration;
    for (size_t r = 0; r < actors.size(); ++r) {
      duration.clear();
      double busy = 0;
      for (const Entry& e : actors[r]) {
        duration.push_back(cost.compute_s(static_cast<int>(r), e.rep));
        busy += static_cast<double>(e.count) * duration.back();
      }
      double shortest_reduce = 0;
      if (!overlap_grad_reduce) {
        for (size_t k = 0; k < stages_of[r].size(); ++k) {
          Instruction reduce;
          reduce.op = OpKind::kAllReduce;
          reduce.stage = stages_of[r][k];
          reduce.bytes = cost.grad_bytes(reduce.stage);
          const double t = cost.allreduce_s(static_cast<int>(r), reduce);
          shortest_reduce = k == 0 ? t : std::min(shortest_reduce, t);
        }
      }
      double longest = busy + shortest_reduce;
      for (const auto& [stage, counts] : backward_prefix[r]) {
        double prefix = 0;
        for (size_t e = 0; e < counts.size(); ++e)
          prefix += static_cast<double>(counts[e]) * duration[e];
        longest = std::max(longest, prefix + backward[stage]);
      }
      const double head = head_stage[r] >= 0 ? forward[head_stage[r]] : 0;
      best = std::max(best, head + longest);
    }
    return best + overhead_s;
  }
};

// The schedule of a unit (pp, schedule, v, m), as build_plan generates it (on the placement of a
// fixed assignment when there is one); InputError when the generator rejects (p, S, m).
Schedule unit_schedule(const ExploreRequest& request, const ParallelConfig& base) {
  if (request.assignment)
    return schedule_on_placement(base.schedule, request.assignment->placement,
                                 base.num_microbatches, /*fuse_steady_state=*/false,
                                 request.assignment->spec.where());
  const int requested_stages = base.virtual_stages > 1 ? base.pp * base.virtual_stages : 0;
  return make_schedule(base.schedule, "", base.pp, requested_stages, base.num_microbatches,
                       /*fuse_steady_state=*/false);
}

// The partition of a unit: the fixed assignment's, else the automatic one.
Partition unit_partition(const ExploreRequest& request, const Schedule& schedule) {
  return request.assignment ? request.assignment->partition
                            : auto_partition(request.model, {.num_stages = schedule.num_stages});
}

// The simulator options of one configuration (no trace; memory as the pre-check counts it).
SimOptions config_sim_options(const ExploreRequest& request, const ParallelConfig& config,
                              const MemoryModel& mem) {
  SimOptions so;
  so.record_trace = false;
  so.overlap_grad_reduce = config.overlap_grad_reduce;
  so.iteration_overhead_s = request.cluster.iteration_overhead_s;
  so.static_bytes_per_actor = mem.static_bytes_per_actor();
  so.stash_bytes_per_stage = mem.stash_bytes_per_stage;
  return so;
}

// What evaluate_unit does: everything (kAll), or the memory pre-check and the lower bound of
// every configuration that fits (kBound).
enum class UnitMode { kAll, kBound };

// Schedule check, memory check and simulation of one unit: records sharing pp, schedule, v and
// m (so one schedule and one program), in sub-groups of equal (tp, cp, ep, etp, b).
void evaluate_unit(const ExploreRequest& request, std::vector<ConfigRecord>& records,
                   const std::vector<int64_t>& ids, UnitTimings& t,
                   UnitMode mode = UnitMode::kAll) {
  auto t0 = Clock::now();
  Schedule schedule;
  try {
    schedule = unit_schedule(request, records[ids.front()].config);
  } catch (const InputError& e) {
    for (int64_t id : ids) {
      records[id].status = ConfigStatus::kSchedule;
      records[id].reason = e.what();
    }
    t.schedule_s += seconds_since(t0);
    return;
  }
  t.schedule_s += seconds_since(t0);
  if (request.partition != PartitionMode::kAuto) {  // one plan per configuration
    t0 = Clock::now();
    evaluate_with_partition(request, records, ids, limit_bytes(request));
    t.simulate_s += seconds_since(t0);
    return;
  }

  const Partition partition = unit_partition(request, schedule);
  const int64_t limit = limit_bytes(request);
  // The latter two: gradient sharding, parameter sharding.
  std::optional<ProgramTemplate> program, sharded_program, gathered_program;
  std::optional<ComputeSignatures> signatures;
  const StashPeaks stash_peaks(schedule);
  for (size_t first = 0; first < ids.size();) {
    size_t last = first + 1;
    const ParallelConfig& head = records[ids[first]].config;
    while (last < ids.size() && records[ids[last]].config.tp == head.tp &&
           records[ids[last]].config.cp == head.cp && records[ids[last]].config.ep == head.ep &&
           records[ids[last]].config.etp == head.etp &&
           records[ids[last]].config.microbatch_size == head.microbatch_size) {
      ++last;
    }
    t0 = Clock::now();
    std::vector<int64_t> survivors;
    std::vector<MemoryModel> memories;
    for (size_t k = first; k < last; ++k) {
      ConfigRecord& rec = records[ids[k]];
      if (rec.offload_auto)
        rec.config.offload_layers = fewest_offload_layers(request, partition, schedule.placement,
                                                          stash_peaks, limit, rec.config);
      MemoryModel mem = build_memory_model(request.model, partition, schedule.placement, rec.config,
                                           request.cluster);
      const std::vector<int64_t> peak = stash_peaks.per_actor(mem);
      const auto worst = std::max_element(peak.begin(), peak.end());
      rec.peak_memory_bytes = *worst;
      rec.peak_memory_actor = static_cast<int>(worst - peak.begin());
      if (*worst > limit) {
        const int64_t static_bytes = mem.actors[rec.peak_memory_actor].static_bytes();
        rec.status = ConfigStatus::kMemory;
        rec.reason = "needs " + gib(*worst, "%.2f") + " GiB on actor " +
                     std::to_string(rec.peak_memory_actor) + " (static " +
                     gib(static_bytes, "%.2f") + " GiB + stashed activations " +
                     gib(*worst - static_bytes, "%.2f") + " GiB), limit " + gib(limit, "%.2f") +
                     " GiB";
        continue;
      }
      if (rec.config.offload_layers > 0) {
        std::string host = host_memory_check(request, stash_peaks, mem);
        if (!host.empty()) {
          rec.status = ConfigStatus::kMemory;
          rec.reason = std::move(host);
          continue;
        }
      }
      survivors.push_back(ids[k]);
      memories.push_back(std::move(mem));
    }
    t.memory_s += seconds_since(t0);
    first = last;
    if (survivors.empty()) continue;
    if (mode == UnitMode::kBound) {
      t0 = Clock::now();
      if (!signatures) signatures.emplace(schedule);
      for (int64_t id : survivors) {
        ConfigRecord& rec = records[id];
        const AnalyticCost cost(request.model, partition, schedule.placement, rec.config,
                                request.cluster);
        // (An actor with parameter all-gathers always overlaps its reductions.)
        rec.lower_bound_s = signatures->lower_bound_s(
            cost, request.cluster.iteration_overhead_s,
            rec.config.overlap_grad_reduce || rec.config.shard_parameters);
      }
      t.memory_s += seconds_since(t0);
      continue;
    }

    // The group's program (bytes are those of its tp, cp, ep, etp and b), with and without
    // gradient sharding, each lowered once per unit and filled once per group.
    const Program* plain = nullptr;
    const Program* sharded = nullptr;
    const Program* gathered = nullptr;
    const auto program_of = [&](const ParallelConfig& c) -> const Program& {
      const Program*& prog = c.shard_parameters ? gathered : c.shard_gradients ? sharded : plain;
      if (prog) return *prog;
      const auto l0 = Clock::now();
      std::optional<ProgramTemplate>& tmpl = c.shard_parameters  ? gathered_program
                                             : c.shard_gradients ? sharded_program
                                                                 : program;
      if (!tmpl) {
        tmpl.emplace(schedule, c.shard_gradients, c.shard_parameters);
        ++t.lowered;
      }
      prog = &tmpl->with_bytes(
          AnalyticCost(request.model, partition, schedule.placement, c, request.cluster));
      t.lower_s += seconds_since(l0);
      return *prog;
    };
    for (int64_t id : survivors) program_of(records[id].config);

    t0 = Clock::now();
    for (size_t i = 0; i < survivors.size(); ++i) {
      ConfigRecord& rec = records[survivors[i]];
      const Program& prog = program_of(rec.config);
      const AnalyticCost cost(request.model, partition, schedule.placement, rec.config,
                              request.cluster);
      const SimOptions so = config_sim_options(request, rec.config, memories[i]);
      try {
        const SimResult sim = simulate(prog, cost, so);
        t.instructions += sim.num_instructions;
        rec.status = ConfigStatus::kSimulated;
        fill_metrics(request, partition, sim, rec);
        rec.fits = rec.peak_memory_bytes <= limit;
      } catch (const InputError& e) {
        rec.status = ConfigStatus::kFailed;
        rec.reason = std::string("simulation failed: ") + e.what();
      }
    }
    t.simulate_s += seconds_since(t0);
  }
}

// Which twins the space holds: a configuration is pruned as a duplicate or as dominated only when
// the twin that stands for it is enumerated too (`--virtual 2` on one GPU holds no v = 1 twin,
// `--zero1 on` no ZeRO-1-off twin).
struct SpaceTwins {
  bool zero1_on = false;   // ZeRO-1 without gradient or parameter sharding
  bool zero1_off = false;  // ZeRO-1 off
  bool v1 = false;         // a schedule with one stage per actor
};

// Resolves dp and m of a configuration and applies the enumeration's pruning rules in order
// (divisibility, then duplicates and dominated twins); kPending when none applies.
// `fixed_stages` > 0: the stages of a fixed assignment (not pp·v).
void classify(const ModelSpec& model, const SpaceTwins& twins, ConfigRecord& rec,
              int fixed_stages) {
  ParallelConfig& c = rec.config;
  const int64_t shards = static_cast<int64_t>(c.pp) * c.tp * c.cp;
  rec.status = ConfigStatus::kDivisibility;
  if (c.gpus % shards != 0) {
    c.dp = 0;
    c.num_microbatches = 0;
    rec.reason = std::string(c.cp > 1 ? "pp·tp·cp" : "pp·tp") + " = " + std::to_string(shards) +
                 " does not divide " + std::to_string(c.gpus) + " GPUs";
    return;
  }
  c.dp = static_cast<int>(c.gpus / shards);
  const int64_t per_step = static_cast<int64_t>(c.dp) * c.microbatch_size;
  c.num_microbatches = static_cast<int>(c.global_batch / per_step);
  const int stages = fixed_stages > 0 ? fixed_stages : c.pp * c.virtual_stages;
  if (c.global_batch % per_step != 0) {
    rec.reason = "global batch " + std::to_string(c.global_batch) +
                 " is not divisible by dp·b = " + std::to_string(per_step);
  } else if (std::string why = tp_heads_error(model, c.tp); !why.empty()) {
    rec.reason = std::move(why);
  } else if (c.cp > 1 && (model.seq_len <= 0 || model.seq_len % (2 * c.cp) != 0)) {
    rec.reason = "cp " + std::to_string(c.cp) + " does not split seq_len " +
                 std::to_string(model.seq_len) + " into 2·cp = " + std::to_string(2 * c.cp) +
                 " equal chunks (ring attention's load balancing)";
  } else if (c.cp > 1 && c.attention == AttentionKernel::kUnfused) {
    rec.reason = "cp " + std::to_string(c.cp) +
                 " needs flash attention (ring attention exchanges K/V blocks), not " +
                 std::string(to_string(c.attention));
  } else if (model.moe.enabled() && model.moe.experts % c.ep != 0) {
    rec.reason = "ep " + std::to_string(c.ep) + " does not divide the " +
                 std::to_string(model.moe.experts) + " routed experts";
  } else if (model.moe.enabled() && (static_cast<int64_t>(c.tp) * c.cp * c.dp) %
                                            (static_cast<int64_t>(c.ep) * c.expert_tp()) !=
                                        0) {
    rec.reason = "ep·etp = " + std::to_string(c.ep) + "·" + std::to_string(c.expert_tp()) +
                 " does not divide the tp·cp·dp = " +
                 std::to_string(static_cast<int64_t>(c.tp) * c.cp * c.dp) + " devices of a stage";
  } else if (model.moe.enabled() && model.moe.expert_ffn_hidden % c.expert_tp() != 0) {
    rec.reason = "etp " + std::to_string(c.expert_tp()) + " does not divide the expert FFN width";
  } else if (stages > model.num_layers()) {
    rec.reason = std::to_string(stages) + " stages (pp·v) exceed the model's " +
                 std::to_string(model.num_layers()) + " layers";
  } else if (c.pp == 1 && c.virtual_stages > 1 && twins.v1) {
    rec.status = ConfigStatus::kDuplicate;
    rec.reason = "v > 1 on a single actor only splits its layers (as v = 1)";
  } else if (c.zero1 && c.dp == 1 && twins.zero1_off) {
    rec.status = ConfigStatus::kDuplicate;
    rec.reason = "ZeRO-1 with dp = 1 is the same as without";
  } else if (!c.zero1 && c.dp > 1 && twins.zero1_on) {
    rec.status = ConfigStatus::kDominated;
    rec.reason = "ZeRO-1 on (dp = " + std::to_string(c.dp) +
                 ") runs the same program with a shorter optimizer step in less memory";
  } else {
    rec.status = ConfigStatus::kPending;
  }
}

// Work estimate of a unit for load balancing: tasks per simulation times configurations.
int64_t unit_cost(const std::vector<ConfigRecord>& records, const std::vector<int64_t>& ids) {
  const ParallelConfig& c = records[ids.front()].config;
  return static_cast<int64_t>(c.pp) * c.virtual_stages * c.num_microbatches *
         static_cast<int64_t>(ids.size());
}

nlohmann::json entry_json(const ConfigRecord& r) {
  nlohmann::json j = {{"id", r.id},
                      {"config", config_to_json(r.config)},
                      {"step_time_s", r.step_time_s},
                      {"bubble_rate", r.bubble_rate},
                      {"peak_memory_bytes", r.peak_memory_bytes},
                      {"peak_memory_actor", r.peak_memory_actor},
                      {"tokens_per_s", r.tokens_per_s},
                      {"tflops_per_gpu", r.tflops_per_gpu},
                      {"mfu", r.mfu},
                      {"fits", r.fits}};
  if (r.offload_auto) j["offload_auto"] = true;  // config.offload_layers chosen by "auto"
  return j;
}

// Simulated ids in output order: fitting ones by rank, then the others by id.
std::vector<int64_t> output_order(const ExploreResult& result) {
  std::vector<int64_t> order = result.ranking;
  for (const ConfigRecord& r : result.records) {
    if (r.simulated() && !r.fits) order.push_back(r.id);
  }
  return order;
}

}  // namespace

std::string_view to_string(ConfigStatus s) {
  switch (s) {
    case ConfigStatus::kPending:
      return "pending";
    case ConfigStatus::kSimulated:
      return "simulated";
    case ConfigStatus::kDivisibility:
      return "divisibility";
    case ConfigStatus::kDuplicate:
      return "duplicate";
    case ConfigStatus::kDominated:
      return "dominated";
    case ConfigStatus::kSchedule:
      return "schedule";
    case ConfigStatus::kMemory:
      return "memory";
    case ConfigStatus::kFailed:
      return "failed";
    case ConfigStatus::kBound:
      return "bound";
  }
  return "?";
}

ConfigStatus parse_config_status(std::string_view s, const std::string& where) {
  for (ConfigStatus c : kAllConfigStatuses) {
    if (to_string(c) == s) return c;
  }
  throw_input_error(where, "unknown configuration status '" + std::string(s) + "'");
}

nlohmann::json config_record_to_json(const ConfigRecord& r) {
  nlohmann::json j = entry_json(r);
  j["status"] = std::string(to_string(r.status));
  j["reason"] = r.reason;
  return j;
}

ConfigRecord config_record_from_json(const nlohmann::json& j, const std::string& where) {
  ConfigRecord r;
  try {
    r.id = j.at("id").get<int64_t>();
    r.config = config_from_json(j.at("config"), where + ": field 'config'");
    r.status = parse_config_status(j.at("status").get<std::string>(), where + ": field 'status'");
    r.reason = j.at("reason").get<std::string>();
    r.peak_memory_bytes = j.at("peak_memory_bytes").get<int64_t>();
    r.peak_memory_actor = j.at("peak_memory_actor").get<int>();
    r.step_time_s = j.at("step_time_s").get<double>();
    r.bubble_rate = j.at("bubble_rate").get<double>();
    r.tokens_per_s = j.at("tokens_per_s").get<double>();
    r.tflops_per_gpu = j.at("tflops_per_gpu").get<double>();
    r.mfu = j.at("mfu").get<double>();
    r.fits = j.at("fits").get<bool>();
    r.offload_auto = j.value("offload_auto", false);
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(where, std::string("malformed configuration record: ") + e.what());
  }
  return r;
}

void add_recompute_choice(const std::string& item, ExploreSpace& space, const std::string& where) {
  const size_t colon = item.find(':');
  if (colon == std::string::npos) {
    space.recompute.push_back(parse_recompute(item, where));
    return;
  }
  const std::string policy = item.substr(0, colon);
  const std::string count = item.substr(colon + 1);
  const bool digits = !count.empty() && std::isdigit(static_cast<unsigned char>(count[0]));
  if (policy == "selective" && !digits) {
    // Megatron-Core's recompute modules, joined by '+' (the list itself is comma-separated).
    std::string names = count;
    std::replace(names.begin(), names.end(), '+', ',');
    if (names.find_first_of(" ") != std::string::npos || count.empty() || count.front() == '+' ||
        count.back() == '+' || count.find("++") != std::string::npos)
      throw_input_error(where, "'" + item + "': expected selective:a+b with recompute module "
                                            "names joined by '+' (core_attn, layernorm, "
                                            "mla_up_proj, moe_act)");
    const uint32_t modules = parse_recompute_modules(names, where + ": '" + item + "'");
    if (modules == 0) {  // core_attn alone: plain selective
      space.recompute.push_back(Recompute::kSelective);
    } else {
      space.recompute_modules.push_back(modules);
    }
    return;
  }
  if (policy != "full")
    throw_input_error(where, "'" + item + "': only full takes a layer count (full:N, the first N "
                                          "transformer layers of each stage recomputed; "
                                          "selective takes recompute modules, selective:a+b)");
  int n = -1;
  try {
    size_t pos = 0;
    const long v = std::stol(count, &pos);
    if (pos == count.size() && v >= 0 && v <= (1 << 20)) n = static_cast<int>(v);
  } catch (const std::exception&) {
  }
  if (n < 0 || count.empty() || !std::isdigit(static_cast<unsigned char>(count[0])))
    throw_input_error(where, "'" + item + "': expected full:N with a number of layers N >= 0");
  space.recompute_layers.push_back(n);
}

std::string recompute_choice_name(const ParallelConfig& c) {
  std::string name(to_string(c.recompute));
  if (c.recompute == Recompute::kFull && c.recompute_layers >= 0)
    name += ":" + std::to_string(c.recompute_layers);
  if (c.recompute == Recompute::kSelective && c.recompute_modules != 0)
    name += ":" + recompute_modules_to_string(c.recompute_modules, "+");
  return name;
}

bool explore_searched_offload(const ExploreResult& result) {
  return std::any_of(result.records.begin(), result.records.end(), [](const ConfigRecord& r) {
    return r.offload_auto || r.config.offload_layers > 0;
  });
}

bool explore_searched_recompute_modules(const ExploreResult& result) {
  return std::any_of(result.records.begin(), result.records.end(), [](const ConfigRecord& r) {
    return r.config.recompute == Recompute::kSelective && r.config.recompute_modules != 0;
  });
}

std::string offload_choice_name(const ConfigRecord& r) {
  const std::string n = std::to_string(r.config.offload_layers);
  return r.offload_auto ? "auto:" + n : n;
}

void add_offload_choice(const std::string& item, ExploreSpace& space, const std::string& where) {
  if (item == "auto") {
    space.offload_layers.push_back(kOffloadAuto);
    return;
  }
  int n = -1;
  try {
    size_t pos = 0;
    const long v = std::stol(item, &pos);
    if (pos == item.size() && v >= 0 && v <= (1 << 20)) n = static_cast<int>(v);
  } catch (const std::exception&) {
  }
  if (n < 0 || item.empty() || !std::isdigit(static_cast<unsigned char>(item[0])))
    throw_input_error(where, "'" + item + "': expected a number of layers >= 0 or auto");
  space.offload_layers.push_back(n);
}

std::string describe_config(const ParallelConfig& c) {
  std::string s = "pp " + std::to_string(c.pp) + ", tp " + std::to_string(c.tp);
  if (c.cp > 1) s += ", cp " + std::to_string(c.cp);
  if (c.ep > 1) s += ", ep " + std::to_string(c.ep);
  if (c.etp > 0) s += ", etp " + std::to_string(c.etp);
  s += ", dp " + std::to_string(c.dp) + ", b " + std::to_string(c.microbatch_size) + ", m " +
       std::to_string(c.num_microbatches) + ", " + c.schedule + ", v " +
       std::to_string(c.virtual_stages) + ", recompute " + recompute_choice_name(c);
  if (c.offload_layers > 0) s += ", offload " + std::to_string(c.offload_layers);
  if (c.zero1) s += ", zero1";
  if (c.shard_parameters)
    s += ", shard-params";
  else if (c.shard_gradients)
    s += ", shard-grads";
  if (c.sequence_parallel) s += ", sp";
  if (c.attention != AttentionKernel::kFlash)
    s += ", " + std::string(to_string(c.attention)) + " attention";
  if (c.tp_comm_overlap) s += ", tp-comm-overlap";
  if (c.overlap_grad_reduce) s += ", overlap-grad-reduce";
  if (c.grad_dtype != GradDtype::kCluster) s += ", grad " + std::string(to_string(c.grad_dtype));
  if (c.moe_dispatcher != MoeDispatcher::kAllToAll)
    s += ", " + std::string(to_string(c.moe_dispatcher));
  if (c.moe_routing != MoeRouting::kRandom)
    s += ", " + std::string(to_string(c.moe_routing)) + " routing";
  if (c.optimizer_state != OptimizerState::kCluster)
    s += ", optimizer " + std::string(to_string(c.optimizer_state));
  return s;
}

Assignment explore_assignment(const AssignmentSpec& spec, const ModelSpec& model,
                              const std::vector<int>& pp, bool virtual_given, bool synthesize) {
  if (virtual_given)
    throw_input_error("--assign and --virtual", "the assignment gives the stages per actor");
  if (synthesize)
    throw_input_error("--assign and --synthesize",
                      "synthesized schedules use their own partition, not the assignment's");
  if (pp.size() != 1)
    throw_input_error("--pp", "with --assign: one number of actors (the assignment's actors "
                              "0 .. pp-1), e.g. --pp 4");
  return resolve_assignment(spec, model, pp.front());
}

std::vector<ConfigRecord> enumerate_configs(const ExploreRequest& request) {
  check_int_in(request.gpus, "--gpus", 1, kMaxGpus, kGpuCountWhat);
  if (request.global_batch < 1) {
    throw_input_error("--global-batch",
                      "must be >= 1, got " + std::to_string(request.global_batch));
  }
  if (request.max_memory_bytes < 0) throw_input_error("--max-memory-gib", "must be > 0");
  if (limit_bytes(request) <= 0) {
    throw_input_error("--max-memory-gib", "the cluster has no memory size; give a limit");
  }
  request.cluster.peak_flops(request.model.dtype);  // InputError if the cluster lacks the dtype
  if (request.partition == PartitionMode::kExplicit)
    throw_input_error("--partition",
                      "explore takes auto, even or balanced-time (the stages differ "
                      "between configurations)");
  if (request.partition != PartitionMode::kAuto && request.bound_prune)
    throw_input_error("--bound-prune",
                      "bounds the automatic partition only; not with --partition " +
                          std::string(partition_mode_name(request.partition)));
  if (request.partition != PartitionMode::kAuto && request.assignment)
    throw_input_error("--partition", "the assignment (--assign) gives the partition; not with "
                                     "--partition " +
                                         std::string(partition_mode_name(request.partition)));
  if (request.shard_count < 1 || request.shard_index < 0 ||
      request.shard_index >= request.shard_count) {
    throw_input_error("explore", "shard " + std::to_string(request.shard_index) + " of " +
                                     std::to_string(request.shard_count));
  }
  const ExploreSpace& space = request.space;
  const ModelSpec& model = request.model;
  if (space.tp_comm_overlap && !space.sequence_parallel) {
    throw_input_error("--tp-comm-overlap",
                      "needs --sequence-parallel (as Megatron-LM's --tp-comm-overlap)");
  }
  // A fixed assignment fixes pp (its actors) and the stages.
  const std::vector<int> pps =
      request.assignment ? std::vector<int>{request.assignment->num_actors}
      : space.pp.empty() ? divisors(request.gpus)
                         : checked_list(space.pp, "--pp");
  const int assigned_v =
      request.assignment ? max_stages_per_actor(request.assignment->placement) : 0;
  std::vector<int> tps;
  if (space.tp.empty()) {
    for (int t = 1; t <= std::max(1, request.cluster.devices_per_node); t *= 2) tps.push_back(t);
  } else {
    tps = checked_list(space.tp, "--tp");
  }
  std::vector<int> cps;
  if (!space.cp.empty()) {
    cps = checked_list(space.cp, "--cp");
  } else if (model.seq_len < kLongSequence) {
    cps = {1};
  } else {
    for (int c = 1; c <= std::max(1, request.cluster.devices_per_node); c *= 2) cps.push_back(c);
  }
  const std::vector<int> bs = space.microbatch_sizes.empty()
                                  ? std::vector<int>{1, 2, 4, 8}
                                  : checked_list(space.microbatch_sizes, "--microbatch-sizes");
  const std::vector<int> loop_vs = space.virtual_stages.empty()
                                       ? std::vector<int>{2, 4, 8}
                                       : checked_list(space.virtual_stages, "--virtual");
  const std::vector<ScheduleChoice> schedules =
      schedule_choices(space.schedules, /*every_schedule=*/request.assignment.has_value());
  std::vector<Recompute> recomputes = space.recompute;
  if (recomputes.empty())
    recomputes.assign(kDefaultExploreRecompute.begin(), kDefaultExploreRecompute.end());
  // (policy, recompute_layers, recompute_modules): -1 = every layer, 0 = no module list;
  // full:N entries sort after full, selective:a+b after selective (by their module bits).
  std::vector<std::tuple<Recompute, int, uint32_t>> recompute_choices;
  for (Recompute rc : recomputes) recompute_choices.emplace_back(rc, -1, 0u);
  for (int n : space.recompute_layers) recompute_choices.emplace_back(Recompute::kFull, n, 0u);
  for (uint32_t mods : space.recompute_modules) {
    // The model's rules (a module no layer has, FP8 delayed scaling), one line as simulate's.
    ParallelConfig c;
    c.recompute = Recompute::kSelective;
    c.recompute_modules = mods;
    check_recompute_modules(c, "--recompute: 'selective:" +
                                   recompute_modules_to_string(mods, "+") + "'",
                            &request.model);
    recompute_choices.emplace_back(Recompute::kSelective, -1, mods);
  }
  std::sort(recompute_choices.begin(), recompute_choices.end());
  recompute_choices.erase(std::unique(recompute_choices.begin(), recompute_choices.end()),
                          recompute_choices.end());
  if (!space.recompute_layers.empty() && request.partition == PartitionMode::kBalancedTime)
    throw_input_error("--recompute",
                      "full:" + std::to_string(space.recompute_layers.front()) +
                          " with --partition balanced-time: balanced-time prices each layer on "
                          "its own and cannot place the first N layers of each stage (use "
                          "--partition auto or even)");
  // Activation offloading choices, N ascending then auto; only pp-1, recompute-none
  // configurations take them (Megatron's rules), the others keep 0.
  std::vector<int> offloads = space.offload_layers;
  if (offloads.empty()) offloads = {0};
  std::sort(offloads.begin(), offloads.end(), [](int a, int b) {
    return (a == kOffloadAuto ? INT_MAX : a) < (b == kOffloadAuto ? INT_MAX : b);
  });
  offloads.erase(std::unique(offloads.begin(), offloads.end()), offloads.end());
  for (int n : offloads) {
    if (n == 0) continue;
    if (n > 0) {
      ParallelConfig one;  // pp 1, recompute none: only the layer count can break a rule
      one.offload_layers = n;
      check_offload_layers(model, one, "--offload-layers");
    }
    if (!(request.cluster.host_link_bandwidth_bytes_per_s > 0))
      throw_input_error("--offload-layers", "activation offloading copies over the host link, "
                                            "but cluster '" + request.cluster.name +
                                                "' has no host_link_gb_per_s");
    if (n == kOffloadAuto && request.partition != PartitionMode::kAuto)
      throw_input_error("--offload-layers",
                        "auto searches the offloaded layers over the automatic partition's "
                        "memory model; not with --partition " +
                            std::string(partition_mode_name(request.partition)) +
                            " (give the numbers of layers)");
  }
  const std::vector<int> no_offload = {0};
  std::vector<bool> zero1s = space.zero1;
  if (zero1s.empty()) zero1s = {false, true};
  std::sort(zero1s.begin(), zero1s.end());
  zero1s.erase(std::unique(zero1s.begin(), zero1s.end()), zero1s.end());
  std::vector<bool> shards = space.shard_gradients;
  if (shards.empty()) shards = {false};
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  if (shards.back() && !zero1s.back())
    throw_input_error("--shard-grads",
                      "gradient sharding (ZeRO-2) needs the distributed optimizer (--zero1 on or "
                      "both, not off)");
  std::vector<bool> param_shards = space.shard_parameters;
  if (param_shards.empty()) param_shards = {false};
  std::sort(param_shards.begin(), param_shards.end());
  param_shards.erase(std::unique(param_shards.begin(), param_shards.end()), param_shards.end());
  if (param_shards.back() && !zero1s.back())
    throw_input_error("--shard-params",
                      "parameter sharding (ZeRO-3 / FSDP) needs the distributed optimizer "
                      "(--zero1 on or both, not off)");
  // (zero1, shard_gradients, shard_parameters) in enumeration order: zero1 off never shards;
  // parameter sharding implies gradient sharding (a mode listed twice is kept once).
  std::vector<std::tuple<bool, bool, bool>> zero_modes;
  for (bool z : zero1s) {
    if (!z) {
      zero_modes.emplace_back(false, false, false);
      continue;
    }
    for (bool sg : shards)
      for (bool sp : param_shards) {
        const std::tuple<bool, bool, bool> mode(true, sg || sp, sp);
        if (std::find(zero_modes.begin(), zero_modes.end(), mode) == zero_modes.end())
          zero_modes.push_back(mode);
      }
  }
  // ZeRO-1 off is dominated by a ZeRO-1 on twin that runs the same program: one without gradient
  // or parameter sharding (which add a reduce-scatter per microbatch, and all-gathers).
  SpaceTwins twins;
  twins.zero1_on = zero1s.back() && !shards.front() && !param_shards.front();
  twins.zero1_off = !zero1s.front();
  // Expert parallelism (MoE models only): ep over the powers of two dividing the routed experts
  // (up to the GPUs), etp = tp (0) unless --etp lists values.
  std::vector<int> eps = {1};
  if (!space.ep.empty()) {
    eps = checked_list(space.ep, "--ep");
  } else if (model.moe.enabled()) {
    for (int e = 2; e <= model.moe.experts && e <= request.gpus; e *= 2)
      if (model.moe.experts % e == 0) eps.push_back(e);
  }
  if (!model.moe.enabled() && (eps != std::vector<int>{1} || !space.etp.empty()))
    throw_input_error(space.etp.empty() ? "--ep" : "--etp",
                      model.name + " has no routed experts (a dense model)");
  if (!model.moe.enabled()) {
    ParallelConfig dispatch;
    dispatch.moe_dispatcher = request.moe_dispatcher;
    dispatch.moe_routing = request.moe_routing;
    check_moe_config(model, dispatch, "explore", /*flags=*/true);
  }
  const std::vector<int> etps =
      space.etp.empty() ? std::vector<int>{0} : checked_list(space.etp, "--etp");
  std::vector<std::pair<int, int>> experts;  // (ep, etp), etp 0 = tp
  for (int ep : eps)
    for (int etp : etps) experts.emplace_back(ep, etp);

  auto stage_counts = [&](Layout layout) -> std::vector<int> {
    if (request.assignment) return {assigned_v};
    switch (layout) {
      case Layout::kLinear:
        return {1};
      case Layout::kV:
        return {2};
      case Layout::kLoop:
        return loop_vs;
    }
    return {};
  };
  auto v_allowed = [&](int v) {
    return request.assignment || space.virtual_stages.empty() ||
           std::find(loop_vs.begin(), loop_vs.end(), v) != loop_vs.end();
  };

  for (const ScheduleChoice& sc : schedules)
    for (int v : stage_counts(sc.layout)) twins.v1 = twins.v1 || (v == 1 && v_allowed(v));

  std::vector<ConfigRecord> records;
  for (int pp : pps) {
    for (int tp : tps) {
      for (int cp : cps) {
        for (int b : bs) {
          for (const ScheduleChoice& sc : schedules) {
            for (int v : stage_counts(sc.layout)) {
              if (!v_allowed(v)) continue;
              for (const auto& [rc, rc_layers, rc_modules] : recompute_choices) {
                const bool offloadable = pp == 1 && rc == Recompute::kNone && rc_layers < 0;
                for (int off : offloadable ? offloads : no_offload) {
                  for (const auto& [z, sg, sp] : zero_modes) {
                    for (const auto& [ep, etp] : experts) {
                      ConfigRecord rec;
                      rec.id = static_cast<int64_t>(records.size());
                      ParallelConfig& c = rec.config;
                      c.gpus = request.gpus;
                      c.pp = pp;
                      c.tp = tp;
                      c.cp = cp;
                      c.virtual_stages = v;
                      c.microbatch_size = b;
                      c.global_batch = request.global_batch;
                      c.schedule = sc.name;
                      c.recompute = rc;
                      c.recompute_layers = rc_layers;
                      c.recompute_modules = rc_modules;
                      c.offload_layers = off == kOffloadAuto ? 0 : off;
                      rec.offload_auto = off == kOffloadAuto;
                      c.sequence_parallel = space.sequence_parallel;
                      c.zero1 = z;
                      c.attention = space.attention;
                      c.tp_comm_overlap = space.tp_comm_overlap && space.sequence_parallel && tp > 1;
                      c.overlap_grad_reduce = request.overlap_grad_reduce;
                      c.shard_gradients = sg;
                      c.shard_parameters = sp;
                      c.grad_dtype = request.grad_dtype;
                      c.moe_dispatcher = request.moe_dispatcher;
                      c.moe_routing = request.moe_routing;
                      c.optimizer_state = request.optimizer_state;
                      c.ep = ep;
                      c.etp = etp == tp ? 0 : etp;
                      classify(model, twins, rec,
                               request.assignment
                                   ? request.assignment->partition.num_stages()
                                   : 0);
                      records.push_back(std::move(rec));
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return records;
}

std::vector<std::vector<int64_t>> unit_configs(const std::vector<ConfigRecord>& records) {
  using Key = std::tuple<int, std::string, int, int>;  // pp, schedule, v, m
  std::map<Key, size_t> index;
  std::vector<std::vector<int64_t>> units;
  for (const ConfigRecord& r : records) {
    if (r.status != ConfigStatus::kPending) continue;
    const ParallelConfig& c = r.config;
    const Key key{c.pp, c.schedule, c.virtual_stages, c.num_microbatches};
    const auto [it, inserted] = index.emplace(key, units.size());
    if (inserted) units.emplace_back();
    units[it->second].push_back(r.id);
  }
  return units;
}

std::vector<int> assign_units(const std::vector<ConfigRecord>& records,
                              const std::vector<std::vector<int64_t>>& units, int shard_count) {
  std::vector<size_t> order(units.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> cost(units.size());
  for (size_t g = 0; g < units.size(); ++g) cost[g] = unit_cost(records, units[g]);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<int64_t> load(std::max(1, shard_count), 0);
  std::vector<int> shard(units.size(), 0);
  for (size_t g : order) {
    const int k = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    shard[g] = k;
    load[k] += cost[g];
  }
  return shard;
}

namespace {

// Evaluates `work` (lists of ids of one unit each, largest first) on the request's threads.
// `done` and `total` feed the progress callback (not called for kBound).
void run_units(const ExploreRequest& request, std::vector<ConfigRecord>& records,
               const std::vector<std::vector<int64_t>>& work, UnitMode mode, int64_t& done,
               int64_t total, ExploreTimings& sum) {
  std::mutex mutex;  // guards done, the progress callback and the timings
  // An error in a unit (e.g. InputError from the cost model) is rethrown after all threads
  // have joined; the one of the unit with the lowest first id wins, so the message does not
  // depend on timing.
  std::exception_ptr error;
  int64_t error_id = std::numeric_limits<int64_t>::max();
  parallel_for(work.size(), request.threads, [&](size_t i) {
    const std::vector<int64_t>& ids = work[i];
    UnitTimings local;
    // Units touch disjoint records, so no lock is needed while evaluating.
    try {
      evaluate_unit(request, records, ids, local, mode);
    } catch (...) {
      std::lock_guard lock(mutex);
      if (ids.front() < error_id) {
        error_id = ids.front();
        error = std::current_exception();
      }
    }
    std::lock_guard lock(mutex);
    sum.schedule_s += local.schedule_s;
    sum.memory_s += local.memory_s;
    sum.lower_s += local.lower_s;
    sum.simulate_s += local.simulate_s;
    sum.simulated_instructions += local.instructions;
    sum.programs_lowered += local.lowered;
    if (mode == UnitMode::kBound) return;
    done += static_cast<int64_t>(ids.size());
    if (request.progress) request.progress(done, total);
  });
  if (error) std::rethrow_exception(error);
}

// ExploreRequest::bound_prune: the simulated, fitting configurations decided so far (in the
// (LB, id) order), and the two questions the bound asks of them.
class Incumbents {
 public:
  explicit Incumbents(int keep) : keep_(static_cast<size_t>(std::max(1, keep))) {}

  void add(const ConfigRecord& r) { points_.push_back({r.peak_memory_bytes, r.step_time_s, r.id}); }

  struct Dominance {
    int64_t by = -1;     // the fastest incumbent before x in the Pareto order, as small as x
    int64_t before = 0;  // incumbents ranked before x
  };
  // Whether x, at any step time >= s, is outside the first keep_ of the ranking and off the
  // Pareto front (by >= 0), see ExploreRequest::bound_prune.
  Dominance dominance(const ConfigRecord& x, double s) const {
    Dominance d;
    const Point* best = nullptr;
    for (const Point& p : points_) {
      const bool ahead = p.step < s || (p.step == s && p.id < x.id);
      if (ahead) ++d.before;
      if (p.peak <= x.peak_memory_bytes &&
          (p.step < s || (p.step == s && (p.peak < x.peak_memory_bytes || p.id < x.id))) &&
          (best == nullptr || std::tie(p.step, p.id) < std::tie(best->step, best->id)))
        best = &p;
    }
    if (best != nullptr && static_cast<size_t>(d.before) >= keep_) d.by = best->id;
    return d;
  }

  // The step time above which x is dominated (infinity when none is): the keep_-th smallest
  // incumbent step, and the fastest incumbent as small as x, whichever is larger.
  double stop_after(const ConfigRecord& x) const {
    if (points_.size() < keep_) return std::numeric_limits<double>::infinity();
    std::vector<double> steps;
    steps.reserve(points_.size());
    double front = std::numeric_limits<double>::infinity();
    for (const Point& p : points_) {
      steps.push_back(p.step);
      if (p.peak <= x.peak_memory_bytes) front = std::min(front, p.step);
    }
    std::nth_element(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(keep_ - 1),
                     steps.end());
    return std::max(steps[keep_ - 1], front);
  }


 private:
  struct Point {
    int64_t peak;
    double step;
    int64_t id;
  };
  size_t keep_;
  std::vector<Point> points_;
};

// The bound in the comparisons: LB less a relative 1e-9, so that rounding in the sum of durations
// (the engine adds them in another order) can never make it exceed the simulated step time.
double safe_bound(const ConfigRecord& r) { return r.lower_bound_s * (1 - 1e-9); }

std::string bound_reason(const char* what, double s, const Incumbents::Dominance& d,
                         const std::vector<ConfigRecord>& records) {
  const ConfigRecord& y = records[d.by];
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "%s %.2f ms, but configuration %lld takes %.2f ms in %.2f GiB and %lld simulated "
                "configurations rank before it",
                what, s * 1e3, static_cast<long long>(y.id), y.step_time_s * 1e3,
                static_cast<double>(y.peak_memory_bytes) / kGiB, static_cast<long long>(d.before));
  return buf;
}

// What the simulations of one unit share: its schedule, partition and lowered program.
struct UnitProgram {
  Schedule schedule;
  Partition partition;
  std::optional<ProgramTemplate> program;
  std::optional<ProgramTemplate> sharded_program;   // gradient sharding's (lowered on demand)
  std::optional<ProgramTemplate> gathered_program;  // parameter sharding's (lowered on demand)
};

// ExploreRequest::bound_prune: lower bounds first (every unit, in parallel), then the
// configurations in (LB, id) order, each pruned or simulated against the incumbents before it.
// Worker threads claim configurations ahead of the decided prefix and simulate them with the
// incumbents known then (a superset of the decision's stop time: never stopping one the order
// would keep); each outcome is decided when its turn comes, in order, so it is the sequential
// algorithm's.
void bound_and_simulate(const ExploreRequest& request, std::vector<ConfigRecord>& records,
                        const std::vector<std::vector<int64_t>>& units, ExploreTimings& sum) {
  int64_t done_units = 0;
  run_units(request, records, units, UnitMode::kBound, done_units, 0, sum);
  std::vector<int32_t> unit_of(records.size(), -1);
  for (size_t g = 0; g < units.size(); ++g)
    for (int64_t id : units[g]) unit_of[id] = static_cast<int32_t>(g);
  std::vector<int64_t> order;
  for (const std::vector<int64_t>& ids : units)
    for (int64_t id : ids)
      if (records[id].status == ConfigStatus::kPending) order.push_back(id);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (records[a].lower_bound_s != records[b].lower_bound_s)
      return records[a].lower_bound_s < records[b].lower_bound_s;
    return a < b;
  });
  const size_t n = order.size();
  const int64_t limit = limit_bytes(request);

  const int threads = resolve_threads(request.threads, n);
  // Simulations started and not yet decided, at most: enough to keep every thread busy, few
  // enough that little simulated ahead is thrown away.
  const size_t lookahead = 2 * static_cast<size_t>(threads);
  size_t ahead = 0;

  // Shared state, guarded by `mutex`.
  enum class Fate : uint8_t { kWaiting, kRunning, kSkipped, kSimulated, kStopped, kFailed };
  std::vector<Fate> fate(n, Fate::kWaiting);
  std::map<size_t, ConfigRecord> outcome;  // claimed index -> its simulated record
  Incumbents incumbents(request.bound_top);
  size_t next = 0, head = 0;
  std::exception_ptr error;
  std::mutex mutex;
  std::condition_variable changed;
  // Units whose program no worker is using, most recently used last.
  std::vector<std::pair<int32_t, std::unique_ptr<UnitProgram>>> idle;
  const size_t idle_capacity = static_cast<size_t>(threads) + 2;

  // Decides the configurations of the prefix whose outcome is known (mutex held).
  auto decide = [&] {
    while (head < n && fate[head] != Fate::kWaiting && fate[head] != Fate::kRunning) {
      ConfigRecord& x = records[order[head]];
      if (fate[head] != Fate::kSkipped) --ahead;
      const auto found = outcome.find(head);
      const Incumbents::Dominance by_bound = incumbents.dominance(x, safe_bound(x));
      if (by_bound.by >= 0) {
        x.status = ConfigStatus::kBound;
        x.reason = bound_reason("takes at least", x.lower_bound_s, by_bound, records);
      } else {
        assert(fate[head] != Fate::kSkipped && "skipped with fewer incumbents, so pruned now");
        const double stop = incumbents.stop_after(x);
        if (fate[head] == Fate::kFailed) {
          x = std::move(found->second);
        } else if (fate[head] == Fate::kStopped || found->second.step_time_s > stop) {
          // Stopped, or (simulated ahead with fewer incumbents) it would have been.
          const Incumbents::Dominance by_step =
              incumbents.dominance(x, std::nextafter(stop, HUGE_VAL));
          assert(by_step.by >= 0 && "a finite stop has its incumbents");
          x.status = ConfigStatus::kBound;
          x.reason = bound_reason("takes more than", stop, by_step, records);
        } else {
          x = std::move(found->second);
          if (x.fits) incumbents.add(x);
        }
      }
      if (found != outcome.end()) outcome.erase(found);
      ++head;
      if (request.progress) request.progress(static_cast<int64_t>(head), static_cast<int64_t>(n));
    }
    changed.notify_all();
  };

  auto worker = [&] {
    UnitTimings t;
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return next >= n || error || ahead < lookahead; });
      if (next >= n || error) break;
      const size_t i = next++;
      const ConfigRecord& x = records[order[i]];
      if (incumbents.dominance(x, safe_bound(x)).by >= 0) {
        fate[i] = Fate::kSkipped;
        decide();
        continue;
      }
      const double stop = incumbents.stop_after(x);
      fate[i] = Fate::kRunning;
      ++ahead;
      const int32_t u = unit_of[x.id];
      std::unique_ptr<UnitProgram> unit;
      for (auto it = idle.begin(); it != idle.end(); ++it) {
        if (it->first != u) continue;
        unit = std::move(it->second);
        idle.erase(it);
        break;
      }
      ConfigRecord rec = x;
      lock.unlock();
      Fate result = Fate::kSimulated;
      try {
        auto t0 = Clock::now();
        if (!unit) {
          unit = std::make_unique<UnitProgram>();
          unit->schedule = unit_schedule(request, rec.config);
          t.schedule_s += seconds_since(t0);
          t0 = Clock::now();
          unit->partition = unit_partition(request, unit->schedule);
          t.lower_s += seconds_since(t0);
        }
        std::optional<ProgramTemplate>& tmpl = rec.config.shard_parameters ? unit->gathered_program
                                               : rec.config.shard_gradients
                                                   ? unit->sharded_program
                                                   : unit->program;
        if (!tmpl) {
          t0 = Clock::now();
          tmpl.emplace(unit->schedule, rec.config.shard_gradients, rec.config.shard_parameters);
          ++t.lowered;
          t.lower_s += seconds_since(t0);
        }
        t0 = Clock::now();
        const MemoryModel mem = build_memory_model(request.model, unit->partition,
                                                   unit->schedule.placement, rec.config,
                                                   request.cluster);
        const AnalyticCost cost(request.model, unit->partition, unit->schedule.placement,
                                rec.config, request.cluster);
        const Program& prog = tmpl->with_bytes(cost);
        t.memory_s += seconds_since(t0);
        t0 = Clock::now();
        SimOptions so = config_sim_options(request, rec.config, mem);
        so.stop_after_step_s = stop;
        try {
          const SimResult sim = simulate(prog, cost, so);
          t.instructions += sim.num_instructions;
          if (sim.stopped) {
            result = Fate::kStopped;
          } else {
            rec.status = ConfigStatus::kSimulated;
            fill_metrics(request, unit->partition, sim, rec);
            rec.fits = rec.peak_memory_bytes <= limit;
          }
        } catch (const InputError& e) {
          result = Fate::kFailed;
          rec.status = ConfigStatus::kFailed;
          rec.reason = std::string("simulation failed: ") + e.what();
        }
        t.simulate_s += seconds_since(t0);
      } catch (...) {
        lock.lock();
        if (!error) error = std::current_exception();
        changed.notify_all();
        break;
      }
      lock.lock();
      fate[i] = result;
      if (result != Fate::kStopped) outcome.emplace(i, std::move(rec));
      idle.emplace_back(u, std::move(unit));
      if (idle.size() > idle_capacity) idle.erase(idle.begin());
      decide();
    }
    sum.schedule_s += t.schedule_s;
    sum.memory_s += t.memory_s;
    sum.lower_s += t.lower_s;
    sum.simulate_s += t.simulate_s;
    sum.simulated_instructions += t.instructions;
    sum.programs_lowered += t.lowered;
  };
  // One item per thread, each a worker taking configurations until every one is decided.
  parallel_for(static_cast<size_t>(threads), threads, [&](size_t) { worker(); });
  if (error) std::rethrow_exception(error);
  assert(head == n && "every configuration decided");
}

}  // namespace

void evaluate_configs(const ExploreRequest& request, std::vector<ConfigRecord>& records,
                      ExploreTimings* timings) {
  const std::vector<std::vector<int64_t>> units = unit_configs(records);
  const std::vector<int> shard = assign_units(records, units, request.shard_count);
  std::vector<size_t> mine;
  int64_t total = 0;
  for (size_t g = 0; g < units.size(); ++g) {
    if (shard[g] != request.shard_index) continue;
    mine.push_back(g);
    total += static_cast<int64_t>(units[g].size());
  }
  // Largest first, so the last units to finish are short.
  std::stable_sort(mine.begin(), mine.end(), [&](size_t a, size_t b) {
    return unit_cost(records, units[a]) > unit_cost(records, units[b]);
  });
  std::vector<std::vector<int64_t>> work;
  work.reserve(mine.size());
  for (size_t g : mine) work.push_back(units[g]);
  ExploreTimings sum;
  if (request.bound_prune) {
    if (request.shard_count > 1)
      throw_input_error("--bound-prune",
                        "needs a single process (its order spans the whole space)");
    bound_and_simulate(request, records, work, sum);
  } else {
    int64_t done = 0;
    run_units(request, records, work, UnitMode::kAll, done, total, sum);
  }
  if (timings != nullptr) *timings = sum;
}

ExploreResult finish_exploration(const ExploreRequest& request, std::vector<ConfigRecord> records) {
  ExploreResult res;
  res.max_memory_bytes = limit_bytes(request);
  res.records = std::move(records);
  for (const ConfigRecord& r : res.records) {
    assert(r.status != ConfigStatus::kPending && "finish_exploration needs evaluated records");
    ++res.by_status[static_cast<size_t>(r.status)];
    if (!r.simulated()) continue;
    ++res.evaluated;
    if (!r.fits) continue;
    ++res.feasible;
    res.ranking.push_back(r.id);
  }
  const auto& recs = res.records;
  std::sort(res.ranking.begin(), res.ranking.end(), [&](int64_t a, int64_t b) {
    if (recs[a].step_time_s != recs[b].step_time_s)
      return recs[a].step_time_s < recs[b].step_time_s;
    return a < b;
  });
  std::vector<int64_t> by_time_then_memory = res.ranking;
  std::stable_sort(by_time_then_memory.begin(), by_time_then_memory.end(),
                   [&](int64_t a, int64_t b) {
                     if (recs[a].step_time_s != recs[b].step_time_s)
                       return recs[a].step_time_s < recs[b].step_time_s;
                     return recs[a].peak_memory_bytes < recs[b].peak_memory_bytes;
                   });
  for (int64_t id : by_time_then_memory) {
    if (res.pareto.empty() ||
        recs[id].peak_memory_bytes < recs[res.pareto.back()].peak_memory_bytes)
      res.pareto.push_back(id);
  }
  return res;
}

ExploreResult explore(const ExploreRequest& request) {
  std::vector<ConfigRecord> records = enumerate_configs(request);
  ExploreRequest all = request;
  all.shard_index = 0;
  all.shard_count = 1;
  ExploreTimings timings;
  evaluate_configs(all, records, &timings);
  ExploreResult res = finish_exploration(all, std::move(records));
  res.timings = timings;
  return res;
}

std::string explain_empty(const ExploreResult& result) {
  const ConfigRecord* smallest = nullptr;
  for (const ConfigRecord& r : result.records) {
    const bool too_big = r.status == ConfigStatus::kMemory || (r.simulated() && !r.fits);
    if (too_big && (smallest == nullptr || r.peak_memory_bytes < smallest->peak_memory_bytes))
      smallest = &r;
  }
  if (smallest != nullptr) {
    return "no configuration fits in " + gib(result.max_memory_bytes, "%.4g") +
           " GiB; the smallest needs " + gib(smallest->peak_memory_bytes, "%.1f") + " GiB (" +
           describe_config(smallest->config) + ")";
  }
  if (result.records.empty()) return "the space is empty (no value left for some dimension)";
  std::string counts;
  for (ConfigStatus s : kAllConfigStatuses) {
    const int64_t n = result.by_status[static_cast<size_t>(s)];
    if (n == 0) continue;
    counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(to_string(s));
  }
  // Duplicates and dominated configurations were pruned only because of a twin: name a reason
  // that holds on its own.
  const ConfigRecord* first = &result.records.front();
  for (const ConfigRecord& r : result.records) {
    if (r.status != ConfigStatus::kDuplicate && r.status != ConfigStatus::kDominated) {
      first = &r;
      break;
    }
  }
  return "no valid configuration among " + std::to_string(result.records.size()) + " (" + counts +
         "); first: " + first->reason + " (" + describe_config(first->config) + ")";
}

Plan build_config_plan(const ExploreRequest& request, const ParallelConfig& config) {
  PlanRequest req;
  req.model = request.model;
  req.cluster = request.cluster;
  req.config = config;
  req.partition = request.partition;
  req.max_memory_bytes = limit_bytes(request);
  if (request.assignment) {
    req.assignment = request.assignment->spec;
    req.config.virtual_stages = 1;  // the assignment gives the stages
  }
  Plan plan = build_plan(req);
  PlanSimOptions so;
  so.record_trace = false;
  so.check_memory = false;
  so.overlap_grad_reduce = request.overlap_grad_reduce;
  plan.predicted = simulate_plan(plan, so).metrics;
  return plan;
}

nlohmann::json explore_result_to_json(const ExploreRequest& request, const ExploreResult& result,
                                      int top, bool include_pruned) {
  const auto& recs = result.records;
  std::vector<char> on_front(recs.size(), 0);
  for (int64_t id : result.pareto) on_front[id] = 1;
  std::vector<int64_t> rank(recs.size(), 0);
  for (size_t i = 0; i < result.ranking.size(); ++i) rank[result.ranking[i]] = i + 1;
  auto entry = [&](int64_t id) {
    nlohmann::json e = entry_json(recs[id]);
    e["pareto"] = on_front[id] != 0;
    if (rank[id] > 0) e["rank"] = rank[id];
    return e;
  };
  nlohmann::json counts = nlohmann::json::object();
  for (ConfigStatus s : kAllConfigStatuses) {
    if (s == ConfigStatus::kPending || s == ConfigStatus::kSimulated) continue;
    counts[std::string(to_string(s))] = result.by_status[static_cast<size_t>(s)];
  }
  nlohmann::json j = {{"model", request.model.name},
                      {"cluster", request.cluster.name},
                      {"gpus", request.gpus},
                      {"global_batch", request.global_batch},
                      {"options",
                       {{"sequence_parallel", request.space.sequence_parallel},
                        {"attention", std::string(to_string(request.space.attention))},
                        {"tp_comm_overlap", request.space.tp_comm_overlap},
                        {"overlap_grad_reduce", request.overlap_grad_reduce},
                        {"grad_dtype", std::string(to_string(request.grad_dtype))},
                        {"moe_dispatcher", std::string(to_string(request.moe_dispatcher))},
                        {"moe_routing", std::string(to_string(request.moe_routing))},
                        {"optimizer_state", std::string(to_string(request.optimizer_state))},
                        {"partition", std::string(partition_mode_name(request.partition))}}},
                      {"max_memory_bytes", result.max_memory_bytes},
                      {"enumerated", static_cast<int64_t>(recs.size())},
                      {"evaluated", result.evaluated},
                      {"feasible", result.feasible},
                      {"pruned", counts}};
  if (request.assignment)
    j["assignment"] = {{"source", request.assignment->spec.source},
                       {"num_stages", request.assignment->partition.num_stages()},
                       {"stage_begin", request.assignment->partition.stage_begin},
                       {"stage_to_actor", request.assignment->placement.stage_to_actor}};
  j["best"] = result.ranking.empty() ? nlohmann::json(nullptr) : entry(result.ranking.front());
  nlohmann::json top_list = nlohmann::json::array();
  for (size_t i = 0; i < result.ranking.size() && static_cast<int>(i) < top; ++i)
    top_list.push_back(entry(result.ranking[i]));
  j["top"] = top_list;
  nlohmann::json front = nlohmann::json::array();
  for (int64_t id : result.pareto) front.push_back(entry(id));
  j["pareto"] = front;
  nlohmann::json configs = nlohmann::json::array();
  for (int64_t id : output_order(result)) configs.push_back(entry(id));
  j["configs"] = configs;
  if (include_pruned) {
    nlohmann::json pruned = nlohmann::json::array();
    for (const ConfigRecord& r : recs) {
      if (r.simulated()) continue;
      nlohmann::json p = {{"id", r.id},
                          {"config", config_to_json(r.config)},
                          {"status", std::string(to_string(r.status))},
                          {"reason", r.reason}};
      if (r.status == ConfigStatus::kMemory) p["peak_memory_bytes"] = r.peak_memory_bytes;
      pruned.push_back(p);
    }
    j["pruned_configs"] = pruned;
  }
  return j;
}

std::string explore_result_to_csv(const ExploreResult& result) {
  // Activation offloading's columns only when some configuration offloads or searched "auto".
  const bool offload = explore_searched_offload(result);
  // The recompute modules' column only when some configuration names modules (selective:a+b).
  const bool modules = explore_searched_recompute_modules(result);
  std::string out =
      std::string("rank,id,pp,tp,cp,dp,virtual_stages,microbatch_size,num_microbatches,schedule,"
                  "recompute,recompute_layers,") +
      (modules ? "recompute_modules," : "") + (offload ? "offload_layers,offload_auto," : "") +
      "zero1,shard_gradients,shard_parameters,ep,etp,"
      "sequence_parallel,step_time_s,bubble_rate,peak_memory_bytes,tokens_per_s,tflops_per_gpu,"
      "mfu,fits,pareto\n";
  std::vector<char> on_front(result.records.size(), 0);
  for (int64_t id : result.pareto) on_front[id] = 1;
  int64_t rank = 0;
  for (int64_t id : output_order(result)) {
    const ConfigRecord& r = result.records[id];
    const ParallelConfig& c = r.config;
    char line[512];
    char offload_columns[32] = "";
    if (offload)
      std::snprintf(offload_columns, sizeof offload_columns, "%d,%d,", c.offload_layers,
                    r.offload_auto ? 1 : 0);
    // Selective configurations list their modules (core_attn for plain selective).
    const std::string modules_column =
        !modules ? ""
        : c.recompute == Recompute::kSelective
            ? recompute_modules_to_string(c.recompute_modules, "+") + ","
            : ",";
    const std::string extra_columns = modules_column + offload_columns;
    std::snprintf(line, sizeof line,
                  "%s,%lld,%d,%d,%d,%d,%d,%d,%d,%s,%s,%d,%s%d,%d,%d,%d,%d,%d,%.9g,%.9g,%lld,%.9g,"
                  "%.9g,%.9g,%d,%d\n",
                  r.fits ? std::to_string(++rank).c_str() : "", static_cast<long long>(r.id), c.pp,
                  c.tp, c.cp, c.dp, c.virtual_stages, c.microbatch_size, c.num_microbatches,
                  c.schedule.c_str(), std::string(to_string(c.recompute)).c_str(),
                  c.recompute_layers, extra_columns.c_str(), c.zero1 ? 1 : 0,
                  c.shard_gradients ? 1 : 0, c.shard_parameters ? 1 : 0, c.ep, c.expert_tp(), c.sequence_parallel ? 1 : 0, r.step_time_s, r.bubble_rate,
                  static_cast<long long>(r.peak_memory_bytes), r.tokens_per_s, r.tflops_per_gpu,
                  r.mfu, r.fits ? 1 : 0, on_front[id] ? 1 : 0);
    out += line;
  }
  return out;
}

}  // namespace jaxpp
