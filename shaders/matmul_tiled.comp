// SPDX-License-Identifier: MIT
// y[t][r] = sum_k W[r][k] x[t][k] for many tokens (prefill, expert groups):
// a workgroup computes 64 rows x 32 tokens. Per block of 32 k, half of it
// decodes its row's 32 weights into shared memory while the other half
// stages the tokens' 32 inputs, then each invocation accumulates 4 rows x
// 4 tokens from there. Every weight is read from memory once per 32 tokens
// (matmul_qa.comp reads it once per 4).
// Variants (defines): qa weights (BITS, SCALES: qa_weights.glsl), or DENSE
// with FORMAT 0 f32, 1 f16, 2 bf16 (row-major, rows of row_words words).
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 128) in;
const uint TM = 64, TN = 32, BK = 32;

layout(binding = 0) readonly buffer Weights { uint w[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Params {
  uint rows;       // rows of the matrix from this dispatch's first
  uint cols;
  uint n_tok;
  uint first;      // the dispatch's first tile (qa) or row (dense) in the buffer
  uint count;      // tiles (qa) or rows (dense) of the dispatch in the buffer
  uint row_words;  // dense: 32-bit words per row
  uint x_offset, ldx, y_offset, ldy;
} p;

#ifdef DENSE
float dense_at(uint base, uint k) {
#if FORMAT == 0
  return uintBitsToFloat(w[base + k]);
#elif FORMAT == 1
  return unpackHalf2x16(w[base + k / 2])[k % 2];
#else
  return uintBitsToFloat(k % 2 == 0 ? w[base + k / 2] << 16 : w[base + k / 2] & 0xFFFF0000u);
#endif
}
#else
#include "qa_weights.glsl"
#endif

// Whether row r (of the dispatch) lies in the buffer's part of the matrix.
bool in_part(uint r) {
#ifdef DENSE
  return r < p.count;
#else
  return r / 16 < p.count;
#endif
}

shared vec4 ws[BK][TM / 4];  // [k][4 rows]: the block's weights
shared vec4 xs[BK][TN / 4];  // [k][4 tokens]: the block's inputs

// The 32 weights of block b of row r (of the dispatch), decoded; 0 past the matrix.
void stage_weights(uint r, uint b) {
  float v[BK];
#ifdef DENSE
  const bool valid = in_part(r);
  const uint base = (p.first + r) * p.row_words;
  for (uint k = 0; k < BK; ++k) v[k] = valid && b * BK + k < p.cols ? dense_at(base, b * BK + k) : 0.0;
#else
  if (in_part(r)) {
    float q[32];
    vec2 d, m;
    qa_block(qa_tile_base(p.first + r / 16, p.cols), b, r % 16, q, d, m);
    for (uint k = 0; k < BK; ++k) v[k] = d[k / 16] * q[k] + m[k / 16];
  } else {
    for (uint k = 0; k < BK; ++k) v[k] = 0.0;
  }
#endif
  const uint wr = r % TM;
  for (uint k = 0; k < BK; ++k) ws[k][wr / 4][wr % 4] = v[k];
}

// Half (h) of block b's inputs of token t (of the workgroup); 0 past the tokens or the row.
void stage_inputs(uint t, uint h, uint b, uint t0) {
  const uint tok = t0 + t, k0 = h * (BK / 2);
  for (uint k = k0; k < k0 + BK / 2; ++k) {
    const uint col = b * BK + k;
    xs[k][t / 4][t % 4] = tok < p.n_tok && col < p.cols ? x[p.x_offset + tok * p.ldx + col] : 0.0;
  }
}

void main() {
  const uint i = gl_LocalInvocationIndex, r0 = gl_WorkGroupID.x * TM, t0 = gl_WorkGroupID.y * TN;
  const uint ri = i % (TM / 4), ti = i / (TM / 4);  // this invocation's 4 rows and 4 tokens
  vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));  // [token] of rows
  const uint nb = (p.cols + BK - 1) / BK;
  for (uint b = 0; b < nb; ++b) {
    if (i < TM)
      stage_weights(r0 + i, b);
    else
      stage_inputs((i - TM) / 2, (i - TM) % 2, b, t0);
    barrier();
    for (uint k = 0; k < BK; ++k) {
      const vec4 wv = ws[k][ri], xv = xs[k][ti];
      acc[0] += wv * xv.x;
      acc[1] += wv * xv.y;
      acc[2] += wv * xv.z;
      acc[3] += wv * xv.w;
    }
    barrier();
  }
  for (uint t = 0; t < 4; ++t) {
    const uint tok = t0 + ti * 4 + t;
    if (tok >= p.n_tok) break;
    for (uint j = 0; j < 4; ++j) {
      const uint r = r0 + ri * 4 + j;
      if (r < p.rows && in_part(r)) y[p.y_offset + tok * p.ldy + r] = acc[t][j];
    }
  }
}
