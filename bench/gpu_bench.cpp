// SPDX-License-Identifier: MIT
// The Vulkan shaders on the device tests and `--gpu` would take (lavapipe
// included, where the figures only prove it runs): the device's read
// bandwidth (the roofline), matmul GEMV (1 token: GB/s of weights and %bw)
// and tiled GEMM (512 tokens: GFLOP/s) on a 7B model's shapes per weight
// format, decode attention over a long KV cache (GB/s of K and V, %bw) and
// a causal prefill of 512 tokens (GFLOP/s), with an f16 and a q8 cache.
// Each timed iteration records kReps dispatches and submits them once, so
// submission costs little; the time is per dispatch.
//
//   build/bin/basalt_gpu_bench --benchmark_filter='matmul/q4_0/.*/t:1'
//
// Environment: BASALT_GPU_DEVICE=N (default: the one `--gpu all` takes);
// BASALT_GPU_PEAK_GBS skips measuring the read bandwidth (gpu::measure_device).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_weights.h"
#include "core/graph/kv_cache.h"
#include "gpu/auto_placement.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "gpu/pipeline.h"
#include "gpu/stream.h"

namespace basalt::bench {
namespace {

constexpr int kReps = 10;

gpu::Device* g_dev = nullptr;
double g_peak_gbs = 0;

struct Shape {
  const char* name;
  int64_t rows, cols;
};
const Shape kShapes[] = {{"7b.attn_q", 4096, 4096}, {"7b.ffn_up", 11008, 4096}, {"7b.ffn_down", 4096, 11008}};
const BenchFormat kFormats[] = {{"f16", GgmlType::f16},   {"q4_0", GgmlType::q4_0}, {"q8_0", GgmlType::q8_0},
                                {"q4_k", GgmlType::q4_k}, {"q6_k", GgmlType::q6_k}};

// Runs record() kReps times per submission, reports seconds per dispatch,
// and returns the mean.
template <class Record>
double time_dispatches(benchmark::State& state, Record record) {
  gpu::Stream s(*g_dev);
  record(s);  // warm-up: pipelines made, caches filled
  s.finish();
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kReps; ++i) record(s);
    s.finish();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kReps;
    state.SetIterationTime(sec);
    total += sec;
  }
  return total / static_cast<double>(state.iterations());
}

// GB/s of `bytes` per dispatch, and the share of the device's read bandwidth.
void report_bytes(benchmark::State& state, double bytes, double sec) {
  state.counters["GB/s"] = bytes / sec / 1e9;
  if (g_peak_gbs > 0) state.counters["%bw"] = 100 * bytes / sec / 1e9 / g_peak_gbs;
}

void matmul_bench(benchmark::State& state, const BenchFormat& f, const Shape& shape, int64_t tokens) {
  BenchWeight bw = make_bench_weight(f.type, shape.rows, shape.cols, 1);
  gpu::GpuMatrix m = gpu::upload_matrix(*g_dev, bw.w);
  gpu::Buffer x(*g_dev, static_cast<size_t>(tokens * shape.cols) * 4, gpu::Memory::device, "x");
  gpu::Buffer y(*g_dev, static_cast<size_t>(tokens * shape.rows) * 4, gpu::Memory::device, "y");
  const double sec = time_dispatches(state, [&](gpu::Stream& s) {
    gpu::matmul(*g_dev, s, {&m, 0, &x, 0, shape.cols, &y, 0, shape.rows, tokens});
  });
  report_bytes(state, static_cast<double>(bw.w.total_bytes()), sec);
  state.counters["GFLOP/s"] = 2.0 * shape.rows * shape.cols * tokens / sec / 1e9;
}

// n_tok tokens of a 7B-like layer (32 heads of 128, 8 KV heads) after `depth`
// cached positions: decode (1 token), or causal prefill.
void attention_bench(benchmark::State& state, KvType type, int64_t depth, int64_t n_tok) {
  const int64_t n_head = 32, n_kv = 8, hd = 128, blocks = (depth + n_tok - 1) / 64 + 1;
  const int64_t block_bytes = KvCache::block_bytes(n_kv, hd, type);
  const size_t kv_bytes = static_cast<size_t>(blocks * block_bytes);
  gpu::Buffer k(*g_dev, kv_bytes, gpu::Memory::device, "keys"), v(*g_dev, kv_bytes, gpu::Memory::device, "values");
  gpu::Buffer q(*g_dev, static_cast<size_t>(n_tok * n_head * hd) * 4, gpu::Memory::device, "q");
  gpu::Buffer o(*g_dev, static_cast<size_t>(n_tok * n_head * hd) * 4, gpu::Memory::device, "o");
  gpu::Buffer pos(*g_dev, static_cast<size_t>(n_tok) * 4, gpu::Memory::device, "pos");
  gpu::Buffer part(*g_dev, gpu::attention_partial_bytes(hd), gpu::Memory::device, "partials");
  gpu::Buffer table(*g_dev, static_cast<size_t>(blocks) * 4, gpu::Memory::device, "block table");
  {
    gpu::Stream s(*g_dev);
    std::vector<int32_t> positions(static_cast<size_t>(n_tok));
    for (int64_t t = 0; t < n_tok; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(depth + t);
    s.upload(pos, positions.data(), positions.size() * 4);
    std::vector<int32_t> ids(static_cast<size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b) ids[static_cast<size_t>(b)] = static_cast<int32_t>(b);
    s.upload(table, ids.data(), ids.size() * 4);
    s.fill_zero(k, 0, kv_bytes);
    s.fill_zero(v, 0, kv_bytes);
    s.fill_zero(q, 0, q.size());
    s.finish();
  }
  const gpu::AttentionOp op{&q, 0, n_head * hd, &k, &v, type, &table, 0, block_bytes, &pos, 0, &o, 0, n_head * hd, n_tok, n_head,
                            n_kv, hd, 0, &part, depth + n_tok - 1};
  const double sec = time_dispatches(state, [&](gpu::Stream& s) { gpu::attention(*g_dev, s, op); });
  report_bytes(state, static_cast<double>((depth + n_tok) * KvCache::position_bytes(n_kv, hd, type)), sec);  // K and V once
  // Scores and P V: 4 flops per (query row, key, dimension) seen.
  const double pairs = static_cast<double>(n_tok) * depth + static_cast<double>(n_tok) * (n_tok + 1) / 2;
  state.counters["GFLOP/s"] = 4.0 * pairs * n_head * hd / sec / 1e9;
}

}  // namespace
}  // namespace basalt::bench

int main(int argc, char** argv) {
  using namespace basalt;
  using namespace basalt::bench;
  benchmark::Initialize(&argc, argv);
  std::string why;
  const std::vector<gpu::GpuInfo> gpus = gpu::list_gpus(&why);
  const char* want = std::getenv("BASALT_GPU_DEVICE");
  const int index = want ? std::atoi(want) : gpu::pick_gpu(gpus, /*allow_cpu=*/true);
  if (gpus.empty() || index < 0 || index >= static_cast<int>(gpus.size())) {
    std::fprintf(stderr, "basalt_gpu_bench: no Vulkan device%s%s\n", why.empty() ? "" : ": ", why.c_str());
    return 77;  // ctest's skip code (tests/CMakeLists.txt runs this once)
  }
  std::unique_ptr<gpu::Device> dev;
  try {
    dev = gpu::Device::open(index);
  } catch (const gpu::GpuError& e) {
    std::fprintf(stderr, "basalt_gpu_bench: %s\n", e.what());
    return 1;
  }
  g_dev = dev.get();
  const char* peak = std::getenv("BASALT_GPU_PEAK_GBS");
  if (peak) {
    g_peak_gbs = std::atof(peak);
  } else {
    gpu::Throughputs t;
    gpu::measure_device(*g_dev, t);
    g_peak_gbs = t.gpu_read_gbs;
    benchmark::AddCustomContext("gpu_copy_GBps", std::to_string(t.link_gbs));
    benchmark::AddCustomContext("gpu_sync_us", std::to_string(t.node_us));
  }
  benchmark::AddCustomContext("gpu", g_dev->info().describe());
  benchmark::AddCustomContext("gpu_read_GBps", std::to_string(g_peak_gbs));
  benchmark::AddCustomContext("gpu_shaders", g_dev->variants());
  for (const BenchFormat& f : kFormats)
    for (const Shape& shape : kShapes)
      for (int64_t tokens : {1, 4, 8, 15, 16, 32, 64, 512})  // 15 and 16: either side of kTiledMatmulTokens
        benchmark::RegisterBenchmark(("matmul/" + std::string(f.name) + "/" + shape.name + "/t:" + std::to_string(tokens)).c_str(),
                                     matmul_bench, f, shape, tokens)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
  for (KvType type : {KvType::f16, KvType::q8}) {
    const std::string kv = std::string("/") + kv_type_name(type);
    for (int64_t depth : {4096, 32768})
      benchmark::RegisterBenchmark(("attention/decode" + kv + "/depth:" + std::to_string(depth)).c_str(), attention_bench,
                                   type, depth, 1)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("attention/prefill" + kv + "/tokens:512").c_str(), attention_bench, type, 0, 512)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
