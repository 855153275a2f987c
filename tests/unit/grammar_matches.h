// SPDX-License-Identifier: MIT
// Whether a grammar takes a whole text and may end there: the grammar tests' question.
#pragma once

#include <string_view>

#include "core/grammar/grammar.h"

namespace basalt::test {

inline bool matches(const Grammar& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.accept(text) && m.can_end();
}

}  // namespace basalt::test
