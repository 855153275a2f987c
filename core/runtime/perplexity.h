// SPDX-License-Identifier: MIT
// Perplexity of a model over a token sequence, the standard strided way:
// windows of ctx tokens start every stride tokens, and each window scores the
// tokens that no earlier window scored (so every token after the first window
// is predicted from at least ctx - stride tokens of context).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/model/model.h"
#include "core/graph/kv_cache.h"

namespace basalt {

struct PerplexityResult {
  double nll = 0;       // sum of -log p(token | context), natural log
  int64_t scored = 0;   // tokens scored (all but the first)
  double ppl() const { return scored ? std::exp(nll / static_cast<double>(scored)) : 0; }
};

// progress(done, total): tokens scored so far (for a progress bar). Error if
// ctx < 2, stride is not in [1, ctx], or there are fewer than 2 tokens.
PerplexityResult perplexity(const Model& model, const std::vector<int32_t>& tokens, int64_t ctx, int64_t stride,
                            int64_t ubatch, KvType kv_type = KvType::f16,
                            const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace basalt
