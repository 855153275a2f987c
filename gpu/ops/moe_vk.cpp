// SPDX-License-Identifier: MIT
// MoE routing and combining on the device: shaders/moe_route.comp (one
// workgroup) and moe_combine.comp (one workgroup per token). The experts'
// matmuls between them are grouped_matmul (matmul_vk.cpp).
#include <algorithm>
#include <string>

#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

size_t moe_route_words(int64_t n_tok, int64_t n_expert, int64_t k) {
  return static_cast<size_t>(2 * n_expert + 1 + 4 * n_tok * k);
}

void moe_route(Device& device, Stream& stream, const Buffer& logits, const Buffer& route, int64_t n_tok,
               int64_t n_expert, int64_t k) {
  if (n_expert < 1 || n_expert > kMaxRoutedExperts || k < 1 || k > n_expert)
    throw GpuError("moe_route: " + std::to_string(k) + " of " + std::to_string(n_expert) + " experts");
  if (logits.size() < static_cast<size_t>(n_tok * n_expert) * 4 || route.size() < moe_route_words(n_tok, n_expert, k) * 4)
    throw GpuError("moe_route: buffers too small");
  if (n_tok <= 0) return;
  const uint32_t push[3] = {static_cast<uint32_t>(n_tok), static_cast<uint32_t>(n_expert), static_cast<uint32_t>(k)};
  stream.dispatch(device.pipeline({"moe_route", 2, sizeof push, {}}), {in(logits), inout(route)}, push, sizeof push,
                  {1, 1, 1});
}

void moe_combine(Device& device, Stream& stream, const Buffer& ye, const Buffer& route, const Buffer& y,
                 int64_t y_offset, int64_t ldy, int64_t n_tok, int64_t d, int64_t n_expert, int64_t k) {
  if (n_tok <= 0) return;
  if (ye.size() < static_cast<size_t>(n_tok * k * d) * 4 || y.size() < static_cast<size_t>(y_offset + (n_tok - 1) * ldy + d) * 4)
    throw GpuError("moe_combine: buffers too small");
  const uint32_t push[6] = {static_cast<uint32_t>(n_tok), static_cast<uint32_t>(d),        static_cast<uint32_t>(n_expert),
                            static_cast<uint32_t>(k),     static_cast<uint32_t>(y_offset), static_cast<uint32_t>(ldy)};
  const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(n_tok, 65535));
  stream.dispatch(device.pipeline({"moe_combine", 3, sizeof push, {}}), {in(ye), in(route), out(y)}, push, sizeof push,
                  {gx, static_cast<uint32_t>((n_tok + gx - 1) / gx), 1});
}

}  // namespace basalt::gpu
