#include "runtime/device.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "runtime/mlp_math.h"

namespace jaxpp {

std::string_view to_string(MemorySpace s) {
  switch (s) {
    case MemorySpace::kHost:
      return "host";
    case MemorySpace::kCuda:
      return "cuda";
  }
  return "?";
}

DeviceArray& DeviceArray::operator=(DeviceArray&& other) noexcept {
  if (this != &other) {
    reset();
    swap(other);
  }
  return *this;
}

void DeviceArray::swap(DeviceArray& other) noexcept {
  std::swap(owner_, other.owner_);
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
}

bool DeviceArray::on_host() const {
  return owner_ == nullptr || owner_->space() == MemorySpace::kHost;
}

void DeviceArray::reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->release(data_, size_);
  owner_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

DeviceArray Device::zeros(size_t n) {
  DeviceArray a = alloc(n);
  fill_zero(a);
  return a;
}

namespace {
void require_same_size(const DeviceArray& a, const DeviceArray& b, const char* op) {
  if (a.size() != b.size())
    throw std::logic_error(std::string("HostDevice::") + op + ": sizes differ (" +
                           std::to_string(a.size()) + " vs " + std::to_string(b.size()) + ")");
}
}  // namespace

int64_t HostDevice::memory_bytes() const {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

DeviceArray HostDevice::alloc(size_t n) {
  if (n == 0) return {};
  return DeviceArray(this, new double[n], n);
}

void HostDevice::release(double* data, size_t) { delete[] data; }

void HostDevice::fill_zero(DeviceArray& a) { std::fill(a.data(), a.data() + a.size(), 0.0); }

DeviceArray HostDevice::upload(std::span<const double> host) {
  DeviceArray a = alloc(host.size());
  if (!host.empty()) std::memcpy(a.data(), host.data(), host.size_bytes());
  return a;
}

std::vector<double> HostDevice::download(const DeviceArray& a) {
  return std::vector<double>(a.data(), a.data() + a.size());
}

DeviceArray HostDevice::copy(const DeviceArray& a) {
  return upload(std::span<const double>(a.data(), a.size()));
}

void HostDevice::gemm(bool trans_a, bool trans_b, int m, int n, int k, const double* a, int lda,
                      const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

void HostDevice::gelu(const DeviceArray& u, DeviceArray& a) {
  require_same_size(u, a, "gelu");
  for (size_t i = 0; i < u.size(); ++i) a.data()[i] = mlp_math::gelu(u.data()[i]);
}

void HostDevice::gelu_backward(const DeviceArray& da, const DeviceArray& u, DeviceArray& du) {
  require_same_size(da, u, "gelu_backward");
  require_same_size(da, du, "gelu_backward");
  for (size_t i = 0; i < da.size(); ++i)
    du.data()[i] = da.data()[i] * mlp_math::gelu_grad(u.data()[i]);
}

double HostDevice::mse_loss(const DeviceArray& y, const DeviceArray& t, double scale,
                            DeviceArray& dy) {
  require_same_size(y, t, "mse_loss");
  require_same_size(y, dy, "mse_loss");
  double sum = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    double d = y.data()[i] - t.data()[i];
    sum += d * d;
    dy.data()[i] = scale * d;
  }
  return sum / static_cast<double>(y.size());
}

void HostDevice::sgd_step(DeviceArray& p, const DeviceArray& g, double lr) {
  require_same_size(p, g, "sgd_step");
  for (size_t i = 0; i < p.size(); ++i) p.data()[i] -= lr * g.data()[i];
}

void HostDevice::adam_step(DeviceArray& p, const DeviceArray& g, DeviceArray& m, DeviceArray& v,
                           const AdamStep& s) {
  require_same_size(p, g, "adam_step");
  require_same_size(p, m, "adam_step");
  require_same_size(p, v, "adam_step");
  for (size_t i = 0; i < p.size(); ++i)
    mlp_math::adam_update(p.data()[i], g.data()[i], m.data()[i], v.data()[i], s.lr, s.beta1,
                          s.beta2, s.eps, s.bias_correction1, s.bias_correction2);
}

HostDevice& host_device() {
  static HostDevice device;
  return device;
}

}  // namespace jaxpp
