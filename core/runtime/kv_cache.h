// SPDX-License-Identifier: MIT
// Keys and values of every layer, per sequence slot, stored as f16.
//
// Both are stored in blocks of kBlock positions, per (layer, seq, block) and
// then per KV head, so that the attention kernels read one (block, KV head)
// as two contiguous runs (the hardware prefetchers follow them; decode reads
// the whole cache once per token):
//   keys:   [KV head][head_dim][kBlock]   transposed, position fastest: value d of
//           consecutive keys is one vector, scored with keys in lanes (no
//           transposition at run time; cpu/x86/attention_x86.inc)
//   values: [KV head][kBlock][head_dim]   rows
// A block's positions past the ones written hold whatever was there: readers mask them.
#pragma once

#include <cstdint>

#include "core/model/model_spec.h"
#include "quant/weight.h"

namespace basalt {

class KvCache {
 public:
  static constexpr int64_t kBlock = 64;

  KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq);

  int64_t n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return bytes(n_layer_, n_ctx_, kv_dim_, n_seq_); }
  // What a cache of this shape allocates.
  static size_t bytes(int64_t n_layer, int64_t n_ctx, int64_t kv_dim, int n_seq);

  // The key and value of (layer, seq, pos), [kv_dim] f16 each, written.
  void set(int64_t layer, int seq, int64_t pos, const uint16_t* key, const uint16_t* value);
  // Element i of the key and of the value at (layer, seq, pos).
  uint16_t key(int64_t layer, int seq, int64_t pos, int64_t i) const {
    return key_blocks(layer, seq)[pos / kBlock * block_stride() + i * kBlock + pos % kBlock];
  }
  uint16_t value(int64_t layer, int seq, int64_t pos, int64_t i) const {
    return value_blocks(layer, seq)[pos / kBlock * block_stride() + (i / head_dim_ * kBlock + pos % kBlock) * head_dim_ +
                                    i % head_dim_];
  }
  // The blocks of (layer, seq): block b at + b * block_stride(), KV head h's part at + h * head_dim * kBlock.
  const uint16_t* key_blocks(int64_t layer, int seq) const { return blocks(0, layer, seq); }
  const uint16_t* value_blocks(int64_t layer, int seq) const { return blocks(1, layer, seq); }
  int64_t block_stride() const { return kv_dim_ * kBlock; }

 private:
  const uint16_t* blocks(int kv, int64_t layer, int seq) const;
  int64_t blocks_per_slot() const { return (n_ctx_ + kBlock - 1) / kBlock; }

  int64_t n_layer_, n_ctx_, kv_dim_, head_dim_;
  int n_seq_;
  AlignedBytes data_;
};

}  // namespace basalt
