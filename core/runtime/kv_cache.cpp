// SPDX-License-Identifier: MIT
#include "core/runtime/kv_cache.h"

#include "core/error.h"

namespace basalt {

KvCache::KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq)
    : n_layer_(spec.n_layer), n_ctx_(n_ctx), kv_dim_(spec.kv_dim()), n_seq_(n_seq) {
  if (n_ctx <= 0 || n_seq <= 0) throw Error("KV cache needs a positive context size and sequence count");
  data_ = aligned_alloc_bytes(bytes());
}

}  // namespace basalt
