// SPDX-License-Identifier: MIT
// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w, one workgroup per row; the sum
// of squares reduced in shared memory. y may be x.
#version 450

layout(local_size_x = 256) in;

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer W { float w[]; };
layout(binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform Params {
  uint d, x_offset, y_offset;
  float eps;
} p;

shared float partial[256];

void main() {
  const uint lane = gl_LocalInvocationID.x, row = gl_WorkGroupID.x;
  const uint xr = p.x_offset + row * p.d, yr = p.y_offset + row * p.d;
  float s = 0.0;
  for (uint i = lane; i < p.d; i += 256) s += x[xr + i] * x[xr + i];
  partial[lane] = s;
  barrier();
  for (uint k = 128; k > 0; k >>= 1) {
    if (lane < k) partial[lane] += partial[lane + k];
    barrier();
  }
  const float inv = 1.0 / sqrt(partial[0] / float(p.d) + p.eps);
  for (uint i = lane; i < p.d; i += 256) y[yr + i] = x[xr + i] * inv * w[i];
}
