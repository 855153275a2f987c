// SPDX-License-Identifier: MIT
// Sampling: greedy, determinism per seed, and the distributions the filters
// should leave, checked by counting draws with fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "core/error.h"
#include "core/runtime/sampler.h"

namespace basalt {
namespace {

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::map<int32_t, int> histogram(SamplingParams p, const std::vector<float>& logits, int n,
                                 const std::vector<int32_t>& history = {}) {
  Sampler s(p);
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) h[s.sample(logits.data(), static_cast<int64_t>(logits.size()), history)]++;
  return h;
}

SamplingParams plain(float temp) {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 99;
  return p;
}

// p with zero biases on a sixteenth of the vocabulary: the same logits, but
// sampled through the candidate list of the whole vocabulary (Sampler::sample).
SamplingParams listed(SamplingParams p, int32_t n_vocab) {
  for (int32_t id = n_vocab - 1; static_cast<int32_t>(p.logit_bias.size()) < n_vocab / 16; id -= 3)
    p.logit_bias.push_back({id, 0.0f});
  return p;
}

TEST(Sampler, GreedyTakesTheMaximum) {
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.9f};
  Sampler s(plain(0));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.sample(l.data(), 4, {}), 1);
}

// Greedy with nothing to adjust reads the logits in place; with a bias (here
// of zero) on one token it takes the best of the rest and that one's biased
// logit; with biases on many it goes through the candidate list: all three
// pick the same token, the lower id on ties. Rising logits move the best
// often, inside the in-place scan's blocks of 64 and in its tail.
TEST(Sampler, GreedyInPlaceEqualsTheCandidateList) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> level(0, 40);
  SamplingParams biased = plain(0);
  biased.logit_bias = {{0, 0.0f}};
  for (int round = 0; round < 80; ++round) {
    const int32_t n = std::array<int32_t, 4>{1000, 5 * 64 + 1, 65, 63}[round % 4];
    const float rise = round % 8 < 4 ? 0.0f : 1.0f / 64;  // 40 / 8 over 320 logits
    std::vector<float> l(static_cast<size_t>(n));
    for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(level(rng)) / 8 + rise * static_cast<float>(i);  // many ties
    const int32_t want = Sampler(listed(plain(0), n)).sample(l.data(), n, {});
    EXPECT_EQ(Sampler(plain(0)).sample(l.data(), n, {}), want);
    EXPECT_EQ(Sampler(biased).sample(l.data(), n, {}), want);
    EXPECT_EQ(want, std::max_element(l.begin(), l.end()) - l.begin());  // the first of the largest
  }
}

// top-k with nothing to adjust picks its k from the logits in place; with a
// bias (of zero) it sorts the candidate list: the same tokens from the same
// seed, ties to the lower id, whatever top-p and min-p then cut.
TEST(Sampler, TopKInPlaceEqualsTheCandidateList) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(0, 60);
  for (int32_t k : {1, 2, 40, 999}) {
    for (float top_p : {1.0f, 0.9f}) {
      for (float min_p : {0.0f, 0.05f}) {
        std::vector<float> l(5000);
        for (float& x : l) x = static_cast<float>(level(rng)) / 16;  // many ties
        SamplingParams p = plain(0.9f);
        p.top_k = k, p.top_p = top_p, p.min_p = min_p;
        Sampler in_place(p), list(listed(p, 5000));
        std::vector<int32_t> a, b;
        for (int i = 0; i < 300; ++i) {
          a.push_back(in_place.sample(l.data(), 5000, {}));
          b.push_back(list.sample(l.data(), 5000, {}));
        }
        EXPECT_EQ(a, b) << "top-k " << k << " top-p " << top_p << " min-p " << min_p;
        if (k == 1) {
          EXPECT_EQ(a[0], std::max_element(l.begin(), l.end()) - l.begin());
        }
      }
    }
  }
}

// With a logit bias and penalties, top-k (and greedy) still scan the logits
// in place and offer the changed tokens apart: the same draws as the
// candidate list with the same changes, and as the logits changed beforehand.
TEST(Sampler, AdjustedTopKInPlaceEqualsTheCandidateList) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> level(0, 60), token(0, 4999);
  std::vector<float> l(5000);
  for (float& x : l) x = static_cast<float>(level(rng)) / 16;  // many ties
  // The history: token 7 often, some of the best tokens as they are (so that
  // the penalties move tokens out of the top k), the rest at random.
  std::vector<int32_t> best(l.size());
  std::iota(best.begin(), best.end(), 0);
  std::stable_sort(best.begin(), best.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  std::vector<int32_t> history;
  for (int i = 0; i < 100; ++i) history.push_back(i % 3 == 0 ? 7 : i % 3 == 1 ? best[i % 60] : token(rng));
  for (float temp : {0.0f, 0.9f})
    for (int32_t k : {1, 3, 40, 999})
      for (float top_p : {1.0f, 0.9f}) {
        SamplingParams p = plain(temp);
        p.top_k = k, p.top_p = top_p, p.min_p = top_p < 1 ? 0.02f : 0.0f;
        p.repeat_penalty = 1.3f, p.presence_penalty = -0.5f, p.frequency_penalty = 0.2f;  // raises some, lowers others
        p.logit_bias = {{2, 10.0f}, {4999, 3.0f}, {2, -1.0f}, {1, -INFINITY}, {123, 1.5f}};  // a repeat, the last id, a ban
        Sampler in_place(p), list(listed(p, 5000));
        // The same changes made to the logits beforehand: bias (in order), then penalties.
        std::vector<float> changed = l;
        for (const auto& [id, bias] : p.logit_bias) changed[id] += bias;
        std::map<int32_t, int> seen;
        for (size_t i = history.size() - static_cast<size_t>(p.repeat_last_n); i < history.size(); ++i) ++seen[history[i]];
        for (const auto& [id, count] : seen) {
          float& x = changed[id];
          x = x > 0 ? x / p.repeat_penalty : x * p.repeat_penalty;
          x -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
        }
        SamplingParams plain_p = p;
        plain_p.logit_bias.clear();
        plain_p.repeat_penalty = 1.0f, plain_p.presence_penalty = 0, plain_p.frequency_penalty = 0;
        Sampler beforehand(plain_p);
        std::vector<int32_t> a, b, c;
        for (int i = 0; i < 200; ++i) {
          a.push_back(in_place.sample(l.data(), 5000, history));
          b.push_back(list.sample(l.data(), 5000, history));
          c.push_back(beforehand.sample(changed.data(), 5000, {}));
        }
        EXPECT_EQ(a, b) << "temperature " << temp << " top-k " << k << " top-p " << top_p;
        EXPECT_EQ(a, c) << "temperature " << temp << " top-k " << k << " top-p " << top_p;
        EXPECT_EQ(std::count(a.begin(), a.end(), 1), 0);  // banned
        if (temp == 0) {
          EXPECT_EQ(a[0], 2);  // 10 - 1 over the rest's at most 3.75 + 3
        }
      }
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> l = logits_of({0.1, 0.2, 0.3, 0.4});
  SamplingParams p = plain(1.0f);
  Sampler a(p), b(p);
  p.seed = 100;
  Sampler c(p);
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 50; ++i) {
    ta.push_back(a.sample(l.data(), 4, {}));
    tb.push_back(b.sample(l.data(), 4, {}));
    tc.push_back(c.sample(l.data(), 4, {}));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(Sampler, TemperatureOneFollowsTheDistribution) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  const int n = 40000;
  auto h = histogram(plain(1.0f), logits_of(probs), n);
  for (int i = 0; i < 4; ++i) {
    const double expected = probs[i] * n, sd = std::sqrt(n * probs[i] * (1 - probs[i]));
    EXPECT_NEAR(h[i], expected, 5 * sd) << "token " << i;
  }
}

TEST(Sampler, LowTemperatureSharpens) {
  auto h = histogram(plain(0.25f), logits_of({0.1, 0.2, 0.3, 0.4}), 20000);
  // p_i^4 normalized: 0.4^4 / sum = 0.0256 / 0.0354 = 0.72
  EXPECT_NEAR(h[3] / 20000.0, 0.723, 0.02);
}

TEST(Sampler, TopKKeepsOnlyK) {
  SamplingParams p = plain(1.0f);
  p.top_k = 2;
  auto h = histogram(p, logits_of({0.1, 0.2, 0.3, 0.4}), 20000);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
  EXPECT_NEAR(h[3] / 20000.0, 0.4 / 0.7, 0.02);
}

TEST(Sampler, TopPKeepsTheNucleus) {
  SamplingParams p = plain(1.0f);
  p.top_p = 0.65f;  // 0.4 + 0.3 >= 0.65: two tokens
  auto h = histogram(p, logits_of({0.1, 0.2, 0.3, 0.4}), 20000);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
  EXPECT_NEAR(h[2] / 20000.0, 0.3 / 0.7, 0.02);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p = plain(1.0f);
  p.min_p = 0.6f;  // keeps tokens with p >= 0.24: 0.3 and 0.4
  auto h = histogram(p, logits_of({0.1, 0.2, 0.3, 0.4}), 20000);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
  EXPECT_GT(h[2], 0);
}

// Without top-k the sampler sorts only a head of the candidates, longer until
// it holds the truncation's cut (256, then 2048, then 16384 here): the kept
// tokens must be what a full sort keeps. 3000 tokens of logit 0 (ties: by id)
// over 47000 of -5: top-p 0.6 keeps ids 0-1990 (1991 / 3316.7 >= 0.6), min-p
// 0.01 ids 0-2999 (e^-5 < 0.01); drawn uniformly, a draw past 2048 (a second
// growth) comes in the first few hundred.
TEST(Sampler, WithoutTopKTheHeadSortedHoldsTheCut) {
  std::vector<float> logits(50000, -5.0f);
  std::fill(logits.begin(), logits.begin() + 3000, 0.0f);
  // 1000 draws of p: the least id under 100, the greatest in (last - 90, last].
  auto expect_kept = [&](const SamplingParams& p, int32_t last) {
    const auto h = histogram(p, logits, 1000);
    EXPECT_LT(h.begin()->first, 100) << last;
    EXPECT_GT(h.rbegin()->first, last - 90) << last;
    EXPECT_LE(h.rbegin()->first, last) << last;
  };
  SamplingParams top_p = plain(1.0f), min_p = plain(1.0f), none = plain(1.0f);
  top_p.top_p = 0.6f;
  min_p.min_p = 0.01f;
  expect_kept(top_p, 1990);
  expect_kept(min_p, 2999);
  // Nothing cut: the tail is drawn too (47000 x e^-5 is 9.5% of the mass).
  EXPECT_GT(histogram(none, logits, 1000).rbegin()->first, 3000);
}

TEST(Sampler, RepetitionPenaltyLowersSeenTokens) {
  std::vector<float> l = {2.0f, 1.9f, -3.0f};
  SamplingParams p = plain(0);
  p.repeat_penalty = 1.5f;
  Sampler s(p);
  EXPECT_EQ(s.sample(l.data(), 3, {}), 0);
  EXPECT_EQ(s.sample(l.data(), 3, {0}), 1);  // 2.0 / 1.5 < 1.9
}

TEST(Sampler, PresenceAndFrequencyPenaltiesSubtract) {
  std::vector<float> l = {2.0f, 1.5f, 1.0f};
  SamplingParams p = plain(0);
  p.presence_penalty = 0.4f;  // 2.0 - 0.4 = 1.6 still leads 1.5
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0}), 0);
  p.frequency_penalty = 0.1f;  // twice seen: 2.0 - 0.4 - 0.2 = 1.4 < 1.5
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0, 0}), 1);
  p.repeat_last_n = 1;  // only the last token counts: 2.0 - 0.4 - 0.1 = 1.5, tie goes to the lower id
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0, 0}), 0);
}

TEST(Sampler, LogitBiasAddsAndCanForbid) {
  std::vector<float> l = {2.0f, 1.5f, 1.0f};
  SamplingParams p = plain(0);
  p.logit_bias = {{2, 5.0f}};
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {}), 2);
  p.logit_bias = {{0, -INFINITY}};
  p.temperature = 1;
  auto h = histogram(p, l, 200);
  EXPECT_EQ(h.count(0), 0u) << "a token biased to -inf was drawn";
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(Sampler{p}, Error);
}

TEST(Sampler, RejectsBadParameters) {
  SamplingParams p;
  p.top_p = 0;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams{};
  p.min_p = 2;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams{};
  p.temperature = NAN;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams{};
  p.presence_penalty = 3;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace basalt
