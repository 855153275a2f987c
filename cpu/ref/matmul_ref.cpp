// SPDX-License-Identifier: MIT
// Scalar matmul for every weight format: plain, obviously correct.
#include <vector>

#include "cpu/matmul.h"
#include "quant/qa_layout.h"

namespace basalt::kernels {

namespace {

void matmul_dense_ref(const MatmulArgs& a) {
  const Weight& w = *a.w;
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = a.r0; r < a.r1; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t t = 0; t < a.n_tok; ++t) {
      const float* x = a.x + t * w.cols;
      float acc = 0;
      for (int64_t i = 0; i < w.cols; ++i) acc += row[i] * x[i];
      a.y[t * a.ldy + (r - a.r0)] = acc;
    }
  }
}

// Per block: sum_i w_i x_i = xd * (scale * (sum q_i xq_i - zero * sum xq_i) + bias * sum xq_i).
void matmul_qa_ref(const MatmulArgs& a) {
  const Weight& w = *a.w;
  const QaLayout L = qa_layout(w.bits, w.scales);
  const int64_t nb = w.cols / kQaBlock;
  int8_t q[32];
  QaBlockParams p;
  for (int64_t r = a.r0; r < a.r1; ++r) {
    int lane;
    const uint8_t* tile = w.tile_of(r, &lane);
    for (int64_t t = 0; t < a.n_tok; ++t) {
      const int8_t* xq = a.xq->q_row(t);
      const float* xd = a.xq->d_row(t);
      const int16_t* xs = a.xq->sum16_row(t);
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        qa_tile_block(L, tile, lane, b, q, &p);
        float block = 0;
        for (int h = 0; h < 2; ++h) {
          int32_t isum = 0;
          for (int j = 16 * h; j < 16 * h + 16; ++j) isum += q[j] * xq[b * 32 + j];
          const int32_t xsum = xs[2 * b + h];
          block += p.scale[h] * static_cast<float>(isum - p.zero * xsum) + p.bias[h] * static_cast<float>(xsum);
        }
        acc += xd[b] * block;
      }
      a.y[t * a.ldy + (r - a.r0)] = acc;
    }
  }
}

}  // namespace

void matmul_ref(const MatmulArgs& a) {
  if (a.w->format == WeightFormat::qa)
    matmul_qa_ref(a);
  else
    matmul_dense_ref(a);
}

}  // namespace basalt::kernels
