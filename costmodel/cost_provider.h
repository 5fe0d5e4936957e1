// CostProvider: how long each instruction of a Program takes. The simulator asks it for every
// instruction; the runtime's emulated compute sleeps for compute_s(). Two implementations:
//   AnalyticCost     model + cluster + parallel configuration (roofline, alpha-beta, ring)
//   StageTimesCost   measured T_F, T_B, T_W, T_comm per stage (the Zero Bubble paper's model)
// All durations are in seconds; bandwidths in bytes per second.
#pragma once

#include <cstdint>

#include "graph/program.h"

namespace jaxpp {

class CostProvider {
 public:
  virtual ~CostProvider() = default;

  // Duration of a kCompute (a fused group: the sum of its tasks plus one launch overhead) or
  // kOptimizer instruction on `actor`.
  virtual double compute_s(int actor, const Instruction& ins) const = 0;

  // Point-to-point link between two actors, alpha-beta: a transfer of n bytes alone on the link
  // takes latency_s + n / bandwidth_bytes_per_s. Transfers in flight on the same link_id share
  // its bandwidth equally (the simulator's documented sharing policy).
  virtual double p2p_latency_s(int from, int to) const = 0;
  virtual double p2p_bandwidth_bytes_per_s(int from, int to) const = 0;
  virtual int link_id(int from, int to) const = 0;
  // Latency of one specific transfer (`ins` is the kSend). Defaults to p2p_latency_s(from, to);
  // StageTimesCost overrides it to charge T_comm of the producing stage.
  virtual double transfer_latency_s(int from, int to, const Instruction& ins) const {
    (void)ins;
    return p2p_latency_s(from, to);
  }
  // Convenience: the time of a lone transfer of `bytes`.
  double p2p_s(int from, int to, int64_t bytes) const {
    return p2p_latency_s(from, to) + static_cast<double>(bytes) / p2p_bandwidth_bytes_per_s(from, to);
  }

  // Expert-parallel all-to-all inside a kCompute instruction (MoE layers; 0 for others):
  // busy_s = the time the actor's all-to-all stream is busy (dispatch + combine of every MoE
  // layer of its tasks), exposed_s = the part of it compute_s() includes (busy_s when the
  // all-to-all is serialised with compute, less when it hides behind paired compute).
  struct AllToAll {
    double busy_s = 0;
    double exposed_s = 0;
  };
  virtual AllToAll alltoall(int actor, const Instruction& ins) const {
    (void)actor;
    (void)ins;
    return {};
  }

  // Duration of a kAllReduce instruction (gradient reduction of a stage across dp replicas) or of
  // a kAllGather (parameter all-gather of a stage, parameter sharding); 0 when there is a single
  // replica.
  virtual double allreduce_s(int actor, const Instruction& ins) const = 0;

  // How long that kAllReduce or kAllGather keeps the actor's collective stream busy, when longer
  // than allreduce_s: a collective whose duration is only its exposed part (per-block all-gathers
  // partly hidden beside the compute after them, costmodel/analytic_cost.h) still occupies the
  // link for the whole of it, so the next collective of the stream starts no earlier than
  // start + this. 0 (or anything not above allreduce_s): the stream is free when the instruction
  // ends.
  virtual double collective_busy_s(int actor, const Instruction& ins) const {
    (void)actor;
    (void)ins;
    return 0;
  }
};

}  // namespace jaxpp
