// SPDX-License-Identifier: MIT
// The qa variants that have kernels, in one place: K<Bits, Scales>::run for
// the weight's bit width and scale encoding, or nullptr.
#pragma once

#include "cpu/matmul.h"

namespace basalt::kernels {

template <template <int, QaScales> class K>
MatmulKernel qa_dispatch(const Weight& w) {
  switch (w.scales) {
    case QaScales::f16_sym:
      if (w.bits == 4) return K<4, QaScales::f16_sym>::run;
      if (w.bits == 8) return K<8, QaScales::f16_sym>::run;
      break;
    case QaScales::f16_affine:
      if (w.bits == 4) return K<4, QaScales::f16_affine>::run;
      if (w.bits == 5) return K<5, QaScales::f16_affine>::run;
      break;
    case QaScales::f16_zero:
      if (w.bits == 4) return K<4, QaScales::f16_zero>::run;
      if (w.bits == 8) return K<8, QaScales::f16_zero>::run;
      break;
    case QaScales::kquant:
      if (w.bits == 4) return K<4, QaScales::kquant>::run;
      if (w.bits == 5) return K<5, QaScales::kquant>::run;
      break;
    case QaScales::q6k:
      if (w.bits == 6) return K<6, QaScales::q6k>::run;
      break;
  }
  return nullptr;
}

}  // namespace basalt::kernels
