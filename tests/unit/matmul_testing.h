// SPDX-License-Identifier: MIT
// What the matmul kernel tests share: the scalar reference's output and how
// far a kernel's lies from it (matmul_test.cpp, matmul_avxvnni_emulated_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/matmul.h"

namespace basalt::testutil {

// The largest |got - ref| over the first n values; a NaN (a row the kernel
// never wrote: outputs start as NaN) is infinitely wrong, where std::max
// alone would skip it.
inline double max_abs_diff(const std::vector<float>& got, const std::vector<float>& ref, size_t n) {
  EXPECT_TRUE(n <= got.size() && n <= ref.size());
  double worst = 0;
  for (size_t i = 0; i < n && i < got.size() && i < ref.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - ref[i]);
    if (std::isnan(d)) return INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

// Quantizes x (n_tok rows) into xq, writes the scalar reference's output to
// ref and returns its largest magnitude (the scale of the error bounds).
inline double reference(const Weight& w, const std::vector<float>& x, int64_t n_tok, QuantizedActs& xq,
                        std::vector<float>& ref) {
  quantize_activations(x.data(), n_tok, w.cols, xq);
  ref.assign(static_cast<size_t>(n_tok * w.rows), 0.0f);
  kernels::matmul_ref({&w, x.data(), &xq, n_tok, ref.data(), w.rows, 0, w.rows});
  double norm = 0;
  for (float v : ref) norm = std::max(norm, std::fabs(static_cast<double>(v)));
  return norm;
}

}  // namespace basalt::testutil
