// SPDX-License-Identifier: MIT
// Stores the batch's keys and values (f32 rows [n][kv_dim]) into the device's
// copy of a q4 KV cache (kv_cache.h's layout and rounding). One workgroup
// per (KV head, token); `sides`: bit 0 keys, bit 1 values (k8v4: values only;
// its q8 keys go through kv_store_q8.comp).
// Keys, per channel over groups of 32 positions, in two dispatches: phase 0,
// for the last token of each (sequence, group) in the batch, rounds each
// (head, dim) of the group so far (the batch's positions from k, the earlier
// ones from the sequence's stage: [seq][kv_dim][32] floats, the group being
// written, as KvCache's) as quantize_kv_q4_keys (an f16 step and
// minimum, codes floor((x - minimum) / step + 0.5)); phase 1 puts the keys
// of each sequence's last group in the batch, rounded to f16, in its stage
// for the next batch. A sequence's tokens are consecutive positions, in
// order (the backend checks). Values (phase 0): each head
// rotated (kv_rotate.glsl, as kv_rotate), then per 32 dimensions an f16
// scale d = m / -8 (m the value of largest magnitude) and codes min(15,
// floor(x / d + 8.5)), as quantize_kv_q4. GLSL's division may put a rare
// code one step from the CPU's. Keys' rows hold positions j and j + 32 in
// one byte and value scales pair up in words: written with atomics. base[t]
// is the token's block in the keys (bytes): the block's index times
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
layout(binding = 6) buffer Stage { float stage[]; };
layout(binding = 7) readonly buffer Seq { int seq[]; };

layout(push_constant) uniform Params {
  uint kv_dim, head_dim, sides, key_block_bytes, value_block_bytes;
  uint rot_block;   // kv_rotation_block(head_dim)
  float rot_scale;  // 1 / sqrt(rot_block), the CPU's
  uint n_tok, phase;
} p;

const uint BLOCK = 64, GROUP = 32, WG = 64, MAX_DIMS = 256;
shared float xs[MAX_DIMS];
shared float gd[MAX_DIMS / 32], gid[MAX_DIMS / 32];  // per group of 32: its scale and the scale's inverse

#include "half.glsl"
#include "kv_rotate.glsl"

// An f16 at an even byte offset of a cache read as words: the word's other half is another position's.
#define STORE_BITS16(cache, byte, bits)                                     \
  {                                                                         \
    const uint at_ = (byte) / 4, shift_ = ((byte) % 4) * 8;                 \
    atomicAnd(cache[at_], ~(0xFFFFu << shift_));                            \
    atomicOr(cache[at_], (bits) << shift_);                                 \
  }
#define STORE_HALF(cache, byte, x) STORE_BITS16(cache, byte, f32_to_f16(x))

// The value row rotated into xs, and each group's scale.
void rotate_and_scale(uint row) {
  const uint j = gl_LocalInvocationID.x, hd = p.head_dim;
  for (uint d = j; d < hd; d += WG) xs[d] = v[row + d];
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

// A sequence's tokens are consecutive positions at consecutive indices (the
// backend checks): whether the token after t is in t's key group (same =
// true), or whether the sequence's tokens reach a later group (same = false).
bool followed(uint t, bool same) {
  if (same && uint(pos[t]) % GROUP == GROUP - 1) return false;       // t ends its group
  const uint u = same ? t + 1 : t + (GROUP - uint(pos[t]) % GROUP);  // same: the next token; else the next group's first
  return u < p.n_tok && seq[u] == seq[t] && pos[u] == pos[t] + int(u - t);
}

float f16_rounded(float x) { return unpackHalf2x16(f32_to_f16(x)).x; }

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, j = gl_LocalInvocationID.x, hd = p.head_dim;
  const uint jj = uint(pos[t]) % BLOCK, row = t * p.kv_dim + h * hd, block = base[t] / p.key_block_bytes;
  const uint stage_row = (uint(seq[t]) * p.kv_dim + h * hd) * GROUP;
  if (p.phase == 1u) {
    if (!followed(t, false))
      for (uint d = j; d < hd; d += WG) stage[stage_row + d * GROUP + jj % GROUP] = f16_rounded(k[row + d]);
    return;
  }
  if ((p.sides & 1u) != 0u && !followed(t, true)) {
    const uint blk = block * p.key_block_bytes, n = jj % GROUP + 1, shift = jj / GROUP * 4;
    for (uint d = j; d < hd; d += WG) {
      float x[GROUP];  // the group's keys of (h, d): token t - i holds position pos[t] - i where it is this sequence's
      for (uint i = 0; i < n; ++i) {
        const int u = int(t) - int(n - 1 - i);
        const bool here = u >= 0 && seq[u] == seq[t] && pos[u] == pos[t] - int(n - 1 - i);
        x[i] = here ? f16_rounded(k[uint(u) * p.kv_dim + h * hd + d]) : stage[stage_row + d * GROUP + i];
      }
      float lo = uintBitsToFloat(0x7F800000u), hi = -lo;  // from infinities, NaN skipped: the CPU's fmin and fmax
      for (uint i = 0; i < n; ++i)
        if (!isnan(x[i])) lo = min(lo, x[i]), hi = max(hi, x[i]);
      const uint step = f32_to_f16((hi - lo) / 15.0), minimum = f32_to_f16(lo);
      const float m = unpackHalf2x16(minimum).x, ds = unpackHalf2x16(step).x, id = ds > 0.0 ? 1.0 / ds : 0.0;
      // Row (h, d) is 32 bytes: byte i holds position i of the block (low nibble) and 32 + i (high).
      const uint bytes = blk + (h * hd + d) * 32;
      for (uint w = 0; w * 4 < n; ++w) {
        uint keep = 0xFFFFFFFFu, word = 0u;
        for (uint b = 0; b < 4 && w * 4 + b < n; ++b) {
          const float f = floor((x[w * 4 + b] - m) * id + 0.5);
          const uint c = uint(clamp(isnan(f) ? 0.0 : f, 0.0, 15.0));  // NaN: code 0, as the CPU
          keep &= ~(0xFu << (8 * b + shift));
          word |= c << (8 * b + shift);
        }
        atomicAnd(kc[bytes / 4 + w], keep);
        atomicOr(kc[bytes / 4 + w], word);
      }
      // Per KV head: steps [group][hd], then minimums [group][hd]; two dims share a word.
      const uint at = blk + p.kv_dim * BLOCK / 2 + (h * 4 + jj / GROUP) * hd * 2 + d * 2;
      STORE_BITS16(kc, at, step);  // the bits as rounded, not re-encoded (a subnormal step stays)
      STORE_BITS16(kc, at + hd * 4, minimum);
    }
  }
  if ((p.sides & 2u) != 0u) {
    rotate_and_scale(row);
    const uint blk = block * p.value_block_bytes, groups = hd / 32, scales = p.kv_dim * BLOCK / 2;
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
