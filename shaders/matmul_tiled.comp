// SPDX-License-Identifier: MIT
// y[t][r] = sum_k W[r][k] x[t][k] for many tokens (prefill, expert groups):
// a workgroup computes 64 rows x 32 tokens. Per block of 32 k, half of it
// decodes its row's 32 weights into shared memory while the other half
// stages the tokens' 32 inputs, then each invocation accumulates 4 rows x
// 4 tokens from there. Every weight is read from memory once per 32 tokens
// (matmul_qa.comp reads it once per 4).
// Variants (defines): qa weights (BITS, SCALES: qa_weights.glsl), or DENSE
// with FORMAT 0 f32, 1 f16, 2 bf16 (row-major, rows of row_words words);
// GROUPED: MoE experts (matmul_params.glsl); F16: f16 arithmetic (devices
// with shaderFloat16, where it runs at twice f32's rate on many): weights and
// inputs staged as f16, each token's block of inputs divided by its max|x|
// (so no sum can overflow), products summed in f16 over 8 k and then into
// the f32 accumulators, times that max.
#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef F16
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define SCALAR float16_t
#define VEC4 f16vec4
#else
#define SCALAR float
#define VEC4 vec4
#endif

layout(local_size_x = 128) in;
const uint TM = 64, TN = 32, BK = 32;

layout(binding = 0) readonly buffer Weights { uint w[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

#include "matmul_params.glsl"

#ifdef DENSE
const uint UNIT_ROWS = 1;
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
const uint UNIT_ROWS = 16;
#include "qa_weights.glsl"
#endif

shared VEC4 ws[BK][TM / 4];  // [k][4 rows]: the block's weights
shared VEC4 xs[BK][TN / 4];  // [k][4 tokens]: the block's inputs (F16: over their max|x|)
#ifdef F16
shared vec4 xmax[TN / 4];    // [4 tokens]: max|x| of the block's inputs
#endif

// The 32 weights of block b of row r (of the matrix), decoded; 0 where the
// buffer does not hold the row.
void stage_weights(uint r, uint b) {
  float v[BK];
  uint at;
  const bool held = unit_in_buffer(r / UNIT_ROWS, at);
#ifdef DENSE
  const uint base = at * p.row_words;
  for (uint k = 0; k < BK; ++k) v[k] = held && b * BK + k < p.cols ? dense_at(base, b * BK + k) : 0.0;
#else
  if (held) {
    float q[32];
    vec2 d, m;
    qa_block(qa_tile_base(at, p.cols), b, r % 16, q, d, m);
    for (uint k = 0; k < BK; ++k) v[k] = d[k / 16] * q[k] + m[k / 16];
  } else {
    for (uint k = 0; k < BK; ++k) v[k] = 0.0;
  }
#endif
  const uint wr = r % TM;
  for (uint k = 0; k < BK; ++k) ws[k][wr / 4][wr % 4] = SCALAR(v[k]);
}

#ifdef F16
// Block b's inputs of token t0 + t over their max|x|; 0 past the tokens or the row.
void stage_inputs_f16(uint t, uint b, uint t0, uint n_tok) {
  const uint tok = t0 + t;
  const uint row = tok < n_tok ? p.x_offset + x_row(tok) * p.ldx : 0;
  float v[BK];
  float amax = 0.0;
  for (uint k = 0; k < BK; ++k) {
    const uint col = b * BK + k;
    v[k] = tok < n_tok && col < p.cols ? x[row + col] : 0.0;
    amax = max(amax, abs(v[k]));
  }
  float inv = amax > 0.0 ? 1.0 / amax : 0.0;
  if (isinf(inv)) inv = 0.0;  // a block of denormals: zeros
  for (uint k = 0; k < BK; ++k) xs[k][t / 4][t % 4] = float16_t(v[k] * inv);
  xmax[t / 4][t % 4] = amax;
}
#else
// Half h of block b's inputs of token t0 + t; 0 past the tokens or the row.
void stage_inputs(uint t, uint h, uint b, uint t0, uint n_tok) {
  const uint tok = t0 + t, k0 = h * (BK / 2);
  const uint row = tok < n_tok ? p.x_offset + x_row(tok) * p.ldx : 0;
  for (uint k = k0; k < k0 + BK / 2; ++k) {
    const uint col = b * BK + k;
    xs[k][t / 4][t % 4] = tok < n_tok && col < p.cols ? x[row + col] : 0.0;
  }
}
#endif

void main() {
  const uint i = gl_LocalInvocationIndex, r0 = gl_WorkGroupID.x * TM, t0 = gl_WorkGroupID.y * TN, n_tok = tokens();
  if (t0 >= n_tok) return;  // the whole workgroup
  const uint ri = i % (TM / 4), ti = i / (TM / 4);  // this invocation's 4 rows and 4 tokens
  vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));  // [token] of rows
  const uint nb = (p.cols + BK - 1) / BK;
  for (uint b = 0; b < nb; ++b) {
    if (i < TM)
      stage_weights(r0 + i, b);
#ifdef F16
    else if (i < TM + TN)
      stage_inputs_f16(i - TM, b, t0, n_tok);
#else
    else
      stage_inputs((i - TM) / 2, (i - TM) % 2, b, t0, n_tok);
#endif
    barrier();
#ifdef F16
    const vec4 m = xmax[ti];
    for (uint k0 = 0; k0 < BK; k0 += 8) {
      f16vec4 s[4] = f16vec4[4](f16vec4(0.0hf), f16vec4(0.0hf), f16vec4(0.0hf), f16vec4(0.0hf));
      for (uint k = k0; k < k0 + 8; ++k) {
        const f16vec4 wv = ws[k][ri], xv = xs[k][ti];
        s[0] += wv * xv.x;
        s[1] += wv * xv.y;
        s[2] += wv * xv.z;
        s[3] += wv * xv.w;
      }
      for (uint t = 0; t < 4; ++t) acc[t] += vec4(s[t]) * m[t];
    }
#else
    for (uint k = 0; k < BK; ++k) {
      const vec4 wv = ws[k][ri], xv = xs[k][ti];
      acc[0] += wv * xv.x;
      acc[1] += wv * xv.y;
      acc[2] += wv * xv.z;
      acc[3] += wv * xv.w;
    }
#endif
    barrier();
  }
  for (uint t = 0; t < 4; ++t) {
    const uint tok = t0 + ti * 4 + t;
    if (tok >= n_tok) break;
    for (uint j = 0; j < 4; ++j) {
      const uint r = r0 + ri * 4 + j;
      uint at;
      if (r < p.rows && unit_in_buffer(r / UNIT_ROWS, at)) y[p.y_offset + y_row(tok) * p.ldy + r] = acc[t][j];
    }
  }
}
