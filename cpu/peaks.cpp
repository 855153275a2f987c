// SPDX-License-Identifier: MIT
#include "cpu/peaks.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace basalt::cpu {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

volatile uint64_t g_sink;  // results land here so no kernel is optimized away

// One contiguous part per thread, a multiple of 4 KiB * 4 streams.
size_t part_bytes(size_t total, int threads) { return total / threads / 16384 * 16384; }
}  // namespace

const std::vector<ComputeKernel>& compute_kernels() {
  static const std::vector<ComputeKernel> k = {
#if defined(BASALT_X86)
      {"int8_amx", Isa::amx, 4.0 * 16 * 16 * 64 * 2 / 8, int8_amx},  // not in the int8 peak: that is VNNI's
      {"int8_vnni_512", Isa::avx512, 16 * 2 * 64, int8_vnni_avx512},
      {"int8_vnni_256", Isa::avxvnni, 10 * 2 * 32, int8_vnni_avx2},
      {"int8_avx2", Isa::avx2, 8 * 2 * 32, int8_maddubs_avx2},
      {"fp32_fma_512", Isa::avx512, 16 * 2 * 16, fp32_fma_avx512},
      {"fp32_fma_256", Isa::avx2, 12 * 2 * 8, fp32_fma_avx2},
#endif
  };
  return k;
}

const ComputeKernel* find_compute_kernel(const char* name) {
  for (const ComputeKernel& k : compute_kernels())
    if (std::strcmp(k.name, name) == 0) return &k;
  return nullptr;
}

// Portable: 64-bit words, 4 accumulators per stream (the compiler vectorizes
// it for the baseline instruction set).
uint64_t read_portable(const uint8_t* p, size_t bytes, int streams) {
  const size_t part = bytes / streams / 8;
  uint64_t acc[4][4] = {};
  streams = std::min(streams, 4);
  for (size_t i = 0; i < part; i += 4)
    for (int s = 0; s < streams; ++s) {
      uint64_t w[4];
      std::memcpy(w, p + (s * part + i) * 8, sizeof w);
      for (int j = 0; j < 4; ++j) acc[s][j] += w[j];
    }
  uint64_t t = 0;
  for (auto& a : acc)
    for (uint64_t v : a) t += v;
  return t;
}

ReadKernelInfo best_read_kernel() {
#if defined(BASALT_X86)
  if (cpu_supports(Isa::avx512)) return {"avx512", read_avx512};
  if (cpu_supports(Isa::avx2)) return {"avx2", read_avx2};
#endif
  return {"portable", read_portable};
}

ReadBuffer make_read_buffer(int threads, size_t mib) {
  const char* env = std::getenv("BASALT_BENCH_MEM_MIB");
  if (mib == 0) mib = env && *env ? std::strtoull(env, nullptr, 10) : 1024;
  ReadBuffer b;
  b.bytes = std::max<size_t>(mib, 64) << 20;
  b.data = aligned_alloc_bytes(b.bytes);
  const size_t part = part_bytes(b.bytes, threads);
  uint8_t* p = b.data.get();
#pragma omp parallel num_threads(threads)
  {
    const int it = omp_get_thread_num();
    std::memset(p + it * part, it + 1, part);
  }
  return b;
}

double read_gbs(const ReadBuffer& buf, int threads, int passes) {
  const ReadKernelInfo k = best_read_kernel();
  const double bytes = static_cast<double>(part_bytes(buf.bytes, threads)) * threads;
  double best = 0;
  for (int i = 0; i < passes; ++i) best = std::max(best, bytes / run_read(k, buf, threads, 2).seconds / 1e9);
  return best;
}

Timing run_compute(const ComputeKernel& k, int threads, int64_t rounds) {
  uint64_t sink = 0;
  double least = 1e30;  // the min reduction includes this starting value
  const double t0 = now();
#pragma omp parallel num_threads(threads) reduction(^ : sink) reduction(min : least)
  {
    const double c0 = thread_cpu_seconds();
    sink ^= static_cast<uint64_t>(k.run(rounds));
    least = thread_cpu_seconds() - c0;
  }
  const double t = now() - t0;
  g_sink = g_sink ^ sink;
  return {t, least};
}

Timing run_read(const ReadKernelInfo& k, const ReadBuffer& buf, int threads, int streams) {
  const size_t part = part_bytes(buf.bytes, threads);
  uint64_t sink = 0;
  double least = 1e30;  // the min reduction includes this starting value
  const double t0 = now();
#pragma omp parallel num_threads(threads) reduction(^ : sink) reduction(min : least)
  {
    const double c0 = thread_cpu_seconds();
    sink ^= k.run(buf.data.get() + omp_get_thread_num() * part, part, streams);
    least = thread_cpu_seconds() - c0;
  }
  const double t = now() - t0;
  g_sink = g_sink ^ sink;
  return {t, least};
}

double best_compute_gops(const ComputeKernel& k, int threads, double* cpu_share) {
  const int64_t rounds = kComputeRounds;
  run_compute(k, threads, rounds / 8);  // warm-up: clocks and the thread pool
  const double g = k.ops_per_round * static_cast<double>(rounds) * threads / 1e9;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const Timing t = run_compute(k, threads, rounds);
    if (g / t.seconds > best) best = g / t.seconds, *cpu_share = std::min(*cpu_share, t.cpu_seconds / t.seconds);
  }
  return best;
}

const ComputeKernel* int8_kernel_of(Isa isa) {
  switch (isa) {
    case Isa::avx2: return find_compute_kernel("int8_avx2");
    case Isa::avxvnni: return find_compute_kernel("int8_vnni_256");
    case Isa::avx512: return find_compute_kernel("int8_vnni_512");
    case Isa::amx: return find_compute_kernel("int8_amx");
    default: return nullptr;
  }
}

Peaks measure_peaks(int threads) {
  Peaks p;
  auto keep = [&](double* best, double amount, const Timing& t) {
    if (amount / t.seconds > *best) *best = amount / t.seconds, p.cpu_share = std::min(p.cpu_share, t.cpu_seconds / t.seconds);
  };
  {
    const ReadBuffer buf = make_read_buffer(threads);
    const ReadKernelInfo rk = best_read_kernel();
    p.read_kernel = rk.name;
    const double gb = static_cast<double>(part_bytes(buf.bytes, threads)) * threads / 1e9;
    for (int streams : {1, 2})
      for (int rep = 0; rep < 3; ++rep) keep(&p.read_gbs, gb, run_read(rk, buf, threads, streams));
  }
  auto best = [&](std::initializer_list<const char*> names, double* gops, const char** which) {
    for (const char* n : names) {
      const ComputeKernel* k = find_compute_kernel(n);
      if (!k || !cpu_supports(k->isa)) continue;
      *gops = best_compute_gops(*k, threads, &p.cpu_share);
      *which = k->name;
      return;
    }
  };
  best({"int8_vnni_512", "int8_vnni_256", "int8_avx2"}, &p.int8_gops, &p.int8_kernel);
  best({"fp32_fma_512", "fp32_fma_256"}, &p.fp32_gops, &p.fp32_kernel);
  return p;
}

}  // namespace basalt::cpu
