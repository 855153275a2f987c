// SPDX-License-Identifier: MIT
// Attention: shaders/attention.comp, one workgroup per (query head, token).
#include <cmath>

#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

namespace {
struct Push {
  uint32_t n_tok, n_head, group, head_dim, kv_base, block_stride, ldq, ldo, q_offset, o_offset, pos_offset, window;
  float scale;
};

uint32_t u32(int64_t v, const char* what) {
  if (v < 0 || v > UINT32_MAX) throw GpuError(std::string("attention: ") + what + " out of range for the shader");
  return static_cast<uint32_t>(v);
}
}  // namespace

bool attention_supported(int64_t head_dim) { return head_dim > 0 && head_dim <= 256; }

void attention(Device& device, Stream& stream, const AttentionOp& op) {
  if (!attention_supported(op.head_dim)) throw GpuError("attention: head_dim " + std::to_string(op.head_dim) + " > 256");
  if (op.n_head_kv <= 0 || op.n_head % op.n_head_kv) throw GpuError("attention: query heads not a multiple of KV heads");
  const Pipeline& pipe = device.pipeline({"attention", 5, sizeof(Push), {}});
  const Push push{u32(op.n_tok, "tokens"),
                  u32(op.n_head, "heads"),
                  u32(op.n_head / op.n_head_kv, "group"),
                  u32(op.head_dim, "head_dim"),
                  u32(op.kv_base, "kv_base"),
                  u32(op.block_stride, "block_stride"),
                  u32(op.ldq, "ldq"),
                  u32(op.ldo, "ldo"),
                  u32(op.q_offset, "q offset"),
                  u32(op.o_offset, "o offset"),
                  u32(op.pos_offset, "pos offset"),
                  u32(op.window, "window"),
                  1.0f / std::sqrt(static_cast<float>(op.head_dim))};
  stream.dispatch(pipe, {in(*op.q), in(*op.k), in(*op.v), in(*op.pos), out(*op.o)}, &push, sizeof push,
                  {u32(op.n_head, "heads"), u32(op.n_tok, "tokens"), 1});
}

void kv_store(Device& device, Stream& stream, const KvStoreOp& op) {
  if (op.n_tok <= 0) return;
  struct {
    uint32_t kv_dim, head_dim, block_stride;
  } push{u32(op.kv_dim, "kv_dim"), u32(op.head_dim, "head_dim"), u32(op.block_stride, "block_stride")};
  stream.dispatch(device.pipeline({"kv_store", 6, sizeof push, {}}),
                  {in(*op.k), in(*op.v), in(*op.pos), in(*op.base), out(*op.k_cache), out(*op.v_cache)}, &push,
                  sizeof push, {u32((op.kv_dim + 63) / 64, "kv_dim"), u32(op.n_tok, "tokens"), 1});
}

}  // namespace basalt::gpu
