// SPDX-License-Identifier: MIT
// A grammar applied to tokens: which tokens may come next, given the text so
// far. A token may come next where the grammar takes all of its bytes; an
// end-of-generation token where the text so far is a whole sentence of the
// grammar; any other token without bytes (control tokens) never.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/grammar/grammar.h"
#include "core/tokenizer/tokenizer.h"

namespace basalt {

class TokenConstraint {
 public:
  TokenConstraint(std::shared_ptr<const Grammar> grammar, const Tokenizer& tok);

  bool allows(int32_t id) const;
  // [id] = 1 for every token that may come next, 0 for the rest (n_vocab
  // entries). Walks the vocabulary in byte order (SortedPieces), each shared
  // prefix once: 34 ms inside a string for SmolLM2's 49k tokens, 166 ms for
  // Gemma 3's 262k (tests/unit/grammar_test.cpp prints it). Kept for the
  // last few states: every character of a string leaves the same one.
  const std::vector<uint8_t>& allowed() const;
  // The most readings (GrammarMatcher stacks) the walk may advance by a byte
  // before it throws Error: about half a second, where Gemma 3's 262k tokens
  // inside a JSON string take ~15 M. An ambiguous grammar (a request's GBNF)
  // ends its request rather than hold the engine's threads.
  static constexpr size_t kWalkBudget = size_t{48} << 20;
  void accept(int32_t id);  // Error where it is not allowed
  // The text is a whole sentence and nothing may follow it: the output is done.
  bool complete() const { return matcher_.can_end() && !matcher_.can_continue(); }

 private:
  std::shared_ptr<const Grammar> grammar_;
  const Tokenizer& tok_;
  const SortedPieces& pieces_;
  GrammarMatcher matcher_;
  struct Known {
    GrammarMatcher state;
    std::vector<uint8_t> allowed;
  };
  static constexpr size_t kKnown = 4;
  mutable std::vector<Known> known_;  // the last kKnown states' allowed tokens
  mutable size_t next_known_ = 0;     // the one to replace next
};

}  // namespace basalt
