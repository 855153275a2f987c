// SPDX-License-Identifier: MIT
#include "core/graph/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
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
    : KvCache(spec, n_ctx, n_seq, n_seq > 0 && n_ctx > 0 ? n_seq * blocks_for(n_ctx) : 0, type) {
  for (int seq = 0; seq < n_seq_; ++seq)
    while (grow(seq)) {
    }
}

KvCache::KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq, int64_t n_blocks, KvType type)
    : n_layer_(spec.n_layer), n_ctx_(n_ctx), kv_dim_(spec.kv_dim()), n_head_kv_(spec.n_head_kv),
      head_dim_(spec.head_dim), n_seq_(n_seq), type_(type), n_blocks_(n_blocks) {
  if (n_ctx <= 0 || n_seq <= 0) throw Error("KV cache needs a positive context size and sequence count");
  if (n_blocks <= 0 || n_blocks > INT32_MAX) throw Error("KV cache needs a positive block count, got " + std::to_string(n_blocks));
  data_ = aligned_alloc_bytes(bytes());  // resident as positions fill
  tables_.resize(static_cast<size_t>(n_seq));
  refs_.assign(static_cast<size_t>(n_blocks), 0);
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int64_t KvCache::block_bytes(int64_t n_head_kv, int64_t head_dim, KvType type) {
  const int64_t elements = n_head_kv * head_dim * kBlock;
  return type == KvType::q8 ? elements + n_head_kv * kBlock * 4 : elements * 2;
}

size_t KvCache::bytes(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t n_ctx, int n_seq, KvType type) {
  return 2 * static_cast<size_t>(n_layer * n_seq * blocks_for(n_ctx) * block_bytes(n_head_kv, head_dim, type));
}

bool KvCache::grow(int seq) {
  std::vector<int32_t>& t = tables_.at(static_cast<size_t>(seq));
  if (free_.empty() || static_cast<int64_t>(t.size()) >= blocks_for(n_ctx_)) return false;
  t.push_back(free_.back());
  free_.pop_back();
  refs_[static_cast<size_t>(t.back())] = 1;
  return true;
}

void KvCache::share(int seq, int32_t block) {
  std::vector<int32_t>& t = tables_.at(static_cast<size_t>(seq));
  if (static_cast<int64_t>(t.size()) >= blocks_for(n_ctx_)) throw Error("internal: KV block shared past a sequence's context");
  ref(block);
  t.push_back(block);
}

int64_t KvCache::largest_free_run() const {
  std::vector<uint8_t> free(static_cast<size_t>(n_blocks_), 0);
  for (int32_t b : free_) free[static_cast<size_t>(b)] = 1;
  int64_t best = 0, run = 0;
  for (uint8_t f : free) best = std::max(best, run = f ? run + 1 : 0);
  return best;
}

void KvCache::release(int seq) {
  std::vector<int32_t>& t = tables_.at(static_cast<size_t>(seq));
  for (int32_t b : t) unref(b);
  t.clear();
}

void KvCache::ref(int32_t block) {
  int32_t& r = refs_.at(static_cast<size_t>(block));
  if (r <= 0) throw Error("internal: a reference to free KV block " + std::to_string(block));
  ++r;
}

void KvCache::unref(int32_t block) {
  int32_t& r = refs_.at(static_cast<size_t>(block));
  if (r <= 0) throw Error("internal: KV block " + std::to_string(block) + " released twice");
  if (--r == 0) free_.push_back(block);
}

const uint8_t* KvCache::pool(int kv, int64_t layer) const {
  return data_.get() + (kv * n_layer_ + layer) * n_blocks_ * block_bytes();
}

const uint8_t* KvCache::block_of(int kv, int64_t layer, int seq, int64_t pos) const {
  const std::vector<int32_t>& t = table(seq);
  if (pos < 0 || pos / kBlock >= static_cast<int64_t>(t.size()))
    throw Error("internal: position " + std::to_string(pos) + " is outside the KV blocks of sequence " + std::to_string(seq));
  return pool(kv, layer) + t[static_cast<size_t>(pos / kBlock)] * block_bytes();
}

void KvCache::store(int64_t layer, int seq, int64_t pos, const float* key, const float* value) {
  const int64_t j = pos % kBlock;
  for (int kv = 0; kv < 2; ++kv) {
    const float* x = kv == 0 ? key : value;
    uint8_t* block = const_cast<uint8_t*>(block_of(kv, layer, seq, pos));
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

void KvCache::store_halves(int64_t layer, int seq, int64_t pos, const uint16_t* key, const uint16_t* value) {
  if (type_ != KvType::f16) throw std::logic_error("KvCache::store_halves: the cache is not f16");
  const int64_t j = pos % kBlock;
  uint16_t* keys = reinterpret_cast<uint16_t*>(const_cast<uint8_t*>(block_of(0, layer, seq, pos)));
  uint16_t* values = reinterpret_cast<uint16_t*>(const_cast<uint8_t*>(block_of(1, layer, seq, pos)));
  for (int64_t h = 0; h < n_head_kv_; ++h) {
    for (int64_t d = 0; d < head_dim_; ++d) keys[index(0, h, d, j)] = key[h * head_dim_ + d];
    std::memcpy(values + index(1, h, 0, j), value + h * head_dim_, static_cast<size_t>(head_dim_) * 2);
  }
}

float KvCache::element(int kv, int64_t layer, int seq, int64_t pos, int64_t i) const {
  const uint8_t* block = block_of(kv, layer, seq, pos);
  const int64_t h = i / head_dim_, at = index(kv, h, i % head_dim_, pos % kBlock);
  if (type_ == KvType::f16) return f16_to_f32(reinterpret_cast<const uint16_t*>(block)[at]);
  float d;
  std::memcpy(&d, block + scales_offset() + (h * kBlock + pos % kBlock) * 4, 4);
  return d * static_cast<float>(reinterpret_cast<const int8_t*>(block)[at]);
}

void KvCache::read_head(int kv, int64_t layer, int seq, int64_t pos, int64_t h, float* out) const {
  const uint8_t* block = block_of(kv, layer, seq, pos);
  const int64_t j = pos % kBlock, hd = head_dim_;
  const int64_t first = index(kv, h, 0, j), stride = index(kv, h, 1, j) - first;
  if (type_ == KvType::f16) {
    const uint16_t* e = reinterpret_cast<const uint16_t*>(block) + first;
    for (int64_t d = 0; d < hd; ++d) out[d] = f16_to_f32(e[d * stride]);
    return;
  }
  float scale;
  std::memcpy(&scale, block + scales_offset() + (h * kBlock + j) * 4, 4);
  const int8_t* e = reinterpret_cast<const int8_t*>(block) + first;
  for (int64_t d = 0; d < hd; ++d) out[d] = scale * static_cast<float>(e[d * stride]);
}

}  // namespace basalt
