// SPDX-License-Identifier: MIT
#include "core/graph/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/graph/kv_rotation.h"
#include "core/util/half.h"

namespace basalt {

const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::q8: return "q8";
    case KvType::q4: return "q4";
    case KvType::k8v4: return "k8v4";
    default: return "f16";
  }
}

KvType kv_side_type(KvType type, int kv) {
  if (type == KvType::k8v4) return kv == 0 ? KvType::q8 : KvType::q4;
  return type;
}

KvType parse_kv_type(std::string_view name) {
  if (name == "f16") return KvType::f16;
  if (name == "q8") return KvType::q8;
  if (name == "q4") return KvType::q4;
  if (name == "k8v4") return KvType::k8v4;
  throw Error("unknown KV cache type '" + std::string(name) + "' (expected f16, q8, q4 or k8v4)");
}

std::string kv_type_unsupported(KvType type, int64_t head_dim) {
  if (kv_side_type(type, 1) == KvType::q4 && (head_dim % 32 != 0 || head_dim > KvCache::kMaxQ4HeadDim))
    return std::string("a ") + kv_type_name(type) + " KV cache needs head_dim a multiple of 32 (its scale groups), at most " +
           std::to_string(KvCache::kMaxQ4HeadDim) + "; this model's is " + std::to_string(head_dim);
  return "";
}

bool kv_keys_rotated(KvType type, int64_t head_dim) {
  const bool covered = (head_dim & (head_dim - 1)) == 0 || head_dim % 32 == 0;  // kv_rotation_block's blocks
  return kv_side_type(type, 0) == KvType::q8 && covered && head_dim <= KvCache::kMaxQ4HeadDim;
}

float quantize_kv_q8(const float* x, int64_t n, int8_t* q, int64_t q_stride) {
  // std::max, not fmax, and the rounding below: this file is built for the baseline ISA, where
  // fmax, fmin and nearbyint are calls per element (most of a 7B-shaped prefill's q8 store).
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));  // a NaN is skipped, as fmax skips it
  const float d = amax / 127, inv = amax > 0 ? 127 / amax : 0;
  const float id = std::isfinite(inv) ? inv : 0;  // max|x| ~1e-38: zeros (off by at most that)
  // (v + 1.5 x 2^23) - 1.5 x 2^23 rounds v to nearest even (nearbyint's result) for |v| <= 2^22,
  // and |x * id| <= 127 here; clamped: a NaN (from an infinity) must not reach the int conversion.
  constexpr float kRound = 12582912.0f;
  for (int64_t i = 0; i < n; ++i)
    q[i * q_stride] = static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, (x[i] * id + kRound) - kRound)));
  return d;
}

namespace {
// Code c into the nibble of `byte` at `shift` (0 or 4), the other nibble kept.
void put_nibble(uint8_t& byte, int shift, uint8_t c) { byte = static_cast<uint8_t>((byte & ~(0xF << shift)) | c << shift); }

// A q4 key's code from its group's f16 step and minimum (quantize_kv_q4_keys).
struct KeyRounding {
  float minimum, inverse_step;
  KeyRounding(uint16_t step, uint16_t min) : minimum(f16_to_f32(min)) {
    const float d = f16_to_f32(step);
    inverse_step = d > 0 && std::isfinite(d) ? 1 / d : 0;
  }
  uint8_t code(float x) const {  // floor(y + 0.5) clamped to 0..15: the conversion truncates y >= 0, and a NaN -> 0
    return static_cast<uint8_t>(std::min(15.0f, std::max(0.0f, (x - minimum) * inverse_step + 0.5f)));
  }
};
}  // namespace

uint32_t quantize_kv_q4_keys(const float* x, int64_t n, uint8_t* code) {
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);  // NaNs skipped
  const uint16_t step = f32_to_f16((hi - lo) / 15), minimum = f32_to_f16(lo);
  const KeyRounding rounding(step, minimum);
  for (int64_t i = 0; i < n; ++i) code[i] = rounding.code(x[i]);
  return step | static_cast<uint32_t>(minimum) << 16;
}

uint16_t quantize_kv_q4(const float* x, uint8_t code[32]) {
  float amax = 0, m = 0;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), m = x[i];
  const float d = m / -8, id = d != 0 ? 1 / d : 0;
  for (int i = 0; i < 32; ++i)  // clamped (std::max: a NaN -> 0): a NaN or an infinity must not reach the int conversion
    code[i] = static_cast<uint8_t>(std::min(15.0f, std::max(0.0f, x[i] * id + 8.5f)));
  return f32_to_f16(d);
}

KvCache::KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq, KvType type, int64_t run_tokens)
    : KvCache(spec, n_ctx, n_seq, n_seq > 0 && n_ctx > 0 ? n_seq * blocks_for(n_ctx) : 0, type, run_tokens) {
  for (int seq = 0; seq < n_seq_; ++seq)
    while (grow(seq)) {
    }
}

// Blocks a ring needs so that one run's positions and the window before the
// first of them are all in it: window + run - 1 positions, on one more block
// when they do not start at a block's start. n_ctx's blocks when that is no fewer.
// Attention sinks (ModelSpec::attention_sinks) keep blocks of their own in front.
int64_t KvCache::ring_blocks_for(const ModelSpec& spec, int64_t n_ctx, int64_t run_tokens) {
  const int64_t all = blocks_for(n_ctx);
  if (spec.sliding_window <= 0 || run_tokens <= 0) return all;
  return std::min(all, blocks_for(spec.attention_sinks) + blocks_for(spec.sliding_window + std::min(run_tokens, n_ctx) - 1) + 1);
}

KvCache::KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq, int64_t n_blocks, KvType type, int64_t run_tokens,
                 int64_t ring_pool)
    : n_layer_(spec.n_layer), n_ctx_(n_ctx), kv_dim_(spec.kv_dim()), n_head_kv_(spec.n_head_kv),
      head_dim_(spec.head_dim), n_seq_(n_seq), type_(type), n_blocks_(n_blocks),
      run_tokens_(run_tokens > 0 ? std::min(run_tokens, n_ctx) : n_ctx), window_(spec.sliding_window),
      ring_blocks_(ring_blocks_for(spec, n_ctx, run_tokens)), sink_blocks_(blocks_for(spec.attention_sinks)) {
  if (n_ctx <= 0 || n_seq <= 0) throw Error("KV cache needs a positive context size and sequence count");
  if (n_blocks <= 0 || n_blocks > INT32_MAX) throw Error("KV cache needs a positive block count, got " + std::to_string(n_blocks));
  if (const std::string why = kv_type_unsupported(type, head_dim_); !why.empty()) throw Error(why);
  ring_pool_ = ring_pool_for(spec, n_ctx, n_seq, n_blocks, run_tokens, ring_pool);
  for (int64_t l = 0; l < n_layer_; ++l) {
    spec_windowed_.push_back(spec.layer_windowed(l));
    layer_at_.push_back(ring_pool_ > 0 && spec.layer_windowed(l) ? ring_layers_++ : pool_layers_++);
  }
  data_ = aligned_alloc_bytes(pool_bytes());  // resident as positions fill
  if (kv_side_type(type, 0) == KvType::q4) {
    const auto stages = static_cast<size_t>(n_layer_ * n_seq);
    stages_.resize(stages);
    stage_.resize(stages * static_cast<size_t>(kv_dim_ * kKeyGroup));
    stage_range_.resize(stages * static_cast<size_t>(kv_dim_ * 2));
  }
  tables_.resize(static_cast<size_t>(n_seq));
  refs_.assign(static_cast<size_t>(n_blocks), 0);
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
  if (ring_layers_ > 0) {
    rings_.assign(static_cast<size_t>(n_seq), std::vector<int32_t>(static_cast<size_t>(blocks_for(n_ctx)), 0));
    held_.assign(static_cast<size_t>(n_seq), Held{sink_blocks_, sink_blocks_, 0});
    ring_of_.assign(static_cast<size_t>(n_blocks), -1);
    ring_refs_.assign(static_cast<size_t>(ring_pool_), 0);
    for (int64_t r = ring_pool_ - 1; r >= 0; --r) ring_free_.push_back(static_cast<int32_t>(r));
  }
}

int64_t KvCache::ring_pool_for(const ModelSpec& spec, int64_t n_ctx, int n_seq, int64_t n_blocks, int64_t run_tokens,
                               int64_t ring_pool) {
  const int64_t ring = ring_blocks_for(spec, n_ctx, run_tokens);
  if (ring >= blocks_for(n_ctx)) return 0;  // no rings
  // A ring block belongs to one pool block: more than the pool's would never be used.
  const int64_t blocks = std::min(n_blocks, std::max(ring, ring_pool > 0 ? ring_pool : n_seq * ring));
  if (blocks > INT32_MAX) throw Error("KV cache: too many ring blocks");
  return blocks;
}

size_t KvCache::bytes(const ModelSpec& spec, int64_t n_ctx, int n_seq, int64_t n_blocks, KvType type, int64_t run_tokens,
                      int64_t ring_pool) {
  const int64_t rings = ring_pool_for(spec, n_ctx, n_seq, n_blocks, run_tokens, ring_pool);
  int64_t blocks = 0;
  for (int64_t l = 0; l < spec.n_layer; ++l) blocks += rings > 0 && spec.layer_windowed(l) ? rings : n_blocks;
  return static_cast<size_t>(blocks * kBlock * position_bytes(spec.n_head_kv, spec.head_dim, type)) +
         stage_bytes(spec.n_layer, spec.kv_dim(), n_seq, type);
}

size_t KvCache::bytes(const ModelSpec& spec, int64_t n_ctx, KvType type, int64_t run_tokens) {
  const int64_t all = blocks_for(n_ctx), ring = ring_blocks_for(spec, n_ctx, run_tokens);
  int64_t blocks = 0;
  for (int64_t l = 0; l < spec.n_layer; ++l) blocks += spec.layer_windowed(l) ? ring : all;
  return static_cast<size_t>(blocks * kBlock * position_bytes(spec.n_head_kv, spec.head_dim, type)) +
         stage_bytes(spec.n_layer, spec.kv_dim(), 1, type);
}

bool KvCache::window_kept(const int32_t* blocks, int64_t begin) const {
  if (ring_layers_ == 0 || begin <= 0) return true;
  auto has = [&](int64_t b) { return ring_of_[static_cast<size_t>(blocks[b])] >= 0; };
  for (int64_t b = 0; b < std::min(sink_blocks_, blocks_for(begin)); ++b)
    if (!has(b)) return false;
  for (int64_t b = window_first_block(begin); b < blocks_for(begin); ++b)
    if (!has(b)) return false;
  return true;
}

bool KvCache::can_resume(int seq, int64_t from) const {
  const std::vector<int32_t>& t = table(seq);
  return from <= 0 || (blocks_for(from) <= static_cast<int64_t>(t.size()) && window_kept(t.data(), from));
}

bool KvCache::hold_window(int seq, int64_t begin, int64_t end) {
  if (ring_layers_ == 0) return true;
  const std::vector<int32_t>& t = table(seq);
  if (begin < 0 || end < begin || blocks_for(end) > static_cast<int64_t>(t.size()))
    throw Error("internal: a window held for positions [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") outside the KV blocks of sequence " + std::to_string(seq));
  if (begin == 0) drop_ring(seq);  // starting over: nothing before begin is read
  Held& h = held_[static_cast<size_t>(seq)];
  std::vector<int32_t>& ring = rings_[static_cast<size_t>(seq)];
  auto let_go = [&](int64_t b) {
    unref_ring(t[static_cast<size_t>(b)]);
    ring[static_cast<size_t>(b)] = 0;
  };
  // Wanted: the sinks' blocks below hi and [lo, hi), the window before begin
  // to end. Going on from the blocks it holds, it keeps [first, top): those
  // before lo too while they fit in a ring (a later run may go back into
  // them). Going back before them or past them: exactly [lo, hi) (what was
  // held past hi is written again anyway).
  const int64_t lo = window_first_block(begin), hi = blocks_for(end);
  const bool on = h.lo < h.hi && h.lo <= lo && lo <= h.hi;
  const int64_t top = on ? std::max(h.hi, hi) : std::max(lo, hi);
  const int64_t first = on ? std::max(h.lo, std::clamp(top - (ring_blocks_ - sink_blocks_), sink_blocks_, lo)) : lo;
  for (int64_t b = h.lo; b < h.hi; ++b)
    if (b < first || b >= top) let_go(b);
  // What it still holds, [h.lo, h.hi), meets or overlaps [lo, hi): together one run.
  h.lo = std::max(h.lo, first), h.hi = std::min(h.hi, top);
  if (h.lo >= h.hi) h.lo = h.hi = lo;
  // Those not held yet need a ring block: the one their block has still, or a
  // new one where no position before begin is read.
  int64_t missing = 0;
  auto wanted = [&](auto&& each) {
    for (int64_t b = h.sinks; b < std::min(sink_blocks_, hi); ++b) each(b);
    for (int64_t b = lo; b < hi; ++b)
      if (b < h.lo || b >= h.hi) each(b);
  };
  wanted([&](int64_t b) {
    if (ring_of_[static_cast<size_t>(t[static_cast<size_t>(b)])] >= 0) return;
    if (b * kBlock < begin)
      throw Error("internal: the window before position " + std::to_string(begin) + " of sequence " + std::to_string(seq) +
                  " is gone from its ring");
    ++missing;
  });
  if (missing > free_ring_blocks()) return false;
  wanted([&](int64_t b) {
    const int32_t block = t[static_cast<size_t>(b)];
    int32_t& r = ring_of_[static_cast<size_t>(block)];
    if (r >= 0) {
      ++ring_refs_[static_cast<size_t>(r)];
    } else {
      r = ring_free_.back();
      ring_free_.pop_back();
      ring_refs_[static_cast<size_t>(r)] = 1;
    }
    ring[static_cast<size_t>(b)] = r;
  });
  h.sinks = std::max(h.sinks, std::min(sink_blocks_, hi));
  h.lo = std::min(h.lo, lo), h.hi = std::max(h.hi, hi);
  return true;
}

bool KvCache::hold_windows(const Batch& batch) {
  if (ring_layers_ == 0) return true;
  std::vector<std::pair<int32_t, int32_t>> span(static_cast<size_t>(n_seq_), {INT32_MAX, -1});
  for (int64_t i = 0; i < batch.size(); ++i) {
    auto& [lo, hi] = span.at(static_cast<size_t>(batch.seq[i]));
    lo = std::min(lo, batch.pos[i]), hi = std::max(hi, batch.pos[i]);
    if (hi - lo >= run_tokens_)
      throw Error("internal: a batch spans more than " + std::to_string(run_tokens_) + " positions of sequence " +
                  std::to_string(batch.seq[i]) + ", more than its KV rings hold");
  }
  bool held = true;
  for (int seq = 0; seq < n_seq_; ++seq) {
    const auto [lo, hi] = span[static_cast<size_t>(seq)];
    if (hi >= 0) held = hold_window(seq, lo, hi + 1) && held;
  }
  return held;
}

void KvCache::drop_ring(int seq) {
  if (ring_layers_ == 0) return;
  Held& h = held_.at(static_cast<size_t>(seq));
  std::vector<int32_t>& ring = rings_[static_cast<size_t>(seq)];
  const std::vector<int32_t>& t = table(seq);
  for (int64_t b = 0; b < h.hi; ++b)
    if (holds(seq, b)) {
      unref_ring(t[static_cast<size_t>(b)]);
      ring[static_cast<size_t>(b)] = 0;
    }
  h = {sink_blocks_, sink_blocks_, 0};
}

void KvCache::ref_ring(int32_t block) {
  if (!has_ring(block)) throw Error("internal: KV block " + std::to_string(block) + " has no ring block");
  ++ring_refs_[static_cast<size_t>(ring_of_[static_cast<size_t>(block)])];
}

void KvCache::unref_ring(int32_t block) {
  if (!has_ring(block)) throw Error("internal: KV block " + std::to_string(block) + " has no ring block");
  int32_t& r = ring_of_[static_cast<size_t>(block)];
  if (--ring_refs_[static_cast<size_t>(r)] == 0) {
    ring_free_.push_back(r);
    r = -1;
  }
}

int64_t KvCache::block_bytes(int64_t n_head_kv, int64_t head_dim, KvType cache_type, int kv) {
  const KvType type = kv_side_type(cache_type, kv);
  const int64_t elements = n_head_kv * head_dim * kBlock;
  if (type == KvType::q8) return elements + n_head_kv * kBlock * 4;
  if (type == KvType::q4)  // codes; keys: a step and minimum per (head, dim, group), values: an f16 scale per 32
    return elements / 2 + (kv == 0 ? n_head_kv * head_dim * (kBlock / kKeyGroup) * 4 : elements / 32 * 2);
  return elements * 2;
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
  drop_ring(seq);
  std::vector<int32_t>& t = tables_.at(static_cast<size_t>(seq));
  for (int32_t b : t) unref(b);
  t.clear();
  for (int64_t l = 0; l < n_layer_ && !stages_.empty(); ++l) stages_[static_cast<size_t>(l * n_seq_ + seq)] = {};
}

void KvCache::ref(int32_t block) {
  int32_t& r = refs_.at(static_cast<size_t>(block));
  if (r <= 0) throw Error("internal: a reference to free KV block " + std::to_string(block));
  ++r;
}

void KvCache::unref(int32_t block) {
  int32_t& r = refs_.at(static_cast<size_t>(block));
  if (r <= 0) throw Error("internal: KV block " + std::to_string(block) + " released twice");
  if (r == 1 && ring_layers_ > 0 && ring_of_[static_cast<size_t>(block)] >= 0)  // its holders hold the block too
    throw Error("internal: KV block " + std::to_string(block) + " freed with its ring block held");
  if (--r == 0) free_.push_back(block);
}

KvBlockCopy KvCache::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || dst < 0 || src >= n_blocks_ || dst >= n_blocks_ || src == dst)
    throw Error("internal: KV block copy from " + std::to_string(src) + " to " + std::to_string(dst));
  KvBlockCopy c{src, dst};
  if (ring_layers_ > 0) {
    if (!has_ring(src) || !has_ring(dst))
      throw Error("internal: KV block copy from " + std::to_string(src) + " to " + std::to_string(dst) + " without their ring blocks");
    c.ring_src = ring_of_[static_cast<size_t>(src)], c.ring_dst = ring_of_[static_cast<size_t>(dst)];
  }
  for (int64_t l = 0; l < n_layer_; ++l) {
    const int32_t from = ringed(l) ? c.ring_src : src, to = ringed(l) ? c.ring_dst : dst;
    for (int kv = 0; kv < 2; ++kv) {
      uint8_t* base = const_cast<uint8_t*>(pool(kv, l));
      std::memcpy(base + to * block_bytes(kv), base + from * block_bytes(kv), static_cast<size_t>(block_bytes(kv)));
    }
    for (int seq = 0; seq < n_seq_ && !stages_.empty(); ++seq) {  // the destination's positions are the copy's now
      KeyStage& st = stages_[static_cast<size_t>(l * n_seq_ + seq)];
      if (st.block == to) st = {};
    }
  }
  return c;
}

const uint8_t* KvCache::pool(int kv, int64_t layer) const {
  // [pool layers' keys][pool layers' values][ring layers' keys][ring layers' values]
  const bool ring = ringed(layer);
  const int64_t layers = ring ? ring_layers_ : pool_layers_, blocks = layer_blocks(layer);
  const int64_t start = ring ? pool_layers_ * n_blocks_ * pair_bytes() : 0;
  return data_.get() + start + (kv * layers * block_bytes(0) + layer_at_[static_cast<size_t>(layer)] * block_bytes(kv)) * blocks;
}

const uint8_t* KvCache::block_of(int kv, int64_t layer, int seq, int64_t pos) const {
  const std::vector<int32_t>& t = table(seq);
  if (pos < 0 || pos / kBlock >= static_cast<int64_t>(t.size()))
    throw Error("internal: position " + std::to_string(pos) + " is outside the KV blocks of sequence " + std::to_string(seq));
  if (ringed(layer) && !holds(seq, pos / kBlock))
    throw Error("internal: position " + std::to_string(pos) + " of sequence " + std::to_string(seq) + " is outside its ring");
  return pool(kv, layer) + blocks(layer, seq)[pos / kBlock] * block_bytes(kv);
}

void KvCache::store(int64_t layer, int seq, int64_t pos, const float* key, const float* value) {
  const auto p = static_cast<int32_t>(pos);
  store_batch(layer, &seq, &p, 1, key, value);
}

void KvCache::store_batch(int64_t layer, const int32_t* seq, const int32_t* pos, int64_t n, const float* keys,
                          const float* values) {
  const bool q4_keys = kv_side_type(type_, 0) == KvType::q4;
  for (int64_t t0 = 0; t0 < n;) {
    int64_t t1 = t0 + 1;  // a run of one sequence's consecutive positions
    while (t1 < n && seq[t1] == seq[t0] && pos[t1] == pos[t1 - 1] + 1) ++t1;
    if (q4_keys) store_q4_keys(layer, seq[t0], pos[t0], t1 - t0, keys + t0 * kv_dim_);
    for (int64_t t = t0; t < t1; ++t) {
      if (!q4_keys) store_side(0, layer, seq[t], pos[t], keys + t * kv_dim_);
      store_side(1, layer, seq[t], pos[t], values + t * kv_dim_);
    }
    t0 = t1;
  }
}

void KvCache::store_side(int kv, int64_t layer, int seq, int64_t pos, const float* x) {
  const int64_t j = pos % kBlock;
  uint8_t* block = const_cast<uint8_t*>(block_of(kv, layer, seq, pos));
  const KvType type = kv_side_type(type_, kv);
  for (int64_t h = 0; h < n_head_kv_; ++h) {
    const float* xh = x + h * head_dim_;
    if (type == KvType::f16) {
      uint16_t* e = reinterpret_cast<uint16_t*>(block);
      for (int64_t d = 0; d < head_dim_; ++d) e[index(kv, h, d, j)] = f32_to_f16(xh[d]);
      continue;
    }
    if (type == KvType::q4) {  // values: rotated, then q4_0 per 32 dimensions
      float rotated[kMaxQ4HeadDim];
      std::memcpy(rotated, xh, static_cast<size_t>(head_dim_) * 4);
      kv_rotate(rotated, head_dim_);
      for (int64_t d0 = 0; d0 < head_dim_; d0 += 32) {
        uint8_t code[32];
        const uint16_t scale = quantize_kv_q4(rotated + d0, code);
        std::memcpy(block + q4_scale_at(kv, h, d0, j), &scale, 2);
        for (int64_t d = d0; d < d0 + 32; ++d) put_nibble(block[q4_byte(kv, h, d, j)], q4_shift(kv, d, j), code[d - d0]);
      }
      continue;
    }
    float rotated[kMaxQ4HeadDim];
    if (kv == 0 && kv_keys_rotated(type_, head_dim_)) {
      std::memcpy(rotated, xh, static_cast<size_t>(head_dim_) * 4);
      kv_rotate(rotated, head_dim_);
      xh = rotated;
    }
    int8_t* e = reinterpret_cast<int8_t*>(block) + index(kv, h, 0, j);
    const float scale = quantize_kv_q8(xh, head_dim_, e, index(kv, h, 1, j) - index(kv, h, 0, j));
    std::memcpy(block + head_scales_offset(kv, h) + j * 4, &scale, 4);
  }
}

bool KvCache::key_stage_holds(int64_t layer, int seq, int64_t pos) const {
  if (stages_.empty()) return true;
  const KeyStage& st = stages_.at(static_cast<size_t>(layer * n_seq_ + seq));
  const int64_t group = pos - pos % kKeyGroup;
  if (pos == group) return true;
  if (st.group != group || st.end < pos) return false;
  return st.block == blocks(layer, seq)[pos / kBlock];  // stored there, so inside the table (release resets the stage)
}

void KvCache::key_group(int64_t layer, int seq, int64_t pos, float* out) const {
  const int64_t group = pos - pos % kKeyGroup;
  float head[kMaxQ4HeadDim];
  std::fill(out, out + kv_dim_ * kKeyGroup, 0.0f);
  for (int64_t p = group; p < pos; ++p)
    for (int64_t h = 0; h < n_head_kv_; ++h) {
      read_head(0, layer, seq, p, h, head);
      for (int64_t d = 0; d < head_dim_; ++d)
        out[(h * head_dim_ + d) * kKeyGroup + p - group] = f16_to_f32(f32_to_f16(head[d]));
    }
}

void KvCache::store_q4_keys(int64_t layer, int seq, int64_t pos, int64_t n, const float* keys) {
  const auto at = static_cast<size_t>(layer * n_seq_ + seq);
  uint16_t* stage = stage_.data() + at * static_cast<size_t>(kv_dim_ * kKeyGroup);
  float* range = stage_range_.data() + at * static_cast<size_t>(kv_dim_ * 2);
  for (int64_t p0 = pos; p0 < pos + n;) {  // a group at a time
    const int64_t group = p0 - p0 % kKeyGroup, p1 = std::min(pos + n, group + kKeyGroup), j0 = group % kBlock;
    const int64_t held = p0 - group, count = p1 - group;  // positions before the run's, and after it
    uint8_t* block = const_cast<uint8_t*>(block_of(0, layer, seq, p0));  // first: throws for a position outside the table
    const bool refill = !key_stage_holds(layer, seq, p0);
    const bool next = stages_[at].end == p0;  // not positions written again: the stage's range is its positions'
    if (refill) {  // the group's earlier positions as the block holds them
      std::vector<float> decoded(static_cast<size_t>(kv_dim_ * kKeyGroup));
      key_group(layer, seq, p0, decoded.data());
      for (size_t i = 0; i < decoded.size(); ++i) stage[i] = f32_to_f16(decoded[i]);
    }
    stages_[at] = {group, p1, blocks(layer, seq)[p0 / kBlock]};
    const int shift = static_cast<int>(4 * (j0 / (kBlock / 2)));  // the group's nibble of each byte
    for (int64_t r = 0; r < kv_dim_; ++r) {
      uint16_t* row = stage + r * kKeyGroup;
      for (int64_t p = p0; p < p1; ++p) row[p - group] = f32_to_f16(keys[(p - pos) * kv_dim_ + r]);
      float &lo = range[2 * r], &hi = range[2 * r + 1];
      uint8_t* bytes = block + r * (kBlock / 2) + j0 % (kBlock / 2);
      uint16_t* step = reinterpret_cast<uint16_t*>(block + q4_scale_at(0, r / head_dim_, r % head_dim_, j0));
      uint16_t* minimum = step + 2 * head_dim_;
      const float x = f16_to_f32(row[held]);
      if (count - held == 1 && held > 0 && !refill && next && x >= lo && x <= hi) {
        // One more position within the group's range: its step and minimum stand.
        put_nibble(bytes[held], shift, KeyRounding(*step, *minimum).code(x));
        continue;
      }
      float xs[kKeyGroup];
      uint8_t code[kKeyGroup];
      for (int64_t i = 0; i < count; ++i) xs[i] = f16_to_f32(row[i]);
      const uint32_t sm = quantize_kv_q4_keys(xs, count, code);
      *step = static_cast<uint16_t>(sm & 0xFFFF), *minimum = static_cast<uint16_t>(sm >> 16);
      lo = INFINITY, hi = -INFINITY;
      for (int64_t i = 0; i < count; ++i) {
        lo = std::min(lo, xs[i]), hi = std::max(hi, xs[i]);
        put_nibble(bytes[i], shift, code[i]);
      }
    }
    p0 = p1;
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
  const KvType type = kv_side_type(type_, kv);
  if (type == KvType::q4 || (kv == 0 && kv_keys_rotated(type_, head_dim_))) {  // the head un-rotated
    float head[kMaxQ4HeadDim];
    read_head(kv, layer, seq, pos, i / head_dim_, head);
    return head[i % head_dim_];
  }
  const uint8_t* block = block_of(kv, layer, seq, pos);
  const int64_t h = i / head_dim_, at = index(kv, h, i % head_dim_, pos % kBlock);
  if (type == KvType::f16) return f16_to_f32(reinterpret_cast<const uint16_t*>(block)[at]);
  float d;
  std::memcpy(&d, block + head_scales_offset(kv, h) + pos % kBlock * 4, 4);
  return d * static_cast<float>(reinterpret_cast<const int8_t*>(block)[at]);
}

void KvCache::read_head(int kv, int64_t layer, int seq, int64_t pos, int64_t h, float* out) const {
  const uint8_t* block = block_of(kv, layer, seq, pos);
  const int64_t j = pos % kBlock, hd = head_dim_;
  const KvType type = kv_side_type(type_, kv);
  if (type == KvType::q4 && kv == 0) {
    const int shift = static_cast<int>(4 * (j / (kBlock / 2)));
    for (int64_t d = 0; d < hd; ++d) {
      uint16_t sm[2];  // the step, and the minimum 2 head_dim halves on
      std::memcpy(&sm[0], block + q4_scale_at(0, h, d, j), 2);
      std::memcpy(&sm[1], block + q4_scale_at(0, h, d, j) + 4 * hd, 2);
      const float m = f16_to_f32(sm[1]), step = f16_to_f32(sm[0]);
      out[d] = m + step * static_cast<float>(block[q4_byte(0, h, d, j)] >> shift & 0xF);
    }
    return;
  }
  if (type == KvType::q4) {
    for (int64_t d0 = 0; d0 < hd; d0 += 32) {
      uint16_t half;
      std::memcpy(&half, block + q4_scale_at(kv, h, d0, j), 2);
      const float scale = f16_to_f32(half);
      for (int64_t d = d0; d < d0 + 32; ++d)
        out[d] = scale * static_cast<float>((block[q4_byte(kv, h, d, j)] >> q4_shift(kv, d, j) & 0xF) - 8);
    }
    kv_rotate(out, hd);
    return;
  }
  const int64_t first = index(kv, h, 0, j), stride = index(kv, h, 1, j) - first;
  if (type == KvType::f16) {
    const uint16_t* e = reinterpret_cast<const uint16_t*>(block) + first;
    for (int64_t d = 0; d < hd; ++d) out[d] = f16_to_f32(e[d * stride]);
    return;
  }
  float scale;
  std::memcpy(&scale, block + head_scales_offset(kv, h) + j * 4, 4);
  const int8_t* e = reinterpret_cast<const int8_t*>(block) + first;
  for (int64_t d = 0; d < hd; ++d) out[d] = scale * static_cast<float>(e[d * stride]);
  if (kv == 0 && kv_keys_rotated(type_, hd)) kv_rotate(out, hd);
}

}  // namespace basalt
