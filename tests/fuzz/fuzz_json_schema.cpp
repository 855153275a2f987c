// SPDX-License-Identifier: MIT
// JSON Schemas (a server request's response_format) compiled to grammars, and
// text after a NUL byte followed through the grammar: every input ends in a
// grammar or an Error, the matcher within its bounds.
#include "core/grammar/json_schema.h"
#include "tests/fuzz/follow_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return basalt::fuzz::follow_text(data, size, [](std::string_view text) { return basalt::json_schema_grammar(text); });
}
