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

int32_t Sampler::sample(const float* logits, int64_t n_vocab, const std::vector<int32_t>& history) {
  const bool penalties = p_.repeat_penalty != 1.0f || p_.presence_penalty != 0 || p_.frequency_penalty != 0;
  if (p_.temperature <= 0 && p_.logit_bias.empty() && !(penalties && p_.repeat_last_n > 0)) {
    // Greedy with nothing to adjust: the first largest logit, read in place.
    // A server's step samples each of its sequences in turn while the worker
    // threads wait; the candidate list cost 3% of a 16-sequence step.
    int64_t best = 0;
    for (int64_t i = 1; i < n_vocab; ++i)
      if (logits[i] > logits[best]) best = i;
    return static_cast<int32_t>(best);
  }
  cand_.resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) cand_[i] = {static_cast<int32_t>(i), logits[i]};

  for (const auto& [id, bias] : p_.logit_bias)
    if (id < n_vocab) cand_[id].logit += bias;

  if (penalties && p_.repeat_last_n > 0) {
    std::unordered_map<int32_t, int> seen;  // token -> occurrences in the window
    const size_t from = history.size() > static_cast<size_t>(p_.repeat_last_n) ? history.size() - p_.repeat_last_n : 0;
    for (size_t i = from; i < history.size(); ++i) ++seen[history[i]];
    for (const auto& [id, count] : seen) {
      if (id < 0 || id >= n_vocab) continue;
      float& l = cand_[id].logit;
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      l -= static_cast<float>(count) * p_.frequency_penalty + p_.presence_penalty;
    }
  }

  auto by_logit = [](const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  if (p_.temperature <= 0) return std::min_element(cand_.begin(), cand_.end(), by_logit)->id;

  size_t n = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_logit);
    n = static_cast<size_t>(p_.top_k);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  // Probabilities at temperature 1 for the truncations, as llama.cpp does.
  std::vector<double> prob(n);
  const double mx = cand_[0].logit;
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += prob[i] = std::exp(cand_[i].logit - mx);
  if (p_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < n; ++i) {
      cum += prob[i] / total;
      if (cum >= p_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0) {
    size_t keep = 1;
    while (keep < n && prob[keep] >= p_.min_p * prob[0]) ++keep;
    n = keep;
  }
  // Temperature, then draw.
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
