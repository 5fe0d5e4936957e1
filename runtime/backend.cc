#include "runtime/backend.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace jaxpp {
namespace {

// Wire form of a message on the byte-level plane: [double ready_at_s][payload doubles].
std::vector<char> frame(const Message& m) {
  if (!m.data.on_host())
    throw std::logic_error("Backend: the default message path needs host memory, got " +
                           std::string(to_string(m.data.device()->space())));
  std::vector<char> out(sizeof(double) + static_cast<size_t>(m.data.bytes()));
  std::memcpy(out.data(), &m.ready_at_s, sizeof(double));
  if (!m.data.empty()) std::memcpy(out.data() + sizeof(double), m.data.data(), m.data.bytes());
  return out;
}

Message unframe(const std::vector<char>& bytes) {
  Message m;
  if (bytes.size() >= sizeof(double)) std::memcpy(&m.ready_at_s, bytes.data(), sizeof(double));
  if (bytes.size() <= sizeof(double)) return m;
  size_t n = (bytes.size() - sizeof(double)) / sizeof(double);
  m.data = host_device().alloc(n);
  std::memcpy(m.data.data(), bytes.data() + sizeof(double), n * sizeof(double));
  return m;
}

}  // namespace

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

void Backend::send_message(int peer, int64_t key, Message message) {
  post_send(peer, key, frame(message));
}

int Backend::post_message_recv(int peer, int64_t key) { return post_recv(peer, key); }

bool Backend::test_message(int handle, Message* message) {
  std::vector<char> bytes;
  if (!test_recv(handle, &bytes)) return false;
  *message = unframe(bytes);
  return true;
}

bool Backend::wait_message(int handle, double deadline_s, Message* message) {
  std::vector<char> bytes;
  if (!wait_recv(handle, deadline_s, &bytes)) return false;
  *message = unframe(bytes);
  return true;
}

void Backend::allreduce_tensor(DeviceArray& data, double timeout_s) {
  if (!data.on_host())
    throw std::logic_error("Backend: the default all-reduce needs host memory, got " +
                           std::string(to_string(data.device()->space())));
  allreduce_sum(std::span<double>(data.data(), data.size()), timeout_s);
}

}  // namespace jaxpp
