// SPDX-License-Identifier: MIT
// Stores the batch's keys and values (f32 rows [n][kv_dim]) into the device's
// copy of the KV cache, in the CPU cache's block layout (kv_cache.h), as f16
// rounded to nearest even exactly as core/util/half.h's f32_to_f16 does: the
// device's cache and the CPU's hold the same bits. One invocation per
// (element, token). Offsets in bytes. WORDS16 (devices without 16-bit
// storage): the caches as 32-bit words, each element written into its half
// with atomics (a word's other half is another position's or dimension's).
#version 450
#extension GL_GOOGLE_include_directive : require
#ifndef WORDS16
#extension GL_EXT_shader_16bit_storage : require
#endif

layout(local_size_x = 64) in;

layout(binding = 0) readonly buffer K { float k[]; };
layout(binding = 1) readonly buffer V { float v[]; };
layout(binding = 2) readonly buffer Pos { int pos[]; };
layout(binding = 3) readonly buffer Base { uint base[]; };  // per token: the block of its position, in bytes
#ifdef WORDS16
layout(binding = 4) buffer KC { uint kc[]; };
layout(binding = 5) buffer VC { uint vc[]; };
#define STORE(cache, i, h)                                     \
  {                                                            \
    const uint at_ = (i) / 2, shift_ = ((i) % 2) * 16;         \
    atomicAnd(cache[at_], ~(0xFFFFu << shift_));               \
    atomicOr(cache[at_], (h) << shift_);                       \
  }
#else
layout(binding = 4) writeonly buffer KC { uint16_t kc[]; };
layout(binding = 5) writeonly buffer VC { uint16_t vc[]; };
#define STORE(cache, i, h) cache[i] = uint16_t(h)
#endif

layout(push_constant) uniform Params { uint kv_dim, head_dim; } p;

const uint BLOCK = 64;

#include "half.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
  if (i >= p.kv_dim) return;
  const uint ps = uint(pos[t]), blk = base[t] / 2, j = ps % BLOCK;
  STORE(kc, blk + i * BLOCK + j, f32_to_f16(k[t * p.kv_dim + i]));
  STORE(vc, blk + ((i / p.head_dim) * BLOCK + j) * p.head_dim + i % p.head_dim, f32_to_f16(v[t * p.kv_dim + i]));
}
