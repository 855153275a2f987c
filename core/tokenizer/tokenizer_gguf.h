// SPDX-License-Identifier: MIT
// Reads a model file's vocabulary (tokenizer.ggml.*) into TokenizerData.
#pragma once

#include "core/gguf/gguf.h"
#include "core/tokenizer/tokenizer.h"

namespace basalt {

// Keys that are absent get llama.cpp's defaults: "llama" (SentencePiece) adds
// BOS and a space prefix, BOS=1 EOS=2 UNK=0; "gpt2" (byte-level BPE) adds BOS
// only for Llama-3 style pre-tokenizers, BOS=EOS=11. Special token ids outside
// the vocabulary are ignored. An unknown tokenizer.ggml.model or .pre is an Error.
TokenizerData load_tokenizer_data(const GgufFile& f);

}  // namespace basalt
