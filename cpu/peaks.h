// SPDX-License-Identifier: MIT
// This machine's physical limits: memory read bandwidth and the peak rate of
// the instruction chains the matmul kernels are built from. Used by
// peaks_bench (the figures themselves), matmul_bench (the percentage of peak
// of each kernel) and `basalt bench --roofline` (decode against the read
// bandwidth measured beside it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu/isa.h"
#include "quant/weight.h"

namespace basalt::cpu {

// A chain of one instruction kind, many independent accumulators: runs
// `rounds` rounds on the calling thread and returns a value to keep alive.
// Operations count a multiply-add as 2, as GOP/s of a matmul (2*rows*cols*tokens).
struct ComputeKernel {
  const char* name;
  Isa isa;                // the CPU must support it
  double ops_per_round;
  int64_t (*run)(int64_t rounds);
};

// Rounds of one timed pass: 15-30 ms, so that a thread that starts a few ms
// late (a busy core hands over at the next scheduler tick) costs little.
constexpr int64_t kComputeRounds = int64_t{1} << 23;

// All compute kernels this build has (whether or not the CPU runs them).
const std::vector<ComputeKernel>& compute_kernels();
const ComputeKernel* find_compute_kernel(const char* name);

// Reads [p, p + bytes) as `streams` equal parts advanced side by side; bytes
// is a multiple of 4096 * streams. Returns a sum so the reads cannot vanish.
using ReadKernel = uint64_t (*)(const uint8_t* p, size_t bytes, int streams);
struct ReadKernelInfo {
  const char* name;
  ReadKernel run;
};
ReadKernelInfo best_read_kernel();  // the widest loads the CPU has

// A buffer for the bandwidth tests: mib MiB (0: BASALT_BENCH_MEM_MIB, default
// 1024; at least 64), 64-byte aligned, written once by the threads that will read it.
struct ReadBuffer {
  AlignedBytes data;
  size_t bytes = 0;
};
ReadBuffer make_read_buffer(int threads, size_t mib = 0);

// One timed pass on `threads` OpenMP threads. cpu_seconds is the least CPU
// time any thread got: far below seconds, the machine was busy and the
// figure is low (the machines are shared). run_read splits the buffer into
// one contiguous part per thread.
struct Timing {
  double seconds = 0, cpu_seconds = 0;
};
Timing run_compute(const ComputeKernel& k, int threads, int64_t rounds);
Timing run_read(const ReadKernelInfo& k, const ReadBuffer& buf, int threads, int streams);
// GB/s of the best of `passes` reads of buf, 2 streams per thread.
double read_gbs(const ReadBuffer& buf, int threads, int passes = 2);
double thread_cpu_seconds();
double process_cpu_seconds();

// Quick figures (about a second) for `threads` threads: the best of a few
// passes of the 1- and 2-stream reads, of the int8 dot product (VNNI if the
// CPU has it, else AVX2) and of the fp32 FMA (512- or 256-bit).
struct Peaks {
  double read_gbs = 0, int8_gops = 0, fp32_gops = 0;
  double cpu_share = 1;  // the least share of the CPU a measuring thread got
  const char *read_kernel = "", *int8_kernel = "none", *fp32_kernel = "none";
};
Peaks measure_peaks(int threads);
// GOP/s of kernel k on `threads` threads: the best of 3 passes after a warm-up;
// *cpu_share lowered to the least share of a core a measuring thread got.
double best_compute_gops(const ComputeKernel& k, int threads, double* cpu_share);
// The int8 chain the qa kernels of isa are built from (int8_vnni_512 for
// avx512, int8_vnni_256 for avxvnni, int8_avx2 for avx2, int8_amx for amx):
// their percentage of the peak is against it. nullptr for scalar.
const ComputeKernel* int8_kernel_of(Isa isa);

// Kernels of one instruction set (peaks_amx.cpp, peaks_avx512.cpp, peaks_avx2.cpp).
#if defined(BASALT_X86)
int64_t int8_amx(int64_t rounds);
int64_t int8_vnni_avx512(int64_t rounds);
int64_t fp32_fma_avx512(int64_t rounds);
uint64_t read_avx512(const uint8_t* p, size_t bytes, int streams);
int64_t int8_maddubs_avx2(int64_t rounds);
int64_t int8_vnni_avx2(int64_t rounds);  // AVX-VNNI
int64_t fp32_fma_avx2(int64_t rounds);
uint64_t read_avx2(const uint8_t* p, size_t bytes, int streams);
#endif
uint64_t read_portable(const uint8_t* p, size_t bytes, int streams);

}  // namespace basalt::cpu
