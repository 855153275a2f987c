// SPDX-License-Identifier: MIT
#include "tests/unit/gpu_testing.h"

#if defined(BASALT_VULKAN)

#include <cmath>
#include <memory>

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

}  // namespace basalt::testutil

#endif
