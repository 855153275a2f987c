// SPDX-License-Identifier: MIT
// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w, one workgroup per row; the sum
// of squares by group_reduce.glsl (SUBGROUP: with subgroup operations). y may be x.
#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

const uint WG = 256, RED_N = 1;
layout(local_size_x = WG) in;

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer W { float w[]; };
layout(binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform Params {
  uint d, x_offset, y_offset;
  float eps;
} p;

#include "group_reduce.glsl"

void main() {
  const uint lane = gl_LocalInvocationID.x, row = gl_WorkGroupID.x;
  const uint xr = p.x_offset + row * p.d, yr = p.y_offset + row * p.d;
  float s = 0.0;
  for (uint i = lane; i < p.d; i += WG) s += x[xr + i] * x[xr + i];
  float sum[RED_N] = float[RED_N](s);
  group_reduce(sum, false);
  const float inv = 1.0 / sqrt(sum[0] / float(p.d) + p.eps);
  for (uint i = lane; i < p.d; i += WG) y[yr + i] = x[xr + i] * inv * w[i];
}
