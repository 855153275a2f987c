// SPDX-License-Identifier: MIT
// Stores the batch's keys and values (f32 rows [n][kv_dim]) into the device's
// q8 copy of the KV cache, in the CPU cache's block layout (kv_cache.h): per
// (KV head, position) int8 values and one f32 scale, rounded as
// quantize_kv_q8 rounds (scale = max|x| / 127, x * (127 / max|x|) to nearest
// even; GLSL's division may be off by an ulp, so a rare element can land one
// step from the CPU's). One workgroup per (KV head, token). Keys are stored
// transposed, so a key's bytes share words with other tokens' keys: they are
// written with atomics; a value's bytes are its own, 4 to a word. Offsets in
// bytes; the caches are read as words. `sides`: bit 0 keys, bit 1 values (a
// k8v4 cache stores only its keys here, its values with kv_store_q4.comp).
// Keys are rotated first where rot_block says (kv_cache.h's kv_keys_rotated:
// kv_rotate.glsl, bit for bit the CPU's rotation).
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;

layout(binding = 0) readonly buffer K { float k[]; };
layout(binding = 1) readonly buffer V { float v[]; };
layout(binding = 2) readonly buffer Pos { int pos[]; };
layout(binding = 3) readonly buffer Base { uint base[]; };  // per token: the block of its position, in bytes
layout(binding = 4) buffer KC { uint kc[]; };
layout(binding = 5) buffer VC { uint vc[]; };

layout(push_constant) uniform Params {
  uint kv_dim, head_dim, sides;
  uint rot_block;   // keys rotated over blocks of this many dimensions; 0: not rotated
  float rot_scale;  // 1 / sqrt(rot_block), as kv_rotate computes it
} p;

const uint BLOCK = 64, WG = 64, RED_N = 1, MAX_DIMS = 256;
shared float xs[MAX_DIMS];  // the key head being stored, rotated
#include "group_reduce.glsl"
#include "kv_rotate.glsl"

// The key head from k[row], rotated, into xs (every invocation calls it).
void load_key(uint row) {
  for (uint d = gl_LocalInvocationID.x; d < p.head_dim; d += WG) xs[d] = k[row + d];
  if (p.rot_block != 0) kv_rotate_shared(p.head_dim, p.rot_block, p.rot_scale);
  barrier();
}

float x_at(bool key, uint i) { return key ? xs[i] : v[i]; }

// max|x| over the head's values (keys: xs from 0, values: v from row), for every invocation.
float head_amax(bool key, uint row) {
  float m[1];
  m[0] = 0.0;
  for (uint d = gl_LocalInvocationID.x; d < p.head_dim; d += WG) m[0] = max(m[0], abs(x_at(key, row + d)));
  group_reduce(m, true);
  return m[0];
}

// 127 / max|x|, or 0 for an all-zero head (and one so small that the quotient overflows), as quantize_kv_q8.
float finite_inverse(float amax) {
  const float inv = amax > 0.0 ? 127.0 / amax : 0.0;
  return isinf(inv) ? 0.0 : inv;
}

uint quantize(float x, float inv) { return uint(int(clamp(roundEven(x * inv), -127.0, 127.0))) & 0xFFu; }

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, j = gl_LocalInvocationID.x, hd = p.head_dim;
  const uint ps = uint(pos[t]), jj = ps % BLOCK, row = t * p.kv_dim + h * hd;
  const uint blk = base[t];  // bytes
  const uint scale_word = (blk + p.kv_dim * BLOCK + (h * BLOCK + jj) * 4) / 4;

  if ((p.sides & 1u) != 0u) {
    load_key(row);
    const float ka = head_amax(true, 0), kinv = finite_inverse(ka);
    for (uint d = j; d < hd; d += WG) {
      const uint byte = blk + (h * hd + d) * BLOCK + jj, shift = (byte % 4) * 8;
      atomicAnd(kc[byte / 4], ~(0xFFu << shift));
      atomicOr(kc[byte / 4], quantize(xs[d], kinv) << shift);
    }
    if (j == 0) kc[scale_word] = floatBitsToUint(ka / 127.0);
  }
  if ((p.sides & 2u) == 0u) return;

  const float va = head_amax(false, row), vinv = finite_inverse(va);
  const uint vrow = (blk + (h * BLOCK + jj) * hd) / 4;  // head_dim is a multiple of 4
  for (uint w = j; w < hd / 4; w += WG) {
    uint word = 0;
    for (uint b = 0; b < 4; ++b) word |= quantize(v[row + w * 4 + b], vinv) << (8 * b);
    vc[vrow + w] = word;
  }
  if (j == 0) vc[scale_word] = floatBitsToUint(va / 127.0);
}
