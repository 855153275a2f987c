// SPDX-License-Identifier: MIT
// Every attention variant (ISA) against the scalar reference attention_ref,
// on an f16 and a q8 cache: head sizes, GQA ratios, batches of 1 to 17
// tokens, up to 4100 positions of context, two sequences in one batch,
// chunked prefill; the vector exp; the cache's layout and q8 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/util/threads.h"
#include "cpu/attention.h"
#include "cpu/ops.h"
#include "core/util/half.h"
#include "tests/unit/isa_testing.h"
#include "tests/unit/paged_kv.h"

namespace basalt {
namespace {

// Outputs differ from the reference by summation order, f32 scratch and the
// vector exp (relative error ~2e-7): NMSE ~1e-13 in practice.
constexpr double kMaxNmse = 1e-10;

struct Case {
  int64_t head_dim, n_kv, ratio;
  std::vector<int32_t> ctx;    // per sequence: positions already in the cache
  std::vector<int32_t> n_tok;  // per sequence: tokens of the batch, at positions ctx, ctx + 1, ...
  bool interleave = false;     // the sequences' tokens alternate in the batch (else one after the other)
  float q_scale = 1;           // larger: sharper softmax, scores of tens
  float key_growth = 0;        // cached key p times 1 + key_growth * p / 1000: the rows' max jumps in late blocks
  int64_t window = 0;          // a sliding window: each token sees its last `window` positions (0: all)

  std::string name() const {
    std::string s = "head_dim " + std::to_string(head_dim) + " kv heads " + std::to_string(n_kv) + " ratio " +
                    std::to_string(ratio);
    for (size_t i = 0; i < ctx.size(); ++i)
      s += " | seq " + std::to_string(i) + ": " + std::to_string(n_tok[i]) + " tokens after " + std::to_string(ctx[i]);
    if (window) s += " | window " + std::to_string(window);
    return s + (interleave ? " interleaved" : "") + " q x" + std::to_string(q_scale) +
           (key_growth ? " keys growing x" + std::to_string(key_growth) : "");
  }
};

const Case kCases[] = {
    {64, 3, 3, {0}, {1}},  // SmolLM2's shape: first token
    {64, 3, 3, {0}, {17}},
    {64, 3, 3, {2048}, {1}},  // decode at depth: the key range is split across threads
    {64, 3, 3, {4099}, {1}},  // 4100 positions
    {64, 3, 3, {63}, {2}},    // across the first key block
    {32, 4, 1, {5}, {7}},
    {32, 8, 1, {130}, {2}},
    {80, 2, 4, {100}, {9}},
    {80, 3, 4, {0}, {13}},
    {128, 1, 8, {4083}, {17}},  // 17 tokens up to position 4099
    {128, 4, 8, {1500}, {1}},
    {128, 2, 4, {300}, {3}},
    {128, 6, 1, {200}, {3}},  // KV heads in two pieces of 4 and 2
    {256, 2, 2, {70}, {2}},   // 16 vectors on AVX-512; the generic kernel on AVX2
    {72, 2, 3, {65}, {5}},    // head_dim not a multiple of 16
    {36, 1, 2, {10}, {4}},    // nor of 8
    {64, 1, 1, {1000}, {16}, false, 8.0f},
    {64, 2, 3, {0, 0}, {5, 3}, true},  // two sequences, tokens interleaved
    {64, 2, 3, {40, 7}, {4, 6}},       // two sequences, one after the other
    {128, 2, 4, {600, 3}, {1, 1}},     // decode of two sequences in one batch
    {64, 2, 4, {3000}, {2}, false, 4.0f, 3.0f},  // scores growing by tens along the context
    // Sliding windows: decode and prefill across a block edge, a window of
    // one position, shorter and longer than a block, two sequences, a split decode.
    {64, 2, 3, {200}, {1}, false, 1.0f, 0.0f, 64},
    {64, 2, 3, {100}, {40}, false, 1.0f, 0.0f, 50},
    {32, 1, 2, {70}, {5}, false, 1.0f, 0.0f, 1},
    {128, 1, 4, {4083}, {17}, false, 1.0f, 0.0f, 512},
    {64, 2, 3, {40, 300}, {6, 3}, true, 1.0f, 0.0f, 130},
    {80, 3, 4, {2000}, {1}, false, 1.0f, 0.0f, 1000},
};

ModelSpec spec_of(const Case& c) {
  ModelSpec s;
  s.n_layer = 2;
  s.n_head_kv = c.n_kv;
  s.n_head = c.n_kv * c.ratio;
  s.head_dim = c.head_dim;
  s.n_embd = s.n_head * s.head_dim;
  s.sliding_window = c.window;  // every layer (swa_period 0)
  return s;
}

// The cache's context already there: the same random values for every run.
void fill_cache(KvCache& kv, const Case& c) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  for (int64_t layer = 0; layer < 2; ++layer)
    for (size_t s = 0; s < c.ctx.size(); ++s)
      for (int32_t p = 0; p < c.ctx[s]; ++p) {
        std::vector<float> key(static_cast<size_t>(kv.kv_dim())), value(key.size());
        for (float& x : key) x = nd(rng) * (1 + c.key_growth * static_cast<float>(p) / 1000);
        for (float& x : value) x = nd(rng);
        kv.store(layer, static_cast<int>(s), p, key.data(), value.data());
      }
}

struct Inputs {
  Batch batch;
  std::vector<float> q, k, v;
};

Inputs make_inputs(const Case& c, const ModelSpec& spec) {
  Inputs in;
  std::vector<int32_t> next(c.ctx.begin(), c.ctx.end()), left(c.n_tok.begin(), c.n_tok.end());
  for (bool more = true; more;) {
    more = false;
    for (size_t s = 0; s < c.ctx.size(); ++s) {
      for (; left[s] > 0; --left[s]) {
        in.batch.add(1, next[s]++, static_cast<int32_t>(s), true);
        if (c.interleave) {
          --left[s];
          break;
        }
      }
      more = more || left[s] > 0;
    }
  }
  const int64_t n = in.batch.size();
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 1);
  in.q.resize(static_cast<size_t>(n * spec.q_dim()));
  in.k.resize(static_cast<size_t>(n * spec.kv_dim()));
  in.v.resize(in.k.size());
  for (float& x : in.q) x = c.q_scale * nd(rng);
  for (float& x : in.k) x = nd(rng);
  for (float& x : in.v) x = nd(rng);
  return in;
}

int64_t n_ctx_of(const Case& c) {
  int64_t n = 1;
  for (size_t s = 0; s < c.ctx.size(); ++s) n = std::max<int64_t>(n, c.ctx[s] + c.n_tok[s]);
  return n;
}

// Runs one variant (nullptr: the reference) on a fresh cache, paged with
// interleaved blocks; returns the output, and the cache.
std::vector<float> run(const Case& c, const Isa* isa, KvType type, std::vector<float>* cache_out = nullptr) {
  const ModelSpec spec = spec_of(c);
  KvCache kv = testutil::interleaved_kv_cache(spec, n_ctx_of(c), static_cast<int>(c.ctx.size()), type);
  fill_cache(kv, c);
  Inputs in = make_inputs(c, spec);
  std::vector<float> out(in.q.size(), NAN);
  if (isa) cpu::attention(in.q.data(), in.k.data(), in.v.data(), out.data(), in.batch, kv, 1, spec, *isa);
  else cpu::attention_ref(in.q.data(), in.k.data(), in.v.data(), out.data(), in.batch, kv, 1, spec);
  if (cache_out) {
    cache_out->clear();
    for (int s = 0; s < static_cast<int>(c.ctx.size()); ++s)
      for (int64_t p = 0; p < c.ctx[static_cast<size_t>(s)] + c.n_tok[static_cast<size_t>(s)]; ++p)  // those written
        for (int64_t i = 0; i < kv.kv_dim(); ++i) {
          cache_out->push_back(kv.key(1, s, p, i));
          cache_out->push_back(kv.value(1, s, p, i));
        }
  }
  return out;
}

double nmse(const std::vector<float>& got, const std::vector<float>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    err += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return err / norm;
}

bool all_finite(const std::vector<float>& x) {
  for (float v : x)
    if (!std::isfinite(v)) return false;
  return true;
}

// The vector kernels, each test once per ISA (AttentionIsa.NAME/ISA): skipped
// where the CPU lacks it, failed where BASALT_REQUIRE_ISA names it.
class AttentionIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    NEED_ISA(GetParam());
    if (!cpu::find_attention_kernels(GetParam())) {
      if (testutil::isa_required(GetParam())) FAIL() << "no " << isa_name(GetParam()) << " attention kernels in this build";
      GTEST_SKIP() << "no " << isa_name(GetParam()) << " attention kernels in this build";
    }
  }
};
INSTANTIATE_TEST_SUITE_P(, AttentionIsa, ::testing::Values(Isa::avx2, Isa::avx512), testutil::isa_test_name);

TEST(Attention, ScalarRunsTheReference) {
  const Isa scalar = Isa::scalar;
  for (KvType type : {KvType::f16, KvType::q8})
    for (const Case& c : kCases) EXPECT_TRUE(run(c, &scalar, type) == run(c, nullptr, type)) << c.name();
}

TEST_P(AttentionIsa, MatchesReference) {
  const Isa isa = GetParam();
  for (KvType type : {KvType::f16, KvType::q8}) {
    double worst = 0;
    for (const Case& c : kCases) {
      const std::string name = c.name() + " kv " + kv_type_name(type);
      std::vector<float> ref_cache, cache;
      const std::vector<float> ref = run(c, nullptr, type, &ref_cache);
      ASSERT_TRUE(all_finite(ref)) << name;
      {
        const std::vector<float> got = run(c, &isa, type, &cache);
        EXPECT_TRUE(all_finite(got)) << isa_name(isa) << " " << name;
        const double e = nmse(got, ref);
        worst = std::max(worst, e);
        EXPECT_LE(e, kMaxNmse) << isa_name(isa) << " " << name;
        EXPECT_TRUE(cache == ref_cache) << isa_name(isa) << " stored other K/V: " << name;
      }
    }
    std::printf("[ info ] %s, kv %s: worst NMSE against the reference: %.3g (bound %.0e)\n", isa_name(isa),
                kv_type_name(type), worst, kMaxNmse);
  }
}

// The q8 cache against the f16 one, through the reference: int8 with a scale
// per (position, KV head) keeps attention's output within NMSE 1e-4 of f16's
// for scores of order 1, 1e-3 for a sharp softmax (scores of tens, where a
// key's rounding error dq moves its weight by e^(q.dq)): measured <1e-4 and
// 5.6e-4. A wrong scale or layout gives ~1.
TEST(Attention, Q8CacheStaysCloseToF16) {
  double worst = 0;
  for (const Case& c : kCases) {
    const double e = nmse(run(c, nullptr, KvType::q8), run(c, nullptr, KvType::f16));
    worst = std::max(worst, e);
    EXPECT_LE(e, c.q_scale > 1 ? 1e-3 : 1e-4) << c.name();
  }
  std::printf("[ info ] q8 cache: worst NMSE against f16: %.3g\n", worst);
}

// The cases on `threads` threads, with isa's kernels and either cache type, against the reference.
void expect_match_on_threads(Isa isa, int threads, const std::vector<Case>& cases) {
  const int before = thread_count();
  set_thread_count(threads);
  for (const Case& c : cases)
    for (KvType type : {KvType::f16, KvType::q8}) {
      const std::vector<float> ref = run(c, nullptr, type);
      EXPECT_LE(nmse(run(c, &isa, type), ref), kMaxNmse)
            << threads << " threads, " << isa_name(isa) << " " << c.name() << " " << kv_type_name(type);
    }
  set_thread_count(before);
}

// Four threads: a decode's key range in 4 pieces, their merge split into
// tasks of 8 rows (9 rows here: 8 + 1), also where the rows' max moves late.
TEST_P(AttentionIsa, FourThreadsMatchReference) {
  expect_match_on_threads(GetParam(), 4, {{64, 3, 3, {2048}, {1}}, {64, 2, 4, {3000}, {1}, false, 4.0f, 3.0f}});
}

// One thread: no key range is split, so the pieces' merge is the trivial one.
TEST_P(AttentionIsa, OneThreadMatchesReference) {
  expect_match_on_threads(GetParam(), 1, {{64, 3, 3, {4099}, {1}}, {128, 1, 8, {4083}, {17}}, {64, 2, 3, {0, 0}, {5, 3}, true}});
}

TEST_P(AttentionIsa, ChunkedPrefillEqualsOneBatch) {
  const Case c{64, 3, 3, {0}, {17}};
  const ModelSpec spec = spec_of(c);
  const Inputs in = make_inputs(c, spec);
  const int64_t n = in.batch.size(), qd = spec.q_dim(), kvd = spec.kv_dim();
  for (Isa isa : {Isa::scalar, GetParam()})
    for (KvType type : {KvType::f16, KvType::q8}) {
    KvCache whole_kv(spec, n, 1, type), chunk_kv(spec, n, 1, type);
    std::vector<float> whole(static_cast<size_t>(n * qd)), chunked(whole.size());
    cpu::attention(in.q.data(), in.k.data(), in.v.data(), whole.data(), in.batch, whole_kv, 0, spec, isa);
    for (int64_t t0 = 0; t0 < n;) {
      const int64_t len = std::min<int64_t>(t0 == 0 ? 5 : 6, n - t0);  // chunks of 5, 6, 6
      Batch b;
      for (int64_t t = t0; t < t0 + len; ++t) b.add(1, in.batch.pos[t], 0, true);
      cpu::attention(in.q.data() + t0 * qd, in.k.data() + t0 * kvd, in.v.data() + t0 * kvd, chunked.data() + t0 * qd, b,
                     chunk_kv, 0, spec, isa);
      t0 += len;
    }
    EXPECT_LE(nmse(chunked, whole), 1e-12) << isa_name(isa) << " " << kv_type_name(type);
  }
}

TEST_P(AttentionIsa, VectorExp) {
  {
    const Isa isa = GetParam();
    const cpu::AttentionKernels* k = cpu::find_attention_kernels(isa);
    std::vector<float> x;
    for (double v = -110; v <= 88; v += 0.000731) x.push_back(static_cast<float>(v));
    for (float v : {0.0f, -0.0f, -1e-30f, 1e-30f, -INFINITY, NAN, -87.3f, 88.0f}) x.push_back(v);
    std::vector<float> y(x.size());
    k->exp(x.data(), y.data(), static_cast<int64_t>(x.size()) - 3);  // leaves a tail shorter than a vector
    k->exp(x.data() + x.size() - 3, y.data() + y.size() - 3, 3);
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(y[i])) << isa_name(isa);
        continue;
      }
      const double want = std::exp(static_cast<double>(x[i]));
      if (x[i] < -87.3f) {  // about FLT_MIN and below: 0 or a denormal will do
        EXPECT_TRUE(y[i] >= 0 && y[i] <= 1.25e-38) << isa_name(isa) << " exp(" << x[i] << ") = " << y[i];
        continue;
      }
      const double rel = std::fabs(y[i] - want) / want;
      worst = std::max(worst, rel);
      EXPECT_LE(rel, 1e-6) << isa_name(isa) << " exp(" << x[i] << ") = " << y[i] << ", not " << want;
    }
    EXPECT_EQ(y[x.size() - 8], 1.0f);  // exp(0), exactly
    EXPECT_EQ(y[x.size() - 4], 0.0f);  // exp(-inf)
    std::printf("[ info ] %s exp: worst relative error %.3g on [-87.3, 88]\n", isa_name(isa), worst);
  }
}

// One layer with one head of head_dim.
ModelSpec one_head_spec(int64_t head_dim) {
  ModelSpec spec;
  spec.n_layer = 1;
  spec.n_head = spec.n_head_kv = 1;
  spec.head_dim = spec.rope_dim = head_dim;
  spec.n_embd = head_dim;
  return spec;
}

// The window is what the reference sees: a token attends to its last
// `window` positions, its own included, as llama.cpp and HF mask it (a query at
// p sees keys > p - window); only the cases above check the kernels against it.
TEST(Attention, ReferenceWindowSeesTheLastPositions) {
  ModelSpec spec = one_head_spec(8);
  spec.sliding_window = 3;
  KvCache kv = testutil::interleaved_kv_cache(spec, 8, 1, KvType::f16);
  // Values one-hot on the position (f16-exact), keys zero: equal scores, so
  // the output is the mean of the values the token sees.
  std::vector<float> zero(8, 0.0f), q(8, 1.0f), out(8);
  for (int32_t p = 0; p < 6; ++p) {
    std::vector<float> v(8, 0.0f);
    v[static_cast<size_t>(p)] = 1;
    kv.store(0, 0, p, zero.data(), v.data());
  }
  Batch b;
  b.add(1, 6, 0, true);
  std::vector<float> v6(8, 0.0f);
  v6[6] = 1;
  cpu::attention_ref(q.data(), zero.data(), v6.data(), out.data(), b, kv, 0, spec);
  for (int d = 0; d < 8; ++d) EXPECT_FLOAT_EQ(out[static_cast<size_t>(d)], d >= 4 && d <= 6 ? 1.0f / 3 : 0.0f) << d;
}

// Per block of kBlock positions and KV head: keys transposed (what the
// kernels read as vectors), values as rows, q8 scales after each; every
// (layer, sequence, position) its own, in a paged cache whose blocks interleave.
TEST(KvCache, BlocksPerHead) {
  ModelSpec spec;
  spec.n_layer = 2;
  spec.n_head = spec.n_head_kv = 3;
  spec.head_dim = spec.rope_dim = 8;
  spec.n_embd = 24;
  constexpr int64_t B = KvCache::kBlock;
  const int64_t n_ctx = 2 * B + 5, kvd = spec.kv_dim(), hd = spec.head_dim;
  // Distinct values, exact in f16 and, per head, in q8 (integers up to 127 with a head's largest 127: scale 1).
  auto item = [&](int64_t layer, int seq, int64_t pos, int64_t i, bool value) {
    const int64_t d = i % hd;
    const float x = d == 0 ? 127.0f : static_cast<float>(((layer * 2 + seq) * n_ctx + pos + 3 * i) % 120);
    return value ? -x : x;
  };
  for (KvType type : {KvType::f16, KvType::q8}) {
    KvCache kv = testutil::interleaved_kv_cache(spec, n_ctx, 2, type);
    for (int64_t layer = 0; layer < 2; ++layer)
      for (int seq = 0; seq < 2; ++seq)
        for (int64_t pos = 0; pos < n_ctx; ++pos) {
          std::vector<float> key(static_cast<size_t>(kvd)), value(key.size());
          for (int64_t i = 0; i < kvd; ++i) {
            key[static_cast<size_t>(i)] = item(layer, seq, pos, i, false);
            value[static_cast<size_t>(i)] = item(layer, seq, pos, i, true);
          }
          kv.store(layer, seq, pos, key.data(), value.data());
        }
    auto element = [&](const uint8_t* blocks, int64_t at) {
      return type == KvType::f16 ? f16_to_f32(reinterpret_cast<const uint16_t*>(blocks)[at])
                                 : static_cast<float>(reinterpret_cast<const int8_t*>(blocks)[at]);
    };
    auto scale = [&](const uint8_t* block, int64_t h, int64_t j) {
      float s;
      std::memcpy(&s, block + kv.scales_offset() + (h * B + j) * 4, 4);
      return s;
    };
    for (int64_t layer = 0; layer < 2; ++layer)
      for (int seq = 0; seq < 2; ++seq)
        for (int64_t pos = 0; pos < n_ctx; ++pos)
          for (int64_t i = 0; i < kvd; ++i) {
            const int64_t block = kv.table(seq)[static_cast<size_t>(pos / B)];
            const uint8_t* kb = kv.key_pool(layer) + block * kv.block_bytes();
            const uint8_t* vb = kv.value_pool(layer) + block * kv.block_bytes();
            ASSERT_EQ(kb, kv.key_block(layer, seq, pos));
            ASSERT_EQ(vb, kv.value_block(layer, seq, pos));
            const int64_t h = i / hd, d = i % hd, j = pos % B;
            ASSERT_EQ(element(kb, (h * hd + d) * B + j), item(layer, seq, pos, i, false)) << kv_type_name(type);
            ASSERT_EQ(element(vb, (h * B + j) * hd + d), item(layer, seq, pos, i, true)) << kv_type_name(type);
            if (type == KvType::q8) {
              ASSERT_EQ(scale(kb, h, j), 1.0f);
              ASSERT_EQ(scale(vb, h, j), 1.0f);
            }
            ASSERT_EQ(kv.key(layer, seq, pos, i), item(layer, seq, pos, i, false));
            ASSERT_EQ(kv.value(layer, seq, pos, i), item(layer, seq, pos, i, true));
          }
    const int64_t block = type == KvType::f16 ? B * kvd * 2 : B * kvd + B * 3 * 4;
    EXPECT_EQ(kv.block_bytes(), block);
    EXPECT_EQ(kv.bytes(), KvCache::bytes(2, 3, 8, n_ctx, 3, type));  // the two and the one left out
    EXPECT_EQ(kv.bytes(), static_cast<size_t>(2 * 2 * 3 * 3 * block));
  }
}

// The paged pool: tables grow block by block, full blocks are shared with a
// reference each, and a block is free again when its last holder lets go.
TEST(KvCache, PagedBlocksAreCountedAndFreed) {
  KvCache kv(one_head_spec(4), 3 * KvCache::kBlock, 2, 4, KvType::f16);
  EXPECT_EQ(kv.free_blocks(), 4);
  EXPECT_EQ(kv.largest_free_run(), 4);
  EXPECT_EQ(kv.capacity(0), 0);
  const float x[4] = {1, 2, 3, 4};
  EXPECT_THROW(kv.store(0, 0, 0, x, x), Error);  // no block yet
  ASSERT_TRUE(kv.grow(0));
  ASSERT_TRUE(kv.grow(0));
  EXPECT_EQ(kv.capacity(0), 2 * KvCache::kBlock);
  EXPECT_NO_THROW(kv.store(0, 0, 2 * KvCache::kBlock - 1, x, x));
  EXPECT_THROW(kv.store(0, 0, 2 * KvCache::kBlock, x, x), Error);
  const int32_t first = kv.table(0)[0];
  kv.share(1, first);  // sequence 1 starts with sequence 0's first block
  EXPECT_EQ(kv.refs(first), 2);
  ASSERT_TRUE(kv.grow(1));
  ASSERT_TRUE(kv.grow(1));
  EXPECT_EQ(kv.free_blocks(), 0);
  EXPECT_FALSE(kv.grow(0));  // none free: nothing changes
  EXPECT_EQ(kv.capacity(0), 2 * KvCache::kBlock);
  kv.release(0);
  EXPECT_EQ(kv.refs(first), 1);  // still sequence 1's
  EXPECT_EQ(kv.free_blocks(), 1);
  EXPECT_EQ(kv.largest_free_run(), 1);
  EXPECT_EQ(kv.key(0, 1, 5, 2), 0.0f);  // never written: zeros
  kv.ref(first);  // a prefix cache keeps it
  kv.release(1);
  EXPECT_EQ(kv.free_blocks(), 3);
  kv.unref(first);
  EXPECT_EQ(kv.free_blocks(), 4);
  EXPECT_THROW(kv.unref(first), Error);
  EXPECT_THROW(kv.ref(first), Error);
  // A table stops at n_ctx positions, however many blocks are free.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(kv.grow(0));
  EXPECT_FALSE(kv.grow(0));
  EXPECT_EQ(kv.free_blocks(), 1);
}

// key_head/value_head read what key()/value() read, element for element.
TEST(KvCache, HeadReadsEqualElementReads) {
  for (KvType type : {KvType::f16, KvType::q8}) {
    const Case c{72, 3, 2, {130}, {1}};
    const ModelSpec spec = spec_of(c);
    KvCache kv = testutil::interleaved_kv_cache(spec, n_ctx_of(c), 1, type);
    fill_cache(kv, c);
    std::vector<float> key(72), value(72);
    for (int64_t layer : {0, 1})
      for (int64_t p : {0, 63, 64, 129})
        for (int64_t h = 0; h < c.n_kv; ++h) {
          kv.key_head(layer, 0, p, h, key.data());
          kv.value_head(layer, 0, p, h, value.data());
          for (int64_t d = 0; d < 72; ++d) {
            ASSERT_EQ(key[d], kv.key(layer, 0, p, h * 72 + d)) << kv_type_name(type) << " " << p << " " << h << " " << d;
            ASSERT_EQ(value[d], kv.value(layer, 0, p, h * 72 + d)) << kv_type_name(type) << " " << p << " " << h << " " << d;
          }
        }
  }
}

// q8: scale max|x| / 127, each element x * (127 / max|x|) rounded to nearest
// even, so the largest is +-127 and every error at most half a step.
TEST(KvCache, Q8Rounding) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 5);
  for (int64_t n : {1, 7, 64, 128, 256}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng);
    std::vector<int8_t> q(x.size());
    const float d = quantize_kv_q8(x.data(), n, q.data());
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(d, amax / 127);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(q[i], static_cast<int8_t>(std::nearbyint(x[i] * (127 / amax))));
      EXPECT_LE(std::fabs(x[i] - d * q[i]), 0.5f * d * 1.0001f);
      if (std::fabs(x[i]) == amax) {
        EXPECT_EQ(std::abs(q[i]), 127);
      }
    }
  }
  // Ties go to even: 0.5 and 1.5 steps (max 127, so the step is 1).
  const float x[] = {0.5f, 1.5f, -2.5f, 127.0f};
  int8_t q[4];
  EXPECT_EQ(quantize_kv_q8(x, 4, q), 1.0f);
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[1], 2);
  EXPECT_EQ(q[2], -2);
  // All zeros: scale 0, zeros; an infinity or a NaN stays in range (no undefined conversion).
  const float zeros[3] = {};
  EXPECT_EQ(quantize_kv_q8(zeros, 3, q), 0.0f);
  EXPECT_EQ(q[0] | q[1] | q[2], 0);
  const float bad[3] = {NAN, 1.0f, INFINITY};
  quantize_kv_q8(bad, 3, q);
  for (int8_t v : {q[0], q[1], q[2]}) EXPECT_LE(std::abs(v), 127);
  // A stride: keys are stored transposed.
  int8_t strided[8] = {};
  quantize_kv_q8(x, 4, strided, 2);
  EXPECT_EQ(strided[2], 2);
  EXPECT_EQ(strided[6], 127);
}

}  // namespace
}  // namespace basalt
