// SPDX-License-Identifier: MIT
// The tiled layout of qa weights: 16 rows interleaved so that one 32-bit lane
// of a 512-bit register holds 4 weights of one row. A vpdpbusd then advances
// 16 rows' dot products at once, and the 16 rows' scales of a block sit in
// one vector: no shuffles, no horizontal sums, one stream per tile.
//
// A tile holds 16 rows x all columns, as groups of G blocks (32 columns each):
//   group  = [header H][scales of G blocks, S each][quants of G blocks, Q each]
// G = 2, H = 0 for the f16 encodings; G = 8 (a K-quant super-block), H = 64.
// Quants of a block, chunk L of 64 bytes, lane i = row i, byte k of the lane:
//   4 bits, chunks 0-3:  q[4L+k] | q[16+4L+k] << 4
//   5 bits, chunk 4:     bit L = bit 4 of q[4L+k], bit 4+L = bit 4 of q[16+4L+k]
//   6 bits, chunk 4:     bits 2L, 2L+1 = bits 4, 5 of q[4L+k]; chunk 5: the same for q[16+4L+k]
//                        (one shift and one mask put both at bits 4, 5 of the byte)
//   8 bits, chunks 0-7:  q[4L+k] + 128 (unsigned, for u8 x s8 products)
// Scales of a block (16 lanes): f16_sym d[16] | f16_affine d[16], m[16] | f16_zero d[16], z[16] |
// kquant sc[16], m[16] (u8) | q6k sc_lo[16], sc_hi[16] (i8, groups of 16).
// Header of a super-block: kquant d[16], dmin[16] (f16) | q6k d[16] (f16).
// Rows past the end of a matrix, and the padding block of an odd block count,
// are zero and contribute nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/util/always_inline.h"
#include "quant/qa_encoding.h"
#include "quant/weight.h"

namespace basalt {

constexpr int kTileRows = QA_TILE_ROWS;

// Its accessors are always inlined: the kernels built with ISA flags call them (core/util/always_inline.h).
struct QaLayout {
  int bits;
  QaScales enc;
  int blocks_per_group;  // G
  int header_bytes;      // H
  int scale_bytes;       // S, per block of 16 rows
  int quant_chunks;      // Q / 64

  BASALT_ALWAYS_INLINE constexpr int quant_bytes() const { return QA_QUANT_CHUNK_BYTES * quant_chunks; }
  BASALT_ALWAYS_INLINE constexpr size_t group_bytes() const {
    return static_cast<size_t>(header_bytes) + static_cast<size_t>(blocks_per_group) * (scale_bytes + quant_bytes());
  }
  BASALT_ALWAYS_INLINE constexpr int64_t groups(int64_t cols) const {
    const int64_t nb = cols / kQaBlock;
    return (nb + blocks_per_group - 1) / blocks_per_group;
  }
  BASALT_ALWAYS_INLINE constexpr size_t tile_bytes(int64_t cols) const {
    return static_cast<size_t>(groups(cols)) * group_bytes();
  }
  // Pointers into group g of a tile.
  BASALT_ALWAYS_INLINE constexpr const uint8_t* group(const uint8_t* tile, int64_t g) const {
    return tile + static_cast<size_t>(g) * group_bytes();
  }
  BASALT_ALWAYS_INLINE constexpr const uint8_t* scales(const uint8_t* grp, int j) const {
    return grp + header_bytes + j * scale_bytes;
  }
  BASALT_ALWAYS_INLINE constexpr const uint8_t* quants(const uint8_t* grp, int j) const {
    return grp + header_bytes + blocks_per_group * scale_bytes + j * quant_bytes();
  }
};

// constexpr: the kernels fold a format's offsets into their code.
constexpr QaLayout qa_layout(int bits, QaScales enc) {
  const int chunks = bits == 8 ? 8 : bits;  // 4 nibble chunks + one per high bit
  static_assert(QA_QUANT_CHUNK_BYTES == 64);
  switch (enc) {
    case QaScales::f16_sym: return {bits, enc, QA_F16_GROUP_BLOCKS, 0, QA_SCALE_BYTES_ONE_F16, chunks};
    case QaScales::f16_affine:
    case QaScales::f16_zero: return {bits, enc, QA_F16_GROUP_BLOCKS, 0, QA_SCALE_BYTES_TWO_F16, chunks};
    case QaScales::kquant:
    case QaScales::q6k:
      return {bits, enc, QA_KQUANT_GROUP_BLOCKS, QA_KQUANT_HEADER_BYTES, QA_SCALE_BYTES_KQUANT, chunks};
  }
  return {bits, enc, 0, 0, 0, 0};  // unreachable: every encoding is above
}

// The reference reading of one row (lane) of block b of a tile: its integer
// quants (signed for 8 bits) and w = scale * (q - zero) + bias.
void qa_tile_block(const QaLayout& L, const uint8_t* tile, int lane, int64_t b, int8_t q[32], QaBlockParams* p);

// Writes one tile from up to 16 rows in the row-major form (rows[i] points to
// a row: quant blocks then scales, see convert_gguf.cpp); rows[i] == nullptr or
// i >= n: zero rows.
void qa_pack_tile(const QaLayout& L, const uint8_t* const* rows, int n, int64_t cols, uint8_t* tile);

// A qa weight from rows in the row-major form, rows * qa_rowmajor_bytes bytes
// (tests, benchmarks, quantizers). mat_rows: rows per stacked matrix (0: all).
Weight qa_weight_from_rows(std::string name, int bits, QaScales enc, int64_t rows, int64_t cols,
                           const uint8_t* rowmajor, int64_t mat_rows = 0);

// The bytes qa_weight_from_rows allocates for `mats` stacked matrices of
// mat_rows x cols (whole tiles per matrix): what a loader checks against the
// memory available before converting.
size_t qa_weight_bytes(int bits, QaScales enc, int64_t mat_rows, int64_t cols, int64_t mats = 1);

// Bytes of one row in the row-major form, and its block accessors.
size_t qa_rowmajor_bytes(int bits, QaScales enc, int64_t cols);
void qa_unpack_block(int bits, const uint8_t* block, int8_t* q);
QaBlockParams qa_rowmajor_params(int bits, QaScales enc, const uint8_t* row_scales, int64_t b);

}  // namespace basalt
