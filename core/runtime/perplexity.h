// SPDX-License-Identifier: MIT
// Perplexity of a model over a token sequence, the standard strided way:
// windows of ctx tokens start every stride tokens, and each window scores the
// tokens that no earlier window scored (so every token after the first window
// is predicted from at least ctx - stride tokens of context).
//
// With a base KV cache type, each window also runs on a second cache of that
// type in the same process, and the result compares the two next-token
// distributions at every scored token: KL(base || this), as llama.cpp's
// `perplexity --kl-divergence` reports it. KL is the steadier measure of what
// a cache's rounding costs: a perplexity over a few thousand tokens moves by
// tenths of a percent with the draw of roundings (docs/PERFORMANCE.md 5.2).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/model/model.h"
#include "core/graph/kv_cache.h"

namespace basalt {

struct KlDivergence {
  double base_nll = 0;            // the base cache's sum of -log p(token | context)
  std::vector<double> per_token;  // KL(base || this) at each scored token, natural log
  int64_t same_top = 0;           // scored tokens where both caches' most likely next token is the same
  double mean() const;
  double quantile(double q) const;  // q in [0, 1]: 0.5 the median, 1 the largest
};

struct PerplexityResult {
  double nll = 0;       // sum of -log p(token | context), natural log
  int64_t scored = 0;   // tokens scored (all but the first)
  std::optional<KlDivergence> kl;  // with a base cache type
  double ppl() const { return scored ? std::exp(nll / static_cast<double>(scored)) : 0; }
  double base_ppl() const { return kl && scored ? std::exp(kl->base_nll / static_cast<double>(scored)) : 0; }
};

// progress(done, total): tokens scored so far (for a progress bar). Error if
// ctx < 2, stride is not in [1, ctx], or there are fewer than 2 tokens.
PerplexityResult perplexity(const Model& model, const std::vector<int32_t>& tokens, int64_t ctx, int64_t stride,
                            int64_t ubatch, KvType kv_type = KvType::f16, std::optional<KvType> kl_base = std::nullopt,
                            const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace basalt
