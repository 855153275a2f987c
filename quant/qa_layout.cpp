// SPDX-License-Identifier: MIT
// Packing row-major qa rows into tiles, and the reference reading of a tile.
#include "quant/qa_layout.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/util/half.h"

namespace basalt {

namespace {

// Row-major form (the conversion's intermediate): per row, the blocks' quants
// (low nibbles: byte j holds q[j], q[j+16]; then the high bits: 5 bits, bit j
// of 4 bytes is q[j]'s bit 4; 6 bits, bits 2j, 2j+1 of 8 bytes are q[j]'s bits
// 4, 5; 8 bits: int8), then the scales in the source's encoding.
int rowmajor_block_bytes(int bits) { return bits == 8 ? 32 : 16 + (bits - 4) * 4; }

size_t rowmajor_scale_bytes(QaScales s, int64_t k) {
  switch (s) {
    case QaScales::f16_sym: return static_cast<size_t>(k / 32) * 2;
    case QaScales::f16_affine:
    case QaScales::f16_zero: return static_cast<size_t>(k / 32) * 4;
    case QaScales::kquant: return static_cast<size_t>(k / 256) * 20;
    case QaScales::q6k: return static_cast<size_t>(k / 256) * 18;
  }
  return 0;
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace

size_t qa_rowmajor_bytes(int bits, QaScales enc, int64_t cols) {
  return static_cast<size_t>(cols / kQaBlock) * rowmajor_block_bytes(bits) + rowmajor_scale_bytes(enc, cols);
}

void qa_unpack_block(int bits, const uint8_t* block, int8_t* q) {
  if (bits == 8) {
    std::memcpy(q, block, 32);
    return;
  }
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(block[j] & 0xF);
    q[j + 16] = static_cast<int8_t>(block[j] >> 4);
  }
  if (bits == 5) {
    uint32_t h;
    std::memcpy(&h, block + 16, 4);
    for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(q[j] | (((h >> j) & 1) << 4));
  } else if (bits == 6) {
    uint64_t h;
    std::memcpy(&h, block + 16, 8);
    for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(q[j] | (((h >> (2 * j)) & 3) << 4));
  }
}

QaBlockParams qa_rowmajor_params(int bits, QaScales enc, const uint8_t* s, int64_t b) {
  QaBlockParams p{};
  switch (enc) {
    case QaScales::f16_sym:
      p.scale[0] = p.scale[1] = f16_to_f32(load_u16(s + 2 * b));
      p.zero = bits == 8 ? 0 : 8;
      break;
    case QaScales::f16_affine:
      p.scale[0] = p.scale[1] = f16_to_f32(load_u16(s + 4 * b));
      p.bias[0] = p.bias[1] = f16_to_f32(load_u16(s + 4 * b + 2));
      break;
    case QaScales::f16_zero:
      p.scale[0] = p.scale[1] = f16_to_f32(load_u16(s + 4 * b));
      p.zero = static_cast<int>(f16_to_f32(load_u16(s + 4 * b + 2)));
      break;
    case QaScales::kquant: {
      const uint8_t* sb = s + 20 * (b / 8);
      const int j = static_cast<int>(b % 8);
      p.scale[0] = p.scale[1] = f16_to_f32(load_u16(sb)) * sb[4 + j];
      p.bias[0] = p.bias[1] = -f16_to_f32(load_u16(sb + 2)) * sb[12 + j];
      break;
    }
    case QaScales::q6k: {
      const uint8_t* sb = s + 18 * (b / 8);
      const int j = static_cast<int>(b % 8) * 2;
      const float d = f16_to_f32(load_u16(sb));
      for (int h = 0; h < 2; ++h) p.scale[h] = d * static_cast<int8_t>(sb[2 + j + h]);
      p.zero = 32;
      break;
    }
  }
  return p;
}

void qa_pack_tile(const QaLayout& L, const uint8_t* const* rows, int n, int64_t cols, uint8_t* tile) {
  const int64_t nb = cols / kQaBlock;
  const int G = L.blocks_per_group;
  std::memset(tile, 0, L.tile_bytes(cols));
  const size_t quant_region = static_cast<size_t>(nb) * rowmajor_block_bytes(L.bits);
  int8_t q[32];
  for (int i = 0; i < n && i < kTileRows; ++i) {
    const uint8_t* row = rows[i];
    if (!row) continue;
    const uint8_t* rs = row + quant_region;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* grp = tile + static_cast<size_t>(b / G) * L.group_bytes();
      const int j = static_cast<int>(b % G);
      uint8_t* qt = const_cast<uint8_t*>(L.quants(grp, j));
      uint8_t* st = const_cast<uint8_t*>(L.scales(grp, j));
      qa_unpack_block(L.bits, row + b * rowmajor_block_bytes(L.bits), q);
      for (int c = 0; c < 4; ++c)
        for (int k = 0; k < 4; ++k) {
          const int lo = 4 * c + k, hi = 16 + 4 * c + k;
          if (L.bits == 8) {
            qt[64 * c + 4 * i + k] = static_cast<uint8_t>(q[lo] + 128);
            qt[64 * (c + 4) + 4 * i + k] = static_cast<uint8_t>(q[hi] + 128);
            continue;
          }
          qt[64 * c + 4 * i + k] = static_cast<uint8_t>((q[lo] & 0xF) | ((q[hi] & 0xF) << 4));
          uint8_t* hb = qt + 64 * 4 + 4 * i + k;  // the high bits (qa_layout.h)
          if (L.bits == 5) *hb = static_cast<uint8_t>(*hb | ((q[lo] >> 4) & 1) << c | ((q[hi] >> 4) & 1) << (4 + c));
          if (L.bits == 6) {
            hb[0] = static_cast<uint8_t>(hb[0] | ((q[lo] >> 4) & 3) << (2 * c));
            hb[64] = static_cast<uint8_t>(hb[64] | ((q[hi] >> 4) & 3) << (2 * c));
          }
        }
      // Scales of this block for lane i, in the tile's encoding.
      switch (L.enc) {
        case QaScales::f16_sym: std::memcpy(st + 2 * i, rs + 2 * b, 2); break;
        case QaScales::f16_affine:
        case QaScales::f16_zero:
          std::memcpy(st + 2 * i, rs + 4 * b, 2);
          std::memcpy(st + 32 + 2 * i, rs + 4 * b + 2, 2);
          break;
        case QaScales::kquant: {
          const uint8_t* sb = rs + 20 * (b / 8);
          st[i] = sb[4 + j];
          st[16 + i] = sb[12 + j];
          std::memcpy(grp + 2 * i, sb, 2);
          std::memcpy(grp + 32 + 2 * i, sb + 2, 2);
          break;
        }
        case QaScales::q6k: {
          const uint8_t* sb = rs + 18 * (b / 8);
          st[i] = sb[2 + 2 * j];
          st[16 + i] = sb[3 + 2 * j];
          std::memcpy(grp + 2 * i, sb, 2);
          break;
        }
      }
    }
  }
}

void qa_tile_block(const QaLayout& L, const uint8_t* tile, int lane, int64_t b, int8_t q[32], QaBlockParams* p) {
  const uint8_t* grp = L.group(tile, b / L.blocks_per_group);
  const int j = static_cast<int>(b % L.blocks_per_group);
  const uint8_t* qt = L.quants(grp, j);
  const uint8_t* st = L.scales(grp, j);
  for (int c = 0; c < 4; ++c)
    for (int k = 0; k < 4; ++k) {
      const int lo = 4 * c + k, hi = 16 + 4 * c + k;
      if (L.bits == 8) {
        q[lo] = static_cast<int8_t>(qt[64 * c + 4 * lane + k] - 128);
        q[hi] = static_cast<int8_t>(qt[64 * (c + 4) + 4 * lane + k] - 128);
        continue;
      }
      const uint8_t v = qt[64 * c + 4 * lane + k];
      int ql = v & 0xF, qh = v >> 4;
      const uint8_t* hb = qt + 64 * 4 + 4 * lane + k;
      if (L.bits == 5) ql |= ((hb[0] >> c) & 1) << 4, qh |= ((hb[0] >> (4 + c)) & 1) << 4;
      if (L.bits == 6) ql |= ((hb[0] >> (2 * c)) & 3) << 4, qh |= ((hb[64] >> (2 * c)) & 3) << 4;
      q[lo] = static_cast<int8_t>(ql);
      q[hi] = static_cast<int8_t>(qh);
    }
  *p = QaBlockParams{};
  switch (L.enc) {
    case QaScales::f16_sym:
      p->scale[0] = p->scale[1] = f16_to_f32(load_u16(st + 2 * lane));
      p->zero = L.bits == 8 ? 0 : 8;
      break;
    case QaScales::f16_affine:
      p->scale[0] = p->scale[1] = f16_to_f32(load_u16(st + 2 * lane));
      p->bias[0] = p->bias[1] = f16_to_f32(load_u16(st + 32 + 2 * lane));
      break;
    case QaScales::f16_zero:
      p->scale[0] = p->scale[1] = f16_to_f32(load_u16(st + 2 * lane));
      p->zero = static_cast<int>(f16_to_f32(load_u16(st + 32 + 2 * lane)));
      break;
    case QaScales::kquant:
      p->scale[0] = p->scale[1] = f16_to_f32(load_u16(grp + 2 * lane)) * st[lane];
      p->bias[0] = p->bias[1] = -f16_to_f32(load_u16(grp + 32 + 2 * lane)) * st[16 + lane];
      break;
    case QaScales::q6k: {
      const float d = f16_to_f32(load_u16(grp + 2 * lane));
      p->scale[0] = d * static_cast<int8_t>(st[lane]);
      p->scale[1] = d * static_cast<int8_t>(st[16 + lane]);
      p->zero = 32;
      break;
    }
  }
}

size_t qa_weight_bytes(int bits, QaScales enc, int64_t mat_rows, int64_t cols, int64_t mats) {
  const int64_t tiles = (mat_rows + kTileRows - 1) / kTileRows;
  return qa_layout(bits, enc).tile_bytes(cols) * static_cast<size_t>(tiles * mats);
}

Weight qa_weight_from_rows(std::string name, int bits, QaScales enc, int64_t rows, int64_t cols,
                           const uint8_t* rowmajor, int64_t mat_rows) {
  Weight w;
  w.name = std::move(name);
  w.format = WeightFormat::qa;
  w.bits = bits;
  w.scales = enc;
  w.rows = rows;
  w.cols = cols;
  w.mat_rows = mat_rows > 0 ? mat_rows : rows;
  if (rows % w.mat_rows != 0) throw Error("internal: " + w.name + ": rows not a multiple of the matrix rows");
  const QaLayout L = qa_layout(bits, enc);
  w.tile_bytes = L.tile_bytes(cols);
  w.owned = aligned_alloc_bytes(w.total_bytes());
  w.data = w.owned.get();
  const size_t rm = qa_rowmajor_bytes(bits, enc, cols);
  const int64_t tiles = w.tiles_per_mat();
  for (int64_t t = 0; t < rows / w.mat_rows * tiles; ++t) {
    const int64_t mat = t / tiles, r0 = (t % tiles) * kTileRows;
    const int n = static_cast<int>(std::min<int64_t>(kTileRows, w.mat_rows - r0));
    const uint8_t* ptrs[kTileRows] = {};
    for (int i = 0; i < n; ++i) ptrs[i] = rowmajor + static_cast<size_t>(mat * w.mat_rows + r0 + i) * rm;
    qa_pack_tile(L, ptrs, n, cols, w.owned.get() + t * w.tile_bytes);
  }
  return w;
}

}  // namespace basalt
