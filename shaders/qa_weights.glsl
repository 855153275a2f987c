// SPDX-License-Identifier: MIT
// Reading qa weights in the CPU's tiled layout (quant/qa_layout.h) from the
// buffer `w` (uint words) that the including shader declares: a tile
// interleaves 16 rows ("lanes") in 4-byte units, so 16 invocations reading
// one lane each read 64 contiguous bytes.
// Variants (defines): BITS 4, 5, 6 or 8; SCALES one of the QA_SCALES_*
// encodings of quant/qa_encoding.h, whose constants this file shares with C++.
#include "quant/qa_encoding.h"

// Words of a group: a header, then G blocks' scales, then G blocks' quants.
#if SCALES == QA_SCALES_KQUANT || SCALES == QA_SCALES_Q6K
const uint G = QA_KQUANT_GROUP_BLOCKS, HEADER_WORDS = QA_KQUANT_HEADER_BYTES / 4, SCALE_WORDS = QA_SCALE_BYTES_KQUANT / 4;
#elif SCALES == QA_SCALES_F16_SYM
const uint G = QA_F16_GROUP_BLOCKS, HEADER_WORDS = 0, SCALE_WORDS = QA_SCALE_BYTES_ONE_F16 / 4;
#else
const uint G = QA_F16_GROUP_BLOCKS, HEADER_WORDS = 0, SCALE_WORDS = QA_SCALE_BYTES_TWO_F16 / 4;
#endif
const uint QUANT_WORDS = BITS * QA_QUANT_CHUNK_BYTES / 4;  // 16 lanes x 32 weights x BITS bits / 32
const uint GROUP_WORDS = HEADER_WORDS + G * (SCALE_WORDS + QUANT_WORDS);

float f16_at(uint word_base, uint lane) { return unpackHalf2x16(w[word_base + lane / 2])[lane % 2]; }
uint u8_at(uint word_base, uint i) { return (w[word_base + i / 4] >> (8 * (i % 4))) & 255u; }
float i8_at(uint word_base, uint i) { return float(int(u8_at(word_base, i) << 24) >> 24); }

// The scale and bias of each half of block j of the group at word grp (its
// scales at word sc) for one lane: weight k = d[k / 16] * q[k] + m[k / 16].
void qa_scales(uint grp, uint sc, uint lane, out vec2 d, out vec2 m) {
#if SCALES == QA_SCALES_F16_SYM
  const float s = f16_at(sc, lane);
  d = vec2(s);
  m = vec2(BITS == 8 ? 0.0 : -8.0 * s);
#elif SCALES == QA_SCALES_F16_AFFINE
  d = vec2(f16_at(sc, lane));
  m = vec2(f16_at(sc + 8, lane));
#elif SCALES == QA_SCALES_F16_ZERO
  const float s = f16_at(sc, lane);
  d = vec2(s);
  m = vec2(-s * f16_at(sc + 8, lane));
#elif SCALES == QA_SCALES_KQUANT
  d = vec2(f16_at(grp, lane) * float(u8_at(sc, lane)));
  m = vec2(-f16_at(grp + 8, lane) * float(u8_at(sc, 16 + lane)));
#else
  const float s = f16_at(grp, lane);
  d = vec2(s * i8_at(sc, lane), s * i8_at(sc, 16 + lane));
  m = -32.0 * d;
#endif
}

// Block b (32 weights) of one lane as 8 words of 4 unsigned bytes, weights
// 4c .. 4c + 3 in word c, each weight k = d[k / 16] * u[k] + m[k / 16] (8
// bits: u = q + 128, the bias taking the offset), for integer dot products.
void qa_block_packed(uint tile_base, uint b, uint lane, out uint u[8], out vec2 d, out vec2 m) {
  const uint grp = tile_base + (b / G) * GROUP_WORDS, j = b % G;
  const uint sc = grp + HEADER_WORDS + j * SCALE_WORDS, qb = grp + HEADER_WORDS + G * SCALE_WORDS + j * QUANT_WORDS;
  qa_scales(grp, sc, lane, d, m);
#if BITS == 8
  for (uint c = 0; c < 8; ++c) u[c] = w[qb + c * 16 + lane];
  m -= 128.0 * d;
#else
  for (uint c = 0; c < 4; ++c) {  // weights 4c + k in the low nibbles of word c, 16 + 4c + k in the high ones
    const uint word = w[qb + c * 16 + lane];
    u[c] = word & 0x0F0F0F0Fu;
    u[4 + c] = (word >> 4) & 0x0F0F0F0Fu;
  }
#if BITS == 5
  {  // bit 4: bit c of byte k is weight 4c + k's, bit 4 + c weight 16 + 4c + k's
    const uint word = w[qb + 4 * 16 + lane];
    for (uint c = 0; c < 4; ++c) {
      u[c] |= ((word >> c) & 0x01010101u) << 4;
      u[4 + c] |= ((word >> (4 + c)) & 0x01010101u) << 4;
    }
  }
#elif BITS == 6
  {  // bits 4, 5: bits 2c, 2c + 1 of byte k, weight 4c + k's in word 4, 16 + 4c + k's in word 5
    const uint wl = w[qb + 4 * 16 + lane], wh = w[qb + 5 * 16 + lane];
    for (uint c = 0; c < 4; ++c) {
      u[c] |= ((wl >> (2 * c)) & 0x03030303u) << 4;
      u[4 + c] |= ((wh >> (2 * c)) & 0x03030303u) << 4;
    }
  }
#endif
#endif
}

// Block b (32 weights) of one lane of the tile whose groups start at word
// tile_base: its quants q[0..31], and the scale and bias of each half
// (weight k = d[k / 16] * q[k] + m[k / 16]).
void qa_block(uint tile_base, uint b, uint lane, out float q[32], out vec2 d, out vec2 m) {
  const uint grp = tile_base + (b / G) * GROUP_WORDS, j = b % G;
  const uint sc = grp + HEADER_WORDS + j * SCALE_WORDS, qb = grp + HEADER_WORDS + G * SCALE_WORDS + j * QUANT_WORDS;
#if BITS == 8
  for (uint c = 0; c < 8; ++c) {
    const uint u = w[qb + c * 16 + lane];
    for (uint k = 0; k < 4; ++k) q[4 * c + k] = float(int((u >> (8 * k)) & 255u) - 128);
  }
#else
  uint qi[32];
  for (uint c = 0; c < 4; ++c) {
    const uint u = w[qb + c * 16 + lane];
    for (uint k = 0; k < 4; ++k) {
      qi[4 * c + k] = (u >> (8 * k)) & 15u;
      qi[16 + 4 * c + k] = (u >> (8 * k + 4)) & 15u;
    }
  }
#if BITS == 5
  {  // bit 4 of each quant
    const uint u = w[qb + 4 * 16 + lane];
    for (uint k = 0; k < 4; ++k) {
      const uint hb = (u >> (8 * k)) & 255u;
      for (uint c = 0; c < 4; ++c) {
        qi[4 * c + k] |= ((hb >> c) & 1u) << 4;
        qi[16 + 4 * c + k] |= ((hb >> (4 + c)) & 1u) << 4;
      }
    }
  }
#elif BITS == 6
  {  // bits 4, 5 of each quant
    const uint ul = w[qb + 4 * 16 + lane], uh = w[qb + 5 * 16 + lane];
    for (uint k = 0; k < 4; ++k)
      for (uint c = 0; c < 4; ++c) {
        qi[4 * c + k] |= ((ul >> (8 * k + 2 * c)) & 3u) << 4;
        qi[16 + 4 * c + k] |= ((uh >> (8 * k + 2 * c)) & 3u) << 4;
      }
  }
#endif
  for (uint k = 0; k < 32; ++k) q[k] = float(qi[k]);
#endif
  qa_scales(grp, sc, lane, d, m);
}

// Words from the first tile of the buffer to tile `tile`.
uint qa_tile_base(uint tile, uint cols) { return tile * ((cols / 32 + G - 1) / G) * GROUP_WORDS; }
