// SPDX-License-Identifier: MIT
// y = x W^T for every weight format x ISA x the real matrix shapes of a 1.1B
// (TinyLlama), a 7B (Llama 2) and the default 135M (SmolLM2) model x tokens:
// 1 (decode: GB/s of weights streamed), 2-16 (a server's batch of decodes;
// 2 is the last count the decode kernels take, the count an MoE's expert often gets)
// and 64-512 (prefill: GOP/s = 2 * rows * cols * tokens / s).
// %bw and %op compare with this machine's read bandwidth and with the int8
// (quantized formats) or fp32 FMA (f32, f16, bf16) peak, measured at startup
// with bench/peaks.h or given in the environment. %isa (quantized formats)
// compares with the int8 peak of the instructions the ISA's own kernels use
// (vpmaddubsw + vpmaddwd for avx2, vpdpbusd for avxvnni and avx512, AMX tiles),
// measured when the first benchmark of that ISA runs.
//
// Weights rotate through copies of at least BASALT_BENCH_WSET_MIB (default
// 1024) MiB, as a model's layers do, so they come from memory, not cache.
// Dense formats from onednn_min_tokens() run through oneDNN unless
// BASALT_ONEDNN=0 (then the hand kernels, for comparison).
// Activations are quantized before timing (the engine does it once per
// tensor and shares it among the matmuls that read it). cpu% well below 100
// means other jobs took the cores and the figures are low.
//
//   build/bin/basalt_matmul_bench --benchmark_filter='/avx512/1.1b.ffn_down.*/t:1/' --benchmark_min_time=0.1
//
// Environment: BASALT_THREADS (default: physical cores); BASALT_PEAK_GBS,
// BASALT_PEAK_INT8_GOPS, BASALT_PEAK_FP32_GOPS (skip measuring that peak);
// BASALT_BENCH_SLOW=1 adds the scalar kernels at 512 tokens (minutes each).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_weights.h"
#include "cpu/peaks.h"
#include "core/util/threads.h"
#include "cpu/activations.h"
#include "cpu/matmul.h"
#include "cpu/onednn_matmul.h"

namespace basalt::bench {
namespace {

struct Shape {
  const char* name;
  int64_t rows, cols;  // W: [rows = n_out][cols = n_in]
};

const Shape kShapes[] = {
    {"1.1b.attn_q", 2048, 2048},   {"1.1b.attn_kv", 256, 2048},  {"1.1b.ffn_up", 5632, 2048},
    {"1.1b.ffn_down", 2048, 5632}, {"1.1b.output", 32000, 2048}, {"7b.attn_q", 4096, 4096},
    {"7b.ffn_up", 11008, 4096},    {"7b.ffn_down", 4096, 11008},  {"135m.ffn_up", 1536, 576},
    {"135m.ffn_down", 576, 1536},  // SmolLM2-135M, the default model: `basalt serve`'s batched decode
    {"moe.ffn_up", 2816, 1024},    {"moe.ffn_down", 1024, 2816},  // the MoE bench model's experts (~128 tokens each at pp512)
    {"qwen3moe.ffn_up", 768, 2048}, {"qwen3moe.ffn_down", 2048, 768},  // Qwen3-30B-A3B's experts (~32 tokens each at pp512)
    {"qwen3moe.router", 128, 2048},  // and its router (f32 in GGUF files)
};
const int64_t kTokens[] = {1, 2, 4, 8, 16, 32, 64, 128, 512};  // 16-128: a server's batches
const Isa kIsas[] = {Isa::scalar, Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx};

double env_double(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtod(v, nullptr) : fallback;
}

cpu::Peaks g_peaks;

// The copies of the current (format, shape), kept while consecutive
// benchmarks use them (they are registered in that order).
struct WeightSet {
  const BenchFormat* format = nullptr;
  int64_t rows = 0, cols = 0;
  std::vector<BenchWeight> copies;
};

const WeightSet& weight_set(const BenchFormat& f, const Shape& s) {
  static WeightSet set;
  if (!set.copies.empty() && set.format == &f && set.rows == s.rows && set.cols == s.cols) return set;
  set.copies.clear();
  set.format = &f, set.rows = s.rows, set.cols = s.cols;
  const double wset = env_double("BASALT_BENCH_WSET_MIB", 1024) * (1 << 20);
  set.copies.push_back(make_bench_weight(f, s.rows, s.cols, 1));
  const double bytes = static_cast<double>(set.copies[0].w.total_bytes());
  const int n = static_cast<int>(std::min(4096.0, std::ceil(wset / bytes)));
  for (int i = 1; i < n; ++i) set.copies.push_back(make_bench_weight(f, s.rows, s.cols, i + 1));
  return set;
}

struct Acts {
  int64_t n_tok = 0, cols = 0;
  std::vector<float> x;
  QuantizedActs xq;
};

const Acts& acts(int64_t n_tok, int64_t cols) {
  static Acts a;
  if (a.n_tok == n_tok && a.cols == cols) return a;
  a.n_tok = n_tok, a.cols = cols;
  a.x.resize(static_cast<size_t>(n_tok * cols));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 1);
  for (float& v : a.x) v = nd(rng);
  quantize_activations(a.x.data(), n_tok, cols, a.xq);
  return a;
}

// GOP/s of the int8 chain isa's qa kernels are built from (cpu::int8_kernel_of),
// measured once per ISA; negative where there is none.
double isa_int8_peak(Isa isa) {
  static double peaks[static_cast<int>(Isa::amx) + 1] = {};
  double& p = peaks[static_cast<int>(isa)];
  if (p == 0) {
    const cpu::ComputeKernel* k = cpu::int8_kernel_of(isa);
    double share = 1;
    p = k && cpu_supports(k->isa) ? cpu::best_compute_gops(*k, thread_count(), &share) : -1;
  }
  return p;
}

void bench_matmul(benchmark::State& state, const BenchFormat& f, Isa isa, const Shape& s, int64_t n_tok) {
  if (!cpu_supports(isa)) {
    state.SkipWithError((std::string("CPU lacks ") + isa_name(isa)).c_str());
    return;
  }
  const WeightSet& set = weight_set(f, s);
  const Acts& a = acts(n_tok, s.cols);
  const double isa_peak = set.copies[0].w.format == WeightFormat::qa ? isa_int8_peak(isa) : 0;
  std::vector<float> y(static_cast<size_t>(n_tok * s.rows));
  size_t i = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu::process_cpu_seconds();
  for (auto _ : state) {
    const Weight& w = set.copies[i].w;
    i = i + 1 == set.copies.size() ? 0 : i + 1;
    matmul(MatmulArgs{.w = &w, .x = a.x.data(), .xq = &a.xq, .n_tok = n_tok, .y = y.data(), .ldy = s.rows, .r0 = 0, .r1 = s.rows},
           isa);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu_s = cpu::process_cpu_seconds() - c0;
  const Weight& w = set.copies[0].w;
  const double iters = static_cast<double>(state.iterations());
  const double bytes = static_cast<double>(w.total_bytes()) * iters;
  const double ops = 2.0 * static_cast<double>(s.rows) * static_cast<double>(s.cols) * static_cast<double>(n_tok) * iters;
  const double gbs = bytes / seconds / 1e9, gops = ops / seconds / 1e9;
  state.counters["GB/s"] = gbs;
  state.counters["GOP/s"] = gops;
  state.counters["%bw"] = 100 * gbs / g_peaks.read_gbs;
  const double op_peak = w.format == WeightFormat::qa ? g_peaks.int8_gops : g_peaks.fp32_gops;
  if (op_peak > 0) state.counters["%op"] = 100 * gops / op_peak;
  if (isa_peak > 0) state.counters["%isa"] = 100 * gops / isa_peak;
  // Process CPU time over wall time x threads (waiting OpenMP threads spin, so
  // about 100 when the machine was ours; far below, other jobs took the cores).
  state.counters["cpu%"] = 100 * cpu_s / (seconds * thread_count());
  std::string label = w.describe();
  if (isa != Isa::scalar && find_matmul_kernel(w, isa) == find_matmul_kernel(w, static_cast<Isa>(static_cast<int>(isa) - 1)))
    label += ", no own kernel: lower ISA's";
#if defined(BASALT_X86)
  else if (isa == Isa::amx && w.format == WeightFormat::qa && n_tok < kernels::amx_min_tokens(w))
    label += ", AVX-512 kernel below " + std::to_string(kernels::amx_min_tokens(w)) + " tokens";
#endif
  if (onednn_wanted(w, n_tok, isa))
    label += ", oneDNN (best ISA)";
  state.SetLabel(label);
}

void register_all() {
  const bool slow = env_double("BASALT_BENCH_SLOW", 0) != 0;
  for (const BenchFormat& f : kBenchFormats)
    for (const Shape& s : kShapes)
      for (Isa isa : kIsas)
        for (int64_t t : kTokens) {
          if (isa == Isa::scalar && t > 16 && !slow) continue;
          const std::string name = std::string("matmul/") + f.name + "/" + isa_name(isa) + "/" + s.name + "." +
                                   std::to_string(s.rows) + "x" + std::to_string(s.cols) + "/t:" + std::to_string(t);
          benchmark::RegisterBenchmark(name.c_str(), [&f, isa, &s, t](benchmark::State& st) { bench_matmul(st, f, isa, s, t); })
              ->UseRealTime()
              ->Unit(t == 1 ? benchmark::kMicrosecond : benchmark::kMillisecond);
        }
}

// Peaks for the percentages: from the environment, or measured now with the
// benchmark's thread count (about a second).
void set_peaks(int threads) {
  g_peaks.read_gbs = env_double("BASALT_PEAK_GBS", 0);
  g_peaks.int8_gops = env_double("BASALT_PEAK_INT8_GOPS", 0);
  g_peaks.fp32_gops = env_double("BASALT_PEAK_FP32_GOPS", 0);
  g_peaks.read_kernel = g_peaks.int8_kernel = g_peaks.fp32_kernel = "from the environment";
  if (g_peaks.read_gbs <= 0 || g_peaks.int8_gops <= 0 || g_peaks.fp32_gops <= 0) {
    const cpu::Peaks m = cpu::measure_peaks(threads);
    if (g_peaks.read_gbs <= 0) g_peaks.read_gbs = m.read_gbs, g_peaks.read_kernel = m.read_kernel;
    if (g_peaks.int8_gops <= 0) g_peaks.int8_gops = m.int8_gops, g_peaks.int8_kernel = m.int8_kernel;
    if (g_peaks.fp32_gops <= 0) g_peaks.fp32_gops = m.fp32_gops, g_peaks.fp32_kernel = m.fp32_kernel;
    g_peaks.cpu_share = m.cpu_share;
  }
  if (g_peaks.cpu_share < 0.9)
    std::fprintf(stderr, "basalt_matmul_bench: the machine is busy (a measuring thread got %.0f%% of a core): the peaks are low\n",
                 100 * g_peaks.cpu_share);
  char line[256];
  std::snprintf(line, sizeof line, "read %.1f GB/s (%s), int8 %.0f GOP/s (%s), fp32 %.0f GOP/s (%s)", g_peaks.read_gbs,
                g_peaks.read_kernel, g_peaks.int8_gops, g_peaks.int8_kernel, g_peaks.fp32_gops, g_peaks.fp32_kernel);
  benchmark::AddCustomContext("basalt_peaks", line);
  benchmark::AddCustomContext("basalt_threads", std::to_string(threads));
}

}  // namespace
}  // namespace basalt::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const char* t = std::getenv("BASALT_THREADS");
  basalt::set_thread_count(t && *t ? std::atoi(t) : 0);
  basalt::bench::register_all();
  basalt::bench::set_peaks(basalt::thread_count());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
