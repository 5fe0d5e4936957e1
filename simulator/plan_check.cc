#include "simulator/plan_check.h"

#include <algorithm>
#include <array>

#include "costmodel/analytic_cost.h"
#include "costmodel/hetero_cost.h"
#include "costmodel/cluster.h"
#include "graph/error.h"
#include "graph/assignment.h"
#include "schedules/assigned.h"
#include "schedules/lower.h"
#include "schedules/moe_pairing.h"
#include "schedules/registry.h"

namespace jaxpp {
namespace {

std::string field(const std::string& source, const std::string& name) {
  return source + ": field '" + name + "'";
}

void check_config(const Plan& plan, const std::string& source) {
  const ParallelConfig& c = plan.config;
  const std::string where = field(source, "config");
  const int64_t gpus = int64_t{c.pp} * c.tp * c.dp * c.cp;
  if (gpus != c.gpus && plan.meshes.empty())  // heterogeneous: check_hetero_meshes
    throw_input_error(where, "gpus " + std::to_string(c.gpus) +
                                 " is not pp·tp·dp·cp = " + std::to_string(c.pp) + "·" +
                                 std::to_string(c.tp) + "·" + std::to_string(c.dp) + "·" +
                                 std::to_string(c.cp) + " = " + std::to_string(gpus));
  const int64_t batch = int64_t{c.dp} * c.microbatch_size * c.num_microbatches;
  if (batch != c.global_batch)
    throw_input_error(
        where, "global_batch " + std::to_string(c.global_batch) +
                   " is not dp·microbatch_size·num_microbatches = " + std::to_string(c.dp) + "·" +
                   std::to_string(c.microbatch_size) + "·" + std::to_string(c.num_microbatches) +
                   " = " + std::to_string(batch));
  std::vector<int> tps{c.tp};
  for (const ActorMesh& m : plan.meshes) tps.push_back(m.tp);
  for (int tp : tps)
    if (const std::string why = tp_heads_error(plan.model, tp); !why.empty())
      throw_input_error(where, why);
  if (c.tp_comm_overlap && c.tp > 1 && !c.sequence_parallel)
    throw_input_error(where, "tp_comm_overlap needs sequence_parallel");
  const int64_t stages = int64_t{c.pp} * c.virtual_stages;
  if (plan.assignment) {  // stages from the assignment: v is the most stages on one actor
    const int most = max_stages_per_actor(plan.placement);
    if (plan.placement.num_actors == c.pp && c.virtual_stages != most)
      throw_input_error(where, "virtual_stages " + std::to_string(c.virtual_stages) +
                                   " is not the most stages one actor holds in the assignment's "
                                   "placement (" + std::to_string(most) + ")");
  } else if (stages != plan.partition.num_stages())
    throw_input_error(where, "pp·virtual_stages = " + std::to_string(c.pp) + "·" +
                                 std::to_string(c.virtual_stages) + " = " + std::to_string(stages) +
                                 " stages, but the partition has " +
                                 std::to_string(plan.partition.num_stages()));
  if (plan.placement.num_actors != c.pp)
    throw_input_error(field(source, "placement"),
                      "places stages on " + std::to_string(plan.placement.num_actors) +
                          " actors but config.pp is " + std::to_string(c.pp));
  if (plan.program.num_stages != plan.partition.num_stages())
    throw_input_error(field(source, "program"), "has " + std::to_string(plan.program.num_stages) +
                                                    " stages but the partition has " +
                                                    std::to_string(plan.partition.num_stages()));
}

// The schedule a program executes: each actor's compute instructions, in order.
Schedule schedule_of(const Plan& plan) {
  const Program& program = plan.program;
  Schedule s;
  s.name = plan.config.schedule;
  s.placement = plan.placement;
  s.num_stages = program.num_stages;
  s.num_microbatches = program.num_microbatches;
  s.split_backward.assign(program.num_stages, false);
  s.actors.resize(program.actors.size());
  for (size_t r = 0; r < program.actors.size(); ++r) {
    for (const Instruction& ins : program.actors[r]) {
      if (ins.op != OpKind::kCompute) continue;
      s.actors[r].emplace_back(ins.tasks.begin(), ins.tasks.end());
      for (const TaskRef& t : ins.tasks)
        if (t.kind == TaskKind::kW && t.stage >= 0 && t.stage < program.num_stages)
          s.split_backward[t.stage] = true;
    }
  }
  return s;
}

void check_schedule_name(const Plan& plan, const Schedule& schedule, const std::string& source) {
  const std::string& name = plan.config.schedule;
  if (find_schedule(name) == nullptr) return;  // "custom" or a file's own name
  ScheduleParams params;
  params.num_actors = plan.config.pp;
  params.num_stages = schedule.num_stages;
  params.num_microbatches = schedule.num_microbatches;
  for (const bool fuse : {false, true}) {
    params.fuse_steady_state = fuse;
    Schedule expected;
    try {
      expected = plan.assignment ? schedule_on_placement(name, plan.placement,
                                                         schedule.num_microbatches, fuse,
                                                         plan.assignment->where())
                                 : generate_schedule(name, params);
    } catch (const InputError& e) {
      if (fuse) break;  // only some schedules fuse their steady state
      throw_input_error(field(source, "config"),
                        "schedule '" + name + "' cannot describe this program: " + e.what());
    }
    // Megatron-style pairing of the all-to-all overlap (build_plan does the same).
    if (plan.config.moe_overlap == MoeOverlap::k1F1B && plan.config.ep > 1) {
      try {
        expected = pair_backward_forward(expected, "schedule");
      } catch (const InputError&) {
        continue;
      }
    }
    if (expected.actors == schedule.actors && expected.placement == schedule.placement) return;
  }
  throw_input_error(field(source, "config"),
                    "schedule '" + name + "' for pp " + std::to_string(plan.config.pp) + ", " +
                        std::to_string(schedule.num_stages) + " stages and " +
                        std::to_string(schedule.num_microbatches) +
                        " microbatches is not the program's compute order");
}

// Which byte rule gives an instruction's size, for the message.
std::string size_rule(const Instruction& ins) {
  if (ins.op == OpKind::kAllReduce) return "the gradient of stage " + std::to_string(ins.stage);
  if (ins.op == OpKind::kAllGather) return "the weights of stage " + std::to_string(ins.stage);
  const TaskRef& t = ins.tasks[0];
  const int producer = t.kind == TaskKind::kF ? t.stage : t.stage - 1;
  return "the activation of stage " + std::to_string(producer);
}

bool same_but_bytes(const Instruction& a, const Instruction& b) {
  Instruction c = a;
  c.bytes = b.bytes;
  return c == b;
}

void check_program_is_the_lowering(const Plan& plan, const Schedule& schedule,
                                   const LoweringOptions& lo, const std::string& source) {
  const std::string where = field(source, "program");
  Program expected;
  try {
    expected = lower(schedule, lo);
  } catch (const InputError& e) {
    throw_input_error(
        where, std::string("its compute instructions are not a valid schedule: ") + e.what());
  }
  const Program& program = plan.program;
  for (size_t r = 0; r < program.actors.size(); ++r) {
    const std::vector<Instruction>& got = program.actors[r];
    const std::vector<Instruction>& want = expected.actors[r];
    const size_t n = std::min(got.size(), want.size());
    for (size_t i = 0; i < n; ++i) {
      if (got[i] == want[i]) continue;
      const std::string at = "actor " + std::to_string(r) + ", instruction " + std::to_string(i) +
                             " (" + to_string(got[i]) + ")";
      if (same_but_bytes(got[i], want[i]))
        throw_input_error(where, at + ": " + std::to_string(got[i].bytes) +
                                     " bytes, but the model and configuration give " +
                                     std::to_string(want[i].bytes) + " (" + size_rule(want[i]) +
                                     ")");
      throw_input_error(where, at + ": the lowering of the program's own compute order has " +
                                   to_string(want[i]) +
                                   " here (tags, dependencies and peers "
                                   "must be as lowered)");
    }
    if (got.size() != want.size())
      throw_input_error(where, "actor " + std::to_string(r) + " has " + std::to_string(got.size()) +
                                   " instructions, but the lowering "
                                   "of its compute order has " +
                                   std::to_string(want.size()));
  }
}

// Top-level metrics the simulator writes as numbers >= 0 (simulator/plan_builder.h).
constexpr std::array kNumericMetrics = {"step_time_s",
                                        "makespan_s",
                                        "bubble_rate",
                                        "tokens_per_s",
                                        "tflops_per_gpu",
                                        "mfu",
                                        "hfu",
                                        "model_flops_per_iteration",
                                        "hardware_flops_per_iteration",
                                        "gpus",
                                        "bubble_actor",
                                        "collective_bytes"};

void check_predicted(const nlohmann::json& predicted, const std::string& source) {
  if (predicted.is_null()) return;
  const std::string where = field(source, "predicted");
  if (!predicted.is_object())
    throw_input_error(
        where, "expected an object of metrics or null, got " + predicted.dump().substr(0, 40));
  for (const char* key : kNumericMetrics) {
    const auto it = predicted.find(key);
    if (it == predicted.end()) continue;
    if (!it->is_number() || it->get<double>() < 0)
      throw_input_error(where + ": field '" + key + "'",
                        "expected a number >= 0, got " + it->dump().substr(0, 40));
  }
  const auto warnings = predicted.find("warnings");
  if (warnings != predicted.end()) {
    const bool strings =
        warnings->is_array() && std::all_of(warnings->begin(), warnings->end(),
                                            [](const nlohmann::json& w) { return w.is_string(); });
    if (!strings)
      throw_input_error(where + ": field 'warnings'",
                        "expected a list of strings, got " + warnings->dump().substr(0, 40));
  }
}

}  // namespace

void check_plan(const Plan& plan, const std::string& source) {
  check_config(plan, source);
  if (plan.cluster.is_null())
    throw_input_error(field(source, "cluster"), "missing (the transfer sizes depend on it)");
  const Schedule schedule = schedule_of(plan);
  LoweringOptions lo;
  if (plan.meshes.empty()) {
    const ClusterSpec cluster = cluster_from_json(plan.cluster, field(source, "cluster"));
    check_schedule_name(plan, schedule, source);
    try {
      lo = lowering_options_of(
          AnalyticCost(plan.model, plan.partition, plan.placement, plan.config, cluster),
          schedule.num_stages);
    } catch (const InputError& e) {
      throw_input_error(field(source, "config"), e.what());
    }
  } else {
    // Heterogeneous: each kind's actors use exactly its GPUs (simulator/hetero_plan.h).
    const HeteroCluster cluster = hetero_cluster_from_json(plan.cluster, field(source, "cluster"));
    const std::vector<int> kinds = mesh_kind_indices(cluster, plan.meshes, field(source, "meshes"));
    std::vector<int64_t> used(cluster.kinds.size(), 0);
    for (size_t r = 0; r < kinds.size(); ++r)
      used[kinds[r]] += int64_t{plan.meshes[r].tp} * plan.config.dp * plan.config.cp;
    for (size_t k = 0; k < used.size(); ++k)
      if (used[k] != cluster.kinds[k].gpus)
        throw_input_error(field(source, "meshes"),
                          "the actors of kind " + cluster.kinds[k].name + " use " +
                              std::to_string(used[k]) + " GPUs (tp·dp·cp each) but the kind has " +
                              std::to_string(cluster.kinds[k].gpus));
    if (plan.config.gpus != cluster.total_gpus())
      throw_input_error(field(source, "config"), "gpus " + std::to_string(plan.config.gpus) +
                                                     " is not the cluster's " +
                                                     std::to_string(cluster.total_gpus()));
    check_schedule_name(plan, schedule, source);
    try {
      lo = lowering_options_of(HeteroCost(plan.model, plan.partition, plan.placement,
                                            plan.config, cluster, plan.meshes,
                                            field(source, "meshes")),
                                 schedule.num_stages);
    } catch (const InputError& e) {
      throw_input_error(field(source, "config"), e.what());
    }
  }
  check_program_is_the_lowering(plan, schedule, lo, source);
  check_predicted(plan.predicted, source);
}

void check_plan_file(const Plan& plan, const std::string& source) {
  try {
    check_program(plan.program);
  } catch (const InputError& e) {
    throw_input_error(source, e.what());
  }
  check_plan(plan, source);
}

Schedule plan_schedule(const Plan& plan) { return schedule_of(plan); }

bool is_plan_document(const nlohmann::json& doc) {
  // By its format, or by the fields only a plan has (a schedule file has neither "config" nor
  // "program"): a plan whose format is mistyped is then refused for its format, not read as a
  // schedule and refused for its first plan field.
  return doc.is_object() && ((doc.contains("format") && doc["format"] == "jaxpp-sim-plan") ||
                             doc.contains("config") || doc.contains("program"));
}

nlohmann::ordered_json plan_file_report_json(const nlohmann::json& doc, const std::string& path) {
  const Plan plan = plan_from_json(doc, path);
  std::string error;
  try {
    check_program(plan.program);
  } catch (const InputError& e) {
    error = e.what();
  }
  if (error.empty()) check_plan(plan, path);
  return {{"file", path},
          {"kind", "plan"},
          {"ok", error.empty()},
          {"errors", error.empty() ? nlohmann::json::array() : nlohmann::json::array({error})},
          {"num_actors", plan.program.num_actors},
          {"num_stages", plan.program.num_stages},
          {"num_microbatches", plan.program.num_microbatches},
          {"num_instructions", plan.program.num_instructions()}};
}

}  // namespace jaxpp
