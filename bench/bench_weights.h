// SPDX-License-Identifier: MIT
// Random weights in the engine's layout for the benchmarks. They are built
// the way the engine builds weights at load: random blocks of the GGUF type
// (scales in a sane range, quants uniformly random, as in
// tests/unit/matmul_test.cpp) passed through weight_from_gguf, so any
// conversion or repacking the loader does happens here too. Keep every
// benchmark's weight construction going through make_bench_weight.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/gguf/gguf.h"
#include "core/safetensors/safetensors.h"
#include "quant/convert_gguf.h"
#include "quant/convert_gptq.h"
#include "core/util/half.h"
#include "quant/weight.h"

namespace basalt::bench {

struct BenchFormat {
  const char* name;
  GgmlType type;      // a GGUF type, unless:
  int gptq_bits = 0;  // a GPTQ checkpoint's layer of this many bits (asymmetric, groups of 128)
};

// Every weight format the engine loads: dense, then each qa flavour
// (qa4 f16_sym, qa4 f16_affine, qa8, qa4/qa5 kquant, qa6 q6k, qa4 f16_zero).
inline constexpr BenchFormat kBenchFormats[] = {
    {"f32", GgmlType::f32},   {"f16", GgmlType::f16},   {"bf16", GgmlType::bf16},
    {"q4_0", GgmlType::q4_0}, {"q4_1", GgmlType::q4_1}, {"q8_0", GgmlType::q8_0},
    {"q4_k", GgmlType::q4_k}, {"q5_k", GgmlType::q5_k}, {"q6_k", GgmlType::q6_k},
    {"gptq4", GgmlType::f32, 4},
};

// A weight and the GGUF-form bytes it was made from (dense weights borrow
// them, as they borrow the file mapping at load).
struct BenchWeight {
  AlignedBytes source;
  Weight w;
};

namespace detail {

struct SplitMix64 {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }  // [-1, 1)
};

inline void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// One row of `cols` weights of `type` in GGUF block form.
inline void fill_row(GgmlType type, int64_t cols, uint8_t* row, size_t row_bytes, SplitMix64& rng) {
  switch (type) {
    case GgmlType::f32:
      for (int64_t i = 0; i < cols; ++i) {
        const float v = rng.uniform();
        std::memcpy(row + 4 * i, &v, 4);
      }
      return;
    case GgmlType::f16:
      for (int64_t i = 0; i < cols; ++i) put_f16(row + 2 * i, rng.uniform());
      return;
    case GgmlType::bf16:
      for (int64_t i = 0; i < cols; ++i) {
        const uint16_t b = f32_to_bf16(rng.uniform());
        std::memcpy(row + 2 * i, &b, 2);
      }
      return;
    default: break;
  }
  for (size_t i = 0; i < row_bytes; i += 8) {  // quants (and scale bytes) random ...
    const uint64_t r = rng.next();
    std::memcpy(row + i, &r, std::min<size_t>(8, row_bytes - i));
  }
  const GgmlTypeSize ts = ggml_type_size(type);  // ... then the float scales in range
  for (uint8_t* b = row; b < row + row_bytes; b += ts.block_bytes) {
    switch (type) {
      case GgmlType::q4_0:
      case GgmlType::q8_0: put_f16(b, 0.05f * rng.uniform()); break;
      case GgmlType::q4_1: put_f16(b, 0.05f * rng.uniform()), put_f16(b + 2, 0.3f * rng.uniform()); break;
      case GgmlType::q4_k:
      case GgmlType::q5_k: put_f16(b, 0.01f * std::fabs(rng.uniform())), put_f16(b + 2, 0.01f * std::fabs(rng.uniform())); break;
      case GgmlType::q6_k: put_f16(b + 208, 0.002f * std::fabs(rng.uniform())); break;
      default: break;
    }
  }
}

// A random GPTQ layer [rows = n_out][cols = n_in] (random codes and zero
// points, scales in range, groups of 128 in order), through the loader's
// conversion (quant/convert_gptq.h).
inline BenchWeight make_gptq_weight(int bits, int64_t rows, int64_t cols, uint64_t seed) {
  constexpr int64_t kGroup = 128;
  const int64_t per = 32 / bits, groups = (cols + kGroup - 1) / kGroup;
  SplitMix64 rng{seed * 0x100000001B3ull};
  std::vector<uint32_t> qweight(static_cast<size_t>(cols / per * rows)), qzeros(static_cast<size_t>(groups * rows / per));
  for (uint32_t& w : qweight) w = static_cast<uint32_t>(rng.next());
  for (uint32_t& w : qzeros) w = static_cast<uint32_t>(rng.next());
  std::vector<uint16_t> scales(static_cast<size_t>(groups * rows));
  for (uint16_t& s : scales) s = f32_to_f16(0.001f + 0.01f * std::fabs(rng.uniform()));
  const std::string file = "bench.safetensors";
  const StTensor qw{"bench.qweight", StDtype::i32, {cols / per, rows}, reinterpret_cast<const uint8_t*>(qweight.data()),
                    qweight.size() * 4, &file, nullptr};
  const StTensor qz{"bench.qzeros", StDtype::i32, {groups, rows / per}, reinterpret_cast<const uint8_t*>(qzeros.data()),
                    qzeros.size() * 4, &file, nullptr};
  const StTensor sc{"bench.scales", StDtype::f16, {groups, rows}, reinterpret_cast<const uint8_t*>(scales.data()),
                    scales.size() * 2, &file, nullptr};
  BenchWeight b;
  b.w = weight_from_gptq({&qw, &qz, &sc, nullptr}, {bits, kGroup, false, true}, rows, cols, "bench");
  return b;
}

}  // namespace detail

// A random [rows][cols] weight of the given GGUF type, in the engine layout.
inline BenchWeight make_bench_weight(GgmlType type, int64_t rows, int64_t cols, uint64_t seed) {
  const GgmlTypeSize ts = ggml_type_size(type);
  const size_t row_bytes = static_cast<size_t>(cols / ts.block_elems) * ts.block_bytes;
  BenchWeight b;
  b.source = aligned_alloc_bytes(row_bytes * static_cast<size_t>(rows));
  uint8_t* src = b.source.get();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    detail::SplitMix64 rng{seed * 0x100000001B3ull + static_cast<uint64_t>(r)};
    detail::fill_row(type, cols, src + r * row_bytes, row_bytes, rng);
  }
  GgufTensorInfo info;
  info.name = "bench." + ggml_type_name(type);
  info.type = type;
  info.dims = {cols, rows};
  info.n_bytes = row_bytes * static_cast<size_t>(rows);
  info.data = src;
  b.w = weight_from_gguf(info);
  if (b.w.owned) b.source.reset();  // converted: the GGUF form is no longer needed
  return b;
}

inline BenchWeight make_bench_weight(const BenchFormat& f, int64_t rows, int64_t cols, uint64_t seed) {
  return f.gptq_bits ? detail::make_gptq_weight(f.gptq_bits, rows, cols, seed) : make_bench_weight(f.type, rows, cols, seed);
}

}  // namespace basalt::bench
