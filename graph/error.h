// Errors for bad user input.
//
// Every module reports bad input (a malformed file, a missing field, an impossible parallel
// configuration, a schedule that deadlocks) by throwing InputError. Its message is one line
// that names where (file, field or position) and why, for example
//   model.json: field 'layers': expected a positive integer, got -3
// Only cli/ catches it and turns it into a message on stderr and a non-zero exit code.
// Programmer errors (broken invariants) are asserts with a message, never InputError.
#pragma once

#include <stdexcept>
#include <string>

namespace jaxpp {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

// Throws InputError("<where>: <what>"). `where` is a file, a field path or a position.
[[noreturn]] void throw_input_error(const std::string& where, const std::string& what);

}  // namespace jaxpp
