// SPDX-License-Identifier: MIT
// Dense (f32, f16, bf16) prefill GEMMs through oneDNN's matmul primitive,
// which reaches most of the FMA / bf16 peak where the hand kernels (made for
// decode, cpu/x86/matmul_x86.inc) reach about a tenth of it. Quantized
// weights never come here: oneDNN 2.6 has no group-scaled int4/int8 weights,
// and the qa kernels run on them directly (docs/ARCHITECTURE.md, "oneDNN").
#pragma once

#include <cstdint>

#include "cpu/matmul.h"

namespace basalt {

// From how many tokens oneDNN beats the hand kernels, per dense format and
// CPU (bench/matmul_bench.cpp with BASALT_ONEDNN=0 and 1; docs/PERFORMANCE.md
// 3.4). f16 pays for widening its panels, so it starts later. oneDNN runs its
// best ISA whatever BASALT_ISA says: with AVX-512, f32 from 8 tokens and f16
// from 32 (Intel); with AVX2 alone its GEMMs of few rows are slower, f32 from
// 32 and f16 from 128 (Zen 3: 2x slower than the hand kernels at 8 and 32).
inline int64_t onednn_min_tokens(WeightFormat f) {
  static const bool avx512 = cpu_supports(Isa::avx512);
  if (f == WeightFormat::f16) return avx512 ? 32 : 128;
  return avx512 ? 8 : 32;
}

// Built with oneDNN, and not turned off with BASALT_ONEDNN=0.
bool onednn_available();
// Whether matmul() hands this weight and token count to oneDNN (for the ISA
// variant isa; scalar never does). onednn_matmul may still decline (bf16 below AVX-512).
inline bool onednn_wanted(const Weight& w, int64_t n_tok, Isa isa) {
  return w.format != WeightFormat::qa && n_tok >= onednn_min_tokens(w.format) && isa != Isa::scalar && onednn_available();
}

// y = x W^T for rows [r0, r1) of a dense weight; oneDNN threads it itself
// (OpenMP, the engine's thread count). bf16 weights take bf16 activations
// (rounded to nearest even, as llama.cpp and PyTorch do); f16 weights are
// widened to f32 one panel of rows at a time, so results are exact f32 GEMMs.
// False where oneDNN cannot run this format on this CPU (bf16 needs AVX-512):
// the caller then uses the hand kernels.
bool onednn_matmul(const MatmulArgs& a);

}  // namespace basalt
