// Flag parsing shared by every subcommand (cxxopts).
//
//   const auto args = parse_flags(options, argc, argv, "graph");
//   if (!args) return kExitOk;  // --help was printed
//
// parse_flags prints the help on -h / --help (when print_help; explore prints it on MPI rank 0
// only) and returns nullopt; a positional argument the command does not take is an InputError
// naming the command ("graph: unexpected argument 'x'"); a flag given twice is an InputError
// ("--steps: given 2 times (2, 1); give each flag once"), for no command keeps a list of a
// flag's values and taking the last one silently drops the others; cxxopts' own exceptions
// (unknown flag, wrong type) pass through to main(), which reports them as bad flags. A decimal
// flag whose text is not wholly a number ("5,abc", "80GiB", "1e3junk") is an InputError
// ("--t-f: expected a number, got '5,abc'"): cxxopts would keep the number it read first.
//
// Flags that a command would ignore or override in the mode it runs in are refused, never
// dropped (issue 16, class 5; docs/hardening.md): refuse_flags for a flag of the other mode,
// refuse_together for two flags that say the same thing two ways.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "runtime/backend.h"
#include "trace/export.h"

namespace jaxpp::cli {

std::optional<cxxopts::ParseResult> parse_flags(cxxopts::Options& options, int argc, char** argv,
                                                const std::string& command, bool print_help = true);

// The first of `flags` that was given is an InputError "--<flag>: <why>", e.g.
// refuse_flags(args, {"t-f", "t-b"}, "a measured-mode flag, but --model selects model mode").
void refuse_flags(const cxxopts::ParseResult& args, std::initializer_list<const char*> flags,
                  const std::string& why);
// --a and --b both given: InputError "--a and --b: <why>".
void refuse_together(const cxxopts::ParseResult& args, const char* a, const char* b,
                     const std::string& why);

// `--backend threads` in a process that mpirun (or another MPI launcher) started with more than one
// process: every process would run the whole job on its own threads and write the same outputs.
// InputError "--backend threads: this process is one of N that an MPI launcher started; ...".
void refuse_threads_backend_under_mpirun(BackendKind backend, const std::string& command);

// A numeric flag checked against a physically meaningful range [lo, hi] (issue 16, class 3;
// cxxopts has already refused what is not a number, and nan/inf): InputError
// "--<flag>: expected <what> in [lo, hi], got <value>". The flag must have a value (a default or
// given).
double double_flag_in(const cxxopts::ParseResult& args, const std::string& flag, double lo,
                      double hi, const std::string& what);
int int_flag_in(const cxxopts::ParseResult& args, const std::string& flag, int lo, int hi,
                const std::string& what);

// A comma-separated list of positive integers ("4,2") or of non-empty names ("h100-sxm,a100-80g"):
// InputError "--<flag>: expected a comma-separated list of ..., got '<text>'".
std::vector<int> positive_int_list_flag(const std::string& flag, const std::string& text);
std::vector<std::string> name_list_flag(const std::string& flag, const std::string& text);

// The format of a --timeline path (simulate, run), from its extension: InputError
// "--timeline x.tx: unknown extension '.tx' (expected .svg, .png, ...)".
ExportFormat timeline_format_flag(const std::string& path);

}  // namespace jaxpp::cli
