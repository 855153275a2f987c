// SPDX-License-Identifier: MIT
// Attention on the CPU threads: work cut into pieces of (tile of query rows,
// a few KV heads, key range), run by the ISA's tile kernel (cpu/attention.h).
// A row's pieces, when its key range was split, are merged afterwards.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "cpu/attention.h"

#include "core/util/thread_pool.h"
#include "cpu/ops.h"
#include "cpu/rows.h"

namespace basalt::cpu {

namespace {

constexpr int64_t kPieceHeadDims = 512;  // KV heads of one piece: up to this many values of each cached row
// Split key ranges until there are this many pieces per thread... Each piece
// starts with its first block's read exposed, and the threads reach attention
// together (after a matmul's barrier): one piece per thread measured fastest
// (docs/PERFORMANCE.md, attention).
constexpr int64_t kPiecesPerThread = 1;
constexpr int64_t kMinPieceKeys = 256;   // ...of at least this many keys
constexpr int64_t kKeyAlign = kCacheBlock;  // key ranges start at a block of the cache's keys

struct Tile {
  int64_t t0, n_tok;  // batch tokens [t0, t0 + n_tok), all of one sequence
  int64_t first;      // the tile reads positions [first, keys): 0, or the window's start for its
  int64_t keys;       // first token, down to a cache block; keys: 1 + their largest position
  int64_t sink_keys = 0;  // attention sinks before first: positions [0, sink_keys), a piece of their own
};

struct Piece {
  int64_t tile, kvh, n_kv, p0, p1;  // KV heads [kvh, kvh + n_kv), positions [p0, p1)
  size_t state;  // offset of its m [rows], l [rows] and, split, o [n_tok][n_kv * group * head_dim] in Work::states
};

// Rows [r0, r1) of the pieces [first, last) of one tile x KV heads, its key range split.
struct Merge {
  int64_t first, last, r0, r1;
};
constexpr int64_t kMergeRows = 8;  // rows per merge task: decode's 32 rows are 4 tasks

// Per calling thread, reused so a layer's call does not allocate.
struct Work {
  std::vector<Tile> tiles;
  std::vector<Piece> pieces;
  std::vector<int64_t> first;  // [tile * head groups + group]: its first piece; its pieces are consecutive
  std::vector<int64_t> order;  // pieces, largest first (dynamic scheduling balances the rest)
  std::vector<Merge> merges;
  std::vector<float> states;
};

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// At least n floats for the tile kernel on the calling thread, 64-byte aligned.
float* thread_scratch(size_t n) {
  static thread_local std::vector<float> buf;
  if (buf.size() < n + 16) buf.resize(n + 16);
  const size_t misalign = reinterpret_cast<uintptr_t>(buf.data()) % 64;
  return buf.data() + (misalign ? (64 - misalign) / sizeof(float) : 0);
}

// Merges rows [r0, r1) of the pieces [first, last) of one tile x KV heads, its
// key range split, into rows of out.
void merge(const Work& w, const Merge& mg, int64_t group, int64_t hd, int64_t qd, float* out) {
  const int64_t first = mg.first, last = mg.last;
  const Piece& p0 = w.pieces[first];
  const Tile& tl = w.tiles[p0.tile];
  const int64_t per_head = tl.n_tok * group, rows = p0.n_kv * per_head, ldo = p0.n_kv * group * hd;
  for (int64_t r = mg.r0; r < mg.r1; ++r) {
    float m = -INFINITY;
    for (int64_t i = first; i < last; ++i) m = std::max(m, w.states[w.pieces[i].state + r]);
    // row r = (kh * n_tok + i) * group + g: column (kh * group + g) * hd of token i
    const int64_t i_tok = r % per_head / group, col = (r / per_head * group + r % group) * hd;
    float* o = out + (tl.t0 + i_tok) * qd + p0.kvh * group * hd + col;
    std::fill(o, o + hd, 0.0f);
    float l = 0;
    for (int64_t i = first; i < last; ++i) {
      const float* s = w.states.data() + w.pieces[i].state;
      const float mi = s[r], li = s[rows + r];
      if (li == 0) continue;  // the row sees none of this piece's keys
      const float c = std::exp(mi - m);
      l += c * li;
      const float* oi = s + 2 * rows + i_tok * ldo + col;
      for (int64_t d = 0; d < hd; ++d) o[d] += c * oi[d];
    }
    const float inv = 1.0f / l;
    for (int64_t d = 0; d < hd; ++d) o[d] *= inv;
  }
}

std::atomic<int> g_bf16_dots{-1};  // set_attention_bf16_dots; -1: from the CPU and BASALT_ATTENTION_BF16

// BASALT_ATTENTION_BF16 or set_attention_bf16_dots: 1 on, 0 off, -1 neither.
int bf16_asked() {
  const int forced = g_bf16_dots.load();
  if (forced >= 0) return forced;
  static const int from_env = [] {
    const char* env = std::getenv("BASALT_ATTENTION_BF16");
    return env && *env ? static_cast<int>(std::string_view(env) != "0") : -1;
  }();
  return from_env;
}

}  // namespace

bool attention_bf16_dots() {
  if (!cpu_has_avx512_bf16()) return false;
  const int asked = bf16_asked();
  return asked >= 0 ? asked == 1 : cpu_is_amd();  // where they are faster (cpu/attention.h)
}

bool attention_amx_tiles(Isa isa) { return isa == Isa::amx && bf16_asked() == -1; }

void set_attention_bf16_dots(bool on) { g_bf16_dots = on && cpu_has_avx512_bf16(); }
void reset_attention_bf16_dots() { g_bf16_dots = -1; }

AttentionDots attention_dots(Isa isa, KvType type, int64_t head_dim) {
#if defined(BASALT_X86)
  if (isa == Isa::avx2 || isa == Isa::avxvnni) {  // integers for the caches with q8 keys (kernels::attention_avx2)
    if (head_dim % 32 != 0) return AttentionDots::f32;
    if (type == KvType::q8 || type == KvType::k8v4) return AttentionDots::int8_query_int_p;
    return AttentionDots::f32;
  }
  if (isa < Isa::avx512) return AttentionDots::f32;
  if (type == KvType::f16 && head_dim % 32 == 0 && attention_amx_tiles(isa)) return AttentionDots::bf16;
  if (amx_int8_head(head_dim) && attention_amx_tiles(isa)) {
    if (type == KvType::q8 || type == KvType::k8v4) return AttentionDots::int8_query_int_p;
    if (type == KvType::q4) return AttentionDots::int_p;
  }
  if ((type == KvType::f16 || type == KvType::q4) && head_dim % 32 == 0 && attention_bf16_dots()) return AttentionDots::bf16;
  if ((type == KvType::q8 || type == KvType::k8v4) && head_dim % 32 == 0 && attention_bf16_dots())
    return AttentionDots::int8_query_bf16_p;
  if (kv_side_type(type, 0) == KvType::q8 && head_dim % 4 == 0) return AttentionDots::int8_query;
#endif
  (void)isa, (void)type, (void)head_dim;
  return AttentionDots::f32;
}

const char* attention_dots_name(AttentionDots dots) {
  switch (dots) {
    case AttentionDots::f32: return "f32";
    case AttentionDots::bf16: return "bf16";
    case AttentionDots::int8_query: return "int8_query";
    case AttentionDots::int8_query_bf16_p: return "int8_query_bf16_p";
    case AttentionDots::int8_query_int_p: return "int8_query_int_p";
    case AttentionDots::int_p: return "int_p";
  }
  return "?";
}

const AttentionKernels* find_attention_kernels(Isa isa) {
#if defined(BASALT_X86)
  if (attention_amx_tiles(isa)) return kernels::attention_amx();
  if (isa >= Isa::avx512) return attention_bf16_dots() ? kernels::attention_avx512_bf16() : kernels::attention_avx512();
  if (isa == Isa::avx2 || isa == Isa::avxvnni) return kernels::attention_avx2();
#elif defined(BASALT_ARM)
  if (isa == Isa::neon || isa == Isa::dotprod) return kernels::attention_neon();
#endif
  (void)isa;
  return nullptr;
}

void attention(const float* q, const float* k, const float* v, float* out, const Batch& batch, KvCache& kv,
               int64_t layer, const ModelSpec& spec) {
  attention(q, k, v, out, batch, kv, layer, spec, selected_isa());
}

void attention(const float* q, const float* k, const float* v, float* out, const Batch& batch, KvCache& kv,
               int64_t layer, const ModelSpec& spec, Isa isa) {
  const AttentionKernels* kern = find_attention_kernels(isa);
  if (!kern) return attention_ref(q, k, v, out, batch, kv, layer, spec);
  const int64_t n = batch.size(), hd = spec.head_dim, kvd = spec.kv_dim(), qd = spec.q_dim();
  const int64_t n_kv = spec.n_head_kv, group = spec.n_head / n_kv;
  const float scale = spec.query_scale();

  static thread_local Work work;
  Work& w = work;  // the caller's: OpenMP threads below must not see their own thread_local

  // Tiles: runs of consecutive tokens of one sequence.
  const int64_t tile_tok = std::max<int64_t>(1, kern->tile_rows(kv.type(), hd) / group);
  w.tiles.clear();
  const int64_t window = spec.window_of(layer), sinks = spec.sinks_of(layer);
  for (int64_t t = 0; t < n;) {
    Tile tl{t, 0, INT64_MAX, 0};
    for (; t < n && tl.n_tok < tile_tok && batch.seq[t] == batch.seq[tl.t0]; ++t, ++tl.n_tok) {
      tl.keys = std::max<int64_t>(tl.keys, batch.pos[t] + 1);
      tl.first = std::min<int64_t>(tl.first, window > 0 ? std::max<int64_t>(0, batch.pos[t] - window + 1) : 0);
    }
    tl.first = tl.first / kKeyAlign * kKeyAlign;
    tl.sink_keys = std::min(tl.first, round_up(sinks, kKeyAlign));
    w.tiles.push_back(tl);
  }

  // Pieces: each tile x group of KV heads, its key range split when there are
  // too few of them to keep every thread busy (decode: one token).
  const int64_t heads_per_piece = std::clamp<int64_t>(kPieceHeadDims / hd, 1, n_kv);
  const int64_t head_groups = (n_kv + heads_per_piece - 1) / heads_per_piece;
  ThreadPool& pool = engine_pool();
  const int64_t n_threads = pool.size();
  const int64_t base = static_cast<int64_t>(w.tiles.size()) * head_groups;
  const int64_t want = kPiecesPerThread * n_threads;
  const int64_t splits = n_threads > 1 && base < want ? (want + base - 1) / base : 1;
  w.pieces.clear();
  w.first.clear();
  size_t state = 0;
  for (size_t ti = 0; ti < w.tiles.size(); ++ti) {
    const Tile& tl = w.tiles[ti];
    const int64_t span = tl.keys - tl.first;
    int64_t chunk = span;
    if (splits > 1) chunk = std::max(kMinPieceKeys, round_up((span + splits - 1) / splits, kKeyAlign));
    for (int64_t kvh = 0; kvh < n_kv; kvh += heads_per_piece) {
      const int64_t nh = std::min(heads_per_piece, n_kv - kvh), rows = nh * tl.n_tok * group;
      w.first.push_back(static_cast<int64_t>(w.pieces.size()));
      const bool split = chunk < span || tl.sink_keys > 0;  // then each piece's o waits in states for merge()
      if (tl.sink_keys > 0) {
        w.pieces.push_back({static_cast<int64_t>(ti), kvh, nh, 0, tl.sink_keys, state});
        state += static_cast<size_t>(rows * (hd + 2));
      }
      for (int64_t p0 = tl.first; p0 < tl.keys; p0 += chunk) {
        w.pieces.push_back({static_cast<int64_t>(ti), kvh, nh, p0, std::min(tl.keys, p0 + chunk), state});
        state += static_cast<size_t>(rows * (split ? hd + 2 : 2));
      }
    }
  }
  w.first.push_back(static_cast<int64_t>(w.pieces.size()));
  w.merges.clear();
  for (int64_t tk = 0; tk < base; ++tk) {
    const int64_t first = w.first[tk], last = w.first[tk + 1];
    if (last - first < 2) continue;
    const Piece& p = w.pieces[first];
    const int64_t rows = p.n_kv * w.tiles[p.tile].n_tok * group;
    for (int64_t r0 = 0; r0 < rows; r0 += kMergeRows) w.merges.push_back({first, last, r0, std::min(rows, r0 + kMergeRows)});
  }
  if (w.states.size() < state) w.states.resize(state);
  w.order.resize(w.pieces.size());
  for (size_t i = 0; i < w.order.size(); ++i) w.order[i] = static_cast<int64_t>(i);
  auto cost = [&](int64_t i) { const Piece& p = w.pieces[i]; return p.n_kv * w.tiles[p.tile].n_tok * (p.p1 - p.p0); };
  std::stable_sort(w.order.begin(), w.order.end(), [&](int64_t a, int64_t b) { return cost(a) > cost(b); });

  const int64_t n_pieces = static_cast<int64_t>(w.pieces.size());
  const KvType type = kv.type();
  const bool scaled = type != KvType::f16;
  const size_t scratch = static_cast<size_t>(kern->scratch_floats(heads_per_piece, tile_tok * group, hd));
  const RowKernels& rows = row_kernels(isa);
  auto store = [&](int64_t t) {
    if (kv.type() != KvType::f16) return kv.store(layer, batch.seq[t], batch.pos[t], k + t * kvd, v + t * kvd);
    thread_local std::vector<uint16_t> halves;  // the executing thread's
    halves.resize(static_cast<size_t>(2 * kvd));
    rows.to_f16(k + t * kvd, halves.data(), kvd);
    rows.to_f16(v + t * kvd, halves.data() + kvd, kvd);
    kv.store_halves(layer, batch.seq[t], batch.pos[t], halves.data(), halves.data() + kvd);
  };
  auto piece = [&](int64_t i) {
    const Piece& p = w.pieces[w.order[i]];
    const Tile& tl = w.tiles[p.tile];
    const int64_t rows = p.n_kv * tl.n_tok * group;
    const int seq = batch.seq[tl.t0];
    const bool whole = p.p0 == tl.first && p.p1 == tl.keys && tl.sink_keys == 0;
    float* s = w.states.data() + p.state;
    const uint8_t *kb = kv.key_pool(layer), *vb = kv.value_pool(layer);
    AttentionTile a{q + tl.t0 * qd + p.kvh * group * hd, qd, batch.pos.data() + tl.t0, tl.n_tok, group, p.n_kv, hd,
                    kv_side_type(type, 0), kv_side_type(type, 1), kb + kv.head_offset(0, p.kvh), vb + kv.head_offset(1, p.kvh),
                    scaled ? kb + kv.head_scales_offset(0, p.kvh) : nullptr, scaled ? vb + kv.head_scales_offset(1, p.kvh) : nullptr,
                    kv.blocks(layer, seq), kv.block_bytes(0), kv.block_bytes(1),
                    p.p0, p.p1, scale, window, sinks,
                    whole ? out + tl.t0 * qd + p.kvh * group * hd : s + 2 * rows, whole ? qd : p.n_kv * group * hd,
                    whole, s, s + rows, thread_scratch(scratch)};
    a.softcap = spec.attn_softcap;
    kern->tile(a);
  };
  // The batch's own keys and values first (its tokens see each other's), then
  // the pieces, largest first, then the merges of split pieces.
  if (n_pieces == 1 && n == 1) {  // decode at a short context: the calling thread alone, no dispatch
    store(0);
    piece(0);
    for (const Merge& m : w.merges) merge(w, m, group, hd, qd, out);
    return;
  }
  if (kv_side_type(type, 0) == KvType::q4) {  // a key group's positions are rounded together: one thread stores them all
    kv.store_batch(layer, batch.seq.data(), batch.pos.data(), n, k, v);
  } else {
    parallel_for(n, 16, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) store(t);
    });
  }
  pool.run(n_pieces, [&](int64_t i, int) { piece(i); });
  pool.run(static_cast<int64_t>(w.merges.size()), [&](int64_t i, int) { merge(w, w.merges[static_cast<size_t>(i)], group, hd, qd, out); });
}

}  // namespace basalt::cpu
