// SPDX-License-Identifier: MIT
#include "core/grammar/gbnf.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/util/utf8.h"

namespace basalt {

namespace {

using Element = Grammar::Element;
using Sequence = Grammar::Sequence;

constexpr uint32_t kMaxCodePoint = 0x10ffff;
constexpr int kMaxNesting = 200;  // parentheses: the parser recurses on them

struct CodeRange {
  uint32_t lo, hi;
};

// The byte ranges, position by position, of the UTF-8 encodings of [lo, hi]:
// split until every position's bytes run from lo's to hi's (a range within one
// encoded length, without surrogates).
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the bits of the last i bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) return utf8_sequences(lo, lo | m, out), utf8_sequences((lo | m) + 1, hi, out);
      if ((hi & m) != m) return utf8_sequences(lo, (hi & ~m) - 1, out), utf8_sequences(hi & ~m, hi, out);
    }
  }
  std::string a, b;
  utf8_append(a, lo);
  utf8_append(b, hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t k = 0; k < a.size(); ++k) seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out.push_back(std::move(seq));
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : t_(text) {}

  Grammar parse() {
    skip_space(true);
    while (pos_ < t_.size()) {
      const size_t at = pos_;
      const std::string n = name();
      if (!defined_.insert(n).second) fail("the rule '" + n + "' is defined twice", at);
      skip_space(false);
      if (t_.substr(pos_, 3) != "::=") fail("expected '::=' after the rule name '" + n + "'");
      pos_ += 3;
      skip_space(true);
      alternatives(rule_named(n, at), 0);
      skip_space(false);
      if (pos_ < t_.size() && t_[pos_] != '\n') fail("expected the end of the rule '" + n + "'");
      skip_space(true);
    }
    for (const auto& [n, at] : used_)
      if (!defined_.count(n)) fail("the rule '" + n + "' is used but not defined", at);
    if (!defined_.count("root")) fail("there is no rule 'root' (where the grammar starts)", 0);
    g_.set_root(rules_.at("root"));
    GrammarMatcher start(g_);  // checks it (left recursion, empty rules) and the matcher's bounds at its start
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at = SIZE_MAX) const {
    if (at == SIZE_MAX) at = pos_;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < t_.size(); ++i) t_[i] == '\n' ? (++line, col = 1) : ++col;
    throw Error("grammar, line " + std::to_string(line) + " column " + std::to_string(col) + ": " + what);
  }

  // Blanks and comments; newlines too where a rule goes on across them.
  void skip_space(bool newlines) {
    while (pos_ < t_.size()) {
      const char c = t_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < t_.size() && t_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

  std::string name() {
    const size_t begin = pos_;
    while (pos_ < t_.size() && name_char(t_[pos_])) ++pos_;
    if (pos_ == begin) fail("expected a rule name");
    return std::string(t_.substr(begin, pos_ - begin));
  }

  int32_t rule_named(const std::string& n, size_t at) {
    auto [it, fresh] = rules_.try_emplace(n, -1);
    if (fresh) it->second = g_.new_rule(), used_.emplace(n, at);
    return it->second;
  }

  // The next character of the grammar text, decoded from UTF-8.
  uint32_t code_point() {
    if (pos_ >= t_.size()) fail("unexpected end of the grammar");
    const auto b0 = static_cast<uint8_t>(t_[pos_]);
    const int n = b0 < 0x80 ? 1 : b0 >= 0xc2 && b0 < 0xe0 ? 2 : b0 >= 0xe0 && b0 < 0xf0 ? 3 : b0 >= 0xf0 && b0 < 0xf5 ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > t_.size()) fail("the grammar is not valid UTF-8");
    uint32_t cp = n == 1 ? b0 : b0 & (0x7f >> n);
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<uint8_t>(t_[pos_ + static_cast<size_t>(k)]);
      if ((b & 0xc0) != 0x80) fail("the grammar is not valid UTF-8");
      cp = cp << 6 | (b & 0x3f);
    }
    static constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kLeast[n] || cp > kMaxCodePoint || (cp >= 0xd800 && cp < 0xe000)) fail("the grammar is not valid UTF-8");
    pos_ += static_cast<size_t>(n);
    return cp;
  }

  // A character of a literal or a class, escapes decoded.
  uint32_t character() {
    if (t_[pos_] != '\\') return code_point();
    ++pos_;
    if (pos_ >= t_.size()) fail("unexpected end of the grammar after '\\'");
    const char c = t_[pos_++];
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      case '\\': case '"': case '[': case ']': case '-': case '/': case '^': return static_cast<uint8_t>(c);
      default: fail(std::string("unknown escape '\\") + c + "'", pos_ - 2);
    }
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      const char c = pos_ < t_.size() ? t_[pos_] : '\0';
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail("expected " + std::to_string(digits) + " hex digits");
      v = v << 4 | static_cast<uint32_t>(d);
    }
    if (v > kMaxCodePoint || (v >= 0xd800 && v < 0xe000)) fail("the escape is not a Unicode scalar value", pos_ - static_cast<size_t>(digits));
    return v;
  }

  // The code points of ranges (sorted, merged, surrogates removed) as their UTF-8 byte sequences.
  Element code_ranges(std::vector<CodeRange> ranges, bool complement) {
    std::sort(ranges.begin(), ranges.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
    std::vector<CodeRange> merged;
    for (const CodeRange& r : ranges)
      if (!merged.empty() && r.lo <= merged.back().hi + 1) merged.back().hi = std::max(merged.back().hi, r.hi);
      else merged.push_back(r);
    if (complement) {
      std::vector<CodeRange> rest;
      uint32_t next = 0;
      for (const CodeRange& r : merged) {
        if (r.lo > next) rest.push_back({next, r.lo - 1});
        next = r.hi + 1;
      }
      if (next <= kMaxCodePoint) rest.push_back({next, kMaxCodePoint});
      merged = std::move(rest);
    }
    ByteSet single;  // the one-byte characters, in one set
    std::vector<Sequence> alts;
    for (CodeRange r : merged) {
      // split where the encoded length changes and around the surrogates
      for (const CodeRange& piece : {CodeRange{0, 0x7f}, CodeRange{0x80, 0x7ff}, CodeRange{0x800, 0xd7ff},
                                     CodeRange{0xe000, 0xffff}, CodeRange{0x10000, kMaxCodePoint}}) {
        const uint32_t lo = std::max(r.lo, piece.lo), hi = std::min(r.hi, piece.hi);
        if (lo > hi) continue;
        std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
        utf8_sequences(lo, hi, seqs);
        for (const auto& seq : seqs) {
          if (seq.size() == 1) {
            for (int b = seq[0].first; b <= seq[0].second; ++b) single.set(static_cast<size_t>(b));
            continue;
          }
          Sequence bytes;
          for (const auto& [a, z] : seq) {
            ByteSet s;
            for (int b = a; b <= z; ++b) s.set(static_cast<size_t>(b));
            bytes.push_back(g_.bytes(s));
          }
          alts.push_back(bytes);
        }
      }
    }
    if (single.any()) {
      if (alts.empty()) return g_.bytes(single);
      alts.insert(alts.begin(), {g_.bytes(single)});
    }
    if (alts.empty()) fail("the character class matches nothing");
    return g_.one_of(alts);
  }

  Sequence term(int depth) {
    const char c = t_[pos_];
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (true) {
        if (pos_ >= t_.size() || t_[pos_] == '\n') fail("the literal has no closing '\"'");
        if (t_[pos_] == '"') break;
        utf8_append(bytes, character());
      }
      ++pos_;
      return g_.literal(bytes);
    }
    if (c == '[') {
      ++pos_;
      const bool complement = pos_ < t_.size() && t_[pos_] == '^';
      if (complement) ++pos_;
      std::vector<CodeRange> ranges;
      while (true) {
        if (pos_ >= t_.size() || t_[pos_] == '\n') fail("the character class has no closing ']'");
        if (t_[pos_] == ']') break;
        const uint32_t lo = character();
        uint32_t hi = lo;
        if (pos_ + 1 < t_.size() && t_[pos_] == '-' && t_[pos_ + 1] != ']' && t_[pos_ + 1] != '\n') {
          ++pos_;
          hi = character();
          if (hi < lo) fail("the range's end comes before its start", pos_ - 1);
        }
        ranges.push_back({lo, hi});
      }
      ++pos_;
      return {code_ranges(ranges, complement)};
    }
    if (c == '.') {
      ++pos_;
      return {code_ranges({}, true)};
    }
    if (c == '(') {
      if (depth >= kMaxNesting) fail("parentheses nested more than " + std::to_string(kMaxNesting) + " deep");
      ++pos_;
      const int32_t group = g_.new_rule();
      skip_space(true);
      alternatives(group, depth + 1);
      skip_space(true);
      if (pos_ >= t_.size() || t_[pos_] != ')') fail("expected ')'");
      ++pos_;
      return {Grammar::ref(group)};
    }
    if (name_char(c)) {
      const size_t at = pos_;
      return {Grammar::ref(rule_named(name(), at))};
    }
    if (c == '<' || c == '!') fail("token matches (<...>, !<...>) are not supported: write the text instead");
    fail(std::string("unexpected '") + c + "'");
  }

  // A term's postfix repetition, if it has one.
  Sequence repeated(const Sequence& item) {
    if (pos_ >= t_.size()) return item;
    switch (t_[pos_]) {
      case '*': return ++pos_, g_.repeat(item, 0, -1);
      case '+': return ++pos_, g_.repeat(item, 1, -1);
      case '?': return ++pos_, g_.repeat(item, 0, 1);
      case '{': {
        ++pos_;
        const int64_t min = count();
        int64_t max = min;
        if (pos_ < t_.size() && t_[pos_] == ',') {
          ++pos_;
          max = pos_ < t_.size() && t_[pos_] == '}' ? -1 : count();
        }
        if (pos_ >= t_.size() || t_[pos_] != '}') fail("expected '}'");
        ++pos_;
        try {
          return g_.repeat(item, min, max);
        } catch (const Error& e) {
          fail(e.what());
        }
      }
      default: return item;
    }
  }

  int64_t count() {
    const size_t begin = pos_;
    int64_t v = 0;
    while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_])) && v <= Grammar::kMaxRepeat)
      v = v * 10 + (t_[pos_++] - '0');
    if (pos_ == begin) fail("expected a count");
    return v;
  }

  // Alternatives separated by '|' (a newline may follow one), each a
  // sequence of terms: added to rule. Inside parentheses (depth > 0) a
  // sequence goes on across newlines.
  void alternatives(int32_t rule, int depth) {
    while (true) {
      Sequence seq;
      while (true) {
        skip_space(depth > 0);
        if (pos_ >= t_.size() || t_[pos_] == '|' || t_[pos_] == ')' || t_[pos_] == '\n') break;
        const Sequence item = repeated(term(depth));
        seq.insert(seq.end(), item.begin(), item.end());
      }
      g_.add_alternative(rule, seq);
      if (pos_ < t_.size() && t_[pos_] == '|') {
        ++pos_;
        skip_space(true);
        continue;
      }
      return;
    }
  }

  std::string_view t_;
  size_t pos_ = 0;
  Grammar g_;
  std::map<std::string, int32_t> rules_;
  std::set<std::string> defined_;
  std::map<std::string, size_t> used_;  // each rule name where it first appears
};

}  // namespace

Grammar gbnf_grammar(std::string_view text) { return GbnfParser(text).parse(); }

}  // namespace basalt
