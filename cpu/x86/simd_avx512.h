// SPDX-License-Identifier: MIT
// The small SIMD interface the x86 kernel templates are written over
// (attention_kernel.inc, rows_kernel.inc), on 512-bit vectors. Include only from
// files compiled with AVX-512 flags (*_avx512.cpp).
// GCC 12 warns about its own AVX-512 headers (their self-initialized
// "undefined" vectors, https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105593).
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // (a GCC warning only)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
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
  static float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }  // one value (F16C)
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
  // (ln 2 in two parts, Cody-Waite), e^f by a degree-5 polynomial fitted for
  // relative error (1 at f = 0 exactly; 1.6e-7 over the range, where the
  // degree-6 Taylor series it replaced gave 2.2e-7 with an FMA more), 2^n
  // applied with vscalefps. Below -87.3 (e^x under FLT_MIN, and -inf) the
  // result is 0, never a denormal: softmax weights that small are nothing
  // next to the largest (which is 1), and denormal operands cost the FMAs
  // that use them ~100 cycles each; the mask covers whatever the arithmetic
  // made there. NaN stays NaN.
  static V exp(V x) {
    const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ);  // x >= -87.3 or NaN
    x = _mm512_min_ps(_mm512_set1_ps(88.7f), x);  // NaN passes (2nd operand)
    const V n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V f = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    f = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), f);
    V p = _mm512_set1_ps(8.290302940e-03f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(4.189792275e-02f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.666763574e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(4.999915063e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.999997020e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(normal, p, n);
  }

  // e^x where the result is rounded to bf16 next (softmax weights for the
  // AMX tiles): 2^t, t = x log2(e), as 2^floor(t) (vscalefps) times 2^f,
  // f = t - floor(t) in [0, 1) (vreduceps), by a degree-4 polynomial (1 at f =
  // 0 exactly). Relative error below 1e-5 (t's rounding included), 200 times
  // under bf16's half step: 8 vector ops where exp() takes 15 (the exps were
  // a quarter of the tiles' prefill attention at depth, docs/PERFORMANCE.md
  // 6.16). 0 below -87.3 and at -inf, as exp(); NaN stays NaN.
  static V exp_for_bf16(V x) {
    const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ);  // x >= -87.3 or NaN
    const V t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504f));
    const V f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);  // t - floor(t)
    V p = _mm512_set1_ps(1.342664752e-02f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.224253237e-02f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.412801832e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.930448413e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(normal, p, t);  // x 2^floor(t)
  }

  static V abs(V x) { return _mm512_abs_ps(x); }
  // rows_kernel.inc's quantize for the first blocks of 32 values of x, four at a
  // time, with the same operations lane by lane (max of |x|, d = amax / 127,
  // round(x * (1 / d)), d through f16); the blocks' maxima and half sums reduced
  // together, across vectors, where one block at a time reduced each within
  // its own. Returns the blocks done (a multiple of 4; the caller does the rest).
  static int64_t quantize_blocks(const float* x, int64_t nb, int8_t* q, float* d, int16_t* sum16) {
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
      const float* xb = x + 32 * b;
      __m512 v[8], a[4];
      for (int j = 0; j < 8; ++j) v[j] = _mm512_loadu_ps(xb + 16 * j);
      for (int k = 0; k < 4; ++k) a[k] = _mm512_max_ps(_mm512_abs_ps(v[2 * k]), _mm512_abs_ps(v[2 * k + 1]));
      // Block k's maxima into 128-bit lane k, then across the lane: every float of lane k its amax.
      const __m512 m01 = _mm512_max_ps(_mm512_shuffle_f32x4(a[0], a[1], 0x44), _mm512_shuffle_f32x4(a[0], a[1], 0xEE));
      const __m512 m23 = _mm512_max_ps(_mm512_shuffle_f32x4(a[2], a[3], 0x44), _mm512_shuffle_f32x4(a[2], a[3], 0xEE));
      __m512 m = _mm512_max_ps(_mm512_shuffle_f32x4(m01, m23, 0x88), _mm512_shuffle_f32x4(m01, m23, 0xDD));
      m = _mm512_max_ps(m, _mm512_permute_ps(m, 0x4E));
      m = _mm512_max_ps(m, _mm512_permute_ps(m, 0xB1));
      const __m512 db = _mm512_div_ps(m, _mm512_set1_ps(127.0f));
      const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(db, _mm512_setzero_ps(), _CMP_NEQ_OQ), _mm512_set1_ps(1.0f), db);
      // Block k's inverse scale in every lane (immediates spelled out: clang at -O1 wants constants).
      const __m512 idk[4] = {_mm512_shuffle_f32x4(id, id, 0x00), _mm512_shuffle_f32x4(id, id, 0x55),
                             _mm512_shuffle_f32x4(id, id, 0xAA), _mm512_shuffle_f32x4(id, id, 0xFF)};
      __m512i r[8];
      for (int j = 0; j < 8; ++j) r[j] = _mm512_cvtps_epi32(_mm512_mul_ps(v[j], idk[j / 2]));
      // Bytes: packs interleave the four vectors' 4-value groups lane by lane; vpermd puts them back.
      const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
      for (int h = 0; h < 2; ++h) {
        const __m512i p = _mm512_packs_epi16(_mm512_packs_epi32(r[4 * h], r[4 * h + 1]), _mm512_packs_epi32(r[4 * h + 2], r[4 * h + 3]));
        _mm512_storeu_si512(q + 32 * b + 64 * h, _mm512_permutexvar_epi32(order, p));
      }
      // The eight half sums: vector j's lanes into 128-bit lane j % 4 (u[j / 4]), then across it.
      __m512i t[4], u[2];
      for (int k = 0; k < 4; ++k)
        t[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(r[2 * k], r[2 * k + 1], 0x44), _mm512_shuffle_i32x4(r[2 * k], r[2 * k + 1], 0xEE));
      for (int k = 0; k < 2; ++k)
        u[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(t[2 * k], t[2 * k + 1], 0x88), _mm512_shuffle_i32x4(t[2 * k], t[2 * k + 1], 0xDD));
      __m512i w = _mm512_add_epi32(_mm512_unpacklo_epi32(u[0], u[1]), _mm512_unpackhi_epi32(u[0], u[1]));
      w = _mm512_add_epi32(w, _mm512_shuffle_epi32(w, _MM_PERM_BADC));  // lane k: vector k's sum, vector 4 + k's
      const __m512i sums = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0), w);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(sum16 + 2 * b), _mm256_castsi256_si128(_mm512_cvtepi32_epi16(sums)));
      // d through f16 (round to nearest even), one per block.
      const __m512 dh = _mm512_cvtph_ps(_mm512_cvtps_ph(db, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      _mm_storeu_ps(d + b, _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), dh)));
    }
    return b;
  }
  // Rounds the W lanes to the nearest integer (ties to even, like nearbyint),
  // stores them as int8 (|x| <= 127 here) and returns their sum.
  static void store_i16(int16_t* q, V x) {  // rounded to nearest even, saturated
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(x)));
  }
  static int32_t store_i8(int8_t* q, V x) {
    const __m512i i = _mm512_cvtps_epi32(x);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(i));
    return _mm512_reduce_add_epi32(i);
  }
};

}  // namespace
}  // namespace basalt::cpu::kernels::avx512
