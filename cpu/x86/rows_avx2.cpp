// SPDX-License-Identifier: MIT
// Row kernels (cpu/rows.h) on the avx2 SIMD interface: cpu/x86/rows_x86.inc.
#include "cpu/x86/simd_avx2.h"

#define BASALT_KERNEL_NS avx2
#include "cpu/x86/rows_x86.inc"

namespace basalt::cpu::kernels {
const RowKernels* rows_avx2() { return avx2::rows_table(); }
}  // namespace basalt::cpu::kernels
