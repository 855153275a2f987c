// SPDX-License-Identifier: MIT
#include "cpu/activations.h"

#include <algorithm>
#include <cstring>

#include "core/util/thread_pool.h"

namespace basalt {

void QuantizedActs::resize(int64_t n, int64_t c) {
  n_tok = n;
  cols = c;
  // Rows a whole number of pages long (4096 columns: 7B-class models) get a
  // line more, so that a register block's tokens' rows fall in different L1
  // sets: a page apart, the 8 of an AVX2 block shared one set and ran
  // 1.1-1.2x slower (docs/PERFORMANCE.md 3.1g).
  passes.tokens = 0;
  stride = (c + 63) / 64 * 64;
  if (stride % 4096 == 0) stride += 64;
  q.resize(static_cast<size_t>(n * stride));
  d.resize(static_cast<size_t>(n * (stride / 32)));
  sum16.resize(static_cast<size_t>(n * (stride / 16)));
  dsum.resize(static_cast<size_t>(n * (stride / 32)));
  q6k_zero.resize(static_cast<size_t>(n * (stride / 16)));
  neg_sum.resize(static_cast<size_t>(n * (stride / 32)));
}

void QuantizedActs::gather(const QuantizedActs& src, const int32_t* rows, int64_t n) {
  resize(n, src.cols);
  const int64_t nd = stride / 32, ns = stride / 16;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = rows[i];
    std::copy_n(src.q_row(r), stride, q.data() + i * stride);
    std::copy_n(src.d_row(r), nd, d.data() + i * nd);
    std::copy_n(src.sum16_row(r), ns, sum16.data() + i * ns);
    std::copy_n(src.dsum_row(r), nd, dsum.data() + i * nd);
    std::copy_n(src.q6k_zero_row(r), ns, q6k_zero.data() + i * ns);
    std::copy_n(src.neg_sum_row(r), nd, neg_sum.data() + i * nd);
  }
}

void QuantizedActs::make_passes(int tokens, int64_t n) const {
  if (passes.tokens == tokens && passes.n == n) return;
  Passes& p = passes;
  p.q.resize(q.size());
  p.d.resize(d.size());
  p.dsum.resize(dsum.size());
  p.sum16.resize(sum16.size());
  p.q6k_zero.resize(q6k_zero.size());
  p.neg_sum.resize(d.size());
  const int64_t nb = cols / 32, nd = stride / 32, ns = stride / 16;
  std::vector<int64_t> starts;
  for (int64_t t0 = 0, left = pass_count(n, tokens); t0 < n; --left) {
    starts.push_back(t0);
    t0 += pass_tokens(n - t0, left);
  }
  starts.push_back(n);
  parallel_for(static_cast<int64_t>(starts.size()) - 1, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t k = p0; k < p1; ++k) {
      const int64_t t0 = starts[k], nt = starts[k + 1] - t0;
      for (int64_t i = 0; i < nt; ++i) {
        const int64_t t = t0 + i;
        for (int64_t b = 0; b < nb; ++b) {
          std::memcpy(p.q.data() + t0 * stride + (b * nt + i) * 32, q_row(t) + b * 32, 32);
          p.d[t0 * nd + b * nt + i] = d_row(t)[b];
          p.dsum[t0 * nd + b * nt + i] = dsum_row(t)[b];
          std::memcpy(p.sum16.data() + t0 * ns + (b * nt + i) * 2, sum16_row(t) + 2 * b, 4);
          std::memcpy(p.q6k_zero.data() + t0 * ns + (b * nt + i) * 2, q6k_zero_row(t) + 2 * b, 8);
          p.neg_sum[t0 * nd + b * nt + i] = neg_sum_row(t)[b];
        }
      }
    }
  });
  p.tokens = tokens;
  p.n = n;
}

}  // namespace basalt
