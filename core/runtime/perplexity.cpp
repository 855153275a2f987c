// SPDX-License-Identifier: MIT
#include "core/runtime/perplexity.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/runtime/executor.h"
#include "core/graph/kv_cache.h"

namespace basalt {

PerplexityResult perplexity(const Model& model, const std::vector<int32_t>& tokens, int64_t ctx, int64_t stride,
                            int64_t ubatch, KvType kv_type, const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t n = static_cast<int64_t>(tokens.size()), V = model.spec().n_vocab;
  if (ctx < 2) throw Error("perplexity: the context must be at least 2 tokens");
  if (stride < 1 || stride > ctx) throw Error("perplexity: the stride must be between 1 and the context (" + std::to_string(ctx) + ")");
  if (n < 2) throw Error("perplexity: the text has " + std::to_string(n) + " token(s); at least 2 are needed");
  const int64_t window = std::min(ctx, n);
  KvCache kv(model.spec(), window, 1, kv_type);
  Executor exec(model, kv, std::min(ubatch, window));
  PerplexityResult r;
  int64_t scored_to = 1;  // tokens [1, scored_to) are scored (token 0 has no context)
  for (int64_t begin = 0; scored_to < n; begin += stride) {
    const int64_t end = std::min(n, begin + window);
    if (end <= scored_to) continue;
    // Positions p in [begin, end) predict token p + 1; the ones wanted predict tokens [scored_to, end).
    for (int64_t i = begin; i < end; i += exec.max_batch()) {
      Batch b;
      const int64_t stop = std::min(end, i + exec.max_batch());
      for (int64_t p = i; p < stop; ++p)
        b.add(tokens[p], static_cast<int32_t>(p - begin), 0, p + 1 >= scored_to && p + 1 < end);
      const float* logits = exec.run(b);
      int64_t out = 0;
      for (int64_t p = i; p < stop; ++p) {
        if (!b.want_logits[p - i]) continue;
        const float* l = logits + out++ * V;
        double mx = l[0];
        for (int64_t v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(l[v]));
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(l[v]) - mx);
        r.nll += mx + std::log(sum) - static_cast<double>(l[tokens[p + 1]]);
        ++r.scored;
      }
    }
    scored_to = end;
    if (progress) progress(scored_to - 1, n - 1);
  }
  return r;
}

}  // namespace basalt
