// LinkHeader: the fixed-size record that precedes every tensor on a cuda link
// (runtime/comm_plan.h). Plain data with no dependencies, so CUDA kernels (runtime/cuda/kernels.cu)
// and host code share it. Sent as 24 raw bytes; both ends run the same binary, so layout and
// endianness agree.
#pragma once

#include <cstdint>

namespace jaxpp {

struct LinkHeader {
  double ready_at_s;  // emulated ready time of the message (seconds, run clock)
  int64_t key;        // step * (max tag + 1) + tag, as the executor builds it
  int64_t count;      // fp64 values that follow on the link (0: none)
};
static_assert(sizeof(LinkHeader) == 24, "LinkHeader is sent as 24 bytes");

}  // namespace jaxpp
