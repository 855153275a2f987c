// SPDX-License-Identifier: MIT
// Peak-rate kernels for AVX-512 (compiled with BASALT_AVX512_FLAGS only).
// The instruction chains are inline asm: with intrinsics the compiler merges
// identical chains or shuffles accumulators through the stack, and then the
// figure measures the compiler, not the CPU.
#include <immintrin.h>

#include <cstring>

#include "cpu/peaks.h"

namespace basalt::cpu {

namespace {
// Horizontal sums through memory (GCC 12 warns on the _mm512_reduce_* helpers).
template <typename T, typename V>
T lane_sum(V v) {
  alignas(64) T lanes[64 / sizeof(T)];
  std::memcpy(lanes, &v, 64);
  T s = 0;
  for (T x : lanes) s += x;
  return s;
}
}  // namespace

// 16 independent chains of one instruction, c_k = op(c_k, a, b): more than
// latency (4-5 cycles) x throughput (2 per cycle), so the ports never wait.
// Two asm statements of 8 (an asm takes at most 30 operands, "+" counts twice).
#define BASALT_CHAIN8(INSN, c0, c1, c2, c3, c4, c5, c6, c7)                                                   \
  asm volatile(INSN " %[b], %[a], %[x0]\n\t" INSN " %[b], %[a], %[x1]\n\t" INSN " %[b], %[a], %[x2]\n\t" INSN \
                    " %[b], %[a], %[x3]\n\t" INSN " %[b], %[a], %[x4]\n\t" INSN " %[b], %[a], %[x5]\n\t" INSN \
                    " %[b], %[a], %[x6]\n\t" INSN " %[b], %[a], %[x7]"                                       \
               : [x0] "+v"(c0), [x1] "+v"(c1), [x2] "+v"(c2), [x3] "+v"(c3), [x4] "+v"(c4), [x5] "+v"(c5), \
                 [x6] "+v"(c6), [x7] "+v"(c7)                                                              \
               : [a] "v"(a), [b] "v"(b))
#define BASALT_CHAINS16(INSN, T, SET1, ADD)                                                                        \
  T a = SET1(3), b = SET1(-2);                                                                                     \
  T c0 = SET1(0), c1 = SET1(1), c2 = SET1(2), c3 = SET1(3), c4 = SET1(4), c5 = SET1(5), c6 = SET1(6), c7 = SET1(7); \
  T c8 = SET1(8), c9 = SET1(9), c10 = SET1(10), c11 = SET1(11), c12 = SET1(12), c13 = SET1(13), c14 = SET1(14);    \
  T c15 = SET1(15);                                                                                                \
  for (int64_t i = 0; i < rounds; ++i) {                                                                           \
    BASALT_CHAIN8(INSN, c0, c1, c2, c3, c4, c5, c6, c7);                                                           \
    BASALT_CHAIN8(INSN, c8, c9, c10, c11, c12, c13, c14, c15);                                                     \
  }                                                                                                                \
  const T s = ADD(ADD(ADD(ADD(c0, c1), ADD(c2, c3)), ADD(ADD(c4, c5), ADD(c6, c7))),                               \
                  ADD(ADD(ADD(c8, c9), ADD(c10, c11)), ADD(ADD(c12, c13), ADD(c14, c15))))

// vpdpbusd: 64 u8 x s8 products summed into 16 int32 lanes.
int64_t int8_vnni_avx512(int64_t rounds) {
  BASALT_CHAINS16("vpdpbusd", __m512i, _mm512_set1_epi32, _mm512_add_epi32);
  return lane_sum<int32_t>(s);
}

// vfmadd231ps: 16 fp32 multiply-adds.
int64_t fp32_fma_avx512(int64_t rounds) {
  BASALT_CHAINS16("vfmadd231ps", __m512, _mm512_set1_ps, _mm512_add_ps);
  return static_cast<int64_t>(lane_sum<float>(s));
}
#undef BASALT_CHAINS16
#undef BASALT_CHAIN8

namespace {
// S streams, each 4 x 64 bytes per step into its own accumulators.
template <int S>
uint64_t read_streams(const uint8_t* p, size_t bytes) {
  const size_t part = bytes / S;
  __m512i acc[S][4];
  for (auto& a : acc)
    for (auto& v : a) v = _mm512_setzero_si512();
  for (size_t off = 0; off < part; off += 256)
    for (int s = 0; s < S; ++s) {
      const uint8_t* q = p + s * part + off;
      acc[s][0] = _mm512_add_epi64(acc[s][0], _mm512_load_si512(q));
      acc[s][1] = _mm512_add_epi64(acc[s][1], _mm512_load_si512(q + 64));
      acc[s][2] = _mm512_add_epi64(acc[s][2], _mm512_load_si512(q + 128));
      acc[s][3] = _mm512_add_epi64(acc[s][3], _mm512_load_si512(q + 192));
    }
  __m512i t = _mm512_setzero_si512();
  for (auto& a : acc)
    for (auto& v : a) t = _mm512_add_epi64(t, v);
  return lane_sum<uint64_t>(t);
}
}  // namespace

uint64_t read_avx512(const uint8_t* p, size_t bytes, int streams) {
  switch (streams) {
    case 1: return read_streams<1>(p, bytes);
    case 2: return read_streams<2>(p, bytes);
    default: return read_streams<4>(p, bytes);
  }
}

}  // namespace basalt::cpu
