// StageTimesCost: measured per-stage task times instead of a model and a cluster (the Zero
// Bubble paper's model, Qi et al. 2024).
//
// Notation (per stage s, one microbatch, in seconds here, milliseconds on the command line and in
// files):
//   T_F   forward
//   T_B   backward for inputs (the activation gradient; task I). This is the Zero Bubble paper's
//         "B", NOT a full backward.
//   T_W   backward for weights (task W)
//   T_comm the time of one pipeline transfer (activation F->F or gradient B->B between actors)
//   A_F   MoE stages: the expert-parallel all-to-all of one forward (dispatch + combine of every
//         MoE layer of the stage), on the actor's all-to-all stream; NOT included in T_F
//   A_B   the same for the input-gradient pass (the gradients sent back the same way); NOT
//         included in T_B. The weight-gradient pass has none.
// Task durations with the all-to-all serialised: F = T_F + A_F, I = T_B + A_B, W = T_W, and a
// full backward B = T_B + T_W + A_B (schedules that do not split the backward). A fused group
// lasts the sum of its tasks (no launch overhead in this mode), except an overlapped F&B pair
// (costmodel/alltoall_overlap.h, when the cost is built with overlap on), which hides each side's
// all-to-all behind the other side's compute as model mode does; kOptimizer and kAllReduce
// instructions take 0. Every cross-actor transfer takes exactly
// T_comm of the producing stage, independent of its bytes (infinite bandwidth, latency T_comm), so
// T_comm is added on every cross-actor F->F and B->B dependency.
// Check against ../shared/SCHEDULES.md: T_F = T_B = T_W = 1 (so F=1, B=2, I=W=1), T_comm = 0 gives
// makespans 33 (Std1F1B(4), m=8) and 27 (ZeroBubble(4), m=8).
//
// Stage-times file (JSON, milliseconds), either uniform or per stage:
//   {"t_f_ms": 1.0, "t_b_ms": 1.0, "t_w_ms": 1.0, "t_comm_ms": 0.05}
//   {"stages": [{"t_f_ms": 1.0, "t_b_ms": 1.1, "t_w_ms": 0.9, "t_comm_ms": 0.05,
//                "t_a2a_f_ms": 0.4, "t_a2a_b_ms": 0.4}, ...]}
// In the per-stage form the list must have one entry per stage of the program. t_f_ms and t_b_ms
// must be > 0, t_w_ms, t_comm_ms, t_a2a_f_ms and t_a2a_b_ms >= 0 (optional, default 0). Checked after the
// conversion to seconds: a time that is not 0 lies in [1 ns, 1 h] (graph/limits.h), so a
// denormal such as 1e-320 ms is refused instead of becoming 0 s, and 1e300 ms does not make every
// step last 1e297 s.
//
// Usage:
//   StageTimes t = uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 0);
//   StageTimesCost cost(with_uniform_alltoall(t, 0.5e-3, 0.5e-3), /*overlap_alltoall=*/true);
//   double d = cost.compute_s(0, ins);
#pragma once

#include <string>
#include <vector>

#include "costmodel/cost_provider.h"

namespace jaxpp {

struct StageTimes {
  std::vector<double> t_f_s;  // one entry per stage
  std::vector<double> t_b_s;
  std::vector<double> t_w_s;
  std::vector<double> t_comm_s;
  // MoE all-to-all per stage (A_F, A_B above): empty (no all-to-all) or one entry per stage.
  std::vector<double> t_a2a_f_s;
  std::vector<double> t_a2a_b_s;
  int num_stages() const { return static_cast<int>(t_f_s.size()); }
  double a2a_f_s(int stage) const { return t_a2a_f_s.empty() ? 0.0 : t_a2a_f_s.at(stage); }
  double a2a_b_s(int stage) const { return t_a2a_b_s.empty() ? 0.0 : t_a2a_b_s.at(stage); }
  bool has_alltoall() const;  // some stage has A_F or A_B > 0
};

// Seconds of a stage time given in milliseconds (`ms`, named `where` in messages, e.g. "--t-f" or
// "t.json: field 't_f_ms'"): InputError unless ms is finite and the converted value is 0 (only when
// zero_allowed) or in [kMinDurationS, kMaxTaskDurationS].
double stage_time_s_from_ms(double ms, bool zero_allowed, const std::string& where);

StageTimes uniform_stage_times(int num_stages, double t_f_s, double t_b_s, double t_w_s,
                               double t_comm_s);
// `times` with the same A_F and A_B on every stage (seconds, >= 0).
StageTimes with_uniform_alltoall(StageTimes times, double t_a2a_f_s, double t_a2a_b_s);
// Reads the JSON file above. A uniform file is expanded to `num_stages`; a per-stage file must
// have exactly `num_stages` entries. InputError naming the file and field otherwise.
StageTimes load_stage_times(const std::string& path, int num_stages);
StageTimes stage_times_from_json(const nlohmann::json& doc, const std::string& source,
                                 int num_stages);

class StageTimesCost : public CostProvider {
 public:
  // overlap_alltoall: F&B pairs hide each other's all-to-all (MoeOverlap other than kNone).
  explicit StageTimesCost(StageTimes times, bool overlap_alltoall = true);

  double compute_s(int actor, const Instruction& ins) const override;
  double p2p_latency_s(int from, int to) const override;              // max T_comm over stages
  double p2p_bandwidth_bytes_per_s(int from, int to) const override;  // +infinity
  int link_id(int from, int to) const override;
  double transfer_latency_s(int from, int to, const Instruction& ins) const override;
  double allreduce_s(int actor, const Instruction& ins) const override;  // 0
  AllToAll alltoall(int actor, const Instruction& ins) const override;

  // Duration of one task of stage `stage`, its all-to-all serialised.
  double task_s(TaskKind kind, int stage) const;
  // The all-to-all inside one task of stage `stage` (A_F in F; A_B in I and B; 0 in W).
  double alltoall_task_s(TaskKind kind, int stage) const;
  const StageTimes& times() const { return times_; }

 private:
  StageTimes times_;
  bool overlap_alltoall_ = true;
  bool has_alltoall_ = false;
};

}  // namespace jaxpp
