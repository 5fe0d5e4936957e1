#include "graph/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "graph/error.h"

namespace jaxpp {
namespace {

// What a non-regular file is, for the message ("a FIFO").
std::string kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

[[noreturn]] void throw_cannot_read(const std::string& path, int error) {
  // An empty name (`--corpus ""`) would leave the message without any name at all.
  throw_input_error(path.empty() ? "\"\" (an empty file name)" : path,
                    std::string("cannot read file: ") + std::strerror(error));
}

// Throws unless `st` describes a regular file of at most `max_bytes`.
void check_stat(const std::string& path, const struct stat& st, int64_t max_bytes) {
  if (S_ISDIR(st.st_mode)) throw_input_error(path, "is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    throw_input_error(path, "is not a regular file (" + kind_of(st.st_mode) + ")");
  if (static_cast<int64_t>(st.st_size) > max_bytes)
    throw_input_error(path, "is " + format_file_size(st.st_size) + ", the limit is " +
                                format_file_size(max_bytes));
}

struct stat stat_or_throw(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_cannot_read(path, errno);
  return st;
}

// "path:line:column" of byte `offset` (columns count bytes).
std::string position_of(const std::string& path, const std::string& text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return path + ":" + std::to_string(line) + ":" + std::to_string(col);
}

void check_no_nul(const std::string& path, const std::string& text) {
  const size_t nul = text.find('\0');
  if (nul == std::string::npos) return;
  throw_input_error(
      position_of(path, text, nul),
      "contains a NUL byte (byte offset " + std::to_string(nul) + "); input files must be text");
}

// The offset of the first byte that does not start a valid UTF-8 sequence (RFC 3629: shortest
// form, no surrogates, at most U+10FFFF), or npos.
size_t first_invalid_utf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string::npos;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string format_file_size(int64_t bytes) {
  constexpr int64_t kMiB = int64_t{1} << 20, kGiB = int64_t{1} << 30;
  char buf[64];
  if (bytes >= kGiB && bytes % kGiB == 0) {
    std::snprintf(buf, sizeof buf, "%lld GiB", static_cast<long long>(bytes / kGiB));
  } else if (bytes >= kGiB) {
    std::snprintf(buf, sizeof buf, "%.1f GiB (%lld bytes)", static_cast<double>(bytes) / kGiB,
                  static_cast<long long>(bytes));
  } else if (bytes >= kMiB && bytes % kMiB == 0) {
    std::snprintf(buf, sizeof buf, "%lld MiB", static_cast<long long>(bytes / kMiB));
  } else if (bytes >= kMiB) {
    std::snprintf(buf, sizeof buf, "%.1f MiB (%lld bytes)", static_cast<double>(bytes) / kMiB,
                  static_cast<long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  }
  return buf;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void check_input_file(const std::string& path, int64_t max_bytes) {
  check_stat(path, stat_or_throw(path), max_bytes);
}

std::string read_input_text(const std::string& path, int64_t max_bytes) {
  // Classify before opening: opening a FIFO blocks, opening a device may have side effects.
  check_input_file(path, max_bytes);
  // O_NONBLOCK: should the path have become a FIFO since, open() still returns at once.
  const Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) throw_cannot_read(path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_cannot_read(path, errno);
  check_stat(path, st, max_bytes);

  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_cannot_read(path, errno);
    }
    if (n == 0) break;
    if (static_cast<int64_t>(text.size()) + n > max_bytes)  // the file grew while being read
      throw_input_error(path, "is more than " + format_file_size(max_bytes) +
                                  " (the limit), it grew while being read");
    text.append(buf, static_cast<size_t>(n));
  }
  check_no_nul(path, text);
  check_utf8(path, text);
  return text;
}

bool has_control_character(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7f;
  });
}

std::string with_invalid_utf8_replaced(std::string text) {
  for (size_t bad = first_invalid_utf8(text); bad != std::string::npos;
       bad = first_invalid_utf8(text))
    text[bad] = '?';
  return text;
}

void check_utf8(const std::string& name, const std::string& text) {
  const size_t bad = first_invalid_utf8(text);
  if (bad == std::string::npos) return;
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(text[bad]));
  throw_input_error(position_of(name, text, bad),
                    "is not valid UTF-8 (byte " + std::string(hex) + " at byte offset " +
                        std::to_string(bad) + "); input files must be UTF-8 text");
}

}  // namespace jaxpp
