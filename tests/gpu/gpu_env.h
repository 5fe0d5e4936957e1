// What the GPU suite (tests/gpu, ctest label `gpu`) needs to know about the machine: how many
// GPUs this process sees, with the process prepared as `jaxpp-sim run --backend cuda` prepares it
// (CudaPlugin::prepare_process: eager module loading, no NVLS). On a machine without a GPU or
// driver every test skips with "skipped: no GPU" (GTEST_SKIP; ctest reports it as Skipped, not
// passed). The suite is built only with the CUDA plugin, so a plugin that does not load (missing,
// wrong build, CUDA libraries absent) fails every test instead of skipping it.
//
// Usage, first statement of a test:
//   JAXPP_REQUIRE_GPUS(2);  // skips with "skipped: needs 2 GPUs, this machine has 1"
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace jaxpp::testing {

// GPUs visible to this process; 0 without a GPU or a driver. Computed once.
int visible_gpus();
// Why the CUDA plugin did not load; empty when it did.
std::string cuda_plugin_error();

}  // namespace jaxpp::testing

#define JAXPP_REQUIRE_GPUS(n)                                                                \
  do {                                                                                       \
    if (!::jaxpp::testing::cuda_plugin_error().empty())                                      \
      FAIL() << ::jaxpp::testing::cuda_plugin_error();                                       \
    const int jaxpp_gpus_ = ::jaxpp::testing::visible_gpus();                                \
    if (jaxpp_gpus_ == 0) GTEST_SKIP() << "skipped: no GPU";                                 \
    if (jaxpp_gpus_ < (n))                                                                   \
      GTEST_SKIP() << "skipped: needs " << (n) << " GPUs, this machine has " << jaxpp_gpus_; \
  } while (0)
