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

namespace basalt::testutil {

// The device the tests run on: the one `--gpu all` would take, CPU drivers
// included; nullptr with *why set when there is none.
gpu::Device* test_device(std::string* why);

// sum (a - b)^2 / sum b^2; +inf when a has a NaN or Inf where b has none.
double nmse(const std::vector<float>& a, const std::vector<float>& b);

std::vector<float> random_floats(size_t n, std::mt19937& rng);  // N(0, 1)

// Runs check() with each shader variant the device has: the subgroup ones
// where it has subgroup operations, then the portable ones.
template <class Check>
void for_each_variant(gpu::Device& dev, Check check) {
  const bool was = dev.portable();
  for (bool portable : {false, true}) {
    if (!portable && !dev.info().subgroup_arithmetic) continue;
    dev.set_portable(portable);
    SCOPED_TRACE(portable ? "portable shaders" : "subgroup shaders");
    check();
  }
  dev.set_portable(was);
}

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
