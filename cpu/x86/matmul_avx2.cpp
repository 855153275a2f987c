// SPDX-License-Identifier: MIT
// AVX2 matmul kernels (this file alone is compiled with AVX2 flags).
#define BASALT_KERNEL_NS avx2
#include "cpu/x86/matmul_x86.inc"

namespace basalt::kernels {
MatmulKernel matmul_avx2(const Weight& w) { return avx2::lookup(w); }
}  // namespace basalt::kernels
