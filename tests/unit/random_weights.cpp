// SPDX-License-Identifier: MIT
#include "tests/unit/random_weights.h"

#include <cmath>
#include <cstring>

#include "core/util/half.h"
#include "quant/qa_layout.h"

namespace basalt::testutil {

namespace {
void put_f16(uint8_t* p, float v) {
  uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}
}  // namespace

const Format kFormats[12] = {
    {"f32", WeightFormat::f32, 0, QaScales::f16_sym},       {"f16", WeightFormat::f16, 0, QaScales::f16_sym},
    {"bf16", WeightFormat::bf16, 0, QaScales::f16_sym},     {"q4_0", WeightFormat::qa, 4, QaScales::f16_sym},
    {"q4_1", WeightFormat::qa, 4, QaScales::f16_affine},    {"q8_0", WeightFormat::qa, 8, QaScales::f16_sym},
    {"q4_k", WeightFormat::qa, 4, QaScales::kquant},        {"q5_k", WeightFormat::qa, 5, QaScales::kquant},
    {"q6_k", WeightFormat::qa, 6, QaScales::q6k},           {"gptq4_asym", WeightFormat::qa, 4, QaScales::f16_zero},
    {"gptq8_asym", WeightFormat::qa, 8, QaScales::f16_zero}, {"q5_1", WeightFormat::qa, 5, QaScales::f16_affine},
};

Weight random_weight(const Format& f, int64_t rows, int64_t cols, std::mt19937& rng) {
  Weight w;
  w.name = f.name;
  w.format = f.format;
  w.bits = f.bits;
  w.scales = f.scales;
  w.rows = rows;
  w.cols = cols;
  std::uniform_real_distribution<float> u(-1, 1);
  if (f.format != WeightFormat::qa) {
    w.mat_rows = rows;
    w.row_bytes = cols * (f.format == WeightFormat::f32 ? 4 : 2);
    w.owned = aligned_alloc_bytes(w.total_bytes());
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = u(rng);
      if (f.format == WeightFormat::f32) std::memcpy(w.owned.get() + 4 * i, &v, 4);
      else if (f.format == WeightFormat::f16) put_f16(w.owned.get() + 2 * i, v);
      else {
        uint16_t b = f32_to_bf16(v);
        std::memcpy(w.owned.get() + 2 * i, &b, 2);
      }
    }
  } else {
    return qa_weight_from_rows(f.name, f.bits, f.scales, rows, cols, random_rowmajor(f, rows, cols, rng).data());
  }
  w.data = w.owned.get();
  return w;
}

std::vector<uint8_t> random_rowmajor(const Format& f, int64_t rows, int64_t cols, std::mt19937& rng, int quant_fill) {
  std::uniform_real_distribution<float> u(-1, 1);
  {
    const size_t rm = qa_rowmajor_bytes(f.bits, f.scales, cols);
    const size_t qb = rm - (f.scales == QaScales::f16_sym ? cols / 32 * 2
                            : f.scales == QaScales::f16_affine || f.scales == QaScales::f16_zero ? cols / 32 * 4
                            : f.scales == QaScales::kquant ? cols / 256 * 20 : cols / 256 * 18);
    std::vector<uint8_t> rows_rm(rows * rm);
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* row = rows_rm.data() + r * rm;
      for (size_t i = 0; i < qb; ++i) row[i] = static_cast<uint8_t>(quant_fill >= 0 ? quant_fill : rng());
      uint8_t* s = row + qb;
      switch (f.scales) {
        case QaScales::f16_sym:
          for (int64_t g = 0; g < cols / 32; ++g) put_f16(s + 2 * g, 0.05f * u(rng));
          break;
        case QaScales::f16_affine:
          for (int64_t g = 0; g < cols / 32; ++g) put_f16(s + 4 * g, 0.05f * u(rng)), put_f16(s + 4 * g + 2, 0.3f * u(rng));
          break;
        case QaScales::f16_zero:  // integer zero points: 0..15, or -128..127 for the signed 8-bit quants
          for (int64_t g = 0; g < cols / 32; ++g)
            put_f16(s + 4 * g, 0.05f * u(rng)),
                put_f16(s + 4 * g + 2, f.bits == 8 ? static_cast<float>(static_cast<int>(rng() % 256) - 128)
                                                   : static_cast<float>(rng() % 16));
          break;
        case QaScales::kquant:
          for (int64_t g = 0; g < cols / 256; ++g) {
            put_f16(s + 20 * g, 0.01f * std::fabs(u(rng))), put_f16(s + 20 * g + 2, 0.01f * std::fabs(u(rng)));
            for (int j = 4; j < 20; ++j) s[20 * g + j] = static_cast<uint8_t>(rng() % 64);
          }
          break;
        case QaScales::q6k:
          for (int64_t g = 0; g < cols / 256; ++g) {
            put_f16(s + 18 * g, 0.002f * std::fabs(u(rng)));
            for (int j = 2; j < 18; ++j) s[18 * g + j] = static_cast<uint8_t>(rng() % 256);
          }
          break;
      }
    }
    return rows_rm;
  }
}

}  // namespace basalt::testutil
