// Element-wise maths of the MLP workload, shared verbatim by the host loops (runtime/device.cc)
// and the CUDA kernels (runtime/cuda/kernels.cu), so both devices evaluate the same formulas.
//   gelu(u)       0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))   (tanh approximation)
//   gelu_grad(u)  its derivative
//   adam_update   one Adam step of one parameter (moments updated in place)
// Compiled as host code by the C++ compiler and as __host__ __device__ code by nvcc.
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define JAXPP_HOST_DEVICE __host__ __device__
#else
#define JAXPP_HOST_DEVICE
#endif

namespace jaxpp::mlp_math {

inline constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
inline constexpr double kGeluA = 0.044715;

JAXPP_HOST_DEVICE inline double gelu(double u) {
  return 0.5 * u * (1 + tanh(kGeluC * (u + kGeluA * u * u * u)));
}

JAXPP_HOST_DEVICE inline double gelu_grad(double u) {
  double inner = kGeluC * (u + kGeluA * u * u * u);
  double t = tanh(inner);
  return 0.5 * (1 + t) + 0.5 * u * (1 - t * t) * kGeluC * (1 + 3 * kGeluA * u * u);
}

// p, m, v updated in place; bc1 / bc2 are the bias corrections 1 - beta^(step + 1).
JAXPP_HOST_DEVICE inline void adam_update(double& p, double g, double& m, double& v, double lr,
                                          double beta1, double beta2, double eps, double bc1,
                                          double bc2) {
  m = beta1 * m + (1 - beta1) * g;
  v = beta2 * v + (1 - beta2) * g * g;
  p -= lr * (m / bc1) / (sqrt(v / bc2) + eps);
}

}  // namespace jaxpp::mlp_math
