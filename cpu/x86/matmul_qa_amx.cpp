// SPDX-License-Identifier: MIT
// qa matmul prefill on AMX tiles (Intel Xeon since Sapphire Rapids). Per block
// of 32 columns one tdpbssd multiplies 16 tokens' int8 activations (A: the
// rows of QuantizedActs as they are) by a tile's 16 rows of signed codes
// (B: the qa layout's 64-byte chunks already are AMX's rows of 4-byte groups,
// so a block unpacks to B with no shuffle; the zero code is taken off as it
// does), and AVX-512 applies the block's row and token scales to the 16 x 16
// int32 result with the AVX-512 kernel's formula: those are the same exact
// sums, so a token's rows come out with the same bits in a prefill on the
// tiles as alone in decode (MatmulIsa.TokenAloneGivesTheBitsOfItsRowInABatch). A tile's blocks are
// unpacked once per run of tokens whose activations fit in L2, and reused for
// every 16 of them. Under amx_min_tokens (decode, a server's batch) the AVX-512 kernel runs.
#include <immintrin.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/util/aligned.h"
#include "cpu/matmul.h"
#include "cpu/x86/amx_tile_config.h"
#include "cpu/qa_dispatch.h"
#include "cpu/qa_spans.h"
#include "cpu/x86/qa_unpack_avx512.h"
#include "quant/qa_layout.h"

namespace basalt::kernels {

namespace {

int64_t min_i(int64_t a, int64_t b) { return a < b ? a : b; }
int64_t max_i(int64_t a, int64_t b) { return a > b ? a : b; }
constexpr int64_t kRunActBytes = int64_t{1} << 20;  // int8 activations of one run of tokens: half this L2

// Tile registers (literal numbers: the intrinsics paste them into the asm).
// C: 16 tokens x 16 rows of int32; A: 16 tokens x 32 bytes; B: 8 rows of 64
// bytes. Two sets, for even and odd blocks: a tile's product takes tens of
// cycles, and a register is free again only once its result is stored. q6k
// multiplies each half of a block apart (its own scale): C, A (16 bytes) and
// B (4 rows) per half, one set.
#define kC0 0
#define kA0 2
#define kB0 3
#define kC1 1
#define kA1 4
#define kB1 5
#define kClo 0
#define kChi 1
#define kAlo 2
#define kAhi 3
#define kBlo 4
#define kBhi 5


template <bool kSplitHalves>
const AmxTileConfig& tile_config() {
  static const AmxTileConfig c = [] {
    AmxTileConfig t;
    auto set = [&](int r, int rows, int colsb) { t.rows[r] = static_cast<uint8_t>(rows), t.colsb[r] = static_cast<uint16_t>(colsb); };
    if (kSplitHalves) {
      set(kClo, 16, 64), set(kChi, 16, 64), set(kAlo, 16, 16), set(kAhi, 16, 16), set(kBlo, 4, 64), set(kBhi, 4, 64);
    } else {
      set(kC0, 16, 64), set(kA0, 16, 32), set(kB0, 8, 64), set(kC1, 16, 64), set(kA1, 16, 32), set(kB1, 8, 64);
    }
    return t;
  }();
  return c;
}

// A growing array, 64-byte aligned (whole cache lines for the tile loads),
// zeroed by a loop of this file: no std::vector<float> member templates here,
// whose out-of-line copies built with AVX-512 could be the ones the linker
// keeps for baseline code (see core/util/half.h).
template <typename T>
struct Buffer {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> p;
  int64_t size = 0;
  T* data() { return p.get(); }
  T* at_least(int64_t n) {  // n elements, contents undefined
    if (n > size) {
      const size_t bytes = (static_cast<size_t>(n) * sizeof(T) + 63) / 64 * 64;
      T* q = static_cast<T*>(std::aligned_alloc(64, bytes));
      if (!q) throw_out_of_memory(bytes);
      p.reset(q), size = n;
    }
    return p.get();
  }
  T* zeroed(int64_t n) {  // n elements, all zero
    T* q = at_least(n);
    for (int64_t i = 0; i < n; ++i) q[i] = T{};
    return q;
  }
};

// One thread's scratch, 64-byte aligned: the tile's unpacked blocks and their
// scales, the run's activations and token terms, the result tiles.
// A vector type as a template argument loses its attributes (alignment, may_alias), which gcc
// warns of; Buffer aligns its storage to 64 bytes itself.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
struct Scratch {
  Buffer<__m512i> b;          // [block][8]: B rows
  Buffer<__m512> scale;       // [block][2]: scale, and bias or the high half's scale
  Buffer<float> xd, xds;      // [token of the run, padded to 16][block]: QuantizedActs' d and dsum
  alignas(64) int32_t c[3][2][16 * 16];  // [block % 3][half]: results, 16 tokens x 16 rows
  Buffer<int8_t> a;           // [16 tokens][block][16 x 32 bytes]: the run's activations as A tiles
};
#pragma GCC diagnostic pop

// The code of zero, where codes are unsigned around it (8-bit codes are stored + 128).
template <int Bits, QaScales S>
constexpr int zero_code() {
  return Bits == 8 ? 128 : (S == QaScales::f16_sym ? 8 : (S == QaScales::q6k ? 32 : 0));
}

// Token terms per block, contiguous for the run: the activations' scale xd
// and dsum (their scale x their block sum: the bias term's factor).
void token_terms(const QuantizedActs& xq, int64_t t0, int64_t nt, int64_t nb, Scratch& s) {
  const int64_t n = (nt + 15) / 16 * 16 * nb;
  s.xd.zeroed(n);  // tokens past nt: zeros, so their results are too
  s.xds.zeroed(n);
  for (int64_t t = 0; t < nt; ++t) {
    std::memcpy(s.xd.data() + t * nb, xq.d_row(t0 + t), sizeof(float) * nb);
    std::memcpy(s.xds.data() + t * nb, xq.dsum_row(t0 + t), sizeof(float) * nb);
  }
}

// The run's activations as A tiles, 16 tokens x 32 bytes each, contiguous:
// tile loads then read 8 whole lines instead of 16 rows a row length apart.
// Tokens past the run's end are zeros.
void pack_activations(const QuantizedActs& xq, int64_t t0, int64_t nt, int64_t nb, Scratch& s) {
  const int64_t chunks = (nt + 15) / 16;
  s.a.zeroed(chunks * nb * 512);
  for (int64_t t = 0; t < nt; ++t) {
    const int8_t* row = xq.q_row(t0 + t);
    int8_t* dst = s.a.data() + (t / 16) * nb * 512 + (t % 16) * 32;
    for (int64_t b = 0; b < nb; ++b) std::memcpy(dst + b * 512, row + b * 32, 32);
  }
}

// The tile's blocks as B rows, and each block's scale vectors.
template <int Bits, QaScales S>
void unpack_tile(const QaLayout& L, const uint8_t* tile, int64_t nb, Scratch& s) {
  const int G = L.blocks_per_group;
  const size_t gbytes = L.group_bytes();
  for (int64_t g = 0; g * G < nb; ++g) {
    const uint8_t* grp = tile + g * gbytes;
    __m512 sup_d, sup_m;
    if constexpr (S == QaScales::kquant) sup_d = load_f16x16(grp), sup_m = load_f16x16(grp + 32);
    if constexpr (S == QaScales::q6k) sup_d = load_f16x16(grp);
    for (int j = 0; j < G && g * G + j < nb; ++j) {
      const int64_t b = g * G + j;
      __m512i* rows = s.b.data() + b * 8;
      unpack<Bits>(L.quants(grp, j), rows, rows + 4);
      constexpr int kZero = zero_code<Bits, S>();  // codes less their zero, signed (8 bits: q + 128 - 128 wraps to q)
      if constexpr (kZero != 0)
        for (int k = 0; k < 8; ++k) rows[k] = _mm512_sub_epi8(rows[k], _mm512_set1_epi8(static_cast<char>(kZero)));
      const uint8_t* st = L.scales(grp, j);
      __m512* sc = s.scale.data() + b * 2;
      if constexpr (S == QaScales::f16_sym) sc[0] = load_f16x16(st);
      if constexpr (S == QaScales::f16_affine) sc[0] = load_f16x16(st), sc[1] = load_f16x16(st + 32);
      if constexpr (S == QaScales::f16_zero)  // d * z is exact in f32 (11 x 9 significant bits)
        sc[0] = load_f16x16(st), sc[1] = _mm512_mul_ps(sc[0], load_f16x16(st + 32));
      if constexpr (S == QaScales::kquant)
        sc[0] = _mm512_mul_ps(sup_d, load_u8x16(st)), sc[1] = _mm512_mul_ps(sup_m, load_u8x16(st + 16));
      if constexpr (S == QaScales::q6k)
        sc[0] = _mm512_mul_ps(sup_d, load_i8x16(st)), sc[1] = _mm512_mul_ps(sup_d, load_i8x16(st + 16));
    }
  }
}

// Tokens t..t+15 of the run x the unpacked tile: out[i] holds token t+i's 16 rows.
template <int Bits, QaScales S>
void tokens_x_tile(int64_t t, int64_t nb, Scratch& s, __m512 out[16]) {
  const int8_t* a = s.a.data() + t / 16 * nb * 512;
  constexpr bool kSplitHalves = S == QaScales::q6k;
  constexpr bool kBias = S == QaScales::f16_affine || S == QaScales::f16_zero || S == QaScales::kquant;
  // Three stages, so that nothing waits on the tile unit: while the vector
  // units scale block b, the product of b + 1 (issued one block earlier) is
  // stored and that of b + 2 starts. Block b's results are in s.c[b % 3]; the
  // two register sets alternate between even and odd blocks. q6k has room for
  // one set only: each product is stored right away, one block ahead.
  auto product = [&](int64_t b) {
    const __m512i* rows = s.b.data() + b * 8;
    if constexpr (kSplitHalves) {
      _tile_loadd(kAlo, a + b * 512, 32);
      _tile_loadd(kAhi, a + b * 512 + 16, 32);
      _tile_loadd(kBlo, rows, 64);
      _tile_loadd(kBhi, rows + 4, 64);
      _tile_zero(kClo);
      _tile_zero(kChi);
      _tile_dpbssd(kClo, kAlo, kBlo);
      _tile_dpbssd(kChi, kAhi, kBhi);
    } else if (b & 1) {
      _tile_loadd(kA1, a + b * 512, 32);
      _tile_loadd(kB1, rows, 64);
      _tile_zero(kC1);
      _tile_dpbssd(kC1, kA1, kB1);
    } else {
      _tile_loadd(kA0, a + b * 512, 32);
      _tile_loadd(kB0, rows, 64);
      _tile_zero(kC0);
      _tile_dpbssd(kC0, kA0, kB0);
    }
  };
  auto store = [&](int64_t b) {
    int32_t(*c)[256] = s.c[b % 3];
    if constexpr (kSplitHalves) {
      _tile_stored(kClo, c[0], 64);
      _tile_stored(kChi, c[1], 64);
    } else if (b & 1) {
      _tile_stored(kC1, c[0], 64);
    } else {
      _tile_stored(kC0, c[0], 64);
    }
  };
  __m512 acc[16];
  for (auto& v : acc) v = _mm512_setzero_ps();
  product(0);
  store(0);
  if constexpr (!kSplitHalves)
    if (nb > 1) product(1);
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (kSplitHalves) {
      if (b + 1 < nb) product(b + 1), store(b + 1);
    } else {
      if (b + 1 < nb) store(b + 1);
      if (b + 2 < nb) product(b + 2);
    }
    const int32_t(*c)[256] = s.c[b % 3];
    const __m512 scale = s.scale.data()[b * 2];
    const __m512 second = kBias || kSplitHalves ? s.scale.data()[b * 2 + 1] : scale;  // f16_sym has one
    const float* xd = s.xd.data() + t * nb + b;
    const float* xds = s.xds.data() + t * nb + b;
    // The AVX-512 kernel's arithmetic (matmul_qa_avx512.cpp), step for step.
    for (int i = 0; i < 16; ++i) {
      const __m512 vxd = _mm512_set1_ps(xd[i * nb]);
      const __m512 lo = _mm512_cvtepi32_ps(_mm512_load_si512(c[0] + 16 * i));
      if constexpr (kSplitHalves) {  // scaled_halves, then x's scale
        const __m512 hi = _mm512_cvtepi32_ps(_mm512_load_si512(c[1] + 16 * i));
        acc[i] = _mm512_fmadd_ps(_mm512_fmadd_ps(lo, scale, _mm512_mul_ps(hi, second)), vxd, acc[i]);
      } else {
        acc[i] = _mm512_fmadd_ps(lo, _mm512_mul_ps(scale, vxd), acc[i]);
      }
      if constexpr (kBias) {
        const __m512 xs = _mm512_set1_ps(xds[i * nb]);
        acc[i] = S == QaScales::f16_affine ? _mm512_fmadd_ps(second, xs, acc[i]) : _mm512_fnmadd_ps(second, xs, acc[i]);
      }
    }
  }
  for (int i = 0; i < 16; ++i) out[i] = acc[i];
}

template <int Bits, QaScales S>
void matmul_qa_amx(const MatmulArgs& a) {
  if (a.n_tok < amx_min_tokens(*a.w)) return matmul_qa_avx512(*a.w)(a);
  const QaLayout L = qa_layout(Bits, S);
  const QuantizedActs& xq = *a.xq;
  const int64_t nb = a.w->cols / kQaBlock;
  thread_local Scratch s;
  thread_local std::vector<Span> spans;
  collect_spans(a, spans);
  s.b.at_least(nb * 8);
  s.scale.at_least(nb * 2);
  _tile_loadconfig(&tile_config<S == QaScales::q6k>());
  // Runs of tokens (a multiple of 16) whose activations stay in L2 while every tile passes.
  const int64_t run = max_i(16, kRunActBytes / xq.stride / 16 * 16);
  for (int64_t r0 = 0; r0 < a.n_tok; r0 += run) {
    const int64_t nr = min_i(run, a.n_tok - r0);
    token_terms(xq, r0, nr, nb, s);
    pack_activations(xq, r0, nr, nb, s);
    for (const Span& sp : spans) {
      unpack_tile<Bits, S>(L, sp.tile, nb, s);
      const __mmask16 mask = static_cast<__mmask16>(((1u << sp.n) - 1) << sp.lane0);
      for (int64_t t = 0; t < nr; t += 16) {
        const int64_t nt = min_i(16, nr - t);
        __m512 out[16];
        tokens_x_tile<Bits, S>(t, nb, s, out);
        for (int64_t i = 0; i < nt; ++i)
          _mm512_mask_storeu_ps(a.y + (r0 + t + i) * a.ldy + (sp.r - a.r0) - sp.lane0, mask, out[i]);
      }
    }
  }
  _tile_release();
}

#undef kC0
#undef kA0
#undef kB0
#undef kC1
#undef kA1
#undef kB1
#undef kClo
#undef kChi
#undef kAlo
#undef kAhi
#undef kBlo
#undef kBhi

template <int Bits, QaScales S>
struct QaKernel {
  static void run(const MatmulArgs& a) { matmul_qa_amx<Bits, S>(a); }
};

}  // namespace

MatmulKernel matmul_qa_amx(const Weight& w) { return qa_dispatch<QaKernel>(w); }

// Tiles take 16 tokens, so a part-filled one costs a whole one, and each
// block's scales are applied to 16 x 16 sums stored from a tile; at the
// server's batches (16-32 tokens) the VNNI kernel was 1.3-1.9x faster
// (PERFORMANCE.md 3.2a). Q6_K's per-16 scales take two tiles a block; with
// its zero point taken off in the codes the tiles win from 96 (3.2b).
namespace {
std::atomic<int64_t> g_amx_min_tokens{0};  // set_amx_min_tokens
}  // namespace

void set_amx_min_tokens(int64_t n) { g_amx_min_tokens = n; }

int64_t amx_min_tokens(const Weight& w) {
  if (const int64_t forced = g_amx_min_tokens.load(std::memory_order_relaxed)) return forced;
  return w.bits == 8 || w.scales == QaScales::q6k ? 96 : w.bits == 5 ? 32 : 48;
}

}  // namespace basalt::kernels
