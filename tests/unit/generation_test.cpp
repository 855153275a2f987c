// SPDX-License-Identifier: MIT
// One request's generation without a model: each generated token's
// log-probability and alternatives (OpenAI's logprobs) against a double
// precision log-softmax of the same logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/runtime/generation.h"
#include "tests/unit/byte_vocab.h"

namespace basalt {
namespace {

TEST(Generation, LogprobsAreTheModelsLogSoftmaxBeforeItsText) {
  const Tokenizer tok = test::byte_vocab();
  const int64_t V = tok.n_vocab();
  GenerateOptions opt;
  opt.max_tokens = 40;
  opt.logprobs = 5;
  opt.sampling.temperature = 0.7f;  // the logprobs are the model's, not the sampler's
  opt.sampling.seed = 11;
  std::vector<std::string> events;
  std::vector<TokenLogprob> got;
  Generation gen(tok, opt, {1}, V, [&](std::string_view) { return events.push_back("text"), true; });
  gen.set_logprob_sink([&](const TokenLogprob& t) { events.push_back("logprob"), got.push_back(t); });
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<std::vector<float>> steps;
  std::vector<float> logits(static_cast<size_t>(V));
  while (!gen.done()) {
    for (float& l : logits) l = normal(rng);
    logits[2] = -30;  // no end of generation
    logits[3 + 'a'] = logits[3 + 'b'];  // a tie: the lower id first
    steps.push_back(logits);
    gen.step(logits.data(), 1000);
  }
  ASSERT_EQ(got.size(), gen.generated().size());
  ASSERT_EQ(got.size(), 40u);
  for (size_t s = 0; s < got.size(); ++s) {
    const std::vector<float>& l = steps[s];
    const double mx = *std::max_element(l.begin(), l.end());
    double sum = 0;
    for (float x : l) sum += std::exp(double(x) - mx);
    auto ref = [&](int32_t id) { return double(l[static_cast<size_t>(id)]) - mx - std::log(sum); };
    EXPECT_EQ(got[s].id, gen.generated()[s]);
    EXPECT_NEAR(got[s].logprob, ref(got[s].id), 1e-5);
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    ASSERT_EQ(got[s].top.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(got[s].top[k].first, order[k]) << "step " << s << " rank " << k;
      EXPECT_NEAR(got[s].top[k].second, ref(order[k]), 1e-5);
    }
  }
  // Each token's logprob reaches the sink before any text of it.
  EXPECT_EQ(events.front(), "logprob");
  for (size_t i = 1; i < events.size(); ++i) {
    if (events[i] == "text") {
      EXPECT_EQ(events[i - 1], "logprob") << "event " << i;
    }
  }

  // Off by default: no sink call.
  GenerateOptions off = opt;
  off.logprobs = -1;
  int calls = 0;
  Generation quiet(tok, off, {1}, V, nullptr);
  quiet.set_logprob_sink([&](const TokenLogprob&) { ++calls; });
  quiet.step(steps[0].data(), 1000);
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace basalt
