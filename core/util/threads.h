// SPDX-License-Identifier: MIT
// Thread count: physical cores by default (SMT siblings share the FMA units
// and memory bandwidth that bound inference), and whether to pin them.
#pragma once

namespace basalt {

// The physical cores among the CPUs this process may run on (its affinity mask).
int physical_core_count();
// Sets the engine's threads (its worker pool, core/util/thread_pool.h, and
// the OpenMP threads oneDNN runs on); n <= 0 means physical_core_count().
// pin: each pool thread on a CPU of its own (also BASALT_CPU_AFFINITY=1); off
// by default: on a shared machine a pinned thread cannot move off a busy core.
void set_thread_count(int n, bool pin = false);
int thread_count();
bool pin_threads_wanted();

// libgomp's idle threads poll between parallel regions (OMP_WAIT_POLICY
// unset: GOMP_SPINCOUNT 300000 polls) on the cores the engine pool needs
// next: after each oneDNN GEMM (a MoE router, a dense model's projections)
// they take a share of its work (docs/PERFORMANCE.md 8.4). Where the user
// chose no policy this sets OMP_WAIT_POLICY=PASSIVE and runs the program
// again (/proc/self/exe, the same argv): libgomp reads its environment when
// it loads, before main. Call it first thing in main; it returns where the
// policy is set already, or where the exec failed (nothing changed then).
void prefer_passive_openmp(char** argv);

}  // namespace basalt
