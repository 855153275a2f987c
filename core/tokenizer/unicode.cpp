// SPDX-License-Identifier: MIT
// UTF-8 decoding and the character classes of the pre-tokenizers.
#include <algorithm>
#include <array>

#include "core/tokenizer/tokenizer_internal.h"

namespace basalt::tokenizer_detail {

namespace {
#include "core/tokenizer/unicode_tables.inc"

// Classes of U+0000..U+007F, looked up on every character of English text.
const std::array<CharClass, 128>& ascii_classes() {
  static const std::array<CharClass, 128> table = [] {
    std::array<CharClass, 128> t{};
    for (uint32_t cp = 0; cp < 128; ++cp) {
      auto it = std::upper_bound(std::begin(kUnicodeRanges), std::end(kUnicodeRanges), (cp << 3) | 7u);
      t[cp] = static_cast<CharClass>(*(it - 1) & 7u);
    }
    return t;
  }();
  return table;
}
}  // namespace

const char* unicode_version() { return kUnicodeVersion; }

CharClass char_class(uint32_t cp) {
  if (cp < 128) return ascii_classes()[cp];
  if (cp >= kInvalidCodepoint) return CharClass::other;
  // Last entry whose first code point is <= cp.
  auto it = std::upper_bound(std::begin(kUnicodeRanges), std::end(kUnicodeRanges), (cp << 3) | 7u);
  return static_cast<CharClass>(*(it - 1) & 7u);
}

Utf8Char utf8_next(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + pos;
  const size_t left = s.size() - pos;
  const uint8_t b0 = p[0];
  if (b0 < 0x80) return {b0, 1};
  uint32_t len, cp, min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1Fu, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0Fu, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07u, min = 0x10000;
  } else {
    return {kInvalidCodepoint, 1};
  }
  if (left < len) return {kInvalidCodepoint, 1};
  for (uint32_t i = 1; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) return {kInvalidCodepoint, 1};
    cp = (cp << 6) | (p[i] & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {kInvalidCodepoint, 1};
  return {cp, len};
}


}  // namespace basalt::tokenizer_detail
