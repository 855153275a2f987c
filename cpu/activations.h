// SPDX-License-Identifier: MIT
// Activations quantized to int8 per block of 32, for the integer dot products
// of qa weights: x[i] ~ d[block] * q[i].
#pragma once

#include <cstdint>
#include <vector>

namespace basalt {

struct QuantizedActs {
  int64_t n_tok = 0, cols = 0;
  std::vector<int8_t> q;      // [n_tok][cols]
  std::vector<float> d;       // [n_tok][cols / 32]
  std::vector<int32_t> sum16; // [n_tok][cols / 16]: sum of q over each half block (for group offsets)

  void resize(int64_t n_tok, int64_t cols);
  const int8_t* q_row(int64_t t) const { return q.data() + t * cols; }
  const float* d_row(int64_t t) const { return d.data() + t * (cols / 32); }
  const int32_t* sum16_row(int64_t t) const { return sum16.data() + t * (cols / 16); }
};

// x: [n_tok][cols], cols a multiple of 32. Scales are rounded to f16 like
// llama.cpp's Q8_0 activations, so both engines see the same numbers.
void quantize_activations(const float* x, int64_t n_tok, int64_t cols, QuantizedActs& out);

}  // namespace basalt
