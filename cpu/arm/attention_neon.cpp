// SPDX-License-Identifier: MIT
// Attention tile kernel on ARM's 128-bit vectors: the algorithm is
// cpu/attention_kernel.inc, every cache type in f32 (ARMv8.0: the NEON and
// SDOT builds share it).
#include "cpu/arm/simd_neon.h"

#define BASALT_KERNEL_NS neon
#include "cpu/attention_kernel.inc"

namespace basalt::cpu::kernels {
const AttentionKernels* attention_neon() { return neon::table(); }
}  // namespace basalt::cpu::kernels
