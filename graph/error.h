// Errors for bad user input.
//
// Every module reports bad input (a malformed file, a missing field, an impossible parallel
// configuration, a schedule that deadlocks) by throwing InputError. Its message is one line
// that names where (file, field or position) and why, for example
//   model.json: field 'layers': expected a positive integer, got -3
// Only cli/ catches it and turns it into a message on stderr and a non-zero exit code.
// Programmer errors (broken invariants) are asserts with a message, never InputError.
// The message is kept on one line whatever a file held: control characters that reach it (a
// field value echoed back, such as a corpus row id "a\nb") are written as escapes (\n, \r, \t,
// \xNN), so an error never spans lines nor moves the terminal's cursor.
#pragma once

#include <stdexcept>
#include <string>

namespace jaxpp {

// `text` with every control character (below 0x20, and 0x7f) written as an escape: "\n", "\r",
// "\t", else "\xNN". Other bytes (UTF-8 included) are kept.
std::string one_line(const std::string& text);

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(one_line(message)) {}
};

// Throws InputError("<where>: <what>"). `where` is a file, a field path or a position.
[[noreturn]] void throw_input_error(const std::string& where, const std::string& what);

}  // namespace jaxpp
