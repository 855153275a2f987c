// SPDX-License-Identifier: MIT
// Row kernels (cpu/rows.h) on ARM's 128-bit vectors: cpu/rows_kernel.inc.
#include "cpu/arm/simd_neon.h"

#define BASALT_KERNEL_NS neon
#include "cpu/rows_kernel.inc"

namespace basalt::cpu::kernels {
const RowKernels* rows_neon() { return neon::rows_table(); }
}  // namespace basalt::cpu::kernels
