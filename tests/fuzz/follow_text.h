// SPDX-License-Identifier: MIT
// The grammar fuzzers' input: a grammar's text, then NUL and text that a
// matcher follows byte by byte (at most 64 bytes: an ambiguous grammar costs
// each byte up to GrammarMatcher::kMaxPositions, and generated text is bounded
// by max_tokens anyway). Errors are the expected way out.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "core/grammar/grammar.h"

namespace basalt::fuzz {

template <class Compile>
int follow_text(const uint8_t* data, size_t size, Compile compile) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1, 64);
  try {
    const Grammar g = compile(input.substr(0, nul));
    GrammarMatcher m(g);
    for (char c : text)
      if (!m.accept(static_cast<uint8_t>(c))) break;
    (void)m.can_end();
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace basalt::fuzz
