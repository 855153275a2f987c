// SPDX-License-Identifier: MIT
// Attention for one decode token (and a 512-token prefill chunk) over a KV
// cache of D positions, per ISA and cache type (f16, q8), with the 1.1B
// (TinyLlama: 32 query heads, 4 KV heads, head_dim 64) and 7B (32/32/128)
// head shapes. GB/s = K and V bytes (and q8 scales) read per decode call:
// decode at depth should run at the read bandwidth; the 1.1B shape at depth
// 4096 reads 4.2 MB per layer (at 16384, decode rows of that shape only:
// 16.8 MB). GFLOP/s counts QK and PV (4 x heads x head_dim x keys per token).
// The /cold rows evict the cache's blocks before each call, as the weights
// streamed between two tokens do in a model.
// Its figures: docs/PERFORMANCE.md. The scores and P V are FMA-bound (2 x 2048
// FMAs per block of 64 keys and KV head for 8 query rows, each K and V vector
// converted from f16 once); cold, the read of the cache adds to that.
//
//   build/bin/basalt_attention_bench --benchmark_filter='1.1b/avx512/f16/d:4096/t:1'
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/graph/batch.h"
#include "core/graph/kv_cache.h"
#include "core/util/thread_pool.h"
#include "core/util/threads.h"
#include "cpu/isa.h"
#include "cpu/ops.h"

namespace basalt::bench {
namespace {

struct HeadShape {
  const char* name;
  int64_t n_head, n_head_kv, head_dim;
};
const HeadShape kShapes[] = {{"1.1b", 32, 4, 64}, {"7b", 32, 32, 128}};
const Isa kIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::amx};

// A cache of `depth` past positions of random keys and values (written through
// the op itself, one chunk at a time), kept for the next call of the same
// benchmark: Google Benchmark calls it several times while it sizes the run,
// and the fill would dominate a profile of the decode call.
KvCache& filled_cache(const ModelSpec& spec, Isa isa, KvType type, int64_t depth, int64_t n_tok) {
  static std::string last;
  static std::unique_ptr<KvCache> kv;
  const std::string key = std::to_string(spec.n_head) + "/" + std::to_string(spec.n_head_kv) + "/" +
                          std::to_string(spec.head_dim) + "/" + isa_name(isa) + "/" + kv_type_name(type) + "/" +
                          std::to_string(depth) + "/" + std::to_string(n_tok);
  if (kv && key == last) return *kv;
  last = key;
  kv.reset();
  kv = std::make_unique<KvCache>(spec, depth + n_tok, 1, type);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 1);
  const int64_t qd = spec.q_dim(), kvd = spec.kv_dim();
  std::vector<float> q(static_cast<size_t>(512 * qd)), k(static_cast<size_t>(512 * kvd)), v(k.size()), out(q.size());
  for (int64_t p0 = 0; p0 < depth; p0 += 512) {
    Batch b;
    for (int64_t p = p0; p < std::min(depth, p0 + 512); ++p) b.add(0, static_cast<int32_t>(p), 0, false);
    for (float& x : q) x = nd(rng);
    for (float& x : k) x = nd(rng);
    for (float& x : v) x = nd(rng);
    cpu::attention(q.data(), k.data(), v.data(), out.data(), b, *kv, 0, spec, isa);
  }
  return *kv;
}

// Evicts the cache's blocks of (layer 0, seq 0) from every CPU cache level:
// in a model, the weights streamed between two tokens push a layer's KV out.
void evict(const KvCache& kv, int64_t positions) {
#if defined(__x86_64__)
  for (int64_t p = 0; p < positions; p += KvCache::kBlock)
    for (int side = 0; side < 2; ++side) {  // keys' and values' blocks differ in size (q4, k8v4)
      const uint8_t* block = side == 0 ? kv.key_block(0, 0, p) : kv.value_block(0, 0, p);
      for (int64_t i = 0; i < kv.block_bytes(side); i += 64) _mm_clflush(block + i);
    }
  _mm_mfence();
#else
  (void)kv, (void)positions;
#endif
}

// In a model the workers come from the previous op's barrier, awake; after
// an eviction they would be asleep, and a futex wake per call would be timed
// (it made the 1.1B d:4096 cold row 1.6x slower). Returns once every pool
// thread has arrived (each holds a unit until all have one), or after 10 ms.
void wake_workers() {
  ThreadPool& pool = engine_pool();
  std::atomic<int> arrived{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(10);
  pool.run(pool.size(), [&](int64_t, int) {
    arrived.fetch_add(1);
    while (arrived.load() < pool.size() && std::chrono::steady_clock::now() < deadline) {
    }
  });
}

// cold: the cache is evicted before each call (decode only), as in a model.
void bench_attention(benchmark::State& state, const HeadShape& h, Isa isa, KvType type, int64_t depth, int64_t n_tok,
                     bool cold) {
  if (!cpu_supports(isa)) {
    state.SkipWithError((std::string("CPU lacks ") + isa_name(isa)).c_str());
    return;
  }
  ModelSpec spec;
  spec.n_layer = 1;
  spec.n_head = h.n_head;
  spec.n_head_kv = h.n_head_kv;
  spec.head_dim = spec.rope_dim = h.head_dim;
  spec.n_embd = h.n_head * h.head_dim;
  const int64_t qd = spec.q_dim(), kvd = spec.kv_dim();
  std::vector<float> q(static_cast<size_t>(512 * qd)), k(static_cast<size_t>(512 * kvd)), v(k.size()), out(q.size());
  KvCache& kv = filled_cache(spec, isa, type, depth, n_tok);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0, 1);
  for (std::vector<float>* x : {&q, &k, &v})
    for (float& e : *x) e = nd(rng);
  Batch b;
  for (int64_t t = 0; t < n_tok; ++t) b.add(0, static_cast<int32_t>(depth + t), 0, true);
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      evict(kv, depth + n_tok);
      wake_workers();
      state.ResumeTiming();
    }
    cpu::attention(q.data(), k.data(), v.data(), out.data(), b, kv, 0, spec, isa);
    benchmark::DoNotOptimize(out.data());
  }
  const double keys = static_cast<double>(depth) + static_cast<double>(n_tok + 1) / 2;  // per token, on average
  const double iters = static_cast<double>(state.iterations());
  const double position_bytes = static_cast<double>(KvCache::position_bytes(h.n_head_kv, h.head_dim, type));
  if (n_tok == 1) state.counters["GB/s"] = benchmark::Counter(keys * position_bytes * iters, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * h.n_head * h.head_dim * keys * n_tok * iters / 1e9, benchmark::Counter::kIsRate);
}

void register_all() {
  for (const HeadShape& h : kShapes)
    for (Isa isa : kIsas)
      for (KvType type : {KvType::f16, KvType::q8, KvType::q4, KvType::k8v4})
        for (int64_t depth : {512, 4096, 16384})
          for (int64_t n_tok : {1, 512})
            for (bool cold : {false, true}) {
              if (isa == Isa::scalar && n_tok > 1) continue;  // seconds per call
              // 16k: the long-context decode of issue 25, 1.1B shape (the 7B's would fill 268 MB a
              // call) and vector kernels (the scalar reference would take minutes to fill it)
              if (depth > 4096 && (n_tok > 1 || h.n_head_kv != 4 || isa == Isa::scalar)) continue;
              if (cold && n_tok > 1) continue;                // prefill reuses each block: warm anyway
              const std::string name = std::string("attention/") + h.name + "/" + isa_name(isa) + "/" +
                                       kv_type_name(type) + "/d:" + std::to_string(depth) +
                                       "/t:" + std::to_string(n_tok) + (cold ? "/cold" : "");
              benchmark::RegisterBenchmark(name.c_str(), [&h, isa, type, depth, n_tok, cold](benchmark::State& st) {
                bench_attention(st, h, isa, type, depth, n_tok, cold);
              })->UseRealTime()->Unit(benchmark::kMicrosecond);
            }
}

}  // namespace
}  // namespace basalt::bench

int main(int argc, char** argv) {
  // As the basalt command runs: libgomp's idle threads would poll on the cores
  // the engine pool's attention needs (they made the /cold rows ~130 us slower).
  basalt::prefer_passive_openmp(argv);
  benchmark::Initialize(&argc, argv);
  basalt::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
