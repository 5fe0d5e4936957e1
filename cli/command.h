// Subcommand registry of the jaxpp-sim binary.
//
// Each subcommand lives in its own cmd_<name>.cc and registers itself:
//   static const CommandRegistration kReg{"graph", "Summarise a model's stages and task graph",
//                                         run_graph};
// A command's function parses its own flags (cxxopts) and returns the exit code. It may throw
// jaxpp::InputError (bad input, exit 2) or cxxopts exceptions (bad flags, exit 2); main() turns
// them into a one-line message on stderr: "jaxpp-sim <command>: error: <message>".
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace jaxpp::cli {

using CommandFn = std::function<int(int argc, char** argv)>;

struct Command {
  std::string name;
  std::string summary;
  CommandFn run;
};

// All registered commands, sorted by name.
const std::vector<Command>& commands();

struct CommandRegistration {
  CommandRegistration(std::string name, std::string summary, CommandFn run);
};

// Exit codes shared by all commands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;    // the work ran and found a problem (e.g. check failed)
inline constexpr int kExitBadInput = 2;   // bad flags or bad input files

}  // namespace jaxpp::cli
