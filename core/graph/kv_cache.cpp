// SPDX-License-Identifier: MIT
#include "core/graph/kv_cache.h"

#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/util/half.h"

namespace basalt {

const char* kv_type_name(KvType type) { return type == KvType::q8 ? "q8" : "f16"; }

KvType parse_kv_type(std::string_view name) {
  if (name == "f16") return KvType::f16;
  if (name == "q8") return KvType::q8;
  throw Error("unknown KV cache type '" + std::string(name) + "' (expected f16 or q8)");
}

float quantize_kv_q8(const float* x, int64_t n, int8_t* q, int64_t q_stride) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127, inv = amax > 0 ? 127 / amax : 0;
  const float id = std::isfinite(inv) ? inv : 0;  // max|x| ~1e-38: zeros (off by at most that)
  for (int64_t i = 0; i < n; ++i)  // clamped: a NaN or an infinity must not reach the int conversion
    q[i * q_stride] = static_cast<int8_t>(std::fmin(127.0f, std::fmax(-127.0f, std::nearbyint(x[i] * id))));
  return d;
}

KvCache::KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq, KvType type)
    : n_layer_(spec.n_layer), n_ctx_(n_ctx), kv_dim_(spec.kv_dim()), n_head_kv_(spec.n_head_kv),
      head_dim_(spec.head_dim), n_seq_(n_seq), type_(type) {
  if (n_ctx <= 0 || n_seq <= 0) throw Error("KV cache needs a positive context size and sequence count");
  spec.check_context(n_ctx);
  data_ = aligned_alloc_bytes(bytes());
}

int64_t KvCache::block_bytes(int64_t n_head_kv, int64_t head_dim, KvType type) {
  const int64_t elements = n_head_kv * head_dim * kBlock;
  return type == KvType::q8 ? elements + n_head_kv * kBlock * 4 : elements * 2;
}

size_t KvCache::bytes(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t n_ctx, int n_seq, KvType type) {
  const int64_t blocks = (n_ctx + kBlock - 1) / kBlock;
  return 2 * static_cast<size_t>(n_layer * n_seq * blocks * block_bytes(n_head_kv, head_dim, type));
}

const uint8_t* KvCache::blocks(int kv, int64_t layer, int seq) const {
  const int64_t slot = (kv * n_layer_ + layer) * n_seq_ + seq;
  return data_.get() + slot * blocks_per_slot() * block_bytes();
}

void KvCache::store(int64_t layer, int seq, int64_t pos, const float* key, const float* value) {
  const int64_t j = pos % kBlock;
  for (int kv = 0; kv < 2; ++kv) {
    const float* x = kv == 0 ? key : value;
    uint8_t* block = blocks(kv, layer, seq) + pos / kBlock * block_bytes();
    for (int64_t h = 0; h < n_head_kv_; ++h) {
      const float* xh = x + h * head_dim_;
      if (type_ == KvType::f16) {
        uint16_t* e = reinterpret_cast<uint16_t*>(block);
        for (int64_t d = 0; d < head_dim_; ++d) e[index(kv, h, d, j)] = f32_to_f16(xh[d]);
        continue;
      }
      int8_t* e = reinterpret_cast<int8_t*>(block) + index(kv, h, 0, j);
      const float scale = quantize_kv_q8(xh, head_dim_, e, index(kv, h, 1, j) - index(kv, h, 0, j));
      std::memcpy(block + scales_offset() + (h * kBlock + j) * 4, &scale, 4);
    }
  }
}

float KvCache::element(int kv, int64_t layer, int seq, int64_t pos, int64_t i) const {
  const uint8_t* block = blocks(kv, layer, seq) + pos / kBlock * block_bytes();
  const int64_t h = i / head_dim_, at = index(kv, h, i % head_dim_, pos % kBlock);
  if (type_ == KvType::f16) return f16_to_f32(reinterpret_cast<const uint16_t*>(block)[at]);
  float d;
  std::memcpy(&d, block + scales_offset() + (h * kBlock + pos % kBlock) * 4, 4);
  return d * static_cast<float>(reinterpret_cast<const int8_t*>(block)[at]);
}

}  // namespace basalt
