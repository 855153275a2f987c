// SPDX-License-Identifier: MIT
// The HTTP threads (tools/serve/http_workers.h): started only as connections
// need them, the last idle one reused first, capped, and drained at shutdown.
#include "tools/serve/http_workers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

namespace basalt::serve {
namespace {

// Waits (bounded) until cond holds.
template <class Cond>
bool eventually(Cond cond) {
  for (int i = 0; i < 2000 && !cond(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return cond();
}

TEST(HttpWorkers, OneThreadServesConnectionsOneAfterAnother) {
  HttpWorkers w(64);
  std::mutex m;
  std::set<std::thread::id> ran_on;
  for (int i = 0; i < 50; ++i) {
    std::promise<void> done;
    w.enqueue([&] {
      {
        std::lock_guard<std::mutex> lock(m);
        ran_on.insert(std::this_thread::get_id());
      }
      done.set_value();
    });
    done.get_future().wait();
    // The thread parks itself idle just after the job: the next job finds it there.
    ASSERT_TRUE(eventually([&] { return w.idle_threads() == 1; }));
  }
  EXPECT_EQ(w.threads(), 1u);
  EXPECT_EQ(ran_on.size(), 1u);
}

TEST(HttpWorkers, AtMostTheMaximumAndWaitingConnectionsRun) {
  HttpWorkers w(2);
  std::promise<void> release_promise;
  std::shared_future<void> release = release_promise.get_future().share();
  std::atomic<int> started{0}, finished{0};
  for (int i = 0; i < 5; ++i)
    w.enqueue([&] {
      ++started;
      release.wait();
      ++finished;
    });
  ASSERT_TRUE(eventually([&] { return started == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(started, 2);  // three wait for a thread
  EXPECT_EQ(w.threads(), 2u);
  release_promise.set_value();
  EXPECT_TRUE(eventually([&] { return finished == 5; }));
  w.shutdown();
  EXPECT_EQ(finished, 5);
}

TEST(HttpWorkers, ShutdownFinishesWhatWaits) {
  std::atomic<int> finished{0};
  {
    HttpWorkers w(1);
    for (int i = 0; i < 10; ++i)
      w.enqueue([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++finished;
      });
    w.shutdown();
    EXPECT_EQ(finished, 10);
  }
}

}  // namespace
}  // namespace basalt::serve
