// SPDX-License-Identifier: MIT
// AVX-512 pieces shared by the qa kernels that use them (matmul_qa_avx512.cpp,
// matmul_qa_amx.cpp): loads of scales, the int8 dot with a broadcast activation, and the unpacking of a
// block's codes into 8 vectors of unsigned bytes. In an anonymous namespace,
// like qa_spans.h: each kernel file gets its own copy.
#pragma once

#include <immintrin.h>

// GCC 12 warns that the _mm512_undefined_*() inside its own intrinsics may be
// used uninitialized once they are inlined into a kernel
// (https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105593): off for the rest of
// each kernel file that includes this.
#if !defined(__clang__)  // (a GCC warning only)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstdint>

#include "core/util/always_inline.h"

namespace basalt::kernels {
namespace {

inline __m512 load_f16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_u8x16(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 load_i8x16(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
// a + w . (x's 4 bytes in every lane), x as vpdpbusd's embedded broadcast
// operand ({1to16}): GCC 12 keeps _mm512_set1_epi32 + vpdpbusd as two
// instructions, and their count bounded the register block (docs/PERFORMANCE.md 3.1f).
BASALT_ALWAYS_INLINE __m512i dpbusd_x4(__m512i a, __m512i w, const int8_t* x) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(a) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(x)));
  return a;
}
// Shift each 32-bit lane left by s (right if negative).
template <int S>
inline __m512i shift(__m512i v) {
  if constexpr (S >= 0) return _mm512_slli_epi32(v, S);
  else return _mm512_srli_epi32(v, -S);
}

// a | (b & mask) in one instruction (vpternlogd: 0xF0 | (0xCC & 0xAA) = 0xF8).
inline __m512i merge(__m512i a, __m512i b, __m512i mask) { return _mm512_ternarylogic_epi32(a, b, mask, 0xF8); }

// Chunk C of a block's quants unpacked: lo pairs with x[4C..4C+3], hi with
// x[16+4C..] (quant/qa_layout.h). The high bits of 5 and 6 bit codes are
// loaded for each chunk: a load is cheaper than a register in the register
// block of matmul_qa_avx512.cpp, and the same load when unpack() below does
// all four chunks.
template <int Bits, int C>
inline void unpack_chunk(const uint8_t* qt, __m512i& lo, __m512i& hi) {
  if constexpr (Bits == 8) {
    lo = _mm512_load_si512(qt + 64 * C);
    hi = _mm512_load_si512(qt + 64 * (C + 4));
  } else {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i v = _mm512_load_si512(qt + 64 * C);
    lo = _mm512_and_si512(v, m4);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    if constexpr (Bits == 5) {  // bit C of byte k -> bit 4 (low half); bit 4+C -> bit 4 (high half)
      const __m512i h = _mm512_load_si512(qt + 256), b4 = _mm512_set1_epi8(0x10);
      lo = merge(lo, shift<4 - C>(h), b4);
      hi = merge(hi, shift<-C>(h), b4);
    }
    if constexpr (Bits == 6) {  // bits 2C, 2C+1 of byte k -> bits 4, 5; low half in chunk 4, high half in chunk 5
      const __m512i b45 = _mm512_set1_epi8(0x30);
      lo = merge(lo, shift<4 - 2 * C>(_mm512_load_si512(qt + 256)), b45);
      hi = merge(hi, shift<4 - 2 * C>(_mm512_load_si512(qt + 320)), b45);
    }
  }
}

// The 8 u8 vectors of one block: lo[c] pairs with x[4c..4c+3], hi[c] with x[16+4c..].
template <int Bits>
inline void unpack(const uint8_t* qt, __m512i lo[4], __m512i hi[4]) {
  unpack_chunk<Bits, 0>(qt, lo[0], hi[0]);
  unpack_chunk<Bits, 1>(qt, lo[1], hi[1]);
  unpack_chunk<Bits, 2>(qt, lo[2], hi[2]);
  unpack_chunk<Bits, 3>(qt, lo[3], hi[3]);
}

}  // namespace
}  // namespace basalt::kernels
