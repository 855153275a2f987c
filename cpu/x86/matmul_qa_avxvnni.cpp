// SPDX-License-Identifier: MIT
// The qa matmul kernels for AVX2 CPUs with AVX-VNNI (Alder Lake and later
// client cores): one vpdpbusd instead of vpmaddubsw + vpmaddwd + vpaddd.
#define BASALT_QA_AVXVNNI 1
#define BASALT_QA_AVX2_ENTRY matmul_qa_avxvnni
#define BASALT_QA_AVX2_PASS_TOKENS qa_avxvnni_pass_tokens
#include "cpu/x86/matmul_qa_avx2.inc"
