// SPDX-License-Identifier: MIT
// AVX-512 pieces shared by the qa kernels that use them (matmul_qa_avx512.cpp,
// matmul_qa_amx.cpp): loads of scales and activations, and the unpacking of a
// block's codes into 8 vectors of unsigned bytes. In an anonymous namespace,
// like qa_spans.h: each kernel file gets its own copy.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

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
inline __m512i bcast4(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm512_set1_epi32(v);
}
// Shift each 32-bit lane left by s (right if negative).
template <int S>
inline __m512i shift(__m512i v) {
  if constexpr (S >= 0) return _mm512_slli_epi32(v, S);
  else return _mm512_srli_epi32(v, -S);
}

// a | (b & mask) in one instruction (vpternlogd: 0xF0 | (0xCC & 0xAA) = 0xF8).
inline __m512i merge(__m512i a, __m512i b, __m512i mask) { return _mm512_ternarylogic_epi32(a, b, mask, 0xF8); }

// The 8 u8 vectors of one block: lo[c] pairs with x[4c..4c+3], hi[c] with x[16+4c..].
template <int Bits>
inline void unpack(const uint8_t* qt, __m512i lo[4], __m512i hi[4]) {
  if constexpr (Bits == 8) {
    for (int c = 0; c < 4; ++c) {
      lo[c] = _mm512_load_si512(qt + 64 * c);
      hi[c] = _mm512_load_si512(qt + 64 * (c + 4));
    }
    return;
  } else {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_load_si512(qt + 64 * c);
      lo[c] = _mm512_and_si512(v, m4);
      hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    if constexpr (Bits == 5) {
      const __m512i h = _mm512_load_si512(qt + 256), b4 = _mm512_set1_epi8(0x10);
      // bit c of byte k -> bit 4 (low half); bit 4+c -> bit 4 (high half)
      lo[0] = merge(lo[0], shift<4>(h), b4);
      lo[1] = merge(lo[1], shift<3>(h), b4);
      lo[2] = merge(lo[2], shift<2>(h), b4);
      lo[3] = merge(lo[3], shift<1>(h), b4);
      hi[0] = merge(hi[0], h, b4);
      hi[1] = merge(hi[1], shift<-1>(h), b4);
      hi[2] = merge(hi[2], shift<-2>(h), b4);
      hi[3] = merge(hi[3], shift<-3>(h), b4);
    }
    if constexpr (Bits == 6) {
      // bits 2c, 2c+1 of byte k -> bits 4, 5; low half in chunk 4, high half in chunk 5
      const __m512i b45 = _mm512_set1_epi8(0x30);
      for (int half = 0; half < 2; ++half) {
        __m512i* v = half ? hi : lo;
        const __m512i h = _mm512_load_si512(qt + 256 + 64 * half);
        v[0] = merge(v[0], shift<4>(h), b45);
        v[1] = merge(v[1], shift<2>(h), b45);
        v[2] = merge(v[2], h, b45);
        v[3] = merge(v[3], shift<-2>(h), b45);
      }
    }
  }
}

}  // namespace
}  // namespace basalt::kernels
