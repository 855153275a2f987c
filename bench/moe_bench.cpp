// SPDX-License-Identifier: MIT
// One mixture-of-experts feed-forward layer (cpu::moe_ffn: router, top k,
// each expert's gate, up and down over its tokens, the weighted sum) on the
// real shapes of Qwen3-30B-A3B (128 experts of 768, top 8) and of the MoE
// bench model (8 experts of 2816, top 2), on the engine's ISA (BASALT_ISA).
// GOP/s counts the experts' work (2 * tokens * k * 3 * d * n_ff / s), so it
// compares directly with basalt_matmul_bench's rate for one expert's matrix
// at the tokens each expert gets; what the layer loses against that is its
// overhead (routing, gathering, the parts' fork and join). GB/s counts the
// bytes of the experts the tokens chose (decode: what must stream from memory;
// the small moe8x layer, 39 MB at Q4_0, partly stays in a large L3).
//
// The input rotates through 16 random batches, so the routing (and at one
// token the experts read) changes from call to call.
//
//   build/bin/basalt_moe_bench --benchmark_filter='qwen3moe/q4_k/t:32' --benchmark_min_time=2
//
// Environment: BASALT_THREADS (default: physical cores), BASALT_ISA.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_weights.h"
#include "core/util/threads.h"
#include "cpu/isa.h"
#include "cpu/moe.h"

namespace basalt::bench {
namespace {

struct MoeShape {
  const char* name;
  int64_t d, n_ff, n_expert, n_used;
};

const MoeShape kShapes[] = {
    {"qwen3moe", 2048, 768, 128, 8},  // Qwen3-30B-A3B
    {"moe8x", 1024, 2816, 8, 2},      // scripts/make_bench_models.sh's moe-8x
};
struct Type {
  const char* name;
  GgmlType type;
};
const Type kTypes[] = {{"q4_0", GgmlType::q4_0}, {"q4_k", GgmlType::q4_k}};
const int64_t kTokens[] = {1, 8, 32, 128, 512};
constexpr int kInputs = 16;

struct Layer {
  BenchWeight router, gate, up, down;
  MoeWeights moe;
};

const Layer& layer(const MoeShape& s, GgmlType type) {
  static Layer l;
  static const MoeShape* shape = nullptr;
  static GgmlType held = GgmlType::f32;
  if (shape == &s && held == type) return l;
  shape = &s, held = type;
  l.router = make_bench_weight(GgmlType::f32, s.n_expert, s.d, 1);
  l.gate = make_bench_weight(type, s.n_expert * s.n_ff, s.d, 2);
  l.up = make_bench_weight(type, s.n_expert * s.n_ff, s.d, 3);
  l.down = make_bench_weight(type, s.n_expert * s.d, s.n_ff, 4);
  l.moe = MoeWeights{&l.router.w, &l.gate.w, &l.up.w, &l.down.w, s.n_expert, s.n_used, s.n_ff};
  return l;
}

void bench_moe(benchmark::State& state, const MoeShape& s, GgmlType type, int64_t n_tok) {
  const Layer& l = layer(s, type);
  std::vector<std::vector<float>> inputs(kInputs, std::vector<float>(static_cast<size_t>(n_tok * s.d)));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 1);
  for (auto& x : inputs)
    for (float& v : x) v = nd(rng);
  std::vector<float> y(static_cast<size_t>(n_tok * s.d));
  cpu::MoeScratch scratch;
  double chosen_bytes = 0;  // of the experts each call reads
  const double expert_bytes = static_cast<double>(l.gate.w.total_bytes() + l.up.w.total_bytes() + l.down.w.total_bytes()) /
                              static_cast<double>(s.n_expert);
  size_t i = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    cpu::moe_ffn(l.moe, inputs[i].data(), y.data(), n_tok, s.d, scratch);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    chosen_bytes += expert_bytes * static_cast<double>(std::set<int32_t>(scratch.choice.begin(), scratch.choice.end()).size());
    i = (i + 1) % kInputs;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double ops = 2.0 * static_cast<double>(n_tok * s.n_used * 3 * s.d * s.n_ff) * static_cast<double>(state.iterations());
  state.counters["GOP/s"] = ops / seconds / 1e9;
  state.counters["GB/s"] = chosen_bytes / seconds / 1e9;
  state.SetLabel(l.gate.w.describe() + ", " + isa_name(selected_isa()));
}

void register_all() {
  for (const MoeShape& s : kShapes)
    for (const Type& type : kTypes)
      for (int64_t t : kTokens) {
        const std::string name = std::string("moe/") + s.name + "/" + type.name + "/t:" + std::to_string(t);
        benchmark::RegisterBenchmark(name.c_str(), [&s, &type, t](benchmark::State& st) { bench_moe(st, s, type.type, t); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
}

}  // namespace
}  // namespace basalt::bench

int main(int argc, char** argv) {
  basalt::prefer_passive_openmp(argv);  // as the basalt command runs: the router is oneDNN's from 8 tokens
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const char* t = std::getenv("BASALT_THREADS");
  basalt::set_thread_count(t && *t ? std::atoi(t) : 0);
  basalt::bench::register_all();
  benchmark::AddCustomContext("basalt_threads", std::to_string(basalt::thread_count()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
