// SPDX-License-Identifier: MIT
#include "tools/serve/reasoning.h"

#include <algorithm>

namespace basalt::serve {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view without_blanks_before(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  return s;
}

// How many of s's last bytes could begin tag (its proper prefixes).
size_t partial_tag_at_end(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

bool prompt_opens_reasoning(std::string_view prompt_tail) {
  while (!prompt_tail.empty() && blank(prompt_tail.back())) prompt_tail.remove_suffix(1);
  return prompt_tail.size() >= kOpen.size() && prompt_tail.substr(prompt_tail.size() - kOpen.size()) == kOpen;
}

ReplyParts ReasoningSplitter::feed(std::string_view piece) {
  ReplyParts out;
  held_ += piece;
  while (true) {
    std::string_view rest = held_;
    switch (state_) {
      case State::before: {
        const std::string_view text = without_blanks_before(rest);
        if (text.size() >= kOpen.size() && text.substr(0, kOpen.size()) == kOpen) {
          held_.erase(0, held_.size() - text.size() + kOpen.size());
          state_ = State::inside;
          continue;
        }
        if (kOpen.substr(0, text.size()) == text) return out;  // blanks, or the tag's start: wait
        state_ = State::content;
        continue;
      }
      case State::inside: {
        const size_t close = rest.find(kClose);
        if (close == std::string_view::npos) {
          const size_t keep = partial_tag_at_end(rest, kClose);
          out.reasoning += rest.substr(0, rest.size() - keep);
          held_.erase(0, held_.size() - keep);
          return out;
        }
        out.reasoning += rest.substr(0, close);
        held_.erase(0, close + kClose.size());
        state_ = State::after_close;
        continue;
      }
      case State::after_close: {
        const std::string_view text = without_blanks_before(rest);
        held_.erase(0, held_.size() - text.size());
        if (held_.empty()) return out;
        state_ = State::content;
        continue;
      }
      case State::content:
        out.content += held_;
        held_.clear();
        return out;
    }
  }
}

ReplyParts ReasoningSplitter::finish() {
  ReplyParts out;
  if (state_ == State::inside) out.reasoning = std::move(held_);
  else if (state_ != State::after_close) out.content = std::move(held_);
  held_.clear();
  return out;
}

ReplyParts split_reasoning(std::string_view reply, bool starts_inside) {
  ReasoningSplitter s(starts_inside);
  ReplyParts all = s.feed(reply), rest = s.finish();
  all.reasoning += rest.reasoning;
  all.content += rest.content;
  return all;
}

}  // namespace basalt::serve
