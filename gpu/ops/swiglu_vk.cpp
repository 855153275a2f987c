// SPDX-License-Identifier: MIT
// SwiGLU: shaders/swiglu.comp, 256 elements per workgroup.
#include <algorithm>

#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

void swiglu(Device& device, Stream& stream, const Buffer& gate, const Buffer& up, int64_t n) {
  if (n <= 0) return;
  if (n > UINT32_MAX || static_cast<size_t>(n) * 4 > std::min(gate.size(), up.size()))
    throw GpuError("swiglu: " + std::to_string(n) + " elements do not fit the buffers");
  const Pipeline& pipe = device.pipeline({"swiglu", 2, 4, {}});
  const uint32_t push = static_cast<uint32_t>(n);
  const uint32_t groups = static_cast<uint32_t>((n + 255) / 256);
  const uint32_t gx = std::min<uint32_t>(groups, 65535), gy = (groups + gx - 1) / gx;
  stream.dispatch(pipe, {inout(gate), in(up)}, &push, sizeof push, {gx, gy, 1});
}

}  // namespace basalt::gpu
