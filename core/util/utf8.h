// SPDX-License-Identifier: MIT
// UTF-8 validation, shared by the file parsers and the text paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace basalt {

// True if s is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);
// Length of the longest prefix of s that ends on a character boundary, given
// that s may stop in the middle of a character (used by streaming output).
size_t utf8_complete_prefix(std::string_view s);
// Appends code point cp (at most U+10FFFF) as UTF-8.
void utf8_append(std::string& out, uint32_t cp);

}  // namespace basalt
