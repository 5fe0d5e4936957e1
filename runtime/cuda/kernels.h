// Launchers of the element-wise CUDA kernels of the MLP workload (runtime/cuda/kernels.cu). Each
// enqueues one kernel on `stream` and checks the launch (JAXPP_CUDA_CHECK_LAUNCH).
// The formulas are those of runtime/mlp_math.h, shared with the host loops of HostDevice.
// Pointers are device memory of the current device; n is an element count.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "runtime/device.h"
#include "runtime/link_header.h"

namespace jaxpp::cuda {

void launch_gelu(const double* u, double* a, size_t n, cudaStream_t stream);
void launch_gelu_backward(const double* da, const double* u, double* du, size_t n,
                          cudaStream_t stream);
// dy = scale * (y - t); *loss = sum((y - t)^2) / n, summed by one block in a fixed order, so the
// result is deterministic (it differs from the host's sequential sum in the last bits only).
void launch_mse_loss(const double* y, const double* t, double scale, double* dy, double* loss,
                     size_t n, cudaStream_t stream);
void launch_sgd(double* p, const double* g, double lr, size_t n, cudaStream_t stream);
void launch_adam(double* p, const double* g, double* m, double* v, const AdamStep& step, size_t n,
                 cudaStream_t stream);
// Loads every kernel of kernels.cu on the current device (cudaFuncGetAttributes on each), so none
// is loaded on first launch, when under lazy module loading it may need a context
// synchronisation that a spinning NCCL kernel would block. CudaDevice calls it at construction.
void load_kernels();
// *dst = header (one thread); kernel arguments are copied at launch, so no host buffer must
// outlive the call.
void launch_write_link_header(LinkHeader* dst, LinkHeader header, cudaStream_t stream);

}  // namespace jaxpp::cuda
