// SPDX-License-Identifier: MIT
#include "cpu/activations.h"

#include <cmath>

#include "quant/half.h"

namespace basalt {

void QuantizedActs::resize(int64_t n, int64_t c) {
  n_tok = n;
  cols = c;
  q.resize(static_cast<size_t>(n * c));
  d.resize(static_cast<size_t>(n * (c / 32)));
  sum16.resize(static_cast<size_t>(n * (c / 16)));
}

void quantize_activations(const float* x, int64_t n_tok, int64_t cols, QuantizedActs& out) {
  out.resize(n_tok, cols);
  const int64_t nb = cols / 32;
#pragma omp parallel for schedule(static) if (n_tok * cols > 16384)
  for (int64_t i = 0; i < n_tok * nb; ++i) {
    const float* xb = x + i * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    int8_t* q = out.q.data() + i * 32;
    int32_t s0 = 0, s1 = 0;
    for (int j = 0; j < 32; ++j) {
      q[j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
      (j < 16 ? s0 : s1) += q[j];
    }
    out.d[i] = f16_to_f32(f32_to_f16(d));
    out.sum16[2 * i] = s0;
    out.sum16[2 * i + 1] = s1;
  }
}

}  // namespace basalt
