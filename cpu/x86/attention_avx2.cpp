// SPDX-License-Identifier: MIT
// Attention tile kernel on 256-bit vectors (this file alone is compiled with
// AVX2 + FMA + F16C flags): the algorithm is cpu/attention_kernel.inc.
#include "cpu/x86/simd_avx2.h"

#define BASALT_KERNEL_NS avx2
#define BASALT_ATTENTION_I16_DOTS 1  // the caches with q8 keys in vpmaddwd's integers
#include "cpu/attention_kernel.inc"

namespace basalt::cpu::kernels {
const AttentionKernels* attention_avx2() { return avx2::table(); }
}  // namespace basalt::cpu::kernels
