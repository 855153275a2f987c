// SPDX-License-Identifier: MIT
// The reference definition of each engine weight format.
#include "quant/weight.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"
#include "quant/half.h"

namespace basalt {

void AlignedFree::operator()(uint8_t* p) const { std::free(p); }

AlignedBytes aligned_alloc_bytes(size_t n) {
  size_t rounded = (n + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) throw Error("out of memory allocating " + std::to_string(n) + " bytes");
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  return AlignedBytes(static_cast<uint8_t*>(p));
}

size_t qa_scale_bytes(QaScales s, int64_t k) {
  switch (s) {
    case QaScales::f16_sym: return static_cast<size_t>(k / 32) * 2;
    case QaScales::f16_affine: return static_cast<size_t>(k / 32) * 4;
    case QaScales::kquant: return static_cast<size_t>(k / 256) * 20;
    case QaScales::q6k: return static_cast<size_t>(k / 256) * 18;
  }
  return 0;
}

std::string Weight::describe() const {
  switch (format) {
    case WeightFormat::f32: return "f32";
    case WeightFormat::f16: return "f16";
    case WeightFormat::bf16: return "bf16";
    case WeightFormat::qa: break;
  }
  static const char* enc[] = {"f16_sym", "f16_affine", "kquant", "q6k"};
  return "qa" + std::to_string(bits) + "/" + enc[static_cast<int>(scales)];
}

void qa_unpack_block(int bits, const uint8_t* block, int8_t* q) {
  if (bits == 8) {
    std::memcpy(q, block, 32);
    return;
  }
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(block[j] & 0xF);
    q[j + 16] = static_cast<int8_t>(block[j] >> 4);
  }
  if (bits == 5) {
    uint32_t h;
    std::memcpy(&h, block + 16, 4);
    for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(q[j] | (((h >> j) & 1) << 4));
  } else if (bits == 6) {
    uint64_t h;
    std::memcpy(&h, block + 16, 8);
    for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(q[j] | (((h >> (2 * j)) & 3) << 4));
  }
}

QaBlockParams qa_block_params(const Weight& w, const uint8_t* s, int64_t b) {
  QaBlockParams p{};
  switch (w.scales) {
    case QaScales::f16_sym: {
      uint16_t d;
      std::memcpy(&d, s + 2 * b, 2);
      p.scale[0] = p.scale[1] = f16_to_f32(d);
      p.zero = w.bits == 8 ? 0 : 8;
      break;
    }
    case QaScales::f16_affine: {
      uint16_t dm[2];
      std::memcpy(dm, s + 4 * b, 4);
      p.scale[0] = p.scale[1] = f16_to_f32(dm[0]);
      p.bias[0] = p.bias[1] = f16_to_f32(dm[1]);
      break;
    }
    case QaScales::kquant: {
      const uint8_t* sb = s + 20 * (b / 8);
      uint16_t dm[2];
      std::memcpy(dm, sb, 4);
      int j = static_cast<int>(b % 8);
      p.scale[0] = p.scale[1] = f16_to_f32(dm[0]) * sb[4 + j];
      p.bias[0] = p.bias[1] = -f16_to_f32(dm[1]) * sb[12 + j];
      break;
    }
    case QaScales::q6k: {
      const uint8_t* sb = s + 18 * (b / 8);
      uint16_t d;
      std::memcpy(&d, sb, 2);
      float df = f16_to_f32(d);
      int j = static_cast<int>(b % 8) * 2;
      for (int h = 0; h < 2; ++h) p.scale[h] = df * static_cast<int8_t>(sb[2 + j + h]);
      p.zero = 32;
      break;
    }
  }
  return p;
}

void dequantize_row(const Weight& w, int64_t r, float* out) {
  if (r < 0 || r >= w.rows) throw Error("row " + std::to_string(r) + " out of range for " + w.name);
  const uint8_t* row = w.row(r);
  switch (w.format) {
    case WeightFormat::f32: std::memcpy(out, row, w.cols * 4); return;
    case WeightFormat::f16:
      for (int64_t i = 0; i < w.cols; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      return;
    case WeightFormat::bf16:
      for (int64_t i = 0; i < w.cols; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      return;
    case WeightFormat::qa: break;
  }
  const int bb = qa_block_bytes(w.bits);
  const uint8_t* scales = row + w.quant_bytes();
  int8_t q[32];
  for (int64_t b = 0; b < w.cols / kQaBlock; ++b) {
    qa_unpack_block(w.bits, row + b * bb, q);
    QaBlockParams p = qa_block_params(w, scales, b);
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = p.scale[j / 16] * static_cast<float>(q[j] - p.zero) + p.bias[j / 16];
  }
}

}  // namespace basalt
