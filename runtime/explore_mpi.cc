#include "runtime/explore_mpi.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/mpi_backend.h"

namespace jaxpp {
namespace {

// World size announced by the launcher's environment; 1 when none.
int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    const int n = std::atoi(value);
    if (n > 0) return n;
  }
  return 1;
}

}  // namespace

ExploreMpiWorld explore_mpi_world() {
  if (launcher_world_size() <= 1) return {};
  MpiSession& session = MpiSession::get();
  return {session.rank(), session.size()};
}

std::vector<std::string> explore_mpi_gather(const std::string& mine) {
  if (launcher_world_size() <= 1) return {mine};
  const std::vector<std::vector<char>> parts =
      mpi_gather_bytes(std::vector<char>(mine.begin(), mine.end()));
  std::vector<std::string> out;
  out.reserve(parts.size());
  for (const std::vector<char>& p : parts) out.emplace_back(p.begin(), p.end());
  return out;
}

void explore_mpi_abort(const std::string& message, int code) {
  if (launcher_world_size() > 1) mpi_abort(message, code);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::exit(code);
}

}  // namespace jaxpp
