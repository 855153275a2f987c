// SPDX-License-Identifier: MIT
// GBNF grammars (a server request's "grammar", --grammar-file) parsed and
// compiled, and text after a NUL byte followed through the grammar byte by
// byte: every input ends in a grammar or an Error, the matcher within its bounds.
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "core/grammar/gbnf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace basalt;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  // At most 64 bytes of text: an ambiguous grammar costs each byte up to
  // GrammarMatcher::kMaxStacks readings (generated text is bounded by max_tokens).
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1, 64);
  try {
    const Grammar g = gbnf_grammar(input.substr(0, nul));
    GrammarMatcher m(g);
    for (char c : text)
      if (!m.accept(static_cast<uint8_t>(c))) break;
    (void)m.can_end();
  } catch (const Error&) {
  }
  return 0;
}
