// Flag parsing shared by every subcommand (cxxopts).
//
//   const auto args = parse_flags(options, argc, argv, "graph");
//   if (!args) return kExitOk;  // --help was printed
//
// parse_flags prints the help on -h / --help (when print_help; explore prints it on MPI rank 0
// only) and returns nullopt; a positional argument the command does not take is an InputError
// naming the command ("graph: unexpected argument 'x'"); cxxopts' own exceptions (unknown flag,
// wrong type) pass through to main(), which reports them as bad flags.
#pragma once

#include <optional>
#include <string>

#include <cxxopts.hpp>

namespace jaxpp::cli {

std::optional<cxxopts::ParseResult> parse_flags(cxxopts::Options& options, int argc, char** argv,
                                                const std::string& command, bool print_help = true);

}  // namespace jaxpp::cli
