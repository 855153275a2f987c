// SPDX-License-Identifier: MIT
#include "core/util/utf8.h"

#include <cstdint>

namespace basalt {

namespace {
// Bytes of a sequence led by b, or 0 if b cannot start one.
int sequence_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}
}  // namespace

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    int len = sequence_length(p[i]);
    if (len == 0 || i + len > n) return false;
    for (int k = 1; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return false;
    if (len == 3) {
      if (p[i] == 0xE0 && p[i + 1] < 0xA0) return false;  // overlong
      if (p[i] == 0xED && p[i + 1] >= 0xA0) return false;  // surrogate
    } else if (len == 4) {
      if (p[i] == 0xF0 && p[i + 1] < 0x90) return false;  // overlong
      if (p[i] == 0xF4 && p[i + 1] >= 0x90) return false;  // > U+10FFFF
    }
    i += len;
  }
  return true;
}

size_t utf8_complete_prefix(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t n = s.size();
  // Look back at most 3 bytes for the start of a sequence that runs past the end.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    uint8_t b = p[n - back];
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    int len = sequence_length(b);
    if (len > static_cast<int>(back)) return n - back;  // incomplete
    return n;
  }
  return n;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace basalt
