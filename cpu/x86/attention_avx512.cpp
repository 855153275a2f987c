// SPDX-License-Identifier: MIT
// Attention tile kernel on 512-bit vectors (this file alone is compiled with
// AVX-512 flags): the algorithm is cpu/attention_kernel.inc.
#include "cpu/x86/simd_avx512.h"

#define BASALT_KERNEL_NS avx512
#define BASALT_ATTENTION_I8_DOTS 1  // the q8 cache's scores in VNNI int8 dots
#include "cpu/attention_kernel.inc"

namespace basalt::cpu::kernels {
const AttentionKernels* attention_avx512() { return avx512::table(); }
}  // namespace basalt::cpu::kernels
