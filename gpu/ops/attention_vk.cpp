// SPDX-License-Identifier: MIT
// Attention: shaders/attention.comp, one workgroup per kRows query rows
// sharing a KV head (its query heads x tokens) and key range.
#include <algorithm>
#include <cmath>
#include <string>

#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

namespace {
struct Push {
  uint32_t n_tok, n_head, group, head_dim, table_offset, block_bytes, scales, ldq, ldo, q_offset, o_offset, pos_offset, window;
  float scale;
  uint32_t splits;
};
struct MergePush {
  uint32_t n_head, head_dim, splits, ldo, o_offset;
};
constexpr int64_t kTargetGroups = 256;  // split-K until a call has about this many workgroups
constexpr int64_t kMaxSplitEntries = 2048;  // (token, query head, split) partials at most (see splits_for)
constexpr int64_t kRows = 8;  // query rows per workgroup (the shader's HEADS x TOKENS)

// The shader variant and its grid: HEADS query heads sharing a KV head (1, 2,
// 4 or 8: the least that holds the group, or 8) x TOKENS tokens (1 in
// decode; in prefill, as many as make kRows rows).
struct Tiling {
  int64_t heads = 1, tokens = 1;
  int64_t head_groups = 0, token_groups = 0;  // workgroups per key range: head_groups x token_groups
  std::string shader(const Device& device, KvType kv) const {
    const char* base = kv == KvType::q8 ? "attention_q8" : device.storage16() ? "attention" : "attention_words";
    return device.variant(std::string(base) + "_h" + std::to_string(heads) + "_t" + std::to_string(tokens));
  }
};
Tiling tiling(const AttentionOp& op) {
  Tiling t;
  const int64_t group = op.n_head / op.n_head_kv;
  while (t.heads < group && t.heads < kRows) t.heads *= 2;
  t.tokens = op.n_tok > 1 ? kRows / t.heads : 1;
  t.head_groups = op.n_head_kv * ((group + t.heads - 1) / t.heads);
  t.token_groups = (op.n_tok + t.tokens - 1) / t.tokens;
  return t;
}

uint32_t u32(int64_t v, const char* what) {
  if (v < 0 || v > UINT32_MAX) throw GpuError(std::string("attention: ") + what + " out of range for the shader");
  return static_cast<uint32_t>(v);
}
}  // namespace

bool attention_supported(int64_t head_dim, KvType kv) {
  if (kv_side_type(kv, 1) == KvType::q4) return false;  // no q4 shader yet: the CPU runs that attention
  return head_dim > 0 && head_dim <= 256 && (kv != KvType::q8 || head_dim % 4 == 0);
}

size_t attention_partial_bytes(int64_t head_dim) { return static_cast<size_t>(kMaxSplitEntries * (2 + head_dim) * 4); }

namespace {
// Key ranges per workgroup's rows: enough workgroups to fill a GPU (decode
// has only n_head_kv or so), at least 2 key blocks each, and at most
// kMaxSplitEntries partials (n_tok * n_head * splits).
int64_t splits_for(const AttentionOp& op, const Tiling& tile) {
  if (!op.partial || op.max_pos < 0) return 1;
  const int64_t groups = tile.head_groups * tile.token_groups, blocks = op.max_pos / 64 + 1;
  if (groups >= kTargetGroups) return 1;
  const int64_t by_entries = kMaxSplitEntries / (op.n_tok * op.n_head);
  return std::clamp<int64_t>(std::min({(kTargetGroups + groups - 1) / groups, blocks / 2, by_entries}), 1, 64);
}
}  // namespace

void attention(Device& device, Stream& stream, const AttentionOp& op) {
  if (!attention_supported(op.head_dim, op.kv_type))
    throw GpuError("attention: head_dim " + std::to_string(op.head_dim) + " unsupported (at most 256; q8: a multiple of 4)");
  if (op.n_head_kv <= 0 || op.n_head % op.n_head_kv) throw GpuError("attention: query heads not a multiple of KV heads");
  const Tiling tile = tiling(op);
  const Pipeline& pipe = device.pipeline({tile.shader(device, op.kv_type), 7, sizeof(Push), {}});
  const int64_t splits = splits_for(op, tile);
  const Push push{u32(op.n_tok, "tokens"),
                  u32(op.n_head, "heads"),
                  u32(op.n_head / op.n_head_kv, "group"),
                  u32(op.head_dim, "head_dim"),
                  u32(op.table_offset, "table offset"),
                  u32(op.block_bytes, "block_bytes"),
                  u32(op.n_head_kv * op.head_dim * 64, "scales"),
                  u32(op.ldq, "ldq"),
                  u32(op.ldo, "ldo"),
                  u32(op.q_offset, "q offset"),
                  u32(op.o_offset, "o offset"),
                  u32(op.pos_offset, "pos offset"),
                  u32(op.window, "window"),
                  op.scale > 0 ? op.scale : 1.0f / std::sqrt(static_cast<float>(op.head_dim)),
                  u32(splits, "splits")};
  const Buffer& part = splits > 1 ? *op.partial : *op.o;  // bound either way; written only when split
  if (splits > 1 && op.partial->size() < static_cast<size_t>(op.n_tok * op.n_head * splits * (2 + op.head_dim) * 4))
    throw GpuError("attention: the partials buffer is smaller than attention_partial_bytes()");
  stream.dispatch(pipe, {in(*op.q), in(*op.k), in(*op.v), in(*op.pos), out(*op.o), out(part), in(*op.table)}, &push, sizeof push,
                  {u32(tile.head_groups, "heads"), u32(tile.token_groups, "tokens"), u32(splits, "splits")});
  if (splits == 1) return;
  const MergePush merge{push.n_head, push.head_dim, push.splits, push.ldo, push.o_offset};
  stream.dispatch(device.pipeline({"attention_merge", 2, sizeof merge, {}}), {in(part), out(*op.o)}, &merge, sizeof merge,
                  {push.n_head, push.n_tok, 1});
}

void kv_store(Device& device, Stream& stream, const KvStoreOp& op) {
  if (op.n_tok <= 0) return;
  struct {
    uint32_t kv_dim, head_dim;
  } push{u32(op.kv_dim, "kv_dim"), u32(op.head_dim, "head_dim")};
  const bool q8 = op.kv_type == KvType::q8;
  if (q8 && op.head_dim % 4) throw GpuError("kv_store: a q8 cache needs head_dim a multiple of 4");
  // f16: an invocation per (element, token); q8: a workgroup per (KV head, token), which quantizes the head.
  const int64_t x = q8 ? op.kv_dim / op.head_dim : (op.kv_dim + 63) / 64;
  // q8 keys and f16 ones without 16-bit storage share words across tokens: atomics
  const Arg keys = q8 || !device.storage16() ? inout(*op.k_cache) : out(*op.k_cache);
  const Arg values = device.storage16() || q8 ? out(*op.v_cache) : inout(*op.v_cache);
  const char* shader = q8 ? "kv_store_q8" : device.storage16() ? "kv_store" : "kv_store_words";
  stream.dispatch(device.pipeline({shader, 6, sizeof push, {}}),
                  {in(*op.k), in(*op.v), in(*op.pos), in(*op.base), keys, values}, &push, sizeof push,
                  {u32(x, "kv_dim"), u32(op.n_tok, "tokens"), 1});
}

}  // namespace basalt::gpu
