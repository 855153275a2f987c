// SPDX-License-Identifier: MIT
#include "core/grammar/grammar.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.h"

namespace basalt {

int32_t Grammar::new_rule() {
  alternatives_.emplace_back();
  return static_cast<int32_t>(alternatives_.size() - 1);
}

void Grammar::add_alternative(int32_t rule, const Sequence& seq) {
  if (rule < 0 || static_cast<size_t>(rule) >= alternatives_.size()) throw Error("grammar: no rule " + std::to_string(rule));
  if (code_.size() + seq.size() + 1 > kMaxElements)
    throw Error("grammar: more than " + std::to_string(kMaxElements) + " elements (a schema or grammar too large)");
  alternatives_[static_cast<size_t>(rule)].push_back(static_cast<int32_t>(code_.size()));
  for (const Element& e : seq) {
    if (e.is_end()) continue;
    if (e.rule >= 0 && static_cast<size_t>(e.rule) >= alternatives_.size())
      throw Error("grammar: no rule " + std::to_string(e.rule));
    code_.push_back(e);
  }
  code_.push_back(Element{});
}

Grammar::Element Grammar::bytes(const ByteSet& set) {
  auto [it, fresh] = set_index_.try_emplace(set, static_cast<int32_t>(sets_.size()));
  if (fresh) sets_.push_back(set);
  return {it->second, -1};
}

Grammar::Element Grammar::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

Grammar::Sequence Grammar::literal(std::string_view text) {
  Sequence seq;
  for (char c : text) seq.push_back(byte(static_cast<uint8_t>(c)));
  return seq;
}

Grammar::Element Grammar::one_of(const std::vector<Sequence>& alternatives) {
  const int32_t r = new_rule();
  for (const Sequence& a : alternatives) add_alternative(r, a);
  return ref(r);
}

Grammar::Element Grammar::text_without(std::string_view pattern) {
  if (pattern.empty()) throw Error("grammar: text without an empty pattern");
  const size_t m = pattern.size();
  // fail[i]: the longest proper border of pattern[0, i) (Knuth-Morris-Pratt).
  std::vector<size_t> fail(m + 1, 0);
  for (size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && pattern[i] != pattern[k]) k = fail[k];
    if (pattern[i] == pattern[k]) ++k;
    fail[i + 1] = k;
  }
  auto next = [&](size_t state, uint8_t b) {
    while (state > 0 && static_cast<uint8_t>(pattern[state]) != b) state = fail[state];
    return static_cast<uint8_t>(pattern[state]) == b ? state + 1 : 0;
  };
  std::vector<int32_t> rules(m);
  for (int32_t& r : rules) r = new_rule();
  for (size_t state = 0; state < m; ++state) {
    std::vector<ByteSet> to(m);  // the bytes that lead to each state; to state m (the pattern whole): none
    for (int b = 0; b < 256; ++b)
      if (const size_t n = next(state, static_cast<uint8_t>(b)); n < m) to[n].set(static_cast<size_t>(b));
    add_alternative(rules[state], {});
    for (size_t n = 0; n < m; ++n)
      if (to[n].any()) add_alternative(rules[state], {bytes(to[n]), ref(rules[n])});
  }
  return ref(rules[0]);
}

Grammar::Sequence Grammar::repeat(const Sequence& item, int64_t min, int64_t max) {
  if (min < 0 || min > kMaxRepeat || max > kMaxRepeat)
    throw Error("grammar: a repetition count above " + std::to_string(kMaxRepeat) + " is not supported");
  if (max >= 0 && max < min) throw Error("grammar: a repetition's maximum is below its minimum");
  Sequence seq;
  for (int64_t i = 0; i < min; ++i) seq.insert(seq.end(), item.begin(), item.end());
  if (max < 0) {  // tail := item tail | nothing
    const int32_t tail = new_rule();
    Sequence again = item;
    again.push_back(ref(tail));
    add_alternative(tail, again);
    add_alternative(tail, {});
    seq.push_back(ref(tail));
  } else if (max > min) {  // from the back: o_k := item o_(k+1) | nothing
    Element more = optional(item);
    for (int64_t k = max - min - 1; k > 0; --k) {
      Sequence next = item;
      next.push_back(more);
      more = optional(next);
    }
    seq.push_back(more);
  }
  return seq;
}

void Grammar::check() const {
  if (root_ < 0 || static_cast<size_t>(root_) >= alternatives_.size()) throw Error("grammar: no root rule");
  const size_t n = alternatives_.size();
  for (size_t r = 0; r < n; ++r)
    if (alternatives_[r].empty()) throw Error("grammar: rule " + std::to_string(r) + " has no alternatives");
  // Which rules can match no bytes at all, to a fixed point.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (int32_t pos : alternatives_[r]) {
        while (!code_[pos].is_end() && code_[pos].rule >= 0 && nullable[code_[pos].rule]) ++pos;
        if (code_[pos].is_end()) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Left recursion: a cycle among the rules each may open before a byte.
  std::vector<std::vector<int32_t>> first(n);
  for (size_t r = 0; r < n; ++r)
    for (int32_t pos : alternatives_[r])
      for (; code_[pos].rule >= 0; ++pos) {
        first[r].push_back(code_[pos].rule);
        if (!nullable[code_[pos].rule]) break;
      }
  std::vector<char> state(n, 0);  // 0 unseen, 1 on the path, 2 done
  std::vector<std::pair<int32_t, size_t>> path;
  for (size_t start = 0; start < n; ++start) {
    if (state[start]) continue;
    path.push_back({static_cast<int32_t>(start), 0});
    state[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == first[r].size()) {
        state[r] = 2;
        path.pop_back();
        continue;
      }
      const int32_t next = first[r][i++];
      if (state[next] == 1) throw Error("grammar: rule " + std::to_string(next) + " is left-recursive");
      if (state[next] == 0) {
        state[next] = 1;
        path.push_back({next, 0});
      }
    }
  }
}

GrammarMatcher::GrammarMatcher(const Grammar& g) : g_(&g), begin_{0} {
  g.check();
  for (int32_t alt : g.alternatives(g.root())) {
    work_.clear();
    if (!g.at(alt).is_end()) work_.push_back(alt);
    expand(work_, 0);
  }
}

namespace {
uint64_t hash_of(const int32_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull ^ n;  // FNV-1a over the positions
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint32_t>(p[i])) * 1099511628211ull;
  return h;
}
}  // namespace

void GrammarMatcher::add_stack(const std::vector<int32_t>& st) {
  auto same = [&](size_t i) {
    return begin_[i + 1] - begin_[i] == st.size() && std::equal(st.begin(), st.end(), pos_.begin() + begin_[i]);
  };
  const uint64_t h = hash_of(st.data(), st.size());
  if (n_stacks() < kIndexFrom) {
    for (size_t i = 0; i < n_stacks(); ++i)
      if (same(i)) return;
  } else {
    if (n_stacks() == kIndexFrom && index_.empty())  // the first time past the scan's size: index them all
      for (size_t i = 0; i < n_stacks(); ++i) index_.emplace(hash_of(pos_.data() + begin_[i], begin_[i + 1] - begin_[i]), i);
    for (auto [it, end] = index_.equal_range(h); it != end; ++it)
      if (same(it->second)) return;
  }
  if (n_stacks() == kMaxStacks || pos_.size() + st.size() > kMaxPositions)
    throw Error("grammar: more than " + std::to_string(kMaxStacks) + " readings of the text at once, or " +
                std::to_string(kMaxPositions) + " positions in them");
  if (n_stacks() >= kIndexFrom) index_.emplace(h, static_cast<uint32_t>(n_stacks()));
  pos_.insert(pos_.end(), st.begin(), st.end());
  begin_.push_back(static_cast<uint32_t>(pos_.size()));
}

void GrammarMatcher::expand(std::vector<int32_t>& st, int depth) {
  // Grammar::check refuses left recursion, so depth is bounded by the grammar's size; this bounds the stack.
  if (depth > kMaxNesting) throw Error("grammar: more than " + std::to_string(kMaxNesting) + " rules open at once");
  if (st.empty() || g_->at(st.back()).set >= 0) return add_stack(st);
  const int32_t pos = st.back();
  st.pop_back();
  const bool then = !g_->at(pos + 1).is_end();  // what follows the rule in its sequence
  if (then) st.push_back(pos + 1);
  for (int32_t alt : g_->alternatives(g_->at(pos).rule)) {
    const bool open = !g_->at(alt).is_end();
    if (open) st.push_back(alt);
    expand(st, depth + 1);
    if (open) st.pop_back();
  }
  if (then) st.pop_back();
  st.push_back(pos);
}

bool GrammarMatcher::advance(const GrammarMatcher& from, uint8_t b) {
  g_ = from.g_;
  pos_.clear();
  begin_.assign(1, 0);
  index_.clear();
  for (size_t i = 0; i < from.n_stacks(); ++i) {
    if (from.empty_stack(i) || !g_->set(g_->at(from.top(i)).set).test(b)) continue;
    work_.assign(from.pos_.begin() + from.begin_[i], from.pos_.begin() + from.begin_[i + 1] - 1);
    const int32_t next = from.top(i) + 1;
    if (!g_->at(next).is_end()) work_.push_back(next);
    expand(work_, 0);
  }
  return n_stacks() > 0;
}

bool GrammarMatcher::accept(uint8_t b) {
  GrammarMatcher next(*this);
  if (!next.advance(*this, b)) return false;
  *this = std::move(next);
  return true;
}

bool GrammarMatcher::accept(std::string_view text) {
  GrammarMatcher a(*this), b(*this);
  for (char c : text) {
    if (!b.advance(a, static_cast<uint8_t>(c))) return false;
    std::swap(a, b);
  }
  *this = std::move(a);
  return true;
}

bool GrammarMatcher::can_end() const {
  for (size_t i = 0; i < n_stacks(); ++i)
    if (empty_stack(i)) return true;
  return false;
}

bool GrammarMatcher::can_continue() const {
  for (size_t i = 0; i < n_stacks(); ++i)
    if (!empty_stack(i)) return true;
  return false;
}

bool GrammarMatcher::allows(uint8_t b) const {
  for (size_t i = 0; i < n_stacks(); ++i)
    if (!empty_stack(i) && g_->set(g_->at(top(i)).set).test(b)) return true;
  return false;
}

}  // namespace basalt
