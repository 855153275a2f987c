// SPDX-License-Identifier: MIT
// WorkShares (cpu/work_shares.h): every unit runs exactly once, whoever runs
// it, and a thread that falls behind has its work taken over.
#include "cpu/work_shares.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace basalt {
namespace {

// Runs shares of the given sizes on one thread each: the owner of share
// `slow` sleeps on every unit. Returns, per share, who ran each unit.
std::vector<std::vector<int>> run_shares(const std::vector<int64_t>& sizes, int slow) {
  const int n = static_cast<int>(sizes.size());
  std::vector<std::vector<std::atomic<int>>> runs(n);
  std::vector<std::vector<int>> runner(n);
  for (int i = 0; i < n; ++i) {
    runs[i] = std::vector<std::atomic<int>>(sizes[i]);
    runner[i].assign(sizes[i], -1);
  }
  WorkShares shares(n);
  std::atomic<int> published{0};
  // Plain threads, not OpenMP: ThreadSanitizer sees their start and join (libgomp's barriers it cannot).
  auto body = [&](int me) {
    auto run = [&](int share, int64_t u) {
      runs[share][u].fetch_add(1);
      runner[share][u] = me;
      if (me == slow) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    };
    shares.publish(me, sizes[me], &runs[me]);  // ctx: which share the units belong to
    // matmul() has no barrier here (a thread that finds nothing published
    // just stops); the test waits so a thread that starts late still has its
    // units taken over.
    published.fetch_add(1);
    while (published.load() < n) std::this_thread::yield();
    for (int64_t u; (u = shares.take(me)) >= 0;) run(me, u);
    WorkShares::Stolen st;
    while (shares.steal(me, &st)) {
      const int owner = static_cast<int>(static_cast<const std::vector<std::atomic<int>>*>(st.ctx) - runs.data());
      for (int64_t u = st.u0; u < st.u1; ++u) run(owner, u);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(body, i);
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < n; ++i)
    for (int64_t u = 0; u < sizes[i]; ++u) EXPECT_EQ(runs[i][u].load(), 1) << "share " << i << " unit " << u;
  return runner;
}

TEST(WorkShares, EveryUnitRunsOnce) {
  for (int rep = 0; rep < 20; ++rep) {
    run_shares({100, 100}, -1);
    run_shares({0, 7, 1, 300}, -1);
  }
}

TEST(WorkShares, ASlowThreadsUnitsAreTakenOver) {
  const auto runner = run_shares({40, 40, 40}, 0);
  int taken = 0;
  for (int r : runner[0]) taken += r != 0;
  // Owner 0 sleeps 5 ms a unit; the others finish their own at once and take
  // half of what is left each time: all but a few of its units (at least
  // half even when the machine is loaded).
  EXPECT_GE(taken, 20);
}

TEST(WorkShares, RejectsThreadCountsOutOfRange) {
  EXPECT_ANY_THROW(WorkShares(0));
  EXPECT_ANY_THROW(WorkShares(WorkShares::kMaxThreads + 1));
}

}  // namespace
}  // namespace basalt
