// SPDX-License-Identifier: MIT
// Engine weight formats: every file format converts into one of these at load,
// so the kernels stay few. See docs/ARCHITECTURE.md for the byte layouts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace basalt {

// dense: f32, f16, bf16. qa: "quantized affine" groups, w = scale * q + bias,
// with q of 4, 5, 6 (unsigned) or 8 (signed) bits; the scale and bias of a
// group come from one of a few encodings (QaScales), kept as in the source so
// that no format grows by more than a few percent.
enum class WeightFormat : uint8_t { f32, f16, bf16, qa };

enum class QaScales : uint8_t {
  f16_sym,     // per 32: f16 d; w = d * (q - 8) for 4 bits, d * q for signed 8 bits   (Q4_0, Q8_0)
  f16_affine,  // per 32: f16 d, f16 m; w = d * q + m                                  (Q4_1)
  kquant,      // per 256: f16 d, f16 dmin, u8 sc[8], u8 m[8]; w = d*sc*q - dmin*m     (Q4_K, Q5_K)
  q6k,         // per 256: f16 d, i8 sc[16] (groups of 16); w = d*sc*(q - 32)          (Q6_K)
};

// Bytes per block of 32 weights in the quants region, by bit width: low nibbles
// (byte j holds q[j] and q[j+16]) then the high-bit plane; 8 bits: int8 values.
constexpr int qa_block_bytes(int bits) { return bits == 8 ? 32 : 16 + (bits - 4) * 4; }
// Bytes of scales per row of k weights.
size_t qa_scale_bytes(QaScales s, int64_t k);
constexpr int kQaBlock = 32;

struct AlignedFree {
  void operator()(uint8_t* p) const;
};
using AlignedBytes = std::unique_ptr<uint8_t, AlignedFree>;
AlignedBytes aligned_alloc_bytes(size_t n);  // 64-byte aligned

// A weight matrix [rows = n_out][cols = n_in] (an expert tensor stacks its
// experts' rows). Row r starts at data + r * row_bytes; for qa, a row holds
// the quants region then the scales region.
struct Weight {
  std::string name;
  WeightFormat format = WeightFormat::f32;
  QaScales scales = QaScales::f16_sym;
  int bits = 0;  // qa only
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;  // owned below or borrowed from the mapped file
  AlignedBytes owned;

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  size_t quant_bytes() const { return static_cast<size_t>(cols / kQaBlock) * qa_block_bytes(bits); }
  size_t total_bytes() const { return static_cast<size_t>(rows) * row_bytes; }
  std::string describe() const;  // e.g. "qa4/kquant", "f16"
};

// Reference decoding of one row to floats (the definition of each format).
void dequantize_row(const Weight& w, int64_t r, float* out);

// One group's parameters for block b of a qa row: w = scale * (q - zero) + bias.
// Halves 0 and 1 (16 weights each) differ only for q6k, whose groups are 16 wide.
struct QaBlockParams { float scale[2], bias[2]; int zero; };
QaBlockParams qa_block_params(const Weight& w, const uint8_t* row_scales, int64_t b);
// The unsigned (or, for 8 bits, signed) integer values of block b.
void qa_unpack_block(int bits, const uint8_t* block, int8_t* q_signed_or_u);

}  // namespace basalt
