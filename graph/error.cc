#include "graph/error.h"

namespace jaxpp {

size_t utf8_sequence_length(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = byte(i);
  if (b < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 2;
    if (b == 0xE0) lo = 0xA0;  // overlong
    if (b == 0xED) hi = 0x9F;  // surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 3;
    if (b == 0xF0) lo = 0x90;  // overlong
    if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + 1 >= text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k <= n; ++k)
    if (i + k >= text.size() || (byte(i + k) & 0xC0) != 0x80) return 0;
  return n + 1;
}

std::string one_line(const std::string& text) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(text, i);
      if (n > 0) {
        out.append(text, i, n);
        i += n - 1;
        continue;
      }
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else if (c >= 0x20 && c != 0x7f) {
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

void throw_input_error(const std::string& where, const std::string& what) {
  throw InputError(where.empty() ? what : where + ": " + what);
}

}  // namespace jaxpp
