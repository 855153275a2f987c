// SPDX-License-Identifier: MIT
// Weights with random contents in every engine format, for the kernel tests
// (matmul_test.cpp, gpu_ops_test.cpp).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "quant/weight.h"

namespace basalt::testutil {

struct Format {
  const char* name;
  WeightFormat format;
  int bits;
  QaScales scales;
};

extern const Format kFormats[12];

// A weight of the format with random contents in the engine layout.
Weight random_weight(const Format& f, int64_t rows, int64_t cols, std::mt19937& rng);
// Random qa rows in the row-major form (quant/qa_layout.h), with sane scales;
// quant_fill >= 0: every quant byte is that value (extreme codes).
std::vector<uint8_t> random_rowmajor(const Format& f, int64_t rows, int64_t cols, std::mt19937& rng,
                                     int quant_fill = -1);

// n activations from N(0, 1).
inline std::vector<float> normal_inputs(int64_t n, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(n));
  std::normal_distribution<float> nd(0, 1);
  for (float& v : x) v = nd(rng);
  return x;
}

}  // namespace basalt::testutil
