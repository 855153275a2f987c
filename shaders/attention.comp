// SPDX-License-Identifier: MIT
// Attention of query rows against the f16 KV cache in the CPU's block layout
// (core/runtime/kv_cache.h): per block of 64 positions, keys [KV head][dim][64]
// (transposed) and values [KV head][64][dim]. One workgroup per (token, query
// head); its 64 invocations take one key each for the scores (consecutive
// keys: contiguous reads) and dimensions d, d + 64, ... for P V. Online
// softmax (running max m and sum l) block by block, causal, GQA (query head h
// reads KV head h / group), an optional sliding window. With splits > 1 the
// key blocks are cut into that many ranges (workgroups z: split-K, so a
// decode step fills the GPU); each writes its (max, sum, unnormalized o) to
// part[] and attention_merge.comp combines them. SUBGROUP: the block's max
// and sum by subgroup operations (group_reduce.glsl).
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_GOOGLE_include_directive : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x = 64) in;
const uint BLOCK = 64;
const uint MAX_DIMS = 4;  // head_dim <= 256

layout(binding = 0) readonly buffer Q { float q[]; };
layout(binding = 1) readonly buffer K { float16_t k[]; };
layout(binding = 2) readonly buffer V { float16_t v[]; };
layout(binding = 3) readonly buffer Pos { int pos[]; };  // [n_tok]: the position of each token
layout(binding = 4) writeonly buffer O { float o[]; };
layout(binding = 5) writeonly buffer Part { float part[]; };  // [n_tok][n_head][splits][2 + head_dim]

layout(push_constant) uniform Params {
  uint n_tok, n_head, group, head_dim;
  uint kv_base;       // f16 elements: the first block of this sequence's layer (keys and values alike)
  uint block_stride;  // f16 elements between blocks: kv_dim * 64
  uint ldq, ldo;      // floats per token row of q and o
  uint q_offset, o_offset, pos_offset;
  uint window;        // positions seen: (pos - window, pos]; 0: all
  float scale;
  uint splits;        // key ranges per (token, head); 1: o written here
} p;

shared float qs[MAX_DIMS * 64];
shared float ps[BLOCK];
const uint WG = BLOCK;
#include "group_reduce.glsl"

void main() {
  const uint j = gl_LocalInvocationID.x;
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  const uint kvh = h / p.group, hd = p.head_dim;
  const int my_pos = pos[p.pos_offset + t];
  const uint last = uint(my_pos);  // keys 0..last, or the window's
  const uint first = p.window > 0 && last + 1 > p.window ? last + 1 - p.window : 0;

  for (uint d = j; d < hd; d += BLOCK) qs[d] = q[p.q_offset + t * p.ldq + h * hd + d] * p.scale;
  barrier();

  float m = -1.0 / 0.0, l = 0.0;
  float acc[MAX_DIMS];
  for (uint i = 0; i < MAX_DIMS; ++i) acc[i] = 0.0;

  // This workgroup's blocks of the token's key range.
  const uint first_block = first / BLOCK, blocks = last / BLOCK - first_block + 1;
  const uint per_split = (blocks + p.splits - 1) / p.splits, split = gl_WorkGroupID.z;
  const uint b0 = first_block + min(blocks, split * per_split), b1 = first_block + min(blocks, (split + 1) * per_split);
  for (uint b = b0; b < b1; ++b) {
    const uint p0 = b * BLOCK;
    const uint blk = p.kv_base + b * p.block_stride;
    const uint key = p0 + j;
    const bool seen = key >= first && key <= last;
    float s = -1.0 / 0.0;
    if (seen) {
      const uint kb = blk + kvh * hd * BLOCK + j;
      s = 0.0;
      for (uint d = 0; d < hd; ++d) s += qs[d] * float(k[kb + d * BLOCK]);
    }
    const float m_new = max(m, group_max(s));
    const float e = seen ? exp(s - m_new) : 0.0;
    const float corr = exp(m - m_new);  // 0 on the first block (m = -inf)
    l = l * corr + group_sum(e);
    m = m_new;
    ps[j] = e;
    barrier();
    const uint n = min(BLOCK, last + 1 - p0);
    const uint vb = blk + kvh * BLOCK * hd;
    for (uint i = 0; i < MAX_DIMS; ++i) {
      const uint d = j + i * BLOCK;
      if (d >= hd) break;
      float a = acc[i] * corr;
      for (uint jj = 0; jj < n; ++jj) a += ps[jj] * float(v[vb + jj * hd + d]);
      acc[i] = a;
    }
    barrier();
  }
  if (p.splits == 1) {
    for (uint i = 0; i < MAX_DIMS; ++i) {
      const uint d = j + i * BLOCK;
      if (d < hd) o[p.o_offset + t * p.ldo + h * hd + d] = acc[i] / l;
    }
    return;
  }
  const uint at = ((t * p.n_head + h) * p.splits + split) * (2 + hd);  // an empty range: m = -inf, l = 0
  if (j == 0) part[at] = m, part[at + 1] = l;
  for (uint i = 0; i < MAX_DIMS; ++i) {
    const uint d = j + i * BLOCK;
    if (d < hd) part[at + 2 + d] = acc[i];
  }
}
