// SPDX-License-Identifier: MIT
// A paged KV cache whose sequences' blocks interleave with each other's and
// with a sequence left out of the test (the last one, n_seq): block ids are
// not in position order, so a reader that ignores the block tables reads
// some other sequence's keys.
#pragma once

#include "core/graph/kv_cache.h"

namespace basalt::testutil {

inline KvCache interleaved_kv_cache(const ModelSpec& spec, int64_t n_ctx, int n_seq, KvType type) {
  const int64_t per_seq = (n_ctx + KvCache::kBlock - 1) / KvCache::kBlock;
  KvCache kv(spec, n_ctx, n_seq + 1, (n_seq + 1) * per_seq, type);
  for (int64_t b = 0; b < per_seq; ++b)
    for (int seq = n_seq; seq >= 0; --seq) kv.grow(seq);
  return kv;
}

}  // namespace basalt::testutil
