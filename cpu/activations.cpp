// SPDX-License-Identifier: MIT
#include "cpu/activations.h"

#include <algorithm>
#include <cmath>

#include "quant/half.h"

namespace basalt {

void QuantizedActs::resize(int64_t n, int64_t c) {
  n_tok = n;
  cols = c;
  stride = (c + 63) / 64 * 64;
  q.resize(static_cast<size_t>(n * stride));
  d.resize(static_cast<size_t>(n * (stride / 32)));
  sum16.resize(static_cast<size_t>(n * (stride / 16)));
}

void quantize_activations(const float* x, int64_t n_tok, int64_t cols, QuantizedActs& out) {
  out.resize(n_tok, cols);
  const int64_t nb = cols / 32, nb_pad = out.stride / 32;
#pragma omp parallel for schedule(static) if (n_tok * cols > 16384)
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t b = 0; b < nb_pad; ++b) {
      int8_t* q = out.q.data() + t * out.stride + b * 32;
      float& d_out = out.d[t * nb_pad + b];
      int32_t* s = out.sum16.data() + t * (out.stride / 16) + 2 * b;
      if (b >= nb) {  // padding
        std::fill(q, q + 32, int8_t{0});
        d_out = 0;
        s[0] = s[1] = 0;
        continue;
      }
      const float* xb = x + t * cols + b * 32;
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
      const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
      int32_t s0 = 0, s1 = 0;
      for (int j = 0; j < 32; ++j) {
        q[j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
        (j < 16 ? s0 : s1) += q[j];
      }
      d_out = f16_to_f32(f32_to_f16(d));
      s[0] = s0;
      s[1] = s1;
    }
  }
}

}  // namespace basalt
