// SPDX-License-Identifier: MIT
// cap tanh(x / cap) over the SIMD interface of simd_avx2.h / simd_avx512.h:
// Gemma 2's soft-capping of attention scores (attention_kernel.inc) and of
// logits (rows_kernel.inc). As (e - 1) / (e + 1) with e = e^(2x / cap): 1 where
// e is huge, -1 where it underflows; near 0 an absolute error of ~cap x 1e-7
// (tanh's relative precision is lost there, not the value's).
#pragma once

namespace basalt::cpu::kernels {

template <typename Simd>
typename Simd::V soft_cap(typename Simd::V x, float cap) {
  const typename Simd::V e = Simd::exp(Simd::mul(x, Simd::set1(2 / cap))), one = Simd::set1(1);
  return Simd::mul(Simd::set1(cap), Simd::div(Simd::sub(e, one), Simd::add(e, one)));
}

}  // namespace basalt::cpu::kernels
