// SPDX-License-Identifier: MIT
// This machine's physical limits per thread count: memory read bandwidth
// (one and two read streams per thread) and the peak rates of the int8 and
// fp32 instruction chains the matmul kernels use. OpenMP threads, unpinned.
//
//   build/bin/basalt_peaks_bench --benchmark_min_time=0.2
//   BASALT_BENCH_MEM_MIB=2048 ...   (read buffer size, default 1024 MiB)
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "cpu/peaks.h"
#include "core/util/threads.h"

namespace basalt::bench {
namespace {

using cpu::ComputeKernel, cpu::ReadBuffer, cpu::ReadKernelInfo, cpu::Timing;

// Thread counts to measure: 1, 2, 4, ... up to the physical cores, and the
// core count itself.
std::vector<int> thread_counts() {
  const int cores = physical_core_count();
  std::vector<int> t;
  for (int n = 1; n < cores; n *= 2) t.push_back(n);
  t.push_back(cores);
  if (cores == 1) t.push_back(2);  // still show what two threads do
  return t;
}

void bench_read(benchmark::State& state, int threads, int streams) {
  static std::unique_ptr<ReadBuffer> buf;  // shared by all read benchmarks, made once
  if (!buf) buf = std::make_unique<ReadBuffer>(cpu::make_read_buffer(physical_core_count()));
  const ReadKernelInfo k = cpu::best_read_kernel();
  double seconds = 0, cpu = 0;
  for (auto _ : state) {
    const Timing t = cpu::run_read(k, *buf, threads, streams);
    state.SetIterationTime(t.seconds);
    seconds += t.seconds, cpu += t.cpu_seconds;
  }
  state.counters["cpu%"] = 100 * cpu / seconds;
  const double bytes = static_cast<double>(buf->bytes / threads / 16384 * 16384) * threads;
  state.counters["GB/s"] = bytes * static_cast<double>(state.iterations()) / seconds / 1e9;
  state.SetLabel(std::string(k.name) + " loads, " + std::to_string(buf->bytes >> 20) + " MiB");
}

void bench_compute(benchmark::State& state, const ComputeKernel& k, int threads) {
  if (!cpu_supports(k.isa)) {
    state.SkipWithError((std::string("CPU lacks ") + isa_name(k.isa)).c_str());
    return;
  }
  const int64_t rounds = cpu::kComputeRounds;
  cpu::run_compute(k, threads, rounds / 8);  // warm-up
  double seconds = 0, cpu = 0;
  for (auto _ : state) {
    const Timing t = cpu::run_compute(k, threads, rounds);
    state.SetIterationTime(t.seconds);
    seconds += t.seconds, cpu += t.cpu_seconds;
  }
  state.counters["cpu%"] = 100 * cpu / seconds;
  state.counters["GOP/s"] = k.ops_per_round * static_cast<double>(rounds) * threads *
                            static_cast<double>(state.iterations()) / seconds / 1e9;
}

void register_all() {
  for (int streams : {1, 2})
    for (int t : thread_counts())
      benchmark::RegisterBenchmark(
          ("mem_read/streams:" + std::to_string(streams) + "/threads:" + std::to_string(t)).c_str(),
          [=](benchmark::State& s) { bench_read(s, t, streams); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
  for (const ComputeKernel& k : cpu::compute_kernels())
    for (int t : thread_counts())
      benchmark::RegisterBenchmark((std::string(k.name) + "/threads:" + std::to_string(t)).c_str(),
                                   [&k, t](benchmark::State& s) { bench_compute(s, k, t); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace basalt::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  basalt::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
