// SPDX-License-Identifier: MIT
// Attention of query rows against the KV cache in the CPU's block layout
// (core/graph/kv_cache.h), a sequence's blocks found through its block table:
// per block of 64 positions, keys [KV head][dim][64]
// (transposed) and values [KV head][64][dim], f16, or int8 with Q8 (then the
// block's scales [KV head][64] follow each; a key's scale multiplies its
// scores, a value's its column of P after the softmax sum took P). A workgroup takes ROWS query
// rows that read the same keys: HG of the query heads sharing one KV head
// (GQA) x TQ consecutive tokens (prefill), so each key and value is read
// once for all of them. Its 64 invocations take one key each for the scores
// (consecutive keys: contiguous reads) and dimensions d, d + 64, ... for
// P V. Online softmax (running max m and sum l per row) block by block,
// causal per row, an optional sliding window (and the first `sinks` positions
// beside it: StreamingLLM's attention sinks). With splits > 1 the key blocks
// are cut into that many ranges (workgroups z: split-K, so a decode step
// fills the GPU); each writes its (max, sum, unnormalized o) per row to
// part[] and attention_merge.comp combines them. Defines: HEADS (HG), TOKENS
// (TQ); Q8 (int8 cache); Q4 (4-bit codes in kv_cache.h's nibble layout: keys
// with an f16 step and minimum per (dim, 32 positions), values with an f16
// scale per (position, 32 dimensions), rotated: the host un-rotates the
// output, kv_rotation.h); K8V4 (q8 keys, q4 values; the
// values' blocks have their own size); WORDS16 (f16 cache read as 32-bit words: devices
// without 16-bit storage); SUBGROUP: the block's maxima and sums by subgroup operations
// (group_reduce.glsl).
#version 450
#if defined(Q8) || defined(K8V4)
#define KEY_Q8
#endif
#if defined(Q4) || defined(K8V4)
#define VALUE_Q4
#endif
#if !defined(Q8) && !defined(Q4) && !defined(K8V4) && !defined(WORDS16)
#extension GL_EXT_shader_16bit_storage : require
#endif
#extension GL_GOOGLE_include_directive : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x = 64) in;
// Defines, not specialization constants: arrays sized by one gave wrong results on lavapipe.
const uint HG = HEADS, TQ = TOKENS, ROWS = HG * TQ;  // row r: head r % HG of token r / HG
const uint BLOCK = 64;
const uint MAX_DIMS = 4;  // head_dim <= 256

layout(binding = 0) readonly buffer Q { float q[]; };
#if defined(Q4) || defined(K8V4)
layout(binding = 1) readonly buffer K { uint k[]; };  // codes and scales, by bytes
layout(binding = 2) readonly buffer V { uint v[]; };
const uint ELEMENT_BYTES = 1;
float half_at(uint word, uint byte) { return unpackHalf2x16(word)[(byte / 2) % 2]; }  // an f16 at an even byte
#define KEY(i) float(bitfieldExtract(int(k[(i) / 4]), int((i) % 4) * 8, 8))  // K8V4: int8 keys
#elif defined(Q8)
layout(binding = 1) readonly buffer K { uint k[]; };  // 4 int8 elements or a scale per word
layout(binding = 2) readonly buffer V { uint v[]; };
const uint ELEMENT_BYTES = 1;
float element(uint word, uint i) { return float(bitfieldExtract(int(word), int(i % 4) * 8, 8)); }
#define KEY(i) element(k[(i) / 4], i)
#define VALUE(i) element(v[(i) / 4], i)
#elif defined(WORDS16)
layout(binding = 1) readonly buffer K { uint k[]; };  // 2 f16 a word
layout(binding = 2) readonly buffer V { uint v[]; };
const uint ELEMENT_BYTES = 2;
#define KEY(i) unpackHalf2x16(k[(i) / 2])[(i) % 2]
#define VALUE(i) unpackHalf2x16(v[(i) / 2])[(i) % 2]
#else
layout(binding = 1) readonly buffer K { float16_t k[]; };
layout(binding = 2) readonly buffer V { float16_t v[]; };
const uint ELEMENT_BYTES = 2;
#define KEY(i) float(k[i])
#define VALUE(i) float(v[i])
#endif
layout(binding = 3) readonly buffer Pos { int pos[]; };  // [n_tok]: the position of each token
layout(binding = 4) writeonly buffer O { float o[]; };
layout(binding = 5) writeonly buffer Part { float part[]; };  // [n_tok][n_head][splits][2 + head_dim]
layout(binding = 6) readonly buffer Table { int table[]; };  // the sequence's block table from table_offset

layout(push_constant) uniform Params {
  uint n_tok, n_head, group, head_dim;
  uint table_offset;  // the sequence's block table: table[table_offset + b] is the block of positions [64 b, 64 b + 64)
  uint block_bytes;   // a block (keys and values alike)
  uint scales;        // Q8: bytes from a block's start to its scales
  uint ldq, ldo;      // floats per token row of q and o
  uint q_offset, o_offset, pos_offset;
  uint window;        // positions seen: (pos - window, pos]; 0: all
  float scale;
  uint splits;        // key ranges per (token, head); 1: o written here
  uint value_block_bytes, value_scales;  // the values' (k8v4: not the keys'); Q4: bytes to the f16 scales
  uint sinks;         // with a window: positions [0, sinks) seen too
  float softcap;      // > 0: a score s becomes softcap tanh(s / softcap) (Gemma 2)
  uint rot_block;     // q8 keys stored rotated (kv_cache.h's kv_keys_rotated): the rotation's block; 0: not
  float rot_scale;    // and its 1 / sqrt(rot_block)
} p;

shared float qs[ROWS][MAX_DIMS * 64];
shared float ps[ROWS][BLOCK];
const uint WG = BLOCK, RED_N = ROWS;
#include "group_reduce.glsl"
uint rotated_row;  // the row of qs that kv_rotate_shared turns
#define KV_ROTATE_AT(i) qs[rotated_row][i]
#include "kv_rotate.glsl"

void main() {
  const uint j = gl_LocalInvocationID.x, t0 = gl_WorkGroupID.y * TQ, hd = p.head_dim;
  const uint per_kv = (p.group + HG - 1) / HG;  // workgroups per KV head
  const uint kvh = gl_WorkGroupID.x / per_kv, h0 = kvh * p.group + gl_WorkGroupID.x % per_kv * HG;
  const uint nh = min(HG, (kvh + 1) * p.group - h0);  // query heads h0 .. h0 + nh
  const uint nt = min(TQ, p.n_tok - t0);              // tokens t0 .. t0 + nt

  // Each row's keys: first[r] .. last[r] (causal, and the window's); the
  // workgroup reads the blocks of their union.
  uint first[ROWS], last[ROWS];
  uint lo = 0xFFFFFFFFu, hi = 0;
  for (uint r = 0; r < ROWS; ++r) {
    const uint tq = min(r / HG, nt - 1);  // rows past the tokens repeat the last one (never written)
    last[r] = uint(pos[p.pos_offset + t0 + tq]);
    first[r] = p.window > 0 && last[r] + 1 > p.window ? last[r] + 1 - p.window : 0;
    lo = min(lo, first[r]);
    hi = max(hi, last[r]);
  }

  for (uint r = 0; r < ROWS; ++r) {
    const uint g = r % HG, tq = r / HG;
    const bool real = g < nh && tq < nt;
    for (uint d = j; d < hd; d += BLOCK) qs[r][d] = real ? q[p.q_offset + (t0 + tq) * p.ldq + (h0 + g) * hd + d] * p.scale : 0.0;
  }
  barrier();
  if (p.rot_block != 0)  // as the keys were stored: (H q) . (H k) = q . k
    for (rotated_row = 0; rotated_row < ROWS; ++rotated_row) kv_rotate_shared(hd, p.rot_block, p.rot_scale);

  float m[ROWS], l[ROWS], acc[ROWS][MAX_DIMS];
  for (uint r = 0; r < ROWS; ++r) {
    m[r] = -1.0 / 0.0;
    l[r] = 0.0;
    for (uint i = 0; i < MAX_DIMS; ++i) acc[r][i] = 0.0;
  }

  // This workgroup's blocks of the rows' key range: the sinks' blocks before
  // it first (those it does not reach), numbered on from 0 with it.
  const uint first_block = lo / BLOCK, sink_blocks = min((p.sinks + BLOCK - 1) / BLOCK, first_block);
  const uint blocks = sink_blocks + hi / BLOCK - first_block + 1;
  const uint per_split = (blocks + p.splits - 1) / p.splits, split = gl_WorkGroupID.z;
  const uint i0 = min(blocks, split * per_split), i1 = min(blocks, (split + 1) * per_split);
  for (uint i = i0; i < i1; ++i) {
    const uint b = i < sink_blocks ? i : first_block + i - sink_blocks;
    const uint p0 = b * BLOCK;
    const uint blk_bytes = uint(table[p.table_offset + b]) * p.block_bytes, blk = blk_bytes / ELEMENT_BYTES;
    const uint vblk_bytes = uint(table[p.table_offset + b]) * p.value_block_bytes;
    const uint key = p0 + j;
    float s[ROWS];
    for (uint r = 0; r < ROWS; ++r) s[r] = 0.0;
    float vscale = 1.0;
    if (key <= hi) {
#ifdef Q4
      // Row (kvh, d) is 32 bytes, byte j % 32 holding key j (low nibble below 32); then per KV head
      // f16 steps [group of 32 keys][hd] and minimums [group][hd].
      const uint sb = blk_bytes + p.scales + (kvh * 4 + j / 32) * hd * 2;
      for (uint d = 0; d < hd; ++d) {
        const uint byte = blk_bytes + (kvh * hd + d) * 32 + j % 32, at = sb + d * 2;
        const float kstep = half_at(k[at / 4], at), kmin = half_at(k[(at + hd * 4) / 4], at);
        const float kd = kmin + kstep * float(bitfieldExtract(k[byte / 4], int(byte % 4) * 8 + int(j / 32) * 4, 4));
        for (uint r = 0; r < ROWS; ++r) s[r] += qs[r][d] * kd;
      }
#else
      const uint kb = blk + kvh * hd * BLOCK + j;
      for (uint d = 0; d < hd; ++d) {
        const float kd = KEY(kb + d * BLOCK);
        for (uint r = 0; r < ROWS; ++r) s[r] += qs[r][d] * kd;
      }
#endif
#ifdef KEY_Q8
      const uint sw = (blk_bytes + p.scales + (kvh * BLOCK + j) * 4) / 4;
      const float kscale = uintBitsToFloat(k[sw]);
      for (uint r = 0; r < ROWS; ++r) s[r] *= kscale;
#endif
#ifdef Q8
      vscale = uintBitsToFloat(v[sw]);
#endif
    }
    float mx[ROWS];
    for (uint r = 0; r < ROWS; ++r) {
      // tanh clamped: some drivers take it as a ratio of exponentials, inf / inf past |x| ~ 44.
      if (p.softcap > 0.0) s[r] = p.softcap * tanh(clamp(s[r] / p.softcap, -15.0, 15.0));
      if ((key < first[r] && key >= p.sinks) || key > last[r]) s[r] = -1.0 / 0.0;
      mx[r] = s[r];
    }
    group_reduce(mx, true);
    float e[ROWS], corr[ROWS];
    for (uint r = 0; r < ROWS; ++r) {
      const float m_new = max(m[r], mx[r]);
      // A row that has seen no key yet (m_new = -inf) keeps l = 0, acc = 0.
      e[r] = s[r] > -1.0 / 0.0 ? exp(s[r] - m_new) : 0.0;
      corr[r] = m_new > -1.0 / 0.0 ? exp(m[r] - m_new) : 1.0;  // 0 on a row's first seen block (m = -inf)
      m[r] = m_new;
      ps[r][j] = e[r] > 0.0 ? e[r] * vscale : 0.0;  // a key no row sees may hold garbage
    }
    group_reduce(e, false);  // its barriers also publish ps
    for (uint r = 0; r < ROWS; ++r) l[r] = l[r] * corr[r] + e[r];
    const uint n = min(BLOCK, hi + 1 - p0);
    const uint vb = blk + kvh * BLOCK * hd;
    for (uint i = 0; i < MAX_DIMS; ++i) {
      const uint d = j + i * BLOCK;
      if (d >= hd) break;
      float a[ROWS];
      for (uint r = 0; r < ROWS; ++r) a[r] = acc[r][i] * corr[r];
      for (uint jj = 0; jj < n; ++jj) {
#ifdef VALUE_Q4
        // Row (kvh, jj) is hd / 2 bytes: byte 16 g + i holds dimension 32 g + i (low) and 32 g + 16 + i (high).
        const uint byte = vblk_bytes + (kvh * BLOCK + jj) * (hd / 2) + d / 32 * 16 + d % 16;
        const uint sb = vblk_bytes + p.value_scales + ((kvh * (hd / 32) + d / 32) * BLOCK + jj) * 2;
        const float vd = half_at(v[sb / 4], sb) * float(int(bitfieldExtract(v[byte / 4], int(byte % 4) * 8 + int(d % 32 / 16) * 4, 4)) - 8);
#else
        const float vd = VALUE(vb + jj * hd + d);
#endif
        for (uint r = 0; r < ROWS; ++r) a[r] += ps[r][jj] * vd;
      }
      for (uint r = 0; r < ROWS; ++r) acc[r][i] = a[r];
    }
    barrier();
  }
  for (uint r = 0; r < ROWS; ++r) {
    const uint g = r % HG, tq = r / HG;
    if (g >= nh || tq >= nt) continue;
    const uint h = h0 + g, t = t0 + tq;
    if (p.splits == 1) {
      for (uint i = 0; i < MAX_DIMS; ++i) {
        const uint d = j + i * BLOCK;
        if (d < hd) o[p.o_offset + t * p.ldo + h * hd + d] = acc[r][i] / l[r];
      }
      continue;
    }
    const uint at = ((t * p.n_head + h) * p.splits + split) * (2 + hd);  // an empty range: m = -inf, l = 0
    if (j == 0) part[at] = m[r], part[at + 1] = l[r];
    for (uint i = 0; i < MAX_DIMS; ++i) {
      const uint d = j + i * BLOCK;
      if (d < hd) part[at + 2 + d] = acc[r][i];
    }
  }
}
