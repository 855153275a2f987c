// SPDX-License-Identifier: MIT
// The engine's worker pool: size() - 1 persistent threads plus the caller.
// A job is a count of units; every thread, the caller included, claims units
// one at a time from a shared counter until none is left, so a thread that is
// late or descheduled finds its share done by the others instead of stalling
// them. (OpenMP's static parts and barriers waited for it: one busy core
// divided decode speed by nine, docs/PERFORMANCE.md.) Idle threads spin for
// a short while, then sleep on a futex.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace basalt {

class ThreadPool {
 public:
  static constexpr int64_t kMaxUnits = (int64_t{1} << 24) - 1;

  // n_threads counts the caller (at least 1). spin_us: how long an idle
  // thread polls before it sleeps (negative: BASALT_SPIN_US or the default).
  explicit ThreadPool(int n_threads, int spin_us = -1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(unit, thread) for every unit in [0, n_units) (at most kMaxUnits)
  // on the caller (thread 0) and the workers (1 .. size() - 1), and returns
  // when every call has returned. A call from inside a unit, or while another
  // thread's job runs, is run by the calling thread alone.
  template <class Fn>
  void run(int64_t n_units, Fn&& fn) {
    for (int64_t base = 0; base < n_units; base += kMaxUnits) {
      auto shifted = [&](int64_t unit, int thread) { fn(base + unit, thread); };
      using F = decltype(shifted);
      dispatch(std::min(kMaxUnits, n_units - base),
               [](const void* f, int64_t unit, int thread) { (*static_cast<const F*>(f))(unit, thread); }, &shifted);
    }
  }

  // The index of the pool thread running the current unit (0 outside a job).
  static int current_thread();

  // Pins thread t to the t-th CPU this process may run on (off by default).
  void pin_threads();

 private:
  using Call = void (*)(const void* fn, int64_t unit, int thread);
  void dispatch(int64_t n_units, Call call, const void* fn);
  void work(int thread);
  void worker_main(int thread);
  bool spin_until(const std::atomic<uint32_t>& a, uint32_t old, bool until_zero) const;

  const int n_threads_;
  int64_t spin_ns_;
  std::vector<std::thread> workers_;
  std::mutex dispatch_mutex_;  // one job at a time

  // The current job: generation (16 bits) | units (24) | next unit (24). A
  // unit is claimed by a compare-and-swap on it; call_ and fn_ are written
  // before it is published and read only by a thread holding a claim.
  alignas(64) std::atomic<uint64_t> word_{0};
  Call call_ = nullptr;
  const void* fn_ = nullptr;
  uint32_t gen_ = 0;
  alignas(64) std::atomic<uint32_t> pending_{0};  // units not yet finished
  std::atomic<uint32_t> caller_sleeping_{0};
  alignas(64) std::atomic<uint32_t> epoch_{0};  // bumped per job; idle workers wait on it
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<bool> stop_{false};
};

// The process's pool, of thread_count() threads (core/util/threads.h).
ThreadPool& engine_pool();

// Runs body(begin, end) over [0, n) on the engine's pool in chunks of at
// least `grain` (a few per thread, so a late thread's share is small); runs
// inline when n is below 2 * grain.
template <class Body>
void parallel_for(int64_t n, int64_t grain, Body&& body) {
  if (n <= 0) return;
  ThreadPool& pool = engine_pool();
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(n / grain, int64_t{4} * pool.size());
  if (chunks < 2 || pool.size() == 1) {
    body(int64_t{0}, n);
    return;
  }
  chunks = std::min(chunks, ThreadPool::kMaxUnits);
  pool.run(chunks, [&](int64_t c, int) { body(n * c / chunks, n * (c + 1) / chunks); });
}

}  // namespace basalt
