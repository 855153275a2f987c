// SPDX-License-Identifier: MIT
#include "core/runtime/generation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace basalt {

Generation::Generation(const Tokenizer& tok, const GenerateOptions& opt, const std::vector<int32_t>& prompt,
                       int64_t n_vocab, TextSink on_text)
    : tok_(tok),
      opt_(opt),
      n_vocab_(n_vocab),
      on_text_(std::move(on_text)),
      sampler_(opt.sampling),
      decoder_(tok),
      history_(prompt) {
  stats_.n_prompt = static_cast<int64_t>(prompt.size());
  if (opt_.grammar) constraint_ = std::make_unique<TokenConstraint>(opt_.grammar, tok_);
}

void Generation::emit(const std::string& s) {
  if (!s.empty() && !cancelled_ && on_text_ && !on_text_(s)) cancelled_ = true;
}

// Adds text to what is held back; returns what can go out now: all of it but
// a tail that may still grow into a stop string, or, when a stop string has
// appeared, the text before it (and the request ends).
std::string Generation::release(std::string_view text, bool* stopped) {
  pending_ += text;
  size_t cut = std::string::npos;
  for (const std::string& s : opt_.stop) {
    if (s.empty()) continue;
    const size_t at = pending_.find(s);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    *stopped = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  size_t keep = 0;  // the longest tail of pending_ that begins a stop string
  for (const std::string& s : opt_.stop)
    for (size_t len = std::min(s.empty() ? 0 : s.size() - 1, pending_.size()); len > keep; --len)
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

void Generation::finish(const char* reason) {
  stats_.stop_reason = reason;
  if (stats_.stop_reason != "stop string") {
    bool stopped = false;
    std::string tail = release(decoder_.flush(), &stopped);
    emit(tail + std::exchange(pending_, {}));
  }
}

void Generation::cancel() {
  if (done()) return;
  cancelled_ = true;
  stats_.stop_reason = "cancelled";
}

int32_t Generation::step(const float* logits, int64_t context_left) { return accept(pick(logits), context_left); }

int32_t Generation::pick(const float* logits) {
  if (done() || length_reached()) return -1;
  int32_t id = -1;
  if (!constraint_) {
    id = sampler_.sample(logits, n_vocab_, history_);
  } else {
    try {  // pick runs on the engine's threads: nothing may escape
      id = pick_in_grammar(logits);
    } catch (const std::exception&) {  // the grammar's bounds (GrammarMatcher::kMaxStacks), or memory
      return -1;
    }
  }
  if (opt_.logprobs >= 0 && id >= 0) pending_logprob_ = token_logprob(logits, n_vocab_, id, opt_.logprobs);
  return id;
}

TokenLogprob token_logprob(const float* logits, int64_t n_vocab, int32_t id, int32_t top) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double log_total = mx + std::log(sum);
  auto logprob = [&](int64_t i) { return static_cast<float>(logits[i] - log_total); };
  TokenLogprob t;
  t.id = id;
  t.logprob = logprob(id);
  // The k best, the larger logit first and the lower id on ties: a heap of k with the worst in front.
  const size_t k = static_cast<size_t>(std::min<int64_t>(std::min(top, GenerateOptions::kMaxTopLogprobs), n_vocab));
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int32_t> best;
  best.reserve(k + 1);
  for (int64_t i = 0; i < n_vocab && k > 0; ++i) {
    if (best.size() == k && !better(static_cast<int32_t>(i), best.front())) continue;
    best.push_back(static_cast<int32_t>(i));
    std::push_heap(best.begin(), best.end(), better);
    if (best.size() > k) std::pop_heap(best.begin(), best.end(), better), best.pop_back();
  }
  std::sort(best.begin(), best.end(), better);
  for (int32_t b : best) t.top.emplace_back(b, logprob(b));
  return t;
}

int32_t Generation::pick_in_grammar(const float* logits) {
  const int32_t id = sampler_.sample(logits, n_vocab_, history_);
  if (constraint_->allows(id)) return id;
  // Most draws fit (the model follows the format it is asked for); only a
  // miss pays for the walk of the vocabulary, as llama.cpp's grammar does.
  ++stats_.n_redrawn;
  const std::vector<uint8_t>& allowed = constraint_->allowed();
  masked_.assign(logits, logits + n_vocab_);
  bool any = false;
  for (int64_t i = 0; i < n_vocab_; ++i) {
    const bool ok = i < static_cast<int64_t>(allowed.size()) && allowed[static_cast<size_t>(i)];
    if (!ok) masked_[static_cast<size_t>(i)] = -std::numeric_limits<float>::infinity();
    any |= ok;
  }
  if (!any) return -1;  // no token spells what the grammar needs next (accept ends the request)
  return sampler_.sample(masked_.data(), n_vocab_, history_);
}

int32_t Generation::accept(int32_t id, int64_t context_left) {
  if (done()) return -1;
  if (length_reached()) return finish("length"), -1;
  if (id < 0) return finish("no token fits"), -1;  // pick found none that fits the grammar (or passed its bounds)
  if ((opt_.stop_at_end_of_generation || constraint_) && tok_.is_end_of_generation(id)) return finish("eos"), -1;
  if (constraint_) {
    try {
      constraint_->accept(id);
    } catch (const std::exception&) {  // past the grammar's bounds
      return finish("no token fits"), -1;
    }
  }
  ++stats_.n_generated;
  history_.push_back(id);
  generated_.push_back(id);
  if (opt_.logprobs >= 0 && logprob_sink_ && pending_logprob_.id == id) logprob_sink_(pending_logprob_);
  bool stopped = false;
  emit(release(decoder_.feed(id), &stopped));
  if (stopped) return finish("stop string"), -1;
  if (constraint_ && constraint_->complete()) return finish("grammar"), -1;
  if (cancelled_) return finish("cancelled"), -1;
  if (context_left <= 0) return finish("context full"), -1;
  if (length_reached()) return finish("length"), -1;
  return id;
}

}  // namespace basalt
