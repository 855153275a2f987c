// SPDX-License-Identifier: MIT
// The Tokenizer: checks the vocabulary, cuts special tokens out of the text,
// and hands the pieces in between to the byte-level BPE or SentencePiece
// encoder. Special tokens, end-of-generation tokens and piece rendering
// follow llama.cpp (src/llama-vocab.cpp) so that ids match it exactly.
#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_internal.h"

namespace basalt {

using namespace tokenizer_detail;

namespace {

// Token texts that llama.cpp treats as control tokens whatever their type
// says, and whether each ends generation (llama_vocab::impl::load: the EOT,
// EOM, FIM and EOG lists). ref: https://github.com/ggml-org/llama.cpp/issues/9606
struct ControlText {
  std::string_view text;
  bool eog;
};
constexpr ControlText kControlTexts[] = {
    {"<|eot_id|>", true}, {"<|im_end|>", true}, {"<|end|>", true}, {"<|return|>", true}, {"<|call|>", true},
    {"<|flush|>", true}, {"<|calls|>", true}, {"<end_of_turn>", true}, {"<|endoftext|>", true}, {"</s>", true},
    {"<|eom_id|>", true}, {"<EOT>", true}, {"_<EOT>", true}, {"[EOT]", true}, {"[EOS]", true},
    {"<|end_of_text|>", true}, {"<end_of_utterance>", true}, {"<eos>", true}, {"<turn|>", true},
    {"<|tool_response>", true}, {"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", true}, {"[e~[", true},
    // fill-in-the-middle: pad, repo and file separator end generation
    {"<|fim_pad|>", true}, {"<fim-pad>", true}, {"<fim_pad>", true}, {"<PAD>", true}, {"[PAD]", true},
    {"<|fim_repo|>", true}, {"<|repo_name|>", true}, {"<fim-repo>", true}, {"<REPO>", true}, {"<reponame>", true},
    {"<|file_sep|>", true},
    {"<|fim_prefix|>", false}, {"<fim-prefix>", false}, {"<fim_prefix>", false}, {"<PRE>", false},
    {"\xe2\x96\x81<PRE>", false}, {"<|code_prefix|>", false}, {"<|prefix|>", false},
    {"<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", false},
    {"<|fim_suffix|>", false}, {"<fim-suffix>", false}, {"<fim_suffix>", false}, {"<SUF>", false},
    {"\xe2\x96\x81<SUF>", false}, {"<|code_suffix|>", false}, {"<|suffix|>", false},
    {"<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", false},
    {"<|fim_middle|>", false}, {"<fim-middle>", false}, {"<fim_middle>", false}, {"<MID>", false},
    {"\xe2\x96\x81<MID>", false}, {"<|code_middle|>", false}, {"<|middle|>", false},
    {"<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", false},
};
// gpt-oss: always rendered, never end generation.
constexpr std::string_view kUserDefinedTexts[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

TokenType to_type(int32_t t) {
  return t >= 1 && t <= 6 ? static_cast<TokenType>(t) : TokenType::undefined;
}

bool is_special(TokenType t) { return t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown; }

// "<0x0A>" -> 10; -1 if the text is not of that form.
int parse_byte_token(std::string_view t) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

struct Tokenizer::Impl {
  TokenizerData d;
  bool spm = false;
  std::vector<TokenType> types;  // after llama.cpp's control-text overrides
  std::vector<uint8_t> eog;
  TokenMap ids;  // text -> id
  std::unique_ptr<BpeEncoder> bpe;
  std::unique_ptr<SpmEncoder> spm_encoder;
  BpePre custom_pre{};  // for d.pre_regexes (the encoder reads them from d)

  // Special tokens (control, user-defined, unknown) in the order llama.cpp
  // cuts them out of text: longest first. rank[id] is the position.
  std::vector<int32_t> special_rank;
  // Byte trie over their texts: edges (node << 8 | byte) -> node.
  std::unordered_map<uint64_t, int32_t> trie_edges;
  std::vector<int32_t> trie_token;  // node -> token ending there, or -1
  bool trie_first[256] = {};
  std::once_flag sorted_once;
  std::unique_ptr<SortedPieces> sorted;

  explicit Impl(TokenizerData data);
  void check_ids() const;
  void build_specials();

  struct Fragment {
    size_t begin, end;  // raw text, when token < 0
    int32_t token;
  };
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
};

Tokenizer::Impl::Impl(TokenizerData data) : d(std::move(data)) {
  const size_t n = d.tokens.size();
  if (n == 0) throw Error("tokenizer: the vocabulary has no tokens (tokenizer.ggml.tokens is empty)");
  if (n > Tokenizer::kMaxTokens)
    throw Error("tokenizer: " + std::to_string(n) + " tokens, more than the " + std::to_string(Tokenizer::kMaxTokens) +
                " basalt reads");
  if (d.model == "llama") {
    spm = true;
  } else if (d.model != "gpt2") {
    throw Error("tokenizer: unknown tokenizer model '" + d.model + "' (tokenizer.ggml.model); supported: gpt2, llama");
  }
  const BpePre* pre = nullptr;
  if (!spm && !d.pre_regexes.empty()) {  // regexes as given (tokenizer.json)
    custom_pre = {"tokenizer.json", BpeSplit::regex, false, d.add_bos};
    pre = &custom_pre;
  } else if (!spm) {
    pre = find_bpe_pre(d.pre.empty() ? "default" : d.pre);
    if (!pre)
      throw Error("tokenizer: unknown pre-tokenizer '" + d.pre + "' (tokenizer.ggml.pre); supported: " + bpe_pre_names());
    if (d.merges.empty()) throw Error("tokenizer: BPE vocabulary without merges (tokenizer.ggml.merges)");
    if (pre->force_bos) d.add_bos = true;
  }
  if (!d.scores.empty() && d.scores.size() < n)
    throw Error("tokenizer: " + std::to_string(d.scores.size()) + " scores for " + std::to_string(n) + " tokens");
  if (!d.token_types.empty() && d.token_types.size() < n)
    throw Error("tokenizer: " + std::to_string(d.token_types.size()) + " token types for " + std::to_string(n) + " tokens");
  check_ids();

  types.assign(n, TokenType::normal);
  if (!d.token_types.empty())
    for (size_t i = 0; i < n; ++i) types[i] = to_type(d.token_types[i]);

  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (d.tokens[i].empty()) d.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp does
    auto [it, added] = ids.emplace(d.tokens[i], static_cast<int32_t>(i));
    if (!added)
      throw Error("tokenizer: token " + std::to_string(i) + " '" + d.tokens[i] + "' repeats token " +
                  std::to_string(it->second));
  }

  eog.assign(n, 0);
  for (const ControlText& c : kControlTexts) {
    int32_t id = lookup(ids, c.text);
    if (id < 0) continue;
    types[id] = TokenType::control;
    if (c.eog) eog[id] = 1;
  }
  for (std::string_view t : kUserDefinedTexts)
    if (int32_t id = lookup(ids, t); id >= 0) types[id] = TokenType::user_defined;
  // gpt-oss and solar-open end a turn with <|return|> / <|call|> / <|calls|>; there <|end|> is not the end.
  int32_t end_id = lookup(ids, "<|end|>");
  if (end_id >= 0 && eog[end_id] &&
      ((lookup(ids, "<|return|>") >= 0 && lookup(ids, "<|call|>") >= 0) ||
       (lookup(ids, "<|calls|>") >= 0 && lookup(ids, "<|flush|>") >= 0))) {
    eog[end_id] = 0;
    types[end_id] = TokenType::user_defined;
  }
  // Gemma 4 and PLaMo 2 have an ordinary </s>.
  int32_t s_id = lookup(ids, "</s>");
  if (s_id >= 0 && (lookup(ids, "<|tool_response>") >= 0 || lookup(ids, "<|plamo:eos|>") >= 0)) {
    eog[s_id] = 0;
    types[s_id] = TokenType::normal;
  }
  for (int32_t id : {d.eos_id, d.eot_id, d.eom_id})
    if (id >= 0) eog[id] = 1;

  build_specials();
  if (spm)
    spm_encoder = std::make_unique<SpmEncoder>(d, ids);
  else
    bpe = std::make_unique<BpeEncoder>(d, ids, *pre);
}

void Tokenizer::Impl::check_ids() const {
  const int64_t n = static_cast<int64_t>(d.tokens.size());
  const std::pair<const char*, int32_t> special[] = {{"bos", d.bos_id}, {"eos", d.eos_id}, {"eot", d.eot_id},
                                                     {"eom", d.eom_id}, {"unknown", d.unk_id}, {"padding", d.pad_id}};
  for (auto [name, id] : special)
    if (id < -1 || id >= n)
      throw Error(std::string("tokenizer: ") + name + " token id " + std::to_string(id) + " is outside the vocabulary (" +
                  std::to_string(n) + " tokens)");
  if (d.add_bos && d.bos_id < 0) throw Error("tokenizer: add_bos is set but the vocabulary has no BOS token");
  if (d.add_eos && d.eos_id < 0) throw Error("tokenizer: add_eos is set but the vocabulary has no EOS token");
}

void Tokenizer::Impl::build_specials() {
  std::vector<int32_t> order;
  for (size_t i = 0; i < types.size(); ++i)
    if (is_special(types[i])) order.push_back(static_cast<int32_t>(i));
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return d.tokens[a].size() > d.tokens[b].size(); });
  special_rank.assign(types.size(), -1);
  trie_token.assign(1, -1);
  for (size_t r = 0; r < order.size(); ++r) {
    int32_t id = order[r];
    special_rank[id] = static_cast<int32_t>(r);
    int32_t node = 0;
    for (char ch : d.tokens[id]) {
      uint64_t key = static_cast<uint64_t>(node) << 8 | static_cast<uint8_t>(ch);
      auto [it, added] = trie_edges.emplace(key, static_cast<int32_t>(trie_token.size()));
      if (added) trie_token.push_back(-1);
      node = it->second;
    }
    trie_token[node] = id;
    trie_first[static_cast<uint8_t>(d.tokens[id][0])] = true;
  }
}

// Cuts special tokens out of text. llama.cpp (tokenizer_st_partition) takes
// the special tokens longest first and, for each, splits every stretch of
// text that is still plain at each of its (non-overlapping, leftmost first)
// occurrences. Same result here from one scan: find every occurrence, then
// accept them in (rank, position) order unless they overlap an accepted one.
// Without parse_special only user-defined tokens are cut out.
std::vector<Tokenizer::Impl::Fragment> Tokenizer::Impl::partition(std::string_view text, bool parse_special) const {
  struct Hit {
    int32_t rank;
    size_t pos;
    int32_t id;
  };
  std::vector<Hit> hits;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (!trie_first[static_cast<uint8_t>(text[pos])]) continue;
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      auto it = trie_edges.find(static_cast<uint64_t>(node) << 8 | static_cast<uint8_t>(text[i]));
      if (it == trie_edges.end()) break;
      node = it->second;
      int32_t id = trie_token[node];
      if (id >= 0 && (parse_special || types[id] == TokenType::user_defined)) hits.push_back({special_rank[id], pos, id});
    }
  }
  std::vector<Fragment> out;
  if (hits.empty()) {
    if (!text.empty()) out.push_back({0, text.size(), -1});
    return out;
  }
  std::sort(hits.begin(), hits.end(),
            [](const Hit& a, const Hit& b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; });
  std::vector<uint8_t> taken(text.size(), 0);
  std::vector<Hit> accepted;
  for (const Hit& h : hits) {
    size_t len = d.tokens[h.id].size();
    if (std::any_of(taken.begin() + h.pos, taken.begin() + h.pos + len, [](uint8_t t) { return t != 0; })) continue;
    std::fill(taken.begin() + h.pos, taken.begin() + h.pos + len, 1);
    accepted.push_back(h);
  }
  std::sort(accepted.begin(), accepted.end(), [](const Hit& a, const Hit& b) { return a.pos < b.pos; });
  size_t at = 0;
  for (const Hit& h : accepted) {
    if (h.pos > at) out.push_back({at, h.pos, -1});
    out.push_back({h.pos, h.pos + d.tokens[h.id].size(), h.id});
    at = h.pos + d.tokens[h.id].size();
  }
  if (at < text.size()) out.push_back({at, text.size(), -1});
  return out;
}

Tokenizer::Tokenizer(TokenizerData data) : impl_(std::make_unique<Impl>(std::move(data))) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && m.d.add_bos) out.push_back(m.d.bos_id);
  bool after_special = true;  // SentencePiece: a space prefix at the start and after each special token
  for (const Impl::Fragment& f : m.partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    std::string_view piece = text.substr(f.begin, f.end - f.begin);
    if (m.spm)
      m.spm_encoder->encode(piece, m.d.add_space_prefix && after_special && (!m.d.space_prefix_first_only || f.begin == 0), out);
    else
      m.bpe->encode(piece, out);
    after_special = false;
  }
  if (add_special && m.d.add_eos) out.push_back(m.d.eos_id);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= n_vocab())
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(n_vocab()) + " tokens)");
  const std::string& text = m.d.tokens[id];
  switch (m.types[id]) {
    case TokenType::control:
    case TokenType::unknown:
      return render_special ? text : std::string();
    case TokenType::user_defined:
      return text;
    case TokenType::byte: {
      int b = parse_byte_token(text);
      return b < 0 ? text : std::string(1, static_cast<char>(b));
    }
    case TokenType::normal: {
      return m.spm ? unescape_spaces(text) : m.bpe->token_bytes(text);
    }
    case TokenType::unused:
    case TokenType::undefined:
      break;
  }
  return {};
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, render_special);
    if (piece.empty()) continue;
    // The space that add_space_prefix put in front of the text. (llama.cpp
    // keeps it when the ids start with BOS; dropping it gives the text back.)
    if (first && impl_->spm && impl_->d.add_space_prefix && impl_->types[id] == TokenType::normal && piece[0] == ' ')
      piece.erase(0, 1);
    first = false;
    out += piece;
  }
  return out;
}

int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->d.tokens.size()); }
int32_t Tokenizer::bos_id() const { return impl_->d.bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->d.eos_id; }
bool Tokenizer::add_bos() const { return impl_->d.add_bos; }

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog[id] != 0;
}

const SortedPieces& Tokenizer::sorted_pieces() const {
  std::call_once(impl_->sorted_once, [this] {
    auto p = std::make_unique<SortedPieces>();
    const int32_t n = n_vocab();
    p->offset.reserve(static_cast<size_t>(n) + 1);
    for (int32_t id = 0; id < n; ++id) {
      p->offset.push_back(static_cast<uint32_t>(p->bytes.size()));
      p->bytes += token_to_piece(id);
      if (p->offset.back() != p->bytes.size()) p->ids.push_back(id);
    }
    p->offset.push_back(static_cast<uint32_t>(p->bytes.size()));
    std::sort(p->ids.begin(), p->ids.end(), [&](int32_t a, int32_t b) { return p->piece(a) < p->piece(b) || (p->piece(a) == p->piece(b) && a < b); });
    p->common.resize(p->ids.size());
    for (size_t k = 1; k < p->ids.size(); ++k) {
      const std::string_view a = p->piece(p->ids[k - 1]), b = p->piece(p->ids[k]);
      size_t c = 0;
      while (c < a.size() && c < b.size() && a[c] == b[c]) ++c;
      p->common[k] = static_cast<uint32_t>(c);
    }
    impl_->sorted = std::move(p);
  });
  return *impl_->sorted;
}

TokenType Tokenizer::type(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(n_vocab()) + " tokens)");
  return impl_->types[id];
}

int32_t Tokenizer::find(std::string_view piece) const { return lookup(impl_->ids, piece); }

// ---- StreamDecoder ------------------------------------------------------------

namespace {

// The UTF-8 sequence at the start of s (non-empty): how many bytes of it are
// well formed so far, whether it is whole, and whether it only stops because
// s ends (so more bytes may complete it).
struct SequenceStart {
  size_t n;
  bool complete;
  bool cut_by_end;
};
SequenceStart sequence_start(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  uint8_t b0 = p[0];
  size_t len = b0 < 0x80 ? 1 : (b0 >= 0xC2 && b0 <= 0xDF) ? 2 : (b0 >= 0xE0 && b0 <= 0xEF) ? 3 : (b0 >= 0xF0 && b0 <= 0xF4) ? 4 : 0;
  if (len == 0) return {1, false, false};
  size_t k = 1;
  for (; k < len && k < s.size(); ++k) {
    uint8_t lo = 0x80, hi = 0xBF;
    if (k == 1) {
      if (b0 == 0xE0) lo = 0xA0;  // overlong
      if (b0 == 0xED) hi = 0x9F;  // surrogates
      if (b0 == 0xF0) lo = 0x90;  // overlong
      if (b0 == 0xF4) hi = 0x8F;  // past U+10FFFF
    }
    if (p[k] < lo || p[k] > hi) break;
  }
  return {k, k == len, k < len && k == s.size()};
}

// Moves the decodable start of pending to the result; ill-formed bytes become
// U+FFFD (one per maximal ill-formed part). An incomplete sequence at the end
// stays in pending unless `all`.
std::string take_valid(std::string& pending, bool all) {
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    SequenceStart s = sequence_start(std::string_view(pending).substr(i));
    if (s.complete) {
      out.append(pending, i, s.n);
    } else if (s.cut_by_end && !all) {
      break;
    } else {
      out += kReplacement;
    }
    i += s.n;
  }
  pending.erase(0, i);
  return out;
}

}  // namespace

std::string StreamDecoder::feed(int32_t id) {
  std::string piece = tok_.token_to_piece(id, render_special_);
  if (at_start_ && !piece.empty()) {
    piece = tok_.decode({id}, render_special_);  // drops a SentencePiece space prefix, as decode() does
    at_start_ = false;
  }
  pending_ += piece;
  return take_valid(pending_, false);
}

std::string StreamDecoder::flush() { return take_valid(pending_, true); }

}  // namespace basalt
