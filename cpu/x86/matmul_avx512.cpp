// SPDX-License-Identifier: MIT
// AVX-512 VNNI matmul kernels (this file alone is compiled with AVX-512 flags).
#define BASALT_KERNEL_NS avx512
#include "cpu/x86/matmul_x86.inc"

namespace basalt::kernels {
MatmulKernel matmul_avx512(const Weight& w) {
  return w.format == WeightFormat::qa ? matmul_qa_avx512(w) : avx512::dense_lookup(w);
}
}  // namespace basalt::kernels
