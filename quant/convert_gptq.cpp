// SPDX-License-Identifier: MIT
#include "quant/convert_gptq.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/util/half.h"
#include "core/util/thread_pool.h"
#include "quant/qa_layout.h"

namespace basalt {

namespace {

std::string dims(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void check(const StTensor* t, StDtype dtype, const std::vector<int64_t>& shape, const std::string& name, const char* what) {
  if (!t) throw Error(name + ": GPTQ tensor " + what + " is missing");
  if (t->dtype != dtype)
    throw Error(*t->file + ": " + t->name + " is " + st_dtype_name(t->dtype) + ", expected " + st_dtype_name(dtype));
  if (t->shape != shape) throw Error(*t->file + ": " + t->name + " has shape " + dims(t->shape) + ", expected " + dims(shape));
}

uint32_t word(const StTensor& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}

uint16_t half_at(const StTensor& t, int64_t i) {
  uint16_t v;
  std::memcpy(&v, t.data + 2 * i, 2);
  return v;
}

// The values packed along the rows of a GPTQ I32 tensor (qzeros): value j of a row.
struct Packed {
  const StTensor& t;
  int bits;
  int64_t words_per_row;
  int value(int64_t row, int64_t j) const {
    const int per = 32 / bits;
    return static_cast<int>((word(t, row * words_per_row + j / per) >> (j % per * bits)) & ((1u << bits) - 1));
  }
};

}  // namespace

int gptq_uniform_stored_zero(const GptqTensors& t, int bits) {
  if (!t.qzeros || t.qzeros->dtype != StDtype::i32 || (bits != 4 && bits != 8)) return -1;
  const int per = 32 / bits;
  const uint32_t first = static_cast<uint32_t>(t.qzeros->n_elements() > 0 ? word(*t.qzeros, 0) & ((1u << bits) - 1) : 0);
  uint32_t all = 0;  // `first` repeated in every field of a word
  for (int j = 0; j < per; ++j) all |= first << (j * bits);
  for (int64_t i = 0; i < t.qzeros->n_elements(); ++i)
    if (word(*t.qzeros, i) != all) return -1;
  return static_cast<int>(first);
}

Weight weight_from_gptq(const GptqTensors& t, const GptqParams& p, int64_t n_out, int64_t n_in, const std::string& name) {
  if (p.bits != 4 && p.bits != 8) throw Error(name + ": GPTQ with " + std::to_string(p.bits) + " bits (basalt reads 4 and 8)");
  const int per = 32 / p.bits;
  if (n_in % kQaBlock || n_out % per)
    throw Error(name + ": GPTQ layer of " + std::to_string(n_out) + " x " + std::to_string(n_in) +
                " (basalt needs inputs in multiples of 32)");
  const int64_t gs = p.group_size == -1 ? n_in : p.group_size;
  if (gs <= 0 || gs % kQaBlock)
    throw Error(name + ": GPTQ group size " + std::to_string(p.group_size) + " (basalt reads multiples of 32, or -1)");
  const int64_t n_groups = (n_in + gs - 1) / gs;
  check(t.qweight, StDtype::i32, {n_in / per, n_out}, name, "qweight");
  check(t.qzeros, StDtype::i32, {n_groups, n_out / per}, name, "qzeros");
  check(t.scales, StDtype::f16, {n_groups, n_out}, name, "scales");

  std::vector<int32_t> group(static_cast<size_t>(n_in));
  if (t.g_idx) {
    check(t.g_idx, StDtype::i32, {n_in}, name, "g_idx");
    for (int64_t i = 0; i < n_in; ++i) {
      group[static_cast<size_t>(i)] = static_cast<int32_t>(word(*t.g_idx, i));
      if (group[static_cast<size_t>(i)] < 0 || group[static_cast<size_t>(i)] >= n_groups)
        throw Error(*t.g_idx->file + ": " + t.g_idx->name + "[" + std::to_string(i) + "] = " +
                    std::to_string(group[static_cast<size_t>(i)]) + ", outside the " + std::to_string(n_groups) + " groups");
    }
  } else {
    for (int64_t i = 0; i < n_in; ++i) group[static_cast<size_t>(i)] = static_cast<int32_t>(i / gs);
  }
  // The kernel's column order: inputs sorted by group, so that each block of 32 has one scale and zero.
  std::vector<int32_t> perm(static_cast<size_t>(n_in));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) { return group[a] < group[b]; });
  const int64_t nb = n_in / kQaBlock;
  std::vector<int32_t> block_group(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) {
    block_group[static_cast<size_t>(b)] = group[static_cast<size_t>(perm[static_cast<size_t>(b * kQaBlock)])];
    for (int64_t k = 1; k < kQaBlock; ++k)
      if (group[static_cast<size_t>(perm[static_cast<size_t>(b * kQaBlock + k)])] != block_group[static_cast<size_t>(b)])
        throw Error(name + ": its g_idx groups are not whole blocks of 32 inputs");
  }

  const Packed z{*t.qzeros, p.bits, n_out / per};
  const int stored_offset = p.v2 ? 0 : 1;  // the gptq format stores zero - 1
  const int sym_zero = 1 << (p.bits - 1);
  bool sym = !p.keep_zeros;
  for (int64_t g = 0; g < n_groups && sym; ++g)
    for (int64_t o = 0; o < n_out && sym; ++o) sym = z.value(g, o) + stored_offset == sym_zero;
  const QaScales enc = sym ? QaScales::f16_sym : QaScales::f16_zero;

  // Row-major qa rows (quant/qa_layout.h): per block, 4 bits: byte j = q[j] | q[j + 16] << 4; 8 bits: q - 128 as
  // int8; then per block the f16 scale (and for f16_zero the zero point, minus 128 for 8 bits, in f16).
  const size_t rm = qa_rowmajor_bytes(p.bits, enc, n_in);
  const size_t quant_bytes = static_cast<size_t>(nb) * (p.bits == 8 ? 32 : 16);
  std::vector<uint8_t> rows(static_cast<size_t>(n_out) * rm);
  parallel_for(n_out, 16, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      uint8_t* row = rows.data() + static_cast<size_t>(o) * rm;
      uint8_t* scales = row + quant_bytes;
      for (int64_t b = 0; b < nb; ++b) {
        for (int64_t k = 0; k < kQaBlock; ++k) {
          const int64_t i = perm[static_cast<size_t>(b * kQaBlock + k)];
          // qweight's word row i / per holds inputs i of column o: a word per (row, column)
          const int v = static_cast<int>((word(*t.qweight, i / per * n_out + o) >> (i % per * p.bits)) & ((1u << p.bits) - 1));
          if (p.bits == 8) {
            row[b * 32 + k] = static_cast<uint8_t>(static_cast<int8_t>(v - 128));
          } else {
            uint8_t& byte = row[b * 16 + k % 16];
            byte = static_cast<uint8_t>(k < 16 ? (byte & 0xF0) | v : (byte & 0x0F) | (v << 4));
          }
        }
        const int64_t g = block_group[static_cast<size_t>(b)];
        const uint16_t scale = half_at(*t.scales, g * n_out + o);
        if (enc == QaScales::f16_sym) {
          std::memcpy(scales + 2 * b, &scale, 2);
        } else {
          const uint16_t zero = f32_to_f16(static_cast<float>(z.value(g, o) + stored_offset - (p.bits == 8 ? 128 : 0)));
          std::memcpy(scales + 4 * b, &scale, 2);
          std::memcpy(scales + 4 * b + 2, &zero, 2);
        }
      }
    }
  });
  Weight w = qa_weight_from_rows(name, p.bits, enc, n_out, n_in, rows.data());
  bool identity = true;
  for (int64_t i = 0; i < n_in && identity; ++i) identity = perm[static_cast<size_t>(i)] == i;
  if (!identity) w.input_perm = std::move(perm);
  return w;
}

}  // namespace basalt
