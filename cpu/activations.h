// SPDX-License-Identifier: MIT
// Activations quantized to int8 per block of 32, for the integer dot products
// of qa weights: x[i] ~ d[block] * q[i].
#pragma once

#include <cstdint>
#include <vector>

#include "core/util/always_inline.h"
#include "cpu/isa.h"

namespace basalt {

// Rows are padded to a multiple of 64 columns (and a line more where that
// would be a whole number of pages: resize) with zeros (q = 0, d = 0, sums =
// 0), so kernels may read the padding block of an odd block count.
struct QuantizedActs {
  int64_t n_tok = 0, cols = 0, stride = 0;  // stride: padded columns
  std::vector<int8_t> q;       // [n_tok][stride]
  std::vector<float> d;        // [n_tok][stride / 32]
  std::vector<int16_t> sum16;  // [n_tok][stride / 16]: sum of q over each half block (for group offsets; |sum| <= 16 x 127)
  // [n_tok][stride / 32]: d x the block's sum of q, as float: an affine block's
  // offset term (m x this) costs the kernels one broadcast, not five scalar ops.
  std::vector<float> dsum;
  // [n_tok][stride / 16]: -32 x sum16, Q6_K's zero-point term for a half
  // block, as int32: the AVX-512 and AVX-VNNI kernels start a half's sum with
  // it in one broadcast from memory, where making it from sum16 took five
  // instructions.
  std::vector<int32_t> q6k_zero;
  // [n_tok][stride / 32]: minus the block's sum of q, as int32: a zero point
  // z (a power of 2) makes a block's term -z x sum from it with one broadcast
  // and a shift, where making it from sum16 took five scalar instructions.
  std::vector<int32_t> neg_sum;

  // The first n tokens again, in passes of at most `tokens`, each pass block
  // by block: block b of token t0 + i at (b x nt + i) from the pass's start,
  // which is where row t0 starts in the arrays above (q at t0 x stride; d,
  // dsum and neg_sum at t0 x stride / 32; sum16 and q6k_zero pairs at t0 x
  // stride / 16). A register block of one pass then finds every token's
  // inputs at constant offsets from one pointer; in rows it kept a pointer per
  // token and array (the AVX2 kernel's 16 registers: docs/PERFORMANCE.md 3.1h). Passes are of equal size
  // (pass_tokens()). Made by make_passes(), which matmul() calls before its
  // threads start (cpu/matmul.h: prepare_activations); resize() drops them.
  struct Passes {
    int tokens = 0;  // 0: none made
    int64_t n = 0;
    std::vector<int8_t> q;
    std::vector<float> d, dsum;
    std::vector<int16_t> sum16;
    // Where the kernels start a token's sums (its zero points' terms):
    // q6k_zero and neg_sum as above.
    std::vector<int32_t> q6k_zero, neg_sum;
  };
  mutable Passes passes;
  void make_passes(int tokens, int64_t n) const;

  void resize(int64_t n_tok, int64_t cols);
  // Rows rows[0..n) of src: what quantizing those rows of src's input gives
  // (rows are quantized each on its own), without doing it again.
  void gather(const QuantizedActs& src, const int32_t* rows, int64_t n);
  BASALT_ALWAYS_INLINE const int8_t* q_row(int64_t t) const { return q.data() + t * stride; }
  BASALT_ALWAYS_INLINE const float* d_row(int64_t t) const { return d.data() + t * (stride / 32); }
  BASALT_ALWAYS_INLINE const int16_t* sum16_row(int64_t t) const { return sum16.data() + t * (stride / 16); }
  BASALT_ALWAYS_INLINE const float* dsum_row(int64_t t) const { return dsum.data() + t * (stride / 32); }
  BASALT_ALWAYS_INLINE const int32_t* q6k_zero_row(int64_t t) const { return q6k_zero.data() + t * (stride / 16); }
  BASALT_ALWAYS_INLINE const int32_t* neg_sum_row(int64_t t) const { return neg_sum.data() + t * (stride / 32); }
};

// Passes: how many for n tokens at most max_tokens each, and the size of the
// next one, all of equal size (16 by 5: 4 passes of 4, not 3 of 5 and 1),
// given the tokens and passes left: QuantizedActs::Passes and the kernels'
// loops over passes agree through it.
inline int64_t pass_count(int64_t n, int64_t max_tokens) { return (n + max_tokens - 1) / max_tokens; }
inline int64_t pass_tokens(int64_t tokens_left, int64_t passes_left) {
  return (tokens_left + passes_left - 1) / passes_left;
}

// x: [n_tok][cols], cols a multiple of 32. Scales are rounded to f16 like
// llama.cpp's Q8_0 activations.
// Rows run through the row kernels of selected_isa() (cpu/rows.h), or of isa.
// rms_norm and swiglu (cpu/ops.h) make this form as they go, when asked to.
void quantize_activations(const float* x, int64_t n_tok, int64_t cols, QuantizedActs& out);
void quantize_activations(const float* x, int64_t n_tok, int64_t cols, QuantizedActs& out, Isa isa);

}  // namespace basalt
