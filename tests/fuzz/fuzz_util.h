// Shared by the libFuzzer targets in this folder (one per input parser; docs/hardening.md).
//
// The contract under test: a parser either returns a value or throws jaxpp::InputError. Any other
// exception escapes LLVMFuzzerTestOneInput and aborts (libFuzzer reports it as a crash), and so
// does a sanitizer report, a crash or a hang.
//
// Usage:
//   extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
//     return jaxpp::fuzz::with_json(data, size, [](const nlohmann::json& j) {
//       model_from_json(j, "model.json");
//     });
//   }
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/json_util.h"

namespace jaxpp::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `fn`; InputError is the documented rejection and is swallowed.
template <class Fn>
int expect_value_or_input_error(Fn&& fn) {
  try {
    fn();
  } catch (const InputError&) {
  }
  return 0;
}

// The size limit the harness reads under, lowered from kMaxInputFileBytes (graph/limits.h) so that
// libFuzzer's inputs cross it: scripts/build.sh runs the targets with -max_len above it. Above the
// largest seed (tiny_gpipe_options.json, 9.4 KiB).
inline constexpr int64_t kFuzzMaxInputBytes = 16 << 10;

// Reads the input as the command-line tools read every file: through read_input_text (an in-memory
// file, so the regular-file check, the size limit and the NUL-byte check take their real path).
inline std::string read_input(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("jaxpp-fuzz-input", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::abort();  // the harness itself failed, not the parser
  }
  return read_input_text(path, kFuzzMaxInputBytes);
}

// Reads the input (read_input) and parses it as read_json_file does (parse_json_text: syntax
// errors, number overflows, the depth limit and duplicate keys take the real path into
// InputError), and hands the document to `fn`.
template <class Fn>
int with_json(const uint8_t* data, size_t size, Fn&& fn) {
  return expect_value_or_input_error(
      [&] { fn(parse_json_text(read_input(data, size), "input.json")); });
}

// Reads the input (read_input) and hands the text to `fn`.
template <class Fn>
int with_text(const uint8_t* data, size_t size, Fn&& fn) {
  return expect_value_or_input_error([&] { fn(read_input(data, size)); });
}

}  // namespace jaxpp::fuzz
