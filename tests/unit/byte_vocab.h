// SPDX-License-Identifier: MIT
// A SentencePiece vocabulary for tests without a model file: <unk>, <s>,
// </s>, the 256 byte tokens (byte b is token 3 + b), then the given pieces
// (U+2581 for a space), so that any text can be spelled and some of it in
// tokens of several bytes.
#pragma once

#include <cstdio>
#include <initializer_list>
#include <utility>

#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"

namespace basalt::test {

inline Tokenizer byte_vocab(std::initializer_list<const char*> pieces = {}) {
  TokenizerData d;
  d.model = "llama";
  d.tokens = {"<unk>", "<s>", "</s>"};
  d.token_types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    d.tokens.push_back(hex), d.token_types.push_back(6);
  }
  for (const char* piece : pieces) d.tokens.push_back(piece), d.token_types.push_back(1);
  d.scores.assign(d.tokens.size(), 0.0f);
  d.unk_id = 0, d.bos_id = 1, d.eos_id = 2;
  return Tokenizer(std::move(d));
}

// Sampling that draws every token by its probability alone (no top-k, top-p
// or min-p cut): random logits then reach every path a grammar allows.
inline SamplingParams untruncated_sampling() {
  SamplingParams s;
  s.temperature = 1.0f;
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  return s;
}

}  // namespace basalt::test
