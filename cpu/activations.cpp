// SPDX-License-Identifier: MIT
#include "cpu/activations.h"

namespace basalt {

void QuantizedActs::resize(int64_t n, int64_t c) {
  n_tok = n;
  cols = c;
  stride = (c + 63) / 64 * 64;
  q.resize(static_cast<size_t>(n * stride));
  d.resize(static_cast<size_t>(n * (stride / 32)));
  sum16.resize(static_cast<size_t>(n * (stride / 16)));
  dsum.resize(static_cast<size_t>(n * (stride / 32)));
}

}  // namespace basalt
