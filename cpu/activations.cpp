// SPDX-License-Identifier: MIT
#include "cpu/activations.h"

#include <algorithm>

namespace basalt {

void QuantizedActs::resize(int64_t n, int64_t c) {
  n_tok = n;
  cols = c;
  // Rows a whole number of pages long (4096 columns: 7B-class models) get a
  // line more, so that a register block's tokens' rows fall in different L1
  // sets: a page apart, the 8 of an AVX2 block shared one set and ran
  // 1.1-1.2x slower (docs/PERFORMANCE.md 3.1g).
  stride = (c + 63) / 64 * 64;
  if (stride % 4096 == 0) stride += 64;
  q.resize(static_cast<size_t>(n * stride));
  d.resize(static_cast<size_t>(n * (stride / 32)));
  sum16.resize(static_cast<size_t>(n * (stride / 16)));
  dsum.resize(static_cast<size_t>(n * (stride / 32)));
  q6k_zero.resize(static_cast<size_t>(n * (stride / 16)));
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
  }
}

}  // namespace basalt
