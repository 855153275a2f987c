// SPDX-License-Identifier: MIT
// Keys and values of every layer, per sequence slot, stored as f16 or as int8
// with one f32 scale per (position, KV head) (KvType::q8: half the memory and
// half the bytes a decode step reads; per-head absmax, so a key or value
// vector keeps its relative precision whatever its size).
//
// Both are stored in blocks of kBlock positions, per (layer, seq, block) and
// then per KV head, so that the attention kernels read one (block, KV head)
// as two contiguous runs (the hardware prefetchers follow them; decode reads
// the whole cache once per token):
//   keys:   [KV head][head_dim][kBlock]   transposed, position fastest: value d of
//           consecutive keys is one vector, scored with keys in lanes (no
//           transposition at run time; cpu/x86/attention_x86.inc)
//   values: [KV head][kBlock][head_dim]   rows
//   q8 only, after either: scales [KV head][kBlock] f32, element = scale * int8
// A block's positions past the ones written hold whatever was there (zeros
// at first): readers mask them.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "core/model/model_spec.h"
#include "quant/weight.h"

namespace basalt {

enum class KvType { f16, q8 };
const char* kv_type_name(KvType type);
KvType parse_kv_type(std::string_view name);  // "f16" or "q8"; Error otherwise

// The q8 rounding of n values: returns the scale d = max|x| / 127 and sets
// q[i * q_stride] = x[i] * (127 / max|x|) rounded to nearest even (0 for an
// all-zero x), so that x[i] ~ d * q[i]. shaders/kv_store_q8.comp rounds the
// same way, but for GLSL's division (a rare element one step away).
float quantize_kv_q8(const float* x, int64_t n, int8_t* q, int64_t q_stride = 1);

class KvCache {
 public:
  static constexpr int64_t kBlock = 64;

  KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq, KvType type = KvType::f16);

  KvType type() const { return type_; }
  int64_t n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return bytes(n_layer_, n_head_kv_, head_dim_, n_ctx_, n_seq_, type_); }
  // What a cache of this shape allocates.
  static size_t bytes(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t n_ctx, int n_seq, KvType type);
  // Bytes of one block of keys (or of values) of one (layer, seq): kBlock positions of every KV head.
  static int64_t block_bytes(int64_t n_head_kv, int64_t head_dim, KvType type);
  int64_t block_bytes() const { return block_bytes(n_head_kv_, head_dim_, type_); }
  // Bytes of one position's keys and values in one layer (scales included): what attention reads per position.
  static int64_t position_bytes(int64_t n_head_kv, int64_t head_dim, KvType type) {
    return 2 * block_bytes(n_head_kv, head_dim, type) / kBlock;
  }
  // Where a q8 block's scales start, in bytes from the block's start.
  int64_t scales_offset() const { return kv_dim_ * kBlock; }

  // Stores the key and value of (layer, seq, pos), [kv_dim] f32 each, rounded
  // to the cache's type (f16: to nearest even, as core/util/half.h).
  void store(int64_t layer, int seq, int64_t pos, const float* key, const float* value);
  // Element i of the key and of the value at (layer, seq, pos), as stored (f16 or scale * int8).
  float key(int64_t layer, int seq, int64_t pos, int64_t i) const { return element(0, layer, seq, pos, i); }
  float value(int64_t layer, int seq, int64_t pos, int64_t i) const { return element(1, layer, seq, pos, i); }
  // The blocks of (layer, seq): block b at + b * block_bytes(), KV head h's
  // elements at + h * head_dim * kBlock elements, its q8 scales at + scales_offset() + h * kBlock * 4 bytes.
  const uint8_t* key_blocks(int64_t layer, int seq) const { return blocks(0, layer, seq); }
  const uint8_t* value_blocks(int64_t layer, int seq) const { return blocks(1, layer, seq); }

 private:
  const uint8_t* blocks(int kv, int64_t layer, int seq) const;
  uint8_t* blocks(int kv, int64_t layer, int seq) { return const_cast<uint8_t*>(std::as_const(*this).blocks(kv, layer, seq)); }
  int64_t blocks_per_slot() const { return (n_ctx_ + kBlock - 1) / kBlock; }
  // Offset in elements of (KV head h, dim d) at position j of a block: keys transposed, values rows.
  int64_t index(int kv, int64_t h, int64_t d, int64_t j) const {
    return kv == 0 ? (h * head_dim_ + d) * kBlock + j : (h * kBlock + j) * head_dim_ + d;
  }
  float element(int kv, int64_t layer, int seq, int64_t pos, int64_t i) const;

  int64_t n_layer_, n_ctx_, kv_dim_, n_head_kv_, head_dim_;
  int n_seq_;
  KvType type_;
  AlignedBytes data_;
};

}  // namespace basalt
