// SPDX-License-Identifier: MIT
// Private to core/tokenizer/: UTF-8 and character classes, the token-text
// index, and the two encoders (byte-level BPE, SentencePiece) that
// tokenizer.cpp dispatches to. They see plain text only: special tokens,
// BOS/EOS and the space prefix are handled by the caller.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/pre_regex.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/utf8.h"

namespace basalt::tokenizer_detail {

// ---- UTF-8 -----------------------------------------------------------------

// SentencePiece's visible space, U+2581.
constexpr std::string_view kSpaceMark = "\xe2\x96\x81";
// text with every U+2581 as a space.
std::string unescape_spaces(std::string_view text);

// A byte that does not start a well-formed sequence decodes on its own to
// this value (class other), so ill-formed text can still be split and then
// encoded byte by byte.
constexpr uint32_t kInvalidCodepoint = 0x110000;

struct Utf8Char {
  uint32_t cp;   // code point, or kInvalidCodepoint
  uint32_t len;  // bytes consumed: 1..4
};
// The character starting at s[pos] (pos < s.size()); strict: overlongs,
// surrogates and truncated sequences are invalid.
Utf8Char utf8_next(std::string_view s, size_t pos);

// ---- character classes (generated table: unicode_tables.inc) ---------------

enum class CharClass : uint8_t { other = 0, letter, number, punct, mark, symbol, space };
CharClass char_class(uint32_t cp);  // kInvalidCodepoint and beyond: other
const char* unicode_version();

// ---- the vocabulary's text -> id index -------------------------------------

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

inline int32_t lookup(const TokenMap& m, std::string_view s) {
  auto it = m.find(s);
  return it == m.end() ? -1 : it->second;
}

// ---- byte-level BPE (tokenizer.ggml.model "gpt2") ---------------------------

// How text is split into words before merging: one row per regex family of
// llama.cpp (src/llama-vocab.cpp, llm_tokenizer_bpe).
enum class BpeSplit {
  gpt2,          // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  digits_gpt2,   // \p{N} isolated, then gpt2 (smollm, starcoder, ...)
  llama3,        // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  qwen2,         // llama3 with \p{N} instead of \p{N}{1,3}
  default_bpe,   // [\p{P}$+<=>^~|]+ isolated, gpt2, \p{N}+, [0-9]{3}
  regex,         // BpePre::regexes (or TokenizerData::pre_regexes), run by PCRE2 (pre_regex.h)
  words,         // \S+ with the whitespace between dropped (llama.cpp's "whitespace" tokenizer)
};

// What a word's first BPE symbols are.
enum class BpeSymbols : uint8_t {
  bytes,  // GPT-2 byte level: every byte stands for a printable character (most BPE vocabularies)
  utf8,   // the UTF-8 characters themselves; what merges leave that is no token falls
          // back to <0xXX> byte tokens (llama.cpp's byte_encode = false: Gemma 4)
};

struct BpePre {
  std::string_view name;  // tokenizer.ggml.pre
  BpeSplit split;
  bool ignore_merges;  // a word that is itself a token is not merged (llama3)
  bool add_bos;        // llama.cpp's default when tokenizer.ggml.add_bos_token is absent
  std::array<const char*, 6> regexes{};  // BpeSplit::regex: the split regexes in order, then nullptr
  BpeSymbols symbols = BpeSymbols::bytes;
  bool escape_spaces = false;   // ' ' becomes U+2581 before splitting (SentencePiece-style BPE)
  bool whole_newlines = false;  // a word of newlines that is itself a token is not merged (gemma4)
  bool force_bos = false;       // BOS whatever the vocabulary says (llama.cpp's workaround for Gemma 4)
};
// nullptr for a name this build does not know.
const BpePre* find_bpe_pre(std::string_view name);
// All known names, comma separated (for error messages).
std::string bpe_pre_names();
// The split regexes of a BpeSplit::regex pre-tokenizer, in order.
std::vector<std::string> bpe_pre_regexes(const BpePre& pre);

// Splits text into words (byte ranges of text) the way `split` says.
void bpe_split_words(BpeSplit split, std::string_view text, std::vector<std::string_view>& words);

class BpeEncoder {
 public:
  // Error on merges that cannot be parsed.
  BpeEncoder(const TokenizerData& data, const TokenMap& tokens, const BpePre& pre);

  void encode(std::string_view text, std::vector<int32_t>& out) const;
  // The bytes a normal token's text stands for (GPT-2 byte-to-unicode undone);
  // characters outside that mapping are kept as UTF-8.
  std::string token_bytes(std::string_view token_text) const;

 private:
  struct Merge { int32_t rank; int32_t result; };
  int32_t symbol_id(const std::string& byte_text);
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  BpePre pre_;
  std::shared_ptr<const RegexSplitter> regex_;  // BpeSplit::regex
  const TokenMap& tokens_;
  int32_t n_vocab_;
  int32_t byte_token_[256];               // token of each raw byte, -1 if none
  int32_t byte_symbol_[256];              // its symbol: the token, else an extra symbol, else -1
  std::vector<int32_t> bytes_of_char_;    // mapped code point -> raw byte (-1: not a mapped char)
  std::unordered_map<uint64_t, Merge> merges_;  // (left symbol << 32 | right symbol)
  TokenMap extra_symbols_;                // merge parts/results that are not tokens: ids >= n_vocab
  TokenMap raw_tokens_;                   // raw bytes -> token (ignore_merges only)
};

// ---- SentencePiece (tokenizer.ggml.model "llama") ---------------------------

class SpmEncoder {
 public:
  SpmEncoder(const TokenizerData& data, const TokenMap& tokens);
  // text as given (spaces become U+2581 here); prefix_space adds one in front.
  void encode(std::string_view text, bool prefix_space, std::vector<int32_t>& out) const;

 private:
  void emit_bytes(std::string_view s, std::vector<int32_t>& out) const;

  const TokenizerData& data_;
  const TokenMap& tokens_;
  int32_t byte_token_[256];
};

}  // namespace basalt::tokenizer_detail
