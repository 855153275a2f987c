// SPDX-License-Identifier: MIT
// y = x W^T for every engine weight format: the one entry point for linear
// layers on the CPU. Kernels are found per (format, ISA) by find_matmul_kernel (cpu/matmul.cpp).
#pragma once

#include <cstdint>

#include "cpu/activations.h"
#include "cpu/isa.h"
#include "quant/weight.h"

namespace basalt {

// x: [n_tok][w.cols] floats; xq: the same, quantized (required for qa weights).
class WorkShares;

// y: [n_tok][ldy]; only rows [r0, r1) of W are computed, written to y[t][r - r0].
// shares: set by matmul() for kernels that balance the threads' work
// (cpu/work_shares.h); share is this call's slot in it. Kernels that ignore
// it simply compute their own rows.
struct MatmulArgs {
  const Weight* w;
  const float* x;
  const QuantizedActs* xq;
  int64_t n_tok;
  float* y;
  int64_t ldy;
  int64_t r0, r1;
  WorkShares* shares = nullptr;
  int share = 0;
};

// A kernel computes its rows [r0, r1) on one thread.
using MatmulKernel = void (*)(const MatmulArgs& a);

MatmulKernel find_matmul_kernel(const Weight& w, Isa isa);  // falls back to lower ISAs, then scalar
// What kernel k (of find_matmul_kernel) needs done to a.xq before it runs,
// on one thread (the AVX2 and AVX-VNNI prefill kernels read tokens in passes:
// QuantizedActs::Passes). matmul() calls it; a caller of a kernel itself must.
void prepare_activations(const MatmulArgs& a, MatmulKernel k);
// Splits the rows across the OpenMP threads (call from outside a parallel region).
void matmul(const MatmulArgs& a);
// Same, with the ISA given (tests compare every variant with the scalar one).
void matmul(const MatmulArgs& a, Isa isa);

namespace kernels {
void matmul_ref(const MatmulArgs& a);  // cpu/ref: the definition every variant is checked against
#if defined(BASALT_X86)
MatmulKernel matmul_avx2(const Weight& w);    // nullptr where no AVX2 kernel exists for w
MatmulKernel matmul_avx512(const Weight& w);
MatmulKernel matmul_qa_avx2(const Weight& w);
int qa_avx2_pass_tokens(const Weight& w, int64_t n_tok);  // the passes matmul_qa_avx2 reads for n_tok tokens; 0: rows
MatmulKernel matmul_qa_avxvnni(const Weight& w);  // AVX2 + AVX-VNNI
int qa_avxvnni_pass_tokens(const Weight& w, int64_t n_tok);  // likewise for matmul_qa_avxvnni
MatmulKernel matmul_qa_avx512(const Weight& w);
MatmulKernel matmul_qa_amx(const Weight& w);  // from amx_min_tokens(w) tokens on AMX tiles; fewer: matmul_qa_avx512
// The tokens from which AMX tiles beat the AVX-512 VNNI kernel on w's format
// (docs/PERFORMANCE.md 3.2a, 3.2b): 32 to 96.
int64_t amx_min_tokens(const Weight& w);
// n > 0: the tiles from n tokens for every format (tests: AMX's path at 17
// tokens); 0: the measured defaults.
void set_amx_min_tokens(int64_t n);
void widen_f16_avx2(const uint8_t* src, float* dst, int64_t n);  // n f16 values (F16C) to f32
#endif
#if defined(BASALT_ARM)
MatmulKernel matmul_qa_neon(const Weight& w);     // nullptr where no NEON kernel exists for w
MatmulKernel matmul_qa_dotprod(const Weight& w);  // NEON + SDOT (ARMv8.2)
MatmulKernel matmul_dense_neon(const Weight& w);  // f32, f16, bf16; nullptr for qa
#endif
}  // namespace kernels

}  // namespace basalt
