#include "cli/flags.h"

#include <iostream>

#include "graph/error.h"

namespace jaxpp::cli {

std::optional<cxxopts::ParseResult> parse_flags(cxxopts::Options& options, int argc, char** argv,
                                                const std::string& command, bool print_help) {
  cxxopts::ParseResult args = options.parse(argc, argv);
  if (args.count("help")) {
    if (print_help) std::cout << options.help() << "\n";
    return std::nullopt;
  }
  if (!args.unmatched().empty())
    throw_input_error(command, "unexpected argument '" + args.unmatched()[0] + "'");
  return args;
}

}  // namespace jaxpp::cli
