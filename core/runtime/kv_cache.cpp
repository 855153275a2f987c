// SPDX-License-Identifier: MIT
#include "core/runtime/kv_cache.h"

#include "core/error.h"

namespace basalt {

KvCache::KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq)
    : n_layer_(spec.n_layer), n_ctx_(n_ctx), kv_dim_(spec.kv_dim()), n_seq_(n_seq) {
  if (n_ctx <= 0 || n_seq <= 0) throw Error("KV cache needs a positive context size and sequence count");
  data_ = aligned_alloc_bytes(bytes());
}

size_t KvCache::bytes(int64_t n_layer, int64_t n_ctx, int64_t kv_dim, int n_seq) {
  const int64_t key_positions = (n_ctx + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
  return static_cast<size_t>(n_layer * n_seq * (key_positions + n_ctx) * kv_dim) * sizeof(uint16_t);
}

void KvCache::set_key(int64_t layer, int seq, int64_t pos, const uint16_t* key) {
  uint16_t* dst = const_cast<uint16_t*>(key_blocks(layer, seq)) + pos / kKeyBlock * key_block_stride() + pos % kKeyBlock;
  for (int64_t i = 0; i < kv_dim_; ++i) dst[i * kKeyBlock] = key[i];
}

const uint16_t* KvCache::key_blocks(int64_t layer, int seq) const {
  return const_cast<KvCache*>(this)->keys() + slot(layer, seq) * key_blocks_per_slot() * key_block_stride();
}

}  // namespace basalt
