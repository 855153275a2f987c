// SPDX-License-Identifier: MIT
// Every attention variant (ISA) against the scalar reference attention_ref:
// head sizes, GQA ratios, batches of 1 to 17 tokens, up to 4100 positions of
// context, two sequences in one batch, chunked prefill; and the vector exp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/util/threads.h"
#include "cpu/attention.h"
#include "cpu/ops.h"
#include "quant/half.h"

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

  std::string name() const {
    std::string s = "head_dim " + std::to_string(head_dim) + " kv heads " + std::to_string(n_kv) + " ratio " +
                    std::to_string(ratio);
    for (size_t i = 0; i < ctx.size(); ++i)
      s += " | seq " + std::to_string(i) + ": " + std::to_string(n_tok[i]) + " tokens after " + std::to_string(ctx[i]);
    return s + (interleave ? " interleaved" : "") + " q x" + std::to_string(q_scale);
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
};

ModelSpec spec_of(const Case& c) {
  ModelSpec s;
  s.n_layer = 2;
  s.n_head_kv = c.n_kv;
  s.n_head = c.n_kv * c.ratio;
  s.head_dim = c.head_dim;
  s.n_embd = s.n_head * s.head_dim;
  return s;
}

// The cache's context already there: the same random values for every run.
void fill_cache(KvCache& kv, const Case& c) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  for (int64_t layer = 0; layer < 2; ++layer)
    for (size_t s = 0; s < c.ctx.size(); ++s)
      for (int32_t p = 0; p < c.ctx[s]; ++p) {
        std::vector<uint16_t> key(static_cast<size_t>(kv.kv_dim())), value(key.size());
        for (int64_t i = 0; i < kv.kv_dim(); ++i) {
          key[static_cast<size_t>(i)] = f32_to_f16(nd(rng));
          value[static_cast<size_t>(i)] = f32_to_f16(nd(rng));
        }
        kv.set(layer, static_cast<int>(s), p, key.data(), value.data());
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

// Runs one variant (nullptr: the reference) on a fresh cache; returns the output, and the cache.
std::vector<float> run(const Case& c, const Isa* isa, std::vector<uint16_t>* cache_out = nullptr) {
  const ModelSpec spec = spec_of(c);
  KvCache kv(spec, n_ctx_of(c), static_cast<int>(c.ctx.size()));
  fill_cache(kv, c);
  Inputs in = make_inputs(c, spec);
  std::vector<float> out(in.q.size(), NAN);
  if (isa) cpu::attention(in.q.data(), in.k.data(), in.v.data(), out.data(), in.batch, kv, 1, spec, *isa);
  else cpu::attention_ref(in.q.data(), in.k.data(), in.v.data(), out.data(), in.batch, kv, 1, spec);
  if (cache_out) {
    cache_out->clear();
    for (int s = 0; s < kv.n_seq(); ++s)
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

std::vector<Isa> vector_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (!cpu_supports(isa)) std::printf("[ note ] %s attention not tested: this CPU lacks it\n", isa_name(isa));
    else if (!cpu::find_attention_kernels(isa))
      std::printf("[ note ] no %s attention kernels in this build\n", isa_name(isa));
    else isas.push_back(isa);
  }
  return isas;
}

TEST(Attention, EveryVariantMatchesReference) {
  const std::vector<Isa> isas = vector_isas();
  double worst = 0;
  for (const Case& c : kCases) {
    std::vector<uint16_t> ref_cache, cache;
    const std::vector<float> ref = run(c, nullptr, &ref_cache);
    ASSERT_TRUE(all_finite(ref)) << c.name();
    const Isa scalar = Isa::scalar;
    EXPECT_TRUE(run(c, &scalar) == ref) << "BASALT_ISA=scalar runs the reference: " << c.name();
    for (Isa isa : isas) {
      const std::vector<float> got = run(c, &isa, &cache);
      EXPECT_TRUE(all_finite(got)) << isa_name(isa) << " " << c.name();
      const double e = nmse(got, ref);
      worst = std::max(worst, e);
      EXPECT_LE(e, kMaxNmse) << isa_name(isa) << " " << c.name();
      EXPECT_TRUE(cache == ref_cache) << isa_name(isa) << " stored other K/V bits: " << c.name();
    }
  }
  std::printf("[ info ] worst NMSE against the reference: %.3g (bound %.0e)\n", worst, kMaxNmse);
}

// One thread: no key range is split, so the pieces' merge is the trivial one.
TEST(Attention, OneThreadMatchesReference) {
  const int threads = thread_count();
  set_thread_count(1);
  const Case cases[] = {{64, 3, 3, {4099}, {1}}, {128, 1, 8, {4083}, {17}}, {64, 2, 3, {0, 0}, {5, 3}, true}};
  for (const Case& c : cases) {
    const std::vector<float> ref = run(c, nullptr);
    for (Isa isa : vector_isas()) EXPECT_LE(nmse(run(c, &isa), ref), kMaxNmse) << isa_name(isa) << " " << c.name();
  }
  set_thread_count(threads);
}

// A prompt prefilled in chunks gives the same outputs as in one batch.
TEST(Attention, ChunkedPrefillEqualsOneBatch) {
  const Case c{64, 3, 3, {0}, {17}};
  const ModelSpec spec = spec_of(c);
  const Inputs in = make_inputs(c, spec);
  const int64_t n = in.batch.size(), qd = spec.q_dim(), kvd = spec.kv_dim();
  std::vector<Isa> isas = vector_isas();
  isas.push_back(Isa::scalar);
  for (Isa isa : isas) {
    KvCache whole_kv(spec, n, 1), chunk_kv(spec, n, 1);
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
    EXPECT_LE(nmse(chunked, whole), 1e-12) << isa_name(isa);
  }
}

TEST(Attention, VectorExp) {
  for (Isa isa : vector_isas()) {
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

// Per block of kBlock positions and KV head: keys transposed (what the
// kernels read as vectors), values as rows; every (layer, sequence, position)
// its own.
TEST(KvCache, BlocksPerHead) {
  ModelSpec spec;
  spec.n_layer = 2;
  spec.n_head = spec.n_head_kv = 3;
  spec.head_dim = spec.rope_dim = 8;
  spec.n_embd = 24;
  constexpr int64_t B = KvCache::kBlock;
  const int64_t n_ctx = 2 * B + 5, kvd = spec.kv_dim(), hd = spec.head_dim;
  KvCache kv(spec, n_ctx, 2);
  auto item = [&](int64_t layer, int seq, int64_t pos, int64_t i) {
    return static_cast<uint16_t>(((layer * 2 + seq) * n_ctx + pos) * kvd + i);
  };
  for (int64_t layer = 0; layer < 2; ++layer)
    for (int seq = 0; seq < 2; ++seq)
      for (int64_t pos = 0; pos < n_ctx; ++pos) {
        std::vector<uint16_t> key(static_cast<size_t>(kvd)), value(key.size());
        for (int64_t i = 0; i < kvd; ++i) {
          key[static_cast<size_t>(i)] = item(layer, seq, pos, i);
          value[static_cast<size_t>(i)] = static_cast<uint16_t>(~item(layer, seq, pos, i));
        }
        kv.set(layer, seq, pos, key.data(), value.data());
      }
  for (int64_t layer = 0; layer < 2; ++layer)
    for (int seq = 0; seq < 2; ++seq)
      for (int64_t pos = 0; pos < n_ctx; ++pos)
        for (int64_t i = 0; i < kvd; ++i) {
          const int64_t at = pos / B * kv.block_stride(), h = i / hd, d = i % hd;
          ASSERT_EQ(kv.key_blocks(layer, seq)[at + (h * hd + d) * B + pos % B], item(layer, seq, pos, i));
          ASSERT_EQ(kv.value_blocks(layer, seq)[at + (h * B + pos % B) * hd + d], static_cast<uint16_t>(~item(layer, seq, pos, i)));
          ASSERT_EQ(kv.key(layer, seq, pos, i), item(layer, seq, pos, i));
          ASSERT_EQ(kv.value(layer, seq, pos, i), static_cast<uint16_t>(~item(layer, seq, pos, i)));
        }
  EXPECT_EQ(kv.bytes(), KvCache::bytes(2, n_ctx, kvd, 2));
  EXPECT_EQ(kv.bytes(), static_cast<size_t>(2 * 2 * 2 * 3 * B * kvd * 2));
}

}  // namespace
}  // namespace basalt
