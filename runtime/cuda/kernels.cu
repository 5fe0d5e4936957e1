#include "runtime/cuda/kernels.h"

#include "runtime/cuda/check.h"
#include "runtime/mlp_math.h"

namespace jaxpp::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

// Grid-stride loops: any n with a bounded grid.
__global__ void gelu_kernel(const double* u, double* a, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    a[i] = mlp_math::gelu(u[i]);
}

__global__ void gelu_backward_kernel(const double* da, const double* u, double* du, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    du[i] = da[i] * mlp_math::gelu_grad(u[i]);
}

// One block: thread j sums elements j, j + kThreads, ... then a fixed-shape tree reduction.
__global__ void mse_loss_kernel(const double* y, const double* t, double scale, double* dy,
                                double* loss, size_t n) {
  __shared__ double partial[kThreads];
  double acc = 0;
  for (size_t i = threadIdx.x; i < n; i += kThreads) {
    double d = y[i] - t[i];
    dy[i] = scale * d;
    acc += d * d;
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = partial[0] / static_cast<double>(n);
}

__global__ void sgd_kernel(double* p, const double* g, double lr, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] -= lr * g[i];
}

__global__ void adam_kernel(double* p, const double* g, double* m, double* v, AdamStep s,
                            size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    mlp_math::adam_update(p[i], g[i], m[i], v[i], s.lr, s.beta1, s.beta2, s.eps, s.bias_correction1,
                          s.bias_correction2);
}

__global__ void write_link_header_kernel(LinkHeader* dst, LinkHeader header) { *dst = header; }

}  // namespace

void load_kernels() {
  cudaFuncAttributes attributes{};
  JAXPP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, gelu_kernel));
  JAXPP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, gelu_backward_kernel));
  JAXPP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, mse_loss_kernel));
  JAXPP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, sgd_kernel));
  JAXPP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, adam_kernel));
  JAXPP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, write_link_header_kernel));
}

void launch_gelu(const double* u, double* a, size_t n, cudaStream_t stream) {
  gelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(u, a, n);
  JAXPP_CUDA_CHECK_LAUNCH();
}

void launch_gelu_backward(const double* da, const double* u, double* du, size_t n,
                          cudaStream_t stream) {
  gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(da, u, du, n);
  JAXPP_CUDA_CHECK_LAUNCH();
}

void launch_mse_loss(const double* y, const double* t, double scale, double* dy, double* loss,
                     size_t n, cudaStream_t stream) {
  mse_loss_kernel<<<1, kThreads, 0, stream>>>(y, t, scale, dy, loss, n);
  JAXPP_CUDA_CHECK_LAUNCH();
}

void launch_sgd(double* p, const double* g, double lr, size_t n, cudaStream_t stream) {
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, g, lr, n);
  JAXPP_CUDA_CHECK_LAUNCH();
}

void launch_adam(double* p, const double* g, double* m, double* v, const AdamStep& step, size_t n,
                 cudaStream_t stream) {
  adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, g, m, v, step, n);
  JAXPP_CUDA_CHECK_LAUNCH();
}

void launch_write_link_header(LinkHeader* dst, LinkHeader header, cudaStream_t stream) {
  write_link_header_kernel<<<1, 1, 0, stream>>>(dst, header);
  JAXPP_CUDA_CHECK_LAUNCH();
}

}  // namespace jaxpp::cuda
