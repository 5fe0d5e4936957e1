// Step breakdown: where one simulated training step's time goes, per actor (pipeline rank), from
// the operator-level cost model (costmodel/operator_cost.h) and the simulated timeline.
//
// For actor r, over one step of step_time_s:
//   gemm_s, attention_s, elementwise_s   compute kernels of the tasks r ran (operator_cost.h)
//   tp_comm_s, cp_comm_s                 tensor-/context-parallel communication those tasks
//                                        expose (a fused backward's hidden part already removed)
//   ep_comm_s                            expert-parallel all-to-all those tasks expose (what an
//                                        overlapped F&B pair hides already removed)
//   other_s                              custom layers (efficiency curve) and the per-instruction
//                                        launch overhead
//   optimizer_s                          the optimizer steps of r's stages
//   p2p_exposed_s                        compute-stream idle time while one of r's receives was
//                                        in flight (waiting on a pipeline transfer)
//   dp_exposed_s                         time after r's last compute during which its gradient
//                                        reduction runs and the step has not ended, plus (with
//                                        parameter sharding) compute-stream idle time before a
//                                        compute until the all-gathers it waits for have ended
//   bubble_s                             the rest of the step: step_time_s minus all the above
//                                        (pipeline fill/drain and waits on other actors)
// The compute categories sum to r's busy time; all categories sum to step_time_s.
// The timeline parts (needs a recorded trace): each compute event of the trace gets `parts`
// (gemm, attention, elementwise, tp_comm, cp_comm, ep_comm, other) that the Perfetto writer nests
// inside it.
//
// Usage:
//   SimulatedPlan sim = simulate_plan(plan, {.record_trace = true, .breakdown = true});
//   sim.metrics["breakdown"] -> [{"actor": 0, "gemm_s": ..., ...}, ...]
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/analytic_cost.h"
#include "graph/program.h"
#include "simulator/engine.h"

namespace jaxpp {

struct ActorBreakdown {
  int actor = 0;
  double gemm_s = 0;
  double attention_s = 0;
  double elementwise_s = 0;
  double tp_comm_s = 0;
  double cp_comm_s = 0;
  double ep_comm_s = 0;
  double other_s = 0;
  double optimizer_s = 0;
  double p2p_exposed_s = 0;
  double dp_exposed_s = 0;
  double bubble_s = 0;
};

// The compute time of one compute instruction split by kind (gemm, attention, elementwise,
// tp_comm, cp_comm, ep_comm, other incl. launch overhead); sums to cost.compute_s(actor, ins).
PassBreakdown instruction_breakdown(const AnalyticCost& cost, const Instruction& ins);

// Needs result.start_s / end_s (SimOptions::record_trace).
std::vector<ActorBreakdown> step_breakdown(const Program& program, const AnalyticCost& cost,
                                           const SimResult& result);

// Fills TraceEvent::parts of the compute events of result.trace.
void add_breakdown_parts(const AnalyticCost& cost, const Program& program, Trace& trace);

nlohmann::json breakdown_to_json(const std::vector<ActorBreakdown>& actors);

}  // namespace jaxpp
