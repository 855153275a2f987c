// SPDX-License-Identifier: MIT
// Rotates rows of heads in place as the q4 KV cache rotates its values'
// heads (kv_rotate.glsl, core/graph/kv_rotation.h): attention's output after
// it summed q4 values. One workgroup per (head, row).
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;

layout(binding = 0) buffer X { float x[]; };

layout(push_constant) uniform Params {
  uint offset, ld, head_dim;  // floats: rows ld apart from offset, heads head_dim apart in a row
  uint rot_block;
  float rot_scale;
} p;

const uint WG = 64, MAX_DIMS = 256;
shared float xs[MAX_DIMS];

#include "kv_rotate.glsl"

void main() {
  const uint at = p.offset + gl_WorkGroupID.y * p.ld + gl_WorkGroupID.x * p.head_dim;
  for (uint d = gl_LocalInvocationID.x; d < p.head_dim; d += WG) xs[d] = x[at + d];
  kv_rotate_shared(p.head_dim, p.rot_block, p.rot_scale);
  for (uint d = gl_LocalInvocationID.x; d < p.head_dim; d += WG) x[at + d] = xs[d];
}
