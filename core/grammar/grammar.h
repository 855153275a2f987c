// SPDX-License-Identifier: MIT
// A context-free grammar over bytes, and the matcher that follows generated
// text through it: what constrains a request's output to JSON, or to JSON of
// a schema (core/grammar/json_schema.h). Bytes, not characters, because
// tokens are bytes: a token may end inside a UTF-8 sequence, and the
// grammars spell valid UTF-8 out byte by byte.
//
// A grammar is rules; a rule is alternatives; an alternative is a sequence of
// elements, each a byte set or a reference to a rule. Repetition is a rule
// that refers to itself at its end (right recursion); left recursion is
// refused (the matcher would never reach a byte).
#pragma once

#include <bitset>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace basalt {

using ByteSet = std::bitset<256>;

class Grammar {
 public:
  // One element of an alternative: a byte set, a rule, or (neither) the end.
  struct Element {
    int32_t set = -1;
    int32_t rule = -1;
    bool is_end() const { return set < 0 && rule < 0; }
  };
  using Sequence = std::vector<Element>;

  // Building. A rule is made empty (no alternatives: it matches nothing) and
  // given alternatives later, so rules may refer to each other in any order.
  int32_t new_rule();
  void add_alternative(int32_t rule, const Sequence& seq);
  void set_root(int32_t rule) { root_ = rule; }
  Element bytes(const ByteSet& set);      // one byte of the set
  Element byte(uint8_t b);                // that byte
  static Element ref(int32_t rule) { return {-1, rule}; }
  Sequence literal(std::string_view text);  // those bytes in order
  // A new rule of these alternatives; optional: seq or nothing; repeat: item
  // min to max times (max < 0: without bound; counts up to kMaxRepeat).
  Element one_of(const std::vector<Sequence>& alternatives);
  Element optional(const Sequence& seq) { return one_of({seq, {}}); }
  Sequence repeat(const Sequence& item, int64_t min, int64_t max);
  // Any bytes, none at all included, in which `pattern` (not empty) does not
  // occur: the text a model may write before a tag. One rule per byte of the
  // pattern matched so far (its string-search automaton), so the text has
  // one reading, and the tag after it at most as many as it overlaps itself.
  Element text_without(std::string_view pattern);
  static constexpr int64_t kMaxRepeat = 4096;
  static constexpr size_t kMaxElements = size_t{1} << 20;  // about 8 MB: add_alternative throws Error past it

  // Reading (the matcher). Positions index one array of elements in which
  // each alternative is followed by an end element.
  int32_t root() const { return root_; }
  size_t n_rules() const { return alternatives_.size(); }
  size_t n_elements() const { return code_.size(); }
  const Element& at(int32_t pos) const { return code_[static_cast<size_t>(pos)]; }
  const std::vector<int32_t>& alternatives(int32_t rule) const { return alternatives_[static_cast<size_t>(rule)]; }
  const ByteSet& set(int32_t index) const { return sets_[static_cast<size_t>(index)]; }

  // Throws Error if the root is unset, a rule has no alternatives, or a rule
  // can reach itself without a byte in between (left recursion).
  void check() const;

 private:
  int32_t root_ = -1;
  std::vector<Element> code_;
  std::vector<std::vector<int32_t>> alternatives_;  // rule -> where each alternative starts in code_
  std::vector<ByteSet> sets_;
  std::unordered_map<ByteSet, int32_t> set_index_;
};

// Where the text so far may be in the grammar: every way of reading it,
// each a stack of positions still to match (the top one a byte set's; an
// empty stack: the grammar has ended). Copyable: a token is tried on a copy.
// The stacks lie end to end in one array, so that copying a matcher and
// taking a byte reuse its memory (the vocabulary walk does both per byte).
class GrammarMatcher {
 public:
  // Bounds on one reading's nesting of rules between bytes and on the
  // readings at once: past them the matcher throws Error (a schema of
  // thousands of optional properties, an ambiguous grammar),
  static constexpr int kMaxNesting = 1000;
  static constexpr size_t kMaxStacks = 4096;
  // and on the positions of all readings together (readings x their depth):
  // what one byte costs, whatever the grammar (a grammar that nests a rule
  // in itself at every byte grows both).
  static constexpr size_t kMaxPositions = size_t{1} << 15;

  explicit GrammarMatcher(const Grammar& g);  // before any text; the grammar must outlive it

  // Takes one byte or all of text; false, and the matcher unchanged, where the grammar cannot.
  bool accept(uint8_t b);
  bool accept(std::string_view text);
  // *this = from after b (from's grammar); false where the grammar cannot take b (*this is then void).
  bool advance(const GrammarMatcher& from, uint8_t b);
  bool can_end() const;       // the text so far is a whole sentence of the grammar
  bool can_continue() const;  // some byte may follow
  bool allows(uint8_t b) const;
  // The same stacks in the same order (a string's every character leaves the same).
  bool same_state(const GrammarMatcher& o) const { return g_ == o.g_ && begin_ == o.begin_ && pos_ == o.pos_; }
  size_t n_stacks() const { return begin_.size() - 1; }  // readings of the text at once

 private:
  bool empty_stack(size_t i) const { return begin_[i] == begin_[i + 1]; }
  int32_t top(size_t i) const { return pos_[begin_[i + 1] - 1]; }
  // Adds every stack that st becomes once the rules at its top are opened
  // down to byte sets (st is left as it was).
  void expand(std::vector<int32_t>& st, int depth);
  void add_stack(const std::vector<int32_t>& st);  // unless it is there already

  const Grammar* g_;
  std::vector<int32_t> pos_;     // the stacks' positions, bottom first, stack after stack
  std::vector<uint32_t> begin_;  // stack i is pos_[begin_[i], begin_[i + 1])
  std::vector<int32_t> work_;    // the stack being opened
  // Past kIndexFrom stacks, each stack's hash -> its index, so that adding
  // one is not a scan of all (an ambiguous grammar may hold thousands).
  static constexpr size_t kIndexFrom = 32;
  std::unordered_multimap<uint64_t, uint32_t> index_;
};

}  // namespace basalt
