#include "runtime/cuda/device_query.h"

#include <sstream>

#include "runtime/cuda/check.h"

namespace jaxpp::cuda {

std::vector<DeviceInfo> query_devices() {
  int count = 0;
  // No driver or no device is a normal answer on a machine without a GPU, not an error.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    JAXPP_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    devices.push_back({i, prop.name, static_cast<int64_t>(prop.totalGlobalMem),
                       prop.multiProcessorCount, prop.major, prop.minor});
  }
  return devices;
}

std::string library_versions() {
  int runtime = 0;
  JAXPP_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  int nccl = 0;
  JAXPP_NCCL_CHECK(ncclGetVersion(&nccl));
  std::ostringstream out;
  out << "CUDA runtime " << runtime / 1000 << "." << (runtime % 1000) / 10 << ", NCCL "
      << nccl / 10000 << "." << (nccl % 10000) / 100 << "." << nccl % 100 << ", cuBLAS "
      << CUBLAS_VER_MAJOR << "." << CUBLAS_VER_MINOR;
  return out.str();
}

}  // namespace jaxpp::cuda
