// SPDX-License-Identifier: MIT
// Row kernels (cpu/rows.h) on the avx512 SIMD interface: cpu/rows_kernel.inc.
#include "cpu/x86/simd_avx512.h"

#define BASALT_KERNEL_NS avx512
#include "cpu/rows_kernel.inc"

namespace basalt::cpu::kernels {
const RowKernels* rows_avx512() { return avx512::rows_table(); }
}  // namespace basalt::cpu::kernels
