// SPDX-License-Identifier: MIT
// Which instruction set the CPU kernels use: the best the CPU has, or the one
// forced with BASALT_ISA=scalar|avx2|avxvnni|avx512|amx|neon|dotprod (so every
// variant can be tested). avxvnni is AVX2 with AVX-VNNI (the int8 dot product without
// AVX-512: Intel client cores since Alder Lake); only the qa matmul differs.
// amx is AVX-512 plus AMX int8 and bf16 tiles (Intel Xeon since Sapphire
// Rapids, with a kernel that grants them): the qa matmul's prefill and the
// f16 cache's attention differ. On ARM (aarch64): neon is Advanced SIMD
// (ARMv8.0: Cortex-A72, the Raspberry Pi 4), dotprod adds SDOT (ARMv8.2 and
// later: Neoverse, Apple, Cortex-A76 and up); only the qa matmul differs.
// The ISAs of one architecture rank among themselves only: compare an x86
// ISA with an ARM one and the answer means nothing.
#pragma once

#include <string>

namespace basalt {

enum class Isa : int { scalar = 0, avx2 = 1, avxvnni = 2, avx512 = 3, amx = 4, neon = 5, dotprod = 6 };

const char* isa_name(Isa isa);
bool cpu_supports(Isa isa);
Isa best_isa();       // the best that this CPU supports
Isa selected_isa();   // best_isa(), or BASALT_ISA; Error if BASALT_ISA names one the CPU lacks
void set_isa(Isa isa);  // for tests and benchmarks; Error if unsupported
bool cpu_has_avx512_bf16();  // bf16 dot products (vdpbf16ps) beside AVX-512: cpu/attention.h
bool cpu_is_amd();           // CPUID's vendor is AuthenticAMD

}  // namespace basalt
