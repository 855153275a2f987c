// SPDX-License-Identifier: MIT
// The small SIMD interface the x86 kernel templates are written over
// (attention_x86.inc, rows_x86.inc), on 512-bit vectors. Include only from
// files compiled with AVX-512 flags (*_avx512.cpp).
// GCC 12 warns about its own AVX-512 headers (their self-initialized
// "undefined" vectors, https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105593).
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

namespace basalt::cpu::kernels::avx512 {
namespace {

struct Simd {
  using V = __m512;
  static constexpr int kRegs = 32;  // vector registers
  static constexpr int W = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V x) { _mm512_storeu_ps(p, x); }
  static V load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store_f16(uint16_t* p, V x) {  // rounded to nearest even
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static V load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // W 4-bit codes: bits [shift, shift + 4) of W bytes, as floats 0..15.
  static V load_u4(const uint8_t* p, int shift) {
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srl_epi32(bytes, _mm_cvtsi32_si128(shift)), _mm512_set1_epi32(15)));
  }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static float hsum(V x) { return _mm512_reduce_add_ps(x); }
  static float hmax(V x) { return _mm512_reduce_max_ps(x); }
  static bool any_greater(V x, float t) { return _mm512_cmp_ps_mask(x, _mm512_set1_ps(t), _CMP_GT_OQ) != 0; }
  // Sum of x[i]^2 in double (each square exact), four accumulators of 8 lanes.
  static double sum_squares(const float* x, int64_t n) {
    __m512d a[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
      for (int j = 0; j < 4; ++j) {
        const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8 * j));
        a[j] = _mm512_fmadd_pd(v, v, a[j]);
      }
    double s = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a[0], a[1]), _mm512_add_pd(a[2], a[3])));
    for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
    return s;
  }

  // e^x = 2^n e^f with n = round(x / ln 2), f = x - n ln 2 in [-ln2/2, ln2/2]
  // (ln 2 in two parts, Cody-Waite), e^f by its Taylor polynomial of degree 6
  // (relative error < 2e-7 there), 2^n applied with vscalefps. Below -87.3
  // (e^x under FLT_MIN, and -inf) the result is 0, never a denormal: softmax
  // weights that small are nothing next to the largest (which is 1), and
  // denormal operands cost the FMAs that use them ~100 cycles each. NaN stays NaN.
  static V exp(V x) {
    const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ);  // x >= -87.3 or NaN
    x = _mm512_min_ps(_mm512_set1_ps(88.7f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));  // NaN passes (2nd operand)
    const V n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V f = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    f = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), f);
    V p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(normal, _mm512_scalef_ps(p, n));
  }

  static V abs(V x) { return _mm512_abs_ps(x); }
  // Rounds the W lanes to the nearest integer (ties to even, like nearbyint),
  // stores them as int8 (|x| <= 127 here) and returns their sum.
  static int32_t store_i8(int8_t* q, V x) {
    const __m512i i = _mm512_cvtps_epi32(x);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(i));
    return _mm512_reduce_add_epi32(i);
  }
};

}  // namespace
}  // namespace basalt::cpu::kernels::avx512
