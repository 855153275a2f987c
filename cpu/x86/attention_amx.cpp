// SPDX-License-Identifier: MIT
// The AVX-512 attention tile kernel with the f16 cache's scores and P V on
// AMX bf16 tiles and the quantized caches' in integers on AMX int8 tiles
// (Intel Xeon since Sapphire Rapids), the rest as attention_avx512.cpp: cpu/attention_kernel.inc,
// built with BASALT_ATTENTION_AMX. Chosen by cpu/attention.cpp on AMX CPUs.
#include "cpu/x86/simd_avx512.h"

#define BASALT_KERNEL_NS avx512
#define BASALT_ATTENTION_AMX 1
#define BASALT_ATTENTION_I8_DOTS 1
namespace basalt::cpu::kernels::avx512_amx {
using Simd = avx512::Simd;
}
#undef BASALT_KERNEL_NS
#define BASALT_KERNEL_NS avx512_amx
#include "cpu/attention_kernel.inc"

namespace basalt::cpu::kernels {
const AttentionKernels* attention_amx() { return avx512_amx::table(); }
}  // namespace basalt::cpu::kernels
