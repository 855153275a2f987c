// SPDX-License-Identifier: MIT
// Every attention variant (ISA) against the scalar reference attention_ref,
// on an f16, a q8 and a q4 cache: head sizes, GQA ratios, batches of 1 to 17
// tokens, up to 4100 positions of context, two sequences in one batch,
// chunked prefill; the vector exp; the cache's layout and its roundings.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/util/threads.h"
#include "cpu/attention.h"
#include "cpu/ops.h"
#include "core/graph/kv_rotation.h"
#include "core/util/half.h"
#include "tests/unit/isa_testing.h"
#include "tests/unit/paged_kv.h"

namespace basalt {
namespace {

// Outputs differ from the reference by summation order, f32 scratch and the
// vector exp (relative error ~2e-7): NMSE ~1e-13 in practice.
constexpr double kMaxNmse = 1e-10;
// Where the f16 cache's dots run in bf16 (cpu/attention.h), q, k, v and the
// softmax weights are rounded to 8 significant bits: measured NMSE <= 1.6e-5
// for scores of order 1 and 6.3e-4 for a sharp softmax (q x8), about the q8
// cache's loss (the q4 cache's, q x steps and P x scales rounded: 1.5e-4
// sharp); a wrong pairing or a dropped key gives ~1.
constexpr double kMaxNmseBf16 = 1e-4, kMaxNmseBf16Sharp = 2e-3;
// Where the q8 keys' scores are int8 dots, the query is rounded to int8 per
// row: measured NMSE <= 5.9e-5 for scores of order 1 and 6.9e-4 sharp.
constexpr double kMaxNmseInt8Query = 2e-4, kMaxNmseInt8QuerySharp = 2e-3;
// Where P V is in integers, the softmax weights times the values' scales are
// rounded to 15 bits per block (int_p, cpu/attention.h): measured NMSE <= 2.7e-9
// (the q4 cache on AMX, sharp cases included).
constexpr double kMaxNmseIntP = 3e-8;

struct Case {
  int64_t head_dim, n_kv, ratio;
  std::vector<int32_t> ctx;    // per sequence: positions already in the cache
  std::vector<int32_t> n_tok;  // per sequence: tokens of the batch, at positions ctx, ctx + 1, ...
  bool interleave = false;     // the sequences' tokens alternate in the batch (else one after the other)
  float q_scale = 1;           // larger: sharper softmax, scores of tens
  float key_growth = 0;        // cached key p times 1 + key_growth * p / 1000: the rows' max jumps in late blocks
  int64_t window = 0;          // a sliding window: each token sees its last `window` positions (0: all)
  int64_t sinks = 0;           // with a window: the first `sinks` positions too
  float softcap = 0;           // scores soft-capped: cap tanh(s / cap) (Gemma 2)

  std::string name() const {
    std::string s = "head_dim " + std::to_string(head_dim) + " kv heads " + std::to_string(n_kv) + " ratio " +
                    std::to_string(ratio);
    for (size_t i = 0; i < ctx.size(); ++i)
      s += " | seq " + std::to_string(i) + ": " + std::to_string(n_tok[i]) + " tokens after " + std::to_string(ctx[i]);
    if (window) s += " | window " + std::to_string(window);
    if (sinks) s += " | sinks " + std::to_string(sinks);
    if (softcap) s += " | softcap " + std::to_string(softcap);
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
    {96, 2, 4, {150}, {5}},   // three groups of 32 dims: the q4 values' rotation in blocks of 32
    {160, 1, 2, {40}, {33}},  // five: the generic kernel on both ISAs
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
    {64, 1, 2, {500}, {40}, false, 1.0f, 0.0f, 20},  // a ringed cache: a chunk longer than the window, across its wrap
    // Attention sinks: in the window's block or a piece of their own, more than a block of them, rings.
    {64, 2, 3, {300}, {1}, false, 1.0f, 0.0f, 64, 4},
    {64, 2, 3, {100}, {40}, false, 1.0f, 0.0f, 50, 70},
    {128, 1, 4, {4083}, {17}, false, 1.0f, 0.0f, 512, 4},
    {64, 1, 2, {500}, {40}, false, 1.0f, 0.0f, 20, 3},
    {64, 2, 3, {2000}, {1}, false, 4.0f, 0.0f, 100, 1},  // a decode split across threads, a sharp softmax
    // Soft-capped scores of tens (Gemma 2): a prefill, a split decode, a window.
    {64, 2, 3, {100}, {17}, false, 4.0f, 0.0f, 0, 0, 5.0f},
    {128, 2, 4, {2000}, {1}, false, 4.0f, 0.0f, 0, 0, 3.0f},
    {64, 2, 3, {100}, {40}, false, 4.0f, 0.0f, 50, 0, 5.0f},
};

ModelSpec spec_of(const Case& c) {
  ModelSpec s;
  s.n_layer = 2;
  s.n_head_kv = c.n_kv;
  s.n_head = c.n_kv * c.ratio;
  s.head_dim = c.head_dim;
  s.n_embd = s.n_head * s.head_dim;
  s.sliding_window = c.window;  // every layer (swa_period 0)
  s.attention_sinks = c.sinks;
  s.attn_softcap = c.softcap;
  return s;
}

// The values of a case's context, drawn once for all the runs in a row that
// store them (each ISA and cache type stores the same): drawing them is most
// of these tests' time under ASan.
struct DrawnContext {
  std::vector<int32_t> ctx;
  float key_growth = 0;
  size_t kvd = 0;
  std::vector<std::vector<float>> keys[2], values[2];  // [layer][seq]: drawn layer by layer
};

const DrawnContext& drawn_context(const Case& c, size_t kvd) {
  static DrawnContext last;  // the last case's (gtest runs one test at a time)
  if (last.kvd == kvd && last.ctx == c.ctx && last.key_growth == c.key_growth) return last;
  last = DrawnContext{c.ctx, c.key_growth, kvd, {}, {}};
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  for (int64_t layer = 0; layer < 2; ++layer)
    for (size_t s = 0; s < c.ctx.size(); ++s) {
      std::vector<float>& k = last.keys[layer].emplace_back(c.ctx[s] * kvd);
      std::vector<float>& v = last.values[layer].emplace_back(k.size());
      for (int32_t p = 0; p < c.ctx[s]; ++p) {
        for (size_t i = 0; i < kvd; ++i) k[p * kvd + i] = nd(rng) * (1 + c.key_growth * static_cast<float>(p) / 1000);
        for (size_t i = 0; i < kvd; ++i) v[p * kvd + i] = nd(rng);
      }
    }
  return last;
}

// The cache's context already there: the same random values for every run.
void fill_cache(KvCache& kv, const Case& c) {
  const auto kvd = static_cast<size_t>(kv.kv_dim());
  const DrawnContext& drawn = drawn_context(c, kvd);
  const auto& keys = drawn.keys;
  const auto& values = drawn.values;
  for (size_t s = 0; s < c.ctx.size(); ++s)  // stored position by position: a ring holds each in turn
    for (int32_t p = 0; p < c.ctx[s]; ++p) {
      ASSERT_TRUE(kv.hold_window(static_cast<int>(s), p, p + 1));
      for (int64_t layer = 0; layer < 2; ++layer)
        kv.store(layer, static_cast<int>(s), p, keys[layer][s].data() + p * kvd, values[layer][s].data() + p * kvd);
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

constexpr KvType kKvTypes[] = {KvType::f16, KvType::q8, KvType::q4, KvType::k8v4};
// q4 values need head_dim a multiple of 32: the other cases are left out for q4 and k8v4.
bool cacheable(const Case& c, KvType type) { return kv_type_unsupported(type, c.head_dim).empty(); }

// The most tokens of one sequence in a case's batch: what a ringed cache is made for.
int64_t run_tokens_of(const Case& c) { return *std::max_element(c.n_tok.begin(), c.n_tok.end()); }

// A cache for the case whose windowed layers keep rings (kv_cache.h).
KvCache ringed_kv_cache(const Case& c, KvType type) {
  return KvCache(spec_of(c), n_ctx_of(c), static_cast<int>(c.ctx.size()), type, run_tokens_of(c));
}

// Runs one variant (nullptr: the reference) on a fresh cache, paged with
// interleaved blocks (or, `ringed`, with rings); returns the output, and the
// cache. `poisoned`: the tested layer's pools all 0xFF bytes before the cache
// is filled (NaN in every f16 and f32 slot never written, codes 15), as a
// reused block may hold anything, Inf and NaN scales included.
std::vector<float> run(const Case& c, const Isa* isa, KvType type, std::vector<float>* cache_out = nullptr,
                       bool ringed = false, bool poisoned = false) {
  const ModelSpec spec = spec_of(c);
  KvCache kv = ringed ? ringed_kv_cache(c, type) : testutil::interleaved_kv_cache(spec, n_ctx_of(c), static_cast<int>(c.ctx.size()), type);
  if (poisoned)
    for (int side = 0; side < 2; ++side)
      std::memset(const_cast<uint8_t*>(side ? kv.value_pool(1) : kv.key_pool(1)), 0xFF,
                  static_cast<size_t>(kv.layer_blocks(1) * kv.block_bytes(side)));
  fill_cache(kv, c);
  Inputs in = make_inputs(c, spec);
  std::vector<float> out(in.q.size(), NAN);
  EXPECT_TRUE(kv.hold_windows(in.batch));
  if (isa) cpu::attention(in.q.data(), in.k.data(), in.v.data(), out.data(), in.batch, kv, 1, spec, *isa);
  else cpu::attention_ref(in.q.data(), in.k.data(), in.v.data(), out.data(), in.batch, kv, 1, spec);
  if (cache_out) {  // a head at a time: a q4 value alone costs its head's un-rotation
    cache_out->clear();
    std::vector<float> head(static_cast<size_t>(spec.head_dim));
    for (int s = 0; s < static_cast<int>(c.ctx.size()); ++s)
      for (int64_t p = 0; p < c.ctx[static_cast<size_t>(s)] + c.n_tok[static_cast<size_t>(s)]; ++p)  // those written
        for (int64_t h = 0; h < spec.n_head_kv; ++h) {
          kv.key_head(1, s, p, h, head.data());
          cache_out->insert(cache_out->end(), head.begin(), head.end());
          kv.value_head(1, s, p, h, head.data());
          cache_out->insert(cache_out->end(), head.begin(), head.end());
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

// The NMSE a variant stays within against the reference: what its dot products round (cpu/attention.h).
double bound_of(const Case& c, KvType type, Isa isa) {
  const bool sharp = c.q_scale > 1;
  switch (cpu::attention_dots(isa, type, c.head_dim)) {
    case cpu::AttentionDots::bf16: return sharp ? kMaxNmseBf16Sharp : kMaxNmseBf16;
    case cpu::AttentionDots::int8_query:
    case cpu::AttentionDots::int8_query_bf16_p:
    case cpu::AttentionDots::int8_query_int_p: return sharp ? kMaxNmseInt8QuerySharp : kMaxNmseInt8Query;
    case cpu::AttentionDots::int_p: return kMaxNmseIntP;
    case cpu::AttentionDots::f32: break;
  }
  return kMaxNmse;
}

// Every case and cache type with isa's kernels against the reference: within
// bound_of, storing the same K and V. Returns the worst NMSE of each cache
// type, in kKvTypes' order: above what f32 gives where the kernels round
// more, or they did not.
std::vector<double> expect_matches_reference(Isa isa) {
  std::vector<double> worst_of(std::size(kKvTypes), 0.0);
  for (const Case& c : kCases)  // case by case: its context drawn once for every cache type
    for (size_t t = 0; t < std::size(kKvTypes); ++t) {
      const KvType type = kKvTypes[t];
      if (!cacheable(c, type)) continue;
      // Under ASan, prefill past 1100 positions: the paths of the shorter cases, at a minute of reference.
      if (testutil::kSanitized && n_ctx_of(c) > 1100 && run_tokens_of(c) > 1) continue;
      const std::string name = c.name() + " kv " + kv_type_name(type);
      std::vector<float> ref_cache, cache;
      const std::vector<float> ref = run(c, nullptr, type, &ref_cache);
      EXPECT_TRUE(all_finite(ref)) << name;
      const std::vector<float> got = run(c, &isa, type, &cache);
      EXPECT_TRUE(all_finite(got)) << isa_name(isa) << " " << name;
      const double e = nmse(got, ref);
      worst_of[t] = std::max(worst_of[t], e);
      EXPECT_LE(e, bound_of(c, type, isa)) << isa_name(isa) << " " << name;
      EXPECT_TRUE(cache == ref_cache) << isa_name(isa) << " stored other K/V: " << name;
    }
  for (size_t t = 0; t < std::size(kKvTypes); ++t) {
    const KvType type = kKvTypes[t];
    const cpu::AttentionDots dots = cpu::attention_dots(isa, type, 64);
    std::printf("[ info ] %s%s, kv %s: worst NMSE against the reference: %.3g\n", isa_name(isa),
                dots == cpu::AttentionDots::bf16                ? " (bf16 dots)"
                : dots == cpu::AttentionDots::int8_query        ? " (int8 dots)"
                : dots == cpu::AttentionDots::int8_query_bf16_p ? " (int8 dots, bf16 P V)"
                : dots == cpu::AttentionDots::int8_query_int_p  ? " (int8 dots, integer P V)"
                : dots == cpu::AttentionDots::int_p             ? " (integer P V)"
                                                                : "",
                kv_type_name(type), worst_of[t]);
    if (dots != cpu::AttentionDots::f32) {  // (15-bit weights round less than the others)
      EXPECT_GT(worst_of[t], dots == cpu::AttentionDots::int_p ? kMaxNmse : 1e-8)
          << kv_type_name(type) << ": exact, so its dots did not round";
    }
  }
  return worst_of;
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
#if defined(__aarch64__)
INSTANTIATE_TEST_SUITE_P(, AttentionIsa, ::testing::Values(Isa::neon), testutil::isa_test_name);
#else
INSTANTIATE_TEST_SUITE_P(, AttentionIsa, ::testing::Values(Isa::avx2, Isa::avx512, Isa::amx), testutil::isa_test_name);
#endif

TEST(Attention, ScalarRunsTheReference) {
  const Isa scalar = Isa::scalar;
  for (const Case& c : kCases)
    for (KvType type : kKvTypes) {
      if (cacheable(c, type) && n_ctx_of(c) < 1100) {  // the same code path: the long cases add only time
        EXPECT_TRUE(run(c, &scalar, type) == run(c, nullptr, type)) << c.name();
      }
    }
}

TEST_P(AttentionIsa, MatchesReference) { expect_matches_reference(GetParam()); }

// Sets whether the f16 cache's dots run in bf16, for one scope; then back to the default.
class Bf16Dots {
 public:
  explicit Bf16Dots(bool on) { cpu::set_attention_bf16_dots(on); }
  ~Bf16Dots() { cpu::reset_attention_bf16_dots(); }
};

// Where the CPU has bf16 dot products, the AVX-512 kernels the other way
// than MatchesReference ran them (on by default on AMD, off on Intel): with
// them the f16 and q4 caches' error is bf16's (above what f32 gives, or they
// did not run), without them the f32 kernels' exactness.
TEST(Attention, Bf16DotsAndF32KernelsBothMatch) {
  NEED_ISA(Isa::avx512);
  if (!cpu_has_avx512_bf16()) {
    if (testutil::name_required("avx512bf16")) FAIL() << "BASALT_REQUIRE_ISA names avx512bf16, but this CPU lacks it";
    GTEST_SKIP() << "this CPU lacks AVX512_BF16: MatchesReference/avx512 ran the f32 kernels";
  }
  Bf16Dots flip(!cpu::attention_bf16_dots());
  const std::vector<double> worst = expect_matches_reference(Isa::avx512);  // kKvTypes' order
  if (!cpu::attention_bf16_dots()) {
    EXPECT_LT(worst[0], kMaxNmse);  // f16
    EXPECT_LT(worst[2], kMaxNmse);  // q4 (q8's keys keep their int8 dots)
  }
}

// On AMX CPUs the f16 cache's attention runs on bf16 tiles (the q8 cache's on int8 ones) unless
// BASALT_ATTENTION_BF16 says otherwise: rounded as the bf16 dots (within
// their bound, above f32's: MatchesReference/amx), and back to the f32
// kernels' exactness when they are turned off.
TEST(Attention, AmxTilesUnlessTurnedOff) {
  NEED_ISA(Isa::amx);
  if (std::getenv("BASALT_ATTENTION_BF16")) GTEST_SKIP() << "BASALT_ATTENTION_BF16 is set: the default is not in use";
  EXPECT_TRUE(cpu::attention_amx_tiles(Isa::amx));
  EXPECT_FALSE(cpu::attention_amx_tiles(Isa::avx512));
  EXPECT_EQ(cpu::AttentionDots::bf16, cpu::attention_dots(Isa::amx, KvType::f16, 64));
  EXPECT_EQ(cpu::AttentionDots::f32, cpu::attention_dots(Isa::amx, KvType::f16, 40));  // not whole tiles
  EXPECT_EQ(cpu::AttentionDots::int8_query_int_p, cpu::attention_dots(Isa::amx, KvType::q8, 64));
  EXPECT_EQ(cpu::AttentionDots::int8_query, cpu::attention_dots(Isa::amx, KvType::q8, 96));  // not amx_int8_head
  EXPECT_EQ(cpu::AttentionDots::int8_query_int_p, cpu::attention_dots(Isa::amx, KvType::k8v4, 64));
  EXPECT_EQ(cpu::AttentionDots::int_p, cpu::attention_dots(Isa::amx, KvType::q4, 128));
  Bf16Dots off(false);
  EXPECT_FALSE(cpu::attention_amx_tiles(Isa::amx));
  EXPECT_EQ(cpu::AttentionDots::int8_query, cpu::attention_dots(Isa::amx, KvType::q8, 64));
  EXPECT_LT(expect_matches_reference(Isa::amx)[0], kMaxNmse);  // f16
}

// AVX2 (and AVX-VNNI, which shares its kernels) takes the caches with q8 keys
// in AMX's integers where heads are whole groups of 32 dims, the f16 and q4
// caches in f32 (what MatchesReference/avx2 holds them to). Elsewhere only f32.
TEST(Attention, Avx2IntegersForTheQuantizedCaches) {
#if !defined(BASALT_X86)
  GTEST_SKIP() << "x86 kernels only";
#endif
  for (Isa isa : {Isa::avx2, Isa::avxvnni}) {
    EXPECT_EQ(cpu::AttentionDots::f32, cpu::attention_dots(isa, KvType::f16, 64));
    EXPECT_EQ(cpu::AttentionDots::int8_query_int_p, cpu::attention_dots(isa, KvType::q8, 64));
    EXPECT_EQ(cpu::AttentionDots::int8_query_int_p, cpu::attention_dots(isa, KvType::k8v4, 128));
    EXPECT_EQ(cpu::AttentionDots::f32, cpu::attention_dots(isa, KvType::q4, 96));
    EXPECT_EQ(cpu::AttentionDots::f32, cpu::attention_dots(isa, KvType::q8, 80));  // not whole groups of 32
  }
  EXPECT_EQ(cpu::AttentionDots::f32, cpu::attention_dots(Isa::scalar, KvType::q8, 64));
}

// The default follows the CPU as Linux reports it (/proc/cpuinfo): bf16 dots
// where it has AVX512_BF16 and AVX-512 and is AMD's (cpu/attention.h).
TEST(Attention, Bf16DotsByDefaultWhereTheyAreFaster) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "x86 only (under an emulator /proc/cpuinfo is the host's)";
#endif
  if (std::getenv("BASALT_ATTENTION_BF16")) GTEST_SKIP() << "BASALT_ATTENTION_BF16 is set: the default is not in use";
  std::ifstream in("/proc/cpuinfo");
  std::string line, vendor, flags;
  while (std::getline(in, line) && (vendor.empty() || flags.empty())) {
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 1);
    if (line.rfind("flags", 0) == 0) flags = line.substr(line.find(':') + 1) + " ";
  }
  if (flags.empty()) GTEST_SKIP() << "no x86 flags in /proc/cpuinfo";
  const bool amd = vendor.find("AuthenticAMD") != std::string::npos;
  EXPECT_EQ(cpu_is_amd(), amd) << vendor;
  EXPECT_EQ(cpu_has_avx512_bf16(), cpu_supports(Isa::avx512) && flags.find(" avx512_bf16 ") != std::string::npos);
  EXPECT_EQ(cpu::attention_bf16_dots(), cpu_has_avx512_bf16() && amd);
}

// Rings: windowed layers' keys and values in a ring of blocks per sequence,
// overwritten as the context passes, give the whole cache's output bit for
// bit (the kernels read the same positions in the same order, wrapped around).
TEST_P(AttentionIsa, RingsGiveTheWholeCachesOutput) {
  const Isa isa = GetParam();
  int ringed = 0;
  for (const Case& c : kCases)  // case by case: its context drawn once (drawn_context)
    for (KvType type : kKvTypes) {
      if (c.window == 0 || !cacheable(c, type)) continue;
      ringed += ringed_kv_cache(c, type).ring_blocks() > 0;
      for (const Isa* variant : {static_cast<const Isa*>(nullptr), &isa}) {
        if (!variant && testutil::kSanitized && n_ctx_of(c) > 1100) continue;  // ASan: the long reference, a minute
        EXPECT_TRUE(run(c, variant, type, nullptr, true) == run(c, variant, type))
            << (variant ? isa_name(isa) : "reference") << " " << c.name() << " kv " << kv_type_name(type);
      }
    }
  EXPECT_EQ(ringed, 9 + 9 + 8 + 8);  // nine windowed cases wrap rings (eight with q4's head_dim)
}

// What the cache's blocks hold past the positions written is never used: a
// pool of NaNs (and codes 15) there gives the same output, bit for bit. On
// AVX-512 with bf16 dots, both ways (Bf16Dots).
TEST_P(AttentionIsa, UnwrittenSlotsAreNeverUsed) {
  const Isa isa = GetParam();
  const bool both = isa == Isa::avx512 && cpu_has_avx512_bf16();
  for (bool bf16 : {false, true}) {
    if (bf16 && !both) break;
    Bf16Dots dots(both ? bf16 : cpu::attention_bf16_dots());
    for (const Case& c : kCases)
      for (KvType type : kKvTypes) {
        if (!cacheable(c, type) || n_ctx_of(c) >= 1100) continue;  // the long cases add only time
        const std::vector<float> clean = run(c, &isa, type), poisoned = run(c, &isa, type, nullptr, false, true);
        EXPECT_TRUE(all_finite(poisoned) && poisoned == clean)
            << isa_name(isa) << (cpu::attention_bf16_dots() ? " (bf16 dots) " : " ") << c.name() << " kv " << kv_type_name(type);
      }
  }
}

// The q8 cache against the f16 one, through the reference: int8 with a scale
// per (position, KV head) keeps attention's output within NMSE 1e-4 of f16's
// for scores of order 1, 2e-3 for a sharp softmax (scores of tens, where a
// key's rounding error dq moves its weight by e^(q.dq)): measured 1.03e-4 and
// 8.5e-4 with the keys rotated (<1e-4 and 5.6e-4 before: Gaussian keys stay
// Gaussian rotated, so that is the draw of roundings, not a loss; keys with
// large channels gain: Q8KeysAreStoredRotated). A wrong scale or layout gives ~1.
TEST(Attention, Q8CacheStaysCloseToF16) {
  double worst = 0;
  for (const Case& c : kCases) {
    const double e = nmse(run(c, nullptr, KvType::q8), run(c, nullptr, KvType::f16));
    worst = std::max(worst, e);
    EXPECT_LE(e, c.q_scale > 1 ? 2e-3 : 2e-4) << c.name();
  }
  std::printf("[ info ] q8 cache: worst NMSE against f16: %.3g\n", worst);
}

// The q4 cache against the f16 one, the same way: 4 bits lose about 256
// times what q8 loses (16 times the step): measured 1.4e-2 for scores of
// order 1 (bound 2e-2), where a wrong scale, nibble or group gives ~1; 0.11
// where scores are tens and growing (bound 0.5: there a step of a key moves
// its weight by e^(q.dq), the reason for --kv-type q8).
TEST(Attention, Q4CacheStaysCloseToF16) {
  double worst = 0, worst_sharp = 0;
  for (const Case& c : kCases) {
    if (!cacheable(c, KvType::q4)) continue;
    const double e = nmse(run(c, nullptr, KvType::q4), run(c, nullptr, KvType::f16));
    (c.q_scale > 1 ? worst_sharp : worst) = std::max(c.q_scale > 1 ? worst_sharp : worst, e);
    EXPECT_LE(e, c.q_scale > 1 ? 0.5 : 2e-2) << c.name();
  }
  std::printf("[ info ] q4 cache: worst NMSE against f16: %.3g (scores of order 1), %.3g (sharp)\n", worst, worst_sharp);
}

// The cases on `threads` threads, with isa's kernels and either cache type, against the reference.
void expect_match_on_threads(Isa isa, int threads, const std::vector<Case>& cases) {
  const int before = thread_count();
  set_thread_count(threads);
  for (const Case& c : cases)
    for (KvType type : kKvTypes) {
      if (!cacheable(c, type)) continue;
      const std::vector<float> ref = run(c, nullptr, type);
      EXPECT_LE(nmse(run(c, &isa, type), ref), bound_of(c, type, isa))
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

// A prefill in chunks gives what one batch gives (q4 keys: see below).
TEST_P(AttentionIsa, ChunkedPrefillEqualsOneBatch) {
  const Case c{64, 3, 3, {0}, {17}};
  const ModelSpec spec = spec_of(c);
  const Inputs in = make_inputs(c, spec);
  const int64_t n = in.batch.size(), qd = spec.q_dim(), kvd = spec.kv_dim();
  for (Isa isa : {Isa::scalar, GetParam()})
    for (KvType type : kKvTypes) {
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
    if (kv_side_type(type, 0) != KvType::q4) {
      EXPECT_LE(nmse(chunked, whole), 1e-12) << isa_name(isa) << " " << kv_type_name(type);
      continue;
    }
    // q4 keys: an early chunk's queries saw their key group rounded over the
    // positions it held then; the last chunk's, and the caches, are the same.
    const auto rows = [&](const std::vector<float>& o, int64_t t0) { return std::vector<float>(o.begin() + t0 * qd, o.end()); };
    EXPECT_LE(nmse(rows(chunked, 11), rows(whole, 11)), 1e-12) << isa_name(isa) << " " << kv_type_name(type);
    EXPECT_LE(nmse(chunked, whole), 2e-2) << isa_name(isa) << " " << kv_type_name(type);
    EXPECT_EQ(std::memcmp(chunk_kv.key_pool(0), whole_kv.key_pool(0), static_cast<size_t>(chunk_kv.block_bytes(0))), 0);
  }
}

// The softmax's exp within 1e-6; its exp for weights that go to bf16 next
// (the AMX tiles' P; the same exp on other ISAs) within 1e-5, 200 times under
// bf16's half step.
TEST_P(AttentionIsa, VectorExp) {
  const Isa isa = GetParam();
  const cpu::AttentionKernels* k = cpu::find_attention_kernels(isa);
  std::vector<float> x;
  for (double v = -110; v <= 88; v += 0.000731) x.push_back(static_cast<float>(v));
  for (float v : {0.0f, -0.0f, -1e-30f, 1e-30f, -INFINITY, NAN, -87.3f, 88.0f}) x.push_back(v);
  using Exp = void (*)(const float*, float*, int64_t);
  for (auto [exp, bound, name] : {std::tuple<Exp, double, const char*>{k->exp, 1e-6, "exp"}, {k->exp_p, 1e-5, "exp_p"}}) {
    std::vector<float> y(x.size());
    exp(x.data(), y.data(), static_cast<int64_t>(x.size()) - 3);  // leaves a tail shorter than a vector
    exp(x.data() + x.size() - 3, y.data() + y.size() - 3, 3);
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(y[i])) << isa_name(isa) << " " << name;
        continue;
      }
      const double want = std::exp(static_cast<double>(x[i]));
      if (x[i] < -87.3f) {  // about FLT_MIN and below: 0 or a denormal will do
        EXPECT_TRUE(y[i] >= 0 && y[i] <= 1.25e-38) << isa_name(isa) << " " << name << "(" << x[i] << ") = " << y[i];
        continue;
      }
      const double rel = std::fabs(y[i] - want) / want;
      worst = std::max(worst, rel);
      EXPECT_LE(rel, bound) << isa_name(isa) << " " << name << "(" << x[i] << ") = " << y[i] << ", not " << want;
    }
    EXPECT_EQ(y[x.size() - 8], 1.0f) << name;  // exp(0), exactly
    EXPECT_EQ(y[x.size() - 4], 0.0f) << name;  // exp(-inf)
    std::printf("[ info ] %s %s: worst relative error %.3g on [-87.3, 88]\n", isa_name(isa), name, worst);
  }
}

// One layer with one head of head_dim.
// n_layer layers of n_head heads of head_dim, each its own KV head.
ModelSpec heads_spec(int64_t n_layer, int64_t n_head, int64_t head_dim) {
  ModelSpec spec;
  spec.n_layer = n_layer;
  spec.n_head = spec.n_head_kv = n_head;
  spec.head_dim = spec.rope_dim = head_dim;
  spec.n_embd = n_head * head_dim;
  return spec;
}
ModelSpec one_head_spec(int64_t head_dim) { return heads_spec(1, 1, head_dim); }

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
  const ModelSpec spec = heads_spec(2, 3, 12);  // 12: q8 keys not rotated (kv_keys_rotated), so exact
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
    EXPECT_EQ(kv.bytes(), 3 * KvCache::bytes(spec, n_ctx, type));  // the two and the one left out
    EXPECT_EQ(kv.bytes(), static_cast<size_t>(2 * 2 * 3 * 3 * block));
  }
}

// Rings: with a window of 100 on every other layer and runs of at most 16
// positions, a windowed layer's sequence holds at most 3 ring blocks (115
// positions span at most 3), a global one all 16 blocks; each run (its
// hold_window(), then its stores) reads back the window before it intact,
// the other sequence's untouched, and the ring blocks behind the window are
// free again; a sequence goes back only as far as its ring still holds the
// window, and starting over lets go of them all.
TEST(KvCache, RingsHoldEachRunAndItsWindow) {
  ModelSpec spec = heads_spec(2, 2, 24);  // 24: q8 keys not rotated, so the integers below stay exact
  spec.sliding_window = 100, spec.swa_period = 2;  // layer 0 windowed, layer 1 global
  const int64_t n_ctx = 1000, kvd = spec.kv_dim();
  KvCache kv(spec, n_ctx, 2, KvType::q8, 16);
  ASSERT_EQ(kv.ring_blocks(), 3);
  EXPECT_TRUE(kv.ringed(0));
  EXPECT_FALSE(kv.ringed(1));
  EXPECT_EQ(kv.ring_pool_blocks(), 2 * 3);
  EXPECT_EQ(kv.layer_blocks(0), 2 * 3);
  EXPECT_EQ(kv.layer_blocks(1), 2 * 16);
  const size_t pair = static_cast<size_t>(kv.block_bytes(0) + kv.block_bytes(1));
  EXPECT_EQ(kv.bytes(), (2 * 3 + 2 * 16) * pair);
  EXPECT_EQ(kv.bytes_for(n_ctx), (3 + 16) * pair);
  EXPECT_EQ(kv.bytes_for(100), (2 + 2) * pair);
  EXPECT_EQ(KvCache::bytes(spec, n_ctx, KvType::q8, 16), kv.bytes_for(n_ctx));
  EXPECT_EQ(KvCache(spec, n_ctx, 2, KvType::q8).ring_blocks(), 0);  // no run size, no rings
  EXPECT_EQ(KvCache(spec, 150, 2, KvType::q8, 16).ring_blocks(), 0);  // 3 blocks hold all 150 positions anyway

  // Exact in q8: integers up to 127 with each head's largest 127.
  auto item = [&](int seq, int64_t pos, int64_t i) {
    return i % 24 == 0 ? 127.0f : static_cast<float>((seq * 7 + pos * 3 + i) % 100);
  };
  auto store = [&](KvCache& c, int seq, int64_t pos, int data_seq) {
    std::vector<float> x(static_cast<size_t>(kvd));
    for (int64_t i = 0; i < kvd; ++i) x[static_cast<size_t>(i)] = item(data_seq, pos, i);
    for (int64_t layer = 0; layer < 2; ++layer) c.store(layer, seq, pos, x.data(), x.data());
  };
  auto intact = [&](const KvCache& c, int64_t layer, int seq, int64_t from, int64_t to, int data_seq) {
    for (int64_t pos = from; pos < to; ++pos)
      for (int64_t i = 0; i < kvd; ++i)
        if (c.key(layer, seq, pos, i) != item(data_seq, pos, i) || c.value(layer, seq, pos, i) != item(data_seq, pos, i)) return false;
    return true;
  };
  auto held = [](const KvCache& c) { return c.ring_pool_blocks() - c.free_ring_blocks(); };
  for (int64_t p0 = 0; p0 < 300; p0 += 16) {
    ASSERT_TRUE(kv.hold_window(0, p0, std::min<int64_t>(300, p0 + 16)));
    for (int64_t pos = p0; pos < std::min<int64_t>(300, p0 + 16); ++pos) store(kv, 0, pos, 0);
  }
  EXPECT_EQ(held(kv), 3);  // blocks 2-4: positions 189.. and the last run
  for (int64_t p0 = 0; p0 < n_ctx; p0 += 16) {  // runs of 16, then the window before each
    const int64_t p1 = std::min(n_ctx, p0 + 16);
    ASSERT_TRUE(kv.hold_window(1, p0, p1));
    for (int64_t pos = p0; pos < p1; ++pos) store(kv, 1, pos, 1);
    ASSERT_TRUE(intact(kv, 0, 1, std::max<int64_t>(0, p0 - 99), p1, 1)) << "run at " << p0;
    ASSERT_LE(held(kv), 6) << "run at " << p0;
  }
  EXPECT_TRUE(intact(kv, 1, 1, 0, n_ctx, 1));  // the global layer keeps all
  EXPECT_THROW(kv.key(0, 1, 0, 0), Error);     // the windowed one let go of its first block
  EXPECT_TRUE(intact(kv, 0, 0, 300 - 100, 300, 0));
  // Blocks 13-15 (positions 832-999) are what sequence 1 holds: resuming at p needs p - 99 in them.
  EXPECT_TRUE(kv.can_resume(1, 931));
  EXPECT_FALSE(kv.can_resume(1, 930));
  EXPECT_TRUE(kv.can_resume(1, 0));
  EXPECT_TRUE(kv.can_resume(1, n_ctx));
  EXPECT_TRUE(kv.can_resume(0, 250));
  EXPECT_FALSE(kv.can_resume(0, 150));
  EXPECT_TRUE(KvCache(spec, n_ctx, 2, KvType::q8).can_resume(0, 5));
  ASSERT_TRUE(kv.hold_window(1, 931, 947));  // going back within the ring
  EXPECT_TRUE(intact(kv, 0, 1, 832, 1000, 1));
  EXPECT_THROW(kv.hold_window(1, 930, 946), Error);  // position 831's block is gone
  ASSERT_TRUE(kv.hold_window(1, 0, 16));             // starting over
  EXPECT_EQ(held(kv), 3 + 1);

  // Attention sinks: the first 70 positions keep 2 blocks held for good, in front of the window's.
  spec.attention_sinks = 70;
  KvCache sunk(spec, n_ctx, 1, KvType::q8, 16);
  ASSERT_EQ(sunk.ring_blocks(), 2 + 3);
  for (int64_t p0 = 0; p0 < n_ctx; p0 += 16) {
    ASSERT_TRUE(sunk.hold_window(0, p0, std::min(n_ctx, p0 + 16)));
    for (int64_t pos = p0; pos < std::min(n_ctx, p0 + 16); ++pos) store(sunk, 0, pos, 0);
    ASSERT_LE(held(sunk), 5);
  }
  for (int64_t pos : {0, 69, 127, 900, 999})  // the sinks' blocks, and the window
    for (int64_t i = 0; i < kvd; ++i) ASSERT_EQ(sunk.key(0, 0, pos, i), item(0, pos, i)) << pos;
  EXPECT_THROW(sunk.key(0, 0, 128, 0), Error);
  EXPECT_TRUE(sunk.can_resume(0, 931));
  EXPECT_FALSE(sunk.can_resume(0, 930));
  // Back into the sinks' blocks: the window before 30 is theirs, so the ring
  // lets go of the rest and goes on from there, the positions before 30 intact.
  EXPECT_TRUE(sunk.can_resume(0, 30));
  ASSERT_TRUE(sunk.hold_window(0, 30, 46));
  EXPECT_EQ(held(sunk), 2);
  for (int64_t p0 = 30; p0 < 400; p0 += 16) {
    ASSERT_TRUE(sunk.hold_window(0, p0, p0 + 16)) << p0;
    for (int64_t pos = p0; pos < p0 + 16; ++pos) store(sunk, 0, pos, 1);
    ASSERT_LE(held(sunk), 5);
  }
  EXPECT_TRUE(intact(sunk, 0, 0, 0, 30, 0));
  EXPECT_TRUE(intact(sunk, 0, 0, 30, 128, 1));
  EXPECT_TRUE(intact(sunk, 0, 0, 300, 400, 1));
}

// Rings under random runs, rewinds and restarts of two sequences (windows of
// 100, runs of up to 16; with and without 70 attention sinks): each run's
// hold_window() succeeds in a pool of exactly two rings, every position its
// queries read (the window before it, the sinks) reads back what was last
// stored there, a sequence never holds more than a ring, and the held ring
// blocks are all the pool has in use.
TEST(KvCache, RingsSurviveRandomRunsAndRewinds) {
  for (int64_t sinks : {0, 70}) {
    SCOPED_TRACE("sinks " + std::to_string(sinks));
    ModelSpec spec = heads_spec(1, 1, 32);
    spec.sliding_window = 100, spec.attention_sinks = sinks;
    const int64_t n_ctx = 1000, kvd = spec.kv_dim();
    KvCache kv(spec, n_ctx, 2, KvType::f16, 16);
    ASSERT_GT(kv.ring_blocks(), 0);
    std::mt19937 rng(11 + static_cast<uint32_t>(sinks));
    std::vector<std::vector<float>> stored(2, std::vector<float>(static_cast<size_t>(n_ctx), -1));  // a value per position
    std::vector<int64_t> next(2, 0);
    float version = 0;
    auto held_by = [&](int seq) {
      int64_t n = 0;
      for (int64_t b = 0; b < KvCache::blocks_for(n_ctx); ++b) n += kv.has_ring(kv.table(seq)[static_cast<size_t>(b)]);
      return n;
    };
    int64_t rewinds = 0, into_sinks = 0;
    for (int op = 0; op < 3000; ++op) {
      const int seq = static_cast<int>(rng() % 2);
      int64_t& pos = next[static_cast<size_t>(seq)];
      if (rng() % 20 == 0) {  // go back somewhere, or start over when the ring no longer holds its window
        const int64_t from = static_cast<int64_t>(rng() % static_cast<uint32_t>(pos + 1));
        const bool resume = kv.can_resume(seq, from);
        rewinds += resume && from > 0;
        into_sinks += resume && from > 0 && from <= sinks && pos > 300;
        pos = resume ? from : 0;
      }
      if (pos >= n_ctx) pos = 0;
      const int64_t end = std::min(n_ctx, pos + 1 + static_cast<int64_t>(rng() % 16));
      ASSERT_TRUE(kv.hold_window(seq, pos, end)) << "op " << op;
      for (int64_t p = pos; p < end; ++p) {
        version += 1;
        const float x = version - 2048 * std::floor(version / 2048);  // exact in f16
        std::vector<float> row(static_cast<size_t>(kvd), x);
        kv.store(0, seq, p, row.data(), row.data());
        stored[static_cast<size_t>(seq)][static_cast<size_t>(p)] = x;
      }
      pos = end;
      for (int s2 = 0; s2 < 2; ++s2)  // what each sequence's last query reads
        for (int64_t p = 0; p < next[static_cast<size_t>(s2)]; ++p) {
          if (p >= next[static_cast<size_t>(s2)] - 100 || p < sinks) {
            ASSERT_EQ(kv.key(0, s2, p, 0), stored[static_cast<size_t>(s2)][static_cast<size_t>(p)])
                << "op " << op << " sequence " << s2 << " pos " << p;
          }
        }
      ASSERT_LE(held_by(0), kv.ring_blocks());
      ASSERT_LE(held_by(1), kv.ring_blocks());
      ASSERT_EQ(held_by(0) + held_by(1), kv.ring_pool_blocks() - kv.free_ring_blocks()) << "op " << op;
    }
    EXPECT_GE(rewinds, 20);                  // the walk went back often enough
    if (sinks > 0) {
      EXPECT_GE(into_sinks, 3);  // and from far into the sinks' blocks
    }
  }
}

// Rings in a paged pool: sequences sharing a block share its ring block, a
// reference each, and a cache's reference keeps it (and with it the window)
// after its sequence has gone, so that another sequence can continue from it.
TEST(KvCache, RingBlocksAreSharedWithTheirBlocks) {
  ModelSpec spec = heads_spec(2, 2, 32);
  spec.sliding_window = 100, spec.swa_period = 2;
  const int64_t kvd = spec.kv_dim();
  KvCache kv(spec, 1000, 2, 32, KvType::f16, 16, 8);
  EXPECT_EQ(kv.ring_pool_blocks(), 8);
  auto item = [](int64_t pos, int64_t i) { return static_cast<float>((pos * 3 + i) % 50); };  // exact in f16
  for (int b = 0; b < 4; ++b) ASSERT_TRUE(kv.grow(0));
  for (int64_t p0 = 0; p0 < 256; p0 += 16) {
    ASSERT_TRUE(kv.hold_window(0, p0, p0 + 16));
    for (int64_t pos = p0; pos < p0 + 16; ++pos) {
      std::vector<float> x(static_cast<size_t>(kvd));
      for (int64_t i = 0; i < kvd; ++i) x[static_cast<size_t>(i)] = item(pos, i);
      for (int64_t layer = 0; layer < 2; ++layer) kv.store(layer, 0, pos, x.data(), x.data());
    }
  }
  const std::vector<int32_t> t0 = kv.table(0);
  EXPECT_FALSE(kv.has_ring(t0[0]));  // let go: a ring holds 3 blocks
  ASSERT_TRUE(kv.has_ring(t0[1]));
  for (int b = 0; b < 4; ++b) kv.ref(t0[b]);          // a cache keeps the blocks
  for (int b : {2, 3}) kv.ref_ring(t0[b]);            // and the window before 256
  kv.release(0);
  EXPECT_FALSE(kv.has_ring(t0[1]));
  EXPECT_EQ(kv.ring_refs(t0[3]), 1);
  EXPECT_EQ(kv.free_ring_blocks(), 8 - 2);
  EXPECT_TRUE(kv.window_kept(t0.data(), 256));   // positions 157..255: blocks 2 and 3
  EXPECT_FALSE(kv.window_kept(t0.data(), 192));  // 93..191: block 1 is gone
  EXPECT_THROW(kv.copy_block(t0[1], t0[2]), Error);  // no ring block to copy from

  for (int b = 0; b < 4; ++b) kv.share(1, t0[b]);
  ASSERT_TRUE(kv.hold_window(1, 256, 256));  // the window before 256, from the cache's ring blocks
  EXPECT_EQ(kv.ring_refs(t0[3]), 2);
  EXPECT_EQ(kv.free_ring_blocks(), 8 - 2);
  ASSERT_TRUE(kv.grow(1));
  ASSERT_TRUE(kv.hold_window(1, 256, 272));  // and a new one for block 4
  EXPECT_EQ(kv.free_ring_blocks(), 8 - 3);
  for (int64_t pos = 157; pos < 256; ++pos)
    for (int64_t i = 0; i < kvd; ++i) ASSERT_EQ(kv.key(0, 1, pos, i), item(pos, i)) << pos;
  for (int b : {2, 3}) kv.unref_ring(t0[b]);  // the cache lets go
  for (int b = 0; b < 4; ++b) kv.unref(t0[b]);
  EXPECT_EQ(kv.ring_refs(t0[3]), 1);
  kv.release(1);
  EXPECT_EQ(kv.free_ring_blocks(), 8);
  EXPECT_EQ(kv.free_blocks(), 32);
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

// copy_block gives the destination every layer's keys and values of the
// source, in every cache type; the source is unchanged.
TEST(KvCache, CopyBlockCopiesEveryLayer) {
  for (KvType type : kKvTypes) {
    ModelSpec spec = one_head_spec(64);
    spec.n_layer = 3;
    KvCache kv(spec, 2 * KvCache::kBlock, 2, 4, type);
    ASSERT_TRUE(kv.grow(0));
    ASSERT_TRUE(kv.grow(1));
    std::vector<float> k(64), v(64);
    for (int64_t layer = 0; layer < 3; ++layer)
      for (int64_t p = 0; p < KvCache::kBlock; ++p) {
        for (int64_t i = 0; i < 64; ++i) k[i] = std::sin(0.1f * (i + 7 * p + 100 * layer)), v[i] = std::cos(0.3f * (i + p - layer));
        kv.store(layer, 0, p, k.data(), v.data());
      }
    kv.copy_block(kv.table(0)[0], kv.table(1)[0]);
    for (int64_t layer = 0; layer < 3; ++layer)
      for (int64_t p : {0, 1, 31, 32, 63})
        for (int64_t i = 0; i < 64; ++i) {
          ASSERT_EQ(kv.key(layer, 1, p, i), kv.key(layer, 0, p, i)) << kv_type_name(type) << " " << layer << " " << p;
          ASSERT_EQ(kv.value(layer, 1, p, i), kv.value(layer, 0, p, i)) << kv_type_name(type) << " " << layer << " " << p;
        }
    EXPECT_NE(kv.key(2, 0, 5, 3), 0.0f);
    EXPECT_THROW(kv.copy_block(kv.table(0)[0], kv.table(0)[0]), Error);
  }
}

// key_head/value_head read what key()/value() read, element for element.
TEST(KvCache, HeadReadsEqualElementReads) {
  for (KvType type : kKvTypes) {
    const int64_t hd = kv_type_unsupported(type, 72).empty() ? 72 : 96;  // 72: no multiple of 32 or 16
    const Case c{hd, 3, 2, {130}, {1}};
    const ModelSpec spec = spec_of(c);
    KvCache kv = testutil::interleaved_kv_cache(spec, n_ctx_of(c), 1, type);
    fill_cache(kv, c);
    std::vector<float> key(static_cast<size_t>(hd)), value(key.size());
    for (int64_t layer : {0, 1})
      for (int64_t p : {0, 31, 32, 63, 64, 129})
        for (int64_t h = 0; h < c.n_kv; ++h) {
          kv.key_head(layer, 0, p, h, key.data());
          kv.value_head(layer, 0, p, h, value.data());
          for (int64_t d = 0; d < hd; ++d) {
            ASSERT_EQ(key[d], kv.key(layer, 0, p, h * hd + d)) << kv_type_name(type) << " " << p << " " << h << " " << d;
            ASSERT_EQ(value[d], kv.value(layer, 0, p, h * hd + d)) << kv_type_name(type) << " " << p << " " << h << " " << d;
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

// q8 keys are stored rotated where the rotation covers the head
// (kv_keys_rotated): the codes are quantize_kv_q8 of H k, key() and
// key_head() give k back, and on keys with a few large channels (as Gemma
// 3's) the dot products with a query err far less than with the unrotated
// rounding: a fifth here (RMS; measured 0.18 and 0.23).
TEST(KvCache, Q8KeysAreStoredRotated) {
  for (KvType t : {KvType::q8, KvType::k8v4}) {
    for (int64_t hd : {4, 16, 64, 96, 128, 256}) EXPECT_TRUE(kv_keys_rotated(t, hd)) << hd;
    for (int64_t hd : {12, 24, 72, 80}) EXPECT_FALSE(kv_keys_rotated(t, hd)) << hd;
  }
  for (KvType t : {KvType::f16, KvType::q4}) EXPECT_FALSE(kv_keys_rotated(t, 64));
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 1);
  for (int64_t hd : {64, 256}) {
    const ModelSpec spec = heads_spec(1, 1, hd);
    KvCache kv(spec, 64, 1, KvType::q8);
    double err_rotated = 0, err_plain = 0;
    for (int64_t pos = 0; pos < 64; ++pos) {
      std::vector<float> k(static_cast<size_t>(hd)), q(k.size()), v(k.size(), 0.0f), rk(k.size()), back(k.size());
      for (int64_t d = 0; d < hd; ++d) {
        k[d] = nd(rng) * (d % 37 == 5 ? 30.0f : 1.0f);  // a few large channels
        q[d] = nd(rng);
      }
      kv.store(0, 0, pos, k.data(), v.data());
      rk = k;
      kv_rotate(rk.data(), hd);
      std::vector<int8_t> codes(k.size()), plain(k.size());
      const float scale = quantize_kv_q8(rk.data(), hd, codes.data());
      const uint8_t* block = kv.key_block(0, 0, pos);
      float stored_scale;
      std::memcpy(&stored_scale, block + kv.head_scales_offset(0, 0) + pos * 4, 4);
      ASSERT_EQ(stored_scale, scale);
      for (int64_t d = 0; d < hd; ++d)
        ASSERT_EQ(reinterpret_cast<const int8_t*>(block)[d * KvCache::kBlock + pos], codes[d]) << hd << " " << d;
      kv.key_head(0, 0, pos, 0, back.data());
      const float plain_scale = quantize_kv_q8(k.data(), hd, plain.data());
      double exact = 0, got = 0, unrotated = 0;
      for (int64_t d = 0; d < hd; ++d) {
        ASSERT_NEAR(back[d], k[d], scale * std::sqrt(static_cast<float>(hd))) << hd << " " << d;
        ASSERT_EQ(back[d], kv.key(0, 0, pos, d));
        exact += static_cast<double>(q[d]) * k[d];
        got += static_cast<double>(q[d]) * back[d];
        unrotated += static_cast<double>(q[d]) * plain_scale * plain[d];
      }
      err_rotated += (got - exact) * (got - exact);
      err_plain += (unrotated - exact) * (unrotated - exact);
    }
    std::printf("[ info ] head_dim %lld: q.k error rotated / unrotated %.3f\n", static_cast<long long>(hd),
                std::sqrt(err_rotated / err_plain));
    EXPECT_LT(std::sqrt(err_rotated / err_plain), 0.4) << hd;
  }
}

// q4 keys' stages (the group being written of each layer and sequence, 72
// bytes a dimension) count in the cache's memory, as the budget checks see it:
// bytes() and bytes_for() of the cache, and the static estimates, alike.
TEST(KvCache, Q4KeysStagesCountInItsBytes) {
  const ModelSpec spec = heads_spec(3, 2, 64);
  const int64_t n_ctx = 256, blocks = 3 * KvCache::blocks_for(n_ctx);
  for (KvType type : {KvType::q4, KvType::k8v4, KvType::q8}) {
    KvCache kv(spec, n_ctx, 2, blocks, type, 64);
    const size_t stages = type == KvType::q4 ? size_t{3 * 2 * 128 * 72} : 0;
    EXPECT_EQ(KvCache::stage_bytes(3, 128, 2, type), stages) << kv_type_name(type);
    EXPECT_EQ(kv.bytes(), static_cast<size_t>(3 * blocks * (kv.block_bytes(0) + kv.block_bytes(1))) + stages);
    EXPECT_EQ(kv.bytes(), KvCache::bytes(spec, n_ctx, 2, blocks, type, 64, 0)) << kv_type_name(type);
    EXPECT_EQ(kv.bytes_for(n_ctx), KvCache::bytes(spec, n_ctx, type, 64)) << kv_type_name(type);
    EXPECT_EQ(kv.bytes_for(n_ctx), static_cast<size_t>(3 * KvCache::blocks_for(n_ctx) * (kv.block_bytes(0) + kv.block_bytes(1))) +
                                       stages / 2);
  }
}

// q4 keys' rounding of one channel over a group: step and minimum in f16,
// codes to the nearest step from the minimum, the least value code 0 and the
// greatest 15 (within an f16 rounding), a constant channel step 0, a NaN
// neither crashing nor spreading.
TEST(KvCache, Q4KeyRounding) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(3.0f, 2.0f);
  float x[32];
  uint8_t code[32];
  for (int n : {1, 2, 17, 32}) {
    for (int i = 0; i < n; ++i) x[i] = f16_to_f32(f32_to_f16(normal(rng)));
    const uint32_t sm = quantize_kv_q4_keys(x, n, code);
    const float step = f16_to_f32(static_cast<uint16_t>(sm & 0xFFFF)), m = f16_to_f32(static_cast<uint16_t>(sm >> 16));
    const float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
    EXPECT_EQ(m, f16_to_f32(f32_to_f16(lo)));
    EXPECT_EQ(step, f16_to_f32(f32_to_f16((hi - lo) / 15)));
    for (int i = 0; i < n; ++i) {
      ASSERT_LE(code[i], 15);
      EXPECT_LE(std::fabs(m + step * code[i] - x[i]), step / 2 + 2e-3f * std::fabs(x[i])) << n << " " << i;
      if (x[i] == lo) {
        EXPECT_EQ(code[i], 0);
      } else if (x[i] == hi) {
        EXPECT_EQ(code[i], 15);
      }
    }
  }
  for (float& v : x) v = 1.5f;
  EXPECT_EQ(quantize_kv_q4_keys(x, 32, code), static_cast<uint32_t>(f32_to_f16(1.5f)) << 16);
  for (uint8_t c : code) EXPECT_EQ(c, 0);
  x[3] = NAN;
  quantize_kv_q4_keys(x, 32, code);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(code[i], 0) << i;
}

// A q4 key group is rounded from the positions it holds so far: one at a
// time or in any later order the result is that of its values together; a
// sequence that continues a copied block, or goes back inside a group, takes
// the group's earlier positions from the block (decoded) or its stage.
TEST(KvCache, Q4KeyGroupsFollowTheirPositions) {
  const ModelSpec spec = heads_spec(1, 2, 64);
  const int64_t kvd = spec.kv_dim();
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> keys(70, std::vector<float>(static_cast<size_t>(kvd)));
  for (auto& k : keys)
    for (float& x : k) x = normal(rng);
  const std::vector<float> zero(static_cast<size_t>(kvd), 0.0f);
  // What a group of positions [g, e) holds, rounded together from `vals` (f16 first).
  auto expect_group = [&](const KvCache& kv, int seq, int64_t g, int64_t e, auto vals) {
    float x[32];
    uint8_t code[32];
    for (int64_t i = 0; i < kvd; ++i) {
      for (int64_t p = g; p < e; ++p) x[p - g] = f16_to_f32(f32_to_f16(vals(p, i)));
      const uint32_t sm = quantize_kv_q4_keys(x, e - g, code);
      const float step = f16_to_f32(static_cast<uint16_t>(sm & 0xFFFF)), m = f16_to_f32(static_cast<uint16_t>(sm >> 16));
      for (int64_t p = g; p < e; ++p) ASSERT_EQ(kv.key(0, seq, p, i), m + step * code[p - g]) << g << " " << p << " " << i;
    }
  };
  auto original = [&](int64_t p, int64_t i) { return keys[p][i]; };
  KvCache kv(spec, 128, 3, 6, KvType::q4);
  for (int seq = 0; seq < 3; ++seq) ASSERT_TRUE(kv.grow(seq));
  for (int64_t p = 0; p < 40; ++p) kv.store(0, 0, p, keys[p].data(), zero.data());
  expect_group(kv, 0, 0, 32, original);
  expect_group(kv, 0, 32, 40, original);
  EXPECT_TRUE(kv.key_stage_holds(0, 0, 40));
  // Sequence 1 had 32..39 of its own; then it takes a copy of sequence 0's
  // block and continues at 40: its stage holds its old keys, not the copy's,
  // so the copy's 32..39 come decoded from the block.
  for (int64_t p = 32; p < 40; ++p) kv.store(0, 1, p, keys[p + 20].data(), zero.data());
  EXPECT_TRUE(kv.key_stage_holds(0, 1, 40));
  std::vector<float> decoded(static_cast<size_t>(8 * kvd));
  for (int64_t p = 32; p < 40; ++p)
    for (int64_t i = 0; i < kvd; ++i) decoded[(p - 32) * kvd + i] = kv.key(0, 0, p, i);
  kv.copy_block(kv.table(0)[0], kv.table(1)[0]);
  EXPECT_FALSE(kv.key_stage_holds(0, 1, 40));
  EXPECT_TRUE(kv.key_stage_holds(0, 1, 32));  // a group's first position needs nothing
  kv.store(0, 1, 40, keys[40].data(), zero.data());
  expect_group(kv, 1, 32, 41, [&](int64_t p, int64_t i) { return p < 40 ? decoded[(p - 32) * kvd + i] : keys[40][i]; });
  // Sequence 0 goes back to 36 with another key: the group is 32..35 and it.
  kv.store(0, 0, 36, keys[60].data(), zero.data());
  expect_group(kv, 0, 32, 37, [&](int64_t p, int64_t i) { return p < 36 ? keys[p][i] : keys[60][i]; });
  // Released, a sequence starts again (in the same block: the free list's
  // last): its stage, which held 32..36, is gone.
  EXPECT_TRUE(kv.key_stage_holds(0, 0, 37));
  const int32_t block = kv.table(0)[0];
  kv.release(0);
  ASSERT_TRUE(kv.grow(0));
  ASSERT_EQ(kv.table(0)[0], block);
  EXPECT_FALSE(kv.key_stage_holds(0, 0, 37));
  // A store outside the sequence's blocks is a clear error, the stage untouched.
  EXPECT_THROW(kv.store(0, 2, 64, keys[0].data(), zero.data()), Error);
  EXPECT_THROW(kv.store(0, 2, 200, keys[0].data(), zero.data()), Error);
}

// q4 (llama.cpp's q4_0): with m the value of largest magnitude, d = m / -8,
// code = min(15, floor(x / d + 8.5)), so x ~ d (code - 8): m itself is code 0
// (exact up to d's f16 rounding), every other value within half a step
// except those past 7.5 steps on m's opposite side, clamped to 7 steps.
TEST(KvCache, Q4Rounding) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 3);
  for (int round = 0; round < 200; ++round) {
    float x[32];
    for (float& v : x) v = nd(rng);
    if (round % 2) x[round % 32] = -x[round % 32];  // the extreme on either side
    uint8_t code[32];
    const float d = f16_to_f32(quantize_kv_q4(x, code));
    float m = 0;
    for (float v : x)
      if (std::fabs(v) > std::fabs(m)) m = v;
    const float d32 = m / -8;
    EXPECT_EQ(d, f16_to_f32(f32_to_f16(d32)));
    for (int i = 0; i < 32; ++i) {
      ASSERT_LE(code[i], 15);
      EXPECT_EQ(code[i], std::min(15, static_cast<int>(x[i] * (1 / d32) + 8.5f))) << i;
      if (x[i] == m) {
        EXPECT_EQ(code[i], 0);
      }
      const float step = std::fabs(d), err = std::fabs(x[i] - d * (code[i] - 8));
      EXPECT_LE(err, (x[i] / d32 < 7.5f ? 0.5f : 1.0f) * step * 1.01f) << i;
    }
  }
  // All zeros: scale 0, code 8 (value 0); an infinity or a NaN stays in range.
  float zeros[32] = {}, bad[32] = {};
  uint8_t code[32];
  EXPECT_EQ(f16_to_f32(quantize_kv_q4(zeros, code)), 0.0f);
  for (uint8_t c : code) EXPECT_EQ(c, 8);
  bad[0] = NAN, bad[1] = INFINITY, bad[2] = -1;
  quantize_kv_q4(bad, code);
  for (uint8_t c : code) EXPECT_LE(c, 15);
}

// The rotation is orthogonal and its own inverse (so scores and P V are
// unchanged in the rotated basis), and spreads one large channel over all.
TEST(KvCache, RotationIsOrthogonalAndSpreadsOutliers) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  for (int64_t hd : {32, 64, 96, 128, 256}) {
    std::vector<float> x(static_cast<size_t>(hd)), y(x.size());
    for (float& v : x) v = nd(rng);
    for (float& v : y) v = nd(rng);
    double dot = 0, norm = 0;
    for (int64_t i = 0; i < hd; ++i) dot += x[i] * y[i], norm += x[i] * x[i];
    std::vector<float> rx = x, ry = y;
    kv_rotate(rx.data(), hd);
    kv_rotate(ry.data(), hd);
    double rdot = 0, rnorm = 0;
    for (int64_t i = 0; i < hd; ++i) rdot += rx[i] * ry[i], rnorm += rx[i] * rx[i];
    EXPECT_NEAR(rdot, dot, 1e-4 * hd) << hd;
    EXPECT_NEAR(rnorm, norm, 1e-4 * hd) << hd;
    kv_rotate(rx.data(), hd);
    for (int64_t i = 0; i < hd; ++i) ASSERT_NEAR(rx[i], x[i], 1e-5f) << hd << " " << i;
    // One channel of 100: every rotated value is +-100 / sqrt(block).
    std::vector<float> spike(static_cast<size_t>(hd), 0.0f);
    spike[5] = 100;
    kv_rotate(spike.data(), hd);
    const float each = 100 / std::sqrt(static_cast<float>(kv_rotation_block(hd)));
    for (int64_t i = 0; i < kv_rotation_block(hd); ++i) ASSERT_NEAR(std::fabs(spike[i]), each, 1e-4f) << hd << " " << i;
  }
  EXPECT_EQ(kv_rotation_block(64), 64);
  EXPECT_EQ(kv_rotation_block(96), 32);
}

// The q4 block layout (kv_cache.h), byte by byte: keys' row (head, dim) of
// 32 bytes with position j in the low nibble of byte j % 32 (high from 32 on),
// then per head f16 steps [group of 32 positions][dim] and minimums [group][dim];
// a value row's group of 32 dimensions in 16 bytes, dims 16.. in the high
// nibbles, then f16 scales [head][group][position], each head stored rotated
// (kv_rotation.h) and read back un-rotated. Stored one position at a time,
// so each key group is rounded again as it fills (from its f16 stage).
TEST(KvCache, Q4Layout) {
  const ModelSpec spec = heads_spec(1, 2, 64);
  constexpr int64_t B = KvCache::kBlock;
  const int64_t kvd = spec.kv_dim(), hd = spec.head_dim;
  KvCache kv(spec, B, 1, KvType::q4);
  EXPECT_EQ(kv.block_bytes(0), kvd * B / 2 + kvd * 2 * 4);
  EXPECT_EQ(kv.block_bytes(1), kvd * B / 2 + kvd / 32 * B * 2);
  EXPECT_EQ(kv.scales_offset(), kvd * B / 2);
  // Keys: element i of position p is minimum(i) + step(i) * code, every code
  // 0..15 in each group (7 is prime to 16), so the group's step and minimum are those.
  auto code = [](int64_t p, int64_t i) { return static_cast<int>((p * 7 + i * 3) % 16); };
  auto step = [](int64_t i) { return 0.25f * static_cast<float>(1 + i % 4); };
  auto minimum = [](int64_t i) { return -static_cast<float>(i % 5); };
  // Values, rotated: an integer -8..7 with each group's -8 at its first
  // dimension, so every scale is 1 and every code is it + 8. Stored: those
  // rotated back (the rotation is its own inverse, and exact on these values:
  // sums of integers over 8).
  auto item = [&](int64_t p, int64_t i) {
    if (i % 32 == 0) return -8.0f;
    return static_cast<float>((p * 7 + i * 3 + 5) % 16 - 8);
  };
  std::vector<std::vector<float>> keys, values;
  for (int64_t p = 0; p < B; ++p) {
    std::vector<float> key(static_cast<size_t>(kvd)), value(key.size());
    for (int64_t i = 0; i < kvd; ++i) key[i] = minimum(i) + step(i) * static_cast<float>(code(p, i)), value[i] = item(p, i);
    for (int64_t h = 0; h < spec.n_head_kv; ++h) kv_rotate(value.data() + h * hd, hd);
    kv.store(0, 0, p, key.data(), value.data());
    keys.push_back(key), values.push_back(value);
  }
  const uint8_t* kb = kv.key_block(0, 0, 0);
  const uint8_t* vb = kv.value_block(0, 0, 0);
  for (int64_t p = 0; p < B; ++p)
    for (int64_t i = 0; i < kvd; ++i) {
      const int64_t h = i / hd, d = i % hd;
      const int key_code = kb[(h * hd + d) * 32 + p % 32] >> (p < 32 ? 0 : 4) & 0xF;
      const int value_code = vb[(h * B + p) * (hd / 2) + d / 32 * 16 + d % 16] >> (d % 32 < 16 ? 0 : 4) & 0xF;
      ASSERT_EQ(key_code, code(p, i)) << p << " " << i;
      ASSERT_EQ(value_code - 8, item(p, i)) << p << " " << i;
      uint16_t ks[2], vs;  // the key's step and minimum
      std::memcpy(&ks[0], kb + kv.scales_offset() + ((h * 4 + p / 32) * hd + d) * 2, 2);
      std::memcpy(&ks[1], kb + kv.scales_offset() + ((h * 4 + 2 + p / 32) * hd + d) * 2, 2);
      std::memcpy(&vs, vb + kv.scales_offset() + ((h * 2 + d / 32) * B + p) * 2, 2);
      ASSERT_EQ(f16_to_f32(ks[0]), step(i));
      ASSERT_EQ(f16_to_f32(ks[1]), minimum(i));
      ASSERT_EQ(f16_to_f32(vs), 1.0f);
      ASSERT_EQ(kv.key(0, 0, p, i), keys[p][i]);
      ASSERT_EQ(kv.value(0, 0, p, i), values[p][i]);
    }
  // A head whose size is no multiple of 32 is a clear error.
  EXPECT_THROW(KvCache(heads_spec(1, 2, 80), B, 1, KvType::q4), Error);
}

}  // namespace
}  // namespace basalt
