// SPDX-License-Identifier: MIT
// JSON Schemas (a server request's response_format) compiled to grammars, and
// text after a NUL byte followed through the grammar byte by byte: every
// input ends in a grammar or an Error, and the matcher within its bounds.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "core/grammar/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace basalt;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view schema = input.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1, 64);  // as fuzz_gbnf
  try {
    const Grammar g = json_schema_grammar(schema);
    GrammarMatcher m(g);
    for (char c : text)
      if (!m.accept(static_cast<uint8_t>(c))) break;
    (void)m.can_end();
  } catch (const Error&) {
  }
  return 0;
}
