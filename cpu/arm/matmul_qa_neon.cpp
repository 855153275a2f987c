// SPDX-License-Identifier: MIT
// The qa matmul kernels for ARMv8.0 Advanced SIMD (Cortex-A72, the Raspberry
// Pi 4): each 4-byte dot as widening multiplies and pairwise adds.
#define BASALT_QA_NEON_ENTRY matmul_qa_neon
#include "cpu/arm/matmul_qa_neon.inc"
