// SPDX-License-Identifier: MIT
// qa matmul on AVX2 over the tiled layout (quant/qa_layout.h): a 16-row tile
// is two halves of 8 lanes (the two 32-byte halves of each 64-byte chunk);
// u8 x s8 products through vpmaddubsw + vpmaddwd.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "cpu/matmul.h"
#include "cpu/x86/qa_dispatch.h"
#include "cpu/x86/qa_spans.h"
#include "quant/qa_layout.h"

namespace basalt::kernels {

namespace {

constexpr int kMaxTok = 4;
constexpr int kPairTokens = 1;  // decode of one token: tiles in pairs, two read streams (16 registers: no more)
constexpr int kPrefetchBytes = 4096;

inline __m256 load_f16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load_u8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 load_i8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256i bcast4(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}
template <int S>
inline __m256i shift(__m256i v) {
  if constexpr (S >= 0) return _mm256_slli_epi32(v, S);
  else return _mm256_srli_epi32(v, -S);
}
inline __m256i dot(__m256i u8, __m256i s8) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1)); }

// Half h (lanes 8h..8h+7) of one block: lo[c] pairs with x[4c..], hi[c] with x[16+4c..].
// 8 bits come back signed (stored q + 128, flipped back), for the sign trick.
template <int Bits>
inline void unpack(const uint8_t* qt, __m256i lo[4], __m256i hi[4]) {
  auto ld = [&](int chunk) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(qt + 64 * chunk)); };
  if constexpr (Bits == 8) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < 4; ++c) lo[c] = _mm256_xor_si256(ld(c), flip), hi[c] = _mm256_xor_si256(ld(c + 4), flip);
  } else {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      const __m256i v = ld(c);
      lo[c] = _mm256_and_si256(v, m4);
      hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    if constexpr (Bits >= 5) {
      const __m256i h = ld(4), b4 = _mm256_set1_epi8(0x10);
      lo[0] = _mm256_or_si256(lo[0], _mm256_and_si256(shift<4>(h), b4));
      lo[1] = _mm256_or_si256(lo[1], _mm256_and_si256(shift<3>(h), b4));
      lo[2] = _mm256_or_si256(lo[2], _mm256_and_si256(shift<2>(h), b4));
      lo[3] = _mm256_or_si256(lo[3], _mm256_and_si256(shift<1>(h), b4));
      hi[0] = _mm256_or_si256(hi[0], _mm256_and_si256(h, b4));
      hi[1] = _mm256_or_si256(hi[1], _mm256_and_si256(shift<-1>(h), b4));
      hi[2] = _mm256_or_si256(hi[2], _mm256_and_si256(shift<-2>(h), b4));
      hi[3] = _mm256_or_si256(hi[3], _mm256_and_si256(shift<-3>(h), b4));
    }
    if constexpr (Bits == 6) {
      const __m256i h = ld(5), b5 = _mm256_set1_epi8(0x20);
      lo[0] = _mm256_or_si256(lo[0], _mm256_and_si256(shift<5>(h), b5));
      lo[1] = _mm256_or_si256(lo[1], _mm256_and_si256(shift<4>(h), b5));
      lo[2] = _mm256_or_si256(lo[2], _mm256_and_si256(shift<3>(h), b5));
      lo[3] = _mm256_or_si256(lo[3], _mm256_and_si256(shift<2>(h), b5));
      hi[0] = _mm256_or_si256(hi[0], _mm256_and_si256(shift<1>(h), b5));
      hi[1] = _mm256_or_si256(hi[1], _mm256_and_si256(h, b5));
      hi[2] = _mm256_or_si256(hi[2], _mm256_and_si256(shift<-1>(h), b5));
      hi[3] = _mm256_or_si256(hi[3], _mm256_and_si256(shift<-2>(h), b5));
    }
  }
}

template <int Bits>
inline __m256i dot4(const __m256i w[4], const int8_t* x) {
  __m256i acc = _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    const __m256i xv = bcast4(x + 4 * c);
    const __m256i p = Bits == 8 ? dot(_mm256_sign_epi8(w[c], w[c]), _mm256_sign_epi8(xv, w[c])) : dot(w[c], xv);
    acc = _mm256_add_epi32(acc, p);
  }
  return acc;
}

// NTILE tiles x NT tokens: out[u][h * NT + i]. Two tiles from distant rows
// are two read streams, which decode needs to reach the read bandwidth.
template <int Bits, QaScales S, int NT, int NTILE>
void tiles_x_tokens(const QaLayout& L, const uint8_t* const tiles[NTILE], int64_t nb, const QuantizedActs& xq,
                    int64_t t0, __m256 out[NTILE][2 * NT]) {
  constexpr bool kSplitHalves = S == QaScales::q6k;
  constexpr int kZero = Bits == 8 ? 0 : (S == QaScales::f16_sym ? 8 : (S == QaScales::q6k ? 32 : 0));
  const int G = L.blocks_per_group;
  const size_t gbytes = L.group_bytes();
  const int64_t n_groups = L.groups(nb * kQaBlock);
  __m256 acc[NTILE][2][NT];
  for (int u = 0; u < NTILE; ++u)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < NT; ++i) acc[u][h][i] = _mm256_setzero_ps();
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* grps[NTILE];
    for (int u = 0; u < NTILE; ++u) {
      grps[u] = tiles[u] + g * gbytes;
      for (size_t off = 0; off < gbytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(grps[u] + kPrefetchBytes + off), _MM_HINT_T0);
    }
    for (int j = 0; j < G; ++j)
      for (int u = 0; u < NTILE; ++u) {
        const int64_t b = g * G + j;
        const uint8_t* grp = grps[u];
        const uint8_t* st = L.scales(grp, j);
        for (int h = 0; h < 2; ++h) {
          __m256i lo[4], hi[4];
          unpack<Bits>(L.quants(grp, j) + 32 * h, lo, hi);
          __m256 scale, scale_hi, bias;
          if constexpr (S == QaScales::f16_sym) scale = load_f16x8(st + 16 * h);
          if constexpr (S == QaScales::f16_affine) scale = load_f16x8(st + 16 * h), bias = load_f16x8(st + 32 + 16 * h);
          if constexpr (S == QaScales::f16_zero)  // d * z is exact in f32 (11 x 9 significant bits)
            scale = load_f16x8(st + 16 * h), bias = _mm256_mul_ps(scale, load_f16x8(st + 32 + 16 * h));
          if constexpr (S == QaScales::kquant) {
            scale = _mm256_mul_ps(load_f16x8(grp + 16 * h), load_u8x8(st + 8 * h));
            bias = _mm256_mul_ps(load_f16x8(grp + 32 + 16 * h), load_u8x8(st + 16 + 8 * h));
          }
          if constexpr (S == QaScales::q6k) {
            const __m256 d = load_f16x8(grp + 16 * h);
            scale = _mm256_mul_ps(d, load_i8x8(st + 8 * h));
            scale_hi = _mm256_mul_ps(d, load_i8x8(st + 16 + 8 * h));
          }
          for (int i = 0; i < NT; ++i) {
            const int8_t* x = xq.q_row(t0 + i) + b * 32;
            const int32_t* xs = xq.sum16_row(t0 + i) + 2 * b;
            const float xd = xq.d_row(t0 + i)[b];
            const __m256 vxd = _mm256_set1_ps(xd);
            __m256i a0 = dot4<Bits>(lo, x), a1 = dot4<Bits>(hi, x + 16);
            if constexpr (kSplitHalves) {
              a0 = _mm256_sub_epi32(a0, _mm256_set1_epi32(kZero * xs[0]));
              a1 = _mm256_sub_epi32(a1, _mm256_set1_epi32(kZero * xs[1]));
              acc[u][h][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a0), _mm256_mul_ps(scale, vxd), acc[u][h][i]);
              acc[u][h][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a1), _mm256_mul_ps(scale_hi, vxd), acc[u][h][i]);
            } else {
              __m256i a = _mm256_add_epi32(a0, a1);
              if constexpr (kZero != 0) a = _mm256_sub_epi32(a, _mm256_set1_epi32(kZero * (xs[0] + xs[1])));
              acc[u][h][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), _mm256_mul_ps(scale, vxd), acc[u][h][i]);
              if constexpr (S == QaScales::f16_affine)
                acc[u][h][i] =
                    _mm256_fmadd_ps(bias, _mm256_set1_ps(xd * static_cast<float>(xs[0] + xs[1])), acc[u][h][i]);
              if constexpr (S == QaScales::kquant || S == QaScales::f16_zero)
                acc[u][h][i] =
                    _mm256_fnmadd_ps(bias, _mm256_set1_ps(xd * static_cast<float>(xs[0] + xs[1])), acc[u][h][i]);
            }
          }
        }
      }
  }
  for (int u = 0; u < NTILE; ++u)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < NT; ++i) out[u][h * NT + i] = acc[u][h][i];
}

// NTILE spans x all tokens, kMax tokens per pass.
template <int Bits, QaScales S, int NTILE, int kMax>
void run_spans(const QaLayout& L, const Span* const sp[NTILE], int64_t nb, const MatmulArgs& a) {
  const uint8_t* tiles[NTILE];
  for (int u = 0; u < NTILE; ++u) tiles[u] = sp[u]->tile;
  for (int64_t t0 = 0; t0 < a.n_tok; t0 += kMax) {
    __m256 out[NTILE][2 * kMax];
    const int64_t nt = std::min<int64_t>(kMax, a.n_tok - t0);
    auto run = [&]<int NT>() {
      __m256 o[NTILE][2 * NT];
      tiles_x_tokens<Bits, S, NT, NTILE>(L, tiles, nb, *a.xq, t0, o);
      for (int u = 0; u < NTILE; ++u)
        for (int i = 0; i < 2 * NT; ++i) out[u][i] = o[u][i];
    };
    [&]<int... I>(std::integer_sequence<int, I...>) {  // run<nt>(), nt in 1..kMax
      ((nt == I + 1 ? (run.template operator()<I + 1>(), true) : false) || ...);
    }(std::make_integer_sequence<int, kMax>{});
    for (int u = 0; u < NTILE; ++u)
      for (int64_t i = 0; i < nt; ++i) {
        alignas(32) float lanes[16];
        _mm256_store_ps(lanes, out[u][i]);
        _mm256_store_ps(lanes + 8, out[u][nt + i]);
        float* y = a.y + (t0 + i) * a.ldy + (sp[u]->r - a.r0);
        std::memcpy(y, lanes + sp[u]->lane0, sizeof(float) * sp[u]->n);
      }
  }
}

template <int Bits, QaScales S>
void matmul_qa(const MatmulArgs& a) {
  const QaLayout L = qa_layout(Bits, S);
  const int64_t nb = a.w->cols / kQaBlock;
  for_spans<kPairTokens, kMaxTok>(a, [&]<int NTILE, int kMax>(const Span* const sp[NTILE]) {
    run_spans<Bits, S, NTILE, kMax>(L, sp, nb, a);
  });
}

template <int Bits, QaScales S>
struct QaKernel {
  static void run(const MatmulArgs& a) { matmul_qa<Bits, S>(a); }
};

}  // namespace

MatmulKernel matmul_qa_avx2(const Weight& w) { return qa_dispatch<QaKernel>(w); }

}  // namespace basalt::kernels
