// SPDX-License-Identifier: MIT
// What the GPU op tests share: the device they run on, and how they compare.
#pragma once

#if defined(BASALT_VULKAN)

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "quant/weight.h"

namespace basalt::testutil {

// The device the tests run on: the one `--gpu all` would take, CPU drivers
// included; nullptr with *why set when there is none.
gpu::Device* test_device(std::string* why);

// sum (a - b)^2 / sum b^2; +inf when a has a NaN or Inf where b has none.
double nmse(const std::vector<float>& a, const std::vector<float>& b);

std::vector<float> random_floats(size_t n, std::mt19937& rng);  // N(0, 1)

// Runs check() with each shader variant the device has: the ones for its
// features (subgroup operations, integer dot products, f16 arithmetic) where
// it has any, then the portable ones; with matmuls, also without integer dot
// products where the device has them and f16 arithmetic (the qa GEMM's f16 variant).
template <class Check>
void for_each_variant(gpu::Device& dev, Check check, bool matmuls = false) {
  const gpu::Device::Allowed was = dev.allowed();
  const gpu::GpuInfo& f = dev.info();
  struct Set {
    gpu::Device::Allowed allowed;
    const char* name;
    bool wanted;
  };
  const Set sets[] = {
      {{}, "device-feature shaders", f.subgroup_arithmetic || f.integer_dot || f.float16},
      {{true, false, true, true}, "device-feature shaders without integer dot products", matmuls && f.integer_dot && f.float16},
      {{false, false, false, false}, "portable shaders", true}};
  for (const Set& s : sets) {
    if (!s.wanted) continue;
    dev.set_allowed(s.allowed);
    SCOPED_TRACE(s.name);
    check();
  }
  dev.set_allowed(was);
}

// Whether a matmul with w, by the tiled GEMM or not (gpu::kTiledMatmulTokens
// tokens and more; grouped dense weights always), quantizes its inputs to
// int8 on this device (matmul_tiled_dot.comp: qa weights, integer dot products).
bool int8_inputs(const gpu::Device& dev, const Weight& w, bool tiled);
// Whether it computes in f16 (matmul_tiled.comp's F16 variant).
bool f16_arithmetic(const gpu::Device& dev, const Weight& w, bool tiled);
// The NMSE bound of that matmul against float64 sums over its inputs (int8
// ones where it quantizes them): float rounding, or f16's.
double matmul_nmse_bound(const gpu::Device& dev, const Weight& w, bool tiled);
// x [rows][ld] as that shader sees it: per row and block of 32 of the first
// cols, int8 times max|x| / 127 (x * 127 / max|x| rounded to nearest even).
std::vector<float> int8_blocks(std::vector<float> x, int64_t rows, int64_t ld, int64_t cols);

}  // namespace basalt::testutil

// Skips the test without a device, or fails it under BASALT_REQUIRE_GPU=1 (CI).
#define NEED_DEVICE(dev)                                                          \
  std::string why_no_device;                                                      \
  gpu::Device* dev = testutil::test_device(&why_no_device);                       \
  if (!dev) {                                                                     \
    if (std::getenv("BASALT_REQUIRE_GPU")) FAIL() << "no GPU: " << why_no_device; \
    GTEST_SKIP() << "no GPU: " << why_no_device;                                  \
  }

#endif
