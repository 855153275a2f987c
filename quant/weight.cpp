// SPDX-License-Identifier: MIT
#include "quant/weight.h"

#include <cstring>

#include "core/error.h"
#include "core/util/half.h"
#include "quant/qa_layout.h"

namespace basalt {

size_t Weight::total_bytes() const {
  if (format != WeightFormat::qa) return static_cast<size_t>(rows) * row_bytes;
  return static_cast<size_t>(rows / mat_rows * tiles_per_mat()) * tile_bytes;
}

std::string Weight::describe() const {
  switch (format) {
    case WeightFormat::f32: return "f32";
    case WeightFormat::f16: return "f16";
    case WeightFormat::bf16: return "bf16";
    case WeightFormat::qa: break;
  }
  static const char* enc[] = {"f16_sym", "f16_affine", "kquant", "q6k", "f16_zero"};
  return "qa" + std::to_string(bits) + "/" + enc[static_cast<int>(scales)];
}

Weight stack_weights(std::vector<Weight> parts, const std::string& name) {
  if (parts.empty()) throw Error("internal: nothing to stack for " + name);
  const Weight& f = parts[0];
  Weight w;
  w.name = name;
  w.format = f.format, w.scales = f.scales, w.bits = f.bits;
  w.mat_rows = f.rows;
  w.rows = f.rows * static_cast<int64_t>(parts.size());
  w.cols = f.cols;
  w.row_bytes = f.row_bytes, w.tile_bytes = f.tile_bytes;
  const size_t bytes = f.total_bytes();
  w.owned = aligned_alloc_bytes(bytes * parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const Weight& p = parts[i];
    if (p.format != f.format || p.scales != f.scales || p.bits != f.bits || p.rows != f.rows || p.cols != f.cols ||
        p.mat_rows != p.rows || p.total_bytes() != bytes)
      throw Error(name + ": " + p.name + " differs in format or shape from " + f.name + " (" + p.describe() + " vs " + f.describe() + ")");
    std::memcpy(w.owned.get() + i * bytes, p.data, bytes);
  }
  bool any_perm = false;
  for (const Weight& p : parts) any_perm = any_perm || !p.input_perm.empty();
  if (any_perm) {  // GPTQ act-order: each matrix's own input order (the identity for those without)
    w.input_perm.resize(parts.size() * static_cast<size_t>(f.cols));
    for (size_t i = 0; i < parts.size(); ++i)
      for (int64_t k = 0; k < f.cols; ++k)
        w.input_perm[i * static_cast<size_t>(f.cols) + static_cast<size_t>(k)] =
            parts[i].input_perm.empty() ? static_cast<int32_t>(k) : parts[i].input_perm[static_cast<size_t>(k)];
  }
  w.data = w.owned.get();
  return w;
}

void dequantize_row(const Weight& w, int64_t r, float* out) {
  if (r < 0 || r >= w.rows) throw Error("row " + std::to_string(r) + " out of range for " + w.name);
  if (w.format != WeightFormat::qa) {
    const uint8_t* row = w.row(r);
    for (int64_t i = 0; i < w.cols; ++i) {
      if (w.format == WeightFormat::f32) {
        std::memcpy(out + i, row + 4 * i, 4);
        continue;
      }
      uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      out[i] = w.format == WeightFormat::f16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    return;
  }
  const QaLayout L = qa_layout(w.bits, w.scales);
  int lane;
  const uint8_t* tile = w.tile_of(r, &lane);
  int8_t q[32];
  QaBlockParams p;
  for (int64_t b = 0; b < w.cols / kQaBlock; ++b) {
    qa_tile_block(L, tile, lane, b, q, &p);
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = p.scale[j / 16] * static_cast<float>(q[j] - p.zero) + p.bias[j / 16];
  }
}

}  // namespace basalt
