// SPDX-License-Identifier: MIT
// Row kernels (cpu/rows.h) on the avx2 SIMD interface: cpu/rows_kernel.inc.
#include "cpu/x86/simd_avx2.h"

#define BASALT_KERNEL_NS avx2
#include "cpu/rows_kernel.inc"

namespace basalt::cpu::kernels {
const RowKernels* rows_avx2() { return avx2::rows_table(); }
}  // namespace basalt::cpu::kernels
