// SPDX-License-Identifier: MIT
// Rotates the first rope_dim dims of each head of x [n][n_head * head_dim]
// in place by each token's angles, given as cos/sin tables [n][rope_dim / 2]
// made on the host: GPUs' sin and cos are only specified to 2^-11 within
// [-pi, pi], and positions reach tens of thousands of radians. One
// invocation per (token, head, pair). style 0: pairs (2i, 2i + 1); 1 (NeoX): (i, i + rope_dim / 2).
#version 450

layout(local_size_x = 64) in;

layout(binding = 0) buffer X { float x[]; };
layout(binding = 1) readonly buffer CosSin { float cs[]; };  // [n][half] cos, then [n][half] sin

layout(push_constant) uniform Params {
  uint n, n_head, head_dim, rope_dim, style, x_offset;
} p;

void main() {
  const uint half_dim = p.rope_dim / 2;
  const uint i = gl_GlobalInvocationID.x;  // pair
  const uint h = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
  if (i >= half_dim) return;
  const uint base = p.x_offset + (t * p.n_head + h) * p.head_dim;
  const uint a = p.style == 0 ? 2 * i : i, b = p.style == 0 ? 2 * i + 1 : i + half_dim;
  const float c = cs[t * half_dim + i], s = cs[p.n * half_dim + t * half_dim + i];
  const float x0 = x[base + a], x1 = x[base + b];
  x[base + a] = x0 * c - x1 * s;
  x[base + b] = x0 * s + x1 * c;
}
