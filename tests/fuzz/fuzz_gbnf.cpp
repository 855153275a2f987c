// SPDX-License-Identifier: MIT
// GBNF grammars (a server request's "grammar", --grammar-file) parsed and
// compiled, and text after a NUL byte followed through the grammar: every
// input ends in a grammar or an Error, the matcher within its bounds.
#include "core/grammar/gbnf.h"
#include "tests/fuzz/follow_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return basalt::fuzz::follow_text(data, size, [](std::string_view text) { return basalt::gbnf_grammar(text); });
}
