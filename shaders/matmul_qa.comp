// SPDX-License-Identifier: MIT
// y[t][r] = sum_k W[r][k] x[t][k] for qa weights, few tokens (decode): the
// weights are read as they lie (qa_weights.glsl), each once per TOK tokens.
// Workgroup: 16 rows (one tile) x SLICES slices of the blocks, reduced in
// shared memory, for TOK tokens. Many tokens go to matmul_tiled.comp.
#version 450
#extension GL_GOOGLE_include_directive : require

// SLICES is a constant, not a specialization constant: shared arrays sized by
// one gave wrong results on lavapipe (see attention.comp).
const uint SLICES = 16;
layout(local_size_x = 16, local_size_y = SLICES, local_size_z = 1) in;
const uint TOK = 4;

layout(binding = 0) readonly buffer Weights { uint w[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

#include "matmul_params.glsl"
#include "qa_weights.glsl"

shared float partial[SLICES][TOK][16];

void main() {
  const uint lane = gl_LocalInvocationID.x, slice = gl_LocalInvocationID.y;
  const uint tile = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * TOK, n_tok = tokens();
  uint at;
  if (!unit_in_buffer(tile, at) || t0 >= n_tok) return;  // the whole workgroup
  const uint nb = p.cols / 32, tile_base = qa_tile_base(at, p.cols);
  float acc[TOK];
  for (uint t = 0; t < TOK; ++t) acc[t] = 0.0;

  for (uint b = slice; b < nb; b += SLICES) {
    float q[32];
    vec2 d, m;
    qa_block(tile_base, b, lane, q, d, m);
    for (uint t = 0; t < TOK; ++t) {
      if (t0 + t >= n_tok) break;
      const uint xb = p.x_offset + x_row(t0 + t) * p.ldx + b * 32;
      float qx_lo = 0.0, qx_hi = 0.0, sx_lo = 0.0, sx_hi = 0.0;
      for (uint k = 0; k < 16; ++k) {
        const float a = x[xb + k], c = x[xb + 16 + k];
        qx_lo += q[k] * a;
        sx_lo += a;
        qx_hi += q[16 + k] * c;
        sx_hi += c;
      }
      acc[t] += d.x * qx_lo + m.x * sx_lo + d.y * qx_hi + m.y * sx_hi;
    }
  }
  for (uint t = 0; t < TOK; ++t) partial[slice][t][lane] = acc[t];
  barrier();
  if (slice == 0) {
    const uint r = tile * 16 + lane;
    for (uint t = 0; t < TOK; ++t) {
      if (t0 + t >= n_tok || r >= p.rows) break;
      float s = 0.0;
      for (uint i = 0; i < SLICES; ++i) s += partial[i][t][lane];
      y[p.y_offset + y_row(t0 + t) * p.ldy + r] = s;
    }
  }
}
