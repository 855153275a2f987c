// SPDX-License-Identifier: MIT
// Stores the batch's keys and values (f32 rows [n][kv_dim]) into the device's
// copy of a q4 KV cache (kv_cache.h's layout and rounding): each head rotated
// (kv_rotate.glsl, as kv_rotate), then per 32 dimensions an f16 scale d = m /
// -8 (m the value of largest magnitude) and codes min(15, floor(x / d +
// 8.5)), as quantize_kv_q4 (GLSL's division may put a rare code one step
// from the CPU's). One workgroup per (KV head, token). `sides`: bit 0 keys,
// bit 1 values (k8v4: values only; its q8 keys go through kv_store_q8.comp).
// Keys' rows hold positions j and j + 32 in one byte and scales pair up in
// words: written with atomics; a value row's words are its own. base[t] is
// the token's block in the keys (bytes): the block's index times
// key_block_bytes; the values' block is that index times value_block_bytes.
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;

layout(binding = 0) readonly buffer K { float k[]; };
layout(binding = 1) readonly buffer V { float v[]; };
layout(binding = 2) readonly buffer Pos { int pos[]; };
layout(binding = 3) readonly buffer Base { uint base[]; };
layout(binding = 4) buffer KC { uint kc[]; };
layout(binding = 5) buffer VC { uint vc[]; };

layout(push_constant) uniform Params {
  uint kv_dim, head_dim, sides, key_block_bytes, value_block_bytes;
  uint rot_block;   // kv_rotation_block(head_dim)
  float rot_scale;  // 1 / sqrt(rot_block), the CPU's
} p;

const uint BLOCK = 64, WG = 64, MAX_DIMS = 256;
shared float xs[MAX_DIMS];
shared float gd[MAX_DIMS / 32], gid[MAX_DIMS / 32];  // per group of 32: its scale and the scale's inverse

#include "half.glsl"
#include "kv_rotate.glsl"

// An f16 at an even byte offset of a cache read as words: the word's other half is another position's.
#define STORE_HALF(cache, byte, x)                                          \
  {                                                                         \
    const uint at_ = (byte) / 4, shift_ = ((byte) % 4) * 8;                 \
    atomicAnd(cache[at_], ~(0xFFFFu << shift_));                            \
    atomicOr(cache[at_], f32_to_f16(x) << shift_);                          \
  }

// The row rotated into xs, and each group's scale.
void rotate_and_scale(bool key, uint row) {
  const uint j = gl_LocalInvocationID.x, hd = p.head_dim;
  for (uint d = j; d < hd; d += WG) xs[d] = key ? k[row + d] : v[row + d];
  kv_rotate_shared(hd, p.rot_block, p.rot_scale);
  if (j < hd / 32) {
    float amax = 0.0, m = 0.0;
    for (uint i = j * 32; i < j * 32 + 32; ++i)
      if (abs(xs[i]) > amax) amax = abs(xs[i]), m = xs[i];
    const float d = m / -8.0;
    gd[j] = d;
    gid[j] = d != 0.0 ? 1.0 / d : 0.0;
  }
  barrier();
}

uint code(uint d) { return uint(clamp(xs[d] * gid[d / 32] + 8.5, 0.0, 15.0)); }

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, j = gl_LocalInvocationID.x, hd = p.head_dim;
  const uint jj = uint(pos[t]) % BLOCK, row = t * p.kv_dim + h * hd, block = base[t] / p.key_block_bytes;
  const uint groups = hd / 32, scales = p.kv_dim * BLOCK / 2;  // the scales follow the codes
  if ((p.sides & 1u) != 0u) {
    rotate_and_scale(true, row);
    const uint blk = block * p.key_block_bytes;
    // Row (h, d) is 32 bytes: byte jj % 32 holds position jj, low nibble below 32, high from 32.
    for (uint d = j; d < hd; d += WG) {
      const uint byte = blk + (h * hd + d) * 32 + jj % 32, shift = (byte % 4) * 8 + jj / 32 * 4;
      atomicAnd(kc[byte / 4], ~(0xFu << shift));
      atomicOr(kc[byte / 4], code(d) << shift);
    }
    if (j < groups) STORE_HALF(kc, blk + scales + ((h * groups + j) * BLOCK + jj) * 2, gd[j]);
  }
  if ((p.sides & 2u) != 0u) {
    rotate_and_scale(false, row);  // its first barrier: the keys' reads of xs are done
    const uint blk = block * p.value_block_bytes;
    // Row (h, jj) is hd / 2 bytes: byte 16 g + i holds dimension 32 g + i (low) and 32 g + 16 + i (high).
    const uint vrow = (blk + (h * BLOCK + jj) * (hd / 2)) / 4;
    for (uint w = j; w < hd / 8; w += WG) {
      uint word = 0u;
      for (uint b = 0; b < 4; ++b) {
        const uint i = w * 4 + b, d = i / 16 * 32 + i % 16;
        word |= (code(d) | code(d + 16) << 4) << (8 * b);
      }
      vc[vrow + w] = word;
    }
    if (j < groups) STORE_HALF(vc, blk + scales + ((h * groups + j) * BLOCK + jj) * 2, gd[j]);
  }
}
