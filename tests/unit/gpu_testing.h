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
// features (subgroup operations, integer dot products) where it has any,
// then the portable ones.
template <class Check>
void for_each_variant(gpu::Device& dev, Check check) {
  const bool was = dev.portable();
  for (bool portable : {false, true}) {
    if (!portable && !dev.info().subgroup_arithmetic && !dev.info().integer_dot) continue;
    dev.set_portable(portable);
    SCOPED_TRACE(portable ? "portable shaders" : "device-feature shaders");
    check();
  }
  dev.set_portable(was);
}

// Whether a matmul of n_tok tokens with w quantizes its inputs to int8 on
// this device (matmul_tiled_dot.comp: qa weights, integer dot products).
bool int8_inputs(const gpu::Device& dev, const Weight& w, int64_t n_tok);
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
