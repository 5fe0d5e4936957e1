// parallel_for(n, threads, body): body(i) for every i in [0, n) on up to `threads` threads (0 = one
// per hardware thread), items handed out one at a time from a shared counter, so long and short
// items balance. The calling thread is one of the workers. Exceptions do not escape a worker:
// each item's is kept, and after every thread has joined the one of the lowest index is rethrown,
// so which error the caller sees does not depend on timing. When the system cannot start a thread
// (thread or address-space limits), the threads already started (at least the caller) do the work.
//
//   std::vector<Result> out(items.size());
//   parallel_for(items.size(), options.threads, [&](size_t i) { out[i] = work(items[i]); });
//
// Results go to disjoint slots (as above) or under the caller's own lock; the explorer's
// configuration units and validate-model's corpus rows use it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace jaxpp {

// The number of threads `requested` asks for (0 or less: one per hardware thread), at most `n`
// and at least 1.
inline int resolve_threads(int requested, size_t n) {
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const size_t wanted = static_cast<size_t>(requested > 0 ? requested : hardware);
  return static_cast<int>(std::max<size_t>(1, std::min(wanted, n)));
}

template <typename Body>
void parallel_for(size_t n, int threads, Body&& body) {
  if (n == 0) return;
  const int count = resolve_threads(threads, n);
  std::vector<std::exception_ptr> failures(n);
  std::atomic<size_t> next{0};
  const auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        body(i);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(count - 1));
  for (int t = 1; t < count; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // the system starts no more threads (limits): the threads started do the work
    }
  }
  worker();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& f : failures)
    if (f) std::rethrow_exception(f);
}

}  // namespace jaxpp
