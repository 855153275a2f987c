// SPDX-License-Identifier: MIT
// SentencePiece-style BPE over a scored vocabulary, as llama.cpp's
// llm_tokenizer_spm does it: spaces become U+2581, the text starts as one
// symbol per character, and the adjacent pair whose concatenation is the
// best-scoring token is merged until no pair is a token. Characters that end
// up in no token are spelled with byte tokens <0xXX>, or unk.
#include <algorithm>
#include <cstdio>

#include "core/tokenizer/tokenizer_internal.h"

namespace basalt::tokenizer_detail {

std::string unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
      out += ' ';
      pos += kSpaceMark.size();
    } else {
      out += text[pos++];
    }
  }
  return out;
}

namespace {

struct Symbol {
  int32_t prev, next;
  uint32_t start, len;  // bytes of the escaped text; len 0 once merged away
};
struct Bigram {
  float score;
  int32_t left, right;
  uint32_t len;  // bytes of left + right when queued
};
// Heap order: best score on top, then leftmost.
bool bigram_after(const Bigram& a, const Bigram& b) { return a.score < b.score || (a.score == b.score && a.left > b.left); }
}  // namespace

SpmEncoder::SpmEncoder(const TokenizerData& data, const TokenMap& tokens) : data_(data), tokens_(tokens) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    byte_token_[b] = lookup(tokens_, hex);
    if (byte_token_[b] < 0) byte_token_[b] = lookup(tokens_, std::string(1, static_cast<char>(b)));
  }
}

void SpmEncoder::emit_bytes(std::string_view s, std::vector<int32_t>& out) const {
  for (char ch : s) {
    int32_t id = byte_token_[static_cast<uint8_t>(ch)];
    if (id < 0) id = data_.unk_id;
    if (id >= 0) out.push_back(id);
  }
}

void SpmEncoder::encode(std::string_view text, bool prefix_space, std::vector<int32_t>& out) const {
  thread_local std::string esc;
  thread_local std::vector<Symbol> sym;
  thread_local std::vector<Bigram> heap;
  esc.clear();
  sym.clear();
  heap.clear();
  if (prefix_space) esc += kSpaceMark;
  for (char ch : text) {
    if (ch == ' ')
      esc += kSpaceMark;
    else
      esc += ch;
  }
  if (esc.empty()) return;

  for (size_t pos = 0; pos < esc.size();) {
    uint32_t len = utf8_next(esc, pos).len;
    int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back({i - 1, pos + len < esc.size() ? i + 1 : -1, static_cast<uint32_t>(pos), len});
    pos += len;
  }
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    uint32_t len = sym[left].len + sym[right].len;
    int32_t id = lookup(tokens_, std::string_view(esc).substr(sym[left].start, len));
    if (id < 0) return;
    float score = data_.scores.empty() ? 0.0f : data_.scores[id];
    heap.push_back({score, left, right, len});
    std::push_heap(heap.begin(), heap.end(), bigram_after);
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), bigram_after);
    Bigram bg = heap.back();
    heap.pop_back();
    Symbol& l = sym[bg.left];
    Symbol& r = sym[bg.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.len) continue;  // one side changed since it was queued
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    std::string_view piece = std::string_view(esc).substr(sym[i].start, sym[i].len);
    int32_t id = lookup(tokens_, piece);
    if (id >= 0)
      out.push_back(id);
    else
      emit_bytes(piece, out);
  }
}

}  // namespace basalt::tokenizer_detail
