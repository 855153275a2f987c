// SPDX-License-Identifier: MIT
// matmul_tiled.comp for qa weights with integer dot products (devices with
// VK_KHR_shader_integer_dot_product): 64 rows x 32 tokens per workgroup; per
// block of 32 k, the rows' weights are staged as unsigned bytes (4 to a
// word: qa_block_packed) with their per-16 scale d and bias m, and the
// tokens' 32 inputs are quantized to int8 with one scale (max|x| / 127,
// rounded to nearest even, as the CPU quantizes activations) and the sums of
// each half. Then for a row's weights w = d u + m and a token's x ~ s q:
//   sum_k w x = s (d_lo sum_lo(u q) + d_hi sum_hi(u q)) + m_lo s sum_lo(q) + m_hi s sum_hi(q)
// with the 16-element sums from 4 dot products of packed bytes (OpSUDot)
// each. Variants (defines): BITS, SCALES (qa_weights.glsl); GROUPED.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_spirv_intrinsics : require

// OpSUDotKHR: the dot product of 4 signed bytes (a) and 4 unsigned bytes (b), packed in words.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4452)
int dot_su(uint a, uint b, spirv_literal int packed_4x8);

layout(local_size_x = 128) in;
const uint TM = 64, TN = 32, BK = 32;

layout(binding = 0) readonly buffer Weights { uint w[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

#include "matmul_params.glsl"
const uint UNIT_ROWS = 16;
#include "qa_weights.glsl"

shared uvec4 wu[BK / 4][TM / 4];  // [word][4 rows]: the block's weights, 4 bytes a word
shared vec4 wd[2][TM / 4], wm[2][TM / 4];  // [half][4 rows]: scale and bias of each half
shared uvec4 xq[BK / 4][TN / 4];  // [word][4 tokens]: the block's inputs, 4 int8 a word
shared vec4 xs[TN / 4];           // [4 tokens]: their scale
shared vec4 xsum[2][TN / 4];      // [half][4 tokens]: scale x the sum of the half's int8

// Block b of row r (of the matrix); zeros where the buffer does not hold the row.
void stage_weights(uint r, uint b) {
  uint u[8];
  vec2 d = vec2(0.0), m = vec2(0.0);
  uint at;
  if (unit_in_buffer(r / UNIT_ROWS, at)) {
    qa_block_packed(qa_tile_base(at, p.cols), b, r % 16, u, d, m);
  } else {
    for (uint c = 0; c < 8; ++c) u[c] = 0u;
  }
  const uint wr = r % TM;
  for (uint c = 0; c < 8; ++c) wu[c][wr / 4][wr % 4] = u[c];
  for (uint h = 0; h < 2; ++h) {
    wd[h][wr / 4][wr % 4] = d[h];
    wm[h][wr / 4][wr % 4] = m[h];
  }
}

// Block b of token t0 + t's inputs, quantized; zeros past the tokens or the row.
void stage_inputs(uint t, uint b, uint t0, uint n_tok) {
  const uint tok = t0 + t;
  const uint row = tok < n_tok ? p.x_offset + x_row(tok) * p.ldx : 0;
  float v[BK];
  float amax = 0.0;
  for (uint k = 0; k < BK; ++k) {
    const uint col = b * BK + k;
    v[k] = tok < n_tok && col < p.cols ? x[row + col] : 0.0;
    amax = max(amax, abs(v[k]));
  }
  float inv = amax > 0.0 ? 127.0 / amax : 0.0;
  if (isinf(inv)) inv = 0.0;  // a block of denormals: zeros
  int sum[2] = int[2](0, 0);
  for (uint c = 0; c < 8; ++c) {
    uint word = 0u;
    for (uint k = 0; k < 4; ++k) {
      const int q = int(clamp(roundEven(v[4 * c + k] * inv), -127.0, 127.0));
      sum[c / 4] += q;
      word |= (uint(q) & 255u) << (8 * k);
    }
    xq[c][t / 4][t % 4] = word;
  }
  const float s = amax / 127.0;
  xs[t / 4][t % 4] = s;
  xsum[0][t / 4][t % 4] = s * float(sum[0]);
  xsum[1][t / 4][t % 4] = s * float(sum[1]);
}

void main() {
  const uint i = gl_LocalInvocationIndex, r0 = gl_WorkGroupID.x * TM, t0 = gl_WorkGroupID.y * TN, n_tok = tokens();
  if (t0 >= n_tok) return;  // the whole workgroup
  const uint ri = i % (TM / 4), ti = i / (TM / 4);  // this invocation's 4 rows and 4 tokens
  vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));  // [token] of rows
  const uint nb = (p.cols + BK - 1) / BK;
  for (uint b = 0; b < nb; ++b) {
    if (i < TM)
      stage_weights(r0 + i, b);
    else if (i < TM + TN)
      stage_inputs(i - TM, b, t0, n_tok);
    barrier();
    const vec4 d_lo = wd[0][ri], d_hi = wd[1][ri], m_lo = wm[0][ri], m_hi = wm[1][ri];
    const vec4 s = xs[ti], sum_lo = xsum[0][ti], sum_hi = xsum[1][ti];
    for (uint t = 0; t < 4; ++t) {
      ivec4 lo = ivec4(0), hi = ivec4(0);  // [row]: the halves' sums of u q
      for (uint c = 0; c < 4; ++c) {
        const uint q_lo = xq[c][ti][t], q_hi = xq[4 + c][ti][t];
        const uvec4 u_lo = wu[c][ri], u_hi = wu[4 + c][ri];
        for (uint j = 0; j < 4; ++j) {
          lo[j] += dot_su(q_lo, u_lo[j], 0);
          hi[j] += dot_su(q_hi, u_hi[j], 0);
        }
      }
      acc[t] += s[t] * (d_lo * vec4(lo) + d_hi * vec4(hi)) + m_lo * sum_lo[t] + m_hi * sum_hi[t];
    }
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
