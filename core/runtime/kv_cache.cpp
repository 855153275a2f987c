// SPDX-License-Identifier: MIT
#include "core/runtime/kv_cache.h"

#include <cstring>

#include "core/error.h"

namespace basalt {

KvCache::KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq)
    : n_layer_(spec.n_layer), n_ctx_(n_ctx), kv_dim_(spec.kv_dim()), head_dim_(spec.head_dim), n_seq_(n_seq) {
  if (n_ctx <= 0 || n_seq <= 0) throw Error("KV cache needs a positive context size and sequence count");
  data_ = aligned_alloc_bytes(bytes());
}

size_t KvCache::bytes(int64_t n_layer, int64_t n_ctx, int64_t kv_dim, int n_seq) {
  const int64_t positions = (n_ctx + kBlock - 1) / kBlock * kBlock;
  return 2 * static_cast<size_t>(n_layer * n_seq * positions * kv_dim) * sizeof(uint16_t);
}

const uint16_t* KvCache::blocks(int kv, int64_t layer, int seq) const {
  const int64_t slot = (kv * n_layer_ + layer) * n_seq_ + seq;
  return reinterpret_cast<const uint16_t*>(data_.get()) + slot * blocks_per_slot() * block_stride();
}

void KvCache::set(int64_t layer, int seq, int64_t pos, const uint16_t* key, const uint16_t* value) {
  const int64_t at = pos / kBlock * block_stride(), j = pos % kBlock;
  uint16_t* k = const_cast<uint16_t*>(key_blocks(layer, seq)) + at + j;
  for (int64_t i = 0; i < kv_dim_; ++i) k[i * kBlock] = key[i];
  uint16_t* v = const_cast<uint16_t*>(value_blocks(layer, seq)) + at + j * head_dim_;
  for (int64_t h = 0; h < kv_dim_ / head_dim_; ++h)
    std::memcpy(v + h * kBlock * head_dim_, value + h * head_dim_, static_cast<size_t>(head_dim_) * sizeof(uint16_t));
}

}  // namespace basalt
