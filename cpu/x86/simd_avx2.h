// SPDX-License-Identifier: MIT
// The small SIMD interface the x86 kernel templates are written over
// (attention_kernel.inc, rows_kernel.inc), on 256-bit vectors. Include only from
// files compiled with AVX2 + FMA + F16C flags (*_avx2.cpp).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace basalt::cpu::kernels::avx2 {
namespace {

struct Simd {
  using V = __m256;
  static constexpr int kRegs = 16;  // vector registers
  static constexpr int W = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }  // one value (F16C)
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V x) { _mm256_storeu_ps(p, x); }
  static V load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store_f16(uint16_t* p, V x) {  // rounded to nearest even
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static V load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  // W 4-bit codes: bits [shift, shift + 4) of W bytes, as floats 0..15.
  static V load_u4(const uint8_t* p, int shift) {
    const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(bytes, _mm_cvtsi32_si128(shift)), _mm256_set1_epi32(15)));
  }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static float hsum(V x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static float hmax(V x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
  }
  static bool any_greater(V x, float t) {
    return _mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_set1_ps(t), _CMP_GT_OQ)) != 0;
  }
  // Sum of x[i]^2 in double (each square exact), four accumulators of 4 lanes.
  static double sum_squares(const float* x, int64_t n) {
    __m256d a[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      for (int j = 0; j < 4; ++j) {
        const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * j));
        a[j] = _mm256_fmadd_pd(v, v, a[j]);
      }
    const __m256d t = _mm256_add_pd(_mm256_add_pd(a[0], a[1]), _mm256_add_pd(a[2], a[3]));
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
    double s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
    return s;
  }

  // e^x = 2^n e^f with n = round(x / ln 2), f = x - n ln 2 in [-ln2/2, ln2/2]
  // (ln 2 in two parts, Cody-Waite), e^f by a degree-5 polynomial fitted for
  // relative error (as simd_avx512.h's), 2^n built in the exponent field. x
  // is clamped to 88.3 so that 2^n stays a float; below -87.3 (where e^x is
  // under FLT_MIN, and for -inf) the result is 0, whatever the exponent field
  // got there; NaN stays NaN.
  static V exp(V x) {
    const V under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_set1_ps(88.3f), x);  // NaN passes (2nd operand)
    const V n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V f = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    f = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), f);
    V p = _mm256_set1_ps(8.290302940e-03f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(4.189792275e-02f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.666763574e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(4.999915063e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.999997020e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
  }

  static V abs(V x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
  // rows_kernel.inc's quantize for the first blocks of 32 values of x, four at a
  // time (as simd_avx512.h's): the blocks' maxima and their eight half sums
  // reduced across vectors together. Returns the blocks done (a multiple of 4).
  static int64_t quantize_blocks(const float* x, int64_t nb, int8_t* q, float* d, int16_t* sum16) {
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
      const float* xb = x + 32 * b;
      __m256 a[4];
      for (int k = 0; k < 4; ++k) {
        a[k] = abs(_mm256_loadu_ps(xb + 32 * k));
        for (int j = 1; j < 4; ++j) a[k] = _mm256_max_ps(a[k], abs(_mm256_loadu_ps(xb + 32 * k + 8 * j)));
      }
      // Every float of 128-bit lane 0 block 0's or 2's amax (elements 0-1, 2-3), of lane 1 block 1's or 3's.
      const __m256 m01 = _mm256_max_ps(_mm256_permute2f128_ps(a[0], a[1], 0x20), _mm256_permute2f128_ps(a[0], a[1], 0x31));
      const __m256 m23 = _mm256_max_ps(_mm256_permute2f128_ps(a[2], a[3], 0x20), _mm256_permute2f128_ps(a[2], a[3], 0x31));
      __m256 m = _mm256_max_ps(_mm256_shuffle_ps(m01, m23, 0x44), _mm256_shuffle_ps(m01, m23, 0xEE));
      m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, 0xB1));
      const __m256 db = _mm256_div_ps(m, _mm256_set1_ps(127.0f));
      const __m256 id = _mm256_and_ps(_mm256_cmp_ps(db, _mm256_setzero_ps(), _CMP_NEQ_OQ), _mm256_div_ps(_mm256_set1_ps(1.0f), db));
      __m256i half[8];  // each half block's 16 codes summed down to 8 lanes
      // Block k's inverse scale (element 2 (k / 2) of lane k % 2) everywhere; immediates spelled out,
      // as clang at -O1 wants constants.
      const __m256 id0 = _mm256_permute_ps(id, 0x00), id2 = _mm256_permute_ps(id, 0xAA);
      const __m256 idk[4] = {_mm256_permute2f128_ps(id0, id0, 0x00), _mm256_permute2f128_ps(id0, id0, 0x11),
                             _mm256_permute2f128_ps(id2, id2, 0x00), _mm256_permute2f128_ps(id2, id2, 0x11)};
      for (int k = 0; k < 4; ++k) {
        __m256i r[4];
        for (int j = 0; j < 4; ++j) r[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 32 * k + 8 * j), idk[k]));
        // packs interleave the 128-bit lanes' 4-value groups; vpermd puts them back.
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * (b + k)),
                            _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        half[2 * k] = _mm256_add_epi32(r[0], r[1]);
        half[2 * k + 1] = _mm256_add_epi32(r[2], r[3]);
      }
      // hadd trees: u[i] lane 0 holds halves 4i..4i+3's sums of their lanes 0-3, lane 1 of 4-7.
      __m256i u[2];
      for (int i = 0; i < 2; ++i)
        u[i] = _mm256_hadd_epi32(_mm256_hadd_epi32(half[4 * i], half[4 * i + 1]), _mm256_hadd_epi32(half[4 * i + 2], half[4 * i + 3]));
      const __m256i w = _mm256_add_epi32(_mm256_permute2x128_si256(u[0], u[1], 0x20), _mm256_permute2x128_si256(u[0], u[1], 0x31));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(sum16 + 2 * b),
                       _mm_packs_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
      // d through f16 (round to nearest even): blocks 0-3 at elements 0, 4, 2, 6.
      const __m256 dh = _mm256_cvtph_ps(_mm256_cvtps_ph(db, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      _mm_storeu_ps(d + b, _mm256_castps256_ps128(_mm256_permutevar8x32_ps(dh, _mm256_setr_epi32(0, 4, 2, 6, 0, 0, 0, 0))));
    }
    return b;
  }
  // Rounds the W lanes to the nearest integer (ties to even, like nearbyint),
  // stores them as int8 (|x| <= 127 here) and returns their sum.
  static void store_i16(int16_t* q, V x) {  // rounded to nearest even, saturated
    const __m256i i = _mm256_cvtps_epi32(x);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1)));
  }
  static int32_t store_i8(int8_t* q, V x) {
    const __m256i i = _mm256_cvtps_epi32(x);
    const __m128i lo = _mm256_castsi256_si128(i), hi = _mm256_extracti128_si256(i, 1);
    const __m128i w16 = _mm_packs_epi32(lo, hi);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q), _mm_packs_epi16(w16, w16));
    __m128i s = _mm_add_epi32(lo, hi);
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
  }
};

}  // namespace
}  // namespace basalt::cpu::kernels::avx2
