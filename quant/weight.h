// SPDX-License-Identifier: MIT
// Engine weight formats: every file format converts into one of these at load,
// so the kernels stay few. See docs/ARCHITECTURE.md for the byte layouts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/util/aligned.h"
#include "core/util/always_inline.h"
#include "quant/qa_encoding.h"

namespace basalt {

// dense: f32, f16, bf16, row-major. qa: "quantized affine" groups of 32,
// w = scale * (q - zero) + bias, with q of 4, 5, 6 (unsigned) or 8 (signed)
// bits, stored in tiles of 16 interleaved rows (quant/qa_layout.h); the scale
// and bias of a group come from one of a few encodings (QaScales), kept as in
// the source so that no format grows by more than a few percent.
enum class WeightFormat : uint8_t { f32, f16, bf16, qa };

enum class QaScales : uint8_t {  // quant/qa_encoding.h says what each stores
  f16_sym = QA_SCALES_F16_SYM,        // Q4_0, Q8_0
  f16_affine = QA_SCALES_F16_AFFINE,  // Q4_1
  kquant = QA_SCALES_KQUANT,          // Q4_K, Q5_K
  q6k = QA_SCALES_Q6K,                // Q6_K
  f16_zero = QA_SCALES_F16_ZERO,      // GPTQ asym
};
constexpr int kQaBlock = QA_BLOCK;

// A weight matrix [rows = n_out][cols = n_in]; an expert tensor stacks its
// experts' matrices (mat_rows rows each).
struct Weight {
  std::string name;
  WeightFormat format = WeightFormat::f32;
  QaScales scales = QaScales::f16_sym;
  int bits = 0;  // qa only
  int64_t rows = 0, cols = 0;
  int64_t mat_rows = 0;   // rows of one matrix (== rows unless experts are stacked)
  size_t row_bytes = 0;   // dense: bytes of a row
  size_t tile_bytes = 0;  // qa: bytes of a tile of 16 rows
  const uint8_t* data = nullptr;  // owned below or borrowed from the mapped file
  AlignedBytes owned;
  // Column k of the matrix multiplies input input_perm[k] (GPTQ act-order,
  // its groups made contiguous at load); empty: the identity. Stacked
  // experts: matrix m's order at [m * cols, (m + 1) * cols).
  std::vector<int32_t> input_perm;
  const int32_t* perm_of(int64_t mat) const { return input_perm.empty() ? nullptr : input_perm.data() + mat * cols; }

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }  // dense
  BASALT_ALWAYS_INLINE int64_t tiles_per_mat() const { return (mat_rows + 15) / 16; }
  // The tile holding row r, and r's lane in it (qa).
  BASALT_ALWAYS_INLINE const uint8_t* tile_of(int64_t r, int* lane) const {
    const int64_t mat = r / mat_rows, in = r % mat_rows;
    *lane = static_cast<int>(in % 16);
    return data + static_cast<size_t>(mat * tiles_per_mat() + in / 16) * tile_bytes;
  }
  size_t total_bytes() const;
  std::string describe() const;  // e.g. "qa4/kquant", "f16"
};

// One group's parameters: w = scale * (q - zero) + bias. Halves 0 and 1
// (16 weights each) differ only for q6k, whose groups are 16 wide.
struct QaBlockParams {
  float scale[2], bias[2];
  int zero;
};

// Matrices of one format and shape stacked into one weight (MoE experts:
// mat_rows = each part's rows; input orders kept per matrix). Error if they differ.
Weight stack_weights(std::vector<Weight> parts, const std::string& name);

// Reference decoding of one row to floats (the definition of each format).
void dequantize_row(const Weight& w, int64_t r, float* out);

}  // namespace basalt
