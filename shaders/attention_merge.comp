// SPDX-License-Identifier: MIT
// Combines attention.comp's split-K partials of each (token, head): with
// m = max m_s and w_s = e^(m_s - m), o = sum w_s o_s / sum w_s l_s. One
// workgroup per (head, token); invocations over the head's dimensions.
#version 450

layout(local_size_x = 64) in;

layout(binding = 0) readonly buffer Part { float part[]; };  // [n_tok][n_head][splits][2 + head_dim]
layout(binding = 1) writeonly buffer O { float o[]; };

layout(push_constant) uniform Params { uint n_head, head_dim, splits, ldo, o_offset; } p;

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, hd = p.head_dim;
  const uint base = (t * p.n_head + h) * p.splits * (2 + hd);
  float m = -1.0 / 0.0;
  for (uint s = 0; s < p.splits; ++s) m = max(m, part[base + s * (2 + hd)]);
  float l = 0.0;
  for (uint s = 0; s < p.splits; ++s) {
    const float ls = part[base + s * (2 + hd) + 1];
    if (ls > 0.0) l += ls * exp(part[base + s * (2 + hd)] - m);
  }
  for (uint d = gl_LocalInvocationID.x; d < hd; d += 64) {
    float acc = 0.0;
    for (uint s = 0; s < p.splits; ++s) {
      const uint at = base + s * (2 + hd);
      if (part[at + 1] > 0.0) acc += part[at + 2 + d] * exp(part[at] - m);
    }
    o[p.o_offset + t * p.ldo + h * hd + d] = acc / l;
  }
}
