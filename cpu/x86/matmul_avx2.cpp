// SPDX-License-Identifier: MIT
// AVX2 matmul kernels (this file alone is compiled with AVX2 flags).
#define BASALT_KERNEL_NS avx2
#include "cpu/x86/matmul_x86.inc"

namespace basalt::kernels {
MatmulKernel matmul_avx2(const Weight& w) {
  return w.format == WeightFormat::qa ? matmul_qa_avx2(w) : avx2::dense_lookup(w);
}
}  // namespace basalt::kernels
