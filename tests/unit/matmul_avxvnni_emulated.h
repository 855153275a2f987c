// SPDX-License-Identifier: MIT
// The AVX-VNNI qa kernels built with vpdpbusd done in AVX2
// (matmul_qa_avxvnni_emulated_avx2.cpp), for matmul_avxvnni_emulated_test.cpp:
// the counterparts of kernels::matmul_qa_avxvnni and qa_avxvnni_pass_tokens.
#pragma once

#include <cstdint>

#include "cpu/matmul.h"

namespace basalt::kernels {
MatmulKernel matmul_qa_avxvnni_emulated(const Weight& w);
int qa_avxvnni_emulated_pass_tokens(const Weight& w, int64_t n_tok);
}  // namespace basalt::kernels
