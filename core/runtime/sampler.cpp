// SPDX-License-Identifier: MIT
// The chain runs in llama.cpp's order: logit bias, penalties, top-k, top-p, min-p,
// temperature, then a draw from the remaining distribution.
#include "core/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "core/error.h"

namespace basalt {

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {
  if (!std::isfinite(p.temperature) || p.temperature > 100) throw Error("temperature must be between 0 and 100");
  if (!(p.top_p > 0)) throw Error("top-p must be in (0, 1]");
  if (p.min_p < 0 || p.min_p > 1) throw Error("min-p must be in [0, 1]");
  if (!(p.repeat_penalty > 0) || p.repeat_penalty > 10) throw Error("repeat penalty must be in (0, 10]");
  if (p.repeat_last_n < 0) throw Error("repeat-last-n must be >= 0");
  if (!(std::fabs(p.presence_penalty) <= 2) || !(std::fabs(p.frequency_penalty) <= 2))
    throw Error("presence and frequency penalties must be in [-2, 2]");
  for (const auto& [id, bias] : p.logit_bias)
    if (id < 0 || std::isnan(bias)) throw Error("logit bias: token " + std::to_string(id) + " is not a token id, or the bias is not a number");
}

namespace {
// The candidates' order: the larger logit first, the lower id on ties.
template <class C>
bool by_logit(const C& a, const C& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}
}  // namespace

void Sampler::adjust(const float* logits, int64_t n_vocab, const std::vector<int32_t>& history, bool penalties) {
  adj_.clear();
  std::unordered_map<int32_t, size_t> at;  // id -> its entry in adj_
  auto entry = [&](int32_t id) -> float& {
    auto [it, fresh] = at.try_emplace(id, adj_.size());
    if (fresh) adj_.push_back({id, logits[id]});
    return adj_[it->second].logit;
  };
  for (const auto& [id, bias] : p_.logit_bias)
    if (id < n_vocab) entry(id) += bias;
  if (penalties && p_.repeat_last_n > 0) {
    std::unordered_map<int32_t, int> seen;  // token -> occurrences in the window
    const size_t from = history.size() > static_cast<size_t>(p_.repeat_last_n) ? history.size() - p_.repeat_last_n : 0;
    for (size_t i = from; i < history.size(); ++i) ++seen[history[i]];
    for (const auto& [id, count] : seen) {
      if (id < 0 || id >= n_vocab) continue;
      float& l = entry(id);
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      l -= static_cast<float>(count) * p_.frequency_penalty + p_.presence_penalty;
    }
  }
  std::sort(adj_.begin(), adj_.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
}

void Sampler::best_k(const float* logits, int64_t n_vocab, size_t k) {
  // The tokens in adj_ (by id) are left out of the scan and offered after it
  // with their adjusted logits, but for those among the first k, which start
  // the heap with them.
  size_t next = 0;  // adj_'s first entry not below the id at hand
  cand_.resize(k);
  for (size_t i = 0; i < k; ++i) {
    const bool adjusted = next < adj_.size() && adj_[next].id == static_cast<int32_t>(i);
    cand_[i] = {static_cast<int32_t>(i), adjusted ? adj_[next++].logit : logits[i]};
  }
  const size_t offered = next;
  std::make_heap(cand_.begin(), cand_.end(), by_logit<Candidate>);  // the worst of the k in front
  float worst = cand_.front().logit;
  auto take = [&](int64_t i) {
    if (!(logits[i] > worst)) return;  // ties too: the ids come in increasing order
    while (next < adj_.size() && adj_[next].id < i) ++next;
    if (next < adj_.size() && adj_[next].id == i) return;
    std::pop_heap(cand_.begin(), cand_.end(), by_logit<Candidate>);
    cand_.back() = {static_cast<int32_t>(i), logits[i]};
    std::push_heap(cand_.begin(), cand_.end(), by_logit<Candidate>);
    worst = cand_.front().logit;
  };
  // Blocks with nothing past the worst (nearly all, after the first few) are
  // skipped by one compare of the block, which the compiler vectorizes.
  constexpr int64_t kBlock = 64;
  int64_t i = static_cast<int64_t>(k);
  for (; i + kBlock <= n_vocab; i += kBlock) {
    const float w = worst;
    int any = 0;
    for (int64_t j = 0; j < kBlock; ++j) any |= logits[i + j] > w;
    if (any)
      for (int64_t j = 0; j < kBlock; ++j) take(i + j);
  }
  for (; i < n_vocab; ++i) take(i);
  for (size_t a = offered; a < adj_.size(); ++a) {
    if (!by_logit(adj_[a], cand_.front())) continue;
    std::pop_heap(cand_.begin(), cand_.end(), by_logit<Candidate>);
    cand_.back() = adj_[a];
    std::push_heap(cand_.begin(), cand_.end(), by_logit<Candidate>);
  }
  std::sort_heap(cand_.begin(), cand_.end(), by_logit<Candidate>);
}

int32_t Sampler::sample(const float* logits, int64_t n_vocab, const std::vector<int32_t>& history) {
  const bool penalties = p_.repeat_penalty != 1.0f || p_.presence_penalty != 0 || p_.frequency_penalty != 0;
  const bool adjusted = !p_.logit_bias.empty() || (penalties && p_.repeat_last_n > 0);
  if (adjusted) adjust(logits, n_vocab, history, penalties);
  else adj_.clear();
  // top-k (greedy: top-1) from the logits as they are, the few that the bias
  // and penalties change offered apart: no candidate list of the vocabulary
  // (sampling took 15% of a Gemma 3 server's CPU: docs/PERFORMANCE.md 9.10),
  // and blocks of logits with nothing past the k-th best skipped (greedy
  // read one logit at a time was 12% of a 16-sequence step, 9.12).
  // Where they change a sixteenth of it or more, the list costs no more.
  const bool top_k = p_.top_k > 0 && p_.top_k < n_vocab;
  if ((top_k || p_.temperature <= 0) && static_cast<int64_t>(adj_.size()) < n_vocab / 16) {
    best_k(logits, n_vocab, p_.temperature <= 0 ? 1 : static_cast<size_t>(p_.top_k));
    if (p_.temperature <= 0) return cand_[0].id;
    return draw(cand_.size(), cand_.size());
  }
  // The candidates [0, sorted) in order, by logit; probabilities at temperature 1
  // for the truncations, as llama.cpp does. top-p and min-p keep a head of that
  // order, so without top-k only a head is sorted, longer until it holds their
  // cut: most often a few hundred tokens, not the vocabulary (a full sort per
  // token made Gemma 3's decode, 262k tokens, 3.4x slower).
  const size_t sorted = candidates(logits, n_vocab);
  if (p_.temperature <= 0) return cand_[0].id;
  return draw(top_k ? sorted : cand_.size(), sorted);
}

size_t Sampler::candidates(const float* logits, int64_t n_vocab) {
  cand_.resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) cand_[i] = {static_cast<int32_t>(i), logits[i]};
  for (const Candidate& a : adj_) cand_[a.id].logit = a.logit;

  auto begin = cand_.begin();
  if (p_.temperature <= 0) {  // greedy: the best in front
    std::iter_swap(begin, std::min_element(begin, cand_.end(), by_logit<Candidate>));
    return 1;
  }
  const size_t n = cand_.size();
  const size_t sorted = p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n ? static_cast<size_t>(p_.top_k) : std::min(n, kFirstHead);
  std::partial_sort(begin, begin + static_cast<std::ptrdiff_t>(sorted), cand_.end(), by_logit<Candidate>);
  return sorted;
}

int32_t Sampler::draw(size_t n, size_t sorted) {
  const double mx = cand_[0].logit;
  double total = 0;  // top-p's denominator (an exp per candidate: only when it cuts)
  if (p_.top_p < 1.0f)
    for (size_t i = 0; i < n; ++i) total += std::exp(cand_[i].logit - mx);
  // Where top-p and min-p cut, read along the sorted head, which grows until it holds the cut.
  size_t cut = n, at = 0;
  double mass = 0;  // top-p's share of the head read so far
  while (p_.top_p < 1.0f || p_.min_p > 0) {
    for (; at < sorted && cut == n; ++at) {
      const double prob = std::exp(cand_[at].logit - mx);  // the largest's is 1
      if (p_.min_p > 0 && at > 0 && prob < p_.min_p) cut = at;
      else if (p_.top_p < 1.0f && (mass += prob / total) >= p_.top_p) cut = at + 1;
    }
    if (cut < n || sorted == n) break;
    const size_t longer = std::min(n, 8 * sorted);
    std::partial_sort(cand_.begin() + static_cast<std::ptrdiff_t>(sorted), cand_.begin() + static_cast<std::ptrdiff_t>(longer),
                      cand_.end(), by_logit<Candidate>);
    sorted = longer;
  }
  n = cut;
  // Temperature, then draw (over the kept head, or, untruncated, all in any order).
  std::vector<double> prob(n);
  total = 0;
  for (size_t i = 0; i < n; ++i) total += prob[i] = std::exp((cand_[i].logit - mx) / p_.temperature);
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
  double cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += prob[i];
    if (u < cum) return cand_[i].id;
  }
  return cand_[n - 1].id;
}

}  // namespace basalt
