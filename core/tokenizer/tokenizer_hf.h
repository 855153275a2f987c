// SPDX-License-Identifier: MIT
// An HF model folder's tokenizer: tokenizer.json (the vocabulary, merges,
// added tokens and pre-tokenizer) with tokenizer_config.json (BOS/EOS, whether
// to add BOS, the chat template) and generation_config.json (end-of-generation ids).
#pragma once

#include <string>

#include "core/tokenizer/tokenizer.h"

namespace basalt {

struct HfTokenizer {
  TokenizerData data;
  std::string chat_template;  // "" if the folder has none
};

// Byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM-style pre-tokenizers). A
// pre-tokenizer or model type it does not know is an Error that shows it.
HfTokenizer load_tokenizer_hf(const std::string& dir);

// The other way: writes dir/tokenizer.json, tokenizer_config.json and
// generation_config.json for a GGUF file's vocabulary, as transformers writes
// them (SentencePiece ones as byte-fallback BPE with merges from the scores);
// load_tokenizer_hf gives the same tokenizer back. Error for unknown pre-tokenizers.
void write_tokenizer_hf(const TokenizerData& d, const std::string& chat_template, const std::string& dir);

}  // namespace basalt
