// jaxpp-sim: one binary, subcommands (see `jaxpp-sim --help`).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include <cxxopts.hpp>

#include "cli/command.h"
#include "graph/error.h"

namespace jaxpp::cli {
namespace {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

void print_usage(std::ostream& out) {
  out << "jaxpp-sim: plan, simulate and run MPMD pipeline-parallel training\n\n"
         "Usage: jaxpp-sim <command> [options]   (jaxpp-sim <command> --help for its options)\n\n"
         "Commands:\n";
  for (const Command& c : commands()) {
    out << "  " << c.name << std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ')
        << c.summary << "\n";
  }
}

}  // namespace

const std::vector<Command>& commands() {
  static const bool sorted = [] {
    std::sort(registry().begin(), registry().end(),
              [](const Command& a, const Command& b) { return a.name < b.name; });
    return true;
  }();
  (void)sorted;
  return registry();
}

CommandRegistration::CommandRegistration(std::string name, std::string summary, CommandFn run) {
  registry().push_back({std::move(name), std::move(summary), std::move(run)});
}

}  // namespace jaxpp::cli

int main(int argc, char** argv) {
  using namespace jaxpp::cli;
  if (argc < 2) {
    print_usage(std::cerr);
    return kExitBadInput;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(std::cout);
    return kExitOk;
  }
  if (name == "--version") {
    std::cout << "jaxpp-sim 0.1.0\n";
    return kExitOk;
  }
  for (const Command& c : commands()) {
    if (c.name != name) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const jaxpp::InputError& e) {
      std::cerr << "jaxpp-sim " << name << ": error: " << e.what() << "\n";
      return kExitBadInput;
    } catch (const cxxopts::exceptions::exception& e) {
      std::cerr << "jaxpp-sim " << name << ": error: " << e.what()
                << " (see jaxpp-sim " << name << " --help)\n";
      return kExitBadInput;
    } catch (const std::bad_alloc&) {
      std::cerr << "jaxpp-sim " << name << ": error: out of memory\n";
      return kExitFailure;
    } catch (const std::exception& e) {
      std::cerr << "jaxpp-sim " << name << ": error: " << e.what() << "\n";
      return kExitFailure;
    }
  }
  std::cerr << "jaxpp-sim: error: unknown command '" << name
            << "' (run jaxpp-sim --help for the list)\n";
  return kExitBadInput;
}
