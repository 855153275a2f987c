// SPDX-License-Identifier: MIT
#include "core/grammar/token_constraint.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace basalt {

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> grammar, const Tokenizer& tok)
    : grammar_(std::move(grammar)), tok_(tok), pieces_(tok.sorted_pieces()), matcher_(*grammar_) {
  known_.reserve(kKnown);  // allowed() hands out references into it
}

bool TokenConstraint::allows(int32_t id) const {
  if (id < 0 || id >= tok_.n_vocab()) return false;
  const std::string_view piece = pieces_.piece(id);
  if (piece.empty()) return tok_.is_end_of_generation(id) && matcher_.can_end();
  GrammarMatcher trial = matcher_;
  return trial.accept(piece);
}

const std::vector<uint8_t>& TokenConstraint::allowed() const {
  for (const Known& k : known_)
    if (k.state.same_state(matcher_)) return k.allowed;
  if (known_.size() < kKnown) known_.push_back({matcher_, {}});
  Known& slot = known_[next_known_];
  next_known_ = (next_known_ + 1) % kKnown;
  slot.state = matcher_;
  std::vector<uint8_t>& allowed = slot.allowed;
  allowed.assign(static_cast<size_t>(tok_.n_vocab()), 0);
  if (matcher_.can_end())
    for (int32_t id = 0; id < tok_.n_vocab(); ++id)
      if (pieces_.piece(id).empty() && tok_.is_end_of_generation(id)) allowed[static_cast<size_t>(id)] = 1;
  // states[d]: the matcher after the first d bytes of the token at hand,
  // valid for d <= depth. A token that fails at byte f rules out the tokens
  // after it that share its first f + 1 bytes.
  std::vector<GrammarMatcher> states{matcher_};
  size_t depth = 0;
  size_t failed_at = SIZE_MAX;
  size_t work = 0;  // readings advanced by a byte, against kWalkBudget
  for (size_t k = 0; k < pieces_.ids.size(); ++k) {
    const int32_t id = pieces_.ids[k];
    const std::string_view piece = pieces_.piece(id);
    const size_t common = pieces_.common[k];
    if (failed_at != SIZE_MAX && common > failed_at) continue;
    failed_at = SIZE_MAX;
    depth = std::min(depth, common);
    if (states.size() < piece.size() + 1) states.resize(piece.size() + 1, matcher_);
    for (; depth < piece.size(); ++depth) {
      work += states[depth].n_stacks();
      if (work > kWalkBudget)
        throw Error("the grammar is too ambiguous to follow: more than " + std::to_string(kWalkBudget) +
                    " readings advanced to find the next token");
      if (!states[depth + 1].advance(states[depth], static_cast<uint8_t>(piece[depth]))) {
        failed_at = depth;
        break;
      }
    }
    if (failed_at == SIZE_MAX) allowed[static_cast<size_t>(id)] = 1;
  }
  return allowed;
}

void TokenConstraint::accept(int32_t id) {
  // One pass of the matcher: accept(piece) takes all of it or leaves it as it was.
  const std::string_view piece = id >= 0 && id < tok_.n_vocab() ? pieces_.piece(id) : std::string_view();
  const bool fits = piece.empty() ? allows(id) : matcher_.accept(piece);
  if (!fits) throw Error("token " + std::to_string(id) + " does not fit the output's grammar");
}

}  // namespace basalt
