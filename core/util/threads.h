// SPDX-License-Identifier: MIT
// Thread count: physical cores by default (SMT siblings share the FMA units
// and memory bandwidth that bound inference), and whether to pin them.
#pragma once

namespace basalt {

int physical_core_count();
// Sets the engine's threads (its worker pool, core/util/thread_pool.h, and
// the OpenMP threads oneDNN runs on); n <= 0 means physical_core_count().
// pin: each pool thread on a CPU of its own (also BASALT_CPU_AFFINITY=1); off
// by default: on a shared machine a pinned thread cannot move off a busy core.
void set_thread_count(int n, bool pin = false);
int thread_count();
bool pin_threads_wanted();

}  // namespace basalt
