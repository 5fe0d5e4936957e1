#include "cli/flags.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <typeinfo>
#include <vector>

#include "graph/error.h"
#include "graph/range_check.h"
#include "runtime/comm_plan.h"

namespace jaxpp::cli {

namespace {

// The flag of argv whose value cxxopts could not read ("--flag V" or "--flag=V"), as a one-line
// error naming it; cxxopts' own message names only the value ("Argument 'nan' failed to parse").
[[noreturn]] void throw_unreadable_value(int argc, char** argv, const std::string& fallback) {
  // The message is "Argument " + LQUOTE + value + RQUOTE + " failed to parse", the quotes one
  // character (' or a 3-byte UTF-8 quote) each.
  const std::string head = "Argument ", tail = " failed to parse";
  std::string unread;
  if (fallback.rfind(head, 0) == 0 && fallback.size() >= head.size() + tail.size() &&
      fallback.compare(fallback.size() - tail.size(), tail.size(), tail) == 0) {
    std::string quoted = fallback.substr(head.size(), fallback.size() - head.size() - tail.size());
    for (const std::string q : {"\u2018", "\u2019", "'"}) {
      if (quoted.rfind(q, 0) == 0) quoted.erase(0, q.size());
      if (quoted.size() >= q.size() && quoted.compare(quoted.size() - q.size(), q.size(), q) == 0)
        quoted.erase(quoted.size() - q.size());
    }
    unread = quoted;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind("--", 0) != 0) continue;
    const size_t eq = word.find('=');
    std::string flag = word.substr(0, eq), value;
    if (eq != std::string::npos) {
      value = word.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[i + 1];
    } else {
      continue;
    }
    if (value != unread) continue;
    throw_unreadable_number(flag, value);
  }
  throw_input_error("arguments", fallback);
}

}  // namespace

std::optional<cxxopts::ParseResult> parse_flags(cxxopts::Options& options, int argc, char** argv,
                                                const std::string& command, bool print_help) {
  std::optional<cxxopts::ParseResult> parsed;
  try {
    parsed = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    throw_unreadable_value(argc, argv, e.what());
  }
  cxxopts::ParseResult& args = *parsed;
  if (args.count("help")) {
    if (print_help) std::cout << options.help() << "\n";
    return std::nullopt;
  }
  if (!args.unmatched().empty())
    throw_input_error(command, "unexpected argument '" + args.unmatched()[0] + "'");
  std::map<std::string, std::vector<std::string>> given;
  for (const cxxopts::KeyValue& kv : args.arguments()) given[kv.key()].push_back(kv.value());
  // cxxopts reads a decimal flag with a stream, which stops at the first character that is not
  // part of a number and keeps what it read ("--t-f 5,abc" became 5, "--max-memory-gib 80GiB"
  // 80); integer flags it already parses strictly. A decimal flag's whole text must be a number.
  for (const cxxopts::KeyValue& kv : args.arguments()) {
    try {
      (void)args[kv.key()].as<double>();
    } catch (const std::bad_cast&) {
      continue;  // not a decimal flag
    }
    if (!is_decimal_number(kv.value())) throw_unreadable_number("--" + kv.key(), kv.value());
  }
  for (const cxxopts::KeyValue& kv : args.arguments()) {
    const std::vector<std::string>& values = given[kv.key()];
    if (values.size() < 2) continue;
    std::string list;
    for (const std::string& v : values) list += (list.empty() ? "" : ", ") + v;
    throw_input_error("--" + kv.key(), "given " + std::to_string(values.size()) + " times (" +
                                           list + "); give each flag once");
  }
  return args;
}

void refuse_flags(const cxxopts::ParseResult& args, std::initializer_list<const char*> flags,
                  const std::string& why) {
  for (const char* flag : flags)
    if (args.count(flag)) throw_input_error(std::string("--") + flag, why);
}

std::vector<std::string> name_list_flag(const std::string& flag, const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    if (item.empty())
      throw_input_error("--" + flag,
                        "expected a comma-separated list of names, got '" + text + "'");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<int> positive_int_list_flag(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  size_t start = 0;
  while (true) {
    // Digits only (stoi alone also read " 4", "+4" and "4x"'s prefix); an empty item (",", "4,")
    // is refused as one that is not a number, not as a missing name.
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    int v = 0;
    const bool digits = !item.empty() && item.size() <= 9 &&
                        item.find_first_not_of("0123456789") == std::string::npos;
    if (digits) v = std::stoi(item);
    if (!digits || v < 1)
      throw_input_error("--" + flag, "expected a comma-separated list of positive integers, got '" +
                                         text + "'");
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void refuse_together(const cxxopts::ParseResult& args, const char* a, const char* b,
                     const std::string& why) {
  if (args.count(a) && args.count(b))
    throw_input_error(std::string("--") + a + " and --" + b, why);
}

void refuse_threads_backend_under_mpirun(BackendKind backend, const std::string& command) {
  if (backend != BackendKind::kThreads) return;
  const int size = mpi_launcher_world_size();
  if (size <= 1) return;
  throw_input_error("--backend threads",
                    "this process is one of " + std::to_string(size) +
                        " that an MPI launcher started, and each would " + command +
                        " the whole job on its own threads; give --backend mpi (one process "
                        "per worker) or start one process without mpirun");
}

double double_flag_in(const cxxopts::ParseResult& args, const std::string& flag, double lo,
                      double hi, const std::string& what) {
  return check_double_in(args[flag].as<double>(), "--" + flag, lo, hi, what);
}

int int_flag_in(const cxxopts::ParseResult& args, const std::string& flag, int lo, int hi,
                const std::string& what) {
  return check_int_in(args[flag].as<int>(), "--" + flag, lo, hi, what);
}

ExportFormat timeline_format_flag(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  for (const char* known : {".svg", ".png", ".dot", ".json", ".txt"}) {
    if (ext == known) return export_format_from_path(path);
  }
  throw_input_error("--timeline " + path,
                    "unknown extension '" + ext +
                        "' (expected .svg, .png, .dot, .json for a Perfetto/Chrome trace, or .txt "
                        "for a text Gantt chart)");
}

}  // namespace jaxpp::cli
