// SPDX-License-Identifier: MIT
// Keys and values of every layer, per sequence slot, stored as f16.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/model_spec.h"
#include "quant/weight.h"

namespace basalt {

class KvCache {
 public:
  KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq);

  int64_t n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return 2 * static_cast<size_t>(n_layer_) * n_seq_ * n_ctx_ * kv_dim_ * sizeof(uint16_t); }

  // [kv_dim] f16 at (layer, seq, pos).
  uint16_t* k(int64_t layer, int seq, int64_t pos) { return base(0, layer, seq, pos); }
  uint16_t* v(int64_t layer, int seq, int64_t pos) { return base(1, layer, seq, pos); }
  const uint16_t* k(int64_t layer, int seq, int64_t pos) const { return const_cast<KvCache*>(this)->base(0, layer, seq, pos); }
  const uint16_t* v(int64_t layer, int seq, int64_t pos) const { return const_cast<KvCache*>(this)->base(1, layer, seq, pos); }

 private:
  uint16_t* base(int kv, int64_t layer, int seq, int64_t pos) {
    size_t idx = ((static_cast<size_t>(kv) * n_layer_ + layer) * n_seq_ + seq) * n_ctx_ + pos;
    return reinterpret_cast<uint16_t*>(data_.get()) + idx * kv_dim_;
  }
  int64_t n_layer_, n_ctx_, kv_dim_;
  int n_seq_;
  AlignedBytes data_;
};

}  // namespace basalt
