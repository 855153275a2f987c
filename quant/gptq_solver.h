// SPDX-License-Identifier: MIT
// The GPTQ algorithm (Frantar et al., 2022) for one linear layer: quantize
// W [n_out][n_in] column by column so that the layer's output on the
// calibration inputs X changes least, given H = 2 X X^T / n (the inputs'
// second moment). Each column's rounding error is spread over the columns
// not yet quantized through the upper Cholesky factor of H^-1; columns go in
// blocks of `block` with the updates to later blocks batched ("lazy batch
// updates"); act-order takes the columns by decreasing H diagonal. Columns
// no input ever reaches (H diagonal 0) are quantized as zeros. Scales are
// rounded to f16 before use, so the error fed forward is that of the weights
// the checkpoint will hold.
#pragma once

#include <cstdint>
#include <vector>

namespace basalt {

struct GptqOptions {
  int bits = 4;              // 2..8
  int64_t group_size = 128;  // -1: one group per row
  bool sym = true;           // zero point 2^(bits-1); else the min/max grid's own
  bool act_order = false;
  double damp = 0.01;        // added to H's diagonal, times its mean
  int64_t block = 128;
};

// A quantized layer, in the terms of a GPTQ checkpoint (quant/convert_gptq.h).
struct GptqLayer {
  int64_t n_out = 0, n_in = 0, n_groups = 0;
  std::vector<int32_t> q;         // [n_out][n_in], 0..2^bits-1, inputs in their own order
  std::vector<uint16_t> scales;   // [n_groups][n_out] f16
  std::vector<int32_t> zeros;     // [n_groups][n_out] zero points (as they are, not minus one)
  std::vector<int32_t> g_idx;     // [n_in] group of each input
  float weight(int64_t o, int64_t i) const;  // scale * (q - zero)
};

// H made ready once for every layer that reads the same input: the column
// order, the dead columns, and U with (damped H)^-1 = U^T U.
struct GptqHessian {
  int64_t n = 0;
  std::vector<int64_t> perm;  // column k is quantized k-th: input perm[k]
  std::vector<char> dead;     // per column in that order: no input reached it
  std::vector<double> u;      // [n][n], upper triangular
};

// h: [n][n], symmetric positive semi-definite (consumed). Error when it is not
// positive definite even once damped (raise damp), or for bad options.
GptqHessian gptq_prepare(std::vector<double> h, int64_t n, const GptqOptions& opt);
GptqLayer gptq_quantize(const float* w, int64_t n_out, int64_t n_in, const GptqHessian& h, const GptqOptions& opt);
// Both steps in one.
GptqLayer gptq_quantize(const float* w, int64_t n_out, int64_t n_in, std::vector<double> h, const GptqOptions& opt);

// Round-to-nearest on the same grid (what GPTQ does with H = I): the baseline (--method rtn).
GptqLayer rtn_quantize(const float* w, int64_t n_out, int64_t n_in, const GptqOptions& opt);

}  // namespace basalt
