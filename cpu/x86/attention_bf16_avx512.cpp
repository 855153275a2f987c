// SPDX-License-Identifier: MIT
// The AVX-512 attention tile kernel with the f16 and q4 caches' scores and
// P V (and q8's P V) as bf16 dot products (AVX512_BF16: Zen 4 and later,
// Intel since Cooper Lake): cpu/attention_kernel.inc, built with BASALT_ATTENTION_BF16. Chosen by
// cpu/attention.cpp where the CPU has the instructions.
#include "cpu/x86/simd_avx512.h"

#define BASALT_KERNEL_NS avx512
#define BASALT_ATTENTION_BF16 1
#define BASALT_ATTENTION_I8_DOTS 1
namespace basalt::cpu::kernels::avx512_bf16 {
using Simd = avx512::Simd;
}
#undef BASALT_KERNEL_NS
#define BASALT_KERNEL_NS avx512_bf16
#include "cpu/attention_kernel.inc"

namespace basalt::cpu::kernels {
const AttentionKernels* attention_avx512_bf16() { return avx512_bf16::table(); }
}  // namespace basalt::cpu::kernels
