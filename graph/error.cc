#include "graph/error.h"

namespace jaxpp {

void throw_input_error(const std::string& where, const std::string& what) {
  throw InputError(where.empty() ? what : where + ": " + what);
}

}  // namespace jaxpp
