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

// A numeric flag checked against a physically meaningful range [lo, hi] (issue 16, class 3;
// cxxopts has already refused what is not a number, and nan/inf): InputError
// "--<flag>: expected <what> in [lo, hi], got <value>". The flag must have a value (a default or
// given).
double double_flag_in(const cxxopts::ParseResult& args, const std::string& flag, double lo,
                      double hi, const std::string& what);
int int_flag_in(const cxxopts::ParseResult& args, const std::string& flag, int lo, int hi,
                const std::string& what);

}  // namespace jaxpp::cli
