// SPDX-License-Identifier: MIT
// The definitions every row kernel variant is checked against (cpu/rows.h).
#include <cmath>

#include "cpu/ops.h"
#include "cpu/rows.h"
#include "core/util/half.h"

namespace basalt::cpu::kernels {

namespace {

void swiglu_ref(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    y[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void geglu_ref(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(gate[i]) * up[i];
}

void softcap_ref(const float* x, float* y, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) y[i] = cap * std::tanh(x[i] / cap);
}

void quantize_ref(const float* x, int64_t cols, int8_t* q, float* d, int16_t* sum16) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float db = amax / 127.0f, id = db != 0 ? 1.0f / db : 0.0f;
    int32_t s[2] = {0, 0};
    for (int j = 0; j < 32; ++j) {
      q[b * 32 + j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
      s[j / 16] += q[b * 32 + j];
    }
    d[b] = f16_to_f32(f32_to_f16(db));
    sum16[2 * b] = static_cast<int16_t>(s[0]);
    sum16[2 * b + 1] = static_cast<int16_t>(s[1]);
  }
}

double sum_squares_ref(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void to_f16_ref(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

}  // namespace

const RowKernels rows_ref{swiglu_ref, geglu_ref, softcap_ref, quantize_ref, sum_squares_ref, to_f16_ref};

}  // namespace basalt::cpu::kernels
