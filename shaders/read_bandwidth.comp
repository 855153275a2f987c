// SPDX-License-Identifier: MIT
// The device's read bandwidth (bench/gpu_bench.cpp's roofline): a grid of
// invocations sums a large buffer, vec4 by vec4, in coalesced strides, and
// writes one float each (so nothing is optimized away).
#version 450

layout(local_size_x = 256) in;

layout(binding = 0) readonly buffer Src { vec4 src[]; };
layout(binding = 1) writeonly buffer Dst { float dst[]; };

layout(push_constant) uniform Params { uint n_vec4; } p;

void main() {
  const uint stride = gl_NumWorkGroups.x * 256;
  vec4 s = vec4(0.0);
  for (uint i = gl_GlobalInvocationID.x; i < p.n_vec4; i += stride) s += src[i];
  dst[gl_GlobalInvocationID.x] = s.x + s.y + s.z + s.w;
}
