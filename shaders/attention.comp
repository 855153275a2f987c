// SPDX-License-Identifier: MIT
// Attention of query rows against the f16 KV cache in the CPU's block layout
// (core/runtime/kv_cache.h): per block of 64 positions, keys [KV head][dim][64]
// (transposed) and values [KV head][64][dim]. One workgroup per (token, KV
// head, up to HG of the query heads that share it: GQA reads each key and
// value once for all of them); its 64 invocations take one key each for the
// scores (consecutive keys: contiguous reads) and dimensions d, d + 64, ...
// for P V. Online softmax (running max m and sum l per head) block by block,
// causal, an optional sliding window. With splits > 1 the key blocks are cut
// into that many ranges (workgroups z: split-K, so a decode step fills the
// GPU); each writes its (max, sum, unnormalized o) per head to part[] and
// attention_merge.comp combines them. SUBGROUP: the block's maxima and sums
// by subgroup operations (group_reduce.glsl).
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_GOOGLE_include_directive : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x = 64) in;
const uint HG = HEADS;  // query heads per workgroup (a define: arrays sized by a specialization constant misbehave)
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

shared float qs[HG][MAX_DIMS * 64];
shared float ps[HG][BLOCK];
const uint WG = BLOCK, RED_N = HG;
#include "group_reduce.glsl"

void main() {
  const uint j = gl_LocalInvocationID.x, t = gl_WorkGroupID.y, hd = p.head_dim;
  const uint per_kv = (p.group + HG - 1) / HG;  // workgroups per KV head
  const uint kvh = gl_WorkGroupID.x / per_kv, h0 = kvh * p.group + gl_WorkGroupID.x % per_kv * HG;
  const uint nh = min(HG, (kvh + 1) * p.group - h0);  // query heads h0 .. h0 + nh
  const int my_pos = pos[p.pos_offset + t];
  const uint last = uint(my_pos);  // keys 0..last, or the window's
  const uint first = p.window > 0 && last + 1 > p.window ? last + 1 - p.window : 0;

  for (uint g = 0; g < HG; ++g)
    for (uint d = j; d < hd; d += BLOCK) qs[g][d] = g < nh ? q[p.q_offset + t * p.ldq + (h0 + g) * hd + d] * p.scale : 0.0;
  barrier();

  float m[HG], l[HG], acc[HG][MAX_DIMS];
  for (uint g = 0; g < HG; ++g) {
    m[g] = -1.0 / 0.0;
    l[g] = 0.0;
    for (uint i = 0; i < MAX_DIMS; ++i) acc[g][i] = 0.0;
  }

  // This workgroup's blocks of the token's key range.
  const uint first_block = first / BLOCK, blocks = last / BLOCK - first_block + 1;
  const uint per_split = (blocks + p.splits - 1) / p.splits, split = gl_WorkGroupID.z;
  const uint b0 = first_block + min(blocks, split * per_split), b1 = first_block + min(blocks, (split + 1) * per_split);
  for (uint b = b0; b < b1; ++b) {
    const uint p0 = b * BLOCK;
    const uint blk = p.kv_base + b * p.block_stride;
    const uint key = p0 + j;
    const bool seen = key >= first && key <= last;
    float s[HG];
    for (uint g = 0; g < HG; ++g) s[g] = seen ? 0.0 : -1.0 / 0.0;
    if (seen) {
      const uint kb = blk + kvh * hd * BLOCK + j;
      for (uint d = 0; d < hd; ++d) {
        const float kd = float(k[kb + d * BLOCK]);
        for (uint g = 0; g < HG; ++g) s[g] += qs[g][d] * kd;
      }
    }
    float mx[HG];
    for (uint g = 0; g < HG; ++g) mx[g] = s[g];
    group_reduce(mx, true);
    float e[HG], corr[HG];
    for (uint g = 0; g < HG; ++g) {
      const float m_new = max(m[g], mx[g]);
      e[g] = seen ? exp(s[g] - m_new) : 0.0;
      corr[g] = exp(m[g] - m_new);  // 0 on the first block (m = -inf)
      m[g] = m_new;
      ps[g][j] = e[g];
    }
    group_reduce(e, false);  // its barriers also publish ps
    for (uint g = 0; g < HG; ++g) l[g] = l[g] * corr[g] + e[g];
    const uint n = min(BLOCK, last + 1 - p0);
    const uint vb = blk + kvh * BLOCK * hd;
    for (uint i = 0; i < MAX_DIMS; ++i) {
      const uint d = j + i * BLOCK;
      if (d >= hd) break;
      float a[HG];
      for (uint g = 0; g < HG; ++g) a[g] = acc[g][i] * corr[g];
      for (uint jj = 0; jj < n; ++jj) {
        const float vd = float(v[vb + jj * hd + d]);
        for (uint g = 0; g < HG; ++g) a[g] += ps[g][jj] * vd;
      }
      for (uint g = 0; g < HG; ++g) acc[g][i] = a[g];
    }
    barrier();
  }
  for (uint g = 0; g < nh; ++g) {
    const uint h = h0 + g;
    if (p.splits == 1) {
      for (uint i = 0; i < MAX_DIMS; ++i) {
        const uint d = j + i * BLOCK;
        if (d < hd) o[p.o_offset + t * p.ldo + h * hd + d] = acc[g][i] / l[g];
      }
      continue;
    }
    const uint at = ((t * p.n_head + h) * p.splits + split) * (2 + hd);  // an empty range: m = -inf, l = 0
    if (j == 0) part[at] = m[g], part[at + 1] = l[g];
    for (uint i = 0; i < MAX_DIMS; ++i) {
      const uint d = j + i * BLOCK;
      if (d < hd) part[at + 2 + d] = acc[g][i];
    }
  }
}
