// Test helper: the message of the InputError a call throws.
#pragma once

#include <functional>
#include <string>

#include "graph/error.h"

namespace jaxpp {

// What `fn` throws as an InputError, or "<no error>" when it returns.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace jaxpp
