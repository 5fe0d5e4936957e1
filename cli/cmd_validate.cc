// jaxpp-sim validate: check a custom schedule (JSON / PyTorch CSV) or a plan file.
// Exit 0 valid, 1 invalid, 2 unreadable or malformed (docs/schedules.md).
#include <iostream>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/json_util.h"
#include "graph/plan.h"
#include "schedules/custom.h"
#include "schedules/timeline.h"
#include "schedules/validate.h"
#include "simulator/plan_check.h"

namespace jaxpp::cli {
namespace {

bool is_plan(const nlohmann::json& j) {
  return j.is_object() && j.contains("format") && j["format"] == "jaxpp-sim-plan";
}

int validate_plan(const nlohmann::json& doc, const std::string& path, bool json) {
  const Plan plan = plan_from_json(doc, path);
  std::string error;
  try {
    check_program(plan.program);
  } catch (const InputError& e) {
    error = e.what();
  }
  // A well-formed program that contradicts the rest of the file is bad input (exit 2).
  if (error.empty()) check_plan(plan, path);
  if (json) {
    nlohmann::ordered_json out = {
        {"file", path},
        {"kind", "plan"},
        {"ok", error.empty()},
        {"errors", error.empty() ? nlohmann::json::array() : nlohmann::json::array({error})},
        {"num_actors", plan.program.num_actors},
        {"num_stages", plan.program.num_stages},
        {"num_microbatches", plan.program.num_microbatches},
        {"num_instructions", plan.program.num_instructions()}};
    std::cout << out.dump(2) << "\n";
  } else if (error.empty()) {
    std::cout << "OK: " << path << ": plan, program with " << plan.program.num_actors << " actors, "
              << plan.program.num_stages << " stages, " << plan.program.num_microbatches
              << " microbatches, " << plan.program.num_instructions()
              << " instructions; every send has its recv\n";
  } else {
    std::cout << "INVALID: " << path << ": plan program: " << error << "\n";
  }
  return error.empty() ? kExitOk : kExitFailure;
}

int run_validate(int argc, char** argv) {
  cxxopts::Options options("jaxpp-sim validate",
                           "Check a custom schedule (JSON or PyTorch pipelining CSV) or a plan "
                           "file. Exit 0 valid, 1 invalid, 2 unreadable or malformed");
  options.positional_help("FILE");
  // clang-format off
  options.add_options()
      ("file", "schedule or plan file", cxxopts::value<std::string>())
      ("json", "print JSON instead of text")
      ("h,help", "show this help");
  // clang-format on
  options.parse_positional({"file"});
  const std::optional<cxxopts::ParseResult> parsed =
      parse_flags(options, argc, argv, "validate");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("file")) throw_input_error("validate", "missing FILE (a schedule or plan file)");
  const std::string path = args["file"].as<std::string>();
  const bool json = args.count("json") > 0;
  // Read once (a regular text file within the size limit), then tell a plan from a schedule.
  const std::string text = read_input_text(path);
  const bool csv = detect_schedule_format(path, text) == ScheduleFileFormat::kCsv;
  const nlohmann::json doc = csv ? nlohmann::json() : parse_json_text(text, path);
  if (is_plan(doc)) return validate_plan(doc, path, json);

  const Schedule schedule = csv ? parse_schedule_csv(text, path) : custom_schedule_from_json(doc, path);
  const ValidationReport report = validate_schedule(schedule);
  int64_t makespan = -1;
  if (report.ok()) makespan = unit_cost_timeline(schedule).makespan;
  if (json) {
    nlohmann::ordered_json out = {{"file", path},
                                  {"kind", "schedule"},
                                  {"schedule", schedule.name},
                                  {"ok", report.ok()},
                                  {"errors", report.errors},
                                  {"num_actors", schedule.num_actors()},
                                  {"num_stages", schedule.num_stages},
                                  {"num_microbatches", schedule.num_microbatches},
                                  {"stage_to_actor", schedule.placement.stage_to_actor},
                                  {"peak_in_flight", report.peak_in_flight}};
    if (report.ok()) out["makespan_unit"] = makespan;
    std::cout << out.dump(2) << "\n";
    return report.ok() ? kExitOk : kExitFailure;
  }
  if (!report.ok()) {
    std::cout << "INVALID: " << path << ": " << report.errors.size()
              << (report.errors.size() == 1 ? " error" : " errors") << "\n";
    for (const std::string& e : report.errors) std::cout << "  " << e << "\n";
    return kExitFailure;
  }
  std::cout << "OK: " << path << ": " << schedule.num_actors() << " actors, " << schedule.num_stages
            << " stages (" << to_string(schedule.placement.kind) << " placement), "
            << schedule.num_microbatches << " microbatches, " << schedule.num_tasks() << " tasks\n";
  std::cout << "peak in-flight activations per actor (stage-microbatches):";
  for (int v : report.peak_in_flight) std::cout << " " << v;
  std::cout << "\nunit-cost makespan (F=1, B=2, I=W=1): " << makespan << "\n";
  return kExitOk;
}

const CommandRegistration kValidateCommand{"validate", "Check a custom schedule or a plan file", run_validate};

}  // namespace
}  // namespace jaxpp::cli
