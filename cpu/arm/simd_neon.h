// SPDX-License-Identifier: MIT
// The small SIMD interface the kernel templates are written over
// (cpu/attention_kernel.inc, cpu/rows_kernel.inc; the x86 versions are
// cpu/x86/simd_avx2.h and simd_avx512.h), on ARM's 128-bit Advanced SIMD
// vectors: 4 floats, 32 registers. AArch64 has these everywhere: no flags.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace basalt::cpu::kernels::neon {
namespace {

struct Simd {
  using V = float32x4_t;
  static constexpr int kRegs = 32;  // vector registers
  static constexpr int W = 4;
  static float f16_to_f32(uint16_t h) {  // one value
    __fp16 x;
    std::memcpy(&x, &h, 2);
    return x;
  }
  static V zero() { return vdupq_n_f32(0); }
  static V set1(float x) { return vdupq_n_f32(x); }
  static V load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, V x) { vst1q_f32(p, x); }
  static V load_f16(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static void store_f16(uint16_t* p, V x) {  // rounded to nearest even (the default FPCR)
    vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(x)));
  }
  static V load_i8(const int8_t* p) {
    int32_t w;
    std::memcpy(&w, p, 4);
    const int8x8_t b = vreinterpret_s8_s32(vdup_n_s32(w));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(b))));
  }
  // W 4-bit codes: bits [shift, shift + 4) of W bytes, as floats 0..15.
  static V load_u4(const uint8_t* p, int shift) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    const uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(w));
    const uint32x4_t v = vshlq_u32(vmovl_u16(vget_low_u16(vmovl_u8(b))), vdupq_n_s32(-shift));
    return vcvtq_f32_u32(vandq_u32(v, vdupq_n_u32(15)));
  }
  static V add(V a, V b) { return vaddq_f32(a, b); }
  static V sub(V a, V b) { return vsubq_f32(a, b); }
  static V div(V a, V b) { return vdivq_f32(a, b); }
  static V mul(V a, V b) { return vmulq_f32(a, b); }
  static V fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }  // a * b + c
  static V max(V a, V b) { return vmaxq_f32(a, b); }
  static float hsum(V x) { return vaddvq_f32(x); }
  static float hmax(V x) { return vmaxvq_f32(x); }
  static bool any_greater(V x, float t) { return vmaxvq_u32(vcgtq_f32(x, vdupq_n_f32(t))) != 0; }
  // Sum of x[i]^2 in double (each square exact), four accumulators of 2 lanes.
  static double sum_squares(const float* x, int64_t n) {
    float64x2_t a[4] = {vdupq_n_f64(0), vdupq_n_f64(0), vdupq_n_f64(0), vdupq_n_f64(0)};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 2; ++j) {
        const float32x4_t v = vld1q_f32(x + i + 4 * j);
        const float64x2_t lo = vcvt_f64_f32(vget_low_f32(v)), hi = vcvt_high_f64_f32(v);
        a[2 * j] = vfmaq_f64(a[2 * j], lo, lo);
        a[2 * j + 1] = vfmaq_f64(a[2 * j + 1], hi, hi);
      }
    double s = vaddvq_f64(vaddq_f64(vaddq_f64(a[0], a[1]), vaddq_f64(a[2], a[3])));
    for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
    return s;
  }

  // e^x as simd_avx2.h's (the same constants and steps): 2^n e^f, n = round(x
  // / ln 2), f by Cody-Waite, e^f a degree-5 polynomial, 2^n in the exponent
  // field; 0 below -87.3, x clamped to 88.3, NaN stays NaN.
  static V exp(V x) {
    const uint32x4_t under = vcltq_f32(x, vdupq_n_f32(-87.3f));
    x = vminq_f32(vdupq_n_f32(88.3f), x);  // NaN passes
    const V n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504f)));
    V f = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    f = vfmsq_f32(f, n, vdupq_n_f32(-2.12194440e-4f));
    V p = vdupq_n_f32(8.290302940e-03f);
    p = vfmaq_f32(vdupq_n_f32(4.189792275e-02f), p, f);
    p = vfmaq_f32(vdupq_n_f32(1.666763574e-01f), p, f);
    p = vfmaq_f32(vdupq_n_f32(4.999915063e-01f), p, f);
    p = vfmaq_f32(vdupq_n_f32(9.999997020e-01f), p, f);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, f);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(vmulq_f32(p, vreinterpretq_f32_s32(e))), under));
  }

  static V abs(V x) { return vabsq_f32(x); }
  // The row kernels' quantize takes every block one at a time here.
  static int64_t quantize_blocks(const float*, int64_t, int8_t*, float*, int16_t*) { return 0; }
  // Rounds the W lanes to the nearest integer (ties to even, like nearbyint),
  // stores them as int8 (|x| <= 127 here) and returns their sum.
  static int32_t store_i8(int8_t* q, V x) {
    const int32x4_t i = vcvtnq_s32_f32(x);
    const int16x4_t h = vqmovn_s32(i);
    const int8x8_t b = vqmovn_s16(vcombine_s16(h, h));
    vst1_lane_s32(reinterpret_cast<int32_t*>(q), vreinterpret_s32_s8(b), 0);
    return vaddvq_s32(i);
  }
};

}  // namespace
}  // namespace basalt::cpu::kernels::neon
