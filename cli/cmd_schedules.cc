// jaxpp-sim schedules: the built-in pipeline schedules (see docs/schedules.md).
#include <algorithm>
#include <iostream>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "graph/error.h"
#include "schedules/registry.h"
#include "schedules/shardy.h"

namespace jaxpp::cli {
namespace {

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

int run_schedules(int argc, char** argv) {
  cxxopts::Options options("jaxpp-sim schedules",
                           "List the built-in pipeline schedules: names, aliases, description "
                           "and constraints (p actors, S stages, m microbatches)");
  // clang-format off
  options.add_options()
      ("json", "print JSON instead of a table")
      ("h,help", "show this help");
  // clang-format on
  const std::optional<cxxopts::ParseResult> parsed = parse_flags(options, argc, argv, "schedules");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  if (args.count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const ScheduleInfo& info : all_schedules()) {
      out.push_back({{"name", info.name},
                     {"aliases", info.aliases},
                     {"description", info.description},
                     {"constraints", info.constraints}});
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  size_t name_width = 4;
  for (const ScheduleInfo& info : all_schedules())
    name_width = std::max(name_width, info.name.size());
  for (const ScheduleInfo& info : all_schedules()) {
    std::cout << info.name << std::string(name_width + 2 - info.name.size(), ' ')
              << info.description << "\n";
    const std::string pad(name_width + 2, ' ');
    if (!info.aliases.empty()) std::cout << pad << "aliases: " << join(info.aliases, ", ") << "\n";
    std::cout << pad << "constraints: " << info.constraints << "\n";
  }
  std::cout << "\n"
            << kParallelPipelinesWithWrapAround
            << " (Shardy's, forward only, m = p) is printed by show only: "
               "jaxpp-sim show --schedule "
            << kParallelPipelinesWithWrapAround << " --pp P\n";
  std::cout << "\nNames are case-insensitive; '-', '_' and spaces are ignored. "
               "Show one: jaxpp-sim show --schedule NAME --pp P --microbatches M\n";
  return kExitOk;
}

const CommandRegistration kSchedulesCommand{"schedules", "List the built-in pipeline schedules",
                                            run_schedules};

}  // namespace
}  // namespace jaxpp::cli
