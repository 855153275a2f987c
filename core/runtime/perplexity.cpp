// SPDX-License-Identifier: MIT
#include "core/runtime/perplexity.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>

#include "core/error.h"
#include "core/runtime/executor.h"
#include "core/graph/kv_cache.h"

namespace basalt {

namespace {
// A row of logits' log of its softmax's denominator, and its largest entry.
struct RowStats {
  double log_sum = 0;
  int64_t top = 0;
};
RowStats row_stats(const float* l, int64_t n) {
  RowStats s;
  for (int64_t v = 1; v < n; ++v)
    if (l[v] > l[s.top]) s.top = v;
  const double mx = l[s.top];
  double sum = 0;
  for (int64_t v = 0; v < n; ++v) sum += std::exp(static_cast<double>(l[v]) - mx);
  s.log_sum = mx + std::log(sum);
  return s;
}

// KL(p || q) of two rows of logits with their stats: sum of p (log p - log q).
double kl_divergence(const float* p, const RowStats& ps, const float* q, const RowStats& qs, int64_t n) {
  double kl = 0;
  for (int64_t v = 0; v < n; ++v) {
    const double lp = static_cast<double>(p[v]) - ps.log_sum, lq = static_cast<double>(q[v]) - qs.log_sum;
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(kl, 0.0);  // >= 0 but for rounding
}
}  // namespace

double KlDivergence::mean() const {
  return per_token.empty() ? 0 : std::accumulate(per_token.begin(), per_token.end(), 0.0) / static_cast<double>(per_token.size());
}

double KlDivergence::quantile(double q) const {
  if (per_token.empty()) return 0;
  std::vector<double> s = per_token;
  const size_t i = std::min(s.size() - 1, static_cast<size_t>(std::clamp(q, 0.0, 1.0) * static_cast<double>(s.size() - 1) + 0.5));
  std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(i), s.end());
  return s[i];
}

PerplexityResult perplexity(const Model& model, const std::vector<int32_t>& tokens, int64_t ctx, int64_t stride,
                            int64_t ubatch, KvType kv_type, std::optional<KvType> kl_base,
                            const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t n = static_cast<int64_t>(tokens.size()), V = model.spec().n_vocab;
  if (ctx < 2) throw Error("perplexity: the context must be at least 2 tokens");
  if (stride < 1 || stride > ctx) throw Error("perplexity: the stride must be between 1 and the context (" + std::to_string(ctx) + ")");
  if (n < 2) throw Error("perplexity: the text has " + std::to_string(n) + " token(s); at least 2 are needed");
  const int64_t window = std::min(ctx, n);
  KvCache kv(model.spec(), window, 1, kv_type);
  Executor exec(model, kv, std::min(ubatch, window));
  std::unique_ptr<KvCache> base_kv;
  std::unique_ptr<Executor> base_exec;
  PerplexityResult r;
  if (kl_base) {
    base_kv = std::make_unique<KvCache>(model.spec(), window, 1, *kl_base);
    base_exec = std::make_unique<Executor>(model, *base_kv, exec.max_batch());
    r.kl.emplace();
  }
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
      const float* base_logits = base_exec ? base_exec->run(b) : nullptr;  // each executor keeps its own until its next run
      int64_t out = 0;
      for (int64_t p = i; p < stop; ++p) {
        if (!b.want_logits[p - i]) continue;
        const float* l = logits + out * V;
        const RowStats s = row_stats(l, V);
        r.nll += s.log_sum - static_cast<double>(l[tokens[p + 1]]);
        ++r.scored;
        if (base_logits) {
          const float* lb = base_logits + out * V;
          const RowStats sb = row_stats(lb, V);
          r.kl->base_nll += sb.log_sum - static_cast<double>(lb[tokens[p + 1]]);
          r.kl->per_token.push_back(kl_divergence(lb, sb, l, s, V));
          r.kl->same_top += sb.top == s.top;
        }
        ++out;
      }
    }
    scored_to = end;
    if (progress) progress(scored_to - 1, n - 1);
  }
  return r;
}

}  // namespace basalt
