// SPDX-License-Identifier: MIT
// Row ops: rms_norm.comp (a workgroup per row) and rope.comp (an invocation
// per rotated pair), with the rotation angles' cos and sin made on the host
// exactly as cpu::rope makes them.
#include <cmath>

#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

namespace {
uint32_t u32(int64_t v, const char* what) {
  if (v < 0 || v > UINT32_MAX) throw GpuError(std::string(what) + " out of range for the shader");
  return static_cast<uint32_t>(v);
}
}  // namespace

void rms_norm(Device& device, Stream& stream, const Buffer& x, int64_t x_offset, const Buffer& w, const Buffer& y,
              int64_t y_offset, int64_t n, int64_t d, float eps) {
  if (n <= 0) return;
  struct {
    uint32_t d, x_offset, y_offset;
    float eps;
  } push{u32(d, "rms_norm: width"), u32(x_offset, "rms_norm: x offset"), u32(y_offset, "rms_norm: y offset"), eps};
  stream.dispatch(device.pipeline({device.variant("rms_norm"), 3, sizeof push, {}}), {in(x), in(w), out(y)}, &push, sizeof push,
                  {u32(n, "rms_norm: rows"), 1, 1});
}

void rope(Device& device, Stream& stream, const Buffer& x, int64_t x_offset, const Buffer& tables, int64_t n,
          const RopeParams& p) {
  if (n <= 0 || p.rope_dim < 2) return;
  struct {
    uint32_t n, n_head, head_dim, rope_dim, style, x_offset;
  } push{u32(n, "rope: tokens"),    u32(p.n_head, "rope: heads"), u32(p.head_dim, "rope: head_dim"),
         u32(p.rope_dim, "rope: rope_dim"), p.style == RopeStyle::normal ? 0u : 1u, u32(x_offset, "rope: offset")};
  const uint32_t pairs = static_cast<uint32_t>(p.rope_dim / 2);
  stream.dispatch(device.pipeline({"rope", 2, sizeof push, {}}), {inout(x), in(tables)}, &push, sizeof push,
                  {(pairs + 63) / 64, u32(p.n_head, "rope: heads"), u32(n, "rope: tokens")});
}

}  // namespace basalt::gpu
