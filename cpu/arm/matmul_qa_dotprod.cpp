// SPDX-License-Identifier: MIT
// The qa matmul kernels for ARM cores with SDOT (ARMv8.2's dot product:
// Neoverse, Apple, Cortex-A76 and later): one instruction a 4-byte dot.
#define BASALT_QA_DOTPROD 1
#define BASALT_QA_NEON_ENTRY matmul_qa_dotprod
#include "cpu/arm/matmul_qa_neon.inc"
