// SPDX-License-Identifier: MIT
#include "tests/unit/gpu_testing.h"

#if defined(BASALT_VULKAN)

#include <cmath>
#include <cstdlib>
#include <memory>

#include "gpu/ops.h"

namespace basalt::testutil {

gpu::Device* test_device(std::string* why) {
  static std::unique_ptr<gpu::Device> device;
  static std::string reason;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const std::vector<gpu::GpuInfo> gpus = gpu::list_gpus(&reason);
    const int pick = gpu::pick_gpu(gpus, /*allow_cpu=*/true);
    if (pick < 0 && reason.empty()) reason = "no usable Vulkan device";
    if (pick >= 0) {
      try {
        device = gpu::Device::open(pick);
        // Closed before the driver's own exit handlers run (NVIDIA's registered
        // while the device opened; they run first, before static destructors):
        // closing it after them crashed the test program at exit on an H200.
        std::atexit([] { device.reset(); });
      } catch (const gpu::GpuError& e) {
        reason = e.what();
      }
    }
  }
  *why = reason;
  return device.get();
}

double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) && std::isfinite(b[i])) return INFINITY;
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? num / den : num;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

bool int8_inputs(const gpu::Device& dev, const Weight& w, bool tiled) {
  return tiled && dev.integer_dot() && w.format == WeightFormat::qa;
}

bool f16_arithmetic(const gpu::Device& dev, const Weight& w, bool tiled) {
  return tiled && !int8_inputs(dev, w, tiled) && dev.float16_arith() &&
         (w.format == WeightFormat::qa || w.format == WeightFormat::f16);
}

// f32 arithmetic: sums in another order than the reference's; with one output
// (1 row, 1 token, 2048 columns) its NMSE is that output's relative error
// squared, 1.03e-10 seen for a random draw: hence 1e-9, not 1e-10. Integer
// dot products: the shader's 127 / max|x| may be an ulp off the reference's
// (Vulkan allows GLSL's division 2.5 ulp; NVIDIA divides by a reciprocal),
// moving a rare input's code by one: NMSE up to 5e-9 on an H200, hence 1e-7
// (a wrong scale or block is 1e-3 and more).
double matmul_nmse_bound(const gpu::Device& dev, const Weight& w, bool tiled) {
  if (int8_inputs(dev, w, tiled)) return 1e-7;
  return f16_arithmetic(dev, w, tiled) ? 1e-5 : 1e-9;
}

std::vector<float> int8_blocks(std::vector<float> x, int64_t rows, int64_t ld, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k0 = 0; k0 < cols; k0 += 32) {
      float* v = &x[static_cast<size_t>(r * ld + k0)];
      const int64_t n = std::min<int64_t>(32, cols - k0);
      float amax = 0;
      for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(v[k]));
      const float inv = amax > 0 ? 127 / amax : 0, s = amax / 127;
      for (int64_t k = 0; k < n; ++k) v[k] = s * std::nearbyint(v[k] * inv);
    }
  return x;
}

}  // namespace basalt::testutil

#endif
