// SPDX-License-Identifier: MIT
// Row kernels (cpu/rows.h) on the avx512 SIMD interface: cpu/x86/rows_x86.inc.
#include "cpu/x86/simd_avx512.h"

#define BASALT_KERNEL_NS avx512
#include "cpu/x86/rows_x86.inc"

namespace basalt::cpu::kernels {
const RowKernels* rows_avx512() { return avx512::rows_table(); }
}  // namespace basalt::cpu::kernels
