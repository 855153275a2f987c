// SPDX-License-Identifier: MIT
// Peak-rate kernels for AVX2 (compiled with BASALT_AVX2_FLAGS only). The
// instruction chains are inline asm, as in peaks_avx512.cpp.
#include <immintrin.h>

#include <cstring>

#include "cpu/peaks.h"

namespace basalt::cpu {

namespace {
template <typename T, typename V>
T lane_sum(V v) {
  alignas(32) T lanes[32 / sizeof(T)];
  std::memcpy(lanes, &v, 32);
  T s = 0;
  for (T x : lanes) s += x;
  return s;
}
}  // namespace

// The AVX2 int8 dot product of the matmul kernels: vpmaddubsw (32 u8 x s8
// products, pairs summed to i16), vpmaddwd by ones (to i32), vpaddd into one
// of 8 accumulators. Only the adds chain; the two multiplies share two ports,
// which bound the rate. 4 temporaries (renamed anyway) keep it in 16 registers.
int64_t int8_maddubs_avx2(int64_t rounds) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  __m256i c0 = _mm256_set1_epi32(0), c1 = _mm256_set1_epi32(1), c2 = _mm256_set1_epi32(2), c3 = _mm256_set1_epi32(3);
  __m256i c4 = _mm256_set1_epi32(4), c5 = _mm256_set1_epi32(5), c6 = _mm256_set1_epi32(6), c7 = _mm256_set1_epi32(7);
  __m256i t0, t1, t2, t3;
#define BASALT_STEP(t, c) \
  "vpmaddubsw %[b], %[a], %[" #t "]\n\tvpmaddwd %[ones], %[" #t "], %[" #t "]\n\tvpaddd %[" #t "], %[" #c "], %[" #c "]\n\t"
  for (int64_t i = 0; i < rounds; ++i)
    asm volatile(BASALT_STEP(t0, c0) BASALT_STEP(t1, c1) BASALT_STEP(t2, c2) BASALT_STEP(t3, c3)
                 BASALT_STEP(t0, c4) BASALT_STEP(t1, c5) BASALT_STEP(t2, c6) BASALT_STEP(t3, c7)
                 : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4), [c5] "+x"(c5),
                   [c6] "+x"(c6), [c7] "+x"(c7), [t0] "=&x"(t0), [t1] "=&x"(t1), [t2] "=&x"(t2), [t3] "=&x"(t3)
                 : [a] "x"(a), [b] "x"(b), [ones] "x"(ones));
#undef BASALT_STEP
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)),
                                     _mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7)));
  return lane_sum<int32_t>(s);
}

// AVX-VNNI (the avxvnni kernels): one VEX vpdpbusd does the 32 u8 x s8
// products and the adds of the three above; 10 chains cover its latency (5)
// at two per cycle. Inline asm with {vex} (written %{vex%}: braces are asm
// dialect markers), so no -mavxvnni is needed here.
int64_t int8_vnni_avx2(int64_t rounds) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  __m256i c0 = _mm256_set1_epi32(0), c1 = _mm256_set1_epi32(1), c2 = _mm256_set1_epi32(2), c3 = _mm256_set1_epi32(3);
  __m256i c4 = _mm256_set1_epi32(4), c5 = _mm256_set1_epi32(5), c6 = _mm256_set1_epi32(6), c7 = _mm256_set1_epi32(7);
  __m256i c8 = _mm256_set1_epi32(8), c9 = _mm256_set1_epi32(9);
#if defined(BASALT_AVXVNNI_AS_EVEX)  // CMake's BASALT_AVXVNNI_AS_EVEX: the AVX-512 encoding
#define BASALT_STEP(c) "vpdpbusd %[b], %[a], %[" #c "]\n\t"
#else
#define BASALT_STEP(c) "%{vex%} vpdpbusd %[b], %[a], %[" #c "]\n\t"
#endif
  for (int64_t i = 0; i < rounds; ++i)
    asm volatile(BASALT_STEP(c0) BASALT_STEP(c1) BASALT_STEP(c2) BASALT_STEP(c3) BASALT_STEP(c4) BASALT_STEP(c5)
                 BASALT_STEP(c6) BASALT_STEP(c7) BASALT_STEP(c8) BASALT_STEP(c9)
                 : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4), [c5] "+x"(c5),
                   [c6] "+x"(c6), [c7] "+x"(c7), [c8] "+x"(c8), [c9] "+x"(c9)
                 : [a] "x"(a), [b] "x"(b));
#undef BASALT_STEP
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)),
                                     _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7)),
                                                      _mm256_add_epi32(c8, c9)));
  return lane_sum<int32_t>(s);
}

// 12 independent vfmadd231ps chains (latency 4, two per cycle: 8 would do;
// 16 registers in all without AVX-512).
int64_t fp32_fma_avx2(int64_t rounds) {
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-3f);
  __m256 c0 = _mm256_set1_ps(0), c1 = _mm256_set1_ps(1), c2 = _mm256_set1_ps(2), c3 = _mm256_set1_ps(3);
  __m256 c4 = _mm256_set1_ps(4), c5 = _mm256_set1_ps(5), c6 = _mm256_set1_ps(6), c7 = _mm256_set1_ps(7);
  __m256 c8 = _mm256_set1_ps(8), c9 = _mm256_set1_ps(9), c10 = _mm256_set1_ps(10), c11 = _mm256_set1_ps(11);
#define BASALT_FMA(c) "vfmadd231ps %[b], %[a], %[" #c "]\n\t"
  for (int64_t i = 0; i < rounds; ++i)
    asm volatile(BASALT_FMA(c0) BASALT_FMA(c1) BASALT_FMA(c2) BASALT_FMA(c3) BASALT_FMA(c4) BASALT_FMA(c5)
                 BASALT_FMA(c6) BASALT_FMA(c7) BASALT_FMA(c8) BASALT_FMA(c9) BASALT_FMA(c10) BASALT_FMA(c11)
                 : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4), [c5] "+x"(c5),
                   [c6] "+x"(c6), [c7] "+x"(c7), [c8] "+x"(c8), [c9] "+x"(c9), [c10] "+x"(c10), [c11] "+x"(c11)
                 : [a] "x"(a), [b] "x"(b));
#undef BASALT_FMA
  const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                                               _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7))),
                                 _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  return static_cast<int64_t>(lane_sum<float>(s));
}

namespace {
// S streams, each 4 x 32 bytes per step into its own accumulators.
template <int S>
uint64_t read_streams(const uint8_t* p, size_t bytes) {
  const size_t part = bytes / S;
  __m256i acc[S][4];
  for (auto& a : acc)
    for (auto& v : a) v = _mm256_setzero_si256();
  for (size_t off = 0; off < part; off += 128)
    for (int s = 0; s < S; ++s) {
      const __m256i* q = reinterpret_cast<const __m256i*>(p + s * part + off);
      acc[s][0] = _mm256_add_epi64(acc[s][0], _mm256_load_si256(q));
      acc[s][1] = _mm256_add_epi64(acc[s][1], _mm256_load_si256(q + 1));
      acc[s][2] = _mm256_add_epi64(acc[s][2], _mm256_load_si256(q + 2));
      acc[s][3] = _mm256_add_epi64(acc[s][3], _mm256_load_si256(q + 3));
    }
  __m256i t = _mm256_setzero_si256();
  for (auto& a : acc)
    for (auto& v : a) t = _mm256_add_epi64(t, v);
  return lane_sum<uint64_t>(t);
}
}  // namespace

uint64_t read_avx2(const uint8_t* p, size_t bytes, int streams) {
  switch (streams) {
    case 1: return read_streams<1>(p, bytes);
    case 2: return read_streams<2>(p, bytes);
    default: return read_streams<4>(p, bytes);
  }
}

}  // namespace basalt::cpu
