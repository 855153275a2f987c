// SPDX-License-Identifier: MIT
// Dense matmul (f32, f16, bf16) on ARM: cpu/matmul_dense.inc over 8 floats a
// step as two 128-bit vectors (two FMA chains per row and token).
#include <arm_neon.h>

#include <cstdint>

#include "quant/weight.h"

#define BASALT_KERNEL_NS neon
namespace basalt::kernels::neon {
namespace {

struct Dense8 {
  struct V {
    float32x4_t lo, hi;
  };
  static V zero() { return {vdupq_n_f32(0), vdupq_n_f32(0)}; }
  static V load(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
  // 8 weights of a row from element i, converted to f32.
  template <WeightFormat F>
  static V load_row(const uint8_t* row, int64_t i) {
    if constexpr (F == WeightFormat::f32) {
      return load(reinterpret_cast<const float*>(row) + i);
    } else {
      const uint16x8_t h = vld1q_u16(reinterpret_cast<const uint16_t*>(row + 2 * i));
      if constexpr (F == WeightFormat::f16) {
        const float16x8_t f = vreinterpretq_f16_u16(h);
        return {vcvt_f32_f16(vget_low_f16(f)), vcvt_high_f32_f16(f)};
      } else {  // bf16: the high half of an f32
        return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)), vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))};
      }
    }
  }
  static V fma(V a, V b, V c) { return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }  // a * b + c
  static float hsum(V v) { return vaddvq_f32(vaddq_f32(v.lo, v.hi)); }
};

}  // namespace
}  // namespace basalt::kernels::neon

#include "cpu/matmul_dense.inc"

namespace basalt::kernels {
MatmulKernel matmul_dense_neon(const Weight& w) { return neon::dense_lookup(w); }
}  // namespace basalt::kernels
