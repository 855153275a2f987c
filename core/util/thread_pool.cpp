// SPDX-License-Identifier: MIT
#include "core/util/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <memory>

#include "core/util/threads.h"

namespace basalt {

namespace {

// How long an idle thread polls before it sleeps, unless BASALT_SPIN_US says.
// Between two ops of a decode step the workers wait a few microseconds:
// polling keeps them awake for that; sleeping sooner costs a futex wake per
// op (docs/PERFORMANCE.md, "Threads").
constexpr int kDefaultSpinUs = 50;

thread_local int tls_thread = 0;
thread_local bool tls_in_unit = false;

constexpr uint64_t pack(uint32_t gen, uint64_t n, uint64_t next) {
  return static_cast<uint64_t>(gen & 0xFFFF) << 48 | n << 24 | next;
}
constexpr uint32_t units_of(uint64_t w) { return static_cast<uint32_t>(w >> 24) & 0xFFFFFF; }
constexpr uint32_t next_of(uint64_t w) { return static_cast<uint32_t>(w) & 0xFFFFFF; }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, int spin_us) : n_threads_(std::max(1, n_threads)) {
  if (spin_us < 0) {
    const char* env = std::getenv("BASALT_SPIN_US");
    spin_us = env ? std::atoi(env) : kDefaultSpinUs;
  }
  spin_ns_ = static_cast<int64_t>(std::max(0, spin_us)) * 1000;
  workers_.reserve(n_threads_ - 1);
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  epoch_.fetch_add(1);
  epoch_.notify_all();
  for (std::thread& w : workers_) w.join();
}

int ThreadPool::current_thread() { return tls_thread; }

void ThreadPool::pin_threads() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.empty()) return;
  auto pin = [&](pthread_t h, int t) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<size_t>(t) % cpus.size()], &one);
    pthread_setaffinity_np(h, sizeof one, &one);
  };
  pin(pthread_self(), 0);
  for (size_t i = 0; i < workers_.size(); ++i) pin(workers_[i].native_handle(), static_cast<int>(i) + 1);
}

// Polls `a` until it differs from old (or, until_zero, until it is 0) for at
// most spin_ns_; true if that happened.
bool ThreadPool::spin_until(const std::atomic<uint32_t>& a, uint32_t old, bool until_zero) const {
  if (spin_ns_ == 0) return false;
  const int64_t deadline = now_ns() + spin_ns_;
  for (int i = 1;; ++i) {
    const uint32_t v = a.load(std::memory_order_acquire);
    if (until_zero ? v == 0 : v != old) return true;
    cpu_relax();
    if (i % 64 == 0 && now_ns() > deadline) return false;
  }
}

void ThreadPool::dispatch(int64_t n_units, Call call, const void* fn) {
  if (n_units <= 0) return;
  std::unique_lock<std::mutex> lock(dispatch_mutex_, std::defer_lock);
  if (n_units == 1 || n_threads_ == 1 || tls_in_unit || !lock.try_lock()) {
    // Nested, or another thread's job is running: this thread does it all.
    const bool was_in_unit = tls_in_unit;
    tls_in_unit = true;
    for (int64_t u = 0; u < n_units; ++u) call(fn, u, tls_thread);
    tls_in_unit = was_in_unit;
    return;
  }
  call_ = call;
  fn_ = fn;
  pending_.store(static_cast<uint32_t>(n_units), std::memory_order_relaxed);
  gen_ = (gen_ + 1) & 0xFFFF;
  word_.store(pack(gen_, static_cast<uint64_t>(n_units), 0), std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) epoch_.notify_all();

  work(0);

  // Units still running on workers: poll, then sleep until the last one ends.
  if (!spin_until(pending_, 0, true)) {
    caller_sleeping_.store(1, std::memory_order_seq_cst);
    for (uint32_t p; (p = pending_.load(std::memory_order_seq_cst)) != 0;) pending_.wait(p, std::memory_order_seq_cst);
    caller_sleeping_.store(0, std::memory_order_relaxed);
  }
}

void ThreadPool::work(int thread) {
  tls_in_unit = true;
  uint64_t w = word_.load(std::memory_order_acquire);
  while (next_of(w) < units_of(w)) {
    if (!word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    call_(fn_, next_of(w), thread);
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_sleeping_.load(std::memory_order_seq_cst))
      pending_.notify_one();
    w = word_.load(std::memory_order_acquire);
  }
  tls_in_unit = false;
}

void ThreadPool::worker_main(int thread) {
  tls_thread = thread;
  uint32_t seen = 0;
  for (;;) {
    if (!spin_until(epoch_, seen, false)) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      epoch_.wait(seen, std::memory_order_seq_cst);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = epoch_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    work(thread);
  }
}

ThreadPool& engine_pool() {
  static std::mutex m;
  static std::unique_ptr<ThreadPool> pool;
  static std::atomic<ThreadPool*> ready{nullptr};
  static std::atomic<bool> pinned{false};
  const int n = thread_count();
  const bool pin = pin_threads_wanted();
  ThreadPool* p = ready.load(std::memory_order_acquire);
  if (p && p->size() == n && pin == pinned.load(std::memory_order_relaxed)) return *p;
  std::lock_guard<std::mutex> lock(m);
  if (!pool || pool->size() != n || pin != pinned) {
    ready.store(nullptr);
    pool.reset();
    pool = std::make_unique<ThreadPool>(n);
    if (pin) pool->pin_threads();
    pinned = pin;
    ready.store(pool.get(), std::memory_order_release);
  }
  return *pool;
}

}  // namespace basalt
