// SPDX-License-Identifier: MIT
// qa matmul on AVX-512 VNNI over the tiled layout (quant/qa_layout.h): each
// 32-bit lane is one row of a 16-row tile, so one vpdpbusd advances 16 rows'
// dot products by 4 weights, and each block's 16 scales apply with one FMA.
// Up to 2 tokens (decode) run two tiles from distant rows side by side: two
// read streams per thread. More tokens (prefill, a server's batch) run a
// register block of two neighbouring tiles x up to 7 tokens: each unpacked
// weight vector serves every token, each broadcast of x serves both tiles.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/util/always_inline.h"
#include "cpu/matmul.h"
#include "cpu/qa_dispatch.h"
#include "cpu/qa_spans.h"
#include "cpu/x86/qa_unpack_avx512.h"
#include "quant/qa_layout.h"

namespace basalt::kernels {

namespace {

constexpr int kPairTokens = 2;  // up to this many tokens, several tiles per pass (read streams)
// A register block (more tokens): tiles x tokens whose int32 and f32
// accumulators (2 per tile and token, 3 when a block's halves have their own
// scales) and unpacked vectors fit the 32 registers: 2 x 7 x 2 + 2 x 2 of
// them, 1.03-1.17x faster than 2 x 5 on an Intel core, where every vector
// op shares vpdpbusd's two ports and the per-block work is better spread
// over more tokens (docs/PERFORMANCE.md 3.1l). Q6_K's costly unpacking is
// better spread over more tokens than shared by more tiles: 8 of them
// (3 x 8 accumulators); at 10 they spill and it runs at half speed (3.1e).
template <QaScales S>
constexpr int block_tiles() { return S == QaScales::q6k ? 1 : 2; }
template <QaScales S>
constexpr int block_tokens() { return S == QaScales::q6k ? 8 : 7; }
constexpr int kDecodeStreams = 2;  // 4 measured no faster (basalt_matmul_bench)
constexpr int kPrefetchBytes = 2048;
// A block's two halves with scales of their own (Q6_K): their int32 sums
// times their scales, added, before x's scale multiplies the total (one
// multiply fewer than scaling each by x's: docs/PERFORMANCE.md 3.1c). Every
// path takes it, so that prefill and decode round alike.
inline __m512 scaled_halves(__m512i a0, __m512i a1, __m512 scale, __m512 scale_hi) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(a0), scale, _mm512_mul_ps(_mm512_cvtepi32_ps(a1), scale_hi));
}

// Where a token's int32 sums of block b start: minus the zero point's share
// (zero x the token's sum of x), so that it costs no extra op. Q6_K's two
// halves (a1 too) from QuantizedActs::q6k_zero; formats without a zero point
// at 0; the others' from neg_sum in the register block (a broadcast from
// memory and a shift: made from sum16, the term took six instructions a token
// and block, one in eight of the block's), from sum16 in decode, where the
// vector shift made a Zen 4 core decode 5-8% slower (docs/PERFORMANCE.md
// 3.1p). The same int32 either way. xs, xn, xz: the token's sum16, neg_sum
// and q6k_zero rows.
template <int Bits, QaScales S, bool kFromNegSum>
BASALT_ALWAYS_INLINE void start_sums(const int16_t* xs, const int32_t* xn, const int32_t* xz, int64_t b, __m512i& a0,
                                     __m512i& a1) {
  constexpr int kZero = Bits == 8 ? 128 : S == QaScales::f16_sym ? 8 : 0;
  static_assert((kZero & (kZero - 1)) == 0, "a power of 2");
  a0 = a1 = _mm512_setzero_si512();
  if constexpr (S == QaScales::q6k)
    a0 = _mm512_set1_epi32(xz[2 * b]), a1 = _mm512_set1_epi32(xz[2 * b + 1]);
  else if constexpr (kZero != 0 && kFromNegSum)
    a0 = _mm512_slli_epi32(_mm512_set1_epi32(xn[b]), __builtin_ctz(kZero));
  else if constexpr (kZero != 0)
    a0 = _mm512_set1_epi32(-kZero * (xs[2 * b] + xs[2 * b + 1]));
}

// NTILE tiles (16 rows each) x NT tokens. Two tiles from distant rows are
// two read streams, which this CPU needs to reach its bandwidth (decode).
template <int Bits, QaScales S, int NT, int NTILE>
void tiles_x_tokens(const QaLayout& L, const uint8_t* const tiles[NTILE], int64_t nb, const QuantizedActs& xq, int64_t t0,
                    __m512 out[NTILE][NT]) {
  constexpr bool kSplitHalves = S == QaScales::q6k;
  const int G = L.blocks_per_group;
  const size_t gbytes = L.group_bytes();
  constexpr QaLayout kL = qa_layout(Bits, S);  // == L: the prefetch count must be a constant
  static_assert(kL.group_bytes() % 64 == 0, "groups are whole cache lines");
  // The last block's lines may reach into the next group.
  constexpr int kLinesPerBlock = static_cast<int>((kL.group_bytes() / 64 + kL.blocks_per_group - 1) / kL.blocks_per_group);
  const int64_t n_groups = L.groups(nb * kQaBlock);
  __m512 acc[NTILE][NT];
  for (int u = 0; u < NTILE; ++u)
    for (int i = 0; i < NT; ++i) acc[u][i] = _mm512_setzero_ps();
  // Token i's rows are at a fixed stride from token t0's (fewer live pointers).
  const int8_t* xq0 = xq.q_row(t0);
  const float* xd0 = xq.d_row(t0);
  const int16_t* xs0 = xq.sum16_row(t0);
  const float* xds0 = xq.dsum_row(t0);
  const int32_t* xz0 = xq.q6k_zero_row(t0);
  const int64_t q_stride = xq.stride, d_stride = xq.stride / 32, s_stride = xq.stride / 16;

  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* grp[NTILE];
    __m512 sup_d[NTILE], sup_m[NTILE];  // super-block scales (K-quants)
    for (int u = 0; u < NTILE; ++u) {
      grp[u] = tiles[u] + g * gbytes;
      if constexpr (S == QaScales::kquant) sup_d[u] = load_f16x16(grp[u]), sup_m[u] = load_f16x16(grp[u] + 32);
      if constexpr (S == QaScales::q6k) sup_d[u] = load_f16x16(grp[u]);
    }
    for (int j = 0; j < G; ++j) {
      const int64_t b = g * G + j;
      // Each block prefetches its share of the group's cache lines: a burst of all of
      // them at the group's start fills the line-fill buffers and stalls the compute
      // behind it (a K-quant group is 37-53 lines per tile; docs/PERFORMANCE.md).
      // A fixed count per block keeps the loop branch-free.
      for (int u = 0; u < NTILE; ++u)
        for (int line = 0; line < kLinesPerBlock; ++line)
          _mm_prefetch(reinterpret_cast<const char*>(grp[u] + kPrefetchBytes + 64 * (j * kLinesPerBlock + line)),
                       _MM_HINT_T0);
      for (int u = 0; u < NTILE; ++u) {  // one tile unpacked at a time: 8 registers, whatever NTILE
        __m512i lo[4], hi[4];
        __m512 scale, scale_hi, bias;
        const uint8_t* st = L.scales(grp[u], j);
        unpack<Bits>(L.quants(grp[u], j), lo, hi);
        if constexpr (S == QaScales::f16_sym) scale = load_f16x16(st);
        if constexpr (S == QaScales::f16_affine) scale = load_f16x16(st), bias = load_f16x16(st + 32);
        if constexpr (S == QaScales::f16_zero)  // d * z is exact in f32 (11 x 9 significant bits)
          scale = load_f16x16(st), bias = _mm512_mul_ps(scale, load_f16x16(st + 32));
        if constexpr (S == QaScales::kquant)
          scale = _mm512_mul_ps(sup_d[u], load_u8x16(st)), bias = _mm512_mul_ps(sup_m[u], load_u8x16(st + 16));
        if constexpr (S == QaScales::q6k)
          scale = _mm512_mul_ps(sup_d[u], load_i8x16(st)), scale_hi = _mm512_mul_ps(sup_d[u], load_i8x16(st + 16));
        for (int i = 0; i < NT; ++i) {
          const int8_t* x = xq0 + i * q_stride + b * 32;
          const float xd = xd0[i * d_stride + b];
          const __m512 vxd = _mm512_set1_ps(xd);
          __m512i a0, a1;
          start_sums<Bits, S, false>(xs0 + i * s_stride, nullptr, xz0 + i * s_stride, b, a0, a1);
          for (int c = 0; c < 4; ++c) {
            a0 = dpbusd_x4(a0, lo[c], x + 4 * c);
            a1 = dpbusd_x4(a1, hi[c], x + 16 + 4 * c);
          }
          __m512& ac = acc[u][i];
          if constexpr (kSplitHalves) {
            ac = _mm512_fmadd_ps(scaled_halves(a0, a1, scale, scale_hi), vxd, ac);
          } else {
            ac = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), _mm512_mul_ps(scale, vxd), ac);
            if constexpr (S == QaScales::f16_affine) ac = _mm512_fmadd_ps(bias, _mm512_set1_ps(xds0[i * d_stride + b]), ac);
            if constexpr (S == QaScales::kquant || S == QaScales::f16_zero)
              ac = _mm512_fnmadd_ps(bias, _mm512_set1_ps(xds0[i * d_stride + b]), ac);
          }
        }
      }
    }
  }
  for (int u = 0; u < NTILE; ++u)
    for (int i = 0; i < NT; ++i) out[u][i] = acc[u][i];
}

// NTILE tiles x NT tokens as one register block: per block of 32 columns,
// int32 sums for every (tile, token), then one scale FMA each. Compute-bound,
// so unlike tiles_x_tokens it does not need distant tiles for read streams.
template <int Bits, QaScales S, int NT, int NTILE>
void tiles_x_tokens_blocked(const uint8_t* const tiles[NTILE], int64_t nb, const QuantizedActs& xq, int64_t t0,
                            Prefetch pf, __m512 out[NTILE][NT]) {
  constexpr bool kSplitHalves = S == QaScales::q6k;
  constexpr QaLayout kL = qa_layout(Bits, S);  // the layout's offsets as constants
  constexpr int G = kL.blocks_per_group;
  const int8_t* xq0 = xq.q_row(t0);
  const float* xd0 = xq.d_row(t0);
  const int32_t* xn0 = xq.neg_sum_row(t0);
  const float* xds0 = xq.dsum_row(t0);
  const int32_t* xz0 = xq.q6k_zero_row(t0);
  const int64_t q_stride = xq.stride, d_stride = xq.stride / 32, s_stride = xq.stride / 16;
  __m512 acc[NTILE][NT];
#pragma GCC unroll 4
  for (int u = 0; u < NTILE; ++u)
#pragma GCC unroll 8
    for (int i = 0; i < NT; ++i) acc[u][i] = _mm512_setzero_ps();

  for (int64_t b = 0; b < nb; ++b) {
    const int64_t g = b / G;
    const int j = static_cast<int>(b % G);
    const uint8_t* grp[NTILE];
#pragma GCC unroll 4
    for (int u = 0; u < NTILE; ++u) grp[u] = tiles[u] + g * kL.group_bytes();
    pf.at_block(nb);
    __m512i a0[NTILE][NT], a1[NTILE][NT];
#pragma GCC unroll 8
    for (int i = 0; i < NT; ++i) {
      __m512i z0, z1;
      start_sums<Bits, S, true>(nullptr, xn0 + i * d_stride, xz0 + i * s_stride, b, z0, z1);
#pragma GCC unroll 4
      for (int u = 0; u < NTILE; ++u) {
        a0[u][i] = z0;
        if constexpr (kSplitHalves) a1[u][i] = z1;
      }
    }
    [&]<int... C>(std::integer_sequence<int, C...>) {
      ([&] {
        __m512i lo[NTILE], hi[NTILE];
#pragma GCC unroll 4
        for (int u = 0; u < NTILE; ++u) unpack_chunk<Bits, C>(kL.quants(grp[u], j), lo[u], hi[u]);
#pragma GCC unroll 8
        for (int i = 0; i < NT; ++i) {
          const int8_t* x = xq0 + i * q_stride + b * 32;
#pragma GCC unroll 4
          for (int u = 0; u < NTILE; ++u) {
            a0[u][i] = dpbusd_x4(a0[u][i], lo[u], x + 4 * C);
            if constexpr (kSplitHalves) a1[u][i] = dpbusd_x4(a1[u][i], hi[u], x + 16 + 4 * C);
            else a0[u][i] = dpbusd_x4(a0[u][i], hi[u], x + 16 + 4 * C);
          }
        }
      }(), ...);
    }(std::make_integer_sequence<int, 4>{});
#pragma GCC unroll 4
    for (int u = 0; u < NTILE; ++u) {
      const uint8_t* st = kL.scales(grp[u], j);
      __m512 scale, scale_hi, bias;
      if constexpr (S == QaScales::f16_sym) scale = load_f16x16(st);
      if constexpr (S == QaScales::f16_affine) scale = load_f16x16(st), bias = load_f16x16(st + 32);
      if constexpr (S == QaScales::f16_zero) scale = load_f16x16(st), bias = _mm512_mul_ps(scale, load_f16x16(st + 32));
      if constexpr (S == QaScales::kquant)
        scale = _mm512_mul_ps(load_f16x16(grp[u]), load_u8x16(st)),
        bias = _mm512_mul_ps(load_f16x16(grp[u] + 32), load_u8x16(st + 16));
      if constexpr (S == QaScales::q6k) {
        const __m512 d = load_f16x16(grp[u]);
        scale = _mm512_mul_ps(d, load_i8x16(st)), scale_hi = _mm512_mul_ps(d, load_i8x16(st + 16));
      }
#pragma GCC unroll 8
      for (int i = 0; i < NT; ++i) {
        const float xd = xd0[i * d_stride + b];
        const __m512 vxd = _mm512_set1_ps(xd);
        __m512& ac = acc[u][i];
        if constexpr (kSplitHalves) {
          ac = _mm512_fmadd_ps(scaled_halves(a0[u][i], a1[u][i], scale, scale_hi), vxd, ac);
        } else {
          ac = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a0[u][i]), _mm512_mul_ps(scale, vxd), ac);
        }
        if constexpr (S == QaScales::f16_affine || S == QaScales::kquant || S == QaScales::f16_zero) {
          const __m512 xs = _mm512_set1_ps(xds0[i * d_stride + b]);
          if constexpr (S == QaScales::f16_affine) ac = _mm512_fmadd_ps(bias, xs, ac);
          else ac = _mm512_fnmadd_ps(bias, xs, ac);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int u = 0; u < NTILE; ++u)
#pragma GCC unroll 8
    for (int i = 0; i < NT; ++i) out[u][i] = acc[u][i];
}

// NTILE spans x all tokens, kMax tokens per pass: the passes of equal size
// (16 tokens are 4 passes of 4, not 3 of 5 and one of 1).
template <int Bits, QaScales S, int NTILE, int kMax>
void run_spans(const QaLayout& L, const Span* const sp[NTILE], int64_t nb, const MatmulArgs& a) {
  const uint8_t* tiles[NTILE];
  for (int u = 0; u < NTILE; ++u) tiles[u] = sp[u]->tile;
  const int64_t passes = (a.n_tok + kMax - 1) / kMax;
  // Tiles are contiguous, and the next unit's follow this one's.
  const int64_t unit_lines = NTILE * static_cast<int64_t>(a.w->tile_bytes) / 64;
  const uint8_t* next_unit = tiles[0] + unit_lines * 64;
  for (int64_t t0 = 0, pass = 0; t0 < a.n_tok; ++pass) {
    __m512 out[NTILE][kMax];
    const int64_t nt = (a.n_tok - t0 + (passes - pass) - 1) / (passes - pass);
    auto run = [&]<int NT>() {
      __m512 o[NTILE][NT];
      if constexpr (kMax <= kPairTokens) tiles_x_tokens<Bits, S, NT, NTILE>(L, tiles, nb, *a.xq, t0, o);
      else {
        tiles_x_tokens_blocked<Bits, S, NT, NTILE>(tiles, nb, *a.xq, t0, Prefetch::share(next_unit, unit_lines, pass, passes), o);
      }
      for (int u = 0; u < NTILE; ++u)
        for (int i = 0; i < NT; ++i) out[u][i] = o[u][i];
    };
    [&]<int... I>(std::integer_sequence<int, I...>) {  // run<nt>(), nt in 1..kMax
      (void)((nt == I + 1 ? (run.template operator()<I + 1>(), true) : false) || ...);  // (void): one I leaves no ||
    }(std::make_integer_sequence<int, kMax>{});
    // Lane l of a tile is row r - lane0 + l: written at y[t][r - a.r0 - lane0 + l].
    for (int u = 0; u < NTILE; ++u) {
      const __mmask16 mask = static_cast<__mmask16>(((1u << sp[u]->n) - 1) << sp[u]->lane0);
      for (int64_t i = 0; i < nt; ++i)
        _mm512_mask_storeu_ps(a.y + (t0 + i) * a.ldy + (sp[u]->r - a.r0) - sp[u]->lane0, mask, out[u][i]);
    }
    t0 += nt;
  }
}

template <int Bits, QaScales S>
void matmul_qa(const MatmulArgs& a) {
  const QaLayout L = qa_layout(Bits, S);
  const int64_t nb = a.w->cols / kQaBlock;
  auto run = [&]<int NTILE, int kMax>(const Span* const sp[NTILE], const MatmulArgs& call) {
    run_spans<Bits, S, NTILE, kMax>(L, sp, nb, call);
  };
  for_spans<kPairTokens, block_tokens<S>(), decltype(run), kDecodeStreams, block_tiles<S>()>(a, run);
}

template <int Bits, QaScales S>
struct QaKernel {
  static void run(const MatmulArgs& a) { matmul_qa<Bits, S>(a); }
};

}  // namespace

MatmulKernel matmul_qa_avx512(const Weight& w) { return qa_dispatch<QaKernel>(w); }

}  // namespace basalt::kernels
