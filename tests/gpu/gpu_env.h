// What the GPU suite (tests/gpu, ctest label `gpu`) needs to know about the machine: how many
// GPUs this process sees, with the process prepared as `jaxpp-sim run --backend cuda` prepares it
// (cuda::prepare_process: eager module loading, no NVLS). On a machine without a GPU or driver
// every test skips with "skipped: no GPU" (GTEST_SKIP; ctest reports it as Skipped, not passed).
//
// Usage, first statement of a test:
//   JAXPP_REQUIRE_GPUS(2);  // skips with "skipped: needs 2 GPUs, this machine has 1"
#pragma once

#include <gtest/gtest.h>

namespace jaxpp::testing {

// GPUs visible to this process; 0 without a GPU or a driver. Computed once.
int visible_gpus();

}  // namespace jaxpp::testing

#define JAXPP_REQUIRE_GPUS(n)                                                                \
  do {                                                                                       \
    const int jaxpp_gpus_ = ::jaxpp::testing::visible_gpus();                                \
    if (jaxpp_gpus_ == 0) GTEST_SKIP() << "skipped: no GPU";                                 \
    if (jaxpp_gpus_ < (n))                                                                   \
      GTEST_SKIP() << "skipped: needs " << (n) << " GPUs, this machine has " << jaxpp_gpus_; \
  } while (0)
