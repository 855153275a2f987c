// SPDX-License-Identifier: MIT
// Keys and values of every layer, per sequence slot, stored as f16.
//
// Values are rows: [kv_dim] per position. Keys are stored transposed in
// blocks of kKeyBlock positions: per (layer, seq, block) a [kv_dim][kKeyBlock]
// array, position fastest, so that attention loads value d of consecutive
// keys as one vector and scores them with keys in lanes (no transposition at
// run time; cpu/x86/attention_x86.inc). A block's positions past the ones
// written hold whatever was there: readers mask them.
#pragma once

#include <cstdint>

#include "core/model/model_spec.h"
#include "quant/weight.h"

namespace basalt {

class KvCache {
 public:
  static constexpr int64_t kKeyBlock = 64;

  KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq);

  int64_t n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return bytes(n_layer_, n_ctx_, kv_dim_, n_seq_); }
  // What a cache of this shape allocates.
  static size_t bytes(int64_t n_layer, int64_t n_ctx, int64_t kv_dim, int n_seq);

  // The key of (layer, seq, pos), [kv_dim] f16, written; and its element i.
  void set_key(int64_t layer, int seq, int64_t pos, const uint16_t* key);
  uint16_t key(int64_t layer, int seq, int64_t pos, int64_t i) const {
    return key_blocks(layer, seq)[pos / kKeyBlock * key_block_stride() + i * kKeyBlock + pos % kKeyBlock];
  }
  // The keys of (layer, seq): block b ([kv_dim][kKeyBlock]) at + b * key_block_stride().
  const uint16_t* key_blocks(int64_t layer, int seq) const;
  int64_t key_block_stride() const { return kv_dim_ * kKeyBlock; }

  // [kv_dim] f16 value at (layer, seq, pos).
  uint16_t* v(int64_t layer, int seq, int64_t pos) { return values() + (slot(layer, seq) * n_ctx_ + pos) * kv_dim_; }
  const uint16_t* v(int64_t layer, int seq, int64_t pos) const { return const_cast<KvCache*>(this)->v(layer, seq, pos); }

 private:
  int64_t slot(int64_t layer, int seq) const { return layer * n_seq_ + seq; }
  int64_t key_blocks_per_slot() const { return (n_ctx_ + kKeyBlock - 1) / kKeyBlock; }
  uint16_t* keys() { return reinterpret_cast<uint16_t*>(data_.get()); }
  uint16_t* values() { return keys() + n_layer_ * n_seq_ * key_blocks_per_slot() * key_block_stride(); }

  int64_t n_layer_, n_ctx_, kv_dim_;
  int n_seq_;
  AlignedBytes data_;
};

}  // namespace basalt
