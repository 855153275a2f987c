// SPDX-License-Identifier: MIT
// y[t][r] = sum_k W[r][k] x[t][k] for qa weights in the CPU's tiled layout
// (quant/qa_layout.h), read as they are: a tile interleaves 16 rows in 4-byte
// lanes, so the 16 invocations of a row of the workgroup read 64 contiguous
// bytes per step. Workgroup: 16 rows (one tile) x SLICES slices of the
// blocks, reduced in shared memory; z: TOK tokens per workgroup.
// Variants (defines): BITS 4 or 8; SCALES 0 sym (d), 1 affine (d, m), 2 zero (d, z).
#version 450

layout(local_size_x = 16, local_size_y_id = 0, local_size_z = 1) in;
layout(constant_id = 0) const uint SLICES = 16;
const uint TOK = 4;

layout(binding = 0) readonly buffer Weights { uint w[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Params {
  uint rows;        // rows of the matrix
  uint cols;        // a multiple of 32
  uint n_tok;
  uint tile0;       // first tile of the matrix (stacked experts)
  uint x_offset;    // floats
  uint ldx;
  uint y_offset;
  uint ldy;
} p;

#if SCALES == 0
const uint SCALE_WORDS = 8;   // d[16] f16 per block
#else
const uint SCALE_WORDS = 16;  // d[16], m[16] or z[16] f16 per block
#endif
const uint QUANT_WORDS = BITS * 16;          // 16 lanes x 32 weights x BITS bits / 32
const uint GROUP_WORDS = 2 * (SCALE_WORDS + QUANT_WORDS);  // 2 blocks per group

shared float partial[SLICES][TOK][16];

float f16_at(uint word_base, uint lane) {
  return unpackHalf2x16(w[word_base + lane / 2])[lane % 2];
}

void main() {
  const uint lane = gl_LocalInvocationID.x, slice = gl_LocalInvocationID.y;
  const uint tile = gl_WorkGroupID.x, t0 = gl_WorkGroupID.z * TOK;
  const uint nb = p.cols / 32, groups = (nb + 1) / 2;
  const uint tile_base = (p.tile0 + tile) * groups * GROUP_WORDS;
  float acc[TOK];
  for (uint t = 0; t < TOK; ++t) acc[t] = 0.0;

  for (uint b = slice; b < nb; b += SLICES) {
    const uint grp = tile_base + (b / 2) * GROUP_WORDS, j = b % 2;
    const uint sc = grp + j * SCALE_WORDS, qb = grp + 2 * SCALE_WORDS + j * QUANT_WORDS;
    const float d = f16_at(sc, lane);
#if SCALES != 0
    const float m = f16_at(sc + 8, lane);
#endif
    // The block's quants of this lane: w_k for k = 0..31.
    float q[32];
#if BITS == 4
    for (uint c = 0; c < 4; ++c) {
      const uint u = w[qb + c * 16 + lane];
      for (uint k = 0; k < 4; ++k) {
        q[4 * c + k] = float((u >> (8 * k)) & 15u);
        q[16 + 4 * c + k] = float((u >> (8 * k + 4)) & 15u);
      }
    }
#else
    for (uint c = 0; c < 8; ++c) {
      const uint u = w[qb + c * 16 + lane];
      for (uint k = 0; k < 4; ++k) q[4 * c + k] = float(int((u >> (8 * k)) & 255u) - 128);
    }
#endif
    for (uint t = 0; t < TOK; ++t) {
      if (t0 + t >= p.n_tok) break;
      const uint xb = p.x_offset + (t0 + t) * p.ldx + b * 32;
      float qx = 0.0, sx = 0.0;
      for (uint k = 0; k < 32; ++k) {
        const float xv = x[xb + k];
        qx += q[k] * xv;
        sx += xv;
      }
#if SCALES == 0
      acc[t] += d * (BITS == 4 ? qx - 8.0 * sx : qx);
#elif SCALES == 1
      acc[t] += d * qx + m * sx;
#else
      acc[t] += d * (qx - m * sx);
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
