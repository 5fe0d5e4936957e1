#include "graph/range_check.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "graph/error.h"

namespace jaxpp {
namespace {

std::string range_number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

int check_int_in(int value, const std::string& where, int lo, int hi, const std::string& what) {
  if (value < lo || value > hi) {
    throw_input_error(where, "expected " + what + " in [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "], got " + std::to_string(value));
  }
  return value;
}

double check_double_in(double value, const std::string& where, double lo, double hi,
                       const std::string& what) {
  if (!(std::isfinite(value) && value >= lo && value <= hi)) {
    throw_input_error(where, "expected " + what + " in [" + range_number_text(lo) + ", " +
                                 range_number_text(hi) + "], got " + range_number_text(value));
  }
  return value;
}

bool is_decimal_number(const std::string& cell) {
  size_t i = 0;
  const size_t n = cell.size();
  const auto digits = [&] {
    const size_t start = i;
    while (i < n && std::isdigit(static_cast<unsigned char>(cell[i]))) ++i;
    return i - start;
  };
  if (i < n && (cell[i] == '+' || cell[i] == '-')) ++i;
  size_t mantissa = digits();
  if (i < n && cell[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < n && (cell[i] == 'e' || cell[i] == 'E')) {
    ++i;
    if (i < n && (cell[i] == '+' || cell[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == n;
}

void throw_unreadable_number(const std::string& where, const std::string& text) {
  throw_input_error(where, is_decimal_number(text)
                               ? "expected a whole number within the flag's range, got '" + text +
                                     "'"
                               : "expected a number, got '" + text + "'");
}

}  // namespace jaxpp
