// SPDX-License-Identifier: MIT
// y[t][r] = sum_k W[r][k] x[t][k] for dense row-major weights (f32, f16 or
// bf16, read as 32-bit words), few tokens (matmul_params.glsl, plain only).
// One workgroup per row and TOK tokens; its 64 invocations stride over k
// (consecutive words: contiguous reads) and reduce in shared memory.
// Variants (defines): FORMAT 0 f32, 1 f16, 2 bf16.
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;
const uint TOK = 4;

layout(binding = 0) readonly buffer Weights { uint w[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

#include "matmul_params.glsl"

shared float partial[TOK][64];

// Element k of the row starting at word base.
float weight(uint base, uint k) {
#if FORMAT == 0
  return uintBitsToFloat(w[base + k]);
#elif FORMAT == 1
  return unpackHalf2x16(w[base + k / 2])[k % 2];
#else
  return uintBitsToFloat(k % 2 == 0 ? w[base + k / 2] << 16 : w[base + k / 2] & 0xFFFF0000u);
#endif
}

void main() {
  const uint lane = gl_LocalInvocationID.x, r = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * TOK;
  const uint base = (p.first + r) * p.row_words;
  float acc[TOK];
  for (uint t = 0; t < TOK; ++t) acc[t] = 0.0;
  for (uint k = lane; k < p.cols; k += 64) {
    const float wk = weight(base, k);
    for (uint t = 0; t < TOK; ++t)
      if (t0 + t < p.n_tok) acc[t] += wk * x[p.x_offset + (t0 + t) * p.ldx + k];
  }
  for (uint t = 0; t < TOK; ++t) partial[t][lane] = acc[t];
  barrier();
  for (uint s = 32; s > 0; s >>= 1) {
    if (lane < s)
      for (uint t = 0; t < TOK; ++t) partial[t][lane] += partial[t][lane + s];
    barrier();
  }
  if (lane < TOK && t0 + lane < p.n_tok && r < p.rows) y[p.y_offset + (t0 + lane) * p.ldy + r] = partial[lane][0];
}
