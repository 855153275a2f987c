// SPDX-License-Identifier: MIT
// Text <-> token ids, as the model's GGUF metadata describes them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace basalt {

// What the model file says about its vocabulary (GGUF keys tokenizer.ggml.*).
// Filled by the model loader; the tokenizer only reads it.
struct TokenizerData {
  std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;    // pre-tokenizer name: "default", "llama-bpe", "qwen2", "smollm", ...
  // Where no name fits (a tokenizer.json pre_tokenizer of Split, Digits and
  // ByteLevel steps): its split regexes in order, run as they are; pre is "".
  std::vector<std::string> pre_regexes;
  std::vector<std::string> tokens;
  std::vector<float> scores;          // SentencePiece piece scores (may be empty for BPE)
  std::vector<int32_t> token_types;   // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;    // BPE merges, "left right"
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, eom_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SentencePiece: prepend U+2581 to the text (and after each special token, as llama.cpp)
  bool space_prefix_first_only = false;  // only where the text itself starts (HF Metaspace prepend_scheme "first")
};

// The tokens that stand for bytes (token_to_piece not empty), in the byte
// order of their pieces, with each one's common prefix with the one before:
// every token walked at once as a trie is, sharing the work of common
// prefixes (a grammar's allowed tokens, core/grammar/token_constraint.h).
struct SortedPieces {
  std::vector<int32_t> ids;       // token ids, by piece
  std::vector<uint32_t> common;   // common[k]: bytes piece(ids[k]) shares with piece(ids[k - 1]) (0 for k = 0)
  std::string bytes;              // every token's piece, by id, end to end
  std::vector<uint32_t> offset;   // piece(id) = bytes[offset[id], offset[id + 1])
  std::string_view piece(int32_t id) const { return std::string_view(bytes).substr(offset[id], offset[id + 1] - offset[id]); }
};

enum class TokenType : int32_t { undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

class Tokenizer {
 public:
  static constexpr size_t kMaxTokens = size_t{1} << 22;  // vocabularies in use have up to ~262k

  explicit Tokenizer(TokenizerData data);  // throws basalt::Error on an inconsistent vocabulary
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // add_special: BOS/EOS as the vocabulary asks. parse_special: text such as
  // "<|im_start|>" becomes its control token instead of being split as text.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes a token stands for (byte tokens "<0x0A>" -> "\n", U+2581 -> ' ',
  // byte-level BPE unmapped). Control tokens give "" unless render_special.
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  bool is_end_of_generation(int32_t id) const;  // eos, eot, eom, and tokens like <|im_end|>, <|eot_id|>, <end_of_turn>
  bool add_bos() const;
  TokenType type(int32_t id) const;
  int32_t find(std::string_view piece) const;  // -1 if absent
  const SortedPieces& sorted_pieces() const;   // made on first use (thread-safe), then kept

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of token ids into text pieces that never end inside a UTF-8
// sequence: bytes of an incomplete character are held back until it completes.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool render_special = false) : tok_(tok), render_special_(render_special) {}
  std::string feed(int32_t id);  // complete characters only
  std::string flush();           // whatever is left (invalid bytes become U+FFFD)

 private:
  const Tokenizer& tok_;
  bool render_special_;
  std::string pending_;
  bool at_start_ = true;  // nothing emitted yet (a SentencePiece space prefix is dropped)
};

}  // namespace basalt
