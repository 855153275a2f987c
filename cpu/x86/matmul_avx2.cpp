// SPDX-License-Identifier: MIT
// AVX2 matmul kernels (this file alone is compiled with AVX2 flags).
#define BASALT_KERNEL_NS avx2
#include "cpu/x86/matmul_x86.inc"

namespace basalt::kernels {
MatmulKernel matmul_avx2(const Weight& w) {
  return w.format == WeightFormat::qa ? matmul_qa_avx2(w) : avx2::dense_lookup(w);
}
}  // namespace basalt::kernels

namespace basalt::kernels {
void widen_f16_avx2(const uint8_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = f16_to_f32(h);
  }
}
}  // namespace basalt::kernels
