// SPDX-License-Identifier: MIT
// The worker pool: every unit runs exactly once, with more threads than
// cores and threads that stall inside units, through thousands of jobs; nested
// and concurrent calls run inline. Also built with ThreadSanitizer
// (threads_tsan in tests/CMakeLists.txt).
#include "core/util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace basalt {
namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  return x ^ (x >> 29);
}

TEST(ThreadPool, EveryUnitRunsOnceOnAThreadOfThePool) {
  for (int threads : {1, 2, 3, 8}) {
    for (int spin_us : {0, 50}) {
      ThreadPool pool(threads, spin_us);
      for (int64_t n : {0, 1, 2, 7, 64, 1000}) {
        std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
        std::vector<std::atomic<int>> by_thread(static_cast<size_t>(threads));
        pool.run(n, [&](int64_t u, int t) {
          runs[static_cast<size_t>(u)]++;
          ASSERT_GE(t, 0);
          ASSERT_LT(t, threads);
          EXPECT_EQ(ThreadPool::current_thread(), t);
          by_thread[static_cast<size_t>(t)]++;
        });
        for (int64_t u = 0; u < n; ++u) ASSERT_EQ(runs[static_cast<size_t>(u)], 1) << "unit " << u << " of " << n;
        int total = 0;
        for (auto& c : by_thread) total += c;
        EXPECT_EQ(total, n);
      }
    }
  }
}

// More threads than this machine's cores, and units that sleep at random:
// 10,000 jobs give the single-thread result and none hangs.
TEST(ThreadPool, StressWithStallsMatchesOneThread) {
  constexpr int kJobs = 10000;
  const int threads = static_cast<int>(std::max(4u, 2 * std::thread::hardware_concurrency()));
  for (int spin_us : {0, 20}) {
    ThreadPool pool(threads, spin_us);
    std::mt19937_64 rng(42);
    std::vector<uint64_t> out;
    for (int job = 0; job < kJobs; ++job) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % 24);
      const uint64_t seed = rng();
      out.assign(static_cast<size_t>(n), 0);
      pool.run(n, [&](int64_t u, int) {
        const uint64_t h = mix(seed + static_cast<uint64_t>(u));
        if (h % 61 == 0) std::this_thread::sleep_for(std::chrono::microseconds(h % 300));  // a stalled thread
        out[static_cast<size_t>(u)] = h;
      });
      uint64_t want = 0, got = 0;
      for (int64_t u = 0; u < n; ++u) {
        want += mix(seed + static_cast<uint64_t>(u));
        got += out[static_cast<size_t>(u)];
      }
      ASSERT_EQ(got, want) << "job " << job;
    }
  }
}

TEST(ThreadPool, NestedRunsInline) {
  ThreadPool pool(3, 50);
  std::vector<std::atomic<int>> cells(8 * 8);
  pool.run(8, [&](int64_t i, int outer) {
    pool.run(8, [&](int64_t j, int inner) {
      EXPECT_EQ(inner, outer);  // on the same thread
      cells[static_cast<size_t>(i * 8 + j)]++;
    });
  });
  for (auto& c : cells) EXPECT_EQ(c, 1);
}

TEST(ThreadPool, ConcurrentCallersBothFinish) {
  ThreadPool pool(4, 10);
  std::atomic<int64_t> a{0}, b{0};
  std::thread t1([&] {
    for (int i = 0; i < 2000; ++i) pool.run(16, [&](int64_t u, int) { a += u; });
  });
  std::thread t2([&] {
    for (int i = 0; i < 2000; ++i) pool.run(16, [&](int64_t u, int) { b += u; });
  });
  t1.join();
  t2.join();
  EXPECT_EQ(a, 2000 * 120);
  EXPECT_EQ(b, 2000 * 120);
}

TEST(ThreadPool, ParallelForCoversTheRangeOnce) {
  for (int64_t n : {0, 1, 5, 100, 12345}) {
    for (int64_t grain : {1, 16, 1000}) {
      std::vector<std::atomic<int>> hit(static_cast<size_t>(n));
      parallel_for(n, grain, [&](int64_t begin, int64_t end) {
        EXPECT_LE(begin, end);
        for (int64_t i = begin; i < end; ++i) hit[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hit[static_cast<size_t>(i)], 1) << i << " of " << n;
    }
  }
}

}  // namespace
}  // namespace basalt
