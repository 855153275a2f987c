// SPDX-License-Identifier: MIT
// The HTTP server's threads: cpp-httplib serves a connection on one thread
// from start to end (a stream waits on it for its next token). Unlike
// httplib::ThreadPool, threads start only when connections need them (up to
// a maximum), and the one idle for the shortest time takes the next
// connection, so a few warm threads serve a light load and the rest are never
// touched. httplib's pool wakes its threads in turn: under steady load every
// one of its 512 threads ended up with stack pages of its own, and resident
// memory crept up for minutes (docs/PERFORMANCE.md 9.3).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace basalt::serve {

class HttpWorkers : public httplib::TaskQueue {
 public:
  explicit HttpWorkers(size_t max_threads) : max_(max_threads < 1 ? 1 : max_threads) {}
  ~HttpWorkers() override { shutdown(); }

  // A connection to serve: the most recently idle thread takes it, else a new
  // thread while there are fewer than the maximum, else it waits for the
  // first thread to finish its connection.
  void enqueue(std::function<void()> fn) override;
  // Lets the threads finish what they have and what waits, then joins them.
  void shutdown() override;
  size_t threads() const;       // started
  size_t idle_threads() const;  // waiting for a connection

 private:
  struct Idle {
    std::condition_variable cv;
    std::function<void()> job;
    bool stop = false;
  };
  void work(std::function<void()> job);

  const size_t max_;
  mutable std::mutex mutex_;
  std::vector<Idle*> idle_;  // the last one idle is taken first
  std::deque<std::function<void()>> waiting_;
  std::vector<std::thread> threads_;
  bool shutdown_ = false;
};

}  // namespace basalt::serve
