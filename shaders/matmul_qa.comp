// SPDX-License-Identifier: MIT
// y[t][r] = sum_k W[r][k] x[t][k] for qa weights in the CPU's tiled layout
// (quant/qa_layout.h), read as they are: a tile interleaves 16 rows in 4-byte
// lanes, so the 16 invocations of a row of the workgroup read 64 contiguous
// bytes per step. Workgroup: 16 rows (one tile) x SLICES slices of the
// blocks, reduced in shared memory; z: TOK tokens per workgroup.
// Variants (defines): BITS 4, 5, 6 or 8; SCALES 0 sym (d), 1 affine (d, m),
// 2 zero (d, z), 3 kquant (super-block d, dmin; u8 sc, m), 4 q6k (super-block
// d; i8 scales per 16 weights).
#version 450

layout(local_size_x = 16, local_size_y_id = 0, local_size_z = 1) in;
layout(constant_id = 0) const uint SLICES = 16;
const uint TOK = 4;

layout(binding = 0) readonly buffer Weights { uint w[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Params {
  uint rows;        // rows of the matrix
  uint cols;        // a multiple of 32 (256 for the K-quants)
  uint n_tok;
  uint tile0;       // first tile of the matrix (stacked experts)
  uint x_offset;    // floats
  uint ldx;
  uint y_offset;
  uint ldy;
} p;

// Words of a group: a header, then G blocks' scales, then G blocks' quants.
#if SCALES == 3
const uint G = 8, HEADER_WORDS = 16, SCALE_WORDS = 8;  // d[16], dmin[16] f16 | sc[16], m[16] u8
#elif SCALES == 4
const uint G = 8, HEADER_WORDS = 16, SCALE_WORDS = 8;  // d[16] f16, 32 bytes unused | sc_lo[16], sc_hi[16] i8
#elif SCALES == 0
const uint G = 2, HEADER_WORDS = 0, SCALE_WORDS = 8;   // d[16] f16
#else
const uint G = 2, HEADER_WORDS = 0, SCALE_WORDS = 16;  // d[16], m[16] or z[16] f16
#endif
const uint QUANT_WORDS = BITS * 16;  // 16 lanes x 32 weights x BITS bits / 32
const uint GROUP_WORDS = HEADER_WORDS + G * (SCALE_WORDS + QUANT_WORDS);

shared float partial[SLICES][TOK][16];

float f16_at(uint word_base, uint lane) { return unpackHalf2x16(w[word_base + lane / 2])[lane % 2]; }
uint u8_at(uint word_base, uint i) { return (w[word_base + i / 4] >> (8 * (i % 4))) & 255u; }
float i8_at(uint word_base, uint i) { return float(int(u8_at(word_base, i) << 24) >> 24); }

void main() {
  const uint lane = gl_LocalInvocationID.x, slice = gl_LocalInvocationID.y;
  const uint tile = gl_WorkGroupID.x, t0 = gl_WorkGroupID.z * TOK;
  const uint nb = p.cols / 32, groups = (nb + G - 1) / G;
  const uint tile_base = (p.tile0 + tile) * groups * GROUP_WORDS;
  float acc[TOK];
  for (uint t = 0; t < TOK; ++t) acc[t] = 0.0;

  for (uint b = slice; b < nb; b += SLICES) {
    const uint grp = tile_base + (b / G) * GROUP_WORDS, j = b % G;
    const uint sc = grp + HEADER_WORDS + j * SCALE_WORDS, qb = grp + HEADER_WORDS + G * SCALE_WORDS + j * QUANT_WORDS;
    // The block's quants of this lane: q[k] for k = 0..31.
    float q[32];
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
    for (uint plane = 0; plane < BITS - 4; ++plane) {  // bit 4 + plane of each quant (5 and 6 bits)
      const uint u = w[qb + (4 + plane) * 16 + lane];
      for (uint k = 0; k < 4; ++k) {
        const uint hb = (u >> (8 * k)) & 255u;
        for (uint c = 0; c < 4; ++c) {
          qi[4 * c + k] |= ((hb >> c) & 1u) << (4 + plane);
          qi[16 + 4 * c + k] |= ((hb >> (4 + c)) & 1u) << (4 + plane);
        }
      }
    }
    for (uint k = 0; k < 32; ++k) q[k] = float(qi[k]);
#endif
    // The block's scale (and bias, or zero point) for this lane.
#if SCALES == 0
    const float d = f16_at(sc, lane), zero = BITS == 8 ? 0.0 : 8.0;
#elif SCALES == 1
    const float d = f16_at(sc, lane), m = f16_at(sc + 8, lane);
#elif SCALES == 2
    const float d = f16_at(sc, lane), zero = f16_at(sc + 8, lane);
#elif SCALES == 3
    const float d = f16_at(grp, lane) * float(u8_at(sc, lane)), m = -f16_at(grp + 8, lane) * float(u8_at(sc, 16 + lane));
#else
    const float d_lo = f16_at(grp, lane) * i8_at(sc, lane), d_hi = f16_at(grp, lane) * i8_at(sc, 16 + lane);
#endif
    for (uint t = 0; t < TOK; ++t) {
      if (t0 + t >= p.n_tok) break;
      const uint xb = p.x_offset + (t0 + t) * p.ldx + b * 32;
      float qx_lo = 0.0, qx_hi = 0.0, sx_lo = 0.0, sx_hi = 0.0;
      for (uint k = 0; k < 16; ++k) {
        const float a = x[xb + k], c = x[xb + 16 + k];
        qx_lo += q[k] * a;
        sx_lo += a;
        qx_hi += q[16 + k] * c;
        sx_hi += c;
      }
#if SCALES == 4
      acc[t] += d_lo * (qx_lo - 32.0 * sx_lo) + d_hi * (qx_hi - 32.0 * sx_hi);
#elif SCALES == 1 || SCALES == 3
      acc[t] += d * (qx_lo + qx_hi) + m * (sx_lo + sx_hi);
#else
      acc[t] += d * ((qx_lo + qx_hi) - zero * (sx_lo + sx_hi));
#endif
    }
  }
  for (uint t = 0; t < TOK; ++t) partial[slice][t][lane] = acc[t];
  barrier();
  if (slice == 0) {
    const uint r = tile * 16 + lane;
    for (uint t = 0; t < TOK; ++t) {
      if (t0 + t >= p.n_tok || r >= p.rows) break;
      float s = 0.0;
      for (uint i = 0; i < SLICES; ++i) s += partial[i][t][lane];
      y[p.y_offset + (t0 + t) * p.ldy + r] = s;
    }
  }
}
