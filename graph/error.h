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

#include <cstddef>
#include <stdexcept>
#include <string>

namespace jaxpp {

// `text` with every control character (below 0x20, and 0x7f) written as an escape: "\n", "\r",
// "\t", else "\xNN", and so is every byte that starts no valid UTF-8 sequence (a flag value of
// Latin-1 bytes echoed back), so the message is one line of UTF-8. Valid UTF-8 is kept.
std::string one_line(const std::string& text);

// The length (1 to 4) of the valid UTF-8 sequence starting at text[i] (RFC 3629: shortest form,
// no surrogates, at most U+10FFFF), or 0 when none starts there.
size_t utf8_sequence_length(const std::string& text, size_t i);

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(one_line(message)) {}
};

// Throws InputError("<where>: <what>"). `where` is a file, a field path or a position.
[[noreturn]] void throw_input_error(const std::string& where, const std::string& what);

}  // namespace jaxpp
