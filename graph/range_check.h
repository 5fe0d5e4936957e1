// Range checks of user-given numbers, shared by the CLI's flags (cli/flags.h int_flag_in,
// double_flag_in) and the Python module's keyword arguments: InputError naming `where`
// ("--steps"), e.g. "--steps: expected a number of steps in [1, 100000], got 0".
#pragma once

#include <string>

namespace jaxpp {

int check_int_in(int value, const std::string& where, int lo, int hi, const std::string& what);
// Also refuses NaN and infinities.
double check_double_in(double value, const std::string& where, double lo, double hi,
                       const std::string& what);

// A decimal number: [+-] digits [. digits] [e [+-] digits], nothing else (strtod alone also
// reads hexadecimal "0x10", "inf", "nan" and "infinity"; a stream stops at the first character
// that is not a number and keeps what it read): CSV cells of a corpus, validate-model's --band,
// every decimal flag (cli/flags.h).
bool is_decimal_number(const std::string& text);

// The text of a number that a flag or argument cannot take, as an InputError naming `where`: a
// decimal number that overflows a double ("1e400": "expected a whole number within the flag's
// range, got '1e400'") or text that is not a decimal number ("nan", "5,abc": "expected a number,
// got 'nan'"). The CLI's flags (cli/flags.cc) and the Python module's arguments share it.
[[noreturn]] void throw_unreadable_number(const std::string& where, const std::string& text);

}  // namespace jaxpp
