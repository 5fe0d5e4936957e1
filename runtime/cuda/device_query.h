// CUDA device query: what GPUs this process sees. Compiled only with the CUDA backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jaxpp::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
  int sm_count = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
};

// Devices visible to this process; empty when the driver reports none (no GPU on this machine).
std::vector<DeviceInfo> query_devices();
// "CUDA runtime 13000, NCCL 2.x.y, cuBLAS ..." — versions the backend was built against.
std::string library_versions();

}  // namespace jaxpp::cuda
