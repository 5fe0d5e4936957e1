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
#include "schedules/summary.h"
#include "schedules/timeline.h"
#include "schedules/validate.h"
#include "simulator/plan_check.h"

namespace jaxpp::cli {
namespace {

int validate_plan(const nlohmann::json& doc, const std::string& path, bool json) {
  // simulator/plan_check.h: a well-formed program that contradicts the rest of the file throws
  // (bad input, exit 2); a malformed program is reported (exit 1).
  const nlohmann::ordered_json report = plan_file_report_json(doc, path);
  const bool ok = report["ok"].get<bool>();
  if (json) {
    std::cout << report.dump(2) << "\n";
  } else if (ok) {
    std::cout << "OK: " << path << ": plan, program with " << report["num_actors"].get<int>()
              << " actors, " << report["num_stages"].get<int>() << " stages, "
              << report["num_microbatches"].get<int>() << " microbatches, "
              << report["num_instructions"].get<int64_t>()
              << " instructions; every send has its recv\n";
  } else {
    std::cout << "INVALID: " << path << ": plan program: " << report["errors"][0].get<std::string>()
              << "\n";
  }
  return ok ? kExitOk : kExitFailure;
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
  if (is_plan_document(doc)) return validate_plan(doc, path, json);

  const Schedule schedule = csv ? parse_schedule_csv(text, path) : custom_schedule_from_json(doc, path);
  const ValidationReport report = validate_schedule(schedule);
  if (json) {
    const nlohmann::ordered_json out = schedule_file_report_json(path, schedule, report);
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
  std::cout << "\nunit-cost makespan (F=1, B=2, I=W=1): " << unit_cost_timeline(schedule).makespan
            << "\n";
  return kExitOk;
}

const CommandRegistration kValidateCommand{"validate", "Check a custom schedule or a plan file", run_validate};

}  // namespace
}  // namespace jaxpp::cli
