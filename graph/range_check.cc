#include "graph/range_check.h"

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

}  // namespace jaxpp
