// SPDX-License-Identifier: MIT
// The element-wise ops between matmuls over whole tensors: rows split across
// the engine's threads (core/util/thread_pool.h), each row through the ISA's row kernels (cpu/rows.h),
// quantized right after it is made when the caller wants the int8 form too.
#include "cpu/rows.h"

#include <algorithm>
#include <cmath>

#include "cpu/activations.h"
#include "core/util/thread_pool.h"
#include "cpu/ops.h"

namespace basalt {

namespace cpu {

const RowKernels& row_kernels(Isa isa) {
#if defined(BASALT_X86)
  if (isa >= Isa::avx512) return *kernels::rows_avx512();
  if (isa == Isa::avx2 || isa == Isa::avxvnni) return *kernels::rows_avx2();
#elif defined(BASALT_ARM)
  if (isa == Isa::neon || isa == Isa::dotprod) return *kernels::rows_neon();
#endif
  (void)isa;
  return kernels::rows_ref;
}

namespace {

// Work below this many values stays on the calling thread.
constexpr int64_t kParallelMin = 16384;
// Rows of d values per chunk of the pool's work: half of that at least.
int64_t rows_per_chunk(int64_t d) { return std::max<int64_t>(1, kParallelMin / 2 / std::max<int64_t>(d, 1)); }

// Columns [c0, c1) of row t of yq from row y (yq already sized; c0, c1 multiples of 32).
void quantize_cols(const RowKernels& k, const float* y, int64_t t, int64_t c0, int64_t c1, QuantizedActs& yq) {
  float* d = yq.d.data() + t * (yq.stride / 32);
  int16_t* s = yq.sum16.data() + t * (yq.stride / 16);
  k.quantize(y + c0, c1 - c0, yq.q.data() + t * yq.stride + c0, d + c0 / 32, s + c0 / 16);
  float* ds = yq.dsum.data() + t * (yq.stride / 32);
  for (int64_t b = c0 / 32; b < c1 / 32; ++b) ds[b] = d[b] * static_cast<float>(s[2 * b] + s[2 * b + 1]);
  int32_t* z = yq.q6k_zero.data() + t * (yq.stride / 16);
  for (int64_t h = c0 / 16; h < c1 / 16; ++h) z[h] = -32 * s[h];
  int32_t* ns = yq.neg_sum.data() + t * (yq.stride / 32);
  for (int64_t b = c0 / 32; b < c1 / 32; ++b) ns[b] = -(s[2 * b] + s[2 * b + 1]);
}

// Zeroes the padding blocks of row t of yq.
void zero_padding(int64_t t, QuantizedActs& yq) {
  const int64_t nb = yq.cols / 32, nb_pad = yq.stride / 32;
  int8_t* q = yq.q.data() + t * yq.stride;
  float* d = yq.d.data() + t * nb_pad;
  int16_t* s = yq.sum16.data() + t * (yq.stride / 16);
  float* ds = yq.dsum.data() + t * nb_pad;
  int32_t* z = yq.q6k_zero.data() + t * (yq.stride / 16);
  int32_t* ns = yq.neg_sum.data() + t * nb_pad;
  for (int64_t b = nb; b < nb_pad; ++b) {
    for (int j = 0; j < 32; ++j) q[b * 32 + j] = 0;
    d[b] = ds[b] = 0;
    s[2 * b] = s[2 * b + 1] = 0;
    z[2 * b] = z[2 * b + 1] = 0;
    ns[b] = 0;
  }
}

// Row t of yq from row y (yq already sized).
void quantize_row(const RowKernels& k, const float* y, int64_t t, QuantizedActs& yq) {
  quantize_cols(k, y, t, 0, yq.cols, yq);
  zero_padding(t, yq);
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, int64_t d, float eps, QuantizedActs* yq) {
  if (yq) yq->resize(n, d);
  const RowKernels& k = row_kernels(selected_isa());
  parallel_for(n, rows_per_chunk(d), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + t * d;
      float* yt = y + t * d;
      const double ss = k.sum_squares(xt, d);
      const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
      for (int64_t i = 0; i < d; ++i) yt[i] = xt[i] * scale * w[i];
      if (yq) quantize_row(k, yt, t, *yq);
    }
  });
}

void swiglu(const float* gate, const float* up, float* y, int64_t n, int64_t d, QuantizedActs* yq) {
  if (yq) yq->resize(n, d);
  const RowKernels& k = row_kernels(selected_isa());
  if (n == 1 && d >= kParallelMin / 4) {
    // Decode: the row's columns split (to the block of 32) like the rows of the
    // matmuls that wrote gate and up (cpu/matmul.cpp, to the tile of 16), so
    // each thread reads what is in its own cache (but for the few tiles a
    // thread done early took over: cpu/work_shares.h).
    if (yq) zero_padding(0, *yq);
    ThreadPool& pool = engine_pool();
    const int64_t nt = pool.size();
    const int64_t per = ((d + nt - 1) / nt + 31) / 32 * 32;
    pool.run(nt, [&](int64_t it, int) {
      const int64_t c0 = std::min(d, per * it), c1 = std::min(d, c0 + per);
      if (c0 < c1) {
        k.swiglu(gate + c0, up + c0, y + c0, c1 - c0);
        if (yq) quantize_cols(k, y, 0, c0, c1, *yq);
      }
    });
    return;
  }
  parallel_for(n, rows_per_chunk(d), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      k.swiglu(gate + t * d, up + t * d, y + t * d, d);
      if (yq) quantize_row(k, y + t * d, t, *yq);
    }
  });
}

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
}

void softcap(const float* x, float* y, int64_t n, float cap) {
  const RowKernels& k = row_kernels(selected_isa());
  parallel_for(n, 16384, [&](int64_t i0, int64_t i1) { k.softcap(x + i0, y + i0, i1 - i0, cap); });
}

void geglu(const float* gate, const float* up, float* y, int64_t n, int64_t d, QuantizedActs* yq) {
  if (yq) yq->resize(n, d);
  const RowKernels& k = row_kernels(selected_isa());
  parallel_for(n, rows_per_chunk(d), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      k.geglu(gate + t * d, up + t * d, y + t * d, d);
      if (yq) quantize_row(k, y + t * d, t, *yq);
    }
  });
}

}  // namespace cpu

void quantize_activations(const float* x, int64_t n_tok, int64_t cols, QuantizedActs& out, Isa isa) {
  out.resize(n_tok, cols);
  const cpu::RowKernels& k = cpu::row_kernels(isa);
  parallel_for(n_tok, cpu::rows_per_chunk(cols), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) cpu::quantize_row(k, x + t * cols, t, out);
  });
}

void quantize_activations(const float* x, int64_t n_tok, int64_t cols, QuantizedActs& out) {
  quantize_activations(x, n_tok, cols, out, selected_isa());
}

}  // namespace basalt
