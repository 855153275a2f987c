// SPDX-License-Identifier: MIT
// Attention: shaders/attention.comp, one workgroup per kRows query rows
// sharing a KV head (its query heads x tokens) and key range.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"

#include "core/graph/kv_rotation.h"
#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

namespace {
struct Push {
  uint32_t n_tok, n_head, group, head_dim, table_offset, block_bytes, scales, ldq, ldo, q_offset, o_offset, pos_offset, window;
  float scale;
  uint32_t splits;
  uint32_t value_block_bytes, value_scales;
  uint32_t sinks;
  float softcap;
  uint32_t rot_block;  // q8 keys stored rotated: the rotation's block (0: not)
  float rot_scale;
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
    const char* base = kv == KvType::q8     ? "attention_q8"
                       : kv == KvType::q4   ? "attention_q4"
                       : kv == KvType::k8v4 ? "attention_k8v4"
                       : device.storage16() ? "attention"
                                            : "attention_words";
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
  if (kv_side_type(kv, 1) == KvType::q4 && head_dim % 32) return false;  // q4 groups of 32 dimensions
  return head_dim > 0 && head_dim <= 256 && (kv != KvType::q8 || head_dim % 4 == 0);
}

namespace {
// Where a block's q8 or q4 scales start, in bytes from the block's start (kv_cache.h).
int64_t scales_offset(int64_t kv_dim, KvType side) { return side == KvType::q4 ? kv_dim * 32 : kv_dim * 64; }
}  // namespace

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
    throw GpuError("attention: head_dim " + std::to_string(op.head_dim) +
                   " unsupported (at most 256; q8: a multiple of 4; q4: of 32)");
  if (op.n_head_kv <= 0 || op.n_head % op.n_head_kv) throw GpuError("attention: query heads not a multiple of KV heads");
  const Tiling tile = tiling(op);
  const Pipeline& pipe = device.pipeline({tile.shader(device, op.kv_type), 7, sizeof(Push), {}});
  const int64_t splits = splits_for(op, tile);
  const bool rotated = kv_keys_rotated(op.kv_type, op.head_dim);  // the shader rotates the query rows alike
  const int64_t rot = kv_rotation_block(op.head_dim);
  const Push push{u32(op.n_tok, "tokens"),
                  u32(op.n_head, "heads"),
                  u32(op.n_head / op.n_head_kv, "group"),
                  u32(op.head_dim, "head_dim"),
                  u32(op.table_offset, "table offset"),
                  u32(op.block_bytes, "block_bytes"),
                  u32(scales_offset(op.n_head_kv * op.head_dim, kv_side_type(op.kv_type, 0)), "scales"),
                  u32(op.ldq, "ldq"),
                  u32(op.ldo, "ldo"),
                  u32(op.q_offset, "q offset"),
                  u32(op.o_offset, "o offset"),
                  u32(op.pos_offset, "pos offset"),
                  u32(op.window, "window"),
                  op.scale > 0 ? op.scale : 1.0f / std::sqrt(static_cast<float>(op.head_dim)),
                  u32(splits, "splits"),
                  u32(KvCache::block_bytes(op.n_head_kv, op.head_dim, op.kv_type, 1), "value block bytes"),
                  u32(scales_offset(op.n_head_kv * op.head_dim, kv_side_type(op.kv_type, 1)), "value scales"),
                  u32(op.window > 0 ? op.sinks : 0, "sinks"),
                  op.softcap,
                  u32(rotated ? rot : 0, "rotation"),
                  1.0f / std::sqrt(static_cast<float>(rot))};  // kv_rotate's
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

namespace {
// kv_store_q8.comp's: sides bit 0 keys, bit 1 values; the keys' rotation (kv_keys_rotated), 0: none.
struct Q8StorePush {
  uint32_t kv_dim, head_dim, sides, rot_block;
  float rot_scale;
};
Q8StorePush q8_store_push(const KvStoreOp& op, uint32_t sides) {
  const int64_t rot = kv_rotation_block(op.head_dim);
  if (kv_side_type(op.kv_type, 0) == KvType::q8 && op.head_dim > 256)  // the shader's key head in shared memory
    throw GpuError("kv_store: q8 keys of head_dim past 256");
  return {u32(op.kv_dim, "kv_dim"), u32(op.head_dim, "head_dim"), sides,
          kv_keys_rotated(op.kv_type, op.head_dim) ? u32(rot, "rotation") : 0u,
          1.0f / std::sqrt(static_cast<float>(rot))};  // kv_rotate's
}

// q4: the keys (q4) and values in kv_store_q4.comp, one workgroup per (KV
// head, token): the keys rounded per group (phase 0, with the values), then staged (phase 1);
// k8v4: the keys in kv_store_q8.comp, the values in kv_store_q4.comp.
void kv_store_q4(Device& device, Stream& stream, const KvStoreOp& op) {
  if (op.head_dim % 32 || op.head_dim > 256) throw GpuError("kv_store: a q4 cache needs head_dim a multiple of 32, at most 256");
  const int64_t n_kv = op.kv_dim / op.head_dim, rot = kv_rotation_block(op.head_dim);
  const Groups grid{u32(n_kv, "KV heads"), u32(op.n_tok, "tokens"), 1};
  const bool k8 = op.kv_type == KvType::k8v4;
  if (k8) {
    const Q8StorePush push = q8_store_push(op, 1);
    stream.dispatch(device.pipeline({"kv_store_q8", 6, sizeof push, {}}),
                    {in(*op.k), in(*op.v), in(*op.pos), in(*op.base), inout(*op.k_cache), in(*op.v_cache)}, &push, sizeof push, grid);
  } else if (!op.stage || !op.seq) {
    throw GpuError("kv_store: q4 keys need their stage and the tokens' sequences");
  }
  struct {
    uint32_t kv_dim, head_dim, sides, key_block_bytes, value_block_bytes, rot_block;
    float rot_scale;
    uint32_t n_tok, phase;
  } push{u32(op.kv_dim, "kv_dim"), u32(op.head_dim, "head_dim"), k8 ? 2u : 3u,
         u32(KvCache::block_bytes(n_kv, op.head_dim, op.kv_type, 0), "key block bytes"),
         u32(KvCache::block_bytes(n_kv, op.head_dim, op.kv_type, 1), "value block bytes"), u32(rot, "rotation"),
         1.0f / std::sqrt(static_cast<float>(rot)),  // kv_rotate's
         u32(op.n_tok, "tokens"), 0};
  const Buffer& stage = k8 ? *op.k : *op.stage;  // k8v4: bound, never read
  const Buffer& seq = k8 ? *op.pos : *op.seq;
  const Pipeline& pipe = device.pipeline({"kv_store_q4", 8, sizeof push, {}});
  stream.dispatch(pipe, {in(*op.k), in(*op.v), in(*op.pos), in(*op.base), k8 ? in(*op.k_cache) : inout(*op.k_cache), inout(*op.v_cache),
                         in(stage), in(seq)},
                  &push, sizeof push, grid);
  if (k8) return;
  push.phase = 1;  // then the stage: the rounding above read it
  stream.dispatch(pipe, {in(*op.k), in(*op.v), in(*op.pos), in(*op.base), in(*op.k_cache), in(*op.v_cache), inout(stage), in(seq)},
                  &push, sizeof push, grid);
}
}  // namespace

size_t kv_stage_bytes(int64_t n_seq, int64_t kv_dim) { return static_cast<size_t>(n_seq * kv_dim * KvCache::kKeyGroup * 4); }

void kv_stage_fill(Stream& stream, const Buffer& stage, const KvCache& kv, int64_t layer, const int32_t* seq, const int32_t* pos,
                   int64_t n) {
  std::vector<float> group;
  std::vector<bool> seen(static_cast<size_t>(kv.n_seq()), false);
  for (int64_t t = 0; t < n; ++t) {
    if (t > 0 && seq[t] == seq[t - 1]) {
      if (pos[t] != pos[t - 1] + 1) throw Error("internal: a GPU q4 key store needs each sequence's positions consecutive");
      continue;
    }
    if (seen[static_cast<size_t>(seq[t])]) throw Error("internal: a GPU q4 key store needs each sequence's tokens together");
    seen[static_cast<size_t>(seq[t])] = true;
    if (kv.key_stage_holds(layer, seq[t], pos[t])) continue;
    group.resize(static_cast<size_t>(kv.kv_dim() * KvCache::kKeyGroup));
    kv.key_group(layer, seq[t], pos[t], group.data());
    stream.upload(stage, group.data(), group.size() * 4, static_cast<size_t>(seq[t]) * group.size() * 4);
  }
}

void kv_store(Device& device, Stream& stream, const KvStoreOp& op) {
  if (op.n_tok <= 0) return;
  if (op.kv_type == KvType::q4 || op.kv_type == KvType::k8v4) return kv_store_q4(device, stream, op);
  const bool q8 = op.kv_type == KvType::q8;
  const Q8StorePush push = q8_store_push(op, 3);  // f16's shaders read its first two words
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

void kv_rotate_rows(Device& device, Stream& stream, const Buffer& x, int64_t offset, int64_t ld, int64_t n_rows,
                    int64_t n_heads, int64_t head_dim) {
  if (n_rows <= 0) return;
  if (head_dim > 256) throw GpuError("kv_rotate_rows: head_dim past 256");
  const int64_t rot = kv_rotation_block(head_dim);
  struct {
    uint32_t offset, ld, head_dim, rot_block;
    float rot_scale;
  } push{u32(offset, "offset"), u32(ld, "ld"), u32(head_dim, "head_dim"), u32(rot, "rotation"),
         1.0f / std::sqrt(static_cast<float>(rot))};  // kv_rotate's
  stream.dispatch(device.pipeline({"kv_rotate", 1, sizeof push, {}}), {inout(x)}, &push, sizeof push,
                  {u32(n_heads, "heads"), u32(n_rows, "rows"), 1});
}

}  // namespace basalt::gpu
