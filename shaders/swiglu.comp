// SPDX-License-Identifier: MIT
// y[i] = silu(g[i]) * u[i] for i < n: the SwiGLU between an FFN's gate/up and
// down matmuls; y may be g. 2-D grid: a large n needs more than 65535
// workgroups in x.
#version 450

layout(local_size_x = 256) in;

layout(binding = 0) readonly buffer Gate { float g[]; };
layout(binding = 1) readonly buffer Up { float u[]; };
layout(binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform Params { uint n; } p;

void main() {
  const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  const float x = g[i];
  y[i] = x / (1.0 + exp(-x)) * u[i];
}
