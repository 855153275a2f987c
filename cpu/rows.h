// SPDX-License-Identifier: MIT
// Row kernels of the element-wise work between matmuls, per ISA: SwiGLU, GeGLU, the
// sum of squares of rms_norm and the int8 quantization of activations
// (cpu/activations.h). One row at a time, so callers fuse them: a row is
// quantized right after it is made, while it is still in L1, instead of in a
// second pass over the whole tensor.
#pragma once

#include <cstdint>

#include "cpu/isa.h"

namespace basalt::cpu {

struct RowKernels {
  // y = silu(gate) * up over n values; y may alias gate.
  void (*swiglu)(const float* gate, const float* up, float* y, int64_t n);
  // y = gelu(gate) * up, GELU's tanh form (cpu/ops.h gelu_tanh), over n values; y may alias gate.
  void (*geglu)(const float* gate, const float* up, float* y, int64_t n);
  // y = cap tanh(x / cap) over n values (logit soft-capping); y may alias x.
  void (*softcap)(const float* x, float* y, int64_t n, float cap);
  // One row of cols values (a multiple of 32) into blocks of 32: q[cols],
  // d[cols / 32] (f16-rounded), sum16[cols / 16]. Every variant gives exactly
  // the reference's bytes (same float operations, round to nearest even).
  void (*quantize)(const float* x, int64_t cols, int8_t* q, float* d, int16_t* sum16);
  // The sum of x[i]^2 over n values, in double (rms_norm): the same as the
  // reference's in-order sum but for the rounding of the additions.
  double (*sum_squares)(const float* x, int64_t n);
  // y = x rounded to f16 (nearest even) over n values: f32_to_f16's bits
  // (core/util/half.h) for every finite x and infinity; the KV cache's store.
  void (*to_f16)(const float* x, uint16_t* y, int64_t n);
};

// The kernels of the ISA; the reference (cpu/ref/rows_ref.cpp) where it has none.
const RowKernels& row_kernels(Isa isa);

namespace kernels {
extern const RowKernels rows_ref;
#if defined(BASALT_X86)
const RowKernels* rows_avx2();    // cpu/x86/rows_avx2.cpp
const RowKernels* rows_avx512();  // cpu/x86/rows_avx512.cpp
#endif
#if defined(BASALT_ARM)
const RowKernels* rows_neon();  // cpu/arm/rows_neon.cpp
#endif
}  // namespace kernels

}  // namespace basalt::cpu
