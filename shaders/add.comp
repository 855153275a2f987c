// SPDX-License-Identifier: MIT
// y[i] = a[i] + b[i % b_len] for i < n: residual adds (b_len = n) and a bias
// added to every row (b_len = the row's width); y may be a. 2-D grid, as swiglu.comp.
#version 450

layout(local_size_x = 256) in;

layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform Params { uint n, b_len; } p;

void main() {
  const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  y[i] = a[i] + b[i % p.b_len];
}
