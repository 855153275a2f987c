// SPDX-License-Identifier: MIT
// Picks the next token from logits: greedy, or temperature with top-k,
// top-p, min-p and a repetition penalty. The same seed gives the same tokens.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace basalt {

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy
  int32_t top_k = 40;        // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  float presence_penalty = 0;   // subtracted once from a token in the last repeat_last_n (OpenAI's)
  float frequency_penalty = 0;  // subtracted per occurrence there
  int32_t repeat_last_n = 64;
  uint64_t seed = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to a token's logit first (-inf: never)
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);  // Error on out-of-range parameters
  // history: the tokens so far (for the repetition penalty).
  int32_t sample(const float* logits, int64_t n_vocab, const std::vector<int32_t>& history);
  const SamplingParams& params() const { return p_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  static constexpr size_t kFirstHead = 256;  // candidates sorted first without top-k
  // adj_ = the tokens that the logit bias and the penalties change, by id,
  // with their changed logits.
  void adjust(const float* logits, int64_t n_vocab, const std::vector<int32_t>& history, bool penalties);
  // cand_ = the k best tokens, in order: adj_'s logits where it has them, the rest as they are.
  void best_k(const float* logits, int64_t n_vocab, size_t k);
  // cand_ = every token, with adj_'s logits; returns how many of them are in
  // order in front (top-k's, or a first head; greedy: the best).
  size_t candidates(const float* logits, int64_t n_vocab);
  // The draw from cand_'s first n after top-p, min-p and temperature; sorted:
  // how many of them are in order so far (the head grows where top-p or min-p need it).
  int32_t draw(size_t n, size_t sorted);
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<Candidate> cand_, adj_;
};

}  // namespace basalt
