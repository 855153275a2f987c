// SPDX-License-Identifier: MIT
// Element-wise ops: swiglu.comp and add.comp, 256 elements per workgroup on a
// 2-D grid (one dimension holds at most 65535 workgroups).
#include <algorithm>

#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

namespace {
Groups elementwise_groups(int64_t n) {
  const uint32_t groups = static_cast<uint32_t>((n + 255) / 256);
  const uint32_t gx = std::min<uint32_t>(groups, 65535);
  return {gx, (groups + gx - 1) / gx, 1};
}

uint32_t count(int64_t n, std::initializer_list<const Buffer*> bufs, const char* op) {
  for (const Buffer* b : bufs)
    if (n > UINT32_MAX || static_cast<size_t>(n) * 4 > b->size())
      throw GpuError(std::string(op) + ": " + std::to_string(n) + " elements do not fit the buffers");
  return static_cast<uint32_t>(n);
}
}  // namespace

void swiglu(Device& device, Stream& stream, const Buffer& gate, const Buffer& up, const Buffer& y, int64_t n) {
  if (n <= 0) return;
  const uint32_t push = count(n, {&gate, &up, &y}, "swiglu");
  stream.dispatch(device.pipeline({"swiglu", 3, 4, {}}), {in(gate), in(up), out(y)}, &push, sizeof push,
                  elementwise_groups(n));
}

void add(Device& device, Stream& stream, const Buffer& a, const Buffer& b, const Buffer& y, int64_t n, int64_t b_len) {
  if (n <= 0) return;
  if (b_len <= 0) b_len = n;
  const uint32_t push[2] = {count(n, {&a, &y}, "add"), count(b_len, {&b}, "add")};
  stream.dispatch(device.pipeline({"add", 3, sizeof push, {}}), {in(a), in(b), out(y)}, push, sizeof push,
                  elementwise_groups(n));
}

}  // namespace basalt::gpu
