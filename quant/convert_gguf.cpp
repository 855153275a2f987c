// SPDX-License-Identifier: MIT
// Each GGUF block type is unpacked to integer quants plus its scale encoding
// and written into the engine's qa layout (quant/weight.h); nothing is rounded.
#include "quant/convert_gguf.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/util/half.h"
#include "core/util/thread_pool.h"
#include "quant/ggml_blocks.h"
#include "quant/qa_layout.h"

namespace basalt {

namespace {

int rowmajor_block_bytes(int bits) { return bits == 8 ? 32 : 16 + (bits - 4) * 4; }

// Packs 32 unsigned quants (or signed, for 8 bits) into one row-major block.
void qa_pack_block(int bits, const int8_t* q, uint8_t* out) {
  if (bits == 8) {
    std::memcpy(out, q, 32);
    return;
  }
  for (int j = 0; j < 16; ++j) out[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
  if (bits == 5) {
    uint32_t h = 0;
    for (int j = 0; j < 32; ++j) h |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    std::memcpy(out + 16, &h, 4);
  } else if (bits == 6) {
    uint64_t h = 0;
    for (int j = 0; j < 32; ++j) h |= static_cast<uint64_t>((q[j] >> 4) & 3) << (2 * j);
    std::memcpy(out + 16, &h, 8);
  }
}

struct QaTarget {
  int bits;
  QaScales scales;
};

QaTarget qa_target(GgmlType t) {
  switch (t) {
    case GgmlType::q4_0: return {4, QaScales::f16_sym};
    case GgmlType::q4_1: return {4, QaScales::f16_affine};
    case GgmlType::q5_0: return {5, QaScales::f16_affine};  // bias -16 d: codes 0..31 about 16
    case GgmlType::q5_1: return {5, QaScales::f16_affine};
    case GgmlType::q8_0: return {8, QaScales::f16_sym};
    case GgmlType::q4_k: return {4, QaScales::kquant};
    case GgmlType::q5_k: return {5, QaScales::kquant};
    case GgmlType::q6_k: return {6, QaScales::q6k};
    default: return {0, QaScales::f16_sym};
  }
}

// Converts one row of `cols` weights from GGUF blocks at src into the
// row-major qa form (quant/qa_layout.h), which is then packed into tiles.
void convert_row(GgmlType type, const uint8_t* src, int64_t cols, uint8_t* quants, uint8_t* scales, int bits) {
  const int bb = rowmajor_block_bytes(bits);
  int8_t q[32];
  switch (type) {
    case GgmlType::q4_0:
      for (int64_t b = 0; b < cols / 32; ++b) {
        ggml::BlockQ4_0 blk;
        std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
        std::memcpy(quants + b * bb, blk.qs, 16);  // same nibble order as the engine's
        std::memcpy(scales + 2 * b, &blk.d, 2);
      }
      return;
    case GgmlType::q4_1:
      for (int64_t b = 0; b < cols / 32; ++b) {
        ggml::BlockQ4_1 blk;
        std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
        std::memcpy(quants + b * bb, blk.qs, 16);
        std::memcpy(scales + 4 * b, &blk.d, 2);
        std::memcpy(scales + 4 * b + 2, &blk.m, 2);
      }
      return;
    case GgmlType::q5_0:
    case GgmlType::q5_1:
      // Both lay out a block as the engine's 5-bit row-major one: qs as the
      // Q4 nibbles, then qh with bit j the high bit of weight j.
      for (int64_t b = 0; b < cols / 32; ++b) {
        uint16_t d, m;
        const uint8_t *qh, *qs;
        if (type == GgmlType::q5_0) {
          ggml::BlockQ5_0 blk;
          std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
          // w = d (q - 16) = d q + (-16 d): -16 d is exact in f16 unless it overflows.
          const float bias = -16.0f * f16_to_f32(blk.d);
          if (!(std::fabs(bias) <= 65504.0f))  // the largest f16
            throw Error("a Q5_0 block's scale is too large for its zero point in f16 (" + std::to_string(f16_to_f32(blk.d)) + ")");
          d = blk.d, m = f32_to_f16(bias);
          qh = src + b * sizeof blk + offsetof(ggml::BlockQ5_0, qh), qs = src + b * sizeof blk + offsetof(ggml::BlockQ5_0, qs);
        } else {
          ggml::BlockQ5_1 blk;
          std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
          d = blk.d, m = blk.m;
          qh = src + b * sizeof blk + offsetof(ggml::BlockQ5_1, qh), qs = src + b * sizeof blk + offsetof(ggml::BlockQ5_1, qs);
        }
        std::memcpy(quants + b * bb, qs, 16);
        std::memcpy(quants + b * bb + 16, qh, 4);
        std::memcpy(scales + 4 * b, &d, 2);
        std::memcpy(scales + 4 * b + 2, &m, 2);
      }
      return;
    case GgmlType::q8_0:
      for (int64_t b = 0; b < cols / 32; ++b) {
        ggml::BlockQ8_0 blk;
        std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
        std::memcpy(quants + b * bb, blk.qs, 32);
        std::memcpy(scales + 2 * b, &blk.d, 2);
      }
      return;
    case GgmlType::q4_k:
    case GgmlType::q5_k:
      for (int64_t sb = 0; sb < cols / 256; ++sb) {
        const bool five = type == GgmlType::q5_k;
        const uint8_t* blk = src + sb * (five ? sizeof(ggml::BlockQ5_K) : sizeof(ggml::BlockQ4_K));
        // Both start with d, dmin, scales[12]; Q5_K then has qh[32] before qs.
        const uint8_t* sc12 = blk + 4;
        const uint8_t* qh = five ? blk + 16 : nullptr;
        const uint8_t* qs = blk + (five ? 48 : 16);
        uint8_t* out_s = scales + 20 * sb;
        std::memcpy(out_s, blk, 4);
        for (int j = 0; j < 8; ++j) ggml::kquant_scale_min(j, sc12, &out_s[4 + j], &out_s[12 + j]);
        for (int j = 0; j < 8; ++j) {  // sub-block j: 32 weights
          const uint8_t* ql = qs + 32 * (j / 2);
          int shift = (j % 2) * 4;
          for (int l = 0; l < 32; ++l) {
            int v = (ql[l] >> shift) & 0xF;
            if (five && (qh[l] >> j) & 1) v += 16;
            q[l] = static_cast<int8_t>(v);
          }
          qa_pack_block(bits, q, quants + (sb * 8 + j) * bb);
        }
      }
      return;
    case GgmlType::q6_k:
      for (int64_t sb = 0; sb < cols / 256; ++sb) {
        ggml::BlockQ6_K blk;
        std::memcpy(&blk, src + sb * sizeof blk, sizeof blk);
        uint8_t* out_s = scales + 18 * sb;
        std::memcpy(out_s, &blk.d, 2);
        std::memcpy(out_s + 2, blk.scales, 16);
        int8_t all[256];
        for (int n = 0; n < 2; ++n) {  // two halves of 128
          const uint8_t* ql = blk.ql + 64 * n;
          const uint8_t* qh = blk.qh + 32 * n;
          int8_t* y = all + 128 * n;
          for (int l = 0; l < 32; ++l) {
            y[l] = static_cast<int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
            y[l + 32] = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
            y[l + 64] = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
            y[l + 96] = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
          }
        }
        for (int j = 0; j < 8; ++j) qa_pack_block(bits, all + 32 * j, quants + (sb * 8 + j) * bb);
      }
      return;
    default: throw Error("internal: no converter for " + ggml_type_name(type));
  }
}

}  // namespace

bool gguf_type_loadable(GgmlType t) {
  return t == GgmlType::f32 || t == GgmlType::f16 || t == GgmlType::bf16 || qa_target(t).bits != 0;
}

size_t converted_bytes(const GgufTensorInfo& t) {
  if (t.dims.size() < 2 || t.dims.size() > 3 || !gguf_type_loadable(t.type) || t.dims[0] % kQaBlock != 0) return 0;
  if (t.type == GgmlType::f32 || t.type == GgmlType::f16 || t.type == GgmlType::bf16) return 0;
  const QaTarget target = qa_target(t.type);
  return qa_weight_bytes(target.bits, target.scales, t.dims[1], t.dims[0], t.dims.size() == 3 ? t.dims[2] : 1);
}

Weight weight_from_gguf(const GgufTensorInfo& t, const ConsumedBytes& consumed) {
  if (t.dims.size() < 2 || t.dims.size() > 3)
    throw Error("tensor " + t.name + ": expected a 2-D or 3-D weight, found " + std::to_string(t.dims.size()) + "-D");
  if (!gguf_type_loadable(t.type))
    throw Error("tensor " + t.name + ": weight type " + ggml_type_name(t.type) +
                " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
  Weight w;
  w.name = t.name;
  w.cols = t.dims[0];
  w.mat_rows = t.dims[1];
  w.rows = t.dims[1] * (t.dims.size() == 3 ? t.dims[2] : 1);
  switch (t.type) {
    case GgmlType::f32: w.format = WeightFormat::f32; w.row_bytes = w.cols * 4; w.data = t.data; return w;
    case GgmlType::f16: w.format = WeightFormat::f16; w.row_bytes = w.cols * 2; w.data = t.data; return w;
    case GgmlType::bf16: w.format = WeightFormat::bf16; w.row_bytes = w.cols * 2; w.data = t.data; return w;
    default: break;
  }
  QaTarget target = qa_target(t.type);
  if (w.cols % kQaBlock != 0) throw Error("tensor " + t.name + ": row length is not a multiple of 32");
  w.format = WeightFormat::qa;
  w.bits = target.bits;
  w.scales = target.scales;
  const QaLayout layout = qa_layout(w.bits, w.scales);
  w.tile_bytes = layout.tile_bytes(w.cols);
  w.owned = aligned_alloc_bytes(w.total_bytes());
  w.data = w.owned.get();
  const GgmlTypeSize ts = ggml_type_size(t.type);
  const size_t src_row_bytes = static_cast<size_t>(w.cols / ts.block_elems) * ts.block_bytes;
  const size_t rm_bytes = qa_rowmajor_bytes(w.bits, w.scales, w.cols);
  const size_t quant_region = static_cast<size_t>(w.cols / kQaBlock) * rowmajor_block_bytes(w.bits);
  const int64_t n_mats = w.rows / w.mat_rows, tiles = w.tiles_per_mat();
  uint8_t* dst = w.owned.get();
  auto src_row = [&](int64_t t_idx) { return (t_idx / tiles) * w.mat_rows + (t_idx % tiles) * kTileRows; };
  // Slabs of ~4 MB of the source, each across the threads: the source's pages
  // can go after each (a 170 MB embedding otherwise sits beside its copy).
  const int64_t n_tiles = n_mats * tiles;
  const int64_t slab = std::max<int64_t>(1, (int64_t{4} << 20) / static_cast<int64_t>(kTileRows * src_row_bytes));
  for (int64_t s0 = 0; s0 < n_tiles; s0 += slab) {
    const int64_t s1 = std::min(n_tiles, s0 + slab);
    parallel_for(s1 - s0, 1, [&](int64_t first, int64_t last) {
      std::vector<uint8_t> rm(kTileRows * rm_bytes);
      for (int64_t t_idx = s0 + first; t_idx < s0 + last; ++t_idx) {
        const int64_t mat = t_idx / tiles, r0 = (t_idx % tiles) * kTileRows;
        const int n = static_cast<int>(std::min<int64_t>(kTileRows, w.mat_rows - r0));
        const uint8_t* rows[kTileRows] = {};
        for (int i = 0; i < n; ++i) {
          uint8_t* row = rm.data() + i * rm_bytes;
          const int64_t r = mat * w.mat_rows + r0 + i;
          convert_row(t.type, t.data + r * src_row_bytes, w.cols, row, row + quant_region, w.bits);
          rows[i] = row;
        }
        qa_pack_tile(layout, rows, n, w.cols, dst + t_idx * w.tile_bytes);
      }
    });
    if (consumed) {
      const int64_t row_end = s1 == n_tiles ? w.rows : src_row(s1);
      consumed(t.data + src_row(s0) * src_row_bytes, static_cast<size_t>(row_end - src_row(s0)) * src_row_bytes);
    }
  }
  return w;
}

std::vector<float> floats_from_gguf(const GgufTensorInfo& t) {
  if (!gguf_type_loadable(t.type))
    throw Error("tensor " + t.name + ": type " + ggml_type_name(t.type) + " is not supported");
  GgufTensorInfo as2d = t;
  as2d.dims = {t.dims[0], t.n_elements() / t.dims[0]};
  Weight w = weight_from_gguf(as2d);
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w, r, out.data() + r * w.cols);
  return out;
}

}  // namespace basalt
