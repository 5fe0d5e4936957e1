// Builds a plan (GPT-3 13B on 64 H100s: pp 4, tp 8, dp 2, ZB-H1) and simulates one iteration
// with the calibrated cost model, through the installed jaxpp_sim CMake package.
// Usage: plan_and_simulate [schedule]   (default zb-h1)
#include <cstdio>
#include <exception>

#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/model.h"
#include "simulator/plan_builder.h"

int main(int argc, char** argv) try {
  jaxpp::PlanRequest request;
  request.model = jaxpp::load_model("gpt3-13b");
  request.cluster = jaxpp::load_cluster("h100-sxm");
  request.config.gpus = 64;
  request.config.pp = 4;
  request.config.tp = 8;
  request.config.dp = 2;
  request.config.global_batch = 64;
  request.config.schedule = argc > 1 ? argv[1] : "zb-h1";
  const jaxpp::Plan plan = jaxpp::build_plan(request);
  const jaxpp::SimulatedPlan sim = jaxpp::simulate_plan(plan, {});
  std::printf("schedule %s: %d microbatches, %lld instructions\n", request.config.schedule.c_str(),
              plan.config.num_microbatches, static_cast<long long>(sim.result.num_instructions));
  std::printf("step time %.3f s, bubble rate %.3f, MFU %.3f\n", sim.result.step_time_s,
              sim.result.bubble_rate, sim.metrics.at("mfu").get<double>());
  return 0;
} catch (const jaxpp::InputError& e) {
  std::fprintf(stderr, "plan_and_simulate: error: %s\n", e.what());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "plan_and_simulate: error: %s\n", e.what());
  return 1;
}
