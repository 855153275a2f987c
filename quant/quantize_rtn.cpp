// SPDX-License-Identifier: MIT
// Built with -ffp-contract=off (CMakeLists.txt): the reference rounds each
// product and sum separately, and a fused multiply-add would round differently.
#include "quant/quantize_rtn.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/util/half.h"
#include "core/util/thread_pool.h"
#include "quant/qa_layout.h"

namespace basalt {

namespace {

// One block of 32 weights -> 32 signed (q8) or unsigned (q4) quants and the f16 scale.
void q8_0_block(const float* x, int8_t* q, uint16_t* d) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float db = amax / 127.0f, id = db == 0 ? 0.0f : 1.0f / db;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(std::round(x[j] * id));  // half away from zero
  *d = f32_to_f16(db);
}

void q4_0_block(const float* x, int8_t* q, uint16_t* d) {
  float max = 0, amax = 0;
  for (int j = 0; j < 32; ++j)  // the first of the largest magnitudes, with its sign
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
  const float db = max / -8.0f, id = db == 0 ? 0.0f : 1.0f / db;
  for (int j = 0; j < 32; ++j) {
    const float prod = x[j] * id;
    const float t = std::trunc(prod + 8.5f);
    q[j] = static_cast<int8_t>(std::min(15.0f, std::max(0.0f, t)));
  }
  *d = f32_to_f16(db);
}

}  // namespace

std::optional<RtnType> parse_rtn_type(const std::string& s) {
  if (s == "q8" || s == "q8_0") return RtnType::q8_0;
  if (s == "q4" || s == "q4_0") return RtnType::q4_0;
  return std::nullopt;
}

const char* rtn_type_name(RtnType t) { return t == RtnType::q8_0 ? "q8_0" : "q4_0"; }

Weight quantize_rtn(const Weight& w, RtnType type) {
  if (w.format == WeightFormat::qa) throw Error("internal: " + w.name + " is quantized already");
  if (w.cols % 32 != 0)
    throw Error(w.name + ": " + std::to_string(w.cols) + " columns, not a multiple of 32: cannot quantize it to " +
                rtn_type_name(type));
  const int bits = type == RtnType::q8_0 ? 8 : 4;
  const int64_t nb = w.cols / 32;
  const size_t row_bytes = qa_rowmajor_bytes(bits, QaScales::f16_sym, w.cols);
  const size_t block_bytes = bits == 8 ? 32 : 16;
  std::vector<uint8_t> rows(static_cast<size_t>(w.rows) * row_bytes);
  parallel_for(w.rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> x(static_cast<size_t>(w.cols));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(w, r, x.data());
      uint8_t* out = rows.data() + static_cast<size_t>(r) * row_bytes;
      for (int64_t b = 0; b < nb; ++b) {
        int8_t q[32];
        uint16_t d;
        (bits == 8 ? q8_0_block : q4_0_block)(x.data() + b * 32, q, &d);
        uint8_t* blk = out + b * block_bytes;
        if (bits == 8) {
          std::memcpy(blk, q, 32);
        } else {  // the engine's nibble order is Q4_0's: low = q[j], high = q[j + 16]
          for (int j = 0; j < 16; ++j) blk[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
        }
        std::memcpy(out + nb * block_bytes + 2 * b, &d, 2);
      }
    }
  });
  return qa_weight_from_rows(w.name, bits, QaScales::f16_sym, w.rows, w.cols, rows.data(), w.mat_rows);
}

}  // namespace basalt
