// SPDX-License-Identifier: MIT
// The AVX-VNNI qa kernels with vpdpbusd done in AVX2, for
// matmul_avxvnni_emulated_test.cpp: their blocking, inputs and zero points
// run on CPUs without AVX-VNNI. Built with the AVX2 flags (tests/CMakeLists.txt;
// like the engine's ISA files, checked by isa_objects_share_no_inline_code).
#include "tests/unit/matmul_avxvnni_emulated.h"

#define BASALT_QA_AVXVNNI 1
#define BASALT_QA_AVXVNNI_EMULATED 1
#define BASALT_QA_AVX2_ENTRY matmul_qa_avxvnni_emulated
#define BASALT_QA_AVX2_PASS_TOKENS qa_avxvnni_emulated_pass_tokens
#include "cpu/x86/matmul_qa_avx2.inc"
