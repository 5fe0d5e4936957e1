// Release at exit: a process that is about to end need not free its large structures block by
// block. Destroying a lowered program and its schedule (hundreds of thousands of heap blocks)
// costs a tenth of a `jaxpp-sim simulate` process; the kernel takes the whole address space
// back at exit anyway.
//
// enable_release_at_exit() is called once by the command-line tool's main(). From then on,
// release_at_exit(std::move(value)) moves `value` into storage that lives until the process
// ends, so its destructor never runs; that storage stays reachable from a global, so leak
// checkers (LeakSanitizer, valgrind) count it as reachable, not leaked. Without the call (the
// library, tests, benchmarks, the Python module), release_at_exit does nothing and the value is
// destroyed by its owner as usual, so long-running processes never accumulate memory.
//
// Only values whose destructors have no effect beyond freeing memory may be released this way
// (no files to flush, no threads to join).
//
// Usage:
//   Schedule schedule = make_schedule(...);
//   ...
//   release_at_exit(std::move(schedule));  // last use; the moved-from value is destroyed cheaply
#pragma once

#include <atomic>
#include <type_traits>
#include <utility>

namespace jaxpp {
namespace release_at_exit_detail {

struct Kept {
  virtual ~Kept() = default;
  Kept* next = nullptr;
};

template <typename T>
struct KeptValue final : Kept {
  explicit KeptValue(T&& v) : value(std::move(v)) {}
  T value;
};

inline std::atomic<bool> enabled{false};
// The list of kept values. A global, so what it holds stays reachable until the process ends.
inline std::atomic<Kept*> kept{nullptr};

}  // namespace release_at_exit_detail

// Turns release_at_exit on for the rest of the process (the command-line tool only).
inline void enable_release_at_exit() {
  release_at_exit_detail::enabled.store(true, std::memory_order_relaxed);
}

inline bool release_at_exit_enabled() {
  return release_at_exit_detail::enabled.load(std::memory_order_relaxed);
}

// When enabled, moves `value` into storage that is never freed (see above); otherwise leaves it
// untouched, to be destroyed by its owner.
template <typename T>
void release_at_exit(T&& value) {
  static_assert(!std::is_lvalue_reference_v<T> && !std::is_const_v<T>,
                "release_at_exit takes an rvalue: release_at_exit(std::move(x))");
  if (!release_at_exit_enabled()) return;
  namespace d = release_at_exit_detail;
  d::Kept* node = new d::KeptValue<T>(std::move(value));
  node->next = d::kept.load(std::memory_order_relaxed);
  while (!d::kept.compare_exchange_weak(node->next, node, std::memory_order_release,
                                        std::memory_order_relaxed)) {
  }
}

}  // namespace jaxpp
