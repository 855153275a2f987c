// SPDX-License-Identifier: MIT
// The MoE layer's output: y[t] = sum over token t's k slots of the slot's
// weight x its expert's output row (ye, in the route's sorted order:
// moe_route.comp). One workgroup per token (2-D grid), striding over d.
#version 450

layout(local_size_x = 256) in;

layout(binding = 0) readonly buffer ExpertRows { float ye[]; };  // [n_tok * k][d]
layout(binding = 1) readonly buffer Route { uint route[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Params { uint n_tok, d, n_expert, k, y_offset, ldy; } p;

void main() {
  const uint t = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (t >= p.n_tok) return;
  const uint T = p.n_tok * p.k, SLOT_ROW = 2 * p.n_expert + 1 + T, WEIGHTS = SLOT_ROW + 2 * T;
  for (uint j = gl_LocalInvocationID.x; j < p.d; j += 256) {
    float s = 0.0;
    for (uint i = 0; i < p.k; ++i) {
      const uint slot = t * p.k + i;
      s += uintBitsToFloat(route[WEIGHTS + slot]) * ye[route[SLOT_ROW + slot] * p.d + j];
    }
    y[p.y_offset + t * p.ldy + j] = s;
  }
}
