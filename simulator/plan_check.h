// Checking that a plan read from a file agrees with itself.
//
// plan_from_json (graph/plan.h) checks each part of a plan.json on its own and the counts that tie
// them together (layers, stages, actors, microbatches). A hand-edited or corrupted file can still
// say one thing in its configuration and do another in its program, and `run` would execute the
// program while reporting the configuration. check_plan rejects, naming the file and the field:
//   config     gpus ≠ pp·tp·dp·cp; global_batch ≠ dp·microbatch_size·num_microbatches; tp not
//              dividing the attention heads; tp communication overlap without sequence
//              parallelism; virtual_stages ≠ stages / pp; a placement for another number of
//              actors; a registry schedule name (config.schedule) whose schedule for this pp,
//              stage count and microbatch count is not the program's compute order (with or
//              without steady-state fusion, paired as build_plan pairs it for moe_overlap 1f1b
//              with ep > 1; other names, such as "custom", are not checked);
//   cluster    missing or invalid (costmodel/cluster.h, cluster_from_json);
//   program    not the lowering (schedules/lower.h) of its own compute order with the transfer
//              and gradient sizes the model, configuration and cluster imply (AnalyticCost's
//              activation_bytes and grad_bytes, as build_plan lowers): a send or recv of the wrong
//              size, a changed tag, dependency, peer or allreduce;
//   predicted  not null and not an object, or a metric the simulator writes as a number
//              (step_time_s, mfu, bubble_rate, ...) that is not a number >= 0, or warnings that
//              are not a list of strings.
// The program must pass check_program (graph/program.h) first: `validate` reports a malformed
// program as INVALID (exit 1) and a contradiction found here as bad input (exit 2).
//
// Usage:
//   const Plan plan = load_plan(path);
//   check_program(plan.program);
//   check_plan(plan, path);  // InputError "plan.json: field 'config': ..."
#pragma once

#include <string>

#include "graph/plan.h"
#include "schedules/schedule.h"

namespace jaxpp {

void check_plan(const Plan& plan, const std::string& source);
// check_program (graph/program.h) with its errors prefixed by `source`, then check_plan: what
// `run PLAN` and `export --plan` refuse before using a plan file.
void check_plan_file(const Plan& plan, const std::string& source);

// The schedule a plan's program executes: each actor's compute instructions in order (fused
// groups kept), the plan's placement, split_backward where the program has W tasks.
Schedule plan_schedule(const Plan& plan);

// Whether a JSON document is a plan.json: "format": "jaxpp-sim-plan", or a "config" or "program"
// field (a plan whose format is wrong, refused for it by plan_from_json).
bool is_plan_document(const nlohmann::json& doc);

// `jaxpp-sim validate` of a plan document (and jaxpp_sim.validate): plan_from_json, then
// check_program (its message becomes the one entry of "errors", "ok" false), then, for a
// well-formed program, check_plan (InputError: a program that contradicts the rest of the file is
// bad input). Fields: file, kind "plan", ok, errors, num_actors, num_stages, num_microbatches,
// num_instructions.
nlohmann::ordered_json plan_file_report_json(const nlohmann::json& doc, const std::string& path);

}  // namespace jaxpp
