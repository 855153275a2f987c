// SPDX-License-Identifier: MIT
// The element-wise ops between matmuls over whole tensors: rows split across
// the OpenMP threads, each row through the ISA's row kernels (cpu/rows.h),
// quantized right after it is made when the caller wants the int8 form too.
#include "cpu/rows.h"

#include <cmath>

#include "cpu/activations.h"
#include "cpu/ops.h"

namespace basalt {

namespace cpu {

const RowKernels& row_kernels(Isa isa) {
#if defined(BASALT_X86)
  if (isa == Isa::avx512) return *kernels::rows_avx512();
  if (isa == Isa::avx2 || isa == Isa::avxvnni) return *kernels::rows_avx2();
#endif
  (void)isa;
  return kernels::rows_ref;
}

namespace {

// Work below this many values stays on the calling thread.
constexpr int64_t kParallelMin = 16384;

// Row t of yq from row y (yq already sized); zero padding blocks.
void quantize_row(const RowKernels& k, const float* y, int64_t t, QuantizedActs& yq) {
  const int64_t nb = yq.cols / 32, nb_pad = yq.stride / 32;
  int8_t* q = yq.q.data() + t * yq.stride;
  float* d = yq.d.data() + t * nb_pad;
  int32_t* s = yq.sum16.data() + t * (yq.stride / 16);
  k.quantize(y, yq.cols, q, d, s);
  for (int64_t b = nb; b < nb_pad; ++b) {
    for (int j = 0; j < 32; ++j) q[b * 32 + j] = 0;
    d[b] = 0;
    s[2 * b] = s[2 * b + 1] = 0;
  }
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, int64_t d, float eps, QuantizedActs* yq) {
  if (yq) yq->resize(n, d);
  const RowKernels& k = row_kernels(selected_isa());
#pragma omp parallel for schedule(static) if (n * d >= kParallelMin)
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * d;
    float* yt = y + t * d;
    const double ss = k.sum_squares(xt, d);
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
    for (int64_t i = 0; i < d; ++i) yt[i] = xt[i] * scale * w[i];
    if (yq) quantize_row(k, yt, t, *yq);
  }
}

void swiglu(const float* gate, const float* up, float* y, int64_t n, int64_t d, QuantizedActs* yq) {
  if (yq) yq->resize(n, d);
  const RowKernels& k = row_kernels(selected_isa());
#pragma omp parallel for schedule(static) if (n * d >= kParallelMin)
  for (int64_t t = 0; t < n; ++t) {
    k.swiglu(gate + t * d, up + t * d, y + t * d, d);
    if (yq) quantize_row(k, y + t * d, t, *yq);
  }
}

}  // namespace cpu

void quantize_activations(const float* x, int64_t n_tok, int64_t cols, QuantizedActs& out, Isa isa) {
  out.resize(n_tok, cols);
  const cpu::RowKernels& k = cpu::row_kernels(isa);
#pragma omp parallel for schedule(static) if (n_tok * cols >= cpu::kParallelMin)
  for (int64_t t = 0; t < n_tok; ++t) cpu::quantize_row(k, x + t * cols, t, out);
}

void quantize_activations(const float* x, int64_t n_tok, int64_t cols, QuantizedActs& out) {
  quantize_activations(x, n_tok, cols, out, selected_isa());
}

}  // namespace basalt
