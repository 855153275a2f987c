// SPDX-License-Identifier: MIT
// The qa matmul kernels for AVX2 (vpmaddubsw + vpmaddwd).
#define BASALT_QA_AVX2_ENTRY matmul_qa_avx2
#define BASALT_QA_AVX2_PASS_TOKENS qa_avx2_pass_tokens
#include "cpu/x86/matmul_qa_avx2.inc"
