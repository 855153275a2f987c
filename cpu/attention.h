// SPDX-License-Identifier: MIT
// What each ISA implements for cpu::attention (cpu/ops.h). The driver
// (cpu/attention.cpp) cuts the work into tiles of query rows (several tokens
// of one sequence x the query heads that share one KV head) and key ranges,
// runs them on the OpenMP threads and merges the partial softmax states of a
// row's key ranges (split-K, so one decode token still uses every core).
#pragma once

#include <cstdint>

#include "core/graph/kv_cache.h"
#include "cpu/isa.h"

namespace basalt::cpu {

// The query rows of tokens [0, n_tok) of one sequence for the n_kv KV heads
// from the one at k, v (and the group query heads of each) against the cached
// positions [p0, p1): a partial softmax state per row. Row r = (h * n_tok + i)
// * group + g is token i, query head g of KV head h. Several KV heads at once
// read the cache in address order.
struct AttentionTile {
  const float* q;      // row (h, i, g): q + i * ldq + (h * group + g) * head_dim, head_dim floats
  int64_t ldq;
  const int32_t* pos;  // [n_tok]: token i sees positions 0..pos[i] (a window: pos[i] - window + 1..pos[i])
  int64_t n_tok, group, n_kv, head_dim;
  // Keys and values in the cache's blocks (core/graph/kv_cache.h), f16, int8
  // or 4-bit (key_type, value_type), ld (ldv) bytes a block of keys (values). Element d of KV head h at position p,
  // its block at b = blocks[p / kCacheBlock] * ld bytes and j = p % kCacheBlock:
  //   key:   k + b, element (h * head_dim + d) * kCacheBlock + j
  //   value: v + b, element (h * kCacheBlock + j) * head_dim + d
  // and, q8, times its scale: float (h * kCacheBlock + j) at ks + b (keys), vs + b (values); f16: ks = vs = nullptr.
  // q8 keys where kv_keys_rotated(key_type, head_dim): the elements are H k's (kv_rotation.h); the kernels rotate q.
  // q4 (kv_cache.h): nibbles, k and v at KV head 0's bytes, ks at its keys' f16 steps [2][head_dim] and
  // minimums [2][head_dim] (per 32 positions), vs at its values' f16 scales [head_dim / 32][kCacheBlock].
  KvType key_type, value_type;  // f16, q8 or q4 each
  const uint8_t* k;
  const uint8_t* v;
  const uint8_t* ks;
  const uint8_t* vs;
  const int32_t* blocks;  // the sequence's block table
  int64_t ld, ldv;
  int64_t p0, p1;      // p0 a multiple of kCacheBlock
  float scale;         // score = scale * q.k
  int64_t window;      // positions a token sees, its own included (0: all)
  int64_t sinks;       // with a window: positions [0, sinks) are seen too
  // Over the positions p of [p0, p1) that row r sees, with s_p its scores:
  float* o;     // row (h, i, g): o + i * ldo + (h * group + g) * head_dim, sum_p exp(s_p - m) v_p
  int64_t ldo;
  bool normalize;  // o divided by l: the piece is the row's whole key range, o is the output
  float* m;     // [rows] max_p s_p; -inf (with l = 0, o = 0) when the row sees none of them
  float* l;     // [rows] sum_p exp(s_p - m)
  float* scratch;  // scratch_floats(n_kv, n_tok * group, head_dim) floats of the calling thread, 64-byte aligned
  float softcap = 0;  // > 0: each score s (scale included) becomes softcap tanh(s / softcap) (Gemma 2)
};

constexpr int64_t kCacheBlock = KvCache::kBlock;

struct AttentionKernels {
  void (*tile)(const AttentionTile& t);
  int64_t (*scratch_floats)(int64_t n_kv, int64_t rows_per_kv_head, int64_t head_dim);
  void (*exp)(const float* x, float* y, int64_t n);        // the softmax's exp (here for its test)
  void (*exp_p)(const float* x, float* y, int64_t n);      // its exp where P goes to bf16 (AMX tiles; else exp)
  // Query rows per tile and KV head (tokens x the query heads of one KV head)
  // for a cache of this type: what amortizes the tile's per-block work.
  int64_t (*tile_rows)(KvType type, int64_t head_dim);
};

// The kernels of one ISA; nullptr where there are none (attention() then runs attention_ref).
// With attention_bf16_dots, AVX-512 takes the f16 cache's scores and P V as
// bf16 dot products: queries, keys, values and softmax weights rounded to
// bf16 (8 significant bits), products summed in f32 (the q4 cache's too, and
// q8's P V: attention_dots below). On AMD (Zen 4, Zen 5)
// vdpbf16ps does twice the multiply-adds of an f32 FMA per cycle, and f32
// FMAs are what decode at depth is bound by there; on Intel (Sapphire
// Rapids) it does as many, so the conversions make it slower (docs/PERFORMANCE.md 6.5).
const AttentionKernels* find_attention_kernels(Isa isa);
// On where the CPU has AVX512_BF16 and is AMD's, or BASALT_ATTENTION_BF16=1
// asks for them where it has them; BASALT_ATTENTION_BF16=0 turns them off.
bool attention_bf16_dots();
void set_attention_bf16_dots(bool on);  // for tests and benchmarks: on only where the CPU has them
void reset_attention_bf16_dots();       // back to the CPU's and BASALT_ATTENTION_BF16's choice
// With isa amx and neither of those set, the f16 cache's scores and P V run
// on AMX bf16 tiles (kernels::attention_amx: 16 x 16 x 32 products per
// instruction, where vdpbf16ps is no faster than f32 FMAs on Intel), rounded
// as the bf16 dots (the softmax weights' exp only to bf16's precision,
// Simd::exp_for_bf16: relative error < 1e-5); for heads amx_int8_head takes, q8 keys' scores on int8
// tiles and the q8 and q4 values' P V in integers (int8_query_int_p and
// int_p below: whole tiles of rows on the tiles, decode's on VNNI, which
// makes the same integers); the rest as AVX-512 without the bf16 dots. Not
// for a lone query row per KV head, as the int8 dots below.
bool attention_amx_tiles(Isa isa);

// What isa's kernels round beyond the cache itself, for a cache of this type
// and heads of head_dim: the f16 cache's bf16 dots (and the q4 cache's, where
// bf16 takes the query times the keys' steps and the softmax weights times
// the values' scales: 4-bit codes are exact in it), or the q8 keys' scores as
// int8 dots (AVX-512 VNNI, vpdpbusd) of the query (rotated as the keys,
// kv_keys_rotated) rounded to int8 with a
// scale per row (max |q| / 127, to nearest even), as llama.cpp's q8_0 does
// (not for a lone query row per KV head, a decode without GQA: there laying
// out the keys for vpdpbusd costs more than it saves, and scores stay f32).
// The forward tests' reference repeats it for every cache type
// (tools/dump_logits says which: tests/python/reference_forward.py).
// int8_query_bf16_p: that, and on the bf16 builds q8 (or k8v4's q4) values
// through bf16 P V: the softmax weights times the values' scales rounded to
// bf16 (the codes are exact). int8_query_int_p: that query, and on AMX the
// q8 or q4 values' P V in integers: each row's weights times the values'
// scales (q4: each group of 32 dims' own) rounded to 15 bits and a sign per
// block of 64 keys (scale the block's largest magnitude / 32767), dotted with
// the value codes exactly; int_p: that P V alone (the q4 cache, whose keys'
// scores stay f32 there). AVX2 (and AVX-VNNI) make the same integers with
// vpmaddwd for the caches with q8 keys (q8, k8v4) and heads of whole groups
// of 32 dims: int8_query_int_p; the f16 and q4 caches stay f32 there.
enum class AttentionDots { f32, bf16, int8_query, int8_query_bf16_p, int8_query_int_p, int_p };
AttentionDots attention_dots(Isa isa, KvType type, int64_t head_dim);
// The heads the AMX integer attention takes: whole 64-byte tile rows, each
// row's P V accumulators in registers.
constexpr bool amx_int8_head(int64_t head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }
const char* attention_dots_name(AttentionDots dots);  // "f32", "bf16", ...: the reference's name for it

namespace kernels {
#if defined(BASALT_X86)
const AttentionKernels* attention_avx2();    // cpu/x86/attention_avx2.cpp
const AttentionKernels* attention_avx512();  // cpu/x86/attention_avx512.cpp
const AttentionKernels* attention_avx512_bf16();  // cpu/x86/attention_bf16_avx512.cpp
const AttentionKernels* attention_amx();  // cpu/x86/attention_amx.cpp
#endif
#if defined(BASALT_ARM)
const AttentionKernels* attention_neon();  // cpu/arm/attention_neon.cpp
#endif
}  // namespace kernels

}  // namespace basalt::cpu
