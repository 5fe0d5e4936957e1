#include "costmodel/stage_times_cost.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>

#include "costmodel/alltoall_overlap.h"
#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/limits.h"

namespace jaxpp {
namespace {

constexpr double kSecondsPerMs = 1e-3;

double time_s(const JsonObject& obj, const std::string& key, bool zero_allowed) {
  if (!zero_allowed) obj.positive_number(key);  // the type and sign messages of JsonObject
  return stage_time_s_from_ms(obj.non_negative_number(key), zero_allowed, obj.field(key));
}

void read_entry(const JsonObject& obj, StageTimes& t) {
  obj.reject_unknown({"t_f_ms", "t_b_ms", "t_w_ms", "t_comm_ms", "t_a2a_f_ms", "t_a2a_b_ms"});
  // A measured forward or backward never takes zero time; W and T_comm may be 0 (not split, no
  // communication).
  t.t_f_s.push_back(time_s(obj, "t_f_ms", false));
  t.t_b_s.push_back(time_s(obj, "t_b_ms", false));
  t.t_w_s.push_back(obj.has("t_w_ms") ? time_s(obj, "t_w_ms", true) : 0.0);
  t.t_comm_s.push_back(obj.has("t_comm_ms") ? time_s(obj, "t_comm_ms", true) : 0.0);
  // The MoE all-to-all of a forward and of an input-gradient backward (0: no MoE layer).
  t.t_a2a_f_s.push_back(obj.has("t_a2a_f_ms") ? time_s(obj, "t_a2a_f_ms", true) : 0.0);
  t.t_a2a_b_s.push_back(obj.has("t_a2a_b_ms") ? time_s(obj, "t_a2a_b_ms", true) : 0.0);
}

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

double stage_time_s_from_ms(double ms, bool zero_allowed, const std::string& where) {
  const double s = ms * kSecondsPerMs;
  if (std::isfinite(ms) &&
      ((zero_allowed && ms == 0) || (s >= kMinDurationS && s <= kMaxTaskDurationS))) {
    return s;
  }
  if (zero_allowed ? ms < 0 : ms <= 0) {
    throw_input_error(where, std::string("expected a time in milliseconds ") +
                                 (zero_allowed ? ">= 0" : "> 0") + ", got " + number_text(ms));
  }
  throw_input_error(where, "expected a time in milliseconds " +
                               std::string(zero_allowed ? "of 0 or " : "") +
                               "from 1e-06 (1 ns) to 3.6e+06 (1 h), got " + number_text(ms));
}

StageTimes uniform_stage_times(int num_stages, double t_f_s, double t_b_s, double t_w_s,
                               double t_comm_s) {
  if (num_stages < 1) throw_input_error("stage times", "need at least one stage");
  for (double v : {t_f_s, t_b_s, t_w_s, t_comm_s}) {
    if (!(v >= 0 && v <= kMaxTaskDurationS))
      throw_input_error("stage times", "times must be in [0, 3600] seconds");
  }
  StageTimes t;
  t.t_f_s.assign(num_stages, t_f_s);
  t.t_b_s.assign(num_stages, t_b_s);
  t.t_w_s.assign(num_stages, t_w_s);
  t.t_comm_s.assign(num_stages, t_comm_s);
  return t;
}

StageTimes with_uniform_alltoall(StageTimes times, double t_a2a_f_s, double t_a2a_b_s) {
  for (double v : {t_a2a_f_s, t_a2a_b_s}) {
    if (!(v >= 0 && v <= kMaxTaskDurationS))
      throw_input_error("stage times", "all-to-all times must be in [0, 3600] seconds");
  }
  times.t_a2a_f_s.assign(times.num_stages(), t_a2a_f_s);
  times.t_a2a_b_s.assign(times.num_stages(), t_a2a_b_s);
  return times;
}

bool StageTimes::has_alltoall() const {
  const auto positive = [](double v) { return v > 0; };
  return std::any_of(t_a2a_f_s.begin(), t_a2a_f_s.end(), positive) ||
         std::any_of(t_a2a_b_s.begin(), t_a2a_b_s.end(), positive);
}

StageTimes stage_times_from_json(const nlohmann::json& doc, const std::string& source,
                                 int num_stages) {
  JsonObject obj(doc, source);
  StageTimes t;
  if (!obj.has("stages")) {
    read_entry(obj, t);
    return with_uniform_alltoall(
        uniform_stage_times(num_stages, t.t_f_s[0], t.t_b_s[0], t.t_w_s[0], t.t_comm_s[0]),
        t.t_a2a_f_s[0], t.t_a2a_b_s[0]);
  }
  obj.reject_unknown({"stages"});
  const auto& stages = obj.array("stages");
  if (static_cast<int>(stages.size()) != num_stages) {
    throw_input_error(obj.field("stages"), "expected " + std::to_string(num_stages) +
                                               " entries (one per stage), got " +
                                               std::to_string(stages.size()));
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    read_entry(JsonObject(stages[i], obj.field("stages") + "[" + std::to_string(i) + "]"), t);
  }
  return t;
}

StageTimes load_stage_times(const std::string& path, int num_stages) {
  return stage_times_from_json(read_json_file(path), path, num_stages);
}

StageTimesCost::StageTimesCost(StageTimes times, bool overlap_alltoall)
    : times_(std::move(times)),
      overlap_alltoall_(overlap_alltoall),
      has_alltoall_(times_.has_alltoall()) {
  assert(times_.t_b_s.size() == times_.t_f_s.size() && "StageTimes: ragged vectors");
  assert(times_.t_w_s.size() == times_.t_f_s.size() && "StageTimes: ragged vectors");
  assert(times_.t_comm_s.size() == times_.t_f_s.size() && "StageTimes: ragged vectors");
  assert((times_.t_a2a_f_s.empty() || times_.t_a2a_f_s.size() == times_.t_f_s.size()) &&
         "StageTimes: ragged vectors");
  assert((times_.t_a2a_b_s.empty() || times_.t_a2a_b_s.size() == times_.t_f_s.size()) &&
         "StageTimes: ragged vectors");
}

double StageTimesCost::task_s(TaskKind kind, int stage) const {
  if (stage < 0 || stage >= times_.num_stages()) {
    throw_input_error("stage times", "no times for stage " + std::to_string(stage) + " (have " +
                                         std::to_string(times_.num_stages()) + " stages)");
  }
  switch (kind) {
    case TaskKind::kF:
      return times_.t_f_s[stage] + times_.a2a_f_s(stage);
    case TaskKind::kB:
      return times_.t_b_s[stage] + times_.t_w_s[stage] + times_.a2a_b_s(stage);
    case TaskKind::kI:
      return times_.t_b_s[stage] + times_.a2a_b_s(stage);
    case TaskKind::kW:
      return times_.t_w_s[stage];
  }
  return 0;
}

double StageTimesCost::alltoall_task_s(TaskKind kind, int stage) const {
  if (stage < 0 || stage >= times_.num_stages()) return 0;  // task_s names the stage
  switch (kind) {
    case TaskKind::kF:
      return times_.a2a_f_s(stage);
    case TaskKind::kB:
    case TaskKind::kI:
      return times_.a2a_b_s(stage);
    case TaskKind::kW:
      return 0;
  }
  return 0;
}

double StageTimesCost::compute_s(int /*actor*/, const Instruction& ins) const {
  if (ins.op != OpKind::kCompute) return 0;
  if (!has_alltoall_) {
    double total = 0;
    for (const TaskRef& t : ins.tasks) total += task_s(t.kind, t.stage);
    return total;
  }
  return alltoall_group(
             ins, overlap_alltoall_, [&](const TaskRef& t) { return task_s(t.kind, t.stage); },
             [&](const TaskRef& t) { return alltoall_task_s(t.kind, t.stage); })
      .compute_s;
}

CostProvider::AllToAll StageTimesCost::alltoall(int /*actor*/, const Instruction& ins) const {
  if (ins.op != OpKind::kCompute || !has_alltoall_) return {};
  const AllToAllGroup g = alltoall_group(
      ins, overlap_alltoall_, [&](const TaskRef& t) { return task_s(t.kind, t.stage); },
      [&](const TaskRef& t) { return alltoall_task_s(t.kind, t.stage); });
  return {g.busy_s, g.exposed_s};
}

double StageTimesCost::p2p_latency_s(int /*from*/, int /*to*/) const {
  return *std::max_element(times_.t_comm_s.begin(), times_.t_comm_s.end());
}

double StageTimesCost::p2p_bandwidth_bytes_per_s(int /*from*/, int /*to*/) const {
  return std::numeric_limits<double>::infinity();
}

int StageTimesCost::link_id(int from, int to) const { return from * 65536 + to; }

double StageTimesCost::transfer_latency_s(int /*from*/, int /*to*/, const Instruction& ins) const {
  const int stage = ins.tasks.empty() ? ins.stage : ins.tasks[0].stage;
  if (stage < 0 || stage >= times_.num_stages()) return p2p_latency_s(0, 0);
  return times_.t_comm_s[stage];
}

double StageTimesCost::allreduce_s(int /*actor*/, const Instruction& /*ins*/) const { return 0; }

}  // namespace jaxpp
